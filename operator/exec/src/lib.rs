//! TARSy's mode-neutral execution layer: everything an investigation does
//! that does not depend on where it runs, written once.
//!
//! Local mode (`tarsy-local`: in-process tasks, SQLite or Postgres) and
//! cluster mode (the operator, `tarsy runner` in investigation pods, the
//! cluster API) are thin IO edges around this crate. It knows nothing of
//! Kubernetes or HTTP serving; storage goes through `tarsy-store`.
//!
//! | module | what |
//! |---|---|
//! | [`notify`] | Slack notifications of sessions that start and end, threaded per alert |
//! | [`plan`] | Chain → the state machine's plan; one execution's resolved configuration |
//! | [`intake`] | what an accepted alert becomes (the masked session row) and what is checked before a question becomes a chat answer |
//! | [`breakers`] | provider circuit breakers shared through the store (every runner pod, every process) |
//! | [`chat`] | a chat answer's rows, start and end |
//! | [`context`] | previous stages, synthesis input and chat history, built from the store |
//! | [`ids`] | stage and execution ids, the chat stage's name |
//! | [`records`] | the stage and execution rows of a started stage |
//! | [`launch`] | [`Launcher`]: one execution — MCP tools (masked), runbook, breakers, deadline, engine |
//! | [`llm`] | [`LlmRouter`]: `scripted` providers replay their script; others go to the LLM service |
//! | [`memory`] | investigation memory: recall into an investigation's prompt and tools, the reflector after a score, review effects |
//! | [`retention`] | how long sessions stay listed, when hidden ones are removed, the live events' TTL |
//! | [`summary`] | the executive summary call |
//! | [`runbook`] | runbook downloads with the engine's rules |
//! | [`tools`] | the MCP executor as the engine's tool executor |
//! | [`workflow`] | the one interpreter of the chain state machine's actions: store writes and effects, the failure rule |

#![warn(missing_docs)]

pub mod breakers;
pub mod budget;
pub mod chat;
pub mod context;
pub mod error;
pub mod ids;
pub mod intake;
pub mod launch;
pub mod llm;
pub mod memory;
pub mod notify;
pub mod plan;
pub mod records;
pub mod retention;
pub mod runbook;
pub mod scoring;
pub mod summary;
pub mod tools;
pub mod workflow;

pub use error::{ExecError, Result};
pub use launch::{AgentInput, Assignment, Launched, Launcher};
pub use llm::{DEFAULT_LLM_ADDR, LlmCallNotice, LlmRouter};
pub use summary::{DEFAULT_SUMMARY_TIMEOUT, Summarizer, SummaryError};
