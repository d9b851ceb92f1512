//! The store suite: every test in `on_both_backends!` runs against SQLite and
//! against a real Postgres server (see `common`).

mod common;

use std::collections::HashSet;
use std::time::Duration;

use chrono::Utc;
use serde_json::json;
use tarsy_core::{
    ExecutionKind, ExecutionRecorder, ExecutionStatus, IterationStrategy, LlmInteractionType,
    McpInteractionType, MessageRole, NewLlmInteraction, NewMcpInteraction, NewMessage,
    NewTimelineEvent, ParallelType, RecordError, RecordScope, RecordWrite, SessionStatus,
    SuccessPolicy, TimelineEventStatus, TimelineEventType, TokenUsage, ToolCall,
};
use tarsy_store::{NewStage, SessionFilter, SessionOutcome, Store, StoreError, StoredEvent};

use common::{execution, scope, seeded, session, stage, streaming_event};

on_both_backends!(
    session_lifecycle,
    stream_append_ordering,
    metadata_merge_on_completion,
    events_catch_up_since_id,
    event_transactions_commit_or_vanish,
    claim_in_creation_order,
    concurrent_claimers_never_share,
    list_filter_and_paging,
    soft_delete_hides_from_list,
    retention_purge,
    chat_uniqueness_and_messages,
    unknown_ids_are_not_found,
    uniqueness_conflicts_and_idempotent_creates,
    orphans_and_counts,
    messages_up_to_a_message,
    any_text_is_stored_the_same_on_both_backends,
    batches_write_a_step_at_once,
    open_records_of_ended_sessions,
);

on_postgres!(
    notify_is_delivered_only_after_commit,
    claim_skips_locked_rows
);

fn llm(
    scope: RecordScope,
    kind: LlmInteractionType,
    last_message_id: Option<String>,
) -> NewLlmInteraction {
    NewLlmInteraction {
        scope,
        interaction_type: kind,
        provider: "gemini".into(),
        model: "gemini-2.5-pro".into(),
        last_message_id,
        llm_request: json!({"messages": 3}),
        llm_response: json!({"text": "ok"}),
        thinking_content: Some("thinking".into()),
        response_text: "ok".into(),
        usage: Some(TokenUsage {
            input_tokens: 100,
            output_tokens: 20,
            total_tokens: 120,
            thinking_tokens: 5,
            cached_input_tokens: 40,
        }),
        cost_usd: Some(0.000_325),
        duration_ms: 1500,
        error_message: None,
    }
}

fn message(scope: RecordScope, seq: i64, role: MessageRole, content: &str) -> NewMessage {
    NewMessage {
        scope,
        sequence_number: seq,
        role,
        content: content.into(),
        tool_calls: vec![],
        tool_call_id: None,
        tool_name: None,
    }
}

