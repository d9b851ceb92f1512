//! The TARSy Kubernetes operator (DESIGN §2–§4).
//!
//! - [`pod`]: the investigation pod of an AgentExecution (pure, snapshot-tested);
//! - [`alert`]: the Alert reconcile, sans IO (status, children, Postgres
//!   writes and Events computed from observed state);
//! - [`execution`]: the AgentExecution reconcile, sans IO (pod lifecycle,
//!   failures the runner cannot record);
//! - [`health`]: MCPServer `lastHealth` from runners' connection outcomes;
//! - [`resources`]: Ready conditions of Chain, Agent, MCPServer, LLMProvider;
//! - [`controller`]: the kube-runtime Controllers doing the IO ([`run`]);
//! - [`metrics`]: Prometheus metrics, `/healthz`, `/readyz`;
//! - [`conditions`]: standard conditions.
//!
//! Names, labels, annotations and the runner's environment are the
//! cluster-side contract in `tarsy_crds::contract`; everything a mode does
//! not decide is `tarsy_exec`'s.

pub mod alert;
pub mod conditions;
pub mod controller;
pub mod execution;
pub mod health;
pub mod metrics;
pub mod pod;
pub mod resources;

pub use controller::{Error, LeaderElection, Settings, run};
pub use pod::PodSettings;
