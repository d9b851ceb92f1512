//! Property tests of the ReAct parser: whatever a model writes, parsing
//! never panics and never invents text; a well-formed response round-trips
//! (thought, tool, JSON arguments, final answer); nothing after a
//! model-written `Observation:` can change what is done.
//!
//! `PROPTEST_CASES=5000 cargo test -p tarsy-engine --test react_properties`
//! explores more than the 64 cases CI runs.

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Value;
use tarsy_core::ToolDefinition;
use tarsy_engine::react_parser::{ParsedReactResponse, ReactOutcome, ReactStep, parse};

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

/// Text assembled from what models write: headers in their many
/// spellings, fences, observations, tool names, JSON and YAML bits, prose.
fn react_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        select(vec![
            "Thought:",
            "Thought",
            "Action:",
            "Action Input:",
            "Final Answer:",
            "**Action:**",
            "**Action Input**:",
            "### Final Answer",
            "final answer :",
            "action input:",
            "Observation:",
            "[Based on",
            "```",
            "```json",
            "```yaml",
            "`",
            "\n",
            "\n\n",
            " ",
            "  ",
            "\t",
            ". ",
            "! ",
            "- ",
            "kubernetes.pods_list",
            "server__tool",
            "None",
            "N/A",
            "{\"namespace\": \"shop\"}",
            "{",
            "}",
            "namespace: shop",
            "key=value",
            "\"",
            "'",
            "*",
            "#",
            "Please specify",
            "()",
        ])
        .prop_map(str::to_string),
        "\\PC{1,12}",
        "[a-z]{1,8}\\.[a-z_]{1,8}",
    ];
    prop::collection::vec(piece, 0..50).prop_map(|p| p.concat())
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof!["(\\PC|\\n|\\r|\\t|\\x00){0,400}", react_like(),]
}

/// Every line of `part` occurs in `original`: the parser only selects,
/// trims and dedents what the model wrote.
fn lines_come_from(part: &str, original: &str) -> Result<(), TestCaseError> {
    for line in part.lines() {
        prop_assert!(
            original.contains(line),
            "invented line {:?} (not in the response)",
            line
        );
    }
    Ok(())
}

fn tools() -> Vec<ToolDefinition> {
    ["kubernetes.pods_list", "server.tool", "prometheus.query"]
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).into(),
            description: "a tool".into(),
            parameters_schema: "{}".into(),
        })
        .collect()
}

/// The invariants every parse satisfies.
fn check_invariants(text: &str, parsed: &ParsedReactResponse) -> Result<(), TestCaseError> {
    if let Some(thought) = &parsed.thought {
        prop_assert!(
            !thought.is_empty() && thought.trim() == thought,
            "thought {thought:?}"
        );
        lines_come_from(thought, text)?;
    }
    prop_assert_eq!(parsed.found.action_input, parsed.raw_action_input.is_some());
    match &parsed.outcome {
        ReactOutcome::ToolCall { action, input } => {
            prop_assert!(action.contains('.'), "tool call to {action:?}");
            prop_assert!(parsed.found.action && parsed.found.action_input);
            prop_assert!(text.contains(action.as_str()), "invented tool {action:?}");
            lines_come_from(input, text)?;
        }
        ReactOutcome::InvalidToolName {
            action,
            input,
            message,
        } => {
            prop_assert!(!action.contains('.') && !message.is_empty());
            prop_assert!(text.contains(action.as_str()), "invented tool {action:?}");
            lines_come_from(input, text)?;
        }
        ReactOutcome::FinalAnswer(answer) => {
            prop_assert!(!answer.is_empty() && parsed.found.final_answer);
            lines_come_from(answer, text)?;
        }
        ReactOutcome::Malformed => {}
    }
    // The controller always gets a step it can act on.
    match parsed.step(&tools()) {
        ReactStep::CallTool { name, .. } => {
            prop_assert!(tools().iter().any(|t| t.name == name), "called {name:?}")
        }
        ReactStep::FinalAnswer(answer) => prop_assert!(!answer.is_empty()),
        ReactStep::UnknownTool {
            requested,
            observation,
        } => {
            prop_assert!(observation.contains(requested.as_str()), "{observation}");
            prop_assert!(
                observation.contains("kubernetes.pods_list"),
                "tools listed: {observation}"
            );
        }
        ReactStep::FormatError { feedback } => prop_assert!(!feedback.trim().is_empty()),
    }
    Ok(())
}

/// A line of thought or answer text that contains no header, no
/// observation and no fence.
fn plain_line() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9 ,;()'é中<>=%-]{0,50}"
        .prop_map(|l| l.trim_end().to_string())
        .prop_filter("header words", |l| {
            let lower = l.to_lowercase();
            !["action", "answer", "thought", "observation"]
                .iter()
                .any(|w| lower.contains(w))
        })
}

fn plain_text() -> impl Strategy<Value = String> {
    prop::collection::vec(plain_line(), 1..5).prop_map(|l| l.join("\n"))
}

