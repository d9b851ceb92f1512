use std::collections::BTreeMap;
use std::time::Duration;

use tarsy_core::{
    Backend, ConversationMessage, IterationStrategy, LlmProviderConfig, McpServerConfig,
    McpTransport, MessageRole, ProviderType, ResolvedAgentConfig, SummarizationConfig, ToolCall,
    ToolDefinition,
};

use super::*;

fn tool(name: &str, description: &str, schema: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: description.into(),
        parameters_schema: schema.into(),
    }
}

fn sample_tools() -> Vec<ToolDefinition> {
    vec![
        tool(
            "kubernetes.pods_list",
            "List pods\nin a namespace",
            r#"{"type":"object","properties":{"namespace":{"type":"string","description":"Namespace to list"},"labelSelector":{"type":"string"}},"required":["namespace"]}"#,
        ),
        tool(
            "kubernetes.namespaces_list",
            "List namespaces",
            r#"{"type":"object"}"#,
        ),
        tool("prometheus.query", "", "not json at all"),
    ]
}

fn full_input() -> PromptInput {
    PromptInput {
        agent_name: "KubernetesAgent".into(),
        alert_type: "PodCrashLooping".into(),
        alert_data: "pod=web-1 namespace=shop restarts=42".into(),
        runbook: Some("# Runbook\nCheck OOMKilled.".into()),
        memories: None,
        reflection: None,
        custom_instructions: "Always check the HPA too.".into(),
        server_instructions: vec![
            ServerInstructions {
                server: "kubernetes".into(),
                instructions: "Use pods_log for logs.".into(),
            },
            ServerInstructions {
                server: "prometheus".into(),
                instructions: "Query rates over 5m.".into(),
            },
        ],
        tools: sample_tools(),
        failed_servers: vec![FailedServer {
            server: "argocd".into(),
            error: "connection refused\n(after retry)".into(),
        }],
        chat: None,
        judged_investigation: None,
        previous_stage_context: Some(
            "<!-- CHAIN_CONTEXT_START -->\n### Stage 1: triage\nNode is fine.\n<!-- CHAIN_CONTEXT_END -->"
                .into(),
        ),
    }
}

fn server(name: &str, instructions: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        transport: McpTransport::Stdio {
            command: "true".into(),
            args: vec![],
            env: BTreeMap::new(),
            cwd: None,
        },
        instructions: instructions.into(),
        summarization: SummarizationConfig::default(),
    }
}

fn resolved(display: &str, servers: &[&str], custom: &str) -> ResolvedAgentConfig {
    ResolvedAgentConfig {
        agent_name: "KubernetesAgent".into(),
        display_name: display.into(),
        iteration_strategy: IterationStrategy::React,
        backend: Backend::Langchain,
        llm_provider: LlmProviderConfig {
            name: "p".into(),
            provider_type: ProviderType::Google,
            model: "m".into(),
            api_key_env: None,
            credentials_env: None,
            base_url: None,
            project: None,
            location: None,
            native_tools: BTreeMap::new(),
            max_tool_result_tokens: None,
            context_window_tokens: None,
            script: None,
            fallback: vec![],
            price: None,
        },
        max_iterations: 20,
        iteration_timeout: Duration::from_secs(120),
        mcp_servers: servers.iter().map(|s| s.to_string()).collect(),
        tool_filter: BTreeMap::new(),
        custom_instructions: custom.into(),
        native_tools_override: None,
        fail_on_unavailable_server: false,
        budget: None,
    }
}

fn pos(haystack: &str, needle: &str) -> usize {
    haystack
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not found in:\n{haystack}"))
}

fn system_and_user(messages: &[ConversationMessage]) -> (&str, &str) {
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].role, MessageRole::System);
    assert_eq!(messages[1].role, MessageRole::User);
    (&messages[0].content, &messages[1].content)
}

#[test]
fn instructions_follow_the_three_tiers_then_the_failed_server_warning() {
    let text = PromptBuilder::new().compose_instructions(&full_input());
    assert!(text.lines().next().unwrap().contains("KubernetesAgent"));
    let general = pos(&text, "Site Reliability Engineer");
    let k8s = pos(&text, "Use pods_log for logs.");
    let prom = pos(&text, "Query rates over 5m.");
    let custom = pos(&text, "Always check the HPA too.");
    let warning = pos(&text, "argocd");
    assert!(general < k8s && k8s < prom && prom < custom && custom < warning);
    assert!(text.contains("kubernetes tools"));
    // The failure reason is shown on one line.
    assert!(text.contains("- argocd: connection refused (after retry)"));
}

