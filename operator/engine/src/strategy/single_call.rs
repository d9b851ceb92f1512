//! One tool-less call whose answer is the final analysis: `synthesis`,
//! `synthesis-native-thinking` (the backend differs, not the logic) and
//! `single-call`.

use async_trait::async_trait;
use serde_json::json;
use tarsy_core::{ConversationMessage, ExecutionStatus, IterationStrategy, LlmInteractionType};

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
    let deadline = run.iteration_deadline();
    let classify = match run.ctx.config.iteration_strategy {
        IterationStrategy::Synthesis | IterationStrategy::SynthesisNativeThinking => {
            |_: &_| LlmInteractionType::Synthesis
        }
        _ => |_: &_| LlmInteractionType::FinalAnalysis,
    };
    let resp = match run
        .call_conversation(run.turn(classify, &[], deadline))
        .await
    {
        Ok(r) => r,
        Err(e) => {
            let msg = run.llm_failure(e).await?;
            return Ok(ExecutionResult::ended(
                ExecutionStatus::Failed,
                msg,
                run.usage,
                1,
            ));
        }
    };
    if resp.text.trim().is_empty() {
        run.error_event(
            "The model returned an empty response",
            json!({"kind": "empty_response"}),
        )
        .await?;
        return Ok(ExecutionResult::ended(
            ExecutionStatus::Failed,
            "the model returned an empty response",
            run.usage,
            1,
        ));
    }
    run.push_message(
        ConversationMessage::assistant(resp.text.clone(), Vec::new()),
        false,
    )
    .await?;
    // Streamed as llm_response; the conclusion is recorded whole, as for a
    // function-calling final answer.
    run.final_event(&resp.text, json!({})).await?;
    Ok(ExecutionResult::completed(resp.text, run.usage, 1))
}
