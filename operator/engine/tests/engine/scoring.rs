//! A judge's run: two tool-less turns, whatever the configured strategy;
//! the conclusion is the assessment then the tool report; a tool report
//! that cannot be had leaves the assessment standing.

use tarsy_core::{
    ExecutionStatus, IterationStrategy, LlmInteractionType, MessageRole, TimelineEventType as T,
};
use tarsy_engine::{ScoringContext, run_agent};
use tarsy_scripted_llm::ScriptedResponse;

use crate::common::{Harness, config};

const ASSESSMENT: &str = "## Outcome\nRight: OOMKilled per pods_get.\n\nVERDICT: correct\n\
                          FAILURE TAGS: none\nSCORE: 81";
const REPORT: &str =
    "MISSING TOOLS:\n- none\n\nHARD TO USE:\n- kubernetes.pods_log: no previous flag";

fn judge_ctx(h: &Harness, strategy: IterationStrategy) -> tarsy_engine::ExecutionContext {
    let mut cfg = config(strategy, 3);
    cfg.display_name = "ScoringAgent".into();
    let mut ctx = h.ctx(cfg);
    ctx.scoring = Some(ScoringContext {
        investigation: "Stage 1 (KubernetesAgent): pods_get → OOMKilled".into(),
    });
    ctx
}

#[tokio::test]
async fn a_judge_assesses_then_reports_on_the_tools_without_calling_any() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text(ASSESSMENT));
    h.script.push(ScriptedResponse::text(REPORT));
    // A tool strategy configured for the judge changes nothing: it calls no tools.
    let result = run_agent(judge_ctx(&h, IterationStrategy::NativeThinking), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    let conclusion = result.final_analysis.unwrap();
    assert_eq!(conclusion, format!("{ASSESSMENT}\n\n{REPORT}"));
    let assessment = tarsy_scoring::parse_assessment(&conclusion).unwrap();
    assert_eq!(assessment.score, 81);
    let report = tarsy_scoring::parse_tool_report(&conclusion);
    assert_eq!(
        report.hard_to_use,
        ["kubernetes.pods_log: no previous flag"]
    );

    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r.request.tools.is_empty()));
    assert!(h.tools.calls().is_empty());
    let system = reqs[0].system_prompt();
    assert!(
        system.starts_with("You are ScoringAgent, the reviewer"),
        "{system}"
    );
    assert!(system.contains("- missed-available-tool: "), "{system}");
    assert!(reqs[0].last_message().contains("pods_get → OOMKilled"));
    assert!(reqs[0].last_message().contains("SCORE: <a whole number"));
    assert!(
        reqs[1]
            .last_message()
            .starts_with("Now report on the tools.")
    );
    let types: Vec<_> = h
        .recorder
        .llm_interactions()
        .iter()
        .map(|i| i.interaction_type)
        .collect();
    assert_eq!(
        types,
        [LlmInteractionType::Scoring, LlmInteractionType::Scoring]
    );
    assert_eq!(h.event_types().last(), Some(&T::FinalAnalysis));
    let roles: Vec<_> = h.recorder.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            MessageRole::System,
            MessageRole::User,
            MessageRole::Assistant,
            MessageRole::User,
            MessageRole::Assistant
        ]
    );
}

#[tokio::test]
async fn a_lost_tool_report_leaves_the_assessment_standing() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text(ASSESSMENT));
    h.script.push(ScriptedResponse::text("   "));
    let result = run_agent(judge_ctx(&h, IterationStrategy::SingleCall), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.final_analysis.as_deref(), Some(ASSESSMENT));
    let errors = h.events_of(T::Error);
    assert!(
        errors
            .iter()
            .any(|e| e.metadata["kind"] == "tool_report_unavailable"),
        "{errors:?}"
    );
}

#[tokio::test]
async fn a_judge_without_an_assessment_fails() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text(""));
    let result = run_agent(judge_ctx(&h, IterationStrategy::SingleCall), None).await;
    assert_eq!(result.status, ExecutionStatus::Failed, "{result:?}");
    assert_eq!(
        h.script.requests().len(),
        1,
        "no tool report without an assessment"
    );
}

#[tokio::test]
async fn a_judge_killed_between_its_turns_is_not_asked_for_its_assessment_again() {
    let h = Harness::new().await;
    h.script.push(ScriptedResponse::text(ASSESSMENT));
    h.script.push(ScriptedResponse::hang());
    let task = tokio::spawn(run_agent(
        judge_ctx(&h, IterationStrategy::SingleCall),
        None,
    ));
    crate::common::eventually(|| h.script.requests().len() == 2).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());

    h.script.push(ScriptedResponse::text(REPORT));
    let result = run_agent(judge_ctx(&h, IterationStrategy::SingleCall), None).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(
        result.final_analysis.as_deref(),
        Some(format!("{ASSESSMENT}\n\n{REPORT}").as_str())
    );
    let reqs = h.script.requests();
    assert_eq!(reqs.len(), 3, "the assessment is not asked for again");
    assert!(
        reqs[2]
            .last_message()
            .starts_with("Now report on the tools.")
    );
    let asked_twice = h
        .recorder
        .messages()
        .iter()
        .filter(|m| m.content == tarsy_scoring::TOOL_REPORT_REQUEST)
        .count();
    assert_eq!(asked_twice, 1, "the tool report request is stored once");
}
