//! Structural masking of Kubernetes Secrets.
//!
//! Regexes cannot tell a Secret's `data` from a ConfigMap's, and Secret values
//! are bare base64 with no recognisable shape, so this masker parses the
//! document (YAML, multi-document, or JSON), finds every object whose `kind`
//! is `Secret` — at any depth, so `SecretList`, `List` with mixed items and
//! wrapper objects are covered — and replaces each value of its `data` and
//! `stringData` with [`MASKED_SECRET_DATA`]. Keys stay, so the model still
//! sees which entries a Secret has. String values that themselves contain a
//! manifest (notably the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation) are masked recursively.
//!
//! When the text does not parse (truncated output, a manifest inside prose),
//! a line-based fallback masks the `data`/`stringData` blocks of YAML objects
//! whose `kind` is `Secret`, and `"data": {...}` objects of JSON text that
//! mentions a Secret. The JSON fallback cannot tell which object a `data`
//! belongs to and masks them all: over-masking is the safe side.

use std::borrow::Cow;

use regex::Regex;
use serde::Deserialize;
use serde_yaml::Value;

/// Replacement for every value of a Secret's `data` / `stringData`.
pub const MASKED_SECRET_DATA: &str = "[MASKED_SECRET_DATA]";

/// How deep manifests embedded in string values are followed.
const MAX_EMBED_DEPTH: usize = 4;

/// How the parsers see a marker of earlier masking (`[MASKED_X]`): an
/// opening `[` starts a YAML flow sequence, so a marker standing for a
/// plain scalar (`key: [MASKED_X]-rest`) could make a document that parsed
/// before masking fail to parse after it, and masking the masked text again
/// take another path. Private-use characters keep it a plain scalar; the
/// brackets are put back in the output.
const NEUTRAL_OPEN: char = '\u{E000}';
const NEUTRAL_CLOSE: char = '\u{E001}';

/// Whether a value is this masker's marker (as written, or as parsed).
fn is_masked(value: &str) -> bool {
    value == MASKED_SECRET_DATA
        || value
            .strip_prefix(NEUTRAL_OPEN)
            .and_then(|v| v.strip_suffix(NEUTRAL_CLOSE))
            .is_some_and(|v| v == &MASKED_SECRET_DATA[1..MASKED_SECRET_DATA.len() - 1])
}

/// Shortest masked value [`KubernetesSecretMasker::mask_in_place`] replaces
/// where it stands: a shorter one could be any word of the text.
const MIN_IN_PLACE_CHARS: usize = 4;

/// What a structural pass masked.
#[derive(Debug, Default)]
struct Found {
    /// String values replaced by the marker.
    values: Vec<String>,
    /// Something was masked that cannot be found again in the text: a value
    /// that is not a string, or a manifest inside a string value that only
    /// the line-based fallback could mask.
    opaque: bool,
}

impl Found {
    fn note(&mut self, value: &Value) {
        match value.as_str() {
            Some(s) => self.values.push(s.to_owned()),
            None => self.opaque = true,
        }
    }
}

/// A structural masking failure. The service treats it as fail-closed for
/// tool results (the whole result is withheld).
#[derive(Debug, thiserror::Error)]
pub enum SecretMaskError {
    /// A Secret was found and masked but the document could not be written
    /// back (for example a JSON object with a non-string key).
    #[error("could not re-serialise masked {format} document: {reason}")]
    Serialize {
        /// `json` or `yaml`.
        format: &'static str,
        /// Serializer message (never contains document values).
        reason: String,
    },
}

/// Masks Kubernetes Secret data structurally; see the module documentation.
#[derive(Debug)]
pub struct KubernetesSecretMasker {
    marker: Regex,
    json_data_open: Regex,
    json_pair: Regex,
    json_escaped_pair: Regex,
    json_secret_kind: Regex,
}

