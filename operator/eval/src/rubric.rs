//! The expected findings of a case and how an investigation is graded
//! against them: required and forbidden statements matched by keywords or a
//! regular expression, the tools that must have been called, how many tool
//! errors are tolerated, and an optional LLM judge.

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

/// `expect:` of a case, as written.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RubricSpec {
    /// The session status the investigation must end in.
    #[serde(default = "default_status")]
    pub status: String,
    /// Statements the final analysis or the executive summary must make.
    #[serde(default)]
    pub required: Vec<StatementSpec>,
    /// Statements neither may make.
    #[serde(default)]
    pub forbidden: Vec<StatementSpec>,
    /// Tools (`server.tool`) the agents must have called.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Most tool calls that may fail (default: no limit).
    #[serde(default)]
    pub max_tool_errors: Option<usize>,
    /// An LLM judge of the analysis, when wanted.
    #[serde(default)]
    pub judge: Option<JudgeSpec>,
}

fn default_status() -> String {
    "completed".into()
}

/// One statement: it is made when every condition given holds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatementSpec {
    /// What the statement says, for people reading the result.
    pub name: String,
    /// Every keyword appears (case-insensitive).
    #[serde(default)]
    pub all: Vec<String>,
    /// At least one keyword appears (case-insensitive).
    #[serde(default)]
    pub any: Vec<String>,
    /// The regular expression matches (case-insensitive).
    #[serde(default)]
    pub regex: Option<String>,
}

/// The LLM judge of a case.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeSpec {
    /// What a correct analysis establishes, in prose.
    pub criteria: String,
    /// The provider that judges (default: the investigation's).
    #[serde(default)]
    pub provider: Option<String>,
}

/// A statement ready to match.
#[derive(Debug, Clone)]
pub struct Statement {
    /// What it says.
    pub name: String,
    all: Vec<String>,
    any: Vec<String>,
    regex: Option<Regex>,
}

/// Compiled expectations.
#[derive(Debug, Clone)]
pub struct Rubric {
    /// Required session status.
    pub status: String,
    /// Required statements.
    pub required: Vec<Statement>,
    /// Forbidden statements.
    pub forbidden: Vec<Statement>,
    /// Tools that must be called.
    pub tools: Vec<String>,
    /// Tool error budget.
    pub max_tool_errors: Option<usize>,
    /// The judge.
    pub judge: Option<JudgeSpec>,
}

/// Why a rubric does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expect.{at}: {problem}")]
pub struct RubricError {
    /// Where (`required[1].regex`).
    pub at: String,
    /// What is wrong.
    pub problem: String,
}

impl Statement {
    fn compile(spec: &StatementSpec, at: &str) -> Result<Self, RubricError> {
        let error = |field: &str, problem: String| RubricError {
            at: format!("{at}{field}"),
            problem,
        };
        if spec.name.trim().is_empty() {
            return Err(error(".name", "must not be empty".into()));
        }
        if spec.all.is_empty() && spec.any.is_empty() && spec.regex.is_none() {
            return Err(error(
                "",
                format!("statement {:?} gives none of all, any or regex", spec.name),
            ));
        }
        for (field, list) in [(".all", &spec.all), (".any", &spec.any)] {
            if list.iter().any(|k| k.trim().is_empty()) {
                return Err(error(field, "keywords must not be empty".into()));
            }
        }
        let regex = spec
            .regex
            .as_deref()
            .map(|r| {
                RegexBuilder::new(r)
                    .case_insensitive(true)
                    .build()
                    .map_err(|e| error(".regex", e.to_string()))
            })
            .transpose()?;
        Ok(Statement {
            name: spec.name.clone(),
            all: spec.all.iter().map(|k| k.to_lowercase()).collect(),
            any: spec.any.iter().map(|k| k.to_lowercase()).collect(),
            regex,
        })
    }

    /// `None` when `text` makes the statement; else what is missing.
    pub fn missing(&self, text: &str) -> Option<String> {
        let lower = text.to_lowercase();
        let absent: Vec<&str> = self
            .all
            .iter()
            .filter(|k| !lower.contains(k.as_str()))
            .map(String::as_str)
            .collect();
        let mut missing = Vec::new();
        if !absent.is_empty() {
            missing.push(format!("no {}", quoted(&absent, " and ")));
        }
        if !self.any.is_empty() && !self.any.iter().any(|k| lower.contains(k.as_str())) {
            missing.push(format!("none of {}", quoted(&self.any, ", ")));
        }
        if let Some(r) = &self.regex
            && !r.is_match(text)
        {
            missing.push(format!("no match for /{}/", r.as_str()));
        }
        (!missing.is_empty()).then(|| missing.join("; "))
    }

