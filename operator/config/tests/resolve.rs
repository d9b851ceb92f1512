//! Table-driven tests of hierarchy resolution: every field at every level
//! overriding the one below, plus the fallbacks of chat, synthesis,
//! executive summary, success policy, replica naming and MCP selection (the
//! rules are tabled in the crate docs, `operator/config/src/lib.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use tarsy_config::model::{
    AgentSpec, ChainSpec, ChatSpec, IterationStrategy as S, LLMProviderSpec, MCPServerSpec,
    ProviderType, ScoringSpec, StageAgentSpec, StageSpec, SuccessPolicy, SynthesisSpec,
};
use tarsy_config::{
    Config, Defaults, Named, Origin, ResolveError, SelectionError, parallel_type, replica_name,
    resolve_success_policy,
};
use tarsy_core::{
    Backend, IterationStrategy as Core, McpSelection, McpServerSelection, ParallelType,
    SuccessPolicy as CorePolicy,
};

const AGENT: &str = "test-agent";

/// Every level of the hierarchy, as plain data a row can modify.
#[derive(Clone)]
struct Levels {
    defaults: Defaults,
    agent: AgentSpec,
    chain: ChainSpec,
    stage: StageSpec,
    stage_agent: StageAgentSpec,
}

fn provider(model: &str) -> LLMProviderSpec {
    LLMProviderSpec {
        provider_type: ProviderType::Openai,
        model: model.into(),
        api_key_secret_ref: None,
        api_key_env: Some("OPENAI_API_KEY".into()),
        credentials_env: None,
        base_url: None,
        project: None,
        location: None,
        max_tool_result_tokens: None,
        native_tools: None,
        context_window_tokens: None,
        fallback: None,
        pricing: None,
        script: None,
    }
}

fn url_server(url: &str) -> MCPServerSpec {
    serde_json::from_value(serde_json::json!({ "url": url })).unwrap()
}

fn stage() -> StageSpec {
    StageSpec {
        name: "stage".into(),
        agents: Some(vec![StageAgentSpec::named(AGENT)]),
        agent: None,
        replicas: None,
        success_policy: None,
        max_iterations: None,
        synthesis: None,
    }
}

fn chain() -> ChainSpec {
    ChainSpec {
        alert_types: vec!["TestAlert".into()],
        stages: vec![stage()],
        llm_provider: None,
        iteration_strategy: None,
        max_iterations: None,
        iteration_timeout: None,
        mcp_servers: None,
        on_mcp_server_unavailable: None,
        slack_channel: None,
        executive_summary_provider: None,
        chat: None,
        scoring: None,
        session_timeout: None,
        budget: None,
        service_account_name: None,
    }
}

fn levels() -> Levels {
    let defaults = Defaults {
        llm_provider: "p-defaults".into(),
        iteration_strategy: Core::React,
        max_iterations: 11,
        iteration_timeout: Duration::from_secs(100),
        ..Defaults::default()
    };
    Levels {
        defaults,
        agent: AgentSpec::default(),
        chain: chain(),
        stage: stage(),
        stage_agent: StageAgentSpec::named(AGENT),
    }
}

const PROVIDERS: [&str; 8] = [
    "p-defaults",
    "p-chain",
    "p-stage-agent",
    "p-chat",
    "p-summary",
    "p-synth",
    "p-fallback",
    "p-other",
];
const SERVERS: [&str; 7] = [
    "s-agent",
    "s-chain",
    "s-stage-agent",
    "s-chat",
    "s-other",
    "s-sel",
    "s-chat-agent",
];