impl KubernetesSecretMasker {
    /// Builds the masker (compiles its fallback expressions).
    pub fn new() -> Result<Self, regex::Error> {
        Ok(Self {
            marker: Regex::new(r"\[(MASKED_[A-Z0-9_]+)\]")?,
            // `"data": {` or, inside an escaped JSON string, `\"data\":{`.
            json_data_open: Regex::new(r#"\\?"(?:data|stringData)\\?"\s*:\s*\{"#)?,
            // `"key": "value"` (value may be cut off by truncation).
            json_pair: Regex::new(r#"^\s*,?\s*("(?:[^"\\\n]|\\.)*"\s*:\s*)"(?:[^"\\\n]|\\.)*"?"#)?,
            // `\"key\":\"value\"` inside an escaped JSON string.
            json_escaped_pair: Regex::new(
                r#"^\s*,?\s*(\\"(?:[^"\\\n]|\\[^"\n])*\\"\s*:\s*)\\"(?:[^"\\\n]|\\[^"\n])*(?:\\")?"#,
            )?,
            json_secret_kind: Regex::new(r#"\\?"kind\\?"\s*:\s*\\?"Secret\\?""#)?,
        })
    }

    /// The cheap pre-check: could `data` contain Secret data at all?
    /// Substring tests only; no parsing.
    pub fn applies_to(&self, data: &str) -> bool {
        (data.contains("Secret") || data.contains("apiVersion"))
            && (data.contains("data") || data.contains("Data"))
    }

    /// Masks every Secret in `data`. Returns the input unchanged (borrowed)
    /// when there is nothing to mask.
    pub fn mask<'a>(&self, data: &'a str) -> Result<Cow<'a, str>, SecretMaskError> {
        Ok(match self.mask_text(data, 0, &mut Found::default())? {
            Some(masked) => Cow::Owned(masked),
            None => Cow::Borrowed(data),
        })
    }

    /// [`Self::mask`] for text people wrote (alert data, chat questions):
    /// each masked value is replaced where it stands instead of the
    /// document being written out again, so the prose around a pasted
    /// manifest, its comments and its quoting stay as typed. When a masked
    /// value cannot be found verbatim (a block scalar, an escape, a value
    /// that is not a string or is shorter than 4 characters), the output is
    /// [`Self::mask`]'s. Occurrences of a masked value elsewhere in the text
    /// are masked too.
    pub fn mask_in_place<'a>(&self, data: &'a str) -> Result<Cow<'a, str>, SecretMaskError> {
        let mut found = Found::default();
        let Some(rewritten) = self.mask_text(data, 0, &mut found)? else {
            return Ok(Cow::Borrowed(data));
        };
        // No values noted: the line-based fallback did it, in place already.
        if found.opaque || found.values.is_empty() {
            return Ok(Cow::Owned(rewritten));
        }
        Ok(Cow::Owned(
            replace_in_place(data, &found.values).unwrap_or(rewritten),
        ))
    }

    /// `Ok(None)` means unchanged. A trailing newline survives re-serialisation.
    fn mask_text(
        &self,
        data: &str,
        depth: usize,
        found: &mut Found,
    ) -> Result<Option<String>, SecretMaskError> {
        if !data.contains([NEUTRAL_OPEN, NEUTRAL_CLOSE]) && self.marker.is_match(data) {
            // Text masked before: decide on it as on the text before masking.
            let neutral = self.marker.replace_all(
                data,
                format!("{NEUTRAL_OPEN}${{1}}{NEUTRAL_CLOSE}").as_str(),
            );
            let masked = self.mask_text(&neutral, depth, found)?;
            return Ok(masked.map(|out| out.replace(NEUTRAL_OPEN, "[").replace(NEUTRAL_CLOSE, "]")));
        }
        let masked = self.mask_text_inner(data, depth, found)?;
        Ok(masked.map(|mut out| {
            if data.ends_with('\n') && !out.ends_with('\n') {
                out.push('\n');
            }
            out
        }))
    }

    fn mask_text_inner(
        &self,
        data: &str,
        depth: usize,
        found: &mut Found,
    ) -> Result<Option<String>, SecretMaskError> {
        if !self.applies_to(data) {
            return Ok(None);
        }
        let trimmed = data.trim();
        let pretty = trimmed.contains('\n');
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            // YAML is a superset of JSON and its mapping keeps key order,
            // which serde_json's default map would not.
            let parsed = serde_yaml::from_str::<Value>(data).ok().or_else(|| {
                serde_json::from_str::<serde_json::Value>(data)
                    .ok()
                    .and_then(|v| serde_yaml::to_value(v).ok())
            });
            if let Some(mut value) = parsed.filter(is_structured) {
                if !self.mask_value(&mut value, depth, found)? {
                    return Ok(None);
                }
                let out = if pretty {
                    serde_json::to_string_pretty(&value)
                } else {
                    serde_json::to_string(&value)
                };
                return out.map(Some).map_err(|e| SecretMaskError::Serialize {
                    format: "json",
                    reason: e.to_string(),
                });
            }
        }
        // Not JSON after all (or JSON followed by more documents): YAML.
        if let Some(mut docs) = parse_yaml_documents(data) {
            let mut changed = false;
            for doc in &mut docs {
                changed |= self.mask_value(doc, depth, found)?;
            }
            if !changed {
                return Ok(None);
            }
            let mut out = String::with_capacity(data.len());
            for (i, doc) in docs.iter().enumerate() {
                if i > 0 {
                    out.push_str("---\n");
                }
                let text = serde_yaml::to_string(doc).map_err(|e| SecretMaskError::Serialize {
                    format: "yaml",
                    reason: e.to_string(),
                })?;
                out.push_str(&text);
            }
            return Ok(Some(out));
        }
        let masked = self.mask_unparsed(data);
        if depth > 0 && masked.is_some() {
            found.opaque = true;
        }
        Ok(masked)
    }

    /// Masks Secrets inside a parsed value; returns whether anything changed.
    fn mask_value(
        &self,
        value: &mut Value,
        depth: usize,
        found: &mut Found,
    ) -> Result<bool, SecretMaskError> {
        let mut changed = false;
        match value {
            Value::Mapping(map) => {
                let kind = map.get("kind").map(|k| k.as_str().unwrap_or("").to_owned());
                let kind = kind.as_deref();
                // A mapping with apiVersion and data but no kind is a
                // manifest cut off before `kind` (kubectl orders keys
                // alphabetically, so a truncated Secret loses its kind
                // first): treat it as a Secret.
                let kindless_manifest =
                    kind.is_none() && map.get("apiVersion").is_some_and(Value::is_string);
                if kind == Some("Secret") || kindless_manifest {
                    changed |= mask_secret_fields(map, found);
                }
                if kind == Some("SecretList") {
                    // Items of a SecretList from the API server carry no kind.
                    if let Some(Value::Sequence(items)) = map.get_mut("items") {
                        for item in items {
                            if let Value::Mapping(item) = item {
                                changed |= mask_secret_fields(item, found);
                            }
                        }
                    }
                }
                for (_, v) in map.iter_mut() {
                    changed |= self.mask_value(v, depth, found)?;
                }
            }
            Value::Sequence(items) => {
                for v in items {
                    changed |= self.mask_value(v, depth, found)?;
                }
            }
            Value::Tagged(tagged) => changed |= self.mask_value(&mut tagged.value, depth, found)?,
            Value::String(s) => {
                // Manifests embedded as text: last-applied-configuration,
                // MCP wrappers that return a document as a string field.
                if depth < MAX_EMBED_DEPTH
                    && (s.contains('\n') || s.trim_start().starts_with('{'))
                    && let Some(masked) = self.mask_text(s, depth + 1, found)?
                {
                    *s = masked;
                    changed = true;
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
        Ok(changed)
    }

    /// Fallback for text that does not parse; `None` when nothing changed.
    fn mask_unparsed(&self, data: &str) -> Option<String> {
        let yaml = mask_yaml_lines(data);
        let text = yaml.as_deref().unwrap_or(data);
        match self.mask_json_text(text) {
            Some(masked) => Some(masked),
            None => yaml,
        }
    }

    /// Masks the values of every `"data": {` / `"stringData": {` object in
    /// JSON-looking text that mentions a Secret kind.
    fn mask_json_text(&self, data: &str) -> Option<String> {
        if !self.json_secret_kind.is_match(data) && !data.contains("apiVersion") {
            return None;
        }
        let mut out = String::with_capacity(data.len());
        let mut copied = 0;
        let mut changed = false;
        for open in self.json_data_open.find_iter(data) {
            if open.start() < copied {
                continue; // inside a region already rewritten
            }
            out.push_str(&data[copied..open.end()]);
            let mut pos = open.end();
            let escaped = open.as_str().starts_with('\\');
            let pair = if escaped {
                &self.json_escaped_pair
            } else {
                &self.json_pair
            };
            let quote = if escaped { "\\\"" } else { "\"" };
            while let Some(caps) = pair.captures(&data[pos..]) {
                let (Some(whole), Some(key)) = (caps.get(0), caps.get(1)) else {
                    break;
                };
                if whole.end() == 0 {
                    break;
                }
                // Keep the separator and key, replace the value.
                out.push_str(&data[pos..pos + key.end()]);
                out.push_str(quote);
                out.push_str(MASKED_SECRET_DATA);
                out.push_str(quote);
                pos += whole.end();
                changed = true;
            }
            copied = pos;
        }
        if !changed {
            return None;
        }
        out.push_str(&data[copied..]);
        Some(out)
    }
}

/// Whether a parsed document is a mapping or sequence (a bare scalar means
/// the text was prose, not a manifest).
fn is_structured(value: &Value) -> bool {
    matches!(
        value,
        Value::Mapping(_) | Value::Sequence(_) | Value::Tagged(_)
    )
}

/// Parses all YAML documents, or `None` when any fails to parse or when
/// none is a mapping/sequence.
fn parse_yaml_documents(data: &str) -> Option<Vec<Value>> {
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(data) {
        docs.push(Value::deserialize(doc).ok()?);
    }
    docs.iter().any(is_structured).then_some(docs)
}

/// Masks the `data` and `stringData` fields of a Secret mapping.
fn mask_secret_fields(map: &mut serde_yaml::Mapping, found: &mut Found) -> bool {
    let mut changed = false;
    for field in ["data", "stringData"] {
        if let Some(v) = map.get_mut(field) {
            changed |= mask_secret_field(v, found);
        }
    }
    changed
}

/// Replaces each value of a Secret's `data` / `stringData` field.
fn mask_secret_field(field: &mut Value, found: &mut Found) -> bool {
    match field {
        Value::Null => false,
        Value::Mapping(map) => {
            let mut changed = false;
            for (_, v) in map.iter_mut() {
                if !v.as_str().is_some_and(is_masked) && !v.is_null() {
                    found.note(v);
                    *v = Value::String(MASKED_SECRET_DATA.to_owned());
                    changed = true;
                }
            }
            changed
        }
        other => {
            // Not the documented shape; mask the whole field rather than guess.
            if other.as_str().is_some_and(is_masked) {
                return false;
            }
            found.note(other);
            *other = Value::String(MASKED_SECRET_DATA.to_owned());
            true
        }
    }
}

/// `data` with every occurrence of `values` replaced by the marker (quoted
/// unless a quote already opens it, as a YAML plain scalar needs);
/// overlapping occurrences are masked as one. `None` when a value is too
/// short to be replaced safely, is not in `data` as written, or survives.
fn replace_in_place(data: &str, values: &[String]) -> Option<String> {
    let mut values: Vec<&str> = values.iter().map(String::as_str).collect();
    values.sort_unstable();
    values.dedup();
    if values
        .iter()
        .any(|v| v.chars().count() < MIN_IN_PLACE_CHARS || !data.contains(v))
    {
        return None;
    }
    let mut ranges: Vec<(usize, usize)> = values
        .iter()
        .flat_map(|v| data.match_indices(v).map(|(at, m)| (at, at + m.len())))
        .collect();
    ranges.sort_unstable();
    let mut out = String::with_capacity(data.len());
    let mut copied = 0;
    for (start, end) in ranges {
        if start < copied {
            // Overlaps the occurrence just masked: mask the union.
            copied = copied.max(end);
            continue;
        }
        out.push_str(&data[copied..start]);
        if data[..start].ends_with(['"', '\'']) {
            out.push_str(MASKED_SECRET_DATA);
        } else {
            out.push('\'');
            out.push_str(MASKED_SECRET_DATA);
            out.push('\'');
        }
        copied = end;
    }
    out.push_str(&data[copied..]);
    values.iter().all(|v| !out.contains(v)).then_some(out)
}

/// One line of YAML-looking text, as far as the fallback needs to know.
struct Line<'a> {
    text: &'a str,
    /// Column of the first content character after any `- ` list markers.
    col: usize,
    /// The line starts a list item (`- key: ...`).
    list_item: bool,
    /// `key` of `key: value`, if the content looks like one.
    key: Option<&'a str>,
    /// What follows `key:` (trimmed), or the whole content.
    value: &'a str,
    /// Byte offset in `text` just past the key's `:` (0 without a key).
    head_end: usize,
    blank: bool,
    doc_sep: bool,
}

fn parse_line(raw: &str) -> Line<'_> {
    let text = raw.trim_end_matches(['\n', '\r']);
    let indent = text.len() - text.trim_start_matches(' ').len();
    let mut content = &text[indent..];
    let mut list_item = false;
    loop {
        if let Some(rest) = content.strip_prefix("- ") {
            content = rest.trim_start_matches(' ');
        } else if content == "-" {
            content = "";
        } else {
            break;
        }
        list_item = true;
    }
    let col = text.len() - content.len();
    let trimmed = content.trim();
    let blank = trimmed.is_empty() || trimmed.starts_with('#');
    let doc_sep = indent == 0 && (text == "---" || text.starts_with("--- ") || text == "...");
    let (key, value, colon) = split_key(content);
    let head_end = colon.map_or(0, |c| text.len() - content.len() + c + 1);
    Line {
        text,
        col,
        list_item,
        key,
        value,
        head_end,
        blank,
        doc_sep,
    }
}

