//! A judge's run (a scoring execution): two tool-less turns over the
//! finished investigation. The first answer is the assessment (dimensions,
//! verdict, failure tags, score), the second the report on the tools; the
//! execution's conclusion is both, in that order, which
//! `tarsy_scoring::parse_assessment` and `parse_tool_report` read back.
//!
//! A judge resumed after an interruption goes on from its stored
//! conversation: an answer it has is not asked for again. A tool report
//! that cannot be had (the model fails or answers nothing) does not cost
//! the assessment: the run concludes with the assessment alone and an
//! `error` event says why.

use async_trait::async_trait;
use serde_json::json;
use tarsy_core::{ConversationMessage, ExecutionStatus, LlmInteractionType, MessageRole};

use super::{Strategy, run_with};
use crate::execution::{ExecutionContext, ExecutionResult};
use crate::run::{Run, Stop};

/// The judge's run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Judge;

#[async_trait]
impl Strategy for Judge {
    async fn run(
        &self,
        ctx: &ExecutionContext,
        prev_stage_context: Option<&str>,
    ) -> ExecutionResult {
        run_with(ctx, prev_stage_context, drive).await
    }
}

/// The answers the conversation holds already (a resumed judge).
pub(super) fn answers(run: &Run<'_>) -> Vec<String> {
    run.conv
        .messages()
        .iter()
        .filter(|m| m.role == MessageRole::Assistant)
        .map(|m| m.content.clone())
        .collect()
}

/// One tool-less turn of the judge, recorded as a scoring interaction.
async fn ask(run: &mut Run<'_>, iteration: u32) -> Result<Result<String, String>, Stop> {
    run.state.current_iteration = iteration;
    run.tool_less_answer(|_| LlmInteractionType::Scoring).await
}

async fn drive(run: &mut Run<'_>) -> Result<ExecutionResult, Stop> {
    // The conversation says how far a resumed judge got.
    let _ = run.take_pending_turn();
    let mut have = answers(run).into_iter();
    let assessment = match have.next() {
        Some(a) => a,
        None => match ask(run, 1).await? {
            Ok(a) => a,
            Err(why) => {
                return Ok(ExecutionResult::ended(
                    ExecutionStatus::Failed,
                    format!("the judge gave no assessment: {why}"),
                    run.usage,
                    1,
                ));
            }
        },
    };
    let report = match have.next() {
        Some(r) => Some(r),
        None => {
            let request = tarsy_scoring::TOOL_REPORT_REQUEST;
            let asked = run
                .conv
                .messages()
                .iter()
                .any(|m| m.role == MessageRole::User && m.content == request);
            if !asked {
                run.push_message(ConversationMessage::user(request), false)
                    .await?;
            }
            match ask(run, 2).await? {
                Ok(r) => Some(r),
                Err(why) => {
                    run.error_event(
                        &format!(
                            "The judge's report on the tools could not be had ({why}); the \
                             assessment stands alone"
                        ),
                        json!({"kind": tarsy_core::error_kind::TOOL_REPORT_UNAVAILABLE}),
                    )
                    .await?;
                    None
                }
            }
        }
    };
    let conclusion = match &report {
        Some(r) => format!("{}\n\n{}", assessment.trim(), r.trim()),
        None => assessment.trim().to_string(),
    };
    run.conclude(&conclusion, json!({})).await?;
    Ok(ExecutionResult::completed(conclusion, run.usage, 2))
}