#[test]
fn empty_tiers_and_warnings_are_left_out() {
    let input = PromptInput {
        agent_name: "A".into(),
        server_instructions: vec![ServerInstructions {
            server: "kubernetes".into(),
            instructions: "   ".into(),
        }],
        ..Default::default()
    };
    let text = PromptBuilder::new().compose_instructions(&input);
    assert!(!text.contains("Instructions for the"));
    assert!(!text.contains("Agent-specific instructions"));
    assert!(!text.contains("Unavailable tool servers"));
    assert!(PromptBuilder::new().failed_servers_warning(&[]).is_none());
}

#[test]
fn with_config_takes_names_instructions_and_server_order_from_configuration() {
    let servers = vec![
        server("prometheus", "Query rates."),
        server("kubernetes", "Use pods_log."),
        server("unused", "Never shown."),
        server("silent", ""),
    ];
    let input = PromptInput::default().with_config(
        &resolved(
            "KubernetesAgent-2",
            &["kubernetes", "silent", "prometheus", "missing"],
            "Be brief.",
        ),
        &servers,
    );
    assert_eq!(input.agent_name, "KubernetesAgent-2");
    assert_eq!(input.custom_instructions, "Be brief.");
    let names: Vec<_> = input
        .server_instructions
        .iter()
        .map(|s| s.server.as_str())
        .collect();
    assert_eq!(names, vec!["kubernetes", "prometheus"]);

    let unnamed = PromptInput::default().with_config(&resolved("", &[], ""), &servers);
    assert_eq!(unnamed.agent_name, "KubernetesAgent");
}

#[test]
fn investigation_message_orders_alert_runbook_previous_stages_and_task() {
    let user = PromptBuilder::new().investigation_user_message(&full_input());
    let alert = pos(&user, "pod=web-1 namespace=shop restarts=42");
    let kind = pos(&user, "PodCrashLooping");
    let runbook = pos(&user, "Check OOMKilled.");
    let previous = pos(&user, "<!-- CHAIN_CONTEXT_START -->");
    let task = pos(&user, "## Your task");
    assert!(kind < alert && alert < runbook && runbook < previous && previous < task);
}

#[test]
fn investigation_message_without_runbook_or_previous_stages_has_no_such_sections() {
    let input = PromptInput {
        runbook: Some("  ".into()),
        previous_stage_context: None,
        ..full_input()
    };
    let user = PromptBuilder::new().investigation_user_message(&input);
    assert!(!user.contains("## Runbook"));
    assert!(!user.contains("previous stages"));
    assert!(user.contains("pod=web-1"));
}

#[test]
fn react_messages_describe_the_format_and_every_tool() {
    let messages = PromptBuilder::new().react_messages(&full_input());
    let (system, user) = system_and_user(&messages);
    for needle in [
        "Thought:",
        "Action:",
        "Action Input:",
        "Final Answer:",
        "Observation:",
    ] {
        assert!(system.contains(needle), "missing {needle}");
    }
    assert!(system.contains("1. kubernetes.pods_list: List pods in a namespace"));
    assert!(system.contains("- namespace (string, required): Namespace to list"));
    assert!(system.contains("- labelSelector (string)\n"));
    assert!(system.contains("2. kubernetes.namespaces_list: List namespaces\n   Parameters: none"));
    assert!(system.contains("3. prometheus.query\n   Parameters schema: not json at all"));
    // Tier instructions come before the format.
    assert!(pos(system, "Always check the HPA too.") < pos(system, "## Response format"));
    assert!(user.contains("Investigate the following alert"));
}

#[test]
fn react_messages_without_tools_say_so() {
    let input = PromptInput {
        tools: vec![],
        ..full_input()
    };
    let messages = PromptBuilder::new().react_messages(&input);
    assert!(messages[0].content.contains("No tools are available"));
}

