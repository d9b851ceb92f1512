//! The reflector: after an investigation is scored (and again after a
//! person reviews it), an agent reads it with the similar memories already
//! stored and answers what to learn, confirm or retire. This module holds
//! what it is told, what it is shown and how its answer is read.
//!
//! The answer is read leniently ([`parse_reflection`]): the JSON object may
//! be fenced or surrounded by prose, and what does not fit the form is
//! repaired or dropped with a warning rather than failing the whole answer.
//! Only an answer without any usable object is an error.

use std::collections::HashSet;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tarsy_core::{MemoryCategory, MemoryValence, ReviewRating};

use crate::text;

/// At most this many memories are created from one investigation.
pub const MAX_CREATES: usize = 3;

/// The longest memory text kept, in characters.
pub const MAX_CONTENT_CHARS: usize = 300;

/// At most this many existing memories are shown to the reflector.
pub const MAX_EXISTING: usize = 20;

/// The confidence of a memory whose reflector gave none.
pub const DEFAULT_CONFIDENCE: f64 = 0.5;

/// The category of a memory whose reflector gave none, or an unknown one.
pub const DEFAULT_CATEGORY: MemoryCategory = MemoryCategory::Experience;

/// The valence of a memory whose reflector gave none, or an unknown one.
pub const DEFAULT_VALENCE: MemoryValence = MemoryValence::Neutral;

// Section bounds of the reflection prompt, in characters, so one huge alert
// or analysis cannot crowd out the rest (or the context window).
const MAX_ALERT_TYPE: usize = 200;
const MAX_ALERT_DATA: usize = 4_000;
const MAX_ANALYSIS: usize = 6_000;
const MAX_SUMMARY: usize = 1_500;
const MAX_TOOL_CALLS: usize = 15;
const MAX_TOOL_NAME: usize = 120;
const MAX_TOOL_ARGS: usize = 300;
const MAX_TOOL_RESULT: usize = 600;
const MAX_TOOL_REPORT: usize = 1_500;
const MAX_FEEDBACK: usize = 3_000;
const MAX_EXISTING_CONTENT: usize = 400;
const MAX_ID: usize = 100;

// The answer is searched for an object from at most this many opening
// braces, in at most this much text: bounded work on any answer.
const MAX_OBJECT_STARTS: usize = 256;
const MAX_SCANNED_BYTES: usize = 200_000;

/// What makes a good memory: shared by both instructions.
macro_rules! memory_rules {
    () => {
        "A good memory is:\n\
         - short: one or two sentences, at most 300 characters;\n\
         - specific to this environment: its services, namespaces, metrics, dashboards, \
         tools and their quirks, what is normal here. Not general SRE knowledge any \
         engineer already has;\n\
         - reusable: it helps a later investigation of a similar alert, not only this one;\n\
         - grounded in what the tools returned, not in a guess.\n\
         A memory is never a secret, credential, token, password, key or personal data, \
         and never a restatement of the alert or of this investigation's conclusion \
         (\"pod X was OOMKilled at 10:02\" teaches nothing; \"the orders pods are \
         OOMKilled when the nightly export runs; check the export job first\" does).\n\n\
         Each memory has:\n\
         - a category: `fact` (how this environment is: \"service X's error rate is \
         200/h during batch runs; that is normal\"), `experience` (what happened when \
         investigating: \"the pod metric queried first does not exist here\") or \
         `procedure` (how to investigate: \"check the connection pool first\");\n\
         - a valence: `helped` (following it helps), `misled` (a warning: it led an \
         investigation astray) or `neutral`;\n\
         - a confidence from 0 to 1: high only when tools proved it and the \
         investigation was judged sound, lower when the evidence or the score is weak.\n\n\
         You are shown the similar memories already stored, each with its id. Never \
         create a memory that repeats one of them. Use only ids from that list.\n"
    };
}

/// The answer's form: shared by both instructions.
macro_rules! answer_format {
    () => {
        "Answer with one JSON object and nothing else, in this form (use empty lists \
         when there is nothing to do):\n\n\
         ```json\n\
         {\"create\": [{\"content\": \"<the memory>\", \"category\": \"fact|experience|procedure\", \
         \"valence\": \"helped|misled|neutral\", \"confidence\": 0.7}], \
         \"reinforce\": [\"<id>\"], \"deprecate\": [\"<id>\"]}\n\
         ```\n"
    };
}

/// The reflector's instructions after an investigation was scored: what is
/// worth remembering and the answer's form.
pub const REFLECTOR_INSTRUCTIONS: &str = concat!(
    "You are TARSy's reflector. TARSy is an SRE agent that investigates alerts with \
     tools. An investigation has just finished and a judge has scored it. Decide what a \
     later investigation of a similar alert in this same environment should remember \
     from it.\n\n",
    memory_rules!(),
    "\nWhat to do:\n\
     - create at most 3 new memories; zero is often right. Learn from what the tools \
     showed, not from a conclusion the judge found wrong; a poorly scored investigation \
     may still teach an experience or a warning (`misled`);\n\
     - reinforce (by id) an existing memory this investigation confirmed;\n\
     - deprecate (by id) an existing memory that misled this investigation or that it \
     proved wrong or outdated.\n\n",
    answer_format!()
);

