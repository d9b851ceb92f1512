//! Table-driven tests of the ReAct parser and its feedback messages.

use tarsy_core::{ToolDefinition, ToolResult};

use super::*;

/// Expected outcome of one case.
enum Want {
    Tool(&'static str, &'static str),
    Final(&'static str),
    Invalid(&'static str),
    /// Malformed with these sections found: thought, action, action_input, final_answer.
    Malformed(bool, bool, bool, bool),
}

/// Expected thought.
enum Th {
    Any,
    None,
    Is(&'static str),
}

struct Case {
    name: &'static str,
    text: &'static str,
    want: Want,
    thought: Th,
}

const fn case(name: &'static str, text: &'static str, want: Want, thought: Th) -> Case {
    Case {
        name,
        text,
        want,
        thought,
    }
}

use Th::{Any, Is};
use Want::{Final, Invalid, Malformed, Tool};

const CASES: &[Case] = &[
    // --- well-formed -----------------------------------------------------
    case(
        "standard tool call",
        "Thought: I need to see the pods.\nAction: kubernetes.pods_list\nAction Input: {\"namespace\": \"shop\"}",
        Tool("kubernetes.pods_list", "{\"namespace\": \"shop\"}"),
        Is("I need to see the pods."),
    ),
    case(
        "standard final answer",
        "Thought: I have enough.\nFinal Answer: The root cause is an OOM kill.",
        Final("The root cause is an OOM kill."),
        Is("I have enough."),
    ),
    case(
        "multi-line final answer keeps its structure",
        "Thought: done\nFinal Answer: ## Root cause\nOOMKilled\n\n## Actions\n- raise the limit",
        Final("## Root cause\nOOMKilled\n\n## Actions\n- raise the limit"),
        Is("done"),
    ),
    case(
        "empty action input for a tool without parameters",
        "Thought: list namespaces\nAction: kubernetes.namespaces_list\nAction Input:",
        Tool("kubernetes.namespaces_list", ""),
        Is("list namespaces"),
    ),
    case(
        "action without thought",
        "Action: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    case(
        "final answer without thought",
        "Final Answer: All systems nominal.",
        Final("All systems nominal."),
        Th::None,
    ),
    case(
        "multi-line thought",
        "Thought: line one\nline two\nAction: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Is("line one\nline two"),
    ),
    case(
        "bare Thought header with content on the next line",
        "Thought\nI should look at events.\nAction: kubernetes.events_list\nAction Input: {}",
        Tool("kubernetes.events_list", "{}"),
        Is("I should look at events."),
    ),
    case(
        "surrounding blank lines and indentation",
        "\n\n  Thought: x  \n\n  Action: kubernetes.pods_list  \n  Action Input: {}  \n\n",
        Tool("kubernetes.pods_list", "{}"),
        Is("x"),
    ),
    case(
        "CRLF line endings",
        "Thought: x\r\nAction: kubernetes.pods_list\r\nAction Input: {\"a\": 1}\r\n",
        Tool("kubernetes.pods_list", "{\"a\": 1}"),
        Is("x"),
    ),
    case(
        "unicode content",
        "Thought: Überprüfe die Pods — café ☕\nFinal Answer: Alles gut ✅",
        Final("Alles gut ✅"),
        Is("Überprüfe die Pods — café ☕"),
    ),
    case(
        "non-ASCII leading whitespace is content, not indentation",
        "Final Answer: Summary\n\u{3000}全角 indented\n  two spaces",
        Final("Summary\n\u{3000}全角 indented\n  two spaces"),
        Th::None,
    ),
    case(
        "two thoughts are both kept",
        "Thought: first idea\nThought: second idea\nFinal Answer: done",
        Final("done"),
        Is("first idea\n\nsecond idea"),
    ),
    case(
        "nested markdown list in the final answer keeps indentation",
        "Final Answer: Summary\n- item\n  - nested item",
        Final("Summary\n- item\n  - nested item"),
        Th::None,
    ),
    // --- missing colons, spacing -------------------------------------------
    case(
        "Action without colon is recovered",
        "Thought: x\nAction kubernetes.pods_list\nAction Input: {\"a\": 1}",
        Tool("kubernetes.pods_list", "{\"a\": 1}"),
        Any,
    ),
    case(
        "Action without colon and without thought is recovered",
        "Action kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Any,
    ),
    case(
        "Action Input without colon is not guessed",
        "Thought: x\nAction: kubernetes.pods_list\nAction Input {}",
        Malformed(true, true, false, false),
        Is("x"),
    ),
    case(
        "Thought without colon followed by text is plain reasoning",
        "Thought I will check pods\nAction: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Is("Thought I will check pods"),
    ),
    case(
        "heading-style Final Answer without colon",
        "Thought: done\n## Final Answer\nThe pod ran out of memory.",
        Final("The pod ran out of memory."),
        Is("done"),
    ),
    case(
        "bold Final Answer line without colon",
        "**Final Answer**\n\nRoot cause: a bad image tag.",
        Final("Root cause: a bad image tag."),
        Th::None,
    ),
    case(
        "'Action: None' next to a final answer is not a tool call",
        "Thought: I have enough.\nAction: None\nAction Input: N/A\nFinal Answer: Disk pressure on node-2.",
        Final("Disk pressure on node-2."),
        Is("I have enough."),
    ),
    case(
        "'Action: N/A' without a final answer is malformed",
        "Thought: hmm\nAction: N/A\nAction Input:",
        Malformed(true, true, true, false),
        Is("hmm"),
    ),
    case(
        "Final Answer without colon is not a conclusion",
        "Thought: done\nFinal Answer The pod is fine",
        Malformed(true, false, false, false),
        Is("done\nFinal Answer The pod is fine"),
    ),
    case(
        "space before the colon",
        "Action : kubernetes.pods_list\nAction Input : {}",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    // --- case and markdown ---------------------------------------------------
    case(
        "lowercase headers",
        "thought: x\naction: kubernetes.pods_list\naction input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Is("x"),
    ),
    case(
        "uppercase headers",
        "THOUGHT: x\nFINAL ANSWER: done",
        Final("done"),
        Is("x"),
    ),
    case(
        "sentence-case final answer",
        "Final answer: done",
        Final("done"),
        Th::None,
    ),
    case(
        "bold headers with the colon inside",
        "**Thought:** check\n**Action:** kubernetes.pods_list\n**Action Input:** {\"namespace\": \"x\"}",
        Tool("kubernetes.pods_list", "{\"namespace\": \"x\"}"),
        Is("check"),
    ),
    case(
        "bold headers with the colon outside and a backticked tool",
        "**Thought**: check\n**Action**: `kubernetes.pods_list`\n**Action Input**: {}",
        Tool("kubernetes.pods_list", "{}"),
        Is("check"),
    ),
    case(
        "bold final answer",
        "**Final Answer:** The root cause is X.",
        Final("The root cause is X."),
        Th::None,
    ),
    case(
        "heading-style final answer",
        "### Final Answer:\nRoot cause: X",
        Final("Root cause: X"),
        Th::None,
    ),
    case(
        "italic headers",
        "*Action:* kubernetes.pods_list\n*Action Input:* {}",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    case(
        "bold bare Thought",
        "**Thought**\nlooking\nFinal Answer: ok",
        Final("ok"),
        Is("looking"),
    ),
    // --- mid-line headers ------------------------------------------------
    case(
        "final answer after a sentence on the Thought line",
        "Thought: I know enough. Final Answer: It is OOM.",
        Final("It is OOM."),
        Is("I know enough."),
    ),
    case(
        "final answer after a sentence without any header",
        "I checked everything. Final Answer: It is OOM.",
        Final("It is OOM."),
        Is("I checked everything."),
    ),
    case(
        "action after a sentence on the Thought line",
        "Thought: Let me check the pods. Action: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Is("Let me check the pods."),
    ),
    case(
        "action after a sentence in unlabelled text",
        "Let me look at it! Action: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Is("Let me look at it!"),
    ),
    case(
        "final answer mid-sentence is not a header",
        "Thought: I will say Final Answer: when I am done",
        Malformed(true, false, false, false),
        Is("I will say Final Answer: when I am done"),
    ),
    case(
        "action and input on one line",
        "Action: kubernetes.pods_list Action Input: {\"namespace\": \"a\"}",
        Tool("kubernetes.pods_list", "{\"namespace\": \"a\"}"),
        Th::None,
    ),
    case(
        "action input after prose on the action's next line",
        "Thought: x\nAction: kubernetes.pods_list\nI will pass the namespace. Action Input: {\"namespace\": \"a\"}",
        Tool("kubernetes.pods_list", "{\"namespace\": \"a\"}"),
        Is("x"),
    ),
    case(
        "bold mid-line final answer",
        "Thought: Evidence is clear. **Final Answer:** Disk full on node-3.",
        Final("Disk full on node-3."),
        Is("Evidence is clear."),
    ),
    // --- final answer with trailing text -------------------------------------
    case(
        "final answer with a trailing paragraph",
        "Final Answer: Root cause X.\n\nLet me know if you need more details.",
        Final("Root cause X.\n\nLet me know if you need more details."),
        Th::None,
    ),
    case(
        "final answer followed by an invented observation",
        "Final Answer: X\nObservation: something",
        Final("X"),
        Th::None,
    ),
    case(
        "recommendations that look like headers stay in the final answer",
        "Thought: done\nFinal Answer: Root cause: OOM.\nRecommended steps:\nAction: increase the memory limit\nVerify the rollout.",
        Final(
            "Root cause: OOM.\nRecommended steps:\nAction: increase the memory limit\nVerify the rollout.",
        ),
        Is("done"),
    ),
    case(
        "a second Final Answer is content of the first",
        "Final Answer: part one\nFinal Answer: part two",
        Final("part one\nFinal Answer: part two"),
        Th::None,
    ),
    case(
        "final answer then a lone action without input stays a conclusion",
        "Final Answer: done\nAction: kubernetes.pods_list",
        Final("done\nAction: kubernetes.pods_list"),
        Th::None,
    ),
    // --- action and final answer both present ----------------------------------
    case(
        "action before final answer: the action wins",
        "Thought: x\nAction: kubernetes.pods_list\nAction Input: {}\nFinal Answer: guessing it is fine",
        Tool("kubernetes.pods_list", "{}"),
        Is("x"),
    ),
    case(
        "final answer before action: the action still wins",
        "Thought: x\nFinal Answer: It is OOM.\nAction: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Is("x"),
    ),
    case(
        "empty final answer with a valid action",
        "Final Answer:\nAction: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    // --- hallucinated observations ---------------------------------------------
    case(
        "invented observation and conclusion after an action are ignored",
        "Thought: x\nAction: kubernetes.pods_list\nAction Input: {}\nObservation: pod web-1 Running\nThought: all fine\nFinal Answer: fine",
        Tool("kubernetes.pods_list", "{}"),
        Is("x"),
    ),
    case(
        "bold invented observation",
        "Action: kubernetes.pods_list\nAction Input: {}\n**Observation:** fake output\nFinal Answer: fine",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    case(
        "lowercase invented observation",
        "Action: kubernetes.pods_list\nAction Input: {}\nobservation: fake\nFinal Answer: fine",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    case(
        "imagined result summary",
        "Thought: x\nAction: kubernetes.pods_list\nAction Input: {}\n[Based on the result, the pod is fine]\nFinal Answer: fine",
        Tool("kubernetes.pods_list", "{}"),
        Is("x"),
    ),
    case(
        "echo of the continuation prompt does not stop parsing",
        "Thought: x\nObservation: Please specify what Action you want to take next\nAction: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Any,
    ),
    case(
        "echo of an error continuation does not stop parsing",
        "Observation: Error in reasoning: bad input\nAction: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Any,
    ),
    case(
        "invented observation before acting leaves only the thought",
        "Thought: check\nObservation: pods are fine\nFinal Answer: fine",
        Malformed(true, false, false, false),
        Is("check"),
    ),
    case(
        "observation text inside a code block is input, not a stop",
        "Action: kubernetes.pods_list\nAction Input:\n```\nObservation: literal text\n```",
        Tool("kubernetes.pods_list", "Observation: literal text"),
        Th::None,
    ),
    // --- code fences ---------------------------------------------------------
    case(
        "fenced JSON input",
        "Thought: x\nAction: kubernetes.pods_list\nAction Input:\n```json\n{\"namespace\": \"shop\"}\n```",
        Tool("kubernetes.pods_list", "{\"namespace\": \"shop\"}"),
        Is("x"),
    ),
    case(
        "fence opened on the Action Input line",
        "Action: kubernetes.pods_list\nAction Input: ```json\n{\"namespace\": \"shop\"}\n```",
        Tool("kubernetes.pods_list", "{\"namespace\": \"shop\"}"),
        Th::None,
    ),
    case(
        "inline backticks around the input",
        "Action: kubernetes.pods_list\nAction Input: `{\"namespace\": \"shop\"}`",
        Tool("kubernetes.pods_list", "{\"namespace\": \"shop\"}"),
        Th::None,
    ),
    case(
        "lowercase key in a fenced YAML input is not a header",
        "Action: kubernetes.resources_create_or_update\nAction Input:\n```yaml\nkind: Job\naction: restart\n```",
        Tool(
            "kubernetes.resources_create_or_update",
            "kind: Job\naction: restart",
        ),
        Th::None,
    ),
    case(
        "whole response wrapped in a code fence",
        "```\nThought: x\nAction: kubernetes.pods_list\nAction Input: {}\n```",
        Tool("kubernetes.pods_list", "{}"),
        Is("x"),
    ),
    case(
        "code block in the thought with header-like text",
        "Thought: The config has\n```\naction: drain\n```\nAction: kubernetes.pods_list\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Is("The config has\n```\naction: drain\n```"),
    ),
    case(
        "fenced final answer keeps its fence",
        "Final Answer:\n```\nkubectl rollout undo deploy/web\n```",
        Final("```\nkubectl rollout undo deploy/web\n```"),
        Th::None,
    ),
    // --- multi-line and multi-format inputs ----------------------------------------
    case(
        "multi-line JSON input",
        "Action: kubernetes.pods_list\nAction Input: {\n  \"namespace\": \"shop\",\n  \"labelSelector\": \"app=web\"\n}",
        Tool(
            "kubernetes.pods_list",
            "{\n  \"namespace\": \"shop\",\n  \"labelSelector\": \"app=web\"\n}",
        ),
        Th::None,
    ),
    case(
        "indented JSON on the following lines is dedented",
        "Action: kubernetes.pods_list\nAction Input:\n    {\n      \"a\": 1\n    }",
        Tool("kubernetes.pods_list", "{\n  \"a\": 1\n}"),
        Th::None,
    ),
    case(
        "YAML input keeps its nesting",
        "Action: kubernetes.pods_list\nAction Input:\n  namespace: shop\n  selector:\n    app: web",
        Tool(
            "kubernetes.pods_list",
            "namespace: shop\nselector:\n  app: web",
        ),
        Th::None,
    ),
    case(
        "key=value input is kept raw",
        "Action: kubernetes.pods_get\nAction Input: namespace=shop, name=web-1",
        Tool("kubernetes.pods_get", "namespace=shop, name=web-1"),
        Th::None,
    ),
    case(
        "plain string input is kept raw",
        "Action: kubernetes.pods_log\nAction Input: web-1",
        Tool("kubernetes.pods_log", "web-1"),
        Th::None,
    ),
    case(
        "YAML-like comma list is kept raw",
        "Action: kubernetes.resources_get\nAction Input: apiVersion: v1, kind: Namespace, name: shop",
        Tool(
            "kubernetes.resources_get",
            "apiVersion: v1, kind: Namespace, name: shop",
        ),
        Th::None,
    ),
    // --- tool names ----------------------------------------------------------------
    case(
        "tool without server prefix",
        "Action: pods_list\nAction Input: {}",
        Invalid("pods_list"),
        Th::None,
    ),
    case(
        "a shell command instead of a tool",
        "Thought: x\nAction: kubectl get pods\nAction Input: {}",
        Invalid("kubectl get pods"),
        Is("x"),
    ),
    case(
        "prose after the tool name is dropped",
        "Action: kubernetes.pods_list (to see restarts)\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    case(
        "trailing period after the tool name",
        "Action: kubernetes.pods_list.\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    case(
        "quoted tool name",
        "Action: \"kubernetes.pods_list\"\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    case(
        "tool name written as a call",
        "Action: kubernetes.pods_list()\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Th::None,
    ),
    case(
        "unknown dotted tool parses as a call (the tool list decides)",
        "Action: kubernetes.does_not_exist\nAction Input: {}",
        Tool("kubernetes.does_not_exist", "{}"),
        Th::None,
    ),
    case(
        "function-calling spelling has no dot",
        "Action: kubernetes__pods_list\nAction Input: {}",
        Invalid("kubernetes__pods_list"),
        Th::None,
    ),
    // --- recovery of a missing Action --------------------------------------------
    case(
        "Action: mid-sentence without a sentence break is recovered",
        "Thought: I'll use Action: kubernetes.pods_list to get pods\nAction Input: {}",
        Tool("kubernetes.pods_list", "{}"),
        Any,
    ),
    case(
        "unrecoverable action name",
        "Thought: x\nAction to take is listing pods\nAction Input: {}",
        Malformed(true, false, true, false),
        Any,
    ),
    // --- several actions ---------------------------------------------------------
    case(
        "the last complete action wins and thoughts accumulate",
        "Thought: a\nAction: kubernetes.pods_list\nAction Input: {\"n\": 1}\nThought: b\nAction: kubernetes.events_list\nAction Input: {\"n\": 2}",
        Tool("kubernetes.events_list", "{\"n\": 2}"),
        Is("a\n\nb"),
    ),
    case(
        "a new action discards the previous action's input",
        "Action: kubernetes.pods_list\nAction Input: {}\nAction: kubernetes.events_list",
        Malformed(false, true, false, false),
        Th::None,
    ),
    case(
        "input before action",
        "Action Input: {}\nAction: kubernetes.pods_list",
        Malformed(false, true, false, false),
        Th::None,
    ),
    // --- malformed -----------------------------------------------------------------
    case(
        "empty response",
        "",
        Malformed(false, false, false, false),
        Th::None,
    ),
    case(
        "whitespace-only response",
        "   \n\n  \t ",
        Malformed(false, false, false, false),
        Th::None,
    ),
    case(
        "thought only",
        "Thought: I should check the pods.",
        Malformed(true, false, false, false),
        Is("I should check the pods."),
    ),
    case(
        "plain prose",
        "The pod is crashing because of OOM.",
        Malformed(false, false, false, false),
        Is("The pod is crashing because of OOM."),
    ),
    case(
        "action without input",
        "Thought: x\nAction: kubernetes.pods_list",
        Malformed(true, true, false, false),
        Is("x"),
    ),
    case(
        "input without action",
        "Thought: x\nAction Input: {\"a\": 1}",
        Malformed(true, false, true, false),
        Is("x"),
    ),
    case(
        "empty action name",
        "Action:\nAction Input: {}",
        Malformed(false, true, true, false),
        Th::None,
    ),
    case(
        "empty final answer",
        "Final Answer:",
        Malformed(false, false, false, true),
        Th::None,
    ),
    case(
        "empty final answer followed by an invented observation",
        "Thought: x\nFinal Answer:\n\nObservation: fake",
        Malformed(true, false, false, true),
        Is("x"),
    ),
    case(
        "header words inside other words are not headers",
        "Thoughtful analysis: nothing\nActions: none\nAction Items: none",
        Malformed(false, false, false, false),
        Any,
    ),
];

#[test]
fn parser_table() {
    let mut failures = Vec::new();
    for c in CASES {
        let parsed = parse(c.text);
        let outcome_ok = match (&c.want, &parsed.outcome) {
            (Tool(a, i), ReactOutcome::ToolCall { action, input }) => action == a && input == i,
            (Final(f), ReactOutcome::FinalAnswer(answer)) => answer == f,
            (Invalid(a), ReactOutcome::InvalidToolName { action, .. }) => action == a,
            (Malformed(t, a, ai, fa), ReactOutcome::Malformed) => {
                parsed.found
                    == FoundSections {
                        thought: *t,
                        action: *a,
                        action_input: *ai,
                        final_answer: *fa,
                    }
            }
            _ => false,
        };
        let thought_ok = match c.thought {
            Any => true,
            Th::None => parsed.thought.is_none(),
            Is(t) => parsed.thought.as_deref() == Some(t),
        };
        if !outcome_ok || !thought_ok {
            failures.push(format!("{}: got {parsed:#?}", c.name));
        }
    }
    assert!(CASES.len() >= 60, "table has {} cases", CASES.len());
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn parser_flags_hallucinations_and_recovery() {
    let parsed = parse("Action: kubernetes.pods_list\nAction Input: {}\nObservation: fake");
    assert!(parsed.hallucinated_observation);
    assert!(!parsed.recovered_action);

    let parsed = parse("Thought: x\nAction kubernetes.pods_list\nAction Input: {}");
    assert!(parsed.recovered_action);
    assert!(!parsed.hallucinated_observation);
    assert!(parsed.found.action);
}

#[test]
fn accessors_describe_the_outcome() {
    let call = parse("Action: kubernetes.pods_list\nAction Input: {}");
    assert!(call.has_action() && !call.is_final_answer() && !call.is_malformed());
    assert_eq!(call.action(), Some("kubernetes.pods_list"));
    assert_eq!(call.action_input(), Some("{}"));
    assert_eq!(call.final_answer(), None);

    let invalid = parse("Action: pods_list\nAction Input: {}");
    assert!(invalid.is_unknown_tool() && invalid.has_action());
    assert!(invalid.error_message().unwrap().contains("server.tool"));

    let done = parse("Final Answer: ok");
    assert_eq!(done.final_answer(), Some("ok"));
    assert_eq!(done.action(), None);
}

// --- steps against a tool list ---------------------------------------------------

fn tools() -> Vec<ToolDefinition> {
    [
        "kubernetes.pods_list",
        "kubernetes.events_list",
        "prometheus.pods_list",
    ]
    .iter()
    .map(|name| ToolDefinition {
        name: name.to_string(),
        description: format!("does {name}\nacross lines"),
        parameters_schema: "{}".into(),
    })
    .collect()
}

#[test]
fn step_calls_a_known_tool_with_the_raw_input() {
    let step = parse("Action: kubernetes.pods_list\nAction Input: namespace: shop").step(&tools());
    assert_eq!(
        step,
        ReactStep::CallTool {
            name: "kubernetes.pods_list".into(),
            input: "namespace: shop".into()
        }
    );
}

#[test]
fn step_maps_the_function_calling_spelling_to_the_canonical_name() {
    let step = parse("Action: kubernetes__events_list\nAction Input: {}").step(&tools());
    assert_eq!(
        step,
        ReactStep::CallTool {
            name: "kubernetes.events_list".into(),
            input: "{}".into()
        }
    );
}

#[test]
fn step_reports_an_unknown_dotted_tool_with_the_tool_list() {
    let ReactStep::UnknownTool {
        requested,
        observation,
    } = parse("Action: kubernetes.nodes_top\nAction Input: {}").step(&tools())
    else {
        panic!("expected an unknown tool");
    };
    assert_eq!(requested, "kubernetes.nodes_top");
    assert!(observation.starts_with("Observation: Error - Unknown tool 'kubernetes.nodes_top'"));
    assert!(observation.contains(
        "Available tools:\n  - kubernetes.pods_list: does kubernetes.pods_list across lines"
    ));
    assert!(observation.contains("  - prometheus.pods_list"));
    assert!(!observation.contains("Did you mean"));
}

#[test]
fn step_suggests_the_server_prefixed_names_for_a_bare_tool() {
    let ReactStep::UnknownTool { observation, .. } =
        parse("Action: pods_list\nAction Input: {}").step(&tools())
    else {
        panic!("expected an unknown tool");
    };
    assert!(observation.contains("server.tool"));
    assert!(observation.contains("Did you mean: kubernetes.pods_list, prometheus.pods_list?"));
}

#[test]
fn step_suggests_the_same_tool_on_another_server() {
    let ReactStep::UnknownTool { observation, .. } =
        parse("Action: grafana.events_list\nAction Input: {}").step(&tools())
    else {
        panic!("expected an unknown tool");
    };
    assert!(observation.contains("Did you mean: kubernetes.events_list?"));
}

#[test]
fn step_finishes_on_a_final_answer() {
    assert_eq!(
        parse("Thought: ok\nFinal Answer: done").step(&tools()),
        ReactStep::FinalAnswer("done".into())
    );
}

#[test]
fn step_returns_format_feedback_for_a_malformed_response() {
    let ReactStep::FormatError { feedback } = parse("Thought: hmm").step(&tools()) else {
        panic!("expected format feedback");
    };
    assert!(feedback.contains("only contains \"Thought:\""));
    assert!(feedback.contains("Final Answer:"));
}

#[test]
fn unknown_tool_without_any_tools_says_so() {
    let text = format_unknown_tool_error("a.b", "Unknown tool 'a.b'.", &[]);
    assert_eq!(
        text,
        "Observation: Error - Unknown tool 'a.b'.\n\nNo tools are available."
    );
}

// --- format feedback ---------------------------------------------------------------

#[test]
fn format_feedback_is_specific_to_what_is_missing() {
    let cases: &[(&str, &str)] = &[
        (
            "Thought: x\nAction: kubernetes.pods_list",
            "has \"Action:\" but no \"Action Input:\"",
        ),
        (
            "Thought: x\nAction Input: {}",
            "has \"Action Input:\" but no \"Action:\"",
        ),
        ("Thought: x", "only contains \"Thought:\""),
        ("just prose", "No ReAct sections were found"),
        ("", "No ReAct sections were found"),
        ("Action:\nAction Input: {}", "does not name a tool"),
        ("Action: none\nAction Input: {}", "does not name a tool"),
        ("Final Answer:", "\"Final Answer:\" is empty"),
    ];
    for (text, expected) in cases {
        let feedback = format_error_feedback(&parse(text));
        assert!(
            feedback.starts_with("FORMAT ERROR:"),
            "{text:?}: {feedback}"
        );
        assert!(
            feedback.contains(expected),
            "{text:?}: expected {expected:?} in\n{feedback}"
        );
        assert!(
            feedback.ends_with(&format_correction_reminder()),
            "{text:?}: no reminder"
        );
    }
}

#[test]
fn format_feedback_warns_about_invented_observations() {
    let feedback = format_error_feedback(&parse("Thought: x\nObservation: made up"));
    assert!(feedback.contains("You also wrote an \"Observation:\" yourself"));
    let feedback = format_error_feedback(&parse("Thought: x"));
    assert!(!feedback.contains("yourself"));
}

#[test]
fn correction_reminder_shows_every_header_and_both_shapes() {
    let reminder = format_correction_reminder();
    for header in ["Thought:", "Action:", "Action Input:", "Final Answer:"] {
        assert!(reminder.contains(header));
    }
    assert!(reminder.contains("server.tool"));
}

// --- observations, continuation, forced conclusion ---------------------------------

#[test]
fn observations() {
    let ok = ToolResult {
        call_id: "1".into(),
        name: "kubernetes.pods_list".into(),
        content: "web-1 Running".into(),
        is_error: false,
        recovered: None,
    };
    assert_eq!(format_observation(&ok), "Observation: web-1 Running");
    let failed = ToolResult {
        is_error: true,
        content: "namespace not found".into(),
        ..ok
    };
    assert_eq!(
        format_observation(&failed),
        "Observation: Error executing kubernetes.pods_list: namespace not found"
    );
    assert_eq!(
        format_tool_error_observation(" timeout after 90s "),
        "Observation: Error - Tool execution failed: timeout after 90s"
    );
    assert_eq!(
        format_error_observation("deadline exceeded."),
        "Observation: Error from previous attempt: deadline exceeded. Please try again."
    );
}

#[test]
fn tarsy_prompts_echoed_by_the_model_do_not_stop_parsing() {
    for prompt in [
        continuation_prompt(ContinuationKind::General),
        error_continuation("tool list changed"),
    ] {
        let first_line = prompt.lines().next().unwrap();
        let echoed = if first_line.starts_with("Observation:") {
            first_line.to_string()
        } else {
            format!("Observation: {first_line}")
        };
        let text =
            format!("Thought: x\n{echoed}\nAction: kubernetes.pods_list\nAction Input: {{}}");
        let parsed = parse(&text);
        assert!(!parsed.hallucinated_observation, "stopped on {echoed:?}");
        assert_eq!(parsed.action(), Some("kubernetes.pods_list"));
    }
}

#[test]
fn continuation_prompt_names_the_goal() {
    assert!(continuation_prompt(ContinuationKind::DataCollection).contains("summary of the data"));
    let general = continuation_prompt(ContinuationKind::default());
    assert!(general.contains("your complete analysis"));
    assert!(general.contains("Final Answer:") && general.contains("Action Input:"));
    assert_eq!(
        error_continuation("bad plan."),
        "Observation: Error in reasoning: bad plan. Please try a different approach."
    );
}

#[test]
fn forced_conclusion_answer_prefers_final_answer_then_thought_then_raw_text() {
    let text = "Thought: summary\nFinal Answer: the answer";
    assert_eq!(forced_conclusion_answer(&parse(text), text), "the answer");
    let text = "Thought: only reasoning here";
    assert_eq!(
        forced_conclusion_answer(&parse(text), text),
        "only reasoning here"
    );
    let text = "The cluster is healthy; the alert was a blip.";
    assert_eq!(forced_conclusion_answer(&parse(text), text), text);
    assert_eq!(forced_conclusion_answer(&parse(""), "  "), "");
}