fn config(l: &Levels) -> Config {
    let mut c = Config::builtin(l.defaults.clone());
    for p in PROVIDERS {
        c.insert_llm_provider(Named::new(
            p,
            provider(&format!("model-{p}")),
            Origin::Builtin,
        ));
    }
    for s in SERVERS {
        c.insert_mcp_server(Named::new(
            s,
            url_server(&format!("https://{s}.example/mcp")),
            Origin::Builtin,
        ));
    }
    c.insert_agent(Named::new(AGENT, l.agent.clone(), Origin::Builtin));
    c.insert_chain(Named::new("chain", l.chain.clone(), Origin::Builtin));
    c
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

struct Row<T> {
    name: &'static str,
    setup: fn(&mut Levels),
    expect: T,
}

fn run_agent_rows<T: PartialEq + std::fmt::Debug>(
    field: &str,
    rows: &[Row<T>],
    get: fn(&tarsy_core::ResolvedAgentConfig) -> T,
) {
    for row in rows {
        let mut l = levels();
        (row.setup)(&mut l);
        let c = config(&l);
        let resolved = c
            .resolve_agent(&l.chain, &l.stage, &l.stage_agent, AGENT)
            .unwrap_or_else(|e| panic!("{field} / {}: {e}", row.name));
        assert_eq!(get(&resolved), row.expect, "{field} / {}", row.name);
    }
}

#[test]
fn iteration_strategy_defaults_agent_chain_stage_agent() {
    let rows = [
        Row {
            name: "defaults only",
            setup: |_| {},
            expect: Core::React,
        },
        Row {
            name: "agent over defaults",
            setup: |l| l.agent.iteration_strategy = Some(S::Langchain),
            expect: Core::Langchain,
        },
        Row {
            name: "chain over agent",
            setup: |l| {
                l.agent.iteration_strategy = Some(S::Langchain);
                l.chain.iteration_strategy = Some(S::NativeThinking);
            },
            expect: Core::NativeThinking,
        },
        Row {
            name: "chain over defaults (agent unset)",
            setup: |l| l.chain.iteration_strategy = Some(S::SingleCall),
            expect: Core::SingleCall,
        },
        Row {
            name: "stage agent over chain and agent",
            setup: |l| {
                l.agent.iteration_strategy = Some(S::Langchain);
                l.chain.iteration_strategy = Some(S::NativeThinking);
                l.stage_agent.iteration_strategy = Some(S::React);
            },
            expect: Core::React,
        },
        Row {
            name: "stage agent over defaults",
            setup: |l| l.stage_agent.iteration_strategy = Some(S::NativeThinking),
            expect: Core::NativeThinking,
        },
        Row {
            name: "defaults changed",
            setup: |l| l.defaults.iteration_strategy = Core::Langchain,
            expect: Core::Langchain,
        },
    ];
    run_agent_rows("iterationStrategy", &rows, |r| r.iteration_strategy);
}

#[test]
fn backend_is_derived_from_the_resolved_strategy() {
    let rows = [
        Row {
            name: "native-thinking",
            setup: |l| l.stage_agent.iteration_strategy = Some(S::NativeThinking),
            expect: Backend::GoogleNative,
        },
        Row {
            name: "langchain",
            setup: |l| l.stage_agent.iteration_strategy = Some(S::Langchain),
            expect: Backend::Langchain,
        },
        Row {
            name: "react",
            setup: |l| l.chain.iteration_strategy = Some(S::React),
            expect: Backend::Langchain,
        },
        Row {
            name: "synthesis",
            setup: |l| l.agent.iteration_strategy = Some(S::Synthesis),
            expect: Backend::Langchain,
        },
        Row {
            name: "synthesis-native-thinking",
            setup: |l| l.agent.iteration_strategy = Some(S::SynthesisNativeThinking),
            expect: Backend::GoogleNative,
        },
        Row {
            name: "defaults native-thinking",
            setup: |l| l.defaults.iteration_strategy = Core::NativeThinking,
            expect: Backend::GoogleNative,
        },
        Row {
            name: "provider type is irrelevant (openai provider, google backend)",
            setup: |l| {
                l.chain.llm_provider = Some("p-chain".into());
                l.chain.iteration_strategy = Some(S::NativeThinking);
            },
            expect: Backend::GoogleNative,
        },
    ];
    run_agent_rows("backend", &rows, |r| r.backend);
}

#[test]
fn llm_provider_defaults_chain_stage_agent() {
    let rows = [
        Row {
            name: "defaults only",
            setup: |_| {},
            expect: "p-defaults",
        },
        Row {
            name: "chain over defaults",
            setup: |l| l.chain.llm_provider = Some("p-chain".into()),
            expect: "p-chain",
        },
        Row {
            name: "stage agent over chain",
            setup: |l| {
                l.chain.llm_provider = Some("p-chain".into());
                l.stage_agent.llm_provider = Some("p-stage-agent".into());
            },
            expect: "p-stage-agent",
        },
        Row {
            name: "stage agent over defaults",
            setup: |l| l.stage_agent.llm_provider = Some("p-stage-agent".into()),
            expect: "p-stage-agent",
        },
    ];
    run_agent_rows("llmProvider", &rows, |r| {
        assert_eq!(
            r.llm_provider.model,
            format!("model-{}", r.llm_provider.name)
        );
        // Static lifetime for the table: map back to the known names.
        PROVIDERS
            .iter()
            .find(|p| **p == r.llm_provider.name)
            .copied()
            .unwrap()
    });
}

#[test]
fn max_iterations_defaults_agent_chain_stage_stage_agent() {
    let rows = [
        Row {
            name: "built-in 20",
            setup: |l| l.defaults.max_iterations = Defaults::default().max_iterations,
            expect: 20,
        },
        Row {
            name: "defaults",
            setup: |_| {},
            expect: 11,
        },
        Row {
            name: "agent over defaults",
            setup: |l| l.agent.max_iterations = Some(12),
            expect: 12,
        },
        Row {
            name: "chain over agent",
            setup: |l| {
                l.agent.max_iterations = Some(12);
                l.chain.max_iterations = Some(13);
            },
            expect: 13,
        },
        Row {
            name: "stage over chain",
            setup: |l| {
                l.agent.max_iterations = Some(12);
                l.chain.max_iterations = Some(13);
                l.stage.max_iterations = Some(14);
            },
            expect: 14,
        },
        Row {
            name: "stage agent over stage",
            setup: |l| {
                l.agent.max_iterations = Some(12);
                l.chain.max_iterations = Some(13);
                l.stage.max_iterations = Some(14);
                l.stage_agent.max_iterations = Some(15);
            },
            expect: 15,
        },
        Row {
            name: "stage over defaults (others unset)",
            setup: |l| l.stage.max_iterations = Some(3),
            expect: 3,
        },
        Row {
            name: "stage agent alone",
            setup: |l| l.stage_agent.max_iterations = Some(1),
            expect: 1,
        },
    ];
    run_agent_rows("maxIterations", &rows, |r| r.max_iterations);
}

#[test]
fn mcp_servers_agent_chain_stage_agent() {
    let rows = [
        Row {
            name: "nothing anywhere",
            setup: |_| {},
            expect: vec![],
        },
        Row {
            name: "agent",
            setup: |l| l.agent.mcp_servers = Some(strings(&["s-agent"])),
            expect: strings(&["s-agent"]),
        },
        Row {
            name: "chain replaces agent",
            setup: |l| {
                l.agent.mcp_servers = Some(strings(&["s-agent"]));
                l.chain.mcp_servers = Some(strings(&["s-chain"]));
            },
            expect: strings(&["s-chain"]),
        },
        Row {
            name: "stage agent replaces chain",
            setup: |l| {
                l.agent.mcp_servers = Some(strings(&["s-agent"]));
                l.chain.mcp_servers = Some(strings(&["s-chain"]));
                l.stage_agent.mcp_servers = Some(strings(&["s-stage-agent", "s-other"]));
            },
            expect: strings(&["s-stage-agent", "s-other"]),
        },
        Row {
            name: "empty stage-agent list does not override",
            setup: |l| {
                l.agent.mcp_servers = Some(strings(&["s-agent"]));
                l.stage_agent.mcp_servers = Some(vec![]);
            },
            expect: strings(&["s-agent"]),
        },
        Row {
            name: "empty chain list does not override",
            setup: |l| {
                l.agent.mcp_servers = Some(strings(&["s-agent"]));
                l.chain.mcp_servers = Some(vec![]);
            },
            expect: strings(&["s-agent"]),
        },
    ];
    run_agent_rows("mcpServers", &rows, |r| r.mcp_servers.clone());
}

#[test]
fn iteration_timeout_defaults_chain() {
    let rows = [
        Row {
            name: "defaults",
            setup: |_| {},
            expect: Duration::from_secs(100),
        },
        Row {
            name: "built-in 120s",
            setup: |l| l.defaults.iteration_timeout = Defaults::default().iteration_timeout,
            expect: Duration::from_secs(120),
        },
        Row {
            name: "chain over defaults",
            setup: |l| l.chain.iteration_timeout = Some("3m".into()),
            expect: Duration::from_secs(180),
        },
    ];
    run_agent_rows("iterationTimeout", &rows, |r| r.iteration_timeout);
}

#[test]
fn instructions_and_names_come_from_the_agent() {
    let rows = [
        Row {
            name: "no instructions",
            setup: |_| {},
            expect: String::new(),
        },
        Row {
            name: "agent instructions",
            setup: |l| l.agent.custom_instructions = Some("be thorough".into()),
            expect: "be thorough".to_string(),
        },
    ];
    run_agent_rows("customInstructions", &rows, |r| {
        r.custom_instructions.clone()
    });

    let l = levels();
    let c = config(&l);
    let r = c
        .resolve_agent(&l.chain, &l.stage, &l.stage_agent, &replica_name(AGENT, 2))
        .unwrap();
    assert_eq!(r.agent_name, AGENT, "registry key is the base name");
    assert_eq!(r.display_name, "test-agent-2");
    assert!(r.tool_filter.is_empty());
    assert_eq!(r.native_tools_override, None);
}

#[test]
fn unknown_references_fail_resolution() {
    let l = levels();
    let c = config(&l);
    let mut sa = l.stage_agent.clone();
    sa.name = "ghost".into();
    assert!(matches!(
        c.resolve_agent(&l.chain, &l.stage, &sa, "ghost"),
        Err(ResolveError::AgentNotFound(n)) if n == "ghost"
    ));
    let mut sa = l.stage_agent.clone();
    sa.llm_provider = Some("nope".into());
    assert!(matches!(
        c.resolve_agent(&l.chain, &l.stage, &sa, AGENT),
        Err(ResolveError::ProviderNotFound(n)) if n == "nope"
    ));
}

#[test]
fn provider_comes_with_its_fallbacks() {
    let l = levels();
    let mut c = config(&l);
    let mut p = provider("primary");
    p.fallback = Some(strings(&["p-fallback", "p-other"]));
    c.insert_llm_provider(Named::new("p-defaults", p, Origin::Builtin));
    // A fallback's own fallbacks are not followed.
    let mut fb = provider("fb");
    fb.fallback = Some(strings(&["p-other"]));
    c.insert_llm_provider(Named::new("p-fallback", fb, Origin::Builtin));
    let r = c
        .resolve_agent(&l.chain, &l.stage, &l.stage_agent, AGENT)
        .unwrap();
    let names: Vec<&str> = r
        .llm_provider
        .fallback
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["p-fallback", "p-other"]);
    assert!(
        r.llm_provider
            .fallback
            .iter()
            .all(|f| f.fallback.is_empty())
    );
    assert_eq!(
        r.llm_provider.api_key_env.as_deref(),
        Some("OPENAI_API_KEY")
    );
}

