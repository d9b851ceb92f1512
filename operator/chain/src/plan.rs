//! What a Chain asks for, flattened for the state machine.

use serde::{Deserialize, Serialize};
use tarsy_core::{Budget, ParallelType, SuccessPolicy};

/// The stages of a chain with their executions already expanded (multi-agent
/// stages list each agent, replica stages list `{Base}-1..N`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainPlan {
    /// Chain name.
    pub chain: String,
    /// Stages in order; never empty (validation rejects empty chains).
    pub stages: Vec<StagePlan>,
    /// What a session may spend (none: no limit). Once spent, no further
    /// stage starts.
    #[serde(default)]
    pub budget: Option<Budget>,
}

/// One configured stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagePlan {
    /// Stage name.
    pub name: String,
    /// Resolved success policy (stage → defaults → any).
    pub success_policy: SuccessPolicy,
    /// Multi-agent or replica; `None` for a single agent.
    pub parallel_type: Option<ParallelType>,
    /// One entry per execution, in launch order; never empty.
    pub executions: Vec<ExecutionPlan>,
    /// The agent that synthesizes the stage when it has more than one execution.
    pub synthesis: ExecutionPlan,
}

/// One execution of a stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionPlan {
    /// Agent definition to run (registry key).
    pub agent_name: String,
    /// Name in records and logs (`{Base}-N` for replicas).
    pub display_name: String,
}