/// A whole investigation: session, claim, two replica executions, timeline
/// with streaming, messages with tool calls, interactions, trace, executive
/// summary, outcome.
async fn session_lifecycle(store: Store) {
    let created = store.create_session(session("alert-1")).await.unwrap();
    assert!(created.created);
    assert_eq!(created.record.status, SessionStatus::Pending);
    assert_eq!(created.record.author.as_deref(), Some("alice"));

    let claimed = store
        .claim_next_pending_session("pod-a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, "alert-1");
    assert_eq!(claimed.status, SessionStatus::InProgress);
    assert_eq!(claimed.pod_id.as_deref(), Some("pod-a"));
    assert!(claimed.started_at.is_some());

    let st = store
        .create_stage(NewStage {
            stage_name: "investigate".into(),
            kind: tarsy_core::StageKind::Investigation,
            expected_agent_count: 2,
            parallel_type: Some(ParallelType::Replica),
            success_policy: Some(SuccessPolicy::Any),
            ..stage("alert-1", 0)
        })
        .await
        .unwrap();
    assert_eq!(st.status, ExecutionStatus::Pending);
    store
        .update_session_progress("alert-1", 0, &st.id)
        .await
        .unwrap();
    let s = store.get_session("alert-1").await.unwrap();
    assert_eq!(
        (s.current_stage_index, s.current_stage_id.as_deref()),
        (Some(0), Some(st.id.as_str()))
    );

    let e1 = store
        .create_agent_execution(execution("alert-1", &st.id, "KubernetesAgent-1", 1))
        .await
        .unwrap();
    let e2 = store
        .create_agent_execution(execution("alert-1", &st.id, "KubernetesAgent-2", 2))
        .await
        .unwrap();
    let e1 = store
        .update_agent_execution_status(&e1.id, ExecutionStatus::Active, None)
        .await
        .unwrap();
    assert!(e1.started_at.is_some() && e1.completed_at.is_none());

    // The engine writes through the recorder trait.
    let recorder: &dyn ExecutionRecorder = &store;
    let sc = scope("alert-1", &st.id, &e1.id);
    let thinking = recorder
        .create_timeline_event(NewTimelineEvent {
            event_type: TimelineEventType::LlmThinking,
            metadata: json!({"source": "native"}),
            ..streaming_event(sc.clone(), 1)
        })
        .await
        .unwrap();
    for chunk in ["Checking ", "the ", "pods."] {
        recorder
            .append_timeline_content(&thinking, chunk)
            .await
            .unwrap();
    }
    recorder
        .complete_timeline_event(
            &thinking,
            "Checking the pods.",
            TimelineEventStatus::Completed,
            None,
        )
        .await
        .unwrap();
    let tool = recorder
        .create_timeline_event(NewTimelineEvent {
            event_type: TimelineEventType::LlmToolCall,
            metadata: json!({"tool_name": "kubernetes.pods_list", "arguments": "{}"}),
            ..streaming_event(sc.clone(), 2)
        })
        .await
        .unwrap();
    recorder
        .complete_timeline_event(
            &tool,
            "pod api-7 CrashLoopBackOff",
            TimelineEventStatus::Completed,
            Some(json!({"is_error": false})),
        )
        .await
        .unwrap();
    recorder
        .create_timeline_event(NewTimelineEvent {
            event_type: TimelineEventType::FinalAnalysis,
            status: TimelineEventStatus::Completed,
            content: "OOM kill".into(),
            ..streaming_event(sc.clone(), 3)
        })
        .await
        .unwrap();

    let m1 = recorder
        .create_message(message(
            sc.clone(),
            1,
            MessageRole::System,
            "You are an SRE.",
        ))
        .await
        .unwrap();
    recorder
        .create_message(message(sc.clone(), 2, MessageRole::User, "Investigate."))
        .await
        .unwrap();
    let m3 = recorder
        .create_message(NewMessage {
            tool_calls: vec![ToolCall {
                id: "call-1".into(),
                name: "kubernetes.pods_list".into(),
                arguments: "{\"namespace\":\"prod\"}".into(),
            }],
            ..message(sc.clone(), 3, MessageRole::Assistant, "")
        })
        .await
        .unwrap();
    recorder
        .create_message(NewMessage {
            tool_call_id: Some("call-1".into()),
            tool_name: Some("kubernetes.pods_list".into()),
            ..message(sc.clone(), 4, MessageRole::Tool, "api-7 CrashLoopBackOff")
        })
        .await
        .unwrap();
    let msgs = store.list_messages(&e1.id).await.unwrap();
    assert_eq!(
        msgs.iter().map(|m| m.sequence_number).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(msgs[0].id, m1);
    assert_eq!(msgs[2].tool_calls[0].name, "kubernetes.pods_list");
    assert_eq!(msgs[3].tool_call_id.as_deref(), Some("call-1"));
    assert_eq!(msgs[3].role, MessageRole::Tool);

    let llm_id = recorder
        .create_llm_interaction(llm(
            sc.clone(),
            LlmInteractionType::Iteration,
            Some(m3.clone()),
        ))
        .await
        .unwrap();
    let mcp_id = recorder
        .create_mcp_interaction(NewMcpInteraction {
            scope: sc.clone(),
            interaction_type: McpInteractionType::ToolCall,
            server_name: "kubernetes".into(),
            tool_name: "pods_list".into(),
            tool_arguments: json!({"namespace": "prod"}),
            tool_result: json!({"content": "api-7"}),
            available_tools: json!([]),
            duration_ms: 40,
            error_message: None,
        })
        .await
        .unwrap();

    // The other replica fails; the stage's outcome is recorded as decided
    // (the chain state machine's rule, tarsy_chain::aggregate_stage).
    store
        .update_agent_execution_status(&e1.id, ExecutionStatus::Completed, None)
        .await
        .unwrap();
    let e2 = store
        .update_agent_execution_status(&e2.id, ExecutionStatus::Failed, Some("LLM unavailable"))
        .await
        .unwrap();
    assert_eq!(e2.error_message.as_deref(), Some("LLM unavailable"));
    assert!(e2.completed_at.is_some());
    let done = store
        .update_stage_status(&st.id, ExecutionStatus::Completed, None)
        .await
        .unwrap();
    assert_eq!(done.status, ExecutionStatus::Completed);
    assert!(done.completed_at.is_some() && done.started_at.is_some());

    // Session-level executive summary: no stage, no execution.
    let summary_scope = RecordScope {
        session_id: "alert-1".into(),
        stage_id: None,
        execution_id: None,
    };
    store
        .create_timeline_event(NewTimelineEvent {
            event_type: TimelineEventType::ExecutiveSummary,
            status: TimelineEventStatus::Completed,
            content: "Pod OOM".into(),
            ..streaming_event(summary_scope.clone(), 4)
        })
        .await
        .unwrap();
    store
        .create_llm_interaction(llm(
            summary_scope,
            LlmInteractionType::ExecutiveSummary,
            None,
        ))
        .await
        .unwrap();

    let timeline = store.session_timeline("alert-1").await.unwrap();
    assert_eq!(
        timeline.iter().map(|e| e.event_type).collect::<Vec<_>>(),
        vec![
            TimelineEventType::LlmThinking,
            TimelineEventType::LlmToolCall,
            TimelineEventType::FinalAnalysis,
            TimelineEventType::ExecutiveSummary
        ]
    );
    assert_eq!(timeline[0].content, "Checking the pods.");
    assert_eq!(
        timeline[1].metadata,
        json!({"tool_name": "kubernetes.pods_list", "arguments": "{}", "is_error": false})
    );
    assert_eq!(timeline[3].scope.stage_id, None);
    assert_eq!(recorder.execution_timeline(&e1.id).await.unwrap().len(), 3);
    assert!(store.execution_timeline(&e2.id).await.unwrap().is_empty());

    let trace = store.session_trace("alert-1").await.unwrap();
    assert_eq!(trace.stages.len(), 1);
    assert_eq!(trace.stages[0].executions.len(), 2);
    let first = &trace.stages[0].executions[0];
    assert_eq!(first.agent_name, "KubernetesAgent-1");
    assert_eq!(first.llm_interactions.len(), 1);
    assert_eq!(first.llm_interactions[0].id, llm_id);
    assert_eq!(
        first.llm_interactions[0].usage.map(|u| u.total_tokens),
        Some(120)
    );
    assert_eq!(first.mcp_interactions[0].id, mcp_id);
    assert!(trace.stages[0].executions[1].llm_interactions.is_empty());
    assert_eq!(trace.session_interactions.len(), 1);
    assert_eq!(
        trace.session_interactions[0].interaction_type,
        LlmInteractionType::ExecutiveSummary
    );
    let detail = store.get_llm_interaction(&llm_id).await.unwrap();
    assert_eq!(detail.llm_request, json!({"messages": 3}));
    assert_eq!(detail.thinking_content.as_deref(), Some("thinking"));
    let conversation = store
        .list_messages_up_to(detail.last_message_id.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(conversation.len(), 3);
    let mcp = store.get_mcp_interaction(&mcp_id).await.unwrap();
    assert_eq!(mcp.tool_arguments, json!({"namespace": "prod"}));
    let all = store.session_mcp_interactions("alert-1").await.unwrap();
    assert_eq!(all, vec![mcp]);

    let finished = store
        .finish_session(
            "alert-1",
            SessionOutcome {
                status: SessionStatus::Completed,
                final_analysis: Some("OOM kill".into()),
                executive_summary: Some("Pod OOM".into()),
                executive_summary_error: None,
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(finished.status, SessionStatus::Completed);
    assert_eq!(finished.final_analysis.as_deref(), Some("OOM kill"));
    assert!(finished.completed_at.is_some());
    assert_eq!(store.get_session("alert-1").await.unwrap(), finished);

    // Creating the session again is a no-op that returns the stored one.
    let again = store.create_session(session("alert-1")).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.record, finished);
}

/// Appends land in order; concurrent streams do not mix; finished events refuse appends.
async fn stream_append_ordering(store: Store) {
    let (st, ex) = seeded(&store, "stream").await;
    let a = store
        .create_timeline_event(streaming_event(scope("stream", &st, &ex), 1))
        .await
        .unwrap();
    let b = store
        .create_timeline_event(streaming_event(scope("stream", &st, &ex), 2))
        .await
        .unwrap();

    let writer = |id: String, tag: &'static str| {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..60 {
                store
                    .append_timeline_content(&id, &format!("{tag}{i},"))
                    .await
                    .unwrap();
            }
        })
    };
    let (ra, rb) = tokio::join!(writer(a.id.clone(), "a"), writer(b.id.clone(), "b"));
    ra.unwrap();
    rb.unwrap();
    let expect = |tag: &str| (0..60).map(|i| format!("{tag}{i},")).collect::<String>();
    assert_eq!(
        store.get_timeline_event(&a.id).await.unwrap().content,
        expect("a")
    );
    assert_eq!(
        store.get_timeline_event(&b.id).await.unwrap().content,
        expect("b")
    );
    let a_event = store.get_timeline_event(&a.id).await.unwrap();
    assert_eq!(a_event.status, TimelineEventStatus::Streaming);
    assert!(a_event.updated_at >= a_event.created_at);

    // Unicode and quotes survive the SQL concatenation untouched.
    let c = store
        .create_timeline_event(streaming_event(scope("stream", &st, &ex), 3))
        .await
        .unwrap();
    for part in ["héllo ", "'wörld' ", "\"∑\" ", "🚀"] {
        store.append_timeline_content(&c.id, part).await.unwrap();
    }
    assert_eq!(
        store.get_timeline_event(&c.id).await.unwrap().content,
        "héllo 'wörld' \"∑\" 🚀"
    );

    store
        .complete_timeline_event(&a.id, "final", TimelineEventStatus::Failed, None)
        .await
        .unwrap();
    let err = store
        .append_timeline_content(&a.id, "late")
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(
        store.get_timeline_event(&a.id).await.unwrap().content,
        "final"
    );
    let err = store
        .append_timeline_content("nope", "x")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotFound {
                kind: "timeline event",
                ..
            }
        ),
        "{err}"
    );
    let err = store
        .complete_timeline_event(&b.id, "x", TimelineEventStatus::Streaming, None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
}