// ---------------------------------------------------------------- chat

fn chat_levels() -> Levels {
    let mut l = levels();
    l.chain.chat = Some(ChatSpec::default());
    l
}

fn run_chat_rows<T: PartialEq + std::fmt::Debug>(
    field: &str,
    rows: &[Row<T>],
    get: fn(&tarsy_core::ResolvedAgentConfig) -> T,
) {
    for row in rows {
        let mut l = chat_levels();
        (row.setup)(&mut l);
        let mut c = config(&l);
        // The built-in ChatAgent plays "agentDef"; rows edit `l.agent` for it.
        c.insert_agent(Named::new("chat-agent", l.agent.clone(), Origin::Builtin));
        let resolved = c
            .resolve_chat("chain", &l.chain, None)
            .unwrap_or_else(|e| panic!("chat {field} / {}: {e}", row.name));
        assert_eq!(get(&resolved), row.expect, "chat {field} / {}", row.name);
    }
}

fn chat(l: &mut Levels) -> &mut ChatSpec {
    l.chain.chat.get_or_insert_with(ChatSpec::default)
}

#[test]
fn chat_agent_is_chat_config_else_builtin_chat_agent() {
    let l = chat_levels();
    let c = config(&l);
    let r = c.resolve_chat("chain", &l.chain, None).unwrap();
    assert_eq!(r.agent_name, "chat-agent");
    assert_eq!(r.display_name, "ChatAgent");
    assert!(
        r.custom_instructions.contains("follow-up"),
        "built-in ChatAgent instructions"
    );

    let mut l = chat_levels();
    chat(&mut l).agent = Some(AGENT.into());
    l.agent.custom_instructions = Some("custom chat".into());
    let c = config(&l);
    let r = c.resolve_chat("chain", &l.chain, None).unwrap();
    assert_eq!(r.agent_name, AGENT);
    assert_eq!(r.display_name, AGENT);
    assert_eq!(r.custom_instructions, "custom chat");
}

