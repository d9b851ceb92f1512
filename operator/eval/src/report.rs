//! What `tarsy eval` prints: a line per case as it finishes (with the
//! failed checks under it), a summary table, or one JSON object.

use serde::Serialize;

use crate::run::{CaseResult, Tokens};

/// Totals over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Cases run.
    pub cases: usize,
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Tool calls made.
    pub tool_calls: usize,
    /// Tool calls that failed.
    pub tool_errors: usize,
    /// Tokens of the investigations and the judges.
    pub tokens: Tokens,
    /// Wall time of every case.
    pub duration_ms: u64,
}

/// A whole run, as `--json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Every case, in run order.
    pub cases: Vec<CaseResult>,
    /// Totals.
    pub summary: Summary,
}

impl Report {
    /// The report of `cases`.
    pub fn new(cases: Vec<CaseResult>) -> Self {
        let passed = cases.iter().filter(|c| c.passed).count();
        let summary = Summary {
            cases: cases.len(),
            passed,
            failed: cases.len() - passed,
            tool_calls: cases.iter().map(|c| c.tool_calls.len()).sum(),
            tool_errors: cases.iter().map(|c| c.tool_errors).sum(),
            tokens: cases.iter().fold(Tokens::default(), |t, c| {
                t.plus(c.tokens).plus(c.judge_tokens)
            }),
            duration_ms: cases.iter().map(|c| c.duration_ms).sum(),
        };
        Report { cases, summary }
    }

    /// Whether every case passed.
    pub fn passed(&self) -> bool {
        self.summary.failed == 0 && self.summary.cases > 0
    }

    /// The summary table.
    pub fn table(&self) -> String {
        let width = self
            .cases
            .iter()
            .map(|c| c.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(4);
        // The scoring judge's column, when it was asked (`--judge scoring`).
        let scored = self.cases.iter().any(|c| c.score.is_some());
        let score_header = if scored { "  score" } else { "" };
        let mut out = format!(
            "{:<width$}  {:<6}  {:>5}  {:>6}  {:>9}  {:>7}{score_header}\n",
            "case", "result", "tools", "failed", "tokens", "time"
        );
        for c in &self.cases {
            let score = if scored {
                format!("  {:>5}", score_cell(c))
            } else {
                String::new()
            };
            out.push_str(&format!(
                "{:<width$}  {:<6}  {:>5}  {:>6}  {:>9}  {:>7}{score}\n",
                c.name,
                verdict(c),
                c.tool_calls.len(),
                c.tool_errors,
                thousands(c.tokens.plus(c.judge_tokens).total()),
                seconds(c.duration_ms),
            ));
        }
        let s = &self.summary;
        out.push_str(&format!(
            "{:<width$}  {:<6}  {:>5}  {:>6}  {:>9}  {:>7}\n",
            "total",
            format!("{}/{}", s.passed, s.cases),
            s.tool_calls,
            s.tool_errors,
            thousands(s.tokens.total()),
            seconds(s.duration_ms),
        ));
        out.push_str(&format!(
            "{} case(s): {} passed, {} failed\n",
            s.cases, s.passed, s.failed
        ));
        out
    }
}

fn verdict(c: &CaseResult) -> &'static str {
    if c.passed { "PASS" } else { "FAIL" }
}

/// The line printed when a case finishes, with its failed checks (and the
/// judge's reason) under it.
pub fn case_lines(c: &CaseResult) -> String {
    let mut out = format!(
        "{}  {}  ({} tool call(s), {} failed; {} tokens; {})\n",
        verdict(c),
        c.name,
        c.tool_calls.len(),
        c.tool_errors,
        thousands(c.tokens.plus(c.judge_tokens).total()),
        seconds(c.duration_ms),
    );
    if let Some(e) = &c.error {
        out.push_str(&format!("      ! {e}\n"));
    }
    if let Some(score) = &c.score {
        out.push_str(&format!("      ★ {}\n", score_line(score)));
    }
    for check in &c.checks {
        let shown = !check.passed || check.kind == "judge";
        if !shown {
            continue;
        }
        let mark = if check.passed { "✓" } else { "✗" };
        let detail = check
            .detail
            .as_deref()
            .map(|d| format!(": {}", one_line(d, 200)))
            .unwrap_or_default();
        out.push_str(&format!(
            "      {mark} {} {:?}{detail}\n",
            check.kind, check.name
        ));
    }
    out
}

/// The scoring judge's verdict in a line: score, verdict, tags, missing
/// tools; or why there is none.
fn score_line(score: &crate::CaseScore) -> String {
    match score.score {
        Some(n) => {
            let mut line = format!(
                "score {n}/100 ({})",
                score.outcome.as_deref().unwrap_or("no verdict")
            );
            if !score.failure_tags.is_empty() {
                line.push_str(&format!(
                    " · failure tags: {}",
                    score.failure_tags.join(", ")
                ));
            }
            if !score.missing_tools.is_empty() {
                line.push_str(&format!(
                    " · missing tools: {}",
                    one_line(&score.missing_tools.join("; "), 160)
                ));
            }
            line
        }
        None => format!(
            "not scored: {}",
            one_line(score.error.as_deref().unwrap_or("no score"), 200)
        ),
    }
}

/// A case's score in the table (`-` when not scored).
fn score_cell(c: &CaseResult) -> String {
    c.score
        .as_ref()
        .and_then(|s| s.score)
        .map_or_else(|| "-".to_string(), |n| n.to_string())
}

fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        joined
    } else {
        let cut: String = joined.chars().take(max).collect();
        format!("{cut}…")
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// `12,345`.
fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Check;

    fn result(name: &str, passed: bool) -> CaseResult {
        CaseResult {
            name: name.into(),
            passed,
            status: Some("completed".into()),
            session_id: Some("s".into()),
            duration_ms: 1500,
            tokens: Tokens {
                input: 10_000,
                output: 2_345,
                thinking: 0,
            },
            judge_tokens: Tokens::default(),
            tool_calls: Vec::new(),
            tool_errors: 0,
            checks: vec![Check {
                kind: "required".into(),
                name: "names the tag".into(),
                passed,
                detail: (!passed).then(|| "no \"v3.8.1\"".to_owned()),
            }],
            error: None,
            analysis: String::new(),
            score: None,
        }
    }

    #[test]
    fn failed_checks_are_listed_under_their_case() {
        assert_eq!(
            case_lines(&result("image-pull", false)),
            "FAIL  image-pull  (0 tool call(s), 0 failed; 12,345 tokens; 1.5s)\n      ✗ required \"names the tag\": no \"v3.8.1\"\n"
        );
        assert_eq!(case_lines(&result("oom", true)).lines().count(), 1);
    }

    #[test]
    fn the_table_totals_the_run() {
        let report = Report::new(vec![result("oom", true), result("image-pull", false)]);
        assert!(!report.passed());
        let table = report.table();
        assert!(table.contains("total       1/2"), "{table}");
        assert!(table.contains("24,690"), "{table}");
        assert!(
            table.ends_with("2 case(s): 1 passed, 1 failed\n"),
            "{table}"
        );
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