/// The reflector's instructions after a person reviewed an investigation
/// and wrote feedback: the reviewer is right, and memories follow.
pub const FEEDBACK_INSTRUCTIONS: &str = concat!(
    "You are TARSy's reflector. TARSy is an SRE agent that investigates alerts with \
     tools. A person has reviewed one of its investigations and written feedback. The \
     reviewer is right: where the feedback contradicts the investigation, the judge's \
     score or a stored memory, the feedback wins. Decide what later investigations of \
     similar alerts in this same environment should remember because of this feedback.\n\n",
    memory_rules!(),
    "\nWhat to do:\n\
     - create at most 3 new memories the feedback teaches (what was really going on, \
     what should have been checked); zero is right when the feedback teaches nothing \
     reusable;\n\
     - deprecate (by id) an existing memory the feedback shows is wrong, outdated or \
     misleading;\n\
     - reinforce (by id) an existing memory only when the feedback confirms it.\n\n",
    answer_format!()
);

/// One tool call that mattered to the investigation, shortened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallSummary {
    /// Canonical `server.tool` name.
    pub name: String,
    /// Its arguments, as sent.
    pub arguments: String,
    /// What it returned, or the start of it.
    pub result: String,
}

/// A stored memory the reflector may reinforce or deprecate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnownMemory {
    /// The id the reflector answers with.
    pub id: String,
    /// What it says.
    pub content: String,
    /// What it is about.
    pub category: MemoryCategory,
    /// Whether it helped or misled where it came from.
    pub valence: MemoryValence,
    /// How sure it is, 0–1.
    pub confidence: f64,
}

/// What the reflector is shown of one investigation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReflectionInput {
    /// The alert's type (`pod-oom`).
    pub alert_type: String,
    /// The alert's data, as received (masked).
    pub alert_data: String,
    /// The investigation's final analysis.
    pub final_analysis: String,
    /// Its executive summary, when one was written.
    pub executive_summary: Option<String>,
    /// The tool calls that mattered, in order.
    pub tool_calls: Vec<ToolCallSummary>,
    /// The judge's score, 0–100, when scored.
    pub score: Option<u8>,
    /// The judge's failure tags (slugs such as `missed-available-tool`).
    pub failure_tags: Vec<String>,
    /// The judge's report on missing and hard-to-use tools.
    pub tool_report: Option<String>,
    /// A reviewer's rating, when reviewed.
    pub review_rating: Option<ReviewRating>,
    /// A reviewer's feedback text, when written.
    pub review_feedback: Option<String>,
    /// Similar memories already stored (at most [`MAX_EXISTING`] are shown).
    pub existing: Vec<KnownMemory>,
}

/// The reflector's user message: the investigation in delimited sections,
/// each bounded, then the existing memories with their ids.
pub fn reflection_prompt(input: &ReflectionInput) -> String {
    let mut s = String::from(
        "Reflect on this investigation and answer with the JSON object described in your \
         instructions.\n\n## Alert\n",
    );
    let _ = writeln!(
        s,
        "Type: {}",
        text::clip(&text::one_line(&input.alert_type), MAX_ALERT_TYPE)
    );
    tagged(&mut s, "alert_data", &input.alert_data, MAX_ALERT_DATA);

    s.push_str("\n## Final analysis\n");
    tagged(
        &mut s,
        "final_analysis",
        &input.final_analysis,
        MAX_ANALYSIS,
    );

    if let Some(summary) = present(&input.executive_summary) {
        s.push_str("\n## Executive summary\n");
        tagged(&mut s, "executive_summary", summary, MAX_SUMMARY);
    }

    s.push_str("\n## Tool calls that mattered\n");
    if input.tool_calls.is_empty() {
        s.push_str("None recorded.\n");
    }
    for (i, call) in input.tool_calls.iter().take(MAX_TOOL_CALLS).enumerate() {
        let _ = writeln!(
            s,
            "{}. {}({}) → {}",
            i + 1,
            text::clip(&text::one_line(&call.name), MAX_TOOL_NAME),
            text::clip(&text::one_line(&call.arguments), MAX_TOOL_ARGS),
            text::clip(&text::one_line(&call.result), MAX_TOOL_RESULT),
        );
    }
    if input.tool_calls.len() > MAX_TOOL_CALLS {
        let _ = writeln!(
            s,
            "[… {} more tool calls not shown]",
            input.tool_calls.len() - MAX_TOOL_CALLS
        );
    }

    s.push_str("\n## Judge's score\n");
    match input.score {
        Some(score) => {
            let _ = writeln!(s, "Score: {score}/100");
        }
        None => s.push_str("Not scored.\n"),
    }
    let tags: Vec<String> = input
        .failure_tags
        .iter()
        .map(|t| text::clip(&text::one_line(t), 60))
        .filter(|t| !t.is_empty())
        .collect();
    let _ = writeln!(
        s,
        "Failure tags: {}",
        if tags.is_empty() {
            "none".to_string()
        } else {
            tags.join(", ")
        }
    );
    if let Some(report) = present(&input.tool_report) {
        tagged(&mut s, "tool_report", report, MAX_TOOL_REPORT);
    }

    s.push_str("\n## Review by a person\n");
    let feedback = present(&input.review_feedback);
    if input.review_rating.is_none() && feedback.is_none() {
        s.push_str("Not reviewed.\n");
    }
    if let Some(rating) = input.review_rating {
        let _ = writeln!(s, "Rating: {rating}");
    }
    if let Some(feedback) = feedback {
        tagged(&mut s, "review_feedback", feedback, MAX_FEEDBACK);
    }

    s.push_str("\n## Existing memories\n");
    if input.existing.is_empty() {
        s.push_str("None: nothing similar is stored yet.\n");
    } else {
        s.push_str(
            "Similar memories already stored. Reinforce or deprecate them by id; do not \
             create one that repeats them.\n",
        );
    }
    for m in input.existing.iter().take(MAX_EXISTING) {
        let _ = writeln!(
            s,
            "- id `{}` ({}, {}, confidence {}): {}",
            text::clip(&text::one_line(&m.id), MAX_ID),
            m.category,
            m.valence,
            text::confidence(m.confidence),
            text::clip(&text::one_line(&m.content), MAX_EXISTING_CONTENT),
        );
    }
    s
}

