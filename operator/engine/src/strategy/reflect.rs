//! A reflector's run (a memory execution): one tool-less turn over a
//! scored investigation. The answer (the memory actions) is the
//! execution's conclusion, which `tarsy_memory::reflect::parse_reflection`
//! reads back. A reflector resumed after an interruption keeps an answer
//! it has.

use async_trait::async_trait;
use serde_json::json;
use tarsy_core::{ExecutionStatus, LlmInteractionType};

use super::judge::answers;
use super::{Strategy, run_with};
use crate::execution::{ExecutionContext, ExecutionResult};
use crate::run::{Run, Stop};

/// The reflector's run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Reflect;

#[async_trait]
impl Strategy for Reflect {
    async fn run(
        &self,
        ctx: &ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> ExecutionResult {
        run_with(ctx, prev_stage_context, drive).await
    }
}

async fn drive(run: &mut Run<'_>) -> Result<ExecutionResult, Stop> {
    let _ = run.take_pending_turn();
    let answer = match answers(run).into_iter().next() {
        Some(a) => a,
        None => {
            run.state.current_iteration = 1;
            match run
                .tool_less_answer(|_| LlmInteractionType::Reflection)
                .await?
            {
                Ok(a) => a,
                Err(why) => {
                    return Ok(ExecutionResult::ended(
                        ExecutionStatus::Failed,
                        format!("the reflector gave no answer: {why}"),
                        run.usage,
                        1,
                    ));
                }
            }
        }
    };
    let answer = answer.trim().to_string();
    run.conclude(&answer, json!({})).await?;
    Ok(ExecutionResult::completed(answer, run.usage, 1))
}
