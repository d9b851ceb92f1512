//! The two built-in tools every investigating agent gets, served by TARSy
//! itself (server `tarsy`) and recorded like MCP tool calls: recall
//! memories, and search past sessions. This module holds their definitions,
//! the reading of their arguments and the rendering of their results; the
//! store answers the queries.
//!
//! Arguments are read leniently: a function-calling model sends a JSON
//! object, a ReAct agent often sends the query as plain text. What cannot
//! be read is an error worded for the model, which sees it and retries.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tarsy_core::{SessionStatus, ToolDefinition};

use crate::inject::{ShownMemory, bullet};
use crate::text;

/// The tool server name of the built-in tools.
pub const SERVER: &str = "tarsy";

/// Canonical name of the memory recall tool.
pub const RECALL_TOOL: &str = "tarsy.recall_past_investigations";

/// Canonical name of the past session search tool.
pub const SEARCH_TOOL: &str = "tarsy.search_past_sessions";

/// Results returned when the model gives no limit.
pub const DEFAULT_LIMIT: u32 = 5;

/// The most results one call returns.
pub const MAX_LIMIT: u32 = 10;

/// How far back a session search looks when the model does not say.
pub const DEFAULT_DAYS_BACK: u32 = 30;

/// The farthest back a session search looks.
pub const MAX_DAYS_BACK: u32 = 365;

/// The longest query kept, in characters.
pub const MAX_QUERY_CHARS: usize = 500;

/// The rendered past sessions stay under this many bytes.
pub const MAX_SESSIONS_BYTES: usize = 4_000;

/// One of the built-in tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinTool {
    /// `tarsy.recall_past_investigations`.
    RecallPastInvestigations,
    /// `tarsy.search_past_sessions`.
    SearchPastSessions,
}

impl BuiltinTool {
    /// Both tools.
    pub const ALL: [BuiltinTool; 2] = [
        BuiltinTool::RecallPastInvestigations,
        BuiltinTool::SearchPastSessions,
    ];

    /// The canonical `tarsy.tool` name.
    pub const fn name(self) -> &'static str {
        match self {
            BuiltinTool::RecallPastInvestigations => RECALL_TOOL,
            BuiltinTool::SearchPastSessions => SEARCH_TOOL,
        }
    }

    /// The tool a call names, in its canonical spelling
    /// (`tarsy.recall_past_investigations`) or the function-calling one
    /// (`tarsy__recall_past_investigations`); `None` for any other tool.
    pub fn from_name(name: &str) -> Option<BuiltinTool> {
        let name = name.trim();
        let tool = name
            .strip_prefix("tarsy.")
            .or_else(|| name.strip_prefix("tarsy__"))?;
        BuiltinTool::ALL
            .into_iter()
            .find(|t| t.name().strip_prefix("tarsy.") == Some(tool))
    }
}

/// The definitions offered to every investigating agent.
pub fn definitions() -> Vec<ToolDefinition> {
    let limit = json!({
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_LIMIT,
        "default": DEFAULT_LIMIT,
        "description": "How many results to return.",
    });
    vec![
        ToolDefinition {
            name: RECALL_TOOL.to_string(),
            description: "Recall lessons TARSy learned in earlier investigations in this \
                          environment: facts about it, what happened, how to investigate. \
                          Give a short description of what you are looking for. Lessons \
                          may be outdated: check one with the other tools before relying \
                          on it."
                .to_string(),
            parameters_schema: json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "What to recall, in a few words (e.g. \"orders pods OOMKilled\").",
                    },
                    "limit": limit,
                },
                "required": ["query"],
                "additionalProperties": false,
            })
            .to_string(),
        },
        ToolDefinition {
            name: SEARCH_TOOL.to_string(),
            description: "Search past investigation sessions in this environment: their \
                          alerts and final analyses. Use it to see whether a similar alert \
                          happened before and what it turned out to be."
                .to_string(),
            parameters_schema: json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Words to look for in past alerts and analyses.",
                    },
                    "alert_type": {
                        "type": "string",
                        "description": "Only sessions of this alert type.",
                    },
                    "days_back": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_DAYS_BACK,
                        "default": DEFAULT_DAYS_BACK,
                        "description": "How many days back to search.",
                    },
                    "limit": limit,
                },
                "required": ["query"],
                "additionalProperties": false,
            })
            .to_string(),
        },
    ]
}