#[test]
fn chat_iteration_strategy_defaults_agent_chain_chat() {
    let rows = [
        Row {
            name: "defaults",
            setup: |_| {},
            expect: Core::React,
        },
        Row {
            name: "agent over defaults",
            setup: |l| l.agent.iteration_strategy = Some(S::Langchain),
            expect: Core::Langchain,
        },
        Row {
            name: "chain over agent",
            setup: |l| {
                l.agent.iteration_strategy = Some(S::Langchain);
                l.chain.iteration_strategy = Some(S::NativeThinking);
            },
            expect: Core::NativeThinking,
        },
        Row {
            name: "chat over chain",
            setup: |l| {
                l.agent.iteration_strategy = Some(S::Langchain);
                l.chain.iteration_strategy = Some(S::NativeThinking);
                chat(l).iteration_strategy = Some(S::React);
            },
            expect: Core::React,
        },
    ];
    run_chat_rows("iterationStrategy", &rows, |r| {
        assert_eq!(r.backend, r.iteration_strategy.backend());
        r.iteration_strategy
    });
}

#[test]
fn chat_llm_provider_defaults_chain_chat() {
    let rows = [
        Row {
            name: "defaults",
            setup: |_| {},
            expect: "p-defaults",
        },
        Row {
            name: "chain over defaults",
            setup: |l| l.chain.llm_provider = Some("p-chain".into()),
            expect: "p-chain",
        },
        Row {
            name: "chat over chain",
            setup: |l| {
                l.chain.llm_provider = Some("p-chain".into());
                chat(l).llm_provider = Some("p-chat".into());
            },
            expect: "p-chat",
        },
        Row {
            name: "stage agents do not matter",
            setup: |l| {
                l.chain.stages[0].agents.as_mut().unwrap()[0].llm_provider = Some("p-other".into())
            },
            expect: "p-defaults",
        },
    ];
    run_chat_rows("llmProvider", &rows, |r| {
        PROVIDERS
            .iter()
            .find(|p| **p == r.llm_provider.name)
            .copied()
            .unwrap()
    });
}

#[test]
fn chat_max_iterations_defaults_agent_chain_chat() {
    let rows = [
        Row {
            name: "defaults",
            setup: |_| {},
            expect: 11,
        },
        Row {
            name: "agent over defaults",
            setup: |l| l.agent.max_iterations = Some(4),
            expect: 4,
        },
        Row {
            name: "chain over agent",
            setup: |l| {
                l.agent.max_iterations = Some(4);
                l.chain.max_iterations = Some(5);
            },
            expect: 5,
        },
        Row {
            name: "chat over chain",
            setup: |l| {
                l.agent.max_iterations = Some(4);
                l.chain.max_iterations = Some(5);
                chat(l).max_iterations = Some(6);
            },
            expect: 6,
        },
        Row {
            name: "stage max iterations do not apply to chat",
            setup: |l| l.chain.stages[0].max_iterations = Some(2),
            expect: 11,
        },
    ];
    run_chat_rows("maxIterations", &rows, |r| r.max_iterations);
}

#[test]
fn chat_mcp_servers_agent_chain_or_union_chat() {
    // In these rows `l.agent` is the chat agent; the stage agent
    // (test-agent) is configured through the chain's stages.
    let rows = [
        Row {
            name: "nothing anywhere",
            setup: |_| {},
            expect: vec![],
        },
        Row {
            name: "chat agent's own servers",
            setup: |l| l.agent.mcp_servers = Some(strings(&["s-chat-agent"])),
            expect: strings(&["s-chat-agent"]),
        },
        Row {
            name: "union of stage servers over agent",
            setup: |l| {
                l.agent.mcp_servers = Some(strings(&["s-chat-agent"]));
                l.chain.stages[0].agents = Some(vec![
                    StageAgentSpec {
                        mcp_servers: Some(strings(&["s-stage-agent", "s-other"])),
                        ..StageAgentSpec::named(AGENT)
                    },
                    StageAgentSpec {
                        mcp_servers: Some(strings(&["s-other", "s-sel"])),
                        ..StageAgentSpec::named("KubernetesAgent")
                    },
                ]);
                l.chain.stages.push(StageSpec {
                    name: "second".into(),
                    agents: None,
                    agent: Some("KubernetesAgent".into()),
                    replicas: Some(2),
                    ..stage()
                });
            },
            // first-use order, deduplicated; KubernetesAgent's own list for the replicas stage
            expect: strings(&["s-stage-agent", "s-other", "s-sel", "kubernetes-server"]),
        },
        Row {
            name: "chain servers over the union",
            setup: |l| {
                l.chain.stages[0].agents.as_mut().unwrap()[0].mcp_servers =
                    Some(strings(&["s-stage-agent"]));
                l.chain.mcp_servers = Some(strings(&["s-chain"]));
            },
            expect: strings(&["s-chain"]),
        },
        Row {
            name: "chat servers over chain",
            setup: |l| {
                l.chain.mcp_servers = Some(strings(&["s-chain"]));
                chat(l).mcp_servers = Some(strings(&["s-chat"]));
            },
            expect: strings(&["s-chat"]),
        },
    ];
    run_chat_rows("mcpServers", &rows, |r| r.mcp_servers.clone());
}