/// `text` clipped, between `<tag>` and `</tag>` lines.
fn tagged(s: &mut String, tag: &str, body: &str, max: usize) {
    let body = text::clip_noted(body, max);
    let _ = writeln!(s, "<{tag}>\n{body}\n</{tag}>");
}

/// The text of an optional field with something in it.
fn present(field: &Option<String>) -> Option<&str> {
    field.as_deref().filter(|t| !t.trim().is_empty())
}

/// A memory the reflector proposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryDraft {
    /// What it says: trimmed, non-empty, at most [`MAX_CONTENT_CHARS`].
    pub content: String,
    /// What it is about.
    pub category: MemoryCategory,
    /// Whether it helped or misled.
    pub valence: MemoryValence,
    /// How sure, in [0, 1].
    pub confidence: f64,
}

/// The reflector's answer, read and repaired.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reflection {
    /// New memories, at most [`MAX_CREATES`].
    pub create: Vec<MemoryDraft>,
    /// Ids of memories this investigation confirmed, each once.
    pub reinforce: Vec<String>,
    /// Ids of memories to retire, each once (never also reinforced).
    pub deprecate: Vec<String>,
    /// What was repaired or dropped, for the execution's warnings.
    pub warnings: Vec<String>,
}

impl Reflection {
    /// True when the reflector changes nothing.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.reinforce.is_empty() && self.deprecate.is_empty()
    }

    /// Drops the reinforced and deprecated ids that are not among `known`
    /// (the memories the reflector was shown), each with a warning: a model
    /// may invent or mangle an id.
    pub fn retain_known<'a>(&mut self, known: impl IntoIterator<Item = &'a str>) {
        let known: HashSet<&str> = known.into_iter().collect();
        let warnings = &mut self.warnings;
        for (list, verb) in [
            (&mut self.reinforce, "reinforce"),
            (&mut self.deprecate, "deprecate"),
        ] {
            list.retain(|id| {
                let ok = known.contains(id.as_str());
                if !ok {
                    warnings.push(format!(
                        "asked to {verb} memory {id:?}, which is not among the memories shown; ignored"
                    ));
                }
                ok
            });
        }
    }
}

/// Why the reflector's answer could not be read at all. Nothing is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReflectionError {
    /// The answer was empty.
    #[error(
        "the reflector's answer is empty; expected a JSON object {{\"create\": [...], \"reinforce\": [...], \"deprecate\": [...]}}"
    )]
    Empty,
    /// No JSON object in the answer.
    #[error(
        "no JSON object found in the reflector's answer; expected {{\"create\": [...], \"reinforce\": [...], \"deprecate\": [...]}}"
    )]
    NoJsonObject,
    /// JSON objects, but none with the answer's fields.
    #[error(
        "the reflector's answer has no JSON object with \"create\", \"reinforce\" or \"deprecate\" (fields found: {found})"
    )]
    NotAReflection {
        /// The fields of the objects found, comma separated.
        found: String,
    },
}

/// Reads the reflector's answer: the JSON object fenced in ```` ```json ````
/// or bare anywhere in the text, repaired where it strays from the form
/// (each repair noted in [`Reflection::warnings`]).
pub fn parse_reflection(answer: &str) -> Result<Reflection, ReflectionError> {
    if answer.trim().is_empty() {
        return Err(ReflectionError::Empty);
    }
    let object = answer_object(answer)?;
    Ok(read_reflection(object))
}

/// The answer's field a key names, in any case (`Create`, `creates`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Create,
    Reinforce,
    Deprecate,
}

fn field(key: &str) -> Option<Field> {
    match key.trim().to_ascii_lowercase().as_str() {
        "create" | "creates" | "created" | "new" => Some(Field::Create),
        "reinforce" | "reinforces" | "reinforced" => Some(Field::Reinforce),
        "deprecate" | "deprecates" | "deprecated" => Some(Field::Deprecate),
        _ => None,
    }
}

