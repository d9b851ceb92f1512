//! Definitions that ship with TARSy. A resource (or local manifest) with the
//! same kind and name replaces the built-in one.
//!
//! - Agents: `kubernetes-agent` (cluster troubleshooting with the built-in
//!   Kubernetes MCP server), `chat-agent` (follow-up questions; inherits its
//!   strategy and gets the chain's MCP servers), `synthesis-agent` (combines
//!   parallel investigations; strategy `synthesis`, tool-less),
//!   `scoring-agent` (the judge of finished investigations: tool-less, its
//!   instructions are the judge's own, `tarsy-scoring`'s). Their labels in
//!   prompts and records are `KubernetesAgent`, `ChatAgent`,
//!   `SynthesisAgent` and `ScoringAgent`, which references also accept
//!   ([`AGENT_ALIASES`]).
//! - MCP server `kubernetes-server`: `kubernetes-mcp-server`, read-only and
//!   without destructive tools, Kubernetes masking. Local mode runs it over
//!   stdio (`npx`); in a cluster it is a sidecar of the investigation pod
//!   running the upstream image ([`cluster_mcp_servers`]), under the
//!   investigator service account (`serviceAccount.clusterRead`).
//! - LLM providers `google-default`, `openai-default`, `anthropic-default`,
//!   `xai-default`, reading their API key from the LLM service's
//!   environment (`GOOGLE_API_KEY`, `OPENAI_API_KEY`, ...).
//! - Masking patterns and groups: [`masking`] (owned by `tarsy-masking`).

use std::collections::BTreeMap;

use crate::model::{
    AgentSpec, ContainerSpec, DataMaskingSpec, IterationStrategy, LLMProviderSpec, MCPServerSpec,
    ProviderType, StdioSpec, SummarizationSpec,
};

/// Built-in masking patterns and groups, re-exported from `tarsy-masking`.
pub mod masking {
    pub use tarsy_masking::builtin::{
        BuiltinPattern, CODE_MASKERS, GROUPS, KUBERNETES_SECRET, PATTERNS, group, is_code_masker,
        pattern,
    };
}

/// The built-in Kubernetes troubleshooting agent.
pub const KUBERNETES_AGENT: &str = "kubernetes-agent";
/// The built-in chat agent (used when a chain's chat names none).
pub const CHAT_AGENT: &str = "chat-agent";
/// The built-in synthesis agent (used when a stage's synthesis names none).
pub const SYNTHESIS_AGENT: &str = "synthesis-agent";
/// The built-in judge (used when a chain's scoring names none).
pub const SCORING_AGENT: &str = "scoring-agent";
/// The built-in reflector, which learns memories from scored
/// investigations.
pub const MEMORY_REFLECTOR: &str = "memory-reflector";
/// Names a reference to a built-in agent may also use (alias → name): the
/// built-ins' names before object names followed the Kubernetes rule in both
/// modes, and still their display names.
pub const AGENT_ALIASES: [(&str, &str); 5] = [
    ("KubernetesAgent", KUBERNETES_AGENT),
    ("ChatAgent", CHAT_AGENT),
    ("SynthesisAgent", SYNTHESIS_AGENT),
    ("ScoringAgent", SCORING_AGENT),
    ("MemoryReflector", MEMORY_REFLECTOR),
];
/// The built-in Kubernetes MCP server.
pub const KUBERNETES_SERVER: &str = "kubernetes-server";
/// Pinned npm version of kubernetes-mcp-server.
pub const KUBERNETES_MCP_SERVER_PACKAGE: &str = "kubernetes-mcp-server@0.0.67";
/// Port the built-in Kubernetes MCP server's sidecar listens on (away from
/// the 8080 most servers default to, so a chain's own sidecar rarely clashes).
pub const KUBERNETES_SERVER_PORT: u16 = 8781;
/// The flags that keep the built-in Kubernetes MCP server read-only, in
/// both of its forms.
const KUBERNETES_SERVER_SAFETY_FLAGS: [&str; 2] = ["--read-only", "--disable-destructive"];