#[test]
fn chat_session_selection_beats_every_level() {
    let mut l = chat_levels();
    l.chain.mcp_servers = Some(strings(&["s-chain"]));
    chat(&mut l).mcp_servers = Some(strings(&["s-chat"]));
    let c = config(&l);
    let selection = McpSelection {
        servers: vec![
            McpServerSelection {
                name: "s-sel".into(),
                tools: Some(strings(&["query"])),
            },
            McpServerSelection {
                name: "s-other".into(),
                tools: None,
            },
        ],
        native_tools: Some(BTreeMap::from([("google_search".to_string(), false)])),
    };
    let r = c.resolve_chat("chain", &l.chain, Some(&selection)).unwrap();
    assert_eq!(r.mcp_servers, ["s-sel", "s-other"]);
    assert_eq!(
        r.tool_filter,
        BTreeMap::from([("s-sel".to_string(), strings(&["query"]))])
    );
    assert_eq!(
        r.native_tools_override,
        Some(BTreeMap::from([("google_search".to_string(), false)]))
    );
}

#[test]
fn chat_disabled_is_an_error_and_enabled_by_default() {
    let mut l = levels();
    l.chain.chat = None;
    let c = config(&l);
    assert!(
        c.resolve_chat("chain", &l.chain, None).is_ok(),
        "no chat block → enabled"
    );
    l.chain.chat = Some(ChatSpec {
        enabled: Some(false),
        ..ChatSpec::default()
    });
    let c = config(&l);
    assert!(matches!(
        c.resolve_chat("chain", &l.chain, None),
        Err(ResolveError::ChatDisabled(n)) if n == "chain"
    ));
}

#[test]
fn chat_iteration_timeout_defaults_chain() {
    let mut l = chat_levels();
    let c = config(&l);
    assert_eq!(
        c.resolve_chat("chain", &l.chain, None)
            .unwrap()
            .iteration_timeout,
        Duration::from_secs(100)
    );
    l.chain.iteration_timeout = Some("45s".into());
    let c = config(&l);
    assert_eq!(
        c.resolve_chat("chain", &l.chain, None)
            .unwrap()
            .iteration_timeout,
        Duration::from_secs(45)
    );
}

// ---------------------------------------------------------------- synthesis

fn synthesis(l: &mut Levels) -> &mut SynthesisSpec {
    l.stage.synthesis.get_or_insert_with(SynthesisSpec::default)
}

fn run_synthesis_rows<T: PartialEq + std::fmt::Debug>(
    field: &str,
    rows: &[Row<T>],
    get: fn(&tarsy_core::ResolvedAgentConfig) -> T,
) {
    for row in rows {
        let mut l = levels();
        (row.setup)(&mut l);
        let c = config(&l);
        let resolved = c
            .resolve_synthesis(&l.chain, &l.stage)
            .unwrap_or_else(|e| panic!("synthesis {field} / {}: {e}", row.name));
        assert_eq!(
            get(&resolved),
            row.expect,
            "synthesis {field} / {}",
            row.name
        );
    }
}

#[test]
fn synthesis_agent_and_strategy() {
    let rows = [
        Row {
            name: "built-in SynthesisAgent with its synthesis strategy",
            setup: |_| {},
            expect: ("synthesis-agent".to_string(), Core::Synthesis),
        },
        Row {
            name: "chain and defaults strategies do not apply (tool strategies)",
            setup: |l| {
                l.chain.iteration_strategy = Some(S::NativeThinking);
                l.defaults.iteration_strategy = Core::NativeThinking;
            },
            expect: ("synthesis-agent".to_string(), Core::Synthesis),
        },
        Row {
            name: "synthesis strategy over the agent's",
            setup: |l| synthesis(l).iteration_strategy = Some(S::SynthesisNativeThinking),
            expect: ("synthesis-agent".to_string(), Core::SynthesisNativeThinking),
        },
        Row {
            name: "custom synthesis agent without a strategy falls back to synthesis",
            setup: |l| synthesis(l).agent = Some(AGENT.into()),
            expect: (AGENT.to_string(), Core::Synthesis),
        },
        Row {
            name: "custom synthesis agent's strategy",
            setup: |l| {
                synthesis(l).agent = Some(AGENT.into());
                l.agent.iteration_strategy = Some(S::SingleCall);
            },
            expect: (AGENT.to_string(), Core::SingleCall),
        },
        Row {
            name: "synthesis strategy over custom agent's",
            setup: |l| {
                synthesis(l).agent = Some(AGENT.into());
                l.agent.iteration_strategy = Some(S::SingleCall);
                synthesis(l).iteration_strategy = Some(S::Synthesis);
            },
            expect: (AGENT.to_string(), Core::Synthesis),
        },
    ];
    run_synthesis_rows("agent/strategy", &rows, |r| {
        assert_eq!(r.backend, r.iteration_strategy.backend());
        assert!(r.mcp_servers.is_empty(), "synthesis is tool-less");
        (r.agent_name.clone(), r.iteration_strategy)
    });
}

