//! The ActionInput parse cascade: turns what a model wrote as a tool's input
//! into MCP call arguments. Function-calling models send a JSON object; ReAct
//! models write whatever they like, so the cascade tries, first success wins:
//!
//! 1. a JSON object → its fields;
//! 2. any other JSON value (string, number, array, ...) → `{"input": value}`;
//! 3. YAML with arrays or nested maps → that map (flat YAML is left to 4,
//!    which understands commas and `=`);
//! 4. `key: value` / `key=value` pairs separated by commas or newlines, with
//!    type coercion (`true`/`false`, `null`/`none`, integers, floats);
//! 5. anything else → `{"input": "<the text>"}`.

use serde_json::{Map, Number, Value};

/// Arguments of one tool call.
pub type Arguments = Map<String, Value>;

/// Key used when the input is a single value rather than named parameters.
pub const SINGLE_INPUT_KEY: &str = "input";

/// Which step of the cascade produced the arguments (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// Nothing was given.
    Empty,
    /// A JSON object.
    JsonObject,
    /// A JSON value that is not an object.
    JsonScalar,
    /// YAML with structure.
    Yaml,
    /// Key-value pairs.
    KeyValue,
    /// Raw text.
    Raw,
}

/// Parses ActionInput text into tool arguments; never fails (raw text is the
/// last resort).
pub fn parse_action_input(input: &str) -> Arguments {
    parse_action_input_with_format(input).0
}

/// [`parse_action_input`], also telling which step matched.
pub fn parse_action_input_with_format(input: &str) -> (Arguments, InputFormat) {
    let text = strip_code_fence(input.trim());
    if text.is_empty() {
        return (Map::new(), InputFormat::Empty);
    }
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return match value {
            Value::Object(map) => (map, InputFormat::JsonObject),
            other => (single(other), InputFormat::JsonScalar),
        };
    }
    if let Some(map) = parse_structured_yaml(text) {
        return (map, InputFormat::Yaml);
    }
    if let Some(map) = parse_key_values(text) {
        return (map, InputFormat::KeyValue);
    }
    (single(Value::String(text.to_owned())), InputFormat::Raw)
}

fn single(value: Value) -> Arguments {
    let mut map = Map::new();
    map.insert(SINGLE_INPUT_KEY.to_owned(), value);
    map
}

/// Models often wrap input in a Markdown code fence; the fence is not input.
fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return text;
    };
    // Drop an info string such as `json` or `yaml` on the opening line.
    match body.split_once('\n') {
        Some((info, inner)) if !info.trim().contains(' ') => inner.trim(),
        _ => body.trim(),
    }
}

/// YAML wins only when it carries structure (a list or a nested map): flat
/// `a: 1, b: 2` is valid YAML with the wrong meaning (one key `a`).
fn parse_structured_yaml(text: &str) -> Option<Arguments> {
    let value: serde_yaml::Value = serde_yaml::from_str(text).ok()?;
    let serde_yaml::Value::Mapping(mapping) = value else {
        return None;
    };
    let structured = mapping.values().any(|v| {
        matches!(
            v,
            serde_yaml::Value::Sequence(_) | serde_yaml::Value::Mapping(_)
        )
    });
    if !structured {
        return None;
    }
    let mut map = Map::new();
    for (k, v) in mapping {
        map.insert(yaml_key(&k)?, yaml_to_json(v)?);
    }
    Some(map)
}

fn yaml_key(key: &serde_yaml::Value) -> Option<String> {
    match key {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn yaml_to_json(value: serde_yaml::Value) -> Option<Value> {
    Some(match value {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                Value::Number(Number::from_f64(n.as_f64()?)?)
            }
        }
        serde_yaml::Value::String(s) => Value::String(s),
        serde_yaml::Value::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(yaml_to_json)
                .collect::<Option<Vec<_>>>()?,
        ),
        serde_yaml::Value::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                out.insert(yaml_key(&k)?, yaml_to_json(v)?);
            }
            Value::Object(out)
        }
        serde_yaml::Value::Tagged(t) => yaml_to_json(t.value)?,
    })
}

