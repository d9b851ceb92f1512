//! TARSy's shared vocabulary.
//!
//! Every crate speaks in these types: the engine (which must know nothing of
//! Kubernetes, SQL or HTTP), the store, the MCP client, the API and the
//! operator. Keeping them here lets those crates compile and evolve
//! independently.

pub mod alert;
pub mod config;
pub mod control;
pub mod conversation;
pub mod cost;
pub mod recorder;
pub mod report;
pub mod status;
pub mod stream;

pub use alert::{
    InvalidAlert, MAX_ALERT_DATA_BYTES, MAX_NAME_CHARS, MAX_RUNBOOK_URL_CHARS, NoToolCatalog,
    SelectionError, ToolCatalog,
};
pub use config::{
    LlmProviderConfig, McpSelection, McpServerConfig, McpServerSelection, McpTransport,
    NATIVE_TOOL_NAMES, ProviderType, ResolvedAgentConfig, SecretValue, SummarizationConfig,
    ToolFilter,
};
pub use conversation::{ConversationMessage, TokenUsage, ToolCall, ToolDefinition, ToolResult};
pub use cost::{Budget, Cost, ModelPrice, PriceTier, SpendGauge};
pub use recorder::{
    EventPublisher, ExecutionRecorder, NewLlmInteraction, NewMcpInteraction, NewMessage,
    NewTimelineEvent, RecordError, RecordScope, RecordWrite, StoredMessage, TimelineEvent,
    error_kind,
};
pub use report::{StageResult, SystemWarning};
pub use status::{
    Backend, ExecutionKind, ExecutionStatus, IterationStrategy, LlmInteractionType,
    McpInteractionType, MemoryCategory, MemoryValence, MessageRole, ParallelType, ReviewAction,
    ReviewRating, ReviewStatus, ScoreStatus, SessionEndReason, SessionStatus, StageKind,
    SuccessPolicy, TimelineEventStatus, TimelineEventType, UnknownValue,
};
pub use stream::{StageEventStatus, StreamEvent};
