//! Property tests of the ActionInput cascade (what a ReAct model wrote as
//! `Action Input:` → MCP tool arguments): any text becomes arguments
//! without panicking or inventing content; JSON objects round-trip exactly,
//! fenced or not; other JSON values, `key: value` lists and plain text land
//! where the cascade documents.
//!
//! `PROPTEST_CASES=5000 cargo test -p tarsy-mcp --test action_input_properties`
//! explores more than the 64 cases CI runs.

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};
use tarsy_mcp::params::{InputFormat, SINGLE_INPUT_KEY, parse_action_input_with_format};

/// 64 cases unless `PROPTEST_CASES` asks for more; failures are not
/// written into the source tree (the shrunk input is printed).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Decimals as people write them: serde_json parses long mantissas
        // to the nearest float only with its `float_roundtrip` feature.
        (any::<i32>(), 0..4i32).prop_map(|(m, e)| Value::from(f64::from(m) / 10f64.powi(e))),
        "(\\PC|\\n|\\t|\\x00){0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("(\\PC|\\n){0,12}", json_value(), 0..5)
        .prop_map(|m| m.into_iter().collect())
}

/// Every string in the arguments (keys and values) occurs in the input: the
/// cascade may coerce types but never invents text.
fn strings_come_from(value: &Value, input: &str) -> Result<(), TestCaseError> {
    match value {
        Value::String(s) => prop_assert!(input.contains(s.as_str()), "invented {s:?}"),
        Value::Array(items) => {
            for v in items {
                strings_come_from(v, input)?;
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                prop_assert!(input.contains(k.as_str()), "invented key {k:?}");
                strings_come_from(v, input)?;
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
    Ok(())
}

/// Text models write as Action Input: JSON, YAML and key-value bits,
/// fences, quotes, brackets, prose.
fn input_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        select(vec![
            "{",
            "}",
            "[",
            "]",
            "(",
            ")",
            "\"",
            "'",
            "`",
            "```",
            "```json\n",
            "```yaml\n",
            ":",
            ": ",
            "=",
            ",",
            ", ",
            "\n",
            "  ",
            "- ",
            "namespace",
            "name",
            "true",
            "None",
            "null",
            "42",
            "-3",
            "1e3",
            "0.25",
            "pod-1",
            "up{job=\"a\",env=\"b\"}",
            "&anchor",
            "*anchor",
            "!!str",
            "? ",
            "|",
            ">",
            "#",
        ])
        .prop_map(str::to_string),
        "\\PC{1,8}",
        "[a-z_]{1,8}",
    ];
    prop::collection::vec(piece, 0..30).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(config())]

    /// Any text: no panic, and only an empty input (or an empty fence or
    /// object) gives no arguments; a single input is the text itself.
    #[test]
    fn any_input_becomes_arguments(text in prop_oneof!["(\\PC|\\n|\\t|\\x00){0,200}", input_like()]) {
        let (args, format) = parse_action_input_with_format(&text);
        if text.trim().is_empty() {
            prop_assert_eq!(format, InputFormat::Empty);
        }
        if format == InputFormat::Empty {
            prop_assert!(args.is_empty());
        }
        if format == InputFormat::Raw {
            let raw = args[SINGLE_INPUT_KEY].as_str().unwrap();
            prop_assert!(text.contains(raw) && !raw.is_empty(), "raw {raw:?}");
            prop_assert_eq!(args.len(), 1);
        }
        if matches!(format, InputFormat::KeyValue | InputFormat::Yaml) {
            prop_assert!(!args.is_empty());
        }
        if format == InputFormat::KeyValue {
            // Key-value parsing only slices the text (JSON and YAML unescape).
            strings_come_from(&Value::Object(args.clone()), &text)?;
        }
        prop_assert_eq!(parse_action_input_with_format(&text), (args, format));
    }

    /// A JSON object — compact or pretty, fenced or not, padded — is the
    /// arguments, exactly.
    #[test]
    fn json_objects_round_trip(
        object in json_object(),
        pretty in any::<bool>(),
        fence in select(vec!["", "```\n", "```json\n"]),
        pad in select(vec!["", " ", "\n", "\t \n"]),
    ) {
        let value = Value::Object(object.clone());
        let json = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            value.to_string()
        };
        let text = if fence.is_empty() {
            format!("{pad}{json}{pad}")
        } else {
            format!("{pad}{fence}{json}\n```{pad}")
        };
        let (args, format) = parse_action_input_with_format(&text);
        prop_assert_eq!(format, InputFormat::JsonObject);
        prop_assert_eq!(args, object);
    }

    /// Any other JSON value is the single `input` argument.
    #[test]
    fn json_scalars_are_the_single_input(value in json_value().prop_filter("not an object", |v| !v.is_object())) {
        let (args, format) = parse_action_input_with_format(&value.to_string());
        prop_assert_eq!(format, InputFormat::JsonScalar);
        prop_assert_eq!(args.len(), 1);
        prop_assert_eq!(&args[SINGLE_INPUT_KEY], &value);
    }

    /// `key: value` / `key=value` lists, separated by commas or newlines,
    /// give those keys with their values coerced: integers and booleans
    /// become JSON numbers and booleans, quoted text stays text (commas
    /// inside quotes included), bare words stay words.
    #[test]
    fn key_value_lists_round_trip(
        pairs in prop::collection::btree_map("[a-z_][a-z0-9_.-]{0,12}", kv_value(), 1..6),
        sep in select(vec![": ", "=", ":"]),
        joiner in select(vec![", ", ",", "\n"]),
    ) {
        let text = pairs
            .iter()
            .map(|(k, (written, _))| format!("{k}{sep}{written}"))
            .collect::<Vec<_>>()
            .join(joiner);
        let (args, format) = parse_action_input_with_format(&text);
        prop_assert_eq!(format, InputFormat::KeyValue, "{}", text);
        let expected: Map<String, Value> =
            pairs.into_iter().map(|(k, (_, v))| (k, v)).collect();
        prop_assert_eq!(args, expected, "{}", text);
    }

    /// Plain words (no JSON, no `key: value`) are passed on as the single
    /// `input`, trimmed, as the model wrote them.
    #[test]
    fn plain_text_is_the_single_input(
        text in "[A-Za-zé中][A-Za-z0-9é中 ,.!?-]{0,60}"
            .prop_filter("JSON", |t| serde_json::from_str::<Value>(t).is_err()),
    ) {
        let (args, format) = parse_action_input_with_format(&format!("  {text}\n"));
        prop_assert_eq!(format, InputFormat::Raw);
        prop_assert_eq!(Value::Object(args), json!({ SINGLE_INPUT_KEY: text.trim() }));
    }
}

/// A value as written, and what it must become.
fn kv_value() -> impl Strategy<Value = (String, Value)> {
    prop_oneof![
        any::<i32>().prop_map(|n| (n.to_string(), Value::from(n))),
        any::<bool>().prop_map(|b| (b.to_string(), Value::Bool(b))),
        // Quoted: text whatever it looks like, commas and colons included.
        "[A-Za-z0-9 ,:=._é-]{0,20}".prop_map(|s| (format!("\"{s}\""), Value::String(s))),
        // Bare words (not numbers, booleans or null spellings).
        "[a-z][a-z0-9._/-]{0,15}"
            .prop_filter("keyword", |w| {
                !["true", "false", "null", "none", "nil"].contains(&w.as_str())
                    && w.parse::<f64>().is_err()
            })
            .prop_map(|w| (w.clone(), Value::String(w))),
    ]
}
