//! ReAct (`react`): tools are described in the prompt, the model writes
//! Thought / Action / Action Input or Final Answer, the parser decides the
//! next step, observations go back as user messages.

use async_trait::async_trait;
use serde_json::{Value, json};
use tarsy_core::{
    ConversationMessage, ExecutionStatus, LlmInteractionType, RecordError, TimelineEventType,
    ToolCall, ToolResult,
};

use super::forced_conclusion::{Limit, forced_conclusion};
use super::{Strategy, run_with};
use crate::execution::{ExecutionContext, ExecutionResult};
use crate::react_parser::{self, ReactStep};
use crate::run::{CallError, LlmResponse, Run, Stop, merged};
use tokio::time::Instant;

/// The ReAct strategy.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct React;

fn classify(r: &LlmResponse) -> LlmInteractionType {
    if react_parser::parse(&r.text).is_final_answer() {
        LlmInteractionType::FinalAnalysis
    } else {
        LlmInteractionType::Iteration
    }
}

#[async_trait]
impl Strategy for React {
    async fn run(
        &self,
        ctx: &ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> ExecutionResult {
        run_with(ctx, prev_stage_context, drive).await
    }
}

/// The thought the parser extracted from a ReAct answer, as an
/// `llm_thinking` event (source `react`) recorded whole after the raw
/// answer; `extra` is merged into its metadata.
pub(crate) async fn thought_event(
    run: &mut Run<'_>,
    thought: Option<&str>,
    extra: &Value,
) -> Result<(), RecordError> {
    let Some(thought) = thought.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(());
    };
    run.rec
        .create_completed(
            TimelineEventType::LlmThinking,
            thought,
            merged(json!({"source": "react"}), extra),
        )
        .await
        .map(|_| ())
}

fn first_line(s: &str) -> &str {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

async fn drive(run: &mut Run<'_>) -> Result<ExecutionResult, Stop> {
    // An interrupted execution first acts on the answer it was acting on.
    if let Some(turn) = run.take_pending_turn() {
        let iteration = run.state.current_iteration;
        let deadline = run.iteration_deadline();
        let step = react_parser::parse(&turn.text).step(&run.tools);
        if let Some(done) = act(run, step, iteration, deadline, true).await? {
            return Ok(done);
        }
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
            return forced_conclusion(run, true, Limit::Budget(why)).await;
        }
        run.state.current_iteration = iteration;
        let deadline = run.iteration_deadline();
        let resp = match run
            .call_conversation(run.turn(classify, &[], deadline))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                let msg = run.llm_failure(e).await?;
                run.push_message(
                    ConversationMessage::user(react_parser::format_error_observation(&msg)),
                    false,
                )
                .await?;
                continue;
            }
        };
        run.state.record_success();
        if !resp.text.trim().is_empty() {
            // The malformed response stays in the conversation, so the
            // feedback that follows refers to something the model can see.
            run.push_message(
                ConversationMessage::assistant(resp.text.clone(), Vec::new()),
                false,
            )
            .await?;
        }
        let parsed = react_parser::parse(&resp.text);
        thought_event(run, parsed.thought.as_deref(), &json!({})).await?;
        let step = parsed.step(&run.tools);
        if let Some(done) = act(run, step, iteration, deadline, false).await? {
            return Ok(done);
        }
    }
    forced_conclusion(run, true, Limit::Iterations).await
}

/// Does what a parsed answer says: concludes (the result), or calls a tool
/// or gives feedback and lets the loop go on (`None`); `reissue` for a tool
/// call an interruption cut off.
async fn act(
    run: &mut Run<'_>,
    step: ReactStep,
    iteration: u32,
    deadline: Instant,
    reissue: bool,
) -> Result<Option<ExecutionResult>, Stop> {
    match step {
        ReactStep::FinalAnswer(answer) => {
            run.conclude(&answer, json!({})).await?;
            return Ok(Some(ExecutionResult::completed(
                answer, run.usage, iteration,
            )));
        }
        ReactStep::CallTool { name, input } => {
            let call = ToolCall {
                id: format!("react-{iteration}"),
                name,
                arguments: input,
            };
            let outcome = if reissue {
                run.reissue_tool(call, deadline).await
            } else {
                run.execute_tool(call, deadline).await
            };
            let observation = match outcome {
                Ok(out) if out.failed => react_parser::format_tool_error_observation(&out.content),
                Ok(out) => react_parser::format_observation(&ToolResult {
                    call_id: format!("react-{iteration}"),
                    name: out.name,
                    content: out.content,
                    is_error: out.is_error,
                    recovered: None,
                }),
                Err(CallError::Stop(s)) => return Err(s),
                Err(e) => {
                    let msg = run.llm_failure(e).await?;
                    react_parser::format_tool_error_observation(&msg)
                }
            };
            run.push_message(ConversationMessage::user(observation), true)
                .await?;
        }
        ReactStep::UnknownTool {
            requested,
            observation,
        } => {
            run.error_event(
                &format!("The model asked for an unknown tool: {requested}"),
                json!({"kind": "unknown_tool", "tool": requested}),
            )
            .await?;
            run.push_message(ConversationMessage::user(observation), false)
                .await?;
        }
        ReactStep::FormatError { feedback } => {
            run.error_event(
                &format!("Malformed ReAct response: {}", first_line(&feedback)),
                json!({"kind": "format_error"}),
            )
            .await?;
            run.push_message(ConversationMessage::user(feedback), false)
                .await?;
        }
    }
    Ok(None)
}