/// The object the answer is: the first fenced block that is one, else the
/// first object in the text with an answer field, else the first empty
/// object (an answer with nothing to do).
fn answer_object(answer: &str) -> Result<Map<String, Value>, ReflectionError> {
    let has_field = |m: &Map<String, Value>| m.keys().any(|k| field(k).is_some());
    for block in fenced_blocks(answer) {
        if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(block)
            && (m.is_empty() || has_field(&m))
        {
            return Ok(m);
        }
    }
    let mut empty = None;
    let mut found: Vec<String> = Vec::new();
    for m in objects(answer) {
        if has_field(&m) {
            return Ok(m);
        }
        if m.is_empty() {
            empty.get_or_insert(m);
        } else {
            for k in m.keys() {
                if !found.contains(k) {
                    found.push(k.clone());
                }
            }
        }
    }
    match empty {
        Some(m) => Ok(m),
        None if found.is_empty() => Err(ReflectionError::NoJsonObject),
        None => Err(ReflectionError::NotAReflection {
            found: text::clip(&found.join(", "), 200),
        }),
    }
}

/// The insides of ```` ``` ```` fences, without the language word.
fn fenced_blocks(text: &str) -> impl Iterator<Item = &str> {
    text.split("```").skip(1).step_by(2).map(|block| {
        let first_line_end = block.find('\n').unwrap_or(block.len());
        let first = block[..first_line_end].trim();
        if !first.is_empty() && first.chars().all(|c| c.is_ascii_alphanumeric()) {
            block[first_line_end..].trim()
        } else {
            block.trim()
        }
    })
}

/// Every JSON object that starts at an opening brace of `text` (bounded
/// work), outer ones first. What follows an object does not matter.
fn objects(text: &str) -> impl Iterator<Item = Map<String, Value>> + '_ {
    let mut end = text.len().min(MAX_SCANNED_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    text.match_indices('{')
        .take(MAX_OBJECT_STARTS)
        .filter_map(move |(i, _)| {
            serde_json::Deserializer::from_str(&text[i..])
                .into_iter::<Map<String, Value>>()
                .next()
                .and_then(Result::ok)
        })
}

fn read_reflection(object: Map<String, Value>) -> Reflection {
    let mut r = Reflection::default();
    let mut creates = Vec::new();
    let mut reinforce = Vec::new();
    let mut deprecate = Vec::new();
    for (key, value) in object {
        match field(&key) {
            Some(Field::Create) => creates.extend(items(value, &key, &mut r.warnings)),
            Some(Field::Reinforce) => reinforce.extend(ids(value, &key, &mut r.warnings)),
            Some(Field::Deprecate) => deprecate.extend(ids(value, &key, &mut r.warnings)),
            None => {}
        }
    }

    let mut seen = HashSet::new();
    for (i, item) in creates.into_iter().enumerate() {
        let Some(draft) = draft(item, i + 1, &mut r.warnings) else {
            continue;
        };
        if !seen.insert(text::one_line(&draft.content).to_lowercase()) {
            r.warnings.push(format!(
                "new memory {} repeats an earlier one; dropped",
                i + 1
            ));
            continue;
        }
        r.create.push(draft);
    }
    if r.create.len() > MAX_CREATES {
        r.warnings.push(format!(
            "{} new memories proposed; only the first {MAX_CREATES} kept",
            r.create.len()
        ));
        r.create.truncate(MAX_CREATES);
    }

    r.deprecate = dedup(deprecate);
    let deprecated: HashSet<&String> = r.deprecate.iter().collect();
    for id in dedup(reinforce) {
        if deprecated.contains(&id) {
            r.warnings.push(format!(
                "memory {id:?} is both reinforced and deprecated; deprecated"
            ));
        } else {
            r.reinforce.push(id);
        }
    }
    r
}

/// The elements of a list field (a lone element counts as a list of one).
fn items(value: Value, key: &str, warnings: &mut Vec<String>) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        one @ (Value::Object(_) | Value::String(_)) => vec![one],
        other => {
            warnings.push(format!("{key:?} is {}, not a list; ignored", kind(&other)));
            Vec::new()
        }
    }
}

