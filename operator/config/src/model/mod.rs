//! The configuration model: the specs of the documents TARSy is configured
//! with (Chain, Agent, MCPServer, LLMProvider) and of the alert document,
//! with their JSON schemas. Both modes read the same documents: local mode
//! from files, cluster mode as custom resources (`tarsy-crds` wraps these
//! specs for the API server and owns everything else the cluster needs).
//!
//! Every field carries a doc comment, which becomes its schema description
//! (so `kubectl explain` works). Single-object invariants are CEL rules
//! (`x-kubernetes-validations`, written as schema extensions here so that
//! the model needs no Kubernetes crate); invariants that need other objects
//! are [`crate::Config::validate`]'s job.

mod agent;
mod alert;
mod chain;
mod common;
mod llm_provider;
mod mcp_server;
mod name;

pub use agent::AgentSpec;
pub use alert::{
    AlertSource, AlertSpec, McpSelectionSpec, McpServerSelectionSpec, NATIVE_TOOL_NAMES,
    NativeTools,
};
pub use chain::{ChainSpec, ChatSpec, ScoringSpec, StageAgentSpec, StageSpec, SynthesisSpec};
pub use common::{
    DURATION_RULE, DurationError, McpUnavailablePolicy, SecretKeyRef, format_duration,
    parse_duration,
};
pub use llm_provider::LLMProviderSpec;
pub use mcp_server::{
    ContainerSpec, CustomPatternSpec, DataMaskingSpec, EnvVarSource, EnvVarSpec, HttpTransportKind,
    MCPServerSpec, ServiceAccountNeeds, StdioSpec, SummarizationSpec, TlsSpec,
};
pub use name::{MAX_OBJECT_NAME_CHARS, object_name_problem};
pub use tarsy_core::{IterationStrategy, ProviderType, SuccessPolicy};

/// API group of every TARSy document and resource.
pub const GROUP: &str = "tarsy.dev";
/// API version of every TARSy document and resource.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` value of every TARSy document and resource.
pub const API_VERSION: &str = "tarsy.dev/v1alpha1";