/// The arguments of `tarsy.recall_past_investigations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallArgs {
    /// What to recall: trimmed, non-empty, at most [`MAX_QUERY_CHARS`].
    pub query: String,
    /// 1–[`MAX_LIMIT`].
    pub limit: u32,
}

/// The arguments of `tarsy.search_past_sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchArgs {
    /// Words to look for: trimmed, non-empty, at most [`MAX_QUERY_CHARS`].
    pub query: String,
    /// Only sessions of this alert type.
    pub alert_type: Option<String>,
    /// 1–[`MAX_DAYS_BACK`].
    pub days_back: u32,
    /// 1–[`MAX_LIMIT`].
    pub limit: u32,
}

/// Why a built-in tool's arguments could not be read; the message is shown
/// to the model, so it says what to send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolArgsError {
    /// No query, or an empty one.
    #[error(
        "missing \"query\": say in a few words what to look for, e.g. {{\"query\": \"orders pods OOMKilled\"}}"
    )]
    MissingQuery,
    /// Text that starts like JSON but is not.
    #[error(
        "the arguments are not valid JSON ({0}); send a JSON object such as {{\"query\": \"orders pods OOMKilled\"}} or just the query as plain text"
    )]
    InvalidJson(String),
    /// JSON that is not an object (a list, a number).
    #[error(
        "the arguments are {0}; send a JSON object such as {{\"query\": \"orders pods OOMKilled\"}} or just the query as plain text"
    )]
    NotAnObject(&'static str),
    /// A field of the wrong type.
    #[error("\"{field}\" must be {expected}, not {found}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it was.
        found: String,
    },
}

/// Reads the arguments of `tarsy.recall_past_investigations`: a JSON object,
/// or the query as plain text. The limit is brought into 1–[`MAX_LIMIT`].
pub fn parse_recall_args(raw: &str) -> Result<RecallArgs, ToolArgsError> {
    match arguments(raw)? {
        Arguments::Query(query) => Ok(RecallArgs {
            query,
            limit: DEFAULT_LIMIT,
        }),
        Arguments::Object(fields) => Ok(RecallArgs {
            query: query(&fields)?,
            limit: limit(&fields)?,
        }),
    }
}

/// Reads the arguments of `tarsy.search_past_sessions`: a JSON object, or
/// the query as plain text. `days_back` is brought into 1–[`MAX_DAYS_BACK`]
/// and the limit into 1–[`MAX_LIMIT`]; an empty alert type is none.
pub fn parse_search_args(raw: &str) -> Result<SearchArgs, ToolArgsError> {
    match arguments(raw)? {
        Arguments::Query(query) => Ok(SearchArgs {
            query,
            alert_type: None,
            days_back: DEFAULT_DAYS_BACK,
            limit: DEFAULT_LIMIT,
        }),
        Arguments::Object(fields) => {
            let alert_type = match get(&fields, "alert_type") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(text::clip(s, 200)).filter(|s| !s.is_empty()),
                Some(other) => {
                    return Err(ToolArgsError::WrongType {
                        field: "alert_type",
                        expected: "a string",
                        found: kind(other),
                    });
                }
            };
            Ok(SearchArgs {
                query: query(&fields)?,
                alert_type,
                days_back: bounded(
                    &fields,
                    "days_back",
                    DEFAULT_DAYS_BACK,
                    MAX_DAYS_BACK,
                    "an integer from 1 to 365",
                )?,
                limit: limit(&fields)?,
            })
        }
    }
}

/// What a call's arguments are, before the fields are read.
enum Arguments {
    /// A plain-text query.
    Query(String),
    /// A JSON object.
    Object(Map<String, Value>),
}

fn arguments(raw: &str) -> Result<Arguments, ToolArgsError> {
    let raw = unfence(raw.trim());
    if raw.is_empty() {
        return Err(ToolArgsError::MissingQuery);
    }
    if raw.starts_with(['{', '[']) || raw.starts_with('"') {
        return match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(fields)) => Ok(Arguments::Object(fields)),
            Ok(Value::String(s)) => plain(&s),
            Ok(other) => Err(ToolArgsError::NotAnObject(kind_static(&other))),
            // A quoted query with more text after it is still a query.
            Err(_) if raw.starts_with('"') => plain(raw),
            Err(e) => Err(ToolArgsError::InvalidJson(e.to_string())),
        };
    }
    plain(raw)
}

