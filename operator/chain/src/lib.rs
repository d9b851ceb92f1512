//! The chain state machine: what to do next for one alert session.
//!
//! Pure and level-triggered, like a reconciler: [`decide`] looks at a
//! [`ChainPlan`] (what the Chain asks for) and a [`SessionView`] (what exists
//! now: stages, executions and their states) and returns the [`Action`]s that
//! move the session forward. It performs no IO and keeps no state between
//! calls, so the Kubernetes reconciler and the local-mode driver call the same
//! function, an operator restart loses nothing (the view is re-derived from
//! resources and Postgres), and the tests need nothing but values.
//!
//! Semantics: stages run in order; every stage runs N ≥ 1 executions the
//! same way; a stage succeeds by its success policy (default `any`); the
//! first failed stage fails the session (fail-fast); a successful stage with
//! more than one execution is followed by a synthesis stage whose failure is
//! fatal and whose result replaces the stage's for later stages; after the
//! last stage an executive summary is requested (fail-open) and the session
//! completes. Cancellation and the session timeout stop the active
//! executions first, then end the session as `cancelled` / `timed_out`.

mod admission;
mod aggregate;
mod machine;
mod plan;

pub use admission::{PendingSession, admit, daily_budget_hold};
pub use aggregate::aggregate_stage;
pub use machine::{
    Action, ExecutionStart, ExecutionView, ExecutiveSummaryView, SessionView, StageStart,
    StageView, StopReason, decide, final_analysis, stage_results,
};
pub use plan::{ChainPlan, ExecutionPlan, StagePlan};
pub use tarsy_core::StageResult;

#[cfg(test)]
mod tests;