#[test]
fn synthesis_provider_defaults_chain_synthesis() {
    let rows = [
        Row {
            name: "defaults",
            setup: |_| {},
            expect: "p-defaults",
        },
        Row {
            name: "chain over defaults",
            setup: |l| l.chain.llm_provider = Some("p-chain".into()),
            expect: "p-chain",
        },
        Row {
            name: "synthesis over chain",
            setup: |l| {
                l.chain.llm_provider = Some("p-chain".into());
                synthesis(l).llm_provider = Some("p-synth".into());
            },
            expect: "p-synth",
        },
        Row {
            name: "stage agents' providers do not apply",
            setup: |l| l.stage.agents.as_mut().unwrap()[0].llm_provider = Some("p-other".into()),
            expect: "p-defaults",
        },
    ];
    run_synthesis_rows("llmProvider", &rows, |r| {
        PROVIDERS
            .iter()
            .find(|p| **p == r.llm_provider.name)
            .copied()
            .unwrap()
    });
}

#[test]
fn synthesis_max_iterations_defaults_agent_chain_stage() {
    let rows = [
        Row {
            name: "defaults",
            setup: |_| {},
            expect: 11,
        },
        Row {
            name: "chain",
            setup: |l| l.chain.max_iterations = Some(7),
            expect: 7,
        },
        Row {
            name: "stage over chain",
            setup: |l| {
                l.chain.max_iterations = Some(7);
                l.stage.max_iterations = Some(8);
            },
            expect: 8,
        },
    ];
    run_synthesis_rows("maxIterations", &rows, |r| r.max_iterations);
}

// ------------------------------------------------------------------ scoring

fn scoring(l: &mut Levels) -> &mut ScoringSpec {
    l.chain.scoring.get_or_insert_with(ScoringSpec::default)
}

#[test]
fn scoring_is_off_unless_the_chain_or_the_defaults_turn_it_on() {
    let rows = [
        Row {
            name: "off by default",
            setup: |_| {},
            expect: false,
        },
        Row {
            name: "defaults turn it on",
            setup: |l| l.defaults.scoring_enabled = true,
            expect: true,
        },
        Row {
            name: "the chain turns it off over the defaults",
            setup: |l| {
                l.defaults.scoring_enabled = true;
                scoring(l).enabled = Some(false);
            },
            expect: false,
        },
        Row {
            name: "the chain turns it on",
            setup: |l| scoring(l).enabled = Some(true),
            expect: true,
        },
        Row {
            name: "a scoring section without enabled follows the defaults",
            setup: |l| scoring(l).llm_provider = Some("p-other".into()),
            expect: false,
        },
    ];
    for row in rows {
        let mut l = levels();
        (row.setup)(&mut l);
        assert_eq!(
            config(&l).scoring_enabled(&l.chain),
            row.expect,
            "{}",
            row.name
        );
    }
}

#[test]
fn scoring_judge_agent_strategy_and_provider() {
    let rows: [Row<(String, &str, Core, &str)>; 4] = [
        Row {
            name: "built-in ScoringAgent, tool-less, on the defaults' provider",
            setup: |l| l.defaults.iteration_strategy = Core::NativeThinking,
            expect: (
                "scoring-agent".into(),
                "ScoringAgent",
                Core::Synthesis,
                "p-defaults",
            ),
        },
        Row {
            name: "the chain's provider",
            setup: |l| l.chain.llm_provider = Some("p-chain".into()),
            expect: (
                "scoring-agent".into(),
                "ScoringAgent",
                Core::Synthesis,
                "p-chain",
            ),
        },
        Row {
            name: "scoring's provider over the chain's",
            setup: |l| {
                l.chain.llm_provider = Some("p-chain".into());
                scoring(l).llm_provider = Some("p-other".into());
            },
            expect: (
                "scoring-agent".into(),
                "ScoringAgent",
                Core::Synthesis,
                "p-other",
            ),
        },
        Row {
            name: "a custom judge with its own tool-less strategy",
            setup: |l| {
                scoring(l).agent = Some(AGENT.into());
                l.agent.iteration_strategy = Some(S::SingleCall);
                l.agent.display_name = Some("Judge".into());
            },
            expect: (AGENT.into(), "Judge", Core::SingleCall, "p-defaults"),
        },
    ];
    for row in rows {
        let mut l = levels();
        (row.setup)(&mut l);
        let r = config(&l)
            .resolve_scoring(&l.chain)
            .unwrap_or_else(|e| panic!("{}: {e}", row.name));
        assert!(
            r.mcp_servers.is_empty(),
            "{}: a judge is tool-less",
            row.name
        );
        assert_eq!(
            (
                r.agent_name.clone(),
                r.display_name.as_str(),
                r.iteration_strategy,
                r.llm_provider.name.as_str()
            ),
            row.expect,
            "{}",
            row.name
        );
    }
}

// ---------------------------------------------------------- executive summary

#[test]
fn executive_summary_provider_and_backend() {
    struct SummaryRow {
        name: &'static str,
        setup: fn(&mut Levels),
        provider: &'static str,
        backend: Backend,
    }
    let rows = [
        SummaryRow {
            name: "defaults",
            setup: |_| {},
            provider: "p-defaults",
            backend: Backend::Langchain, // defaults strategy react
        },
        SummaryRow {
            name: "chain provider over defaults",
            setup: |l| l.chain.llm_provider = Some("p-chain".into()),
            provider: "p-chain",
            backend: Backend::Langchain,
        },
        SummaryRow {
            name: "executiveSummaryProvider over chain provider",
            setup: |l| {
                l.chain.llm_provider = Some("p-chain".into());
                l.chain.executive_summary_provider = Some("p-summary".into());
            },
            provider: "p-summary",
            backend: Backend::Langchain,
        },
        SummaryRow {
            name: "backend from defaults strategy",
            setup: |l| l.defaults.iteration_strategy = Core::NativeThinking,
            provider: "p-defaults",
            backend: Backend::GoogleNative,
        },
        SummaryRow {
            name: "backend from chain strategy over defaults",
            setup: |l| {
                l.defaults.iteration_strategy = Core::NativeThinking;
                l.chain.iteration_strategy = Some(S::Langchain);
            },
            provider: "p-defaults",
            backend: Backend::Langchain,
        },
        SummaryRow {
            name: "stage-agent strategies do not matter",
            setup: |l| {
                l.chain.stages[0].agents.as_mut().unwrap()[0].iteration_strategy =
                    Some(S::NativeThinking)
            },
            provider: "p-defaults",
            backend: Backend::Langchain,
        },
    ];
    for row in rows {
        let mut l = levels();
        (row.setup)(&mut l);
        let c = config(&l);
        let s = c.resolve_executive_summary(&l.chain).unwrap();
        assert_eq!(s.llm_provider.name, row.provider, "{}", row.name);
        assert_eq!(s.backend, row.backend, "{}", row.name);
    }
}