const KUBERNETES_AGENT_INSTRUCTIONS: &str = "\
You are a Kubernetes troubleshooting specialist. Investigate the alert by \
gathering evidence from the cluster before drawing conclusions: look at the \
affected workload's pods, their status, recent events and container logs \
(including the previous container's logs after a restart), then at the \
owning Deployment, StatefulSet or DaemonSet, its rollout history, and the \
node the pods run on. Correlate timestamps: what changed right before the \
alert fired?

Work read-only: never modify, restart or delete anything. Prefer namespaced \
queries over cluster-wide listings. When you conclude, state the most likely \
root cause, the evidence for it, what you ruled out, and concrete remediation \
steps an operator can take (commands included), ordered by urgency.";

const CHAT_AGENT_INSTRUCTIONS: &str = "\
You answer follow-up questions about an investigation that has finished. \
The full investigation (every stage's reasoning, tool calls, results and \
conclusions, plus earlier questions in this chat) is in your context: use it \
first, and call tools only when the question needs information the \
investigation did not gather. Be direct and specific; say clearly when the \
available evidence does not answer the question.";

const SYNTHESIS_AGENT_INSTRUCTIONS: &str = "\
Several agents investigated the same alert in parallel. Their full \
investigations follow. Combine them into one analysis: identify where they \
agree, resolve where they disagree by weighing the evidence each one \
gathered (prefer direct observations over inference), and note anything \
only one of them found. Produce a single root-cause analysis with the \
supporting evidence and prioritized remediation steps. Do not invent facts \
that none of the investigations established.";

const KUBERNETES_SERVER_INSTRUCTIONS: &str = "\
Read-only access to the Kubernetes cluster. Start narrow: query the \
affected namespace and workload rather than listing everything. Events and \
logs usually explain a failure faster than full object dumps. Secret \
contents are masked.";

/// Built-in agents by name.
pub fn agents() -> BTreeMap<String, AgentSpec> {
    BTreeMap::from([
        (
            KUBERNETES_AGENT.to_string(),
            AgentSpec {
                display_name: Some("KubernetesAgent".into()),
                description: Some(
                    "Troubleshoots Kubernetes workloads with read-only cluster access.".into(),
                ),
                custom_instructions: Some(KUBERNETES_AGENT_INSTRUCTIONS.into()),
                mcp_servers: Some(vec![KUBERNETES_SERVER.to_string()]),
                iteration_strategy: None,
                max_iterations: None,
            },
        ),
        (
            CHAT_AGENT.to_string(),
            AgentSpec {
                display_name: Some("ChatAgent".into()),
                description: Some("Answers follow-up questions about an investigation.".into()),
                custom_instructions: Some(CHAT_AGENT_INSTRUCTIONS.into()),
                // Chat gets the chain's servers (or the union of its stages').
                mcp_servers: None,
                iteration_strategy: None,
                max_iterations: None,
            },
        ),
        (
            SYNTHESIS_AGENT.to_string(),
            AgentSpec {
                display_name: Some("SynthesisAgent".into()),
                description: Some("Combines parallel investigations into one analysis.".into()),
                custom_instructions: Some(SYNTHESIS_AGENT_INSTRUCTIONS.into()),
                mcp_servers: None,
                iteration_strategy: Some(IterationStrategy::Synthesis),
                max_iterations: None,
            },
        ),
        (
            SCORING_AGENT.to_string(),
            AgentSpec {
                display_name: Some("ScoringAgent".into()),
                description: Some(
                    "Scores finished investigations and reports missing tools.".into(),
                ),
                // The judge's instructions are tarsy-scoring's, in every judge's prompt.
                custom_instructions: None,
                mcp_servers: None,
                iteration_strategy: Some(IterationStrategy::Synthesis),
                max_iterations: None,
            },
        ),
        (
            MEMORY_REFLECTOR.to_string(),
            AgentSpec {
                display_name: Some("MemoryReflector".into()),
                description: Some(
                    "Learns short memories from scored investigations for the next ones.".into(),
                ),
                // The reflector's instructions are tarsy-memory's.
                custom_instructions: None,
                mcp_servers: None,
                iteration_strategy: Some(IterationStrategy::Synthesis),
                max_iterations: None,
            },
        ),
    ])
}

