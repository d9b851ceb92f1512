//! REST endpoints: status codes, messages and response shapes.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use serde_json::{Value, json};
use tarsy_api::{ApiConfig, McpHealthSource, McpServerHealth, SystemWarning, SystemWarningsSource};
use tarsy_core::{
    ExecutionKind, ExecutionStatus, IterationStrategy, LlmInteractionType, McpInteractionType,
    MessageRole, NewLlmInteraction, NewMcpInteraction, NewMessage, NewTimelineEvent, RecordScope,
    SessionStatus, TimelineEventStatus, TimelineEventType, ToolCall,
};
use tarsy_store::{NewAgentExecution, NewStage, Store};

use crate::common::{TestApp, complete};
use crate::on_both_backends;

// ------------------------------------------------------------ seeding

async fn stage(store: &Store, session_id: &str, index: i64, name: &str) -> String {
    store
        .create_stage(NewStage {
            id: None,
            session_id: session_id.into(),
            stage_name: name.into(),
            kind: tarsy_core::StageKind::Investigation,
            stage_index: index,
            expected_agent_count: 1,
            parallel_type: None,
            success_policy: None,
            chat_id: None,
            chat_user_message_id: None,
        })
        .await
        .unwrap()
        .id
}

async fn execution(
    store: &Store,
    session_id: &str,
    stage_id: &str,
    name: &str,
    index: i64,
) -> String {
    store
        .create_agent_execution(NewAgentExecution {
            id: None,
            stage_id: stage_id.into(),
            session_id: session_id.into(),
            agent_name: name.into(),
            agent_index: index,
            kind: ExecutionKind::Investigation,
            iteration_strategy: IterationStrategy::NativeThinking,
            llm_provider: Some("gemini".into()),
        })
        .await
        .unwrap()
        .id
}

fn scope(session: &str, stage: &str, exec: &str) -> RecordScope {
    RecordScope {
        session_id: session.into(),
        stage_id: Some(stage.into()),
        execution_id: Some(exec.into()),
    }
}

// ------------------------------------------------------------ alerts