/// A plain-text query: a `query:` or `query=` label and surrounding quotes
/// dropped, whitespace collapsed, clipped.
fn plain(raw: &str) -> Result<Arguments, ToolArgsError> {
    let mut q = raw.trim();
    if q.len() >= 6 && q.is_char_boundary(5) && q[..5].eq_ignore_ascii_case("query") {
        let rest = q[5..].trim_start();
        if let Some(rest) = rest.strip_prefix([':', '=']) {
            q = rest;
        }
    }
    let q = q.trim().trim_matches(['"', '\'', '`']);
    let q = text::clip(&text::one_line(q), MAX_QUERY_CHARS);
    if q.is_empty() {
        Err(ToolArgsError::MissingQuery)
    } else {
        Ok(Arguments::Query(q))
    }
}

/// The text inside a ```` ``` ```` fence, when the whole text is fenced.
fn unfence(raw: &str) -> &str {
    let Some(inner) = raw.strip_prefix("```").and_then(|r| r.strip_suffix("```")) else {
        return raw;
    };
    let inner = inner.trim_start();
    let inner = inner
        .strip_prefix("json")
        .or_else(|| inner.strip_prefix("JSON"))
        .unwrap_or(inner);
    inner.trim()
}

/// A field, its name in any case.
fn get<'a>(fields: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    fields
        .iter()
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

fn query(fields: &Map<String, Value>) -> Result<String, ToolArgsError> {
    match get(fields, "query") {
        Some(Value::String(s)) => {
            let q = text::clip(&text::one_line(s), MAX_QUERY_CHARS);
            if q.is_empty() {
                Err(ToolArgsError::MissingQuery)
            } else {
                Ok(q)
            }
        }
        None | Some(Value::Null) => Err(ToolArgsError::MissingQuery),
        Some(other) => Err(ToolArgsError::WrongType {
            field: "query",
            expected: "a string",
            found: kind(other),
        }),
    }
}

/// The `limit` field, brought into 1–[`MAX_LIMIT`].
fn limit(fields: &Map<String, Value>) -> Result<u32, ToolArgsError> {
    bounded(
        fields,
        "limit",
        DEFAULT_LIMIT,
        MAX_LIMIT,
        "an integer from 1 to 10",
    )
}

/// An integer field brought into 1–`max`: a number (rounded) or a numeric
/// string; `default` when absent.
fn bounded(
    fields: &Map<String, Value>,
    name: &'static str,
    default: u32,
    max: u32,
    expected: &'static str,
) -> Result<u32, ToolArgsError> {
    let value = match get(fields, name) {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(default),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    };
    match value.filter(|x| x.is_finite()) {
        // The cast saturates; the clamp keeps it in range.
        Some(x) => Ok((x.round().clamp(1.0, f64::from(max))) as u32),
        None => Err(ToolArgsError::WrongType {
            field: name,
            expected,
            found: get(fields, name).map(kind).unwrap_or_default(),
        }),
    }
}

/// What a JSON value is, with a short view of it, for error messages.
fn kind(value: &Value) -> String {
    let shown = text::clip(&value.to_string(), 40);
    format!("{} ({shown})", kind_static(value))
}

fn kind_static(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The recall tool's result: the memories found, each with its provenance,
/// or a sentence saying none was found so the agent moves on.
pub fn render_recalled(memories: &[ShownMemory]) -> String {
    if memories.is_empty() {
        return "No relevant memories from past investigations were found. Go on with \
                the other tools."
            .to_string();
    }
    let mut s = String::from(
        "Memories from past investigations in this environment (they may be outdated or \
         wrong: check one with the other tools before relying on it):\n",
    );
    for m in memories.iter().take(MAX_LIMIT as usize) {
        let _ = writeln!(s, "- {}", bullet(m));
    }
    s
}

/// One past session that matched a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PastSessionHit {
    /// The session's id.
    pub session_id: String,
    /// Its alert's type.
    pub alert_type: String,
    /// Where it ended (or stands).
    pub status: SessionStatus,
    /// Whole days since it was created.
    pub age_days: u32,
    /// The judge's score, when scored.
    pub score: Option<u8>,
    /// The matching part of its alert or analysis.
    pub excerpt: String,
}