/// Any JSON object (keys and strings in arbitrary Unicode).
fn json_object() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Decimals as people write them: serde_json parses long mantissas
        // to the nearest float only with its `float_roundtrip` feature.
        (any::<i32>(), 0..4i32).prop_map(|(m, e)| Value::from(f64::from(m) / 10f64.powi(e))),
        "(\\PC|\\n|\\t){0,20}".prop_map(Value::String),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map("\\PC{0,12}", value, 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// How a model spells the headers.
fn spelling() -> impl Strategy<Value = usize> {
    0..4usize
}

fn header(name: &str, spelling: usize) -> String {
    match spelling {
        0 => format!("{name}:"),
        1 => format!("**{name}:**"),
        2 => format!("{}:", name.to_lowercase()),
        _ => format!("**{name}**:"),
    }
}

proptest! {
    #![proptest_config(config())]

    /// Whatever the model wrote: no panic, every invariant holds, and the
    /// same text always parses the same way.
    #[test]
    fn any_response_parses_without_inventing(text in any_text()) {
        let parsed = parse(&text);
        check_invariants(&text, &parsed)?;
        prop_assert_eq!(parse(&text), parsed);
    }

    /// Thought, tool and JSON arguments written in the format (any header
    /// spelling, compact or pretty JSON, with or without a fence) come back
    /// exactly, and the step calls that tool with those arguments — also
    /// when the model writes the function-calling name `server__tool`.
    #[test]
    fn tool_calls_round_trip(
        thought in plain_text(),
        tool in select(vec!["kubernetes.pods_list", "server.tool", "prometheus.query"]),
        underscored in any::<bool>(),
        args in json_object(),
        pretty in any::<bool>(),
        fenced in any::<bool>(),
        spelling in spelling(),
        backticks in any::<bool>(),
    ) {
        let json = if pretty {
            serde_json::to_string_pretty(&args).unwrap()
        } else {
            serde_json::to_string(&args).unwrap()
        };
        let written_tool = if underscored { tool.replacen('.', "__", 1) } else { tool.to_string() };
        let name = if backticks { format!("`{written_tool}`") } else { written_tool.clone() };
        let input = if fenced { format!("\n```json\n{json}\n```") } else { format!(" {json}") };
        let text = format!(
            "{} {thought}\n{} {name}\n{}{input}",
            header("Thought", spelling),
            header("Action", spelling),
            header("Action Input", spelling),
        );
        let parsed = parse(&text);
        check_invariants(&text, &parsed)?;
        prop_assert_eq!(parsed.thought.as_deref(), Some(thought.trim()));
        prop_assert_eq!(parsed.action(), Some(written_tool.as_str()));
        prop_assert_eq!(parsed.action_input(), Some(json.as_str()));
        match parsed.step(&tools()) {
            ReactStep::CallTool { name, input } => {
                prop_assert_eq!(name, tool);
                let back: Value = serde_json::from_str(&input).unwrap();
                prop_assert_eq!(back, args);
            }
            other => prop_assert!(false, "expected a tool call, got {:?}", other),
        }
    }

    /// A final answer (several lines, Markdown lists included) comes back
    /// whole, with the thought before it.
    #[test]
    fn final_answers_round_trip(
        thought in plain_text(),
        answer in prop::collection::vec(
            prop_oneof![plain_line(), plain_line().prop_map(|l| format!("- {l}"))],
            1..8,
        ),
        spelling in spelling(),
    ) {
        let answer = answer.join("\n");
        let text = format!(
            "{} {thought}\n{}\n{answer}\n",
            header("Thought", spelling),
            header("Final Answer", spelling),
        );
        let parsed = parse(&text);
        check_invariants(&text, &parsed)?;
        prop_assert_eq!(parsed.thought.as_deref(), Some(thought.trim()));
        prop_assert_eq!(parsed.final_answer(), Some(answer.trim()));
        prop_assert_eq!(parsed.step(&tools()), ReactStep::FinalAnswer(answer.trim().to_string()));
    }

    /// Everything after a model-written `Observation:` is ignored: an
    /// invented tool result (with actions or answers inside) cannot change
    /// the call the model asked for.
    #[test]
    fn nothing_after_a_fake_observation_counts(
        thought in plain_text(),
        args in json_object(),
        // Minus the phrases of TARSy's own prompts: an `Observation:` line
        // quoting them is an echo of a prompt, and parsing goes on.
        junk in any_text().prop_filter("prompt echo", |j| {
            !["Please specify", "what Action you want to take", "Error in reasoning"]
                .iter()
                .any(|m| j.contains(m))
        }),
    ) {
        let honest = format!(
            "Thought: {thought}\nAction: server.tool\nAction Input: {}",
            serde_json::to_string(&args).unwrap()
        );
        let with_junk = format!("{honest}\nObservation: {junk}");
        let expected = parse(&honest);
        let parsed = parse(&with_junk);
        check_invariants(&with_junk, &parsed)?;
        prop_assert!(parsed.hallucinated_observation);
        prop_assert_eq!(&parsed.outcome, &expected.outcome);
        prop_assert_eq!(&parsed.thought, &expected.thought);
    }
}