/// Built-in MCP servers by name, as local mode runs them (stdio child
/// processes).
pub fn mcp_servers() -> BTreeMap<String, MCPServerSpec> {
    let mut args = vec!["-y".to_string(), KUBERNETES_MCP_SERVER_PACKAGE.to_string()];
    args.extend(KUBERNETES_SERVER_SAFETY_FLAGS.map(String::from));
    BTreeMap::from([(
        KUBERNETES_SERVER.to_string(),
        kubernetes_server(
            None,
            Some(StdioSpec {
                command: "npx".into(),
                args,
                env: Vec::new(),
                image: None,
            }),
        ),
    )])
}

/// Built-in MCP servers by name, as a cluster runs them: the Kubernetes
/// server is a sidecar running `image` (the upstream kubernetes-mcp-server
/// serving streamable HTTP on [`KUBERNETES_SERVER_PORT`]), authenticated as
/// the pod's investigator service account. The runner image has no Node, so
/// the stdio form could not start there.
pub fn cluster_mcp_servers(image: &str) -> BTreeMap<String, MCPServerSpec> {
    let mut args = vec!["--port".to_string(), KUBERNETES_SERVER_PORT.to_string()];
    args.extend(KUBERNETES_SERVER_SAFETY_FLAGS.map(String::from));
    BTreeMap::from([(
        KUBERNETES_SERVER.to_string(),
        kubernetes_server(
            Some(ContainerSpec {
                image: image.to_string(),
                command: None,
                args,
                env: Vec::new(),
                port: KUBERNETES_SERVER_PORT,
                path: None,
            }),
            None,
        ),
    )])
}

fn kubernetes_server(container: Option<ContainerSpec>, stdio: Option<StdioSpec>) -> MCPServerSpec {
    MCPServerSpec {
        container,
        stdio,
        url: None,
        transport: None,
        bearer_token_secret_ref: None,
        bearer_token_env: None,
        headers: None,
        tls: None,
        timeout: None,
        instructions: Some(KUBERNETES_SERVER_INSTRUCTIONS.into()),
        data_masking: Some(DataMaskingSpec {
            enabled: Some(true),
            pattern_groups: vec!["kubernetes".into()],
            patterns: Vec::new(),
            custom_patterns: Vec::new(),
        }),
        summarization: Some(SummarizationSpec {
            enabled: Some(true),
            size_threshold_tokens: Some(5000),
            summary_max_token_limit: Some(1000),
        }),
        service_account: Some(crate::model::ServiceAccountNeeds {
            cluster_read: Some(true),
            name: None,
        }),
    }
}

fn provider(
    provider_type: ProviderType,
    model: &str,
    key_env: &str,
    context_window: u64,
    native_tools: Option<BTreeMap<String, bool>>,
) -> LLMProviderSpec {
    LLMProviderSpec {
        provider_type,
        model: model.into(),
        api_key_secret_ref: None,
        api_key_env: Some(key_env.into()),
        credentials_env: None,
        base_url: None,
        project: None,
        location: None,
        max_tool_result_tokens: None,
        native_tools,
        context_window_tokens: Some(context_window),
        fallback: None,
        pricing: None,
        script: None,
    }
}

/// Built-in LLM providers by name.
pub fn llm_providers() -> BTreeMap<String, LLMProviderSpec> {
    let gemini_tools = BTreeMap::from([
        ("google_search".to_string(), true),
        ("code_execution".to_string(), false),
        ("url_context".to_string(), true),
    ]);
    BTreeMap::from([
        (
            "google-default".to_string(),
            provider(
                ProviderType::Google,
                "gemini-2.5-pro",
                "GOOGLE_API_KEY",
                1_048_576,
                Some(gemini_tools),
            ),
        ),
        (
            "openai-default".to_string(),
            provider(
                ProviderType::Openai,
                "gpt-5",
                "OPENAI_API_KEY",
                400_000,
                None,
            ),
        ),
        (
            "anthropic-default".to_string(),
            provider(
                ProviderType::Anthropic,
                "claude-sonnet-4-5",
                "ANTHROPIC_API_KEY",
                200_000,
                None,
            ),
        ),
        (
            "xai-default".to_string(),
            provider(ProviderType::Xai, "grok-4", "XAI_API_KEY", 256_000, None),
        ),
    ])
}
