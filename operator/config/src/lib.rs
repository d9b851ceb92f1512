//! TARSy's configuration model: built-in definitions, local-mode manifest
//! loading, validation and hierarchy resolution. Pure: no IO besides reading
//! the files it is asked to read (and environment variables for `${VAR}`).
//!
//! The inputs are the specs of [`model`] (from YAML documents in local mode,
//! from custom resources in cluster mode, which `tarsy-crds` wraps around
//! the same specs); the outputs are the runtime types of `tarsy-core`
//! ([`tarsy_core::ResolvedAgentConfig`], [`tarsy_core::LlmProviderConfig`],
//! [`tarsy_core::McpServerConfig`]) and `tarsy-masking`'s
//! [`tarsy_masking::MaskingConfig`]. Nothing here depends on a Kubernetes
//! crate.
//!
//! # Configuring
//!
//! - **Cluster mode**: [`Config::for_cluster`] with the namespace's
//!   Chains, Agents, MCPServers and LLMProviders inserted over it
//!   (`tarsy_crds::config::from_resources`); defaults from the
//!   operator's environment / flags ([`DefaultsSpec::from_env`], variables in
//!   [`defaults`]). [`Config::validate`] lists what is broken, per object.
//! - **Local mode**: [`load_dir`] reads every `*.yaml`/`*.yml` of a directory
//!   (Chain, Agent, MCPServer, LLMProvider, and optionally one
//!   `kind: Defaults` document), interpolates `${VAR}` (`$${` escapes),
//!   checks each object against its kind's schema and CEL rules like the
//!   API server would ([`schema`]), then cross-validates. Alert manifests are read separately
//!   ([`load_alert_file`]).
//!
//! # Alerts
//!
//! [`Config::check_alert`] is the one rule set of a valid alert, which the
//! REST API, the admission webhook and the Alertmanager bridge all apply
//! (see [`alert`]).
//!
//! Built-in agents, MCP servers, LLM providers and masking patterns are in
//! [`builtin`]; an object of the same kind and name replaces a built-in one.
//!
//! # Resolution (later levels win; list fields only when non-empty)
//!
//! Investigation agent ([`Config::resolve_agent`]):
//!
//! | field | defaults | agent | chain | stage | stage agent |
//! |---|---|---|---|---|---|
//! | iterationStrategy | ✓ | ✓ | ✓ | | ✓ |
//! | llmProvider | ✓ | | ✓ | | ✓ |
//! | maxIterations | ✓ (20) | ✓ | ✓ | ✓ | ✓ |
//! | mcpServers | | ✓ | ✓ | | ✓ |
//! | iterationTimeout | ✓ (120s) | | ✓ | | |
//! | customInstructions | | ✓ | | | |
//!
//! The backend always follows the resolved strategy
//! ([`tarsy_core::IterationStrategy::backend`]).
//!
//! Chat ([`Config::resolve_chat`]): agent `chat.agent` → `chat-agent`;
//! strategy defaults → agent → chain → chat; provider defaults → chain →
//! chat; max iterations defaults → agent → chain → chat; MCP servers agent →
//! chain (else the union of the stages' servers) → chat → the session's
//! `mcpSelection` (replace, not merge).
//!
//! Synthesis ([`Config::resolve_synthesis`]): agent `synthesis.agent` →
//! `synthesis-agent`; strategy `synthesis` → agent → `synthesis.iterationStrategy`;
//! provider defaults → chain → synthesis; no MCP servers.
//!
//! Scoring ([`Config::resolve_scoring`], when [`Config::scoring_enabled`]):
//! agent `scoring.agent` → `scoring-agent`; strategy `synthesis` → agent
//! (tool-less); provider defaults → chain → scoring; no MCP servers.
//!
//! Executive summary ([`Config::resolve_executive_summary`]): provider
//! `executiveSummaryProvider` → chain `llmProvider` → defaults; backend from
//! chain `iterationStrategy` → defaults.
//!
//! Success policy ([`resolve_success_policy`]): stage → defaults → `any`.
//! Replicas ([`Config::stage_executions`]): the stage's single agent (`agent`, or
//! `agents` with one entry, overrides included) as `{agent}-1` … `{agent}-N`; resolution
//! uses the base name, the display name only labels records.

pub mod alert;
pub mod builtin;
pub mod convert;
pub mod defaults;
pub mod error;
pub mod interpolate;
pub mod loader;
pub mod model;
pub mod registry;
pub mod resolve;
pub mod schema;
mod validate;

pub use alert::{check_alert_fields, check_runbook_url};
pub use convert::{
    EnvSecretResolver, MapSecretResolver, Placement, SecretResolver, llm_provider_config,
    masking_config, summarization_config,
};
pub use defaults::{
    AlertMaskingSpec, CircuitBreakerSpec, DEFAULT_KUBERNETES_MCP_IMAGE, DEFAULT_SLACK_API_URL,
    Defaults, DefaultsSpec, EmbeddingSettings, EmbeddingSpec, MemorySettings, MemorySpec,
    Notifications, NotificationsSpec, PricingSettings, PricingSpec, Retention, RetentionSpec,
    ScoringDefaultsSpec, SlackSpec,
};
pub use error::{
    ConfigError, ConfigErrors, Location, ObjectRef, Problem, ResolveError, SecretError,
    SelectionError,
};
pub use loader::{
    ConfigObject, build_config, load_alert_file, load_dir, load_dir_with, load_files_with,
    parse_config,
};
pub use registry::{Config, Named, Origin};
pub use resolve::{
    ExecutionConfig, ExecutiveSummaryConfig, chat_enabled, parallel_type, replica_name,
    resolve_success_policy,
};