/// `key: value` or `key=value` pairs, separated by commas or newlines. Commas
/// inside quotes or brackets (`up{job="a",env="b"}`, `by (pod, ns)`) do not
/// separate. Every piece must be a pair with a plausible key, else this is not
/// key-value input.
fn parse_key_values(text: &str) -> Option<Arguments> {
    let mut map = Map::new();
    for piece in split_top_level(text) {
        let piece = piece.trim();
        if piece.is_empty() {
            continue;
        }
        let (key, value) = split_pair(piece)?;
        map.insert(key.to_owned(), coerce(value));
    }
    (!map.is_empty()).then_some(map)
}

fn split_top_level(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut depth: i32 = 0;
    let mut quote: Option<char> = None;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                ',' | '\n' if depth <= 0 => {
                    pieces.push(&text[start..i]);
                    start = i + c.len_utf8();
                }
                _ => {}
            },
        }
    }
    pieces.push(&text[start..]);
    pieces
}

/// Splits at the first `:` or `=`, whichever comes first; the key must look
/// like a parameter name.
fn split_pair(piece: &str) -> Option<(&str, &str)> {
    let idx = piece.find([':', '='])?;
    let key = piece[..idx].trim();
    let key = key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or(key);
    let valid = !key.is_empty()
        && key.len() <= 64
        && key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    valid.then(|| (key, piece[idx + 1..].trim()))
}

