//! Function calling (`native-thinking`, `langchain`): tools are bound to the
//! request, the model answers with structured tool calls, results go back as
//! tool-role messages; a turn without tool calls is the final answer.

use async_trait::async_trait;
use serde_json::json;
use tarsy_core::{ConversationMessage, ExecutionStatus, LlmInteractionType, ToolCall};
use tokio::time::Instant;

use super::forced_conclusion::{Limit, forced_conclusion};
use super::{Strategy, run_with};
use crate::execution::{ExecutionContext, ExecutionResult};
use crate::run::{CallError, LlmResponse, Run, Stop};

/// The function-calling strategy.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FunctionCalling;

fn classify(r: &LlmResponse) -> LlmInteractionType {
    if r.tool_calls.is_empty() && !r.text.trim().is_empty() {
        LlmInteractionType::FinalAnalysis
    } else {
        LlmInteractionType::Iteration
    }
}

#[async_trait]
impl Strategy for FunctionCalling {
    async fn run(
        &self,
        ctx: &ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> ExecutionResult {
        run_with(ctx, prev_stage_context, drive).await
    }
}

async fn drive(run: &mut Run<'_>) -> Result<ExecutionResult, Stop> {
    let tools = run.tools.clone();
    // An interrupted execution first finishes the turn it was in.
    if let Some(turn) = run.take_pending_turn() {
        if turn.tool_calls.is_empty() {
            run.conclude(&turn.text, json!({})).await?;
            let iteration = run.state.current_iteration;
            return Ok(ExecutionResult::completed(turn.text, run.usage, iteration));
        }
        let deadline = run.iteration_deadline();
        answer_tool_calls(run, turn.tool_calls, deadline, true).await?;
    }
    for iteration in run.state.current_iteration + 1..=run.state.max_iterations {
        if run.state.should_abort_on_timeouts() {
            return Ok(ExecutionResult::ended(
                ExecutionStatus::Failed,
                run.timeout_abort_message(),
                run.usage,
                run.state.current_iteration,
            ));
        }
        if let Some(why) = run.budget_exhausted().await {
            return forced_conclusion(run, false, Limit::Budget(why)).await;
        }
        run.state.current_iteration = iteration;
        let deadline = run.iteration_deadline();
        let resp = match run
            .call_conversation(run.turn(classify, &tools, deadline))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                let msg = run.llm_failure(e).await?;
                let feedback = run.llm_error_feedback(&msg);
                run.push_message(ConversationMessage::user(feedback), false)
                    .await?;
                continue;
            }
        };
        run.state.record_success();
        if resp.tool_calls.is_empty() {
            if resp.text.trim().is_empty() {
                run.error_event(
                    "The model returned an empty response",
                    json!({"kind": "empty_response"}),
                )
                .await?;
                run.state
                    .record_failure("the model returned an empty response", false);
                let feedback = run.empty_response_feedback();
                run.push_message(ConversationMessage::user(feedback), false)
                    .await?;
                continue;
            }
            run.push_message(
                ConversationMessage::assistant(resp.text.clone(), Vec::new()),
                false,
            )
            .await?;
            run.final_event(&resp.text, json!({})).await?;
            return Ok(ExecutionResult::completed(resp.text, run.usage, iteration));
        }
        run.push_message(
            ConversationMessage::assistant(resp.text.clone(), resp.tool_calls.clone()),
            false,
        )
        .await?;
        answer_tool_calls(run, resp.tool_calls, deadline, false).await?;
    }
    forced_conclusion(run, false, Limit::Iterations).await
}

/// Runs a turn's tool calls and answers each in the conversation;
/// `reissue` for calls an interruption cut off.
async fn answer_tool_calls(
    run: &mut Run<'_>,
    calls: Vec<ToolCall>,
    deadline: Instant,
    reissue: bool,
) -> Result<(), Stop> {
    let mut pending = calls.into_iter();
    while let Some(call) = pending.next() {
        let (id, name) = (call.id.clone(), call.name.clone());
        let outcome = if reissue {
            run.reissue_tool(call, deadline).await
        } else {
            run.execute_tool(call, deadline).await
        };
        match outcome {
            Ok(out) => {
                let content = if out.failed {
                    executor_failure_text(&out.content)
                } else {
                    out.content
                };
                run.push_message(ConversationMessage::tool(id, out.name, content), true)
                    .await?;
            }
            Err(CallError::Stop(s)) => return Err(s),
            Err(e) => {
                // Every tool call needs an answer, or providers reject
                // the next request: answer this one and the rest.
                let msg = run.llm_failure(e).await?;
                let note = format!("Error: tool call not completed: {msg}");
                run.push_message(ConversationMessage::tool(id, name, note.clone()), true)
                    .await?;
                for rest in pending.by_ref() {
                    run.push_message(
                        ConversationMessage::tool(rest.id, rest.name, note.clone()),
                        true,
                    )
                    .await?;
                }
            }
        }
    }
    Ok(())
}

/// An executor failure as the function-calling model sees it.
fn executor_failure_text(message: &str) -> String {
    format!("Error: tool execution failed: {message}")
}
