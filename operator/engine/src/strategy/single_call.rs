//! One tool-less call whose answer is the final analysis: `synthesis`,
//! `synthesis-native-thinking` (the backend differs, not the logic) and
//! `single-call`.

use async_trait::async_trait;
use serde_json::json;
use tarsy_core::{ExecutionStatus, IterationStrategy, LlmInteractionType};

use super::{Strategy, run_with};
use crate::execution::{ExecutionContext, ExecutionResult};
use crate::run::{Run, Stop};

/// The single-call strategy.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SingleCall;

#[async_trait]
impl Strategy for SingleCall {
    async fn run(
        &self,
        ctx: &ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> ExecutionResult {
        run_with(ctx, prev_stage_context, drive).await
    }
}

async fn drive(run: &mut Run<'_>) -> Result<ExecutionResult, Stop> {
    // Interrupted after the answer was stored: it is the conclusion.
    if let Some(turn) = run.take_pending_turn() {
        run.conclude(&turn.text, json!({})).await?;
        return Ok(ExecutionResult::completed(turn.text, run.usage, 1));
    }
    run.state.current_iteration = 1;
    let classify = match run.ctx.config.iteration_strategy {
        IterationStrategy::Synthesis | IterationStrategy::SynthesisNativeThinking => {
            |_: &_| LlmInteractionType::Synthesis
        }
        _ => |_: &_| LlmInteractionType::FinalAnalysis,
    };
    let text = match run.tool_less_answer(classify).await? {
        Ok(text) => text,
        Err(why) => {
            return Ok(ExecutionResult::ended(
                ExecutionStatus::Failed,
                why,
                run.usage,
                1,
            ));
        }
    };
    // Streamed as llm_response; the conclusion is recorded whole, as for a
    // function-calling final answer.
    run.final_event(&text, json!({})).await?;
    Ok(ExecutionResult::completed(text, run.usage, 1))
}