/// The session search tool's result: one summary per session, excerpts
/// clipped so the whole stays under [`MAX_SESSIONS_BYTES`]; or a sentence
/// saying none matched so the agent moves on.
pub fn render_past_sessions(hits: &[PastSessionHit]) -> String {
    if hits.is_empty() {
        return "No past sessions matched. Go on with the other tools.".to_string();
    }
    let hits = &hits[..hits.len().min(MAX_LIMIT as usize)];
    // Share the room between the excerpts, within sane bounds.
    let excerpt_chars = (3_000 / hits.len()).clamp(150, 700);
    let mut s = String::from("Past sessions that matched, most relevant first:\n");
    for (i, hit) in hits.iter().enumerate() {
        let score = match hit.score {
            Some(score) => format!("score {score}/100"),
            None => "not scored".to_string(),
        };
        let mut entry = format!(
            "\n{}. session {} ({}, {}, {}, {})\n",
            i + 1,
            text::clip(&text::one_line(&hit.session_id), 80),
            text::clip(&text::one_line(&hit.alert_type), 80),
            hit.status,
            text::ago(hit.age_days),
            score,
        );
        let excerpt = text::clip(&text::one_line(&hit.excerpt), excerpt_chars);
        if !excerpt.is_empty() {
            let _ = writeln!(entry, "   {excerpt}");
        }
        let left = hits.len() - i;
        let note = format!("\n[… {left} more sessions not shown]\n");
        if s.len() + entry.len() > MAX_SESSIONS_BYTES - note.len() {
            s.push_str(&note);
            break;
        }
        s.push_str(&entry);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inject::tests::memory;
    use tarsy_core::{MemoryCategory, MemoryValence};

    #[test]
    fn both_spellings_name_the_builtin_tools() {
        assert_eq!(
            BuiltinTool::from_name("tarsy.recall_past_investigations"),
            Some(BuiltinTool::RecallPastInvestigations)
        );
        assert_eq!(
            BuiltinTool::from_name("tarsy__recall_past_investigations"),
            Some(BuiltinTool::RecallPastInvestigations)
        );
        assert_eq!(
            BuiltinTool::from_name("tarsy__search_past_sessions"),
            Some(BuiltinTool::SearchPastSessions)
        );
        assert_eq!(BuiltinTool::from_name("tarsy.other"), None);
        assert_eq!(
            BuiltinTool::from_name("kubernetes.search_past_sessions"),
            None
        );
        assert_eq!(BuiltinTool::from_name("search_past_sessions"), None);
        for t in BuiltinTool::ALL {
            assert_eq!(BuiltinTool::from_name(t.name()), Some(t));
            assert!(t.name().starts_with(&format!("{SERVER}.")));
        }
    }

    #[test]
    fn definitions_carry_json_schemas() {
        let defs = definitions();
        assert_eq!(defs.len(), 2);
        assert_eq!(defs[0].name, RECALL_TOOL);
        assert_eq!(defs[1].name, SEARCH_TOOL);
        let recall: Value = serde_json::from_str(&defs[0].parameters_schema).unwrap();
        assert_eq!(recall["required"], json!(["query"]));
        assert_eq!(recall["properties"]["query"]["type"], "string");
        assert_eq!(recall["properties"]["limit"]["maximum"], 10);
        assert_eq!(recall["properties"]["limit"]["default"], 5);
        let search: Value = serde_json::from_str(&defs[1].parameters_schema).unwrap();
        assert_eq!(search["required"], json!(["query"]));
        assert_eq!(search["properties"]["alert_type"]["type"], "string");
        assert_eq!(search["properties"]["days_back"]["minimum"], 1);
        assert_eq!(search["properties"]["days_back"]["maximum"], 365);
        assert_eq!(search["properties"]["days_back"]["default"], 30);
        assert_eq!(search["properties"]["limit"]["minimum"], 1);
        assert!(defs.iter().all(|d| !d.description.is_empty()));
    }

    #[test]
    fn recall_args_from_json() {
        assert_eq!(
            parse_recall_args(r#"{"query": " orders  OOM ", "limit": 3}"#),
            Ok(RecallArgs {
                query: "orders OOM".into(),
                limit: 3
            })
        );
        assert_eq!(
            parse_recall_args(r#"{"query": "x"}"#).unwrap().limit,
            DEFAULT_LIMIT
        );
        assert_eq!(
            parse_recall_args(r#"{"query": "x", "limit": 50}"#)
                .unwrap()
                .limit,
            10
        );
        assert_eq!(
            parse_recall_args(r#"{"query": "x", "limit": 0}"#)
                .unwrap()
                .limit,
            1
        );
        assert_eq!(
            parse_recall_args(r#"{"query": "x", "limit": -4}"#)
                .unwrap()
                .limit,
            1
        );
        assert_eq!(
            parse_recall_args(r#"{"query": "x", "limit": "7"}"#)
                .unwrap()
                .limit,
            7
        );
        assert_eq!(
            parse_recall_args(r#"{"query": "x", "limit": 2.6}"#)
                .unwrap()
                .limit,
            3
        );
        assert_eq!(
            parse_recall_args(r#"{"query": "x", "limit": null}"#)
                .unwrap()
                .limit,
            5
        );
        assert_eq!(
            parse_recall_args(r#"{"Query": "x", "extra": 1}"#)
                .unwrap()
                .query,
            "x"
        );
        assert_eq!(
            parse_recall_args("```json\n{\"query\": \"fenced\"}\n```")
                .unwrap()
                .query,
            "fenced"
        );
    }

    #[test]
    fn recall_args_from_plain_text() {
        for raw in [
            "orders pods OOMKilled",
            "  orders pods OOMKilled\n",
            "\"orders pods OOMKilled\"",
            "query: orders pods OOMKilled",
            "Query=\"orders pods OOMKilled\"",
            "'orders pods OOMKilled'",
        ] {
            assert_eq!(
                parse_recall_args(raw),
                Ok(RecallArgs {
                    query: "orders pods OOMKilled".into(),
                    limit: DEFAULT_LIMIT
                }),
                "{raw:?}"
            );
        }
        // A quoted query followed by more text is still a query.
        assert_eq!(
            parse_recall_args("\"oom\" in shop").unwrap().query,
            "oom\" in shop"
        );
        // Only a label is dropped, not a word that starts like one.
        assert_eq!(
            parse_recall_args("queryset slow").unwrap().query,
            "queryset slow"
        );
        let long = "q".repeat(2_000);
        assert_eq!(
            parse_recall_args(&long).unwrap().query.chars().count(),
            MAX_QUERY_CHARS + 1
        );
    }

    #[test]
    fn unreadable_args_say_what_to_send() {
        assert_eq!(parse_recall_args("   "), Err(ToolArgsError::MissingQuery));
        assert_eq!(
            parse_recall_args("query:"),
            Err(ToolArgsError::MissingQuery)
        );
        assert_eq!(parse_recall_args("{}"), Err(ToolArgsError::MissingQuery));
        assert_eq!(
            parse_recall_args(r#"{"query": "  "}"#),
            Err(ToolArgsError::MissingQuery)
        );
        assert_eq!(
            parse_recall_args(r#"{"limit": 3}"#)
                .unwrap_err()
                .to_string(),
            "missing \"query\": say in a few words what to look for, e.g. {\"query\": \"orders pods OOMKilled\"}"
        );
        let e = parse_recall_args("{query: oom}").unwrap_err();
        assert!(matches!(e, ToolArgsError::InvalidJson(_)), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("the arguments are not valid JSON (key must be a string")
        );
        assert!(e.to_string().ends_with("or just the query as plain text"));
        assert_eq!(
            parse_recall_args(r#"{"query": "x",}"#)
                .map_err(|e| matches!(e, ToolArgsError::InvalidJson(_))),
            Err(true)
        );
        assert_eq!(
            parse_recall_args(r#"["oom"]"#),
            Err(ToolArgsError::NotAnObject("a list"))
        );
        assert_eq!(
            parse_recall_args(r#"{"query": 42}"#)
                .unwrap_err()
                .to_string(),
            "\"query\" must be a string, not a number (42)"
        );
        assert_eq!(
            parse_recall_args(r#"{"query": "x", "limit": "many"}"#)
                .unwrap_err()
                .to_string(),
            "\"limit\" must be an integer from 1 to 10, not a string (\"many\")"
        );
        assert_eq!(
            parse_search_args(r#"{"query": "x", "days_back": [1]}"#)
                .unwrap_err()
                .to_string(),
            "\"days_back\" must be an integer from 1 to 365, not a list ([1])"
        );
        assert_eq!(
            parse_search_args(r#"{"query": "x", "alert_type": 3}"#)
                .unwrap_err()
                .to_string(),
            "\"alert_type\" must be a string, not a number (3)"
        );
    }

    #[test]
    fn search_args_from_json_and_text() {
        assert_eq!(
            parse_search_args(
                r#"{"query": "disk full", "alert_type": " node-disk ", "days_back": 1000, "limit": 2}"#
            ),
            Ok(SearchArgs {
                query: "disk full".into(),
                alert_type: Some("node-disk".into()),
                days_back: 365,
                limit: 2,
            })
        );
        assert_eq!(
            parse_search_args(r#"{"query": "disk full", "alert_type": "", "days_back": 0}"#),
            Ok(SearchArgs {
                query: "disk full".into(),
                alert_type: None,
                days_back: 1,
                limit: DEFAULT_LIMIT,
            })
        );
        assert_eq!(
            parse_search_args("disk full on node-3"),
            Ok(SearchArgs {
                query: "disk full on node-3".into(),
                alert_type: None,
                days_back: DEFAULT_DAYS_BACK,
                limit: DEFAULT_LIMIT,
            })
        );
        assert_eq!(
            parse_search_args("12"),
            Ok(SearchArgs {
                query: "12".into(),
                alert_type: None,
                days_back: DEFAULT_DAYS_BACK,
                limit: DEFAULT_LIMIT,
            })
        );
    }

    #[test]
    fn nothing_recalled_says_so() {
        let s = render_recalled(&[]);
        assert!(s.starts_with("No relevant memories"));
        assert!(s.contains("other tools"));
    }

    #[test]
    fn recalled_memories_show_their_provenance() {
        let shown = [
            memory(
                "a",
                "Check the pool first.",
                MemoryCategory::Procedure,
                MemoryValence::Helped,
            ),
            memory(
                "b",
                "nginx_5xx is the real metric.",
                MemoryCategory::Fact,
                MemoryValence::Misled,
            ),
        ];
        assert_eq!(
            render_recalled(&shown),
            "Memories from past investigations in this environment (they may be outdated or \
             wrong: check one with the other tools before relying on it):\n\
             - Check the pool first. (procedure, from session sess-a, confidence 0.8, learned 3 days ago)\n\
             - Warning, this misled an earlier investigation: nginx_5xx is the real metric. \
             (fact, from session sess-b, confidence 0.8, learned 3 days ago)\n"
        );
    }

    fn hit(n: usize, excerpt: &str) -> PastSessionHit {
        PastSessionHit {
            session_id: format!("s-{n}"),
            alert_type: "pod-oom".into(),
            status: SessionStatus::Completed,
            age_days: n as u32,
            score: n.is_multiple_of(2).then_some(70),
            excerpt: excerpt.into(),
        }
    }

    #[test]
    fn no_sessions_says_so() {
        assert_eq!(
            render_past_sessions(&[]),
            "No past sessions matched. Go on with the other tools."
        );
    }

    #[test]
    fn past_sessions_are_summarised() {
        let s = render_past_sessions(&[hit(0, "The export job\nfilled memory."), hit(1, "")]);
        assert_eq!(
            s,
            "Past sessions that matched, most relevant first:\n\
             \n1. session s-0 (pod-oom, completed, today, score 70/100)\n   The export job filled memory.\n\
             \n2. session s-1 (pod-oom, completed, 1 day ago, not scored)\n"
        );
    }

    #[test]
    fn past_sessions_stay_bounded() {
        let long = "word ".repeat(5_000);
        let hits: Vec<_> = (0..30).map(|n| hit(n, &long)).collect();
        let s = render_past_sessions(&hits);
        assert!(s.len() <= MAX_SESSIONS_BYTES, "{}", s.len());
        assert!(s.contains("10. session s-9") && !s.contains("s-10"));
        // One long excerpt gets more room than ten.
        let one = render_past_sessions(&hits[..1]);
        assert!(one.len() > 600 && one.len() < 900, "{}", one.len());
        // Wide characters count in bytes against the bound.
        let wide = "日本".repeat(5_000);
        let hits: Vec<_> = (0..10).map(|n| hit(n, &wide)).collect();
        let s = render_past_sessions(&hits);
        assert!(s.len() <= MAX_SESSIONS_BYTES, "{}", s.len());
        assert!(s.contains("more sessions not shown]"));
    }
}