/// The ids of a list field: strings, numbers or `{"id": ...}` objects,
/// trimmed, empty ones dropped.
fn ids(value: Value, key: &str, warnings: &mut Vec<String>) -> Vec<String> {
    items(value, key, warnings)
        .into_iter()
        .filter_map(|item| {
            let id = match &item {
                Value::String(s) => Some(s.trim().to_string()),
                Value::Number(n) => Some(n.to_string()),
                Value::Object(m) => match m.get("id") {
                    Some(Value::String(s)) => Some(s.trim().to_string()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                },
                _ => None,
            };
            if id.is_none() {
                warnings.push(format!(
                    "{key:?} holds {}, not a memory id; ignored",
                    kind(&item)
                ));
            }
            id.filter(|id| !id.is_empty())
        })
        .collect()
}

/// `ids` in first-seen order, each once.
fn dedup(ids: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    ids.into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// One proposed memory, repaired; `None` (with a warning) without content.
fn draft(item: Value, n: usize, warnings: &mut Vec<String>) -> Option<MemoryDraft> {
    let fields = match item {
        Value::Object(m) => m,
        Value::String(content) => {
            let mut m = Map::new();
            m.insert("content".into(), Value::String(content));
            m
        }
        other => {
            warnings.push(format!(
                "new memory {n} is {}, not an object; dropped",
                kind(&other)
            ));
            return None;
        }
    };
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    };

    let content = match get("content") {
        Some(Value::String(s)) => s.trim(),
        _ => "",
    };
    if content.is_empty() {
        warnings.push(format!("new memory {n} has no content; dropped"));
        return None;
    }
    let content = if content.chars().count() > MAX_CONTENT_CHARS {
        warnings.push(format!(
            "new memory {n} is longer than {MAX_CONTENT_CHARS} characters; clipped"
        ));
        text::clip(content, MAX_CONTENT_CHARS - 1)
    } else {
        content.to_string()
    };

    let category = match get("category") {
        Some(Value::String(s)) => text::category(s).unwrap_or_else(|| {
            warnings.push(format!(
                "new memory {n} has unknown category {s:?}; {DEFAULT_CATEGORY} used"
            ));
            DEFAULT_CATEGORY
        }),
        Some(other) if !other.is_null() => {
            warnings.push(format!(
                "new memory {n} has a category that is {}; {DEFAULT_CATEGORY} used",
                kind(other)
            ));
            DEFAULT_CATEGORY
        }
        _ => {
            warnings.push(format!(
                "new memory {n} has no category; {DEFAULT_CATEGORY} used"
            ));
            DEFAULT_CATEGORY
        }
    };

    let valence = match get("valence") {
        Some(Value::String(s)) => text::valence(s).unwrap_or_else(|| {
            warnings.push(format!(
                "new memory {n} has unknown valence {s:?}; {DEFAULT_VALENCE} used"
            ));
            DEFAULT_VALENCE
        }),
        Some(other) if !other.is_null() => {
            warnings.push(format!(
                "new memory {n} has a valence that is {}; {DEFAULT_VALENCE} used",
                kind(other)
            ));
            DEFAULT_VALENCE
        }
        _ => {
            warnings.push(format!(
                "new memory {n} has no valence; {DEFAULT_VALENCE} used"
            ));
            DEFAULT_VALENCE
        }
    };

    let raw = match get("confidence") {
        None | Some(Value::Null) => Some(DEFAULT_CONFIDENCE),
        Some(Value::Number(x)) => x.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    };
    let confidence = match raw.filter(|x| x.is_finite()) {
        Some(x) if (0.0..=1.0).contains(&x) => x,
        Some(x) => {
            let clamped = x.clamp(0.0, 1.0);
            warnings.push(format!(
                "new memory {n} has confidence {x}, outside 0–1; {clamped} used"
            ));
            clamped
        }
        None => {
            warnings.push(format!(
                "new memory {n} has an unreadable confidence; {DEFAULT_CONFIDENCE} used"
            ));
            DEFAULT_CONFIDENCE
        }
    };

    Some(MemoryDraft {
        content,
        category,
        valence,
        confidence,
    })
}

/// What a JSON value is, for warnings.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(
        content: &str,
        category: MemoryCategory,
        valence: MemoryValence,
        c: f64,
    ) -> MemoryDraft {
        MemoryDraft {
            content: content.into(),
            category,
            valence,
            confidence: c,
        }
    }

    const CLEAN: &str = r#"{"create": [{"content": "The orders pods are OOMKilled when the nightly export runs; check the export job first.", "category": "procedure", "valence": "helped", "confidence": 0.8}], "reinforce": ["m-1"], "deprecate": ["m-2"]}"#;

    fn clean() -> Reflection {
        Reflection {
            create: vec![draft(
                "The orders pods are OOMKilled when the nightly export runs; check the export job first.",
                MemoryCategory::Procedure,
                MemoryValence::Helped,
                0.8,
            )],
            reinforce: vec!["m-1".into()],
            deprecate: vec!["m-2".into()],
            warnings: vec![],
        }
    }

    // --- instructions ---

    #[test]
    fn both_instructions_name_the_whole_vocabulary_and_the_form() {
        for text in [REFLECTOR_INSTRUCTIONS, FEEDBACK_INSTRUCTIONS] {
            for c in MemoryCategory::ALL {
                assert!(text.contains(&format!("`{c}`")), "{c}");
            }
            for v in MemoryValence::ALL {
                assert!(text.contains(&format!("`{v}`")), "{v}");
            }
            assert!(text.contains("at most 300 characters"));
            assert!(text.contains("at most 3 new memories"));
            assert!(text.contains("secret"));
            assert!(text.contains("restatement of the alert"));
            assert!(text.contains("\"reinforce\": [\"<id>\"], \"deprecate\": [\"<id>\"]"));
            // The example in the instructions is itself a readable answer.
            let example = parse_reflection(text).unwrap();
            assert_eq!(example.create.len(), 1);
            // The same placeholder in both lists: deprecation wins.
            assert_eq!(example.deprecate, ["<id>"]);
        }
        assert!(REFLECTOR_INSTRUCTIONS.contains("zero is often right"));
        assert!(FEEDBACK_INSTRUCTIONS.contains("The reviewer is right"));
        assert_eq!(MAX_CONTENT_CHARS, 300);
        assert_eq!(MAX_CREATES, 3);
    }

    // --- prompt ---

    fn input() -> ReflectionInput {
        ReflectionInput {
            alert_type: "pod-oom".into(),
            alert_data: "{\"pod\": \"orders-7f9\", \"namespace\": \"shop\"}".into(),
            final_analysis: "The orders pod was OOMKilled by the nightly export.".into(),
            executive_summary: Some("Export job memory spike.".into()),
            tool_calls: vec![ToolCallSummary {
                name: "kubernetes.pods_get".into(),
                arguments: "{\"name\": \"orders-7f9\"}".into(),
                result: "status: OOMKilled\nrestarts: 4".into(),
            }],
            score: Some(72),
            failure_tags: vec!["incomplete-evidence".into()],
            tool_report: Some("MISSING TOOLS:\n- none".into()),
            review_rating: None,
            review_feedback: None,
            existing: vec![KnownMemory {
                id: "m-1".into(),
                content: "Orders pods run close to their memory limit.".into(),
                category: MemoryCategory::Fact,
                valence: MemoryValence::Helped,
                confidence: 0.7,
            }],
        }
    }

    #[test]
    fn the_prompt_has_every_section_delimited() {
        let p = reflection_prompt(&input());
        assert!(p.contains("## Alert\nType: pod-oom\n<alert_data>\n{\"pod\": \"orders-7f9\""));
        assert!(p.contains(
            "<final_analysis>\nThe orders pod was OOMKilled by the nightly export.\n</final_analysis>"
        ));
        assert!(p.contains("<executive_summary>\nExport job memory spike.\n</executive_summary>"));
        assert!(p.contains(
            "1. kubernetes.pods_get({\"name\": \"orders-7f9\"}) → status: OOMKilled restarts: 4\n"
        ));
        assert!(p.contains("Score: 72/100\nFailure tags: incomplete-evidence\n<tool_report>"));
        assert!(p.contains("## Review by a person\nNot reviewed.\n"));
        assert!(p.contains(
            "- id `m-1` (fact, helped, confidence 0.7): Orders pods run close to their memory limit.\n"
        ));
        // Sections in a stable order.
        let order = [
            "## Alert",
            "## Final analysis",
            "## Executive summary",
            "## Tool calls that mattered",
            "## Judge's score",
            "## Review by a person",
            "## Existing memories",
        ];
        let positions: Vec<usize> = order.iter().map(|h| p.find(h).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    }

    #[test]
    fn the_prompt_says_what_is_missing() {
        let p = reflection_prompt(&ReflectionInput {
            alert_type: "disk".into(),
            ..Default::default()
        });
        assert!(!p.contains("## Executive summary"));
        assert!(p.contains("## Tool calls that mattered\nNone recorded.\n"));
        assert!(p.contains("Not scored.\nFailure tags: none\n"));
        assert!(p.contains("None: nothing similar is stored yet.\n"));
        assert!(!p.contains("<tool_report>"));
    }

    #[test]
    fn the_review_is_shown_when_present() {
        let mut i = input();
        i.review_rating = Some(ReviewRating::Inaccurate);
        i.review_feedback =
            Some("It was the node, not the pod: the node ran out of memory.".into());
        let p = reflection_prompt(&i);
        assert!(p.contains(
            "## Review by a person\nRating: inaccurate\n<review_feedback>\nIt was the node"
        ));
        assert!(!p.contains("Not reviewed."));
    }

    #[test]
    fn the_prompt_stays_bounded() {
        let huge = "y".repeat(100_000);
        let i = ReflectionInput {
            alert_type: huge.clone(),
            alert_data: huge.clone(),
            final_analysis: huge.clone(),
            executive_summary: Some(huge.clone()),
            tool_calls: (0..100)
                .map(|n| ToolCallSummary {
                    name: format!("s.t{n}"),
                    arguments: huge.clone(),
                    result: huge.clone(),
                })
                .collect(),
            score: Some(10),
            failure_tags: vec![huge.clone(); 3],
            tool_report: Some(huge.clone()),
            review_rating: Some(ReviewRating::Accurate),
            review_feedback: Some(huge.clone()),
            existing: (0..50)
                .map(|n| KnownMemory {
                    id: format!("m{n}"),
                    content: huge.clone(),
                    category: MemoryCategory::Fact,
                    valence: MemoryValence::Neutral,
                    confidence: 0.5,
                })
                .collect(),
        };
        let p = reflection_prompt(&i);
        assert!(p.chars().count() < 60_000, "{}", p.len());
        assert!(p.contains("[… clipped: 96000 more characters]"));
        assert!(p.contains("[… 85 more tool calls not shown]"));
        assert!(p.contains("id `m19`") && !p.contains("id `m20`"));
    }

    // --- parsing: where the object is ---

    #[test]
    fn a_bare_object_is_read_whole() {
        assert_eq!(parse_reflection(CLEAN).unwrap(), clean());
    }

    #[test]
    fn a_fenced_object_is_read() {
        let answer = format!("```json\n{CLEAN}\n```");
        assert_eq!(parse_reflection(&answer).unwrap(), clean());
        let answer = format!("```\n{CLEAN}\n```");
        assert_eq!(parse_reflection(&answer).unwrap(), clean());
        let answer = format!("```JSON {CLEAN}```");
        assert_eq!(parse_reflection(&answer).unwrap(), clean());
    }

    #[test]
    fn prose_around_the_object_is_ignored() {
        let answer = format!(
            "Looking at the investigation, the export job is the key lesson.\n\n{CLEAN}\n\n\
             I reinforced m-1 because the tools confirmed it."
        );
        assert_eq!(parse_reflection(&answer).unwrap(), clean());
        let answer = format!("Here you go:\n```json\n{CLEAN}\n```\nThat's all {{ sic }}.");
        assert_eq!(parse_reflection(&answer).unwrap(), clean());
    }

    #[test]
    fn braces_in_prose_do_not_hide_the_answer() {
        let answer = format!(
            "The pod {{name}} in {{namespace}} and an example {{\"note\": 1}} and {{}}.\n{CLEAN}"
        );
        assert_eq!(parse_reflection(&answer).unwrap(), clean());
        // A fenced answer wins over an object described in prose before it.
        let answer = format!(
            "I would not answer {{\"create\": [], \"reinforce\": [\"m-9\"]}} here.\n```json\n{CLEAN}\n```"
        );
        assert_eq!(parse_reflection(&answer).unwrap(), clean());
    }

    #[test]
    fn a_wrapped_answer_is_found_inside() {
        let answer = format!("{{\"reflection\": {CLEAN}}}");
        assert_eq!(parse_reflection(&answer).unwrap(), clean());
    }

    #[test]
    fn an_empty_object_is_an_answer_with_nothing_to_do() {
        let r = parse_reflection("Nothing worth keeping.\n```json\n{}\n```").unwrap();
        assert!(r.is_empty() && r.warnings.is_empty());
        let r = parse_reflection(r#"{"create": [], "reinforce": [], "deprecate": []}"#).unwrap();
        assert!(r.is_empty() && r.warnings.is_empty());
    }

    #[test]
    fn missing_lists_are_empty() {
        let r = parse_reflection(r#"{"reinforce": ["a"]}"#).unwrap();
        assert!(r.create.is_empty() && r.deprecate.is_empty());
        assert_eq!(r.reinforce, ["a"]);
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn unreadable_answers_are_errors_saying_what_was_expected() {
        assert_eq!(parse_reflection("  \n"), Err(ReflectionError::Empty));
        assert_eq!(
            parse_reflection("I have nothing to add."),
            Err(ReflectionError::NoJsonObject)
        );
        let e = parse_reflection("garbage {{{ ]] \"create\": [").unwrap_err();
        assert_eq!(e, ReflectionError::NoJsonObject);
        assert!(e.to_string().contains("expected {\"create\": [...]"));
        // Trailing commas are not JSON: refused, not guessed.
        assert_eq!(
            parse_reflection(r#"{"create": [], "reinforce": ["a"],}"#),
            Err(ReflectionError::NoJsonObject)
        );
        let e = parse_reflection(r#"{"memories": [{"text": "x"}], "notes": "y"}"#).unwrap_err();
        assert_eq!(
            e,
            ReflectionError::NotAReflection {
                found: "memories, notes, text".into()
            }
        );
        assert!(
            e.to_string()
                .contains("\"create\", \"reinforce\" or \"deprecate\"")
        );
        // A list is not the object.
        assert_eq!(
            parse_reflection(r#"[{"content": "x"}]"#),
            Err(ReflectionError::NotAReflection {
                found: "content".into()
            })
        );
    }

    #[test]
    fn pathological_answers_are_bounded() {
        let answer = "{".repeat(50_000);
        assert_eq!(
            parse_reflection(&answer),
            Err(ReflectionError::NoJsonObject)
        );
        let answer = format!("{}{CLEAN}", "é".repeat(150_000));
        // Past the scanned bound: not found, and no panic on the char boundary.
        assert_eq!(
            parse_reflection(&answer),
            Err(ReflectionError::NoJsonObject)
        );
    }

    // --- parsing: repairs ---

    #[test]
    fn keys_and_words_are_read_in_any_case() {
        let r = parse_reflection(
            r#"{"Create": [{"Content": " x ", "Category": "FACT", "Valence": "Misled", "Confidence": "0.9"}], "Deprecated": ["d"]}"#,
        )
        .unwrap();
        assert_eq!(
            r.create,
            [draft("x", MemoryCategory::Fact, MemoryValence::Misled, 0.9)]
        );
        assert_eq!(r.deprecate, ["d"]);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn unknown_or_missing_words_default_with_a_warning() {
        let r = parse_reflection(
            r#"{"create": [{"content": "a", "category": "lesson", "valence": "great"}, {"content": "b"}, {"content": "c", "category": 3, "valence": null}]}"#,
        )
        .unwrap();
        for d in &r.create {
            assert_eq!(d.category, MemoryCategory::Experience);
            assert_eq!(d.valence, MemoryValence::Neutral);
            assert_eq!(d.confidence, 0.5);
        }
        assert_eq!(
            r.warnings,
            [
                "new memory 1 has unknown category \"lesson\"; experience used",
                "new memory 1 has unknown valence \"great\"; neutral used",
                "new memory 2 has no category; experience used",
                "new memory 2 has no valence; neutral used",
                "new memory 3 has a category that is a number; experience used",
                "new memory 3 has no valence; neutral used",
            ]
        );
    }

    #[test]
    fn confidence_is_clamped_and_defaults_to_one_half() {
        let r = parse_reflection(
            r#"{"create": [
                {"content": "a", "category": "fact", "valence": "neutral", "confidence": 80},
                {"content": "b", "category": "fact", "valence": "neutral", "confidence": -1},
                {"content": "c", "category": "fact", "valence": "neutral", "confidence": "high"},
                {"content": "d", "category": "fact", "valence": "neutral"}
            ]}"#,
        )
        .unwrap();
        let c: Vec<f64> = r.create.iter().map(|d| d.confidence).collect();
        // Four proposed, three kept.
        assert_eq!(c, [1.0, 0.0, 0.5]);
        assert_eq!(
            r.warnings,
            [
                "new memory 1 has confidence 80, outside 0–1; 1 used",
                "new memory 2 has confidence -1, outside 0–1; 0 used",
                "new memory 3 has an unreadable confidence; 0.5 used",
                "4 new memories proposed; only the first 3 kept",
            ]
        );
        let r = parse_reflection(
            r#"{"create": [{"content": "d", "category": "fact", "valence": "neutral"}]}"#,
        )
        .unwrap();
        assert_eq!(r.create[0].confidence, DEFAULT_CONFIDENCE);
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn empty_content_is_dropped_and_content_trimmed_and_bounded() {
        let long = "z".repeat(400);
        let answer = format!(
            r#"{{"create": [{{"content": "   ", "category": "fact", "valence": "helped"}},
                {{"category": "fact"}}, 7,
                {{"content": "  keep me\n", "category": "fact", "valence": "helped", "confidence": 0.6}},
                {{"content": "{long}", "category": "fact", "valence": "helped"}}]}}"#
        );
        let r = parse_reflection(&answer).unwrap();
        assert_eq!(r.create.len(), 2);
        assert_eq!(r.create[0].content, "keep me");
        assert_eq!(r.create[1].content.chars().count(), MAX_CONTENT_CHARS);
        assert!(r.create[1].content.ends_with('…'));
        assert_eq!(
            r.warnings,
            [
                "new memory 1 has no content; dropped",
                "new memory 2 has no content; dropped",
                "new memory 3 is a number, not an object; dropped",
                "new memory 5 is longer than 300 characters; clipped",
            ]
        );
    }

    #[test]
    fn more_than_three_creates_keep_the_first_three() {
        let items: Vec<String> = (1..=5)
            .map(|n| {
                format!(r#"{{"content": "m{n}", "category": "fact", "valence": "neutral", "confidence": 0.5}}"#)
            })
            .collect();
        let r = parse_reflection(&format!("{{\"create\": [{}]}}", items.join(","))).unwrap();
        let kept: Vec<&str> = r.create.iter().map(|d| d.content.as_str()).collect();
        assert_eq!(kept, ["m1", "m2", "m3"]);
        assert_eq!(
            r.warnings,
            ["5 new memories proposed; only the first 3 kept"]
        );
    }

    #[test]
    fn repeated_creates_are_dropped() {
        let r = parse_reflection(
            r#"{"create": [
                {"content": "Check the pool", "category": "procedure", "valence": "helped"},
                {"content": "check   the POOL", "category": "procedure", "valence": "helped"}
            ]}"#,
        )
        .unwrap();
        assert_eq!(r.create.len(), 1);
        assert_eq!(r.warnings, ["new memory 2 repeats an earlier one; dropped"]);
    }

    #[test]
    fn a_bare_string_or_lone_object_is_a_list_of_one() {
        let r = parse_reflection(
            r#"{"create": {"content": "one", "category": "fact", "valence": "helped"}, "reinforce": "m-1", "deprecate": null}"#,
        )
        .unwrap();
        assert_eq!(r.create.len(), 1);
        assert_eq!(r.reinforce, ["m-1"]);
        assert!(r.warnings.is_empty());
        let r = parse_reflection(r#"{"create": ["Check the pool first."]}"#).unwrap();
        assert_eq!(
            r.create,
            [draft(
                "Check the pool first.",
                MemoryCategory::Experience,
                MemoryValence::Neutral,
                0.5
            )]
        );
        assert_eq!(r.warnings.len(), 2);
        let r = parse_reflection(r#"{"create": 3, "reinforce": true}"#).unwrap();
        assert!(r.is_empty());
        assert_eq!(
            r.warnings,
            [
                "\"create\" is a number, not a list; ignored",
                "\"reinforce\" is a boolean, not a list; ignored",
            ]
        );
    }

    #[test]
    fn ids_are_trimmed_deduplicated_and_deprecation_wins() {
        let r = parse_reflection(
            r#"{"reinforce": [" a ", "b", "a", 7, {"id": "c"}, "", ["x"]], "deprecate": ["b", "b", "d"]}"#,
        )
        .unwrap();
        assert_eq!(r.reinforce, ["a", "7", "c"]);
        assert_eq!(r.deprecate, ["b", "d"]);
        assert_eq!(
            r.warnings,
            [
                "\"reinforce\" holds a list, not a memory id; ignored",
                "memory \"b\" is both reinforced and deprecated; deprecated",
            ]
        );
    }

    #[test]
    fn unknown_ids_can_be_dropped_against_the_memories_shown() {
        let mut r =
            parse_reflection(r#"{"reinforce": ["m-1", "m-9"], "deprecate": ["m-2", "zz"]}"#)
                .unwrap();
        r.retain_known(["m-1", "m-2"]);
        assert_eq!(r.reinforce, ["m-1"]);
        assert_eq!(r.deprecate, ["m-2"]);
        assert_eq!(
            r.warnings,
            [
                "asked to reinforce memory \"m-9\", which is not among the memories shown; ignored",
                "asked to deprecate memory \"zz\", which is not among the memories shown; ignored",
            ]
        );
    }

    #[test]
    fn a_reflection_round_trips_through_serde() {
        let r = clean();
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"category\":\"procedure\""));
        assert_eq!(serde_json::from_str::<Reflection>(&json).unwrap(), r);
    }
}