// ------------------------------------------------------------ success policy

#[test]
fn success_policy_stage_defaults_any() {
    let rows: [(&str, Option<SuccessPolicy>, Option<CorePolicy>, CorePolicy); 5] = [
        ("fallback any", None, None, CorePolicy::Any),
        ("defaults all", None, Some(CorePolicy::All), CorePolicy::All),
        ("defaults any", None, Some(CorePolicy::Any), CorePolicy::Any),
        (
            "stage all over defaults any",
            Some(SuccessPolicy::All),
            Some(CorePolicy::Any),
            CorePolicy::All,
        ),
        (
            "stage any over defaults all",
            Some(SuccessPolicy::Any),
            Some(CorePolicy::All),
            CorePolicy::Any,
        ),
    ];
    for (name, stage_policy, defaults_policy, expect) in rows {
        let mut l = levels();
        l.stage.success_policy = stage_policy;
        l.defaults.success_policy = defaults_policy;
        assert_eq!(
            resolve_success_policy(&l.defaults, &l.stage),
            expect,
            "{name}"
        );
        assert_eq!(
            config(&l).resolve_success_policy(&l.stage),
            expect,
            "{name}"
        );
    }
}

// ------------------------------------------------------- executions / replicas

#[test]
fn stage_executions_and_replica_names() {
    let builtin = Config::builtin(Defaults::default());
    // agents: one execution each, named by agent, 1-based indexes.
    let mut s = stage();
    s.agents = Some(vec![
        StageAgentSpec::named("a"),
        StageAgentSpec {
            max_iterations: Some(2),
            ..StageAgentSpec::named("b")
        },
    ]);
    let e = builtin.stage_executions(&s);
    assert_eq!(
        e.iter()
            .map(|x| (x.display_name.as_str(), x.agent_index))
            .collect::<Vec<_>>(),
        [("a", 1), ("b", 2)]
    );
    assert_eq!(
        e[1].stage_agent.max_iterations,
        Some(2),
        "overrides travel with the agent"
    );
    assert_eq!(parallel_type(&s), Some(ParallelType::MultiAgent));

    // agent × replicas: {Base}-1..N, base name for resolution.
    let s = StageSpec {
        agents: None,
        agent: Some("KubernetesAgent".into()),
        replicas: Some(3),
        ..stage()
    };
    let e = builtin.stage_executions(&s);
    assert_eq!(
        e.iter()
            .map(|x| x.display_name.as_str())
            .collect::<Vec<_>>(),
        [
            "KubernetesAgent-1",
            "KubernetesAgent-2",
            "KubernetesAgent-3"
        ]
    );
    assert!(e.iter().all(|x| x.stage_agent.name == "KubernetesAgent"));
    assert_eq!(
        e.iter().map(|x| x.agent_index).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(parallel_type(&s), Some(ParallelType::Replica));

    // The reference's form: `agents` with one entry plus a stage-level
    // `replicas` replicates that agent, its overrides included.
    let listed = StageSpec {
        agents: Some(vec![StageAgentSpec {
            max_iterations: Some(4),
            ..StageAgentSpec::named("KubernetesAgent")
        }]),
        agent: None,
        replicas: Some(2),
        ..stage()
    };
    let le = builtin.stage_executions(&listed);
    assert_eq!(
        le.iter()
            .map(|x| (x.display_name.as_str(), x.agent_index))
            .collect::<Vec<_>>(),
        [("KubernetesAgent-1", 1), ("KubernetesAgent-2", 2)]
    );
    assert!(le.iter().all(|x| x.stage_agent.name == "KubernetesAgent"));
    assert!(
        le.iter().all(|x| x.stage_agent.max_iterations == Some(4)),
        "each replica keeps the listed agent's overrides"
    );
    assert_eq!(parallel_type(&listed), Some(ParallelType::Replica));

    // One agent (either form) is N = 1: no suffix, no parallel type.
    let single = StageSpec {
        agents: None,
        agent: Some("KubernetesAgent".into()),
        replicas: Some(1),
        ..stage()
    };
    assert_eq!(
        builtin.stage_executions(&single)[0].display_name,
        "KubernetesAgent"
    );
    assert_eq!(parallel_type(&single), None);
    assert_eq!(builtin.stage_executions(&stage()).len(), 1);

    // Labels are display names: the built-in's name and its alias both
    // label the execution `KubernetesAgent`.
    let canonical = StageSpec {
        agent: Some("kubernetes-agent".into()),
        ..single.clone()
    };
    assert_eq!(
        builtin.stage_executions(&canonical)[0].display_name,
        "KubernetesAgent"
    );
    assert_eq!(parallel_type(&stage()), None);

    // Replica resolution uses the base agent's definition.
    let l = levels();
    let c = config(&l);
    let r = c
        .resolve_agent(&l.chain, &s, &e[2].stage_agent, &e[2].display_name)
        .unwrap();
    assert_eq!(r.agent_name, "kubernetes-agent");
    assert_eq!(r.display_name, "KubernetesAgent-3");
    assert_eq!(r.mcp_servers, ["kubernetes-server"]);
}

// ------------------------------------------------------------- chain lookup

#[test]
fn chain_lookup_by_reference_or_alert_type() {
    let l = levels();
    let mut c = config(&l);
    let mut other = chain();
    other.alert_types = strings(&["Other", "Shared"]);
    c.insert_chain(Named::new("other", other, Origin::Builtin));
    let mut third = chain();
    third.alert_types = strings(&["Shared"]);
    c.insert_chain(Named::new("third", third, Origin::Builtin));

    assert_eq!(c.chain_for_alert("TestAlert", None).unwrap().name, "chain");
    assert_eq!(c.chain_for_alert("Other", None).unwrap().name, "other");
    assert_eq!(
        c.chain_for_alert("TestAlert", Some("other")).unwrap().name,
        "other",
        "chainRef wins over the alert type"
    );
    assert!(matches!(
        c.chain_for_alert("Nope", None),
        Err(ResolveError::NoChainForAlertType(t)) if t == "Nope"
    ));
    assert!(matches!(
        c.chain_for_alert("TestAlert", Some("ghost")),
        Err(ResolveError::ChainNotFound(n)) if n == "ghost"
    ));
    let err = c.chain_for_alert("Shared", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "alert type \"Shared\" is claimed by several chains: other, third"
    );
    assert_eq!(c.alert_types(), ["Other", "Shared", "TestAlert"]);
}

// ------------------------------------------------------------ MCP selection

fn selection(servers: &[(&str, Option<&[&str]>)]) -> McpSelection {
    McpSelection {
        servers: servers
            .iter()
            .map(|(n, t)| McpServerSelection {
                name: n.to_string(),
                tools: t.map(strings),
            })
            .collect(),
        native_tools: None,
    }
}

#[test]
fn mcp_selection_replaces_never_merges() {
    let mut l = levels();
    l.agent.mcp_servers = Some(strings(&["s-agent", "s-other"]));
    let c = config(&l);
    let mut r = c
        .resolve_agent(&l.chain, &l.stage, &l.stage_agent, AGENT)
        .unwrap();
    let native_before = r.native_tools_override.clone();
    c.apply_mcp_selection(
        &mut r,
        &selection(&[("s-sel", Some(&["a", "b"])), ("s-chain", Some(&[]))]),
    )
    .unwrap();
    assert_eq!(r.mcp_servers, ["s-sel", "s-chain"], "replaced, not merged");
    assert_eq!(
        r.tool_filter,
        BTreeMap::from([("s-sel".to_string(), strings(&["a", "b"]))]),
        "an empty tool list means all tools"
    );
    assert_eq!(
        r.native_tools_override, native_before,
        "no native override unless given"
    );

    let mut sel = selection(&[("s-agent", None)]);
    sel.native_tools = Some(BTreeMap::from([("code_execution".to_string(), true)]));
    c.apply_mcp_selection(&mut r, &sel).unwrap();
    assert_eq!(r.mcp_servers, ["s-agent"]);
    assert!(r.tool_filter.is_empty());
    assert_eq!(
        r.native_tools_override,
        Some(BTreeMap::from([("code_execution".to_string(), true)]))
    );
}

#[test]
fn mcp_selection_errors_are_precise() {
    let l = levels();
    let c = config(&l);
    let cases: Vec<(McpSelection, SelectionError, &str)> = vec![
        (
            selection(&[]),
            SelectionError::Empty,
            "MCP selection: servers: at least one MCP server is required",
        ),
        (
            selection(&[("s-sel", None), ("prometheus", None)]),
            SelectionError::UnknownServer {
                index: 1,
                name: "prometheus".into(),
                known: String::new(),
            },
            "MCP selection: servers[1].name: unknown MCP server \"prometheus\" (known: kubernetes-server, s-agent",
        ),
        (
            selection(&[("s-sel", None), ("s-sel", Some(&["x"]))]),
            SelectionError::Duplicate {
                index: 1,
                name: "s-sel".into(),
            },
            "MCP selection: servers[1].name: MCP server \"s-sel\" is listed twice",
        ),
        (
            selection(&[("s-sel", Some(&["ok", " "]))]),
            SelectionError::EmptyTool { index: 0, tool: 1 },
            "MCP selection: servers[0].tools[1]: tool names must not be empty",
        ),
        (
            McpSelection {
                native_tools: Some(BTreeMap::from([("web".to_string(), true)])),
                ..selection(&[("s-sel", None)])
            },
            SelectionError::UnknownNativeTool { name: "web".into() },
            "MCP selection: unknown native tool \"web\"",
        ),
    ];
    for (sel, expected, text) in cases {
        let err = c.validate_mcp_selection(&sel).unwrap_err();
        assert_eq!(
            std::mem::discriminant(&err),
            std::mem::discriminant(&expected)
        );
        assert!(err.to_string().starts_with(text), "{err}");
        // Applying an invalid selection leaves the configuration untouched.
        let mut r = c
            .resolve_agent(&l.chain, &l.stage, &l.stage_agent, AGENT)
            .unwrap();
        let before = r.clone();
        assert!(c.apply_mcp_selection(&mut r, &sel).is_err());
        assert_eq!(r, before);
    }
}