    /// What in `text` makes the statement (for forbidden ones).
    pub fn evidence(&self, text: &str) -> String {
        let lower = text.to_lowercase();
        let mut found: Vec<String> = self
            .all
            .iter()
            .chain(&self.any)
            .filter(|k| lower.contains(k.as_str()))
            .map(|k| format!("{k:?}"))
            .collect();
        if let Some(m) = self.regex.as_ref().and_then(|r| r.find(text)) {
            found.push(format!("{:?}", m.as_str()));
        }
        found.join(", ")
    }
}

fn quoted<S: AsRef<str>>(words: &[S], sep: &str) -> String {
    words
        .iter()
        .map(|w| format!("{:?}", w.as_ref()))
        .collect::<Vec<_>>()
        .join(sep)
}

impl Rubric {
    /// Compiles `spec`; errors name the place.
    pub fn compile(spec: &RubricSpec) -> Result<Self, RubricError> {
        let compile_all = |list: &[StatementSpec], field: &str| {
            list.iter()
                .enumerate()
                .map(|(i, s)| Statement::compile(s, &format!("{field}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
        };
        if spec.required.is_empty() && spec.judge.is_none() {
            return Err(RubricError {
                at: "required".into(),
                problem: "a case needs at least one required statement or a judge".into(),
            });
        }
        for (i, tool) in spec.tools.iter().enumerate() {
            if tool
                .split_once('.')
                .is_none_or(|(s, t)| s.is_empty() || t.is_empty())
            {
                return Err(RubricError {
                    at: format!("tools[{i}]"),
                    problem: format!("{tool:?} is not server.tool"),
                });
            }
        }
        if let Some(judge) = &spec.judge
            && judge.criteria.trim().is_empty()
        {
            return Err(RubricError {
                at: "judge.criteria".into(),
                problem: "must not be empty".into(),
            });
        }
        Ok(Rubric {
            status: spec.status.clone(),
            required: compile_all(&spec.required, "required")?,
            forbidden: compile_all(&spec.forbidden, "forbidden")?,
            tools: spec.tools.clone(),
            max_tool_errors: spec.max_tool_errors,
            judge: spec.judge.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(all: &[&str], any: &[&str], regex: Option<&str>) -> Statement {
        Statement::compile(
            &StatementSpec {
                name: "s".into(),
                all: all.iter().map(|s| s.to_string()).collect(),
                any: any.iter().map(|s| s.to_string()).collect(),
                regex: regex.map(str::to_owned),
            },
            "required[0]",
        )
        .unwrap()
    }

    #[test]
    fn every_condition_must_hold_case_insensitively() {
        let s = statement(
            &["OOMKilled", "256mi"],
            &["leak", "preload"],
            Some(r"exit code\s+137"),
        );
        assert_eq!(
            s.missing("oomkilled at the 256Mi limit, exit code 137, full PRELOAD"),
            None
        );
        assert_eq!(
            s.missing("OOMKilled, exit code 137, preload"),
            Some("no \"256mi\"".into())
        );
        assert_eq!(
            s.missing("OOMKilled 256Mi"),
            Some("none of \"leak\", \"preload\"; no match for /exit code\\s+137/".into())
        );
        assert_eq!(s.evidence("a leak, OOMKilled"), "\"oomkilled\", \"leak\"");
    }

    #[test]
    fn bad_rubrics_are_refused_by_place() {
        let mut spec = RubricSpec {
            status: "completed".into(),
            required: vec![StatementSpec {
                name: "x".into(),
                regex: Some("(".into()),
                ..StatementSpec::default()
            }],
            ..RubricSpec::default()
        };
        let e = Rubric::compile(&spec).unwrap_err();
        assert_eq!(e.at, "required[0].regex");
        spec.required[0].regex = None;
        let e = Rubric::compile(&spec).unwrap_err();
        assert_eq!(
            e.to_string(),
            "expect.required[0]: statement \"x\" gives none of all, any or regex"
        );
        spec.required.clear();
        assert!(Rubric::compile(&spec).is_err(), "nothing to check");
        spec.required.push(StatementSpec {
            name: "y".into(),
            any: vec!["a".into()],
            ..StatementSpec::default()
        });
        spec.tools = vec!["pods_log".into()];
        assert_eq!(Rubric::compile(&spec).unwrap_err().at, "tools[0]");
    }
}