fn coerce(raw: &str) -> Value {
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| raw.strip_prefix(*q).and_then(|r| r.strip_suffix(*q)));
    if let Some(s) = unquoted {
        // Quotes mean "this is a string", whatever it looks like.
        return Value::String(s.to_owned());
    }
    match raw.to_ascii_lowercase().as_str() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" | "none" | "nil" => return Value::Null,
        _ => {}
    }
    if let Ok(i) = raw.parse::<i64>() {
        return Value::from(i);
    }
    if raw.contains(['.', 'e', 'E'])
        && let Ok(f) = raw.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(input: &str) -> (Value, InputFormat) {
        let (map, fmt) = parse_action_input_with_format(input);
        (Value::Object(map), fmt)
    }

    #[test]
    fn cascade_table() {
        use InputFormat::*;
        let cases: Vec<(&str, Value, InputFormat)> = vec![
            // --- empty
            ("", json!({}), Empty),
            ("   \n\t ", json!({}), Empty),
            // --- 1. JSON objects
            (
                r#"{"namespace":"default"}"#,
                json!({"namespace":"default"}),
                JsonObject,
            ),
            (
                r#"  {"name": "pod-1", "limit": 5, "all": true}  "#,
                json!({"name":"pod-1","limit":5,"all":true}),
                JsonObject,
            ),
            (r#"{"a":{"b":[1,2]}}"#, json!({"a":{"b":[1,2]}}), JsonObject),
            ("{}", json!({}), JsonObject),
            (
                "```json\n{\"namespace\": \"kube-system\"}\n```",
                json!({"namespace":"kube-system"}),
                JsonObject,
            ),
            ("```\n{\"x\": 1}\n```", json!({"x":1}), JsonObject),
            // --- 2. JSON non-objects
            (
                r#""just a string""#,
                json!({"input":"just a string"}),
                JsonScalar,
            ),
            ("42", json!({"input":42}), JsonScalar),
            ("3.5", json!({"input":3.5}), JsonScalar),
            ("true", json!({"input":true}), JsonScalar),
            ("null", json!({"input":null}), JsonScalar),
            (r#"["a","b"]"#, json!({"input":["a","b"]}), JsonScalar),
            // --- 3. structured YAML
            (
                "namespace: default\nlabels:\n  app: web\n  tier: db",
                json!({"namespace":"default","labels":{"app":"web","tier":"db"}}),
                Yaml,
            ),
            (
                "names:\n  - pod-a\n  - pod-b\ncount: 2",
                json!({"names":["pod-a","pod-b"],"count":2}),
                Yaml,
            ),
            ("items: [1, 2, 3]", json!({"items":[1,2,3]}), Yaml),
            (
                "filter: {kind: Pod}",
                json!({"filter":{"kind":"Pod"}}),
                Yaml,
            ),
            (
                "```yaml\nresources:\n  - pods\n```",
                json!({"resources":["pods"]}),
                Yaml,
            ),
            // --- 4. key-value with coercion
            (
                "namespace: default",
                json!({"namespace":"default"}),
                KeyValue,
            ),
            (
                "namespace: default, name: pod-1",
                json!({"namespace":"default","name":"pod-1"}),
                KeyValue,
            ),
            (
                "namespace=default,name=pod-1",
                json!({"namespace":"default","name":"pod-1"}),
                KeyValue,
            ),
            (
                "namespace: default\nname: pod-1\n",
                json!({"namespace":"default","name":"pod-1"}),
                KeyValue,
            ),
            (
                "verbose: true, dry_run: FALSE, limit: 10, ratio: 0.25",
                json!({"verbose":true,"dry_run":false,"limit":10,"ratio":0.25}),
                KeyValue,
            ),
            (
                "since: null, until: None",
                json!({"since":null,"until":null}),
                KeyValue,
            ),
            ("offset=-3", json!({"offset":-3}), KeyValue),
            ("big: 1e3", json!({"big":1000.0}), KeyValue),
            (
                r#"version: "1.10", enabled: 'true'"#,
                json!({"version":"1.10","enabled":"true"}),
                KeyValue,
            ),
            (
                "url: http://prom:9090/api",
                json!({"url":"http://prom:9090/api"}),
                KeyValue,
            ),
            (
                r#"query: up{job="api",env="prod"}"#,
                json!({"query":r#"up{job="api",env="prod"}"#}),
                KeyValue,
            ),
            (
                "query: sum(rate(x[5m])) by (pod, ns), step: 30",
                json!({"query":"sum(rate(x[5m])) by (pod, ns)","step":30}),
                KeyValue,
            ),
            (
                r#"message: "hello, world", level: warn"#,
                json!({"message":"hello, world","level":"warn"}),
                KeyValue,
            ),
            (
                "label_selector=app=web",
                json!({"label_selector":"app=web"}),
                KeyValue,
            ),
            ("pod.name: x", json!({"pod.name":"x"}), KeyValue),
            ("name: pod-1,", json!({"name":"pod-1"}), KeyValue),
            ("id: 007", json!({"id":7}), KeyValue),
            ("tag: v1.2.3", json!({"tag":"v1.2.3"}), KeyValue),
            ("empty:", json!({"empty":""}), KeyValue),
            // --- 5. raw strings
            ("kube-system", json!({"input":"kube-system"}), Raw),
            (
                "list all pods please",
                json!({"input":"list all pods please"}),
                Raw,
            ),
            (
                "pods in default, then services",
                json!({"input":"pods in default, then services"}),
                Raw,
            ),
            (
                "name: pod, and more",
                json!({"input":"name: pod, and more"}),
                Raw,
            ),
            ("2 + 2 = 4", json!({"input":"2 + 2 = 4"}), Raw),
            (": nothing", json!({"input":": nothing"}), Raw),
            ("{not json", json!({"input":"{not json"}), Raw),
            ("  padded raw  ", json!({"input":"padded raw"}), Raw),
        ];
        for (input, expected, format) in cases {
            let (got, got_format) = parsed(input);
            assert_eq!(got, expected, "input {input:?}");
            assert_eq!(got_format, format, "input {input:?}");
        }
    }

    #[test]
    fn non_ascii_text_survives() {
        let (got, fmt) = parsed("message: naïve café, count: 2");
        assert_eq!(fmt, InputFormat::KeyValue);
        assert_eq!(got, json!({"message":"naïve café","count":2}));
    }
}
