//! The TARSy Kubernetes operator: reconcilers around the mode-neutral
//! execution layer (`tarsy_exec`). Pure reconciles compute what to do from
//! what is observed; thin IO modules carry it out. How an Alert travels
//! through them, step by step: `docs/architecture.md#cluster-mode`.
//!
//! Pure (no IO, tested with values):
//! - [`alert`]: the Alert reconcile (status, children, Postgres writes,
//!   Events, the executive summary request) on the chain state machine;
//! - [`execution`]: the AgentExecution reconcile (pod lifecycle, failures
//!   the runner cannot record);
//! - [`pod`]: the investigation pod of an AgentExecution (snapshot-tested);
//! - [`health`]: MCPServer `lastHealth` from runners' connection outcomes;
//! - [`resources`]: Ready conditions of Chain, Agent, MCPServer, LLMProvider;
//! - [`conditions`]: standard conditions.
//!
//! IO:
//! - [`run`](mod@run): settings, watches, leadership, the controllers ([`run()`]);
//! - `alert_io`, `execution_io`, `config_ready`: each reconcile's reads and writes;
//! - `status_apply`: server-side apply of statuses;
//! - [`summaries`]: executive summaries, outside the reconciles;
//! - [`metrics`]: Prometheus metrics, `/healthz`, `/readyz`.
//!
//! Names, labels, annotations and the runner's environment are the
//! cluster-side contract in `tarsy_crds::contract`; everything a mode does
//! not decide is `tarsy_exec`'s.

pub mod alert;
mod alert_io;

pub use alert_io::{chat_request, open_reflectors, scoring_state};
pub mod conditions;
mod config_ready;
mod context;
mod error;
pub mod execution;
mod execution_io;
pub mod health;
pub mod metrics;
pub mod pod;
pub mod resources;
pub mod run;
mod status_apply;
pub mod summaries;

pub use error::Error;
pub use pod::PodSettings;
pub use run::{LeaderElection, Settings, run};
pub use status_apply::{FIELD_MANAGER, HEALTH_FIELD_MANAGER};