#[test]
fn function_calling_messages_bind_tools_instead_of_listing_them() {
    let builder = PromptBuilder::new();
    let messages = builder.function_calling_messages(&full_input());
    let (system, _) = system_and_user(&messages);
    assert!(!system.contains("kubernetes.pods_list"));
    assert!(!system.contains("Action Input:"));
    assert!(system.contains("function calling"));

    let no_tools = PromptInput {
        tools: vec![],
        ..full_input()
    };
    let messages = builder.function_calling_messages(&no_tools);
    assert!(!messages[0].content.contains("function calling"));
}

#[test]
fn chat_turns_the_same_builders_into_chat_prompts() {
    let input = PromptInput {
        chat: Some(ChatInput {
            investigation_context: "INVESTIGATION HISTORY: pod was OOMKilled".into(),
            question: "Why was memory so high?".into(),
        }),
        ..full_input()
    };
    let builder = PromptBuilder::new();
    for messages in [
        builder.function_calling_messages(&input),
        builder.react_messages(&input),
    ] {
        let (system, user) = system_and_user(&messages);
        assert!(system.contains("follow-up question"));
        assert!(
            system.contains("Always check the HPA too."),
            "tier 3 kept in chat"
        );
        assert!(pos(user, "pod was OOMKilled") < pos(user, "Why was memory so high?"));
        assert!(!user.contains("Investigate the following alert"));
    }
}

#[test]
fn synthesis_messages_carry_the_parallel_investigations_and_no_tools() {
    let input = PromptInput {
        previous_stage_context: Some(
            "#### Agent 1: A\nfound OOM\n#### Agent 2: B\nfound nothing".into(),
        ),
        ..full_input()
    };
    let builder = PromptBuilder::new();
    let messages = builder.synthesis_messages(&input);
    let (system, user) = system_and_user(&messages);
    assert!(system.contains("in parallel"));
    assert!(system.contains("Always check the HPA too."));
    assert!(!system.contains("Action Input:"));
    assert!(
        !system.contains("Use pods_log for logs."),
        "synthesis has no tools"
    );
    assert!(user.contains("found OOM") && user.contains("found nothing"));
    assert!(user.contains("pod=web-1"));
    assert_eq!(
        builder.messages_for(IterationStrategy::SynthesisNativeThinking, &input),
        messages
    );
}

#[test]
fn messages_for_picks_the_conversation_by_strategy() {
    let builder = PromptBuilder::new();
    let input = full_input();
    assert_eq!(
        builder.messages_for(IterationStrategy::React, &input),
        builder.react_messages(&input)
    );
    for strategy in [
        IterationStrategy::NativeThinking,
        IterationStrategy::Langchain,
        IterationStrategy::SingleCall,
    ] {
        assert_eq!(
            builder.messages_for(strategy, &input),
            builder.function_calling_messages(&input)
        );
    }
    assert_eq!(
        builder.messages_for(IterationStrategy::Synthesis, &input),
        builder.synthesis_messages(&input)
    );
}

#[test]
fn forced_conclusion_names_the_iterations_and_asks_react_for_a_final_answer() {
    let builder = PromptBuilder::new();
    let react = builder.forced_conclusion_prompt(7, IterationStrategy::React);
    assert!(react.contains("all 7 investigation iterations"));
    assert!(react.contains("Final Answer:"));
    let native = builder.forced_conclusion_prompt(7, IterationStrategy::NativeThinking);
    assert!(native.contains("all 7 investigation iterations"));
    assert!(!native.contains("Final Answer:"));
}

#[test]
fn summarization_prompts_name_the_tool_the_budget_and_carry_the_data() {
    let builder = PromptBuilder::new();
    let system = builder.summarization_system_prompt("kubernetes", "pods_list", 1000);
    assert!(system.contains("\"pods_list\"") && system.contains("\"kubernetes\""));
    assert!(system.contains("1000 tokens"));
    let user = builder.summarization_user_prompt(
        "User: check pods",
        "kubernetes",
        "pods_list",
        "web-1 CrashLoopBackOff {{not_a_placeholder}}",
    );
    assert!(pos(&user, "User: check pods") < pos(&user, "kubernetes.pods_list"));
    assert!(user.ends_with("web-1 CrashLoopBackOff {{not_a_placeholder}}"));
    let empty = builder.summarization_user_prompt("", "k", "t", "r");
    assert!(empty.contains("(no conversation yet)"));
}