async fn alert_submission_creates_a_pending_session(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let (status, body) = app
        .post_json(
            "/api/v1/alerts",
            &json!({
                "alert_type": "PodCrashLooping",
                "data": {"pod": "api-7", "namespace": "prod"},
                "runbook_url": "https://runbooks.example.com/crashloop.md",
                "mcp_selection": {"servers": [{"name": "kubernetes", "tools": ["pods_list"]}]},
            }),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "pending");
    assert_eq!(body["chain_id"], "k8s-chain");
    let id = body["session_id"].as_str().unwrap();
    let session = store.get_session(id).await.unwrap();
    assert_eq!(session.author.as_deref(), Some("api-client"));
    assert_eq!(session.status, SessionStatus::Pending);
    let data: Value = serde_json::from_str(&session.alert_data).unwrap();
    assert_eq!(data, json!({"pod": "api-7", "namespace": "prod"}));
    assert_eq!(
        session.mcp_selection.unwrap()["servers"][0]["tools"],
        json!(["pods_list"])
    );

    // Plain-text data is stored as sent; an explicit chain wins over the type.
    let (status, body) = app
        .post_json(
            "/api/v1/alerts",
            &json!({"alert_type": "Custom", "chain": "latency-chain", "data": "p99 > 2s"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["chain_id"], "latency-chain");
    let (status, detail) = app
        .get(&format!(
            "/api/v1/sessions/{}",
            body["session_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(detail["alert_data"], "p99 > 2s");
    assert_eq!(detail["status"], "pending");
    assert_eq!(detail["stages"], json!([]));
}

async fn malformed_alerts_get_precise_400s(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let cases: Vec<(String, &str)> = vec![
        ("{\"alert_type\": \"PodCrashLooping\", \"data\": ".into(), "invalid JSON: EOF while parsing a value at line 1 column"),
        ("{\"alert_type\": \"X\" \"data\": 1}".into(), "invalid JSON: expected `,` or `}` at line 1 column 20"),
        (String::new(), "the request body is empty"),
        (json!({"alert_type": "PodCrashLooping"}).to_string(), "missing field `data`"),
        (json!({"data": "x"}).to_string(), "missing field `alert_type`"),
        (json!({"alert_type": "PodCrashLooping", "data": "x", "runbok": "y"}).to_string(), "unknown field `runbok`"),
        (json!({"alert_type": 7, "data": "x"}).to_string(), "invalid type: integer `7`, expected a string"),
        (json!({"alert_type": "  ", "data": "x"}).to_string(), "alert type must not be empty"),
        (json!({"alert_type": "PodCrashLooping", "data": ""}).to_string(), "alert data must not be empty"),
        (json!({"alert_type": "PodCrashLooping", "data": null}).to_string(), "data must not be null"),
        (json!({"alert_type": "Unheard", "data": "x"}).to_string(), "no chain handles alert type \"Unheard\""),
        (json!({"alert_type": "PodCrashLooping", "chain": "nope", "data": "x"}).to_string(), "unknown chain \"nope\""),
        (json!({"alert_type": "PodCrashLooping", "data": "x", "runbook_url": "file:///etc/passwd"}).to_string(), "must be an http:// or https:// URL"),
        (json!({"alert_type": "PodCrashLooping", "data": "x", "mcp_selection": {"servers": [{"name": "kubernetes"}, {"name": "grafana"}]}}).to_string(), "MCP selection: servers[1].name: unknown MCP server \"grafana\""),
        (json!({"alert_type": "PodCrashLooping", "data": "x", "mcp_selection": {"servers": []}}).to_string(), "MCP selection: servers: at least one MCP server is required"),
        (json!({"alert_type": "PodCrashLooping", "data": "x", "mcp_selection": {"servers": [{"name": "kubernetes"}, {"name": "kubernetes"}]}}).to_string(), "MCP selection: servers[1].name: MCP server \"kubernetes\" is listed twice"),
        (json!({"alert_type": "PodCrashLooping", "data": "x", "mcp_selection": {"servers": [{"tools": []}]}}).to_string(), "missing field `name`"),
    ];
    for (body, expected) in cases {
        let (status, answer) = app.post_raw("/api/v1/alerts", body.clone()).await;
        assert_eq!(status, 400, "{body} → {answer}");
        assert_eq!(answer["error"], "bad_request");
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.contains(expected),
            "{body}: {message:?} lacks {expected:?}"
        );
    }
    let page = store.list_sessions(&Default::default()).await.unwrap();
    assert_eq!(page.total, 0, "a rejected alert created a session");
}

async fn oversized_alerts_get_413(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let limit = tarsy_core::MAX_ALERT_DATA_BYTES;
    // Exactly at the limit is fine...
    let (status, body) = app
        .post_json(
            "/api/v1/alerts",
            &json!({"alert_type": "PodCrashLooping", "data": "a".repeat(limit)}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // ...one byte more is not.
    let (status, body) = app
        .post_json(
            "/api/v1/alerts",
            &json!({"alert_type": "PodCrashLooping", "data": "a".repeat(limit + 1)}),
        )
        .await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "alert data is {} bytes; the limit is {limit} bytes",
            limit + 1
        )
    );
    // A body far beyond any alert is refused on its declared length, before
    // it is sent (raw HTTP: a client still writing would see a broken pipe).
    let (status, body) = app
        .declare_huge_body("POST", "/api/v1/alerts", 4 * limit)
        .await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("request body exceeds"),
        "{body}"
    );
    assert_eq!(
        store
            .list_sessions(&Default::default())
            .await
            .unwrap()
            .total,
        1
    );
}

async fn author_comes_from_trusted_headers_only(store: Store) {
    let trusting = TestApp::start_with(
        store.clone(),
        ApiConfig {
            trust_forwarded_identity: true,
            ..ApiConfig::default()
        },
        |api| api,
    )
    .await;
    let naive = TestApp::start(store.clone()).await;
    let alert = json!({"alert_type": "PodCrashLooping", "data": "x"}).to_string();
    let submit = |app: &TestApp, headers: Vec<(&'static str, &'static str)>| {
        let mut request = app
            .http
            .post(app.url("/api/v1/alerts"))
            .header("content-type", "application/json")
            .body(alert.clone());
        for (k, v) in headers {
            request = request.header(k, v);
        }
        async move {
            let body: Value = request.send().await.unwrap().json().await.unwrap();
            body["session_id"].as_str().unwrap().to_string()
        }
    };
    let both = vec![
        ("x-forwarded-user", "alice"),
        ("x-forwarded-email", "alice@example.com"),
    ];
    let id = submit(&trusting, both.clone()).await;
    assert_eq!(
        store.get_session(&id).await.unwrap().author.as_deref(),
        Some("alice")
    );
    let id = submit(&trusting, vec![("x-forwarded-email", "bob@example.com")]).await;
    assert_eq!(
        store.get_session(&id).await.unwrap().author.as_deref(),
        Some("bob@example.com")
    );
    let id = submit(&trusting, vec![]).await;
    assert_eq!(
        store.get_session(&id).await.unwrap().author.as_deref(),
        Some("api-client")
    );
    // Without the flag a client cannot claim a name.
    let id = submit(&naive, both).await;
    assert_eq!(
        store.get_session(&id).await.unwrap().author.as_deref(),
        Some("api-client")
    );
}

// ------------------------------------------------------------ sessions

async fn session_list_filters_and_pages(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let kind = if i % 2 == 0 {
            "PodCrashLooping"
        } else {
            "HighLatency"
        };
        let (_, body) = app
            .post_json(
                "/api/v1/alerts",
                &json!({"alert_type": kind, "data": format!("alert number {i} on node-{i}")}),
            )
            .await;
        ids.push(body["session_id"].as_str().unwrap().to_string());
    }
    complete(&store, &ids[0]).await;
    store
        .update_session_status(&ids[1], SessionStatus::InProgress)
        .await
        .unwrap();

    let (status, all) = app.get("/api/v1/sessions").await;
    assert_eq!(status, 200);
    assert_eq!(
        all["pagination"],
        json!({"page": 1, "page_size": 20, "total_items": 5, "total_pages": 1})
    );
    assert_eq!(all["sessions"].as_array().unwrap().len(), 5);
    assert!(
        all["sessions"][0].get("alert_data").is_none(),
        "list rows carry no alert data"
    );

    let (_, crash) = app.get("/api/v1/sessions?alert_type=PodCrashLooping").await;
    assert_eq!(crash["pagination"]["total_items"], 3);
    let (_, done) = app
        .get("/api/v1/sessions?status=completed,in_progress")
        .await;
    let mut got: Vec<&str> = done["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    got.sort();
    let mut want = vec![ids[0].as_str(), ids[1].as_str()];
    want.sort();
    assert_eq!(got, want);
    let (_, found) = app.get("/api/v1/sessions?q=NODE-3").await;
    assert_eq!(found["pagination"]["total_items"], 1);
    assert_eq!(found["sessions"][0]["id"], ids[3].as_str());

    let (_, page2) = app.get("/api/v1/sessions?page=2&page_size=2").await;
    assert_eq!(
        page2["pagination"],
        json!({"page": 2, "page_size": 2, "total_items": 5, "total_pages": 3})
    );
    assert_eq!(page2["sessions"].as_array().unwrap().len(), 2);
    let (_, page3) = app.get("/api/v1/sessions?page=3&page_size=2").await;
    assert_eq!(page3["sessions"].as_array().unwrap().len(), 1);

    for (query, expected) in [
        ("status=finished", "unknown session status \"finished\""),
        ("page=0", "page must be an integer from 1"),
        (
            "page_size=500",
            "page_size must be an integer from 1 to 100",
        ),
        ("page=two", "page must be an integer"),
        ("sort=asc", "sort must be one of created_at, started_at"),
        ("order=up", "order must be asc or desc"),
        (
            "needs_attention=maybe",
            "needs_attention must be true or false",
        ),
        ("color=red", "unknown field `color`"),
        (
            "include_deleted=maybe",
            "include_deleted must be true or false",
        ),
        // Present means given: no empty or padded value stands for the default.
        ("order=", "order must be asc or desc"),
        ("sort=", "sort must be one of"),
        ("needs_attention=", "needs_attention must be true or false"),
        ("include_deleted=1", "include_deleted must be true or false"),
        ("page=%202", "page must be an integer"),
        ("status=pending,,failed", "unknown session status \"\""),
        ("status=", "unknown session status \"\""),
    ] {
        let (status, body) = app.get(&format!("/api/v1/sessions?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains(expected),
            "{query}: {body}"
        );
    }
}

async fn session_detail_nests_stages_and_executions(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let (status, body) = app.get("/api/v1/sessions/does-not-exist").await;
    assert_eq!(status, 404);
    assert_eq!(body["error"], "not_found");

    let id = app.submit().await;
    let s1 = stage(&store, &id, 0, "investigate").await;
    let s2 = stage(&store, &id, 1, "investigate - Synthesis").await;
    let b = execution(&store, &id, &s1, "KubernetesAgent-2", 2).await;
    let a = execution(&store, &id, &s1, "KubernetesAgent-1", 1).await;
    let c = execution(&store, &id, &s2, "SynthesisAgent", 1).await;
    store
        .update_agent_execution_status(&a, ExecutionStatus::Completed, None)
        .await
        .unwrap();
    let (status, detail) = app.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["id"], id.as_str());
    assert_eq!(detail["chat_available"], false);
    assert_eq!(detail["chat"], Value::Null);
    let stages = detail["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[0]["id"], s1.as_str());
    assert_eq!(stages[0]["stage_name"], "investigate");
    let execs: Vec<&str> = stages[0]["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        execs,
        vec![a.as_str(), b.as_str()],
        "executions in launch order"
    );
    assert_eq!(stages[0]["executions"][0]["status"], "completed");
    assert_eq!(stages[1]["executions"][0]["id"], c.as_str());
    assert_eq!(detail["warnings"], json!([]));

    // A runbook the agent could not use degraded the investigation: it is
    // among the session's warnings; other errors are not.
    for (seq, kind) in [(1, "runbook_unavailable"), (2, "some_other_error")] {
        store
            .create_timeline_event(NewTimelineEvent {
                scope: scope(&id, &s1, &a),
                sequence_number: seq,
                event_type: TimelineEventType::Error,
                status: TimelineEventStatus::Completed,
                content: format!("{kind} happened"),
                metadata: json!({"kind": kind}),
            })
            .await
            .unwrap();
    }
    let (_, detail) = app.get(&format!("/api/v1/sessions/{id}")).await;
    let warnings = detail["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{detail}");
    assert_eq!(warnings[0]["kind"], "runbook_unavailable");
    assert_eq!(warnings[0]["execution_id"], a.as_str());
}

async fn timeline_is_ordered_and_404s(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let (status, _) = app.get("/api/v1/sessions/nope/timeline").await;
    assert_eq!(status, 404);
    let id = app.submit().await;
    let (status, empty) = app.get(&format!("/api/v1/sessions/{id}/timeline")).await;
    assert_eq!((status, empty), (200, json!([])));
    let st = stage(&store, &id, 0, "investigate").await;
    let ex = execution(&store, &id, &st, "KubernetesAgent", 1).await;
    for (seq, kind, text) in [
        (1, TimelineEventType::LlmThinking, "looking at pods"),
        (2, TimelineEventType::LlmToolCall, "pods_list"),
        (3, TimelineEventType::FinalAnalysis, "OOMKilled"),
    ] {
        store
            .create_timeline_event(NewTimelineEvent {
                scope: scope(&id, &st, &ex),
                sequence_number: seq,
                event_type: kind,
                status: TimelineEventStatus::Completed,
                content: text.into(),
                metadata: json!({"seq": seq}),
            })
            .await
            .unwrap();
    }
    let (status, events) = app.get(&format!("/api/v1/sessions/{id}/timeline")).await;
    assert_eq!(status, 200);
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec!["llm_thinking", "llm_tool_call", "final_analysis"]
    );
    assert_eq!(events[2]["content"], "OOMKilled");
    assert_eq!(events[2]["stage_id"], st.as_str());
    assert_eq!(events[2]["execution_id"], ex.as_str());
}

// ------------------------------------------------------------ trace

async fn trace_levels(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let id = app.submit().await;
    let other = app.submit().await;
    let st = stage(&store, &id, 0, "investigate").await;
    let ex = execution(&store, &id, &st, "KubernetesAgent", 1).await;
    let sc = scope(&id, &st, &ex);
    let mut last = String::new();
    for (seq, role, content) in [
        (1, MessageRole::System, "you are an SRE"),
        (2, MessageRole::User, "pod api-7 restarts"),
    ] {
        last = store
            .create_message(NewMessage {
                scope: sc.clone(),
                sequence_number: seq,
                role,
                content: content.into(),
                tool_calls: vec![],
                tool_call_id: None,
                tool_name: None,
            })
            .await
            .unwrap()
            .id;
    }
    let iteration = store
        .create_llm_interaction(NewLlmInteraction {
            scope: sc.clone(),
            interaction_type: LlmInteractionType::Iteration,
            provider: "gemini".into(),
            model: "gemini-2.5-pro".into(),
            last_message_id: Some(last.clone()),
            llm_request: json!({"tools": 3}),
            llm_response: json!({"tool_calls": 1}),
            thinking_content: Some("check pods".into()),
            response_text: String::new(),
            usage: None,
            cost_usd: None,
            duration_ms: 12,
            error_message: None,
        })
        .await
        .unwrap()
        .id;
    // A message stored after the call must not show in its conversation.
    store
        .create_message(NewMessage {
            scope: sc.clone(),
            sequence_number: 3,
            role: MessageRole::Assistant,
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "kubernetes.pods_list".into(),
                arguments: "{}".into(),
            }],
            tool_call_id: None,
            tool_name: None,
        })
        .await
        .unwrap();
    let summary = store
        .create_llm_interaction(NewLlmInteraction {
            scope: RecordScope {
                session_id: id.clone(),
                stage_id: None,
                execution_id: None,
            },
            interaction_type: LlmInteractionType::ExecutiveSummary,
            provider: "gemini".into(),
            model: "gemini-2.5-flash".into(),
            last_message_id: None,
            llm_request: json!({"messages": [
                {"role": "system", "content": "summarise"},
                {"role": "user", "content": "the pod ran out of memory"},
            ]}),
            llm_response: json!({}),
            thinking_content: None,
            response_text: "OOM".into(),
            usage: None,
            cost_usd: None,
            duration_ms: 3,
            error_message: None,
        })
        .await
        .unwrap()
        .id;
    let mcp = store
        .create_mcp_interaction(NewMcpInteraction {
            scope: sc.clone(),
            interaction_type: McpInteractionType::ToolCall,
            server_name: "kubernetes".into(),
            tool_name: "pods_list".into(),
            tool_arguments: json!({"namespace": "prod"}),
            tool_result: json!({"text": "api-7 CrashLoopBackOff"}),
            available_tools: json!([]),
            duration_ms: 5,
            error_message: None,
        })
        .await
        .unwrap()
        .id;

    let (status, trace) = app.get(&format!("/api/v1/sessions/{id}/trace")).await;
    assert_eq!(status, 200, "{trace}");
    assert_eq!(trace["stages"][0]["stage_id"], st.as_str());
    let group = &trace["stages"][0]["executions"][0];
    assert_eq!(group["execution_id"], ex.as_str());
    assert_eq!(group["agent_name"], "KubernetesAgent");
    assert_eq!(group["llm_interactions"][0]["id"], iteration.as_str());
    assert_eq!(group["mcp_interactions"][0]["id"], mcp.as_str());
    assert_eq!(trace["session_interactions"][0]["id"], summary.as_str());
    assert_eq!(
        trace["session_interactions"][0]["interaction_type"],
        "executive_summary"
    );

    let (status, detail) = app
        .get(&format!("/api/v1/sessions/{id}/trace/llm/{iteration}"))
        .await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["conversation_source"], "messages");
    assert_eq!(
        detail["conversation"],
        json!([
            {"role": "system", "content": "you are an SRE"},
            {"role": "user", "content": "pod api-7 restarts"},
        ])
    );
    assert_eq!(detail["thinking_content"], "check pods");
    let (_, detail) = app
        .get(&format!("/api/v1/sessions/{id}/trace/llm/{summary}"))
        .await;
    assert_eq!(detail["conversation_source"], "inline");
    assert_eq!(
        detail["conversation"][1]["content"],
        "the pod ran out of memory"
    );
    assert_eq!(detail["response_text"], "OOM");

    let (status, detail) = app
        .get(&format!("/api/v1/sessions/{id}/trace/mcp/{mcp}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(detail["tool_arguments"], json!({"namespace": "prod"}));
    assert_eq!(detail["tool_result"]["text"], "api-7 CrashLoopBackOff");

    // Unknown ids, and ids of another session, are 404s.
    for path in [
        format!("/api/v1/sessions/{other}/trace/llm/{iteration}"),
        format!("/api/v1/sessions/{other}/trace/mcp/{mcp}"),
        format!("/api/v1/sessions/{id}/trace/llm/nope"),
        format!("/api/v1/sessions/{id}/trace/mcp/{iteration}"),
        format!("/api/v1/sessions/nope/trace/llm/{iteration}"),
        "/api/v1/sessions/nope/trace".to_string(),
    ] {
        let (status, body) = app.get(&path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"], "not_found");
    }
}

// ------------------------------------------------------------ cancel and chat

async fn cancel_outcomes(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let (status, _) = app
        .post_json("/api/v1/sessions/nope/cancel", &json!({}))
        .await;
    assert_eq!(status, 404);

    let running = app.submit().await;
    store
        .update_session_status(&running, SessionStatus::InProgress)
        .await
        .unwrap();
    let (status, body) = app
        .post_json(&format!("/api/v1/sessions/{running}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelled"], "session");
    assert_eq!(body["status"], "cancelling");
    assert_eq!(
        store.get_session(&running).await.unwrap().status,
        SessionStatus::Cancelling
    );

    let done = app.submit().await;
    complete(&store, &done).await;
    let (status, body) = app
        .post_json(&format!("/api/v1/sessions/{done}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["message"], "session is completed: nothing to cancel");

    // A terminal session with a chat answer running: the answer is cancelled.
    let (status, chat) = app
        .post_json(
            &format!("/api/v1/sessions/{done}/chat/messages"),
            &json!({"content": "why?"}),
        )
        .await;
    assert_eq!(status, 202);
    let (status, body) = app
        .post_json(&format!("/api/v1/sessions/{done}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelled"], "chat");
    assert_eq!(body["stage_id"], chat["stage_id"]);
    let stage = store
        .get_stage(chat["stage_id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(stage.status, ExecutionStatus::Cancelled);
}

async fn scoring_requests(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let path = |id: &str| format!("/api/v1/sessions/{id}/score");
    let (status, body) = app.post_json(&path("nope"), &json!({})).await;
    assert_eq!((status, body["error"].as_str()), (404, Some("not_found")));

    let running = app.submit().await;
    let (status, body) = app.post_json(&path(&running), &json!({})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["message"],
        "session is pending: only a finished investigation is scored"
    );

    let done = app.submit().await;
    complete(&store, &done).await;
    let (status, body) = app.post_json(&path(&done), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["session_id"], done.as_str());
    // While the judge works, another request is refused and the session
    // says it is being scored.
    let (status, body) = app.post_json(&path(&done), &json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["message"],
        format!("session {done:?} is being scored already; wait for the score")
    );
    let (_, detail) = app.get(&format!("/api/v1/sessions/{done}")).await;
    assert_eq!(
        detail["score"],
        json!({"status": "in_progress", "score": null, "failure_tags": []})
    );
    let (status, history) = app.get(&format!("/api/v1/sessions/{done}/scores")).await;
    assert_eq!(status, 200);
    assert_eq!(history["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(history["attempts"][0]["status"], "in_progress");
    let (status, _) = app.get("/api/v1/sessions/nope/scores").await;
    assert_eq!(status, 404);
}

async fn chat_lifecycle(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let path = |id: &str| format!("/api/v1/sessions/{id}/chat/messages");
    let (status, _) = app
        .post_json(&path("nope"), &json!({"content": "hi"}))
        .await;
    assert_eq!(status, 404);

    let id = app.submit().await;
    // Pending, in progress, cancelled: no chat.
    let (status, body) = app.post_json(&path(&id), &json!({"content": "hi"})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("session is pending"),
        "{body}"
    );
    store
        .update_session_status(&id, SessionStatus::Cancelled)
        .await
        .unwrap();
    let (status, _) = app.post_json(&path(&id), &json!({"content": "hi"})).await;
    assert_eq!(status, 409);

    let id = app.submit().await;
    complete(&store, &id).await;
    for (body, expected) in [
        (json!({"content": "   "}), "content must not be empty"),
        (json!({"text": "hi"}), "unknown field `text`"),
        (json!({}), "missing field `content`"),
    ] {
        let (status, answer) = app.post_json(&path(&id), &body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(expected),
            "{answer}"
        );
    }
    let (status, answer) = app
        .post_json(&path(&id), &json!({"content": "x".repeat(100_001)}))
        .await;
    assert_eq!(status, 413, "{answer}");

    let (status, first) = app
        .post_json(&path(&id), &json!({"content": "  why did it crash?  "}))
        .await;
    assert_eq!(status, 202, "{first}");
    let chat_id = first["chat_id"].as_str().unwrap().to_string();
    assert!(
        first["message_id"].is_string() && first["stage_id"].is_string(),
        "{first}"
    );
    let stored = store
        .get_chat_user_message(first["message_id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(stored.content, "why did it crash?");
    assert_eq!(stored.author.as_deref(), Some("api-client"));

    // One message at a time; the refused one leaves nothing behind.
    let (status, busy) = app
        .post_json(&path(&id), &json!({"content": "and now?"}))
        .await;
    assert_eq!(status, 409, "{busy}");
    assert!(
        busy["message"]
            .as_str()
            .unwrap()
            .contains("still answering"),
        "{busy}"
    );
    assert_eq!(
        store.list_chat_user_messages(&chat_id).await.unwrap().len(),
        1
    );

    let (_, detail) = app.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(detail["chat_available"], true);
    assert_eq!(detail["chat"]["chat_id"], chat_id.as_str());
    assert_eq!(detail["chat"]["message_count"], 1);
    assert_eq!(detail["chat"]["active_stage_id"], first["stage_id"]);

    store
        .update_stage_status(
            first["stage_id"].as_str().unwrap(),
            ExecutionStatus::Completed,
            None,
        )
        .await
        .unwrap();
    let (status, second) = app
        .post_json(&path(&id), &json!({"content": "and now?"}))
        .await;
    assert_eq!(status, 202, "{second}");
    assert_eq!(second["chat_id"], chat_id.as_str(), "one chat per session");
    assert_ne!(second["stage_id"], first["stage_id"]);

    // chat.created once, chat.user_message per accepted message, in order.
    let events = store
        .events_since(&format!("session:{id}"), 0, 100)
        .await
        .unwrap();
    let types: Vec<&str> = events
        .iter()
        .map(|e| e.payload["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        vec!["chat.created", "chat.user_message", "chat.user_message"]
    );
    assert_eq!(events[1].payload["content"], "why did it crash?");
    assert_eq!(events[2].payload["stage_id"], second["stage_id"]);

    // A chain without chat.
    let (_, quiet) = app
        .post_json(
            "/api/v1/alerts",
            &json!({"alert_type": "NoChat", "data": "x"}),
        )
        .await;
    let quiet = quiet["session_id"].as_str().unwrap().to_string();
    complete(&store, &quiet).await;
    let (status, body) = app
        .post_json(&path(&quiet), &json!({"content": "hi"}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["message"],
        "chat is not enabled for chain \"quiet-chain\""
    );
}

// ------------------------------------------------------------ health and misc

struct Warnings;
impl SystemWarningsSource for Warnings {
    fn warnings(&self) -> Vec<SystemWarning> {
        vec![SystemWarning {
            id: "w1".into(),
            category: "mcp_health".into(),
            message: "MCP server prometheus is unreachable".into(),
            details: "connection refused".into(),
            server_id: Some("prometheus".into()),
            created_at: Utc::now(),
        }]
    }
}

struct Mcp;
impl McpHealthSource for Mcp {
    fn statuses(&self) -> BTreeMap<String, McpServerHealth> {
        BTreeMap::from([
            (
                "kubernetes".to_string(),
                McpServerHealth {
                    healthy: true,
                    checked_at: Utc::now(),
                    error: None,
                },
            ),
            (
                "prometheus".to_string(),
                McpServerHealth {
                    healthy: false,
                    checked_at: Utc::now(),
                    error: Some("connection refused".into()),
                },
            ),
        ])
    }
}

async fn health_reports_database_mcp_and_warnings(store: Store) {
    let plain = TestApp::start(store.clone()).await;
    let (status, body) = plain.get("/health").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "healthy");
    assert_eq!(body["database"]["status"], "ok");
    assert_eq!(body["warnings"], json!([]));

    let wired = TestApp::start_with(store.clone(), ApiConfig::default(), |api| {
        api.with_warnings(Arc::new(Warnings))
            .with_mcp_health(Arc::new(Mcp))
    })
    .await;
    let (status, body) = wired.get("/health").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "degraded");
    assert_eq!(body["mcp"]["healthy"], false);
    assert_eq!(body["mcp"]["servers"]["kubernetes"]["healthy"], true);
    assert_eq!(
        body["mcp"]["servers"]["prometheus"]["error"],
        "connection refused"
    );
    assert_eq!(body["warnings"][0]["server_id"], "prometheus");
    assert_eq!(
        body["warnings"][0]["message"],
        "MCP server prometheus is unreachable"
    );

    // A database that is gone makes the API unhealthy (503).
    store.close().await;
    let (status, body) = wired.get("/health").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unhealthy");
    assert_eq!(body["database"]["status"], "error");
}

/// A warning any process raised through the store (a runner pod whose
/// runbook fetch failed) is on every API replica's `/health` until cleared.
async fn health_shows_warnings_raised_through_the_store(store: Store) {
    let app = TestApp::start(store.clone()).await;
    store
        .raise_system_warning(
            "runbook:https://github.com/acme/runbooks/blob/main/oom.md",
            "runbook",
            "Runbook https://github.com/acme/runbooks/blob/main/oom.md could not be fetched",
            "HTTP status client error (404 Not Found)",
            std::time::Duration::from_secs(3600),
        )
        .await
        .unwrap();
    let (status, body) = app.get("/health").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "degraded", "{body}");
    assert_eq!(body["warnings"][0]["category"], "runbook");
    assert!(
        body["warnings"][0]["details"]
            .as_str()
            .unwrap()
            .contains("404")
    );
    store
        .clear_system_warning("runbook:https://github.com/acme/runbooks/blob/main/oom.md")
        .await
        .unwrap();
    let (_, body) = app.get("/health").await;
    assert_eq!(body["status"], "healthy", "{body}");
}

/// Both modes serve the document the code generates (the one the dashboard's
/// types come from).
async fn openapi_document_is_served(store: Store) {
    let app = TestApp::start(store).await;
    let r = app
        .http
        .get(app.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let served: Value = r.json().await.unwrap();
    let generated: Value = serde_json::from_str(&tarsy_api::openapi_json()).unwrap();
    assert_eq!(served, generated);
    assert_eq!(served["info"]["title"], "TARSy API");
    assert!(served["paths"]["/api/v1/sessions/{id}"]["get"].is_object());
}

async fn unknown_routes_are_json_404s(store: Store) {
    let app = TestApp::start(store).await;
    let (status, body) = app.get("/api/v1/nothing-here").await;
    assert_eq!(status, 404);
    assert_eq!(body["error"], "not_found");
    assert_eq!(body["message"], "no route for /api/v1/nothing-here");
}

on_both_backends!(
    alert_submission_creates_a_pending_session,
    malformed_alerts_get_precise_400s,
    oversized_alerts_get_413,
    author_comes_from_trusted_headers_only,
    session_list_filters_and_pages,
    session_detail_nests_stages_and_executions,
    timeline_is_ordered_and_404s,
    trace_levels,
    cancel_outcomes,
    scoring_requests,
    chat_lifecycle,
    health_reports_database_mcp_and_warnings,
    health_shows_warnings_raised_through_the_store,
    unknown_routes_are_json_404s,
    openapi_document_is_served,
    nul_in_any_input_is_never_a_500,
    every_error_is_json_and_names_the_problem,
);

/// NUL (which Postgres text cannot hold) in alert data, chat, query
/// parameters and path ids: stored visibly replaced, or a 404 — never a 500.
async fn nul_in_any_input_is_never_a_500(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let (status, body) = app
        .post_json(
            "/api/v1/alerts",
            &json!({"alert_type": "PodCrashLooping", "data": "a\u{0}b"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let id = body["session_id"].as_str().unwrap().to_string();
    let (status, detail) = app.get(&format!("/api/v1/sessions/{id}")).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["alert_data"], "a\u{FFFD}b");

    for param in ["q", "author", "alert_type", "chain_id"] {
        let (status, body) = app.get(&format!("/api/v1/sessions?{param}=%00")).await;
        assert_eq!(status, 200, "{param}: {body}");
    }
    for path in [
        "/api/v1/sessions/%00".to_string(),
        "/api/v1/sessions/%00/timeline".to_string(),
        "/api/v1/sessions/a%00b/trace".to_string(),
        format!("/api/v1/sessions/{id}/trace/llm/%00"),
        format!("/api/v1/sessions/{id}/trace/mcp/x%00y"),
    ] {
        let (status, body) = app.get(&path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"], "not_found", "{path}: {body}");
    }
    let (status, body) = app
        .post_json("/api/v1/sessions/a%00b/cancel", &json!({}))
        .await;
    assert_eq!(status, 404, "{body}");
}

/// Wrong method, undecodable path, wrong JSON shape, misspelt MCP
/// selection, a huge alert type: each a precise `{error, message}`.
async fn every_error_is_json_and_names_the_problem(store: Store) {
    let app = TestApp::start(store.clone()).await;

    let r = app
        .http
        .delete(app.url("/api/v1/alerts"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let body: Value = r.json().await.expect("a JSON body on 405");
    assert_eq!(body["error"], "method_not_allowed");
    assert!(
        body["message"].as_str().unwrap().contains("DELETE"),
        "{body}"
    );

    let r = app
        .http
        .get(app.url("/api/v1/sessions/%ff"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "bad_request", "{body}");

    let (status, body) = app.post_raw("/api/v1/alerts", "[1,2]").await;
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("must be a JSON object")
            && body["message"].as_str().unwrap().contains("an array"),
        "{body}"
    );

    for (selection, named) in [
        (
            json!({"servers": [{"name": "kubernetes", "tool": ["pods_list"]}]}),
            "tool",
        ),
        (
            json!({"servers": [{"name": "kubernetes"}], "native_tool": {"google_search": true}}),
            "native_tool",
        ),
    ] {
        let (status, body) = app
            .post_json(
                "/api/v1/alerts",
                &json!({"alert_type": "PodCrashLooping", "data": "x", "mcp_selection": selection}),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains(named),
            "the message names the field {named}: {body}"
        );
    }

    let long = "T".repeat(10_000);
    let (status, body) = app
        .post_json("/api/v1/alerts", &json!({"alert_type": long, "data": "x"}))
        .await;
    assert_eq!(status, 400);
    let message = body["message"].as_str().unwrap();
    assert!(
        message.len() < 500,
        "the alert type is not echoed whole: {} chars",
        message.len()
    );
    assert!(message.contains("10000 characters"), "{message}");
}
