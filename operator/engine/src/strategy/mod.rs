//! Iteration strategies: how an execution turns model answers into tool
//! calls and a conclusion. One implementation per strategy family, behind
//! [`Strategy`], chosen from the configured `IterationStrategy`:
//!
//! * [`FunctionCalling`] (`native-thinking`, `langchain`): tools bound to the
//!   request, structured tool calls, tool-role results.
//! * [`React`] (`react`): tools described in the prompt, the response parsed
//!   by [`crate::react_parser`], observations as user messages.
//! * [`SingleCall`] (`synthesis`, `synthesis-native-thinking`,
//!   `single-call`): one tool-less call whose text is the final analysis.
//! * [`Judge`] (any scoring execution, whatever its strategy): two
//!   tool-less turns over a finished investigation, assessment then tool
//!   report.
//! * [`Reflect`] (any memory execution): one tool-less turn over a scored
//!   investigation, the memory actions.
//!
//! What they share (streaming, LLM interaction records, provider fallback,
//! context management, tool execution) lives in [`crate::run`]; the forced
//! conclusion at the iteration limit in [`forced_conclusion`].
//!
//! # Timeline of a turn
//!
//! Every model answer streams the same way: `llm_thinking` (source
//! `native`) for the model's own reasoning, then `llm_response` for its
//! text, then native tool results (`code_execution`, `google_search_result`,
//! `url_context_result`). What follows depends on the strategy:
//!
//! * function calling: an `llm_tool_call` per tool call (with an
//!   `mcp_tool_summary` when the result was summarized), or, for an answer
//!   without tool calls, `final_analysis`;
//! * ReAct: the thought the parser extracted as `llm_thinking` (source
//!   `react`), then the tool call or `final_analysis`;
//! * single call and synthesis: `final_analysis`.
//!
//! At the iteration limit the forced conclusion records the same events;
//! all of them carry `forced_conclusion: true`, `iterations_used` and
//! `max_iterations` in their metadata.

mod forced_conclusion;
mod function_calling;
mod judge;
mod react;
mod reflect;
mod single_call;

use async_trait::async_trait;
use tarsy_core::{ExecutionStatus, IterationStrategy, RecordError};

pub(crate) use function_calling::FunctionCalling;
pub(crate) use judge::Judge;
pub(crate) use react::React;
pub(crate) use reflect::Reflect;
pub(crate) use single_call::SingleCall;

use crate::execution::{ExecutionContext, ExecutionResult};
use crate::run::{Run, Stop};

/// An iteration strategy: runs one execution to a terminal result.
#[async_trait]
pub(crate) trait Strategy: Send + Sync {
    /// Runs the execution to a terminal result.
    async fn run(
        &self,
        ctx: &ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> ExecutionResult;
}

/// The strategy implementation for a configured iteration strategy.
pub(crate) fn strategy_for(strategy: IterationStrategy) -> Box<dyn Strategy> {
    match strategy {
        IterationStrategy::NativeThinking | IterationStrategy::Langchain => {
            Box::new(FunctionCalling)
        }
        IterationStrategy::React => Box::new(React),
        IterationStrategy::Synthesis
        | IterationStrategy::SynthesisNativeThinking
        | IterationStrategy::SingleCall => Box::new(SingleCall),
    }
}

/// Maps how a run stopped to its result.
fn finish(run: &Run<'_>, outcome: Result<ExecutionResult, Stop>) -> ExecutionResult {
    match outcome {
        Ok(r) => r,
        Err(Stop::Record(RecordError::Unavailable(e))) => ExecutionResult::interrupted(
            format!("interrupted: the store could not record the execution: {e}"),
            run.usage,
            run.state.current_iteration,
        ),
        Err(stop) => {
            let (status, msg) = match stop {
                Stop::Cancelled => (
                    ExecutionStatus::Cancelled,
                    "execution cancelled".to_string(),
                ),
                // As the session's own stop at its deadline says it, so
                // that the record reads the same whichever came first.
                Stop::SessionTimeout => {
                    (ExecutionStatus::TimedOut, "session timed out".to_string())
                }
                Stop::Record(e) => (
                    ExecutionStatus::Failed,
                    format!("recording the execution failed: {e}"),
                ),
                Stop::Fatal(message) => (ExecutionStatus::Failed, message),
            };
            ExecutionResult::ended(status, msg, run.usage, run.state.current_iteration)
        }
    }
}

/// Prepares a run and drives it with `drive`: the part every strategy
/// shares around its own loop.
async fn run_with<F>(
    ctx: &ExecutionContext,
    prev_stage_context: Option<&str>,
    drive: F,
) -> ExecutionResult
where
    F: for<'r, 'a> AsyncFnOnce(&'r mut Run<'a>) -> Result<ExecutionResult, Stop>,
{
    let mut run = match Run::start(ctx, prev_stage_context).await {
        Ok(r) => r,
        Err((mut r, stop)) => {
            if let Err(e) = r.rec.flush().await {
                tracing::warn!(error = %e, "writing an execution's last records failed");
            }
            return finish(&r, Err(stop));
        }
    };
    let mut outcome = drive(&mut run).await;
    // Every record and event of the execution is out before its end is
    // reported; records that could not be written fail it as they would
    // have when written one by one.
    if let Err(e) = run.rec.flush().await {
        tracing::warn!(error = %e, "writing an execution's last records failed");
        if outcome.is_ok() {
            outcome = Err(Stop::Record(e));
        }
    }
    finish(&run, outcome)
}