#[test]
fn executive_summary_prompts() {
    let builder = PromptBuilder::new();
    assert!(
        builder
            .executive_summary_system_prompt()
            .contains("executive summar")
    );
    let user = builder.executive_summary_user_prompt("\nRoot cause: OOM.\n");
    assert!(user.ends_with("Root cause: OOM."));
}

#[test]
fn user_text_with_braces_is_passed_through_verbatim() {
    let input = PromptInput {
        alert_data: "template: {{agent_name}} {{ tools }}".into(),
        ..full_input()
    };
    let messages = PromptBuilder::new().react_messages(&input);
    assert!(
        messages[1]
            .content
            .contains("template: {{agent_name}} {{ tools }}")
    );
}

#[test]
fn no_prompt_leaves_a_placeholder_unfilled() {
    let builder = PromptBuilder::new();
    let chat_input = PromptInput {
        chat: Some(ChatInput {
            investigation_context: "history".into(),
            question: "q".into(),
        }),
        ..full_input()
    };
    let no_tools = PromptInput {
        tools: vec![],
        ..full_input()
    };
    let mut outputs: Vec<String> = Vec::new();
    for input in [full_input(), chat_input, no_tools, PromptInput::default()] {
        for strategy in IterationStrategy::ALL {
            for m in builder.messages_for(*strategy, &input) {
                outputs.push(m.content);
            }
            outputs.push(builder.forced_conclusion_prompt(3, *strategy));
        }
    }
    outputs.push(builder.summarization_system_prompt("s", "t", 10));
    outputs.push(builder.summarization_user_prompt("c", "s", "t", "r"));
    outputs.push(builder.executive_summary_system_prompt());
    outputs.push(builder.executive_summary_user_prompt("a"));
    for out in outputs {
        assert!(!out.contains("{{"), "unfilled placeholder in:\n{out}");
    }
}

#[test]
fn conversation_context_skips_system_messages_and_labels_the_rest() {
    let messages = vec![
        ConversationMessage::system("SECRET SYSTEM PROMPT"),
        ConversationMessage::user("Investigate web-1"),
        ConversationMessage::assistant(
            "Checking pods",
            vec![ToolCall {
                id: "c1".into(),
                name: "kubernetes.pods_list".into(),
                arguments: r#"{"namespace":"shop"}"#.into(),
            }],
        ),
        ConversationMessage::tool("c1", "kubernetes.pods_list", "web-1 Running"),
    ];
    let text = conversation_context(&messages);
    assert!(!text.contains("SECRET SYSTEM PROMPT"));
    assert_eq!(
        text,
        "User: Investigate web-1\n\nAssistant: Checking pods\n[tool call] kubernetes.pods_list({\"namespace\":\"shop\"})\n\nTool result (kubernetes.pods_list): web-1 Running"
    );
}

#[test]
fn recalled_memories_follow_the_runbook_and_precede_earlier_stages() {
    let input = PromptInput {
        memories: Some("## Lessons from past investigations\n- the pool fills up first".into()),
        ..full_input()
    };
    let user = PromptBuilder::new().investigation_user_message(&input);
    let runbook = user.find("Check OOMKilled.").unwrap();
    let lessons = user.find("## Lessons from past investigations").unwrap();
    let previous = user
        .find(input.previous_stage_context.as_deref().unwrap().trim())
        .unwrap();
    assert!(runbook < lessons && lessons < previous, "{user}");
    // No memories: no section.
    let plain = PromptBuilder::new().investigation_user_message(&full_input());
    assert!(!plain.contains("Lessons from past"));
}

#[test]
fn a_reflector_gets_its_instructions_and_what_it_reflects_on_whatever_the_strategy() {
    let input = PromptInput {
        agent_name: "MemoryReflector".into(),
        reflection: Some(("Answer with JSON.".into(), "The investigation: ...".into())),
        ..full_input()
    };
    for strategy in [IterationStrategy::React, IterationStrategy::Synthesis] {
        let messages = PromptBuilder::new().messages_for(strategy, &input);
        assert_eq!(messages.len(), 2);
        assert!(messages[0].content.starts_with("You are MemoryReflector"));
        assert!(messages[0].content.contains("Answer with JSON."));
        assert!(messages[0].content.contains("Always check the HPA too."));
        assert_eq!(messages[1].content, "The investigation: ...");
    }
}