/// Splits `key: value` (or `key:`) into key, trimmed value and the byte
/// offset of the colon; `None` key when the content is not one.
fn split_key(content: &str) -> (Option<&str>, &str, Option<usize>) {
    let bytes = content.as_bytes();
    let mut i = 0;
    if let Some(q @ (b'"' | b'\'')) = bytes.first().copied() {
        // Quoted key: up to the closing quote.
        match content[1..].find(q as char) {
            Some(end) => i = end + 2,
            None => return (None, content, None),
        }
    }
    while i < bytes.len() {
        if bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
            let key = content[..i].trim();
            if key.is_empty() || key.starts_with('#') || key.contains(": ") {
                return (None, content, None);
            }
            return (Some(key), content[i + 1..].trim(), Some(i));
        }
        i += 1;
    }
    (None, content, None)
}

fn unquote(s: &str) -> &str {
    s.trim_matches(|c| c == '"' || c == '\'')
}

/// Line-based fallback for YAML that does not parse: masks `data:` /
/// `stringData:` blocks of objects whose sibling `kind:` is `Secret`, or
/// that have an `apiVersion` and no `kind` (cut off).
fn mask_yaml_lines(data: &str) -> Option<String> {
    let lines: Vec<Line<'_>> = data.split_inclusive('\n').map(parse_line).collect();
    let raw: Vec<&str> = data.split_inclusive('\n').collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Action {
        Keep,
        MaskValue,
        Drop,
    }
    let mut actions = vec![Action::Keep; lines.len()];
    let mut changed = false;
    // Last extent handled per column: objects at one column are disjoint
    // and found in order, so this keeps the scan linear.
    let mut handled: std::collections::HashMap<usize, (usize, usize)> =
        std::collections::HashMap::new();
    for (j, line) in lines.iter().enumerate() {
        // Objects are found from their `kind` or `apiVersion` line.
        if !matches!(line.key, Some("kind" | "apiVersion")) {
            continue;
        }
        let c = line.col;
        if handled
            .get(&c)
            .is_some_and(|&(start, end)| start <= j && j < end)
        {
            continue;
        }
        let (start, end) = object_extent(&lines, j, c);
        handled.insert(c, (start, end));
        let mut kinds = lines[start..end]
            .iter()
            .filter(|l| l.col == c && l.key == Some("kind"))
            .map(|l| unquote(l.value))
            .peekable();
        // No kind at all: a manifest truncated before `kind` (see
        // mask_value). Several kinds mean the extent is ambiguous: any
        // Secret among them wins.
        let secret = kinds.peek().is_none() || kinds.any(|k| k == "Secret");
        if !secret {
            continue;
        }
        for i in start..end {
            let l = &lines[i];
            if l.col != c || !matches!(l.key, Some("data" | "stringData")) {
                continue;
            }
            if !l.value.is_empty() && !l.value.starts_with('|') && !l.value.starts_with('>') {
                // Inline value (flow mapping or scalar): mask it whole,
                // unless it is the marker already.
                if !is_masked(unquote(l.value)) {
                    actions[i] = Action::MaskValue;
                    changed = true;
                }
                continue;
            }
            if !l.value.is_empty() {
                // `data: |` block scalar: mask the key's value, drop the body.
                actions[i] = Action::MaskValue;
                changed = true;
            }
            // Children: more indented lines up to the end of the object.
            let mut child_col = None;
            for k in i + 1..end {
                let child = &lines[k];
                if child.doc_sep || (!child.blank && child.col <= c) {
                    break;
                }
                if child.blank {
                    continue;
                }
                let d = *child_col.get_or_insert(child.col);
                let entry = child.col == d && child.key.is_some() && l.value.is_empty();
                if entry && is_masked(unquote(child.value)) {
                    continue; // masked already
                }
                actions[k] = if entry {
                    Action::MaskValue
                } else {
                    Action::Drop
                };
                changed = true;
            }
        }
    }
    if !changed {
        return None;
    }
    let mut out = String::with_capacity(data.len());
    for ((line, raw), action) in lines.iter().zip(&raw).zip(&actions) {
        match action {
            Action::Keep => out.push_str(raw),
            Action::Drop => {}
            Action::MaskValue => {
                out.push_str(&line.text[..line.head_end]);
                out.push(' ');
                out.push_str(MASKED_SECRET_DATA);
                if raw.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
    }
    Some(out)
}

/// The half-open line range of the YAML object whose key at column `c` is on
/// line `j`. An object starts at its list-item line or at an `apiVersion`
/// line (kubectl prints it first); it also ends at a document separator, a
/// less indented line, or a line of prose at its column.
fn object_extent(lines: &[Line<'_>], j: usize, c: usize) -> (usize, usize) {
    let is_start = |l: &Line<'_>| l.col == c && (l.list_item || l.key == Some("apiVersion"));
    let is_boundary =
        |l: &Line<'_>| l.doc_sep || (!l.blank && (l.col < c || (l.col == c && l.key.is_none())));
    let mut start = j;
    if !is_start(&lines[j]) {
        while start > 0 {
            let p = &lines[start - 1];
            if is_boundary(p) {
                break;
            }
            start -= 1;
            if is_start(p) {
                break;
            }
        }
    }
    let mut end = j + 1;
    while end < lines.len() {
        let l = &lines[end];
        if is_boundary(l) || is_start(l) {
            break;
        }
        end += 1;
    }
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masker() -> KubernetesSecretMasker {
        KubernetesSecretMasker::new().unwrap()
    }

    #[test]
    fn yaml_secret_values_masked_keys_kept() {
        let input = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: aHVudGVyMg==\n  username: YWRtaW4=\ntype: Opaque\n";
        let out = masker().mask(input).unwrap();
        assert!(!out.contains("aHVudGVyMg=="), "{out}");
        assert!(!out.contains("YWRtaW4="), "{out}");
        assert!(out.contains("password:"), "{out}");
        assert!(out.contains("name: db"), "{out}");
        assert!(out.contains(MASKED_SECRET_DATA));
    }

    #[test]
    fn configmap_untouched_and_borrowed() {
        let input = "apiVersion: v1\nkind: ConfigMap\ndata:\n  SecretName: not-a-secret\n";
        let out = masker().mask(input).unwrap();
        assert!(matches!(out, Cow::Borrowed(_)));
    }

    #[test]
    fn json_keeps_key_order_and_compactness() {
        let input = r#"{"apiVersion":"v1","data":{"token":"c2VjcmV0"},"kind":"Secret","metadata":{"name":"x"}}"#;
        let out = masker().mask(input).unwrap();
        assert_eq!(
            out,
            r#"{"apiVersion":"v1","data":{"token":"[MASKED_SECRET_DATA]"},"kind":"Secret","metadata":{"name":"x"}}"#
        );
    }

    #[test]
    fn unparseable_yaml_falls_back_per_object() {
        // A tab in the indentation and a truncated tail make this invalid YAML.
        let input = "items:\n- apiVersion: v1\n  data:\n    keep: visible-config\n  kind: ConfigMap\n- apiVersion: v1\n  data:\n    password: c3VwZXJzZWNyZXQ=\n    multi: |\n      line-one-secret\n  kind: Secret\n  metadata:\n\t  name: broken\n  \"unterminated";
        assert!(parse_yaml_documents(input).is_none());
        let out = masker().mask(input).unwrap();
        assert!(out.contains("keep: visible-config"), "{out}");
        assert!(!out.contains("c3VwZXJzZWNyZXQ="), "{out}");
        assert!(!out.contains("line-one-secret"), "{out}");
        assert!(out.contains("password: [MASKED_SECRET_DATA]"), "{out}");
    }

    #[test]
    fn secret_list_items_without_kind() {
        let input = r#"{"kind":"SecretList","apiVersion":"v1","items":[{"metadata":{"name":"a"},"data":{"k":"c2VjcmV0LWE="}}]}"#;
        let out = masker().mask(input).unwrap();
        assert!(!out.contains("c2VjcmV0LWE="), "{out}");
        assert!(out.contains(r#""name":"a""#), "{out}");
    }

    #[test]
    fn manifest_cut_before_kind_is_masked() {
        let input = "apiVersion: v1\ndata:\n  password: aHVudGVyMg==\n  token: ZXlKaGJH";
        let out = masker().mask(input).unwrap();
        assert!(!out.contains("aHVudGVyMg=="), "{out}");
        assert!(!out.contains("ZXlKaGJH"), "{out}");
        // But an ordinary kinded object keeps its data.
        let cm = "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n";
        assert!(matches!(masker().mask(cm).unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn fallback_handles_multibyte_and_trailing_spaces() {
        let input = "kind: Secret\ndata:\n  pässwörd: wért   \n  ключ: значение\t\n\tbroken";
        let out = masker().mask(input).unwrap();
        assert!(!out.contains("wért"), "{out}");
        assert!(!out.contains("значение"), "{out}");
        assert!(out.contains("ключ: [MASKED_SECRET_DATA]"), "{out}");
    }

    #[test]
    fn fallback_is_linear_on_many_kinds() {
        // 40k `kind:` lines in one unparseable blob must not go quadratic.
        let mut input = String::from("\tbroken: [\n");
        for i in 0..40_000 {
            input.push_str(&format!("kind: Secret\ndata:\n  k{i}: djE=\n"));
        }
        let start = std::time::Instant::now();
        let out = masker().mask(&input).unwrap();
        assert!(!out.contains("djE="));
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn json_then_yaml_documents() {
        let input = "{\"kind\": \"ConfigMap\", \"data\": {\"a\": \"keep-me\"}}\n---\napiVersion: v1\nkind: Secret\ndata:\n  k: c2VjcmV0\n";
        let out = masker().mask(input).unwrap();
        assert!(!out.contains("c2VjcmV0"), "{out}");
        assert!(out.contains("keep-me"), "{out}");
    }

    #[test]
    fn truncated_json_falls_back() {
        let input =
            r#"{"apiVersion":"v1","kind":"Secret","data":{"a":"c2VjcmV0MQ==","b":"c2VjcmV0Mg"#;
        let out = masker().mask(input).unwrap();
        assert!(!out.contains("c2VjcmV0MQ=="), "{out}");
        assert!(!out.contains("c2VjcmV0Mg"), "{out}");
        assert!(out.contains(r#""a":"[MASKED_SECRET_DATA]""#), "{out}");
    }

    #[test]
    fn in_place_keeps_the_text_as_written() {
        // Comments, quoting, indentation and the surrounding prose stay.
        let input = "Here is it:\napiVersion: v1\nkind: Secret   # rotated\ndata:\n  a: \"c2VjcmV0LWE=\"\n  b: c2VjcmV0LWI=\n";
        let out = masker().mask_in_place(input).unwrap();
        assert_eq!(
            out,
            "Here is it:\napiVersion: v1\nkind: Secret   # rotated\ndata:\n  a: \"[MASKED_SECRET_DATA]\"\n  b: '[MASKED_SECRET_DATA]'\n"
        );
        // Masking again changes nothing.
        assert!(matches!(
            masker().mask_in_place(&out).unwrap(),
            Cow::Borrowed(_)
        ));
        // Pretty JSON keeps its own layout.
        let json = "{\n    \"kind\": \"Secret\",\n    \"data\": {\"k\": \"dmFsdWUtanNvbg==\"}\n}";
        let out = masker().mask_in_place(json).unwrap();
        assert_eq!(out, json.replace("dmFsdWUtanNvbg==", MASKED_SECRET_DATA));
    }

    #[test]
    fn earlier_markers_do_not_change_the_decision() {
        // Unmasked, this parses as YAML and holds no Secret; with a regex
        // marker where `Aa=` was, it must not take the unparsed path (which
        // masks any `data` object of text mentioning a Secret).
        let before = "A\\\"data\\\":{\\\"kind\\\":\\\"Secret\\\"- : Aa=---\n";
        let after = before.replace("Aa=", "[MASKED_BASE64_VALUE]");
        assert!(matches!(masker().mask(before).unwrap(), Cow::Borrowed(_)));
        assert!(matches!(masker().mask(&after).unwrap(), Cow::Borrowed(_)));
        // A Secret masked earlier is left as it is, also by the line scanner.
        let masked = "kind: Secret\ndata:\n  k: [MASKED_SECRET_DATA]\n\tbroken: [\n";
        assert!(matches!(masker().mask(masked).unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn in_place_falls_back_to_rewriting() {
        // A block scalar is not verbatim in the text; a short value could be
        // any word: the document is written out again, masked.
        for input in [
            "kind: Secret\ndata:\n  cert: |\n    line-one-secret\n    line-two-secret\n",
            "kind: Secret\ndata:\n  pin: abc\nnote: abc is fine\n",
        ] {
            let out = masker().mask_in_place(input).unwrap();
            assert_eq!(out, masker().mask(input).unwrap(), "{input}");
            assert!(out.contains(MASKED_SECRET_DATA), "{out}");
        }
    }

    #[test]
    fn escaped_json_fallback() {
        let input =
            r#"not json at all: {\"kind\":\"Secret\",\"data\":{\"k\":\"dmFsdWU=\"}} trailing"#;
        let out = masker().mask(input).unwrap();
        assert!(!out.contains("dmFsdWU="), "{out}");
    }
}
