//! TARSy agent engine: everything an agent execution does between "here is
//! the alert" and "here is the final analysis".
//!
//! The engine knows nothing of Kubernetes, SQL or HTTP. It reaches the model
//! through [`LlmClient`] ([`GrpcLlmClient`] talks to the LLM service,
//! [`ScriptedLlmClient`] replays a script file), tools
//! through [`ToolExecutor`] (the MCP client implements it) and storage / live
//! events through the `tarsy_core` recorder traits.
//!
//! Entry point: [`run_agent`] with an [`ExecutionContext`]; it returns an
//! [`ExecutionResult`] (completed, failed, timed_out or cancelled) after
//! recording every timeline event, message and LLM interaction on the way.
//!
//! Public modules (what other crates use):
//!
//! | module | what |
//! |---|---|
//! | [`llm`] | the LLM client trait, chunks, the gRPC client, the in-process scripted client |
//! | [`recording`] | timeline events (create / stream / complete) and their WebSocket payloads |
//! | [`fallback`] | circuit breakers shared by executions ([`fallback::CircuitBreakers`]) |
//! | [`retry`] | waiting out an unreachable LLM service ([`retry::ServiceRetry`]) |
//! | `memory` | an in-memory recorder + publisher for tests and benchmarks (feature `testing`) |
//! | [`react_parser`] | the ReAct parser and the feedback it produces |
//! | [`prompt`] | prompt building from the text assets in `prompts/` |
//! | [`context`] | stage, investigation and synthesis context formatting |
//! | [`runbook`] | runbook URL rules and cache |
//!
//! Internal modules:
//!
//! | module | what |
//! |---|---|
//! | `execution` | `run_agent` and its context and result (re-exported here) |
//! | `strategy` | the iteration strategies behind one trait, chosen by configuration |
//! | `run` | what strategies share: streaming, LLM calls with fallback, compaction, tool calls |
//! | `tools` | the tool executor trait, an in-memory executor (re-exported here) |
//! | `window` | context-window management: cap, prune, compaction helpers |
//! | `iteration` | iteration state: consecutive timeouts, last failure |
//! | `tokens` | token estimates, storage / summarization truncation |

pub mod context;
mod deferring;
mod execution;
pub mod fallback;
mod iteration;
pub mod llm;
#[cfg(feature = "testing")]
pub mod memory;
pub mod prompt;
pub mod react_parser;
pub mod recording;
pub mod retry;
mod run;
pub mod runbook;
mod strategy;
mod tokens;
mod tools;
mod window;

pub use deferring::DeferringRecorder;
pub use execution::{
    ChatContext, ExecutionContext, ExecutionResult, ExecutionWarning, ReflectionContext,
    ScoringContext, run_agent,
};
pub use llm::{GrpcLlmClient, LlmClient, ScriptedLlmClient};
pub use tools::{InMemoryToolExecutor, ToolError, ToolExecutor};
