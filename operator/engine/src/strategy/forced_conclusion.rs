//! The forced conclusion at a limit — the iteration limit, or the session's
//! budget spent: one more call without tools asking the model to conclude
//! with what it has.

use serde_json::json;
use tarsy_core::{ConversationMessage, ExecutionStatus, LlmInteractionType};

use crate::execution::ExecutionResult;
use crate::react_parser;
use crate::run::{Run, Stop};

/// Why an execution must conclude now.
pub(crate) enum Limit {
    /// Its iterations are used up.
    Iterations,
    /// The session's budget is spent (said how).
    Budget(String),
}

/// At a limit: at max iterations, fail if the last interaction failed;
/// otherwise one more call without tools asking for the conclusion.
pub(crate) async fn forced_conclusion(
    run: &mut Run<'_>,
    react: bool,
    limit: Limit,
) -> Result<ExecutionResult, Stop> {
    let max = run.state.max_iterations;
    if matches!(limit, Limit::Iterations) && run.state.last_interaction_failed {
        return Ok(ExecutionResult::ended(
            ExecutionStatus::Failed,
            format!(
                "max iterations ({max}) reached with last interaction failed: {}",
                run.state.last_error_message
            ),
            run.usage,
            run.state.current_iteration,
        ));
    }
    let strategy = run.ctx.config.iteration_strategy;
    let prompt = match &limit {
        Limit::Iterations => run.prompts.forced_conclusion_prompt(max, strategy),
        Limit::Budget(why) => run.prompts.budget_conclusion_prompt(why, strategy),
    };
    run.push_message(ConversationMessage::user(prompt), false)
        .await?;
    // Every event of the conclusion says it was forced, after how many
    // iterations and why, so a reader can tell it from a conclusion the
    // model chose.
    let mut forced = json!({
        "forced_conclusion": true,
        "iterations_used": run.state.current_iteration,
        "max_iterations": max,
    });
    if let Limit::Budget(why) = &limit {
        forced["budget_exhausted"] = json!(true);
        forced["reason"] = json!(why);
    }
    let deadline = run.iteration_deadline();
    let mut req = run.turn(|_| LlmInteractionType::ForcedConclusion, &[], deadline);
    // The call after the last iteration.
    req.iteration = run.state.current_iteration + 1;
    req.event_metadata = forced.clone();
    let resp = match run.call_conversation(req).await {
        Ok(r) => r,
        Err(e) => {
            let msg = run.llm_failure(e).await?;
            return Ok(ExecutionResult::ended(
                ExecutionStatus::Failed,
                format!("forced conclusion failed: {msg}"),
                run.usage,
                run.state.current_iteration,
            ));
        }
    };
    if !resp.text.trim().is_empty() {
        run.push_message(
            ConversationMessage::assistant(resp.text.clone(), Vec::new()),
            false,
        )
        .await?;
    }
    let answer = if react {
        let parsed = react_parser::parse(&resp.text);
        super::react::thought_event(run, parsed.thought.as_deref(), &forced).await?;
        react_parser::forced_conclusion_answer(&parsed, &resp.text)
    } else {
        resp.text
    };
    if !answer.trim().is_empty() {
        run.final_event(&answer, forced).await?;
    } else {
        run.error_event(
            "The forced conclusion returned an empty response",
            json!({"kind": "empty_response"}),
        )
        .await?;
        let why = match &limit {
            Limit::Iterations => format!("max iterations ({max}) reached"),
            Limit::Budget(why) => why.clone(),
        };
        return Ok(ExecutionResult::ended(
            ExecutionStatus::Failed,
            format!("{why} and the forced conclusion was empty"),
            run.usage,
            run.state.current_iteration,
        ));
    }
    Ok(ExecutionResult::completed(
        answer,
        run.usage,
        run.state.current_iteration,
    ))
}