/// Completion merges top-level metadata keys; nested values, booleans and
/// nulls keep their JSON types on both backends.
async fn metadata_merge_on_completion(store: Store) {
    let (st, ex) = seeded(&store, "meta").await;
    let ev = store
        .create_timeline_event(NewTimelineEvent {
            event_type: TimelineEventType::LlmToolCall,
            metadata: json!({
                "tool_name": "kubernetes.pods_log",
                "arguments": {"pod": "api-7", "lines": 100},
                "keep": true,
                "nothing": null,
                "ratio": 0.5,
            }),
            ..streaming_event(scope("meta", &st, &ex), 1)
        })
        .await
        .unwrap();
    let done = store
        .complete_timeline_event(
            &ev.id,
            "log lines",
            TimelineEventStatus::Completed,
            Some(json!({
                "arguments": {"pod": "api-8"},
                "is_error": false,
                "sizes": [1, "two", {"three": 3}],
                "nested": {"x": null, "y": {"z": "deep"}},
                "count": 42,
                "text": "quote \" and 'single'",
            })),
        )
        .await
        .unwrap();
    let want = json!({
        "tool_name": "kubernetes.pods_log",
        "arguments": {"pod": "api-8"},
        "keep": true,
        "nothing": null,
        "ratio": 0.5,
        "is_error": false,
        "sizes": [1, "two", {"three": 3}],
        "nested": {"x": null, "y": {"z": "deep"}},
        "count": 42,
        "text": "quote \" and 'single'",
    });
    assert_eq!(done.metadata, want);
    assert_eq!(done.content, "log lines");
    assert_eq!(done.status, TimelineEventStatus::Completed);
    assert_eq!(
        store.get_timeline_event(&ev.id).await.unwrap().metadata,
        want
    );

    // Without metadata the stored metadata stays; an empty object changes nothing.
    let again = store
        .complete_timeline_event(&ev.id, "log lines 2", TimelineEventStatus::Completed, None)
        .await
        .unwrap();
    assert_eq!(again.metadata, want);
    let same = store
        .complete_timeline_event(
            &ev.id,
            "log lines 2",
            TimelineEventStatus::Completed,
            Some(json!({})),
        )
        .await
        .unwrap();
    assert_eq!(same.metadata, want);

    // Null metadata at creation is an empty object; non-objects are refused.
    let plain = store
        .create_timeline_event(NewTimelineEvent {
            metadata: serde_json::Value::Null,
            ..streaming_event(scope("meta", &st, &ex), 2)
        })
        .await
        .unwrap();
    assert_eq!(plain.metadata, json!({}));
    let merged = store
        .complete_timeline_event(
            &plain.id,
            "x",
            TimelineEventStatus::Completed,
            Some(json!({"a": 1})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata, json!({"a": 1}));
    let err = store
        .complete_timeline_event(
            &plain.id,
            "x",
            TimelineEventStatus::Completed,
            Some(json!([1])),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
}

/// Catch-up: events of one channel after an id, oldest first, limited.
async fn events_catch_up_since_id(store: Store) {
    let mut a_ids = Vec::new();
    for i in 0..6 {
        a_ids.push(
            store
                .insert_event(
                    "s1",
                    "session:s1",
                    json!({"type": "timeline_event.created", "n": i}),
                )
                .await
                .unwrap(),
        );
        store
            .insert_event("s2", "session:s2", json!({"type": "stage.status", "n": i}))
            .await
            .unwrap();
    }
    assert!(a_ids.windows(2).all(|w| w[0] < w[1]));

    let all: Vec<StoredEvent> = store.events_since("session:s1", 0, 100).await.unwrap();
    assert_eq!(all.iter().map(|e| e.id).collect::<Vec<_>>(), a_ids);
    assert_eq!(
        all[2].payload,
        json!({"type": "timeline_event.created", "n": 2})
    );
    assert_eq!(all[0].session_id, "s1");

    let after = store.events_since("session:s1", a_ids[2], 2).await.unwrap();
    assert_eq!(
        after.iter().map(|e| e.id).collect::<Vec<_>>(),
        a_ids[3..5].to_vec()
    );
    assert!(
        store
            .events_since("session:s1", a_ids[5], 10)
            .await
            .unwrap()
            .is_empty()
    );
    // limit+1 reveals overflow.
    assert_eq!(
        store.events_since("session:s1", 0, 4).await.unwrap().len(),
        4
    );
    assert!(matches!(
        store.events_since("session:s1", 0, 0).await.unwrap_err(),
        StoreError::InvalidInput(_)
    ));

    assert_eq!(store.get_event(a_ids[1]).await.unwrap().payload["n"], 1);
    assert_eq!(store.delete_session_events("s1").await.unwrap(), 6);
    assert!(
        store
            .events_since("session:s1", 0, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .events_since("session:s2", 0, 100)
            .await
            .unwrap()
            .len(),
        6
    );
    // Ids are never reused after deletion, so cursors stay valid.
    let next = store
        .insert_event("s1", "session:s1", json!({}))
        .await
        .unwrap();
    assert!(next > *a_ids.last().unwrap());
    assert!(store.get_event(a_ids[1]).await.unwrap_err().is_not_found());

    assert_eq!(
        store
            .delete_events_before(Utc::now() + chrono::Duration::seconds(5))
            .await
            .unwrap(),
        7
    );
}

/// Events written in a store transaction exist only if it commits.
async fn event_transactions_commit_or_vanish(store: Store) {
    let mut tx = store.begin().await.unwrap();
    tx.insert_event("t", "session:t", json!({"n": 1}))
        .await
        .unwrap();
    tx.insert_event("t", "session:t", json!({"n": 2}))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(
        store
            .events_since("session:t", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );

    let mut tx = store.begin().await.unwrap();
    let a = tx
        .insert_event("t", "session:t", json!({"n": 3}))
        .await
        .unwrap();
    let b = tx
        .insert_event("t", "session:t", json!({"n": 4}))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let got = store.events_since("session:t", 0, 10).await.unwrap();
    assert_eq!(got.iter().map(|e| e.id).collect::<Vec<_>>(), vec![a, b]);

    // Dropping without commit rolls back too.
    {
        let mut tx = store.begin().await.unwrap();
        tx.insert_event("t", "session:t", json!({"n": 5}))
            .await
            .unwrap();
    }
    assert_eq!(
        store.events_since("session:t", 0, 10).await.unwrap().len(),
        2
    );
}

/// Postgres: the NOTIFY of an event is heard only once its transaction
/// commits, carries the event id and payload, and never arrives after a rollback.
async fn notify_is_delivered_only_after_commit(store: Store) {
    let pool = store.postgres_pool().unwrap().clone();
    let mut listener = sqlx::postgres::PgListener::connect_with(&pool)
        .await
        .unwrap();
    listener.listen("session:n1").await.unwrap();
    let quiet = Duration::from_millis(400);

    let mut tx = store.begin().await.unwrap();
    let id = tx
        .insert_event(
            "n1",
            "session:n1",
            json!({"type": "session.status", "status": "completed"}),
        )
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(quiet, listener.recv()).await.is_err(),
        "notification heard before commit"
    );
    tx.commit().await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("no notification after commit")
        .unwrap();
    assert_eq!(n.channel(), "session:n1");
    let body = tarsy_store::EventNotification::parse(n.payload()).unwrap();
    assert_eq!(body.event_id, Some(id));
    assert_eq!(
        body.payload,
        Some(json!({"type": "session.status", "status": "completed"}))
    );
    // The event is readable by the time its notification arrives.
    assert_eq!(store.get_event(id).await.unwrap().id, id);

    let mut tx = store.begin().await.unwrap();
    tx.insert_event("n1", "session:n1", json!({"rolled": "back"}))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(
        tokio::time::timeout(quiet, listener.recv()).await.is_err(),
        "notification of a rolled-back event"
    );

    // The one-call form notifies too; oversize payloads notify by id only.
    let big = json!({"content": "x".repeat(20_000)});
    let big_id = store
        .insert_event("n1", "session:n1", big.clone())
        .await
        .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .unwrap()
        .unwrap();
    let body = tarsy_store::EventNotification::parse(n.payload()).unwrap();
    assert_eq!(
        (body.event_id, body.truncated, body.payload),
        (Some(big_id), true, None)
    );
    assert_eq!(store.get_event(big_id).await.unwrap().payload, big);

    // Transient notifications are delivered but not stored.
    assert!(
        store
            .notify(
                "session:n1",
                &json!({"type": "stream.chunk", "delta": "he"})
            )
            .await
            .unwrap()
    );
    let n = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .unwrap()
        .unwrap();
    let body = tarsy_store::EventNotification::parse(n.payload()).unwrap();
    assert_eq!(body.event_id, None);
    assert_eq!(body.payload.unwrap()["delta"], "he");
    assert_eq!(
        store
            .events_since("session:n1", big_id, 10)
            .await
            .unwrap()
            .len(),
        0
    );
}

/// The oldest pending session is claimed first; claimed ones are not claimed again.
async fn claim_in_creation_order(store: Store) {
    for id in ["c-3", "c-1", "c-2"] {
        store.create_session(session(id)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // A soft-deleted pending session is not work.
    store.create_session(session("c-deleted")).await.unwrap();
    store.soft_delete_session("c-deleted").await.unwrap();

    let mut order = Vec::new();
    while let Some(s) = store.claim_next_pending_session("pod-1").await.unwrap() {
        assert_eq!(s.status, SessionStatus::InProgress);
        order.push(s.id);
    }
    assert_eq!(order, vec!["c-3", "c-1", "c-2"]);
    assert_eq!(store.count_in_progress().await.unwrap(), 3);
}

/// Many claimers at once: every session claimed exactly once.
async fn concurrent_claimers_never_share(store: Store) {
    let n = 40;
    for i in 0..n {
        store
            .create_session(session(&format!("q-{i:02}")))
            .await
            .unwrap();
    }
    let mut workers = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        workers.push(tokio::spawn(async move {
            let pod = format!("pod-{w}");
            let mut got = Vec::new();
            while let Some(s) = store.claim_next_pending_session(&pod).await.unwrap() {
                assert_eq!(s.pod_id.as_deref(), Some(pod.as_str()));
                got.push(s.id);
            }
            got
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), n, "claims: {all:?}");
    assert_eq!(unique.len(), n);
    // Ownership recorded matches the claimer.
    for id in &all {
        assert!(
            store
                .get_session(id)
                .await
                .unwrap()
                .pod_id
                .unwrap()
                .starts_with("pod-")
        );
    }
}

/// Postgres: a claimer skips a pending row another transaction has locked
/// instead of waiting for it.
async fn claim_skips_locked_rows(store: Store) {
    store.create_session(session("first")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2)).await;
    store.create_session(session("second")).await.unwrap();
    let pool = store.postgres_pool().unwrap().clone();
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM alert_sessions WHERE id = 'first' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let got = tokio::time::timeout(
        Duration::from_secs(5),
        store.claim_next_pending_session("pod-x"),
    )
    .await
    .expect("claim blocked on a locked row")
    .unwrap()
    .unwrap();
    assert_eq!(got.id, "second");
    holder.rollback().await.unwrap();
    let got = store
        .claim_next_pending_session("pod-y")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.id, "first");
    assert!(
        store
            .claim_next_pending_session("pod-z")
            .await
            .unwrap()
            .is_none()
    );
}

/// Filters combine; search is a case-insensitive substring with literal
/// wildcards; pages are newest first with a total count.
async fn list_filter_and_paging(store: Store) {
    for i in 0..25 {
        let mut s = session(&format!("l-{i:02}"));
        s.alert_type = if i % 2 == 0 {
            "HighCPU".into()
        } else {
            "PodCrashLooping".into()
        };
        s.chain_id = if i % 3 == 0 {
            "chain-a".into()
        } else {
            "chain-b".into()
        };
        s.author = Some(if i < 5 { "bob".into() } else { "alice".into() });
        if i == 7 {
            s.alert_data = "Disk usage at 95% on node-Seven".into();
        }
        store.create_session(s).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for id in ["l-00", "l-01", "l-02"] {
        store
            .update_session_status(id, SessionStatus::Completed)
            .await
            .unwrap();
    }
    store
        .update_session_status("l-03", SessionStatus::Failed)
        .await
        .unwrap();

    let page = store
        .list_sessions(&SessionFilter::default())
        .await
        .unwrap();
    assert_eq!(page.total, 25);
    assert_eq!(page.sessions.len(), 20);
    assert_eq!(page.sessions[0].id, "l-24");
    assert_eq!((page.limit, page.offset), (20, 0));

    let second = store
        .list_sessions(&SessionFilter {
            limit: Some(10),
            offset: Some(20),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(second.total, 25);
    assert_eq!(
        second
            .sessions
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        vec!["l-04", "l-03", "l-02", "l-01", "l-00"]
    );

    let ids =
        |p: tarsy_store::SessionPage| p.sessions.into_iter().map(|s| s.id).collect::<Vec<_>>();
    let done = store
        .list_sessions(&SessionFilter {
            statuses: vec![SessionStatus::Completed, SessionStatus::Failed],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(done.total, 4);
    assert_eq!(ids(done), vec!["l-03", "l-02", "l-01", "l-00"]);

    let combined = store
        .list_sessions(&SessionFilter {
            alert_type: Some("HighCPU".into()),
            chain_id: Some("chain-a".into()),
            author: Some("alice".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    // Even, multiple of 3, ≥ 5: 6, 12, 18, 24.
    assert_eq!(ids(combined), vec!["l-24", "l-18", "l-12", "l-06"]);

    let found = store
        .list_sessions(&SessionFilter {
            search: Some("NODE-seven".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(found), vec!["l-07"]);
    let literal = store
        .list_sessions(&SessionFilter {
            search: Some("95%".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(literal.total, 1);
    let wildcard = store
        .list_sessions(&SessionFilter {
            search: Some("%".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(wildcard.total, 1, "% must match literally");
    let by_id = store
        .list_sessions(&SessionFilter {
            search: Some("l-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_id.total, 10);

    for bad in [
        SessionFilter {
            limit: Some(0),
            ..Default::default()
        },
        SessionFilter {
            limit: Some(5000),
            ..Default::default()
        },
        SessionFilter {
            offset: Some(-1),
            ..Default::default()
        },
    ] {
        assert!(matches!(
            store.list_sessions(&bad).await.unwrap_err(),
            StoreError::InvalidInput(_)
        ));
    }
}

/// Soft-deleted sessions leave lists and counts but stay readable and restorable.
async fn soft_delete_hides_from_list(store: Store) {
    for id in ["d-1", "d-2", "d-3"] {
        store.create_session(session(id)).await.unwrap();
    }
    store.soft_delete_session("d-2").await.unwrap();
    let first = store.get_session("d-2").await.unwrap().deleted_at.unwrap();
    store.soft_delete_session("d-2").await.unwrap();
    assert_eq!(
        store.get_session("d-2").await.unwrap().deleted_at,
        Some(first)
    );

    let page = store
        .list_sessions(&SessionFilter::default())
        .await
        .unwrap();
    assert_eq!(page.total, 2);
    assert!(page.sessions.iter().all(|s| s.id != "d-2"));
    assert_eq!(
        store
            .count_sessions_with_status(&[SessionStatus::Pending])
            .await
            .unwrap(),
        2
    );
    let with_deleted = store
        .list_sessions(&SessionFilter {
            include_deleted: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(with_deleted.total, 3);

    store.restore_session("d-2").await.unwrap();
    assert_eq!(
        store
            .list_sessions(&SessionFilter::default())
            .await
            .unwrap()
            .total,
        3
    );
}

/// Retention: finished sessions past the cutoff are hidden, then purged with
/// everything below them and their events; younger ones survive.
async fn retention_purge(store: Store) {
    let (st, ex) = seeded(&store, "old").await;
    store
        .create_timeline_event(streaming_event(scope("old", &st, &ex), 1))
        .await
        .unwrap();
    store
        .insert_event("old", "session:old", json!({"n": 1}))
        .await
        .unwrap();
    store.get_or_create_chat("old", None).await.unwrap();
    store
        .update_session_status("old", SessionStatus::Completed)
        .await
        .unwrap();
    store.create_session(session("running")).await.unwrap();
    store
        .update_session_status("running", SessionStatus::InProgress)
        .await
        .unwrap();

    // Nothing finished before an old cutoff.
    let past = Utc::now() - chrono::Duration::days(90);
    assert_eq!(
        store
            .soft_delete_sessions_completed_before(past, Utc::now())
            .await
            .unwrap(),
        0
    );
    let cutoff = Utc::now() + chrono::Duration::seconds(1);
    assert_eq!(
        store
            .soft_delete_sessions_completed_before(cutoff, Utc::now())
            .await
            .unwrap(),
        1
    );
    assert!(store.get_session("old").await.unwrap().deleted_at.is_some());
    assert!(
        store
            .get_session("running")
            .await
            .unwrap()
            .deleted_at
            .is_none()
    );

    assert_eq!(store.purge_deleted_sessions(past).await.unwrap(), 0);
    assert!(store.get_session("old").await.is_ok());
    let later = Utc::now() + chrono::Duration::seconds(2);
    assert_eq!(store.purge_deleted_sessions(later).await.unwrap(), 1);
    assert!(store.get_session("old").await.unwrap_err().is_not_found());
    assert!(store.get_stage(&st).await.unwrap_err().is_not_found());
    assert!(
        store
            .get_agent_execution(&ex)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        store
            .events_since("session:old", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.get_session("running").await.is_ok());
}

/// One chat per session, even under concurrent first messages; questions
/// are stored, listed and deleted; the active chat stage is found.
async fn chat_uniqueness_and_messages(store: Store) {
    store.create_session(session("chat-s")).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..5 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .get_or_create_chat("chat-s", Some(&format!("user-{i}")))
                .await
                .unwrap()
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    assert_eq!(results.iter().filter(|r| r.created).count(), 1);
    let chat_id = results[0].record.id.clone();
    assert!(results.iter().all(|r| r.record.id == chat_id));
    let again = store
        .get_or_create_chat("chat-s", Some("zed"))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.record.id, chat_id);
    assert_eq!(
        store.chat_for_session("chat-s").await.unwrap().unwrap().id,
        chat_id
    );

    let q1 = store
        .create_chat_user_message(&chat_id, "Why OOM?", Some("alice"))
        .await
        .unwrap();
    let q2 = store
        .create_chat_user_message(&chat_id, "And now?", None)
        .await
        .unwrap();
    assert_eq!(
        store
            .list_chat_user_messages(&chat_id)
            .await
            .unwrap()
            .iter()
            .map(|m| m.id.clone())
            .collect::<Vec<_>>(),
        vec![q1.id.clone(), q2.id.clone()]
    );
    store.delete_chat_user_message(&q2.id).await.unwrap();
    assert!(
        store
            .delete_chat_user_message(&q2.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert_eq!(
        store.list_chat_user_messages(&chat_id).await.unwrap().len(),
        1
    );

    assert!(
        store
            .active_stage_for_chat(&chat_id)
            .await
            .unwrap()
            .is_none()
    );
    let chat_stage = store
        .create_stage(NewStage {
            stage_name: "Chat Response".into(),
            kind: tarsy_core::StageKind::Chat,
            chat_id: Some(chat_id.clone()),
            chat_user_message_id: Some(q1.id.clone()),
            ..stage("chat-s", 5)
        })
        .await
        .unwrap();
    let ex = store
        .create_agent_execution(tarsy_store::NewAgentExecution {
            kind: ExecutionKind::Chat,
            iteration_strategy: IterationStrategy::Langchain,
            ..execution("chat-s", &chat_stage.id, "ChatAgent", 1)
        })
        .await
        .unwrap();
    assert_eq!(ex.kind, ExecutionKind::Chat);
    assert_eq!(
        store
            .active_stage_for_chat(&chat_id)
            .await
            .unwrap()
            .unwrap()
            .id,
        chat_stage.id
    );
    store.touch_chat(&chat_id, Some("pod-c")).await.unwrap();
    let chat = store.get_chat(&chat_id).await.unwrap();
    assert_eq!(chat.pod_id.as_deref(), Some("pod-c"));
    assert!(chat.last_interaction_at.is_some());
    store
        .update_stage_status(&chat_stage.id, ExecutionStatus::Completed, None)
        .await
        .unwrap();
    assert!(
        store
            .active_stage_for_chat(&chat_id)
            .await
            .unwrap()
            .is_none()
    );

    assert!(matches!(
        store
            .get_or_create_chat("no-session", None)
            .await
            .unwrap_err(),
        StoreError::NotFound {
            kind: "session",
            ..
        }
    ));
    assert!(matches!(
        store
            .create_chat_user_message("no-chat", "hi", None)
            .await
            .unwrap_err(),
        StoreError::NotFound { kind: "chat", .. }
    ));
    assert!(matches!(
        store
            .create_chat_user_message(&chat_id, "  ", None)
            .await
            .unwrap_err(),
        StoreError::InvalidInput(_)
    ));
}

fn assert_not_found<T: std::fmt::Debug>(result: Result<T, StoreError>, kind: &str) {
    match result {
        Err(StoreError::NotFound { kind: k, id }) => {
            assert_eq!(k, kind);
            assert!(!id.is_empty());
        }
        other => panic!("expected {kind} not found, got {other:?}"),
    }
}

/// Every get, update and child-create with an unknown id is a typed not-found.
async fn unknown_ids_are_not_found(store: Store) {
    let (st, ex) = seeded(&store, "nf").await;
    assert_not_found(store.get_session("x").await, "session");
    assert_not_found(
        store
            .update_session_status("x", SessionStatus::Failed)
            .await,
        "session",
    );
    assert_not_found(
        store
            .transition_session_status("x", &[SessionStatus::InProgress], SessionStatus::Cancelling)
            .await,
        "session",
    );
    assert_not_found(store.update_session_progress("x", 1, "s").await, "session");
    assert_not_found(store.touch_session("x").await, "session");
    assert_not_found(
        store
            .finish_session(
                "x",
                SessionOutcome {
                    status: SessionStatus::Failed,
                    final_analysis: None,
                    executive_summary: None,
                    executive_summary_error: None,
                    error_message: Some("e".into()),
                    end_reason: None,
                },
            )
            .await,
        "session",
    );
    assert_not_found(
        store.set_executive_summary("x", Some("s"), None).await,
        "session",
    );
    assert_not_found(store.soft_delete_session("x").await, "session");
    assert_not_found(store.restore_session("x").await, "session");
    assert_not_found(store.list_stages("x").await, "session");
    assert_not_found(store.list_session_executions("x").await, "session");
    assert_not_found(store.session_timeline("x").await, "session");
    assert_not_found(store.session_trace("x").await, "session");
    assert_not_found(store.session_mcp_interactions("x").await, "session");
    assert_not_found(store.chat_for_session("x").await, "session");
    assert_not_found(store.max_stage_index("x").await, "session");

    assert_not_found(store.get_stage("x").await, "stage");
    assert_not_found(
        store
            .update_stage_status("x", ExecutionStatus::Active, None)
            .await,
        "stage",
    );
    assert_not_found(store.list_agent_executions("x").await, "stage");
    assert_not_found(store.create_stage(stage("x", 0)).await, "session");
    assert_not_found(
        store
            .create_agent_execution(execution("nf", "x", "A", 9))
            .await,
        "stage",
    );
    assert_not_found(
        store
            .create_agent_execution(execution("x", &st, "A", 9))
            .await,
        "session",
    );

    assert_not_found(store.get_agent_execution("x").await, "agent execution");
    assert_not_found(
        store
            .update_agent_execution_status("x", ExecutionStatus::Failed, None)
            .await,
        "agent execution",
    );
    assert_not_found(store.execution_timeline("x").await, "agent execution");
    assert_not_found(store.list_messages("x").await, "agent execution");

    assert_not_found(store.get_timeline_event("x").await, "timeline event");
    assert_not_found(
        store
            .complete_timeline_event("x", "c", TimelineEventStatus::Completed, None)
            .await,
        "timeline event",
    );
    assert_not_found(
        store
            .create_timeline_event(streaming_event(scope("nf", &st, "x"), 1))
            .await,
        "agent execution",
    );
    assert_not_found(
        store
            .create_timeline_event(streaming_event(scope("x", &st, &ex), 1))
            .await,
        "session",
    );
    assert_not_found(
        store
            .create_message(message(scope("nf", "x", &ex), 1, MessageRole::User, "u"))
            .await,
        "stage",
    );
    assert_not_found(store.list_messages_up_to("x").await, "message");
    assert_not_found(
        store
            .create_llm_interaction(llm(
                scope("nf", &st, "x"),
                LlmInteractionType::Iteration,
                None,
            ))
            .await,
        "agent execution",
    );

    assert_not_found(store.get_llm_interaction("x").await, "LLM interaction");
    assert_not_found(store.get_mcp_interaction("x").await, "MCP interaction");
    assert_not_found(store.get_event(424242).await, "event");
    assert_not_found(store.get_chat("x").await, "chat");
    assert_not_found(store.touch_chat("x", None).await, "chat");
    assert_not_found(store.active_stage_for_chat("x").await, "chat");
    assert_not_found(store.list_chat_user_messages("x").await, "chat");
    assert_not_found(store.get_chat_user_message("x").await, "chat message");
    assert_not_found(store.delete_chat_user_message("x").await, "chat message");

    // The recorder trait maps them to its own not-found.
    let recorder: &dyn ExecutionRecorder = &store;
    assert!(matches!(
        recorder
            .append_timeline_content("x", "d")
            .await
            .unwrap_err(),
        RecordError::NotFound {
            kind: "timeline event",
            ..
        }
    ));
}

/// Unique rules surface as conflicts; explicit ids make creates idempotent.
async fn uniqueness_conflicts_and_idempotent_creates(store: Store) {
    let (st, ex) = seeded(&store, "u").await;
    let err = store.create_stage(stage("u", 0)).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { kind: "stage", .. }),
        "{err}"
    );
    let err = store
        .create_agent_execution(execution("u", &st, "Other", 1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                kind: "agent execution",
                ..
            }
        ),
        "{err}"
    );
    store
        .create_message(message(scope("u", &st, &ex), 1, MessageRole::System, "s"))
        .await
        .unwrap();
    let err = store
        .create_message(message(scope("u", &st, &ex), 1, MessageRole::User, "dup"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                kind: "message",
                ..
            }
        ),
        "{err}"
    );
    let err = store
        .create_message(message(
            RecordScope {
                session_id: "u".into(),
                stage_id: None,
                execution_id: None,
            },
            2,
            MessageRole::User,
            "x",
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");

    let fixed = NewStage {
        id: Some("stage-fixed".into()),
        ..stage("u", 1)
    };
    let first = store.create_stage(fixed.clone()).await.unwrap();
    let second = store.create_stage(fixed).await.unwrap();
    assert_eq!(first, second);
    let fixed_ex = tarsy_store::NewAgentExecution {
        id: Some("exec-fixed".into()),
        ..execution("u", "stage-fixed", "A", 1)
    };
    let a = store
        .create_agent_execution(fixed_ex.clone())
        .await
        .unwrap();
    let b = store.create_agent_execution(fixed_ex).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(
        store
            .list_agent_executions("stage-fixed")
            .await
            .unwrap()
            .len(),
        1
    );

    // Bad input is refused, not stored.
    assert!(matches!(
        store
            .create_stage(NewStage {
                expected_agent_count: 0,
                ..stage("u", 7)
            })
            .await
            .unwrap_err(),
        StoreError::InvalidInput(_)
    ));
    // A stage says what it is for; a chat stage needs its chat and only it does.
    let synthesis = store
        .create_stage(NewStage {
            kind: tarsy_core::StageKind::Synthesis,
            stage_name: "s - Synthesis".into(),
            ..stage("u", 8)
        })
        .await
        .unwrap();
    assert_eq!(synthesis.kind, tarsy_core::StageKind::Synthesis);
    let listed = store.list_stages("u").await.unwrap();
    assert_eq!(
        listed.iter().find(|s| s.stage_index == 8).map(|s| s.kind),
        Some(tarsy_core::StageKind::Synthesis)
    );
    assert!(matches!(
        store
            .create_stage(NewStage {
                kind: tarsy_core::StageKind::Chat,
                ..stage("u", 9)
            })
            .await
            .unwrap_err(),
        StoreError::InvalidInput(_)
    ));
    let mut big = session("big");
    big.alert_data = "x".repeat(tarsy_core::MAX_ALERT_DATA_BYTES + 1);
    assert!(matches!(
        store.create_session(big).await.unwrap_err(),
        StoreError::InvalidInput(_)
    ));
    assert!(store.get_session("big").await.unwrap_err().is_not_found());
    assert!(matches!(
        store.create_session(session(" ")).await.unwrap_err(),
        StoreError::InvalidInput(_)
    ));
}

/// Status transitions, admission counts and orphan detection.
async fn orphans_and_counts(store: Store) {
    for id in ["o-1", "o-2", "o-3"] {
        store.create_session(session(id)).await.unwrap();
    }
    assert_eq!(store.count_in_progress().await.unwrap(), 0);
    store
        .claim_next_pending_session("pod-1")
        .await
        .unwrap()
        .unwrap();
    store
        .claim_next_pending_session("pod-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.count_in_progress().await.unwrap(), 2);
    assert_eq!(
        store
            .count_sessions_with_status(&[SessionStatus::Pending])
            .await
            .unwrap(),
        1
    );

    // Cancel only applies to running sessions.
    assert!(
        store
            .transition_session_status(
                "o-1",
                &[SessionStatus::InProgress],
                SessionStatus::Cancelling
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .transition_session_status(
                "o-3",
                &[SessionStatus::InProgress],
                SessionStatus::Cancelling
            )
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_session("o-3").await.unwrap().status,
        SessionStatus::Pending
    );
    assert_eq!(store.count_in_progress().await.unwrap(), 1);

    let future = Utc::now() + chrono::Duration::seconds(5);
    let orphans = store.find_orphaned_sessions(future).await.unwrap();
    assert_eq!(
        orphans.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        vec!["o-1", "o-2"]
    );
    let past = Utc::now() - chrono::Duration::seconds(60);
    assert!(store.find_orphaned_sessions(past).await.unwrap().is_empty());

    let before = store
        .get_session("o-2")
        .await
        .unwrap()
        .last_interaction_at
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    store.touch_session("o-2").await.unwrap();
    assert!(
        store
            .get_session("o-2")
            .await
            .unwrap()
            .last_interaction_at
            .unwrap()
            > before
    );

    let done = store
        .transition_session_status(
            "o-1",
            &[SessionStatus::Cancelling],
            SessionStatus::Cancelled,
        )
        .await
        .unwrap();
    assert!(done);
    let s = store.get_session("o-1").await.unwrap();
    assert_eq!(s.status, SessionStatus::Cancelled);
    assert!(s.completed_at.is_some());

    store
        .set_executive_summary("o-1", None, Some("provider down"))
        .await
        .unwrap();
    assert_eq!(
        store
            .get_session("o-1")
            .await
            .unwrap()
            .executive_summary_error
            .as_deref(),
        Some("provider down")
    );
    assert!(matches!(
        store
            .finish_session(
                "o-2",
                SessionOutcome {
                    status: SessionStatus::InProgress,
                    final_analysis: None,
                    executive_summary: None,
                    executive_summary_error: None,
                    error_message: None,
                    end_reason: None,
                }
            )
            .await
            .unwrap_err(),
        StoreError::InvalidInput(_)
    ));
}

/// The conversation up to a message is that execution's prefix only.
async fn messages_up_to_a_message(store: Store) {
    let (st, ex) = seeded(&store, "mu").await;
    let other = store
        .create_agent_execution(execution("mu", &st, "Second", 2))
        .await
        .unwrap();
    let mut ids = Vec::new();
    for seq in 1..=5 {
        ids.push(
            store
                .create_message(message(
                    scope("mu", &st, &ex),
                    seq,
                    MessageRole::User,
                    &format!("m{seq}"),
                ))
                .await
                .unwrap()
                .id,
        );
        store
            .create_message(message(
                scope("mu", &st, &other.id),
                seq,
                MessageRole::User,
                "other",
            ))
            .await
            .unwrap();
    }
    let prefix = store.list_messages_up_to(&ids[2]).await.unwrap();
    assert_eq!(
        prefix
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>(),
        vec!["m1", "m2", "m3"]
    );
    assert_eq!(store.list_messages_up_to(&ids[4]).await.unwrap().len(), 5);
    assert_eq!(store.list_messages(&other.id).await.unwrap().len(), 5);
}

// ---------------------------------------------------------------- single tests

#[tokio::test]
async fn in_memory_sqlite_helper_is_private_and_migrated() {
    let a = Store::sqlite_in_memory().await.unwrap();
    let b = Store::sqlite_in_memory().await.unwrap();
    a.create_session(session("only-in-a")).await.unwrap();
    assert!(a.get_session("only-in-a").await.is_ok());
    assert!(b.get_session("only-in-a").await.unwrap_err().is_not_found());
    assert_eq!(a.backend(), tarsy_store::BackendKind::Sqlite);
    assert!(a.postgres_pool().is_none());
}

#[tokio::test]
async fn unsupported_and_unreachable_urls_are_errors() {
    assert!(matches!(
        Store::connect("mysql://localhost/x").await.unwrap_err(),
        StoreError::UnsupportedUrl(_)
    ));
    let unreachable = Store::connect_with(
        "postgres://tarsy:tarsy@127.0.0.1:1/tarsy",
        tarsy_store::ConnectOptions {
            acquire_timeout: Duration::from_secs(2),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert!(
        matches!(unreachable, StoreError::Database(_)),
        "{unreachable}"
    );
}

#[tokio::test]
async fn skipping_migrations_leaves_the_schema_alone() {
    let path = std::env::temp_dir().join(format!(
        "tarsy_nomigrate_{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let url = format!("sqlite:{}", path.display());
    let store = Store::connect_with(
        &url,
        tarsy_store::ConnectOptions {
            run_migrations: false,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(matches!(
        store.get_session("a").await.unwrap_err(),
        StoreError::Database(_)
    ));
    store.migrate().await.unwrap();
    assert!(store.get_session("a").await.unwrap_err().is_not_found());
    store.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Both migrations define the same tables with the same columns, apart
/// from the full-text tables (`*_fts*`), which each backend builds its own
/// way.
#[tokio::test]
async fn postgres_and_sqlite_schemas_match() {
    common::with_postgres(|store: Store| async move {
        let pg = store.postgres_pool().unwrap();
        let pg_cols: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = 'public' AND table_name NOT LIKE '\\_sqlx%' \
             AND table_name NOT LIKE '%\\_fts%' ORDER BY 1, 2",
        )
        .fetch_all(pg)
        .await
        .unwrap();

        let lite = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        Store::from_sqlite_pool(lite.clone())
            .migrate()
            .await
            .unwrap();
        let lite_cols: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
             AND m.name NOT LIKE '\\_sqlx%' ESCAPE '\\' \
             AND m.name NOT LIKE '%\\_fts%' ESCAPE '\\' ORDER BY 1, 2",
        )
        .fetch_all(&lite)
        .await
        .unwrap();
        assert!(!pg_cols.is_empty());
        assert_eq!(pg_cols, lite_cols);
    })
    .await;
}

/// Arbitrary Unicode (NUL and other control characters included) in alert
/// data, ids, timeline content, JSON metadata and events is stored — NUL as
/// U+FFFD, visibly — and read back identically on both backends; an id with
/// a NUL simply matches nothing.
async fn any_text_is_stored_the_same_on_both_backends(store: Store) {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;

    let text = proptest::string::string_regex("(\\PC|\\x00|\\x01|\\x7f|\\u{FFFD}){0,40}").unwrap();
    let mut runner = TestRunner::deterministic();
    for case in 0..64 {
        let raw = text.new_tree(&mut runner).unwrap().current();
        let expected = raw.replace('\0', "\u{FFFD}");
        let id = format!("s{case}");
        let mut new = session(&id);
        new.alert_data = format!("data:{raw}");
        new.author = Some(raw.clone());
        store.create_session(new).await.unwrap();
        let got = store.get_session(&id).await.unwrap();
        assert_eq!(
            got.alert_data,
            format!("data:{expected}"),
            "case {case}: {raw:?}"
        );
        assert_eq!(got.author.as_deref(), Some(expected.as_str()));

        let st = store.create_stage(stage(&id, 1)).await.unwrap();
        let ex = store
            .create_agent_execution(execution(&id, &st.id, "A", 1))
            .await
            .unwrap();
        let event = store
            .create_timeline_event(NewTimelineEvent {
                scope: scope(&id, &st.id, &ex.id),
                sequence_number: 1,
                event_type: TimelineEventType::LlmToolCall,
                status: TimelineEventStatus::Completed,
                content: raw.clone(),
                metadata: json!({"arguments": raw, raw.clone(): [raw]}),
            })
            .await
            .unwrap();
        let read = store.get_timeline_event(&event.id).await.unwrap();
        assert_eq!(read.content, expected);
        assert_eq!(read.metadata["arguments"], json!(expected));
        assert_eq!(read.metadata[&expected], json!([expected]));

        let stored = store
            .insert_event(&id, "sessions", json!({"content": raw}))
            .await
            .unwrap();
        let replay = store
            .events_since("sessions", stored - 1, 10)
            .await
            .unwrap();
        assert_eq!(replay[0].payload["content"], json!(expected));
    }
    // Lookups with a NUL are misses, not errors.
    assert!(store.get_session("a\0b").await.unwrap_err().is_not_found());
    let filtered = store
        .list_sessions(&SessionFilter {
            search: Some("\0".into()),
            ..SessionFilter::default()
        })
        .await
        .unwrap();
    assert!(filtered.sessions.len() <= 64);
}

/// An iteration step's records in one batch: every write lands as its single
/// write would (ids, merged metadata, NUL made storable); a failing write
/// reads as its single write's failure and keeps the writes before it.
async fn batches_write_a_step_at_once(store: Store) {
    let (st, ex) = seeded(&store, "batch").await;
    let sc = scope("batch", &st, &ex);
    let ev = store
        .create_timeline_event(NewTimelineEvent {
            event_type: TimelineEventType::LlmToolCall,
            metadata: json!({"tool_name": "pods", "nested": {"a": [1, true, null]}}),
            ..streaming_event(sc.clone(), 1)
        })
        .await
        .unwrap();
    let first = store
        .create_message(message(sc.clone(), 1, MessageRole::User, "question"))
        .await
        .unwrap();
    let ids = ExecutionRecorder::write_batch(
        &store,
        vec![
            RecordWrite::McpInteraction(NewMcpInteraction {
                scope: sc.clone(),
                interaction_type: McpInteractionType::ToolCall,
                server_name: "kubernetes".into(),
                tool_name: "pods_list".into(),
                tool_arguments: json!({"namespace": "prod"}),
                tool_result: json!({"content": "api-7\u{0}"}),
                available_tools: json!([]),
                duration_ms: 40,
                error_message: None,
            }),
            RecordWrite::LlmInteraction(llm(
                sc.clone(),
                LlmInteractionType::Iteration,
                Some(first.id.clone()),
            )),
            RecordWrite::CompleteEvent {
                event_id: ev.id.clone(),
                content: "result\0 with a NUL".into(),
                status: TimelineEventStatus::Completed,
                metadata: Some(json!({"is_error": false, "tool_name": "pods2"})),
            },
            RecordWrite::Message(message(sc.clone(), 2, MessageRole::Tool, "result")),
            RecordWrite::CreateEvent(NewTimelineEvent {
                metadata: json!({}),
                ..streaming_event(sc.clone(), 2)
            }),
        ],
    )
    .await
    .unwrap();
    assert_eq!(ids.len(), 5);
    let mcp = store
        .get_mcp_interaction(ids[0].as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(mcp.tool_name, "pods_list");
    assert_eq!(mcp.tool_result["content"], json!("api-7\u{FFFD}"));
    let ids = &ids[1..];
    assert!(ids[1].is_none());
    let done = store.get_timeline_event(&ev.id).await.unwrap();
    assert_eq!(done.status, TimelineEventStatus::Completed);
    assert_eq!(done.content, "result\u{FFFD} with a NUL");
    assert_eq!(
        done.metadata,
        json!({"tool_name": "pods2", "nested": {"a": [1, true, null]}, "is_error": false})
    );
    let messages = store.list_messages(&ex).await.unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(Some(&messages[1].id), ids[2].as_ref());
    let created = store
        .get_timeline_event(ids[3].as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(created.sequence_number, 2);
    let interaction = store
        .get_llm_interaction(ids[0].as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(interaction.last_message_id, Some(first.id.clone()));

    // A message stored twice: the conflict of the single write, and the
    // write before it kept.
    let err = store
        .write_batch(vec![
            RecordWrite::Message(message(sc.clone(), 3, MessageRole::Assistant, "a")),
            RecordWrite::Message(message(sc.clone(), 2, MessageRole::Tool, "again")),
        ])
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(store.list_messages(&ex).await.unwrap().len(), 3);
    // A missing execution is named as the single write names it.
    let lost = RecordScope {
        execution_id: Some("no-such-execution".into()),
        ..sc.clone()
    };
    let err = store
        .write_batch(vec![
            RecordWrite::LlmInteraction(llm(lost.clone(), LlmInteractionType::Iteration, None)),
            RecordWrite::Message(message(lost, 1, MessageRole::Tool, "x")),
        ])
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    // The database is usable afterwards (no transaction left open).
    store
        .create_message(message(sc.clone(), 4, MessageRole::User, "after"))
        .await
        .unwrap();
    assert_eq!(store.list_messages(&ex).await.unwrap().len(), 4);
    // A completion of no event: not found, the rest written.
    let err = store
        .write_batch(vec![
            RecordWrite::CompleteEvent {
                event_id: "nope".into(),
                content: "x".into(),
                status: TimelineEventStatus::Completed,
                metadata: None,
            },
            RecordWrite::Message(message(sc, 5, MessageRole::User, "kept")),
        ])
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert_eq!(store.list_messages(&ex).await.unwrap().len(), 5);
}

fn ended(status: SessionStatus) -> SessionOutcome {
    SessionOutcome {
        status,
        final_analysis: None,
        executive_summary: None,
        executive_summary_error: None,
        error_message: None,
        end_reason: None,
    }
}

/// What a finished investigation may not show: a `streaming` event, a
/// pending or active execution or stage. A session still running, and a
/// chat answer being given in an ended session, are not reported; what the
/// session's end closes is not reported any more.
async fn open_records_of_ended_sessions(store: Store) {
    // Ended with everything still open.
    let (stage_id, execution_id) = seeded(&store, "left-open").await;
    store
        .create_timeline_event(streaming_event(
            scope("left-open", &stage_id, &execution_id),
            1,
        ))
        .await
        .unwrap();
    store
        .finish_session("left-open", ended(SessionStatus::Completed))
        .await
        .unwrap();
    // Running: open records are expected.
    let (r_stage, r_execution) = seeded(&store, "running").await;
    store
        .create_timeline_event(streaming_event(scope("running", &r_stage, &r_execution), 1))
        .await
        .unwrap();
    // Ended, a chat answer streaming in it.
    let (c_stage, c_execution) = seeded(&store, "chatting").await;
    store
        .update_agent_execution_status(&c_execution, ExecutionStatus::Completed, None)
        .await
        .unwrap();
    store
        .update_stage_status(&c_stage, ExecutionStatus::Completed, None)
        .await
        .unwrap();
    store
        .finish_session("chatting", ended(SessionStatus::Completed))
        .await
        .unwrap();
    let chat = store.get_or_create_chat("chatting", None).await.unwrap();
    let question = store
        .create_chat_user_message(&chat.record.id, "Why?", None)
        .await
        .unwrap();
    let chat_stage = store
        .create_stage(NewStage {
            chat_id: Some(chat.record.id.clone()),
            chat_user_message_id: Some(question.id),
            kind: tarsy_core::StageKind::Chat,
            ..stage("chatting", 1)
        })
        .await
        .unwrap();
    let answer = store
        .create_agent_execution(execution("chatting", &chat_stage.id, "ChatAgent", 1))
        .await
        .unwrap();
    store
        .create_timeline_event(streaming_event(
            scope("chatting", &chat_stage.id, &answer.id),
            1,
        ))
        .await
        .unwrap();

    let open = store.open_records_in_terminal_sessions().await.unwrap();
    let listed: Vec<(&str, &str, &str)> = open
        .iter()
        .map(|r| (r.session_id.as_str(), r.kind.as_str(), r.status.as_str()))
        .collect();
    assert_eq!(
        listed,
        [
            ("left-open", "execution", "pending"),
            ("left-open", "stage", "pending"),
            ("left-open", "timeline_event", "streaming"),
        ],
        "{open:#?}"
    );
    assert!(open.iter().all(|r| r.session_status == "completed"));
    assert_eq!(open[0].id, execution_id);
    assert_eq!(open[1].id, stage_id);

    // The chat answer's stage ends with its execution still running: now
    // that is left open too.
    store
        .update_stage_status(&chat_stage.id, ExecutionStatus::Completed, None)
        .await
        .unwrap();
    let open = store.open_records_in_terminal_sessions().await.unwrap();
    let chatting: Vec<&str> = open
        .iter()
        .filter(|r| r.session_id == "chatting")
        .map(|r| r.kind.as_str())
        .collect();
    assert_eq!(chatting, ["execution", "timeline_event"], "{open:#?}");

    // What the session's end closes is not open any more.
    store
        .close_open_records("left-open", "ended")
        .await
        .unwrap();
    store.close_open_records("chatting", "ended").await.unwrap();
    assert_eq!(store.open_records_in_terminal_sessions().await.unwrap(), []);
}
