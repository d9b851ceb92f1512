//! What sessions cost, on both backends: each interaction keeps its
//! estimate; a session's, an execution's and the usage page's sums are the
//! sums of their calls (a retried insert adds nothing, a call without a
//! price makes the cost partial), and the per-model totals behind the cost
//! metric survive the purge of their sessions.

mod common;

use chrono::{Duration, Utc};
use common::{execution, scope, seeded, session, stage};
use serde_json::json;
use tarsy_core::{
    Cost, LlmInteractionType, NewLlmInteraction, RecordScope, SessionStatus, TokenUsage,
};
use tarsy_store::{NewSession, Store, UsageFilter, UsageRank};

on_both_backends!(
    a_session_costs_the_sum_of_its_calls,
    the_usage_summary_sums_a_window_by_model_and_dimension,
    cost_totals_outlive_their_sessions,
    a_scope_spends_its_sessions_of_the_day_and_holds_pending_ones,
);

fn call(
    scope: RecordScope,
    model: &str,
    input: i64,
    output: i64,
    cost: Option<f64>,
) -> NewLlmInteraction {
    NewLlmInteraction {
        scope,
        interaction_type: LlmInteractionType::Iteration,
        provider: format!("{model}-provider"),
        model: model.into(),
        last_message_id: None,
        llm_request: json!({}),
        llm_response: json!({}),
        thinking_content: None,
        response_text: "ok".into(),
        usage: Some(TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            thinking_tokens: 0,
            cached_input_tokens: input / 2,
        }),
        cost_usd: cost,
        duration_ms: 10,
        error_message: None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

async fn a_session_costs_the_sum_of_its_calls(store: Store) {
    let (stage_id, first) = seeded(&store, "s1").await;
    let second = store
        .create_agent_execution(execution("s1", &stage_id, "LogAgent", 2))
        .await
        .unwrap()
        .id;
    assert_eq!(store.session_cost("s1").await.unwrap(), None);

    let stored = store
        .create_llm_interaction(call(
            scope("s1", &stage_id, &first),
            "m",
            1000,
            100,
            Some(0.01),
        ))
        .await
        .unwrap();
    // The estimate and the cached tokens are kept with the call.
    assert_eq!(stored.cost_usd, Some(0.01));
    assert_eq!(stored.usage.unwrap().cached_input_tokens, 500);
    store
        .create_llm_interaction(call(
            scope("s1", &stage_id, &first),
            "m",
            2000,
            200,
            Some(0.02),
        ))
        .await
        .unwrap();
    store
        .create_llm_interaction(call(
            scope("s1", &stage_id, &second),
            "m",
            500,
            50,
            Some(0.005),
        ))
        .await
        .unwrap();
    // The executive summary's call belongs to the session alone.
    let mut summary = call(
        RecordScope {
            session_id: "s1".into(),
            stage_id: None,
            execution_id: None,
        },
        "m",
        100,
        10,
        Some(0.001),
    );
    summary.interaction_type = LlmInteractionType::ExecutiveSummary;
    store.create_llm_interaction(summary).await.unwrap();

    let cost = store.session_cost("s1").await.unwrap().unwrap();
    assert!(close(cost.usd, 0.036), "{cost:?}");
    assert_eq!(
        (cost.calls, cost.unpriced_calls, cost.partial),
        (4, 0, false)
    );
    assert_eq!(cost.tokens.total_tokens, 1100 + 2200 + 550 + 110);
    assert_eq!(cost.tokens.cached_input_tokens, 500 + 1000 + 250 + 50);
    let by_execution = store.execution_costs("s1").await.unwrap();
    assert_eq!(by_execution.len(), 2);
    assert!(close(by_execution[&first].usd, 0.03));
    assert_eq!(by_execution[&first].calls, 2);
    assert!(close(by_execution[&second].usd, 0.005));

    // A model without a price: no estimate, and the cost says it is partial
    // (never a silent zero).
    store
        .create_llm_interaction(call(scope("s1", &stage_id, &second), "x", 800, 80, None))
        .await
        .unwrap();
    let cost = store.session_cost("s1").await.unwrap().unwrap();
    assert!(close(cost.usd, 0.036));
    assert_eq!(
        (cost.calls, cost.unpriced_calls, cost.partial),
        (5, 1, true)
    );
    assert!(store.execution_costs("s1").await.unwrap()[&second].partial);
    // A failed call that used no tokens is not missing a price.
    let mut failed = call(scope("s1", &stage_id, &first), "x", 0, 0, None);
    failed.usage = None;
    failed.error_message = Some("boom".into());
    store.create_llm_interaction(failed).await.unwrap();
    assert_eq!(
        store
            .session_cost("s1")
            .await
            .unwrap()
            .unwrap()
            .unpriced_calls,
        1
    );

    // The list carries each session's cost.
    store.create_session(session("s2")).await.unwrap();
    let page = store.list_sessions(&Default::default()).await.unwrap();
    let by_id = |id: &str| page.sessions.iter().find(|s| s.id == id).unwrap().cost;
    assert!(close(by_id("s1").unwrap().usd, 0.036));
    assert_eq!(by_id("s2"), None);
}

async fn the_usage_summary_sums_a_window_by_model_and_dimension(store: Store) {
    let now = Utc::now();
    let filter = |rank| UsageFilter {
        from: now - Duration::hours(1),
        to: now + Duration::hours(1),
        rank,
    };
    // Two alert types, two chains, two scopes; a session without calls.
    for (id, alert_type, chain, scope_name) in [
        ("a", "PodCrash", "k8s", "team-a"),
        ("b", "PodCrash", "k8s", "team-b"),
        ("c", "DiskFull", "storage", "team-a"),
        ("idle", "DiskFull", "storage", "team-a"),
    ] {
        store
            .create_session(NewSession {
                alert_type: alert_type.into(),
                chain_id: chain.into(),
                memory_scope: Some(scope_name.into()),
                ..session(id)
            })
            .await
            .unwrap();
    }
    for (id, calls) in [
        (
            "a",
            vec![("pro", 1000, Some(0.05)), ("flash", 100, Some(0.001))],
        ),
        ("b", vec![("pro", 3000, Some(0.15))]),
        (
            "c",
            vec![("flash", 50_000, Some(0.002)), ("local", 10, None)],
        ),
    ] {
        let st = store.create_stage(stage(id, 0)).await.unwrap();
        let ex = store
            .create_agent_execution(execution(id, &st.id, "Agent", 1))
            .await
            .unwrap();
        for (model, input, cost) in calls {
            store
                .create_llm_interaction(call(scope(id, &st.id, &ex.id), model, input, 0, cost))
                .await
                .unwrap();
        }
    }

    let usage = store.usage_summary(&filter(UsageRank::Cost)).await.unwrap();
    assert_eq!(usage.sessions, 4);
    assert!(close(usage.cost.usd, 0.203), "{:?}", usage.cost);
    assert_eq!((usage.cost.calls, usage.cost.unpriced_calls), (5, 1));
    assert!(usage.cost.partial);
    let models: Vec<(&str, i64, f64)> = usage
        .by_model
        .iter()
        .map(|g| (g.key.as_str(), g.sessions, g.cost.usd))
        .collect();
    assert_eq!(models.len(), 3);
    assert_eq!((models[0].0, models[0].1), ("pro", 2));
    assert!(close(models[0].2, 0.2));
    assert_eq!((models[1].0, models[1].1), ("flash", 2));
    assert_eq!(usage.by_model[2].cost.unpriced_calls, 1);
    assert_eq!(usage.by_model[0].provider.as_deref(), Some("pro-provider"));
    let group = |groups: &[tarsy_store::UsageGroup], key: &str| -> (i64, f64) {
        let g = groups.iter().find(|g| g.key == key).unwrap();
        (g.sessions, g.cost.usd)
    };
    // Sessions are counted from the sessions, calls or not.
    let (n, usd) = group(&usage.by_alert_type, "DiskFull");
    assert_eq!(n, 2);
    assert!(close(usd, 0.002));
    let (n, usd) = group(&usage.by_chain, "k8s");
    assert_eq!(n, 2);
    assert!(close(usd, 0.201));
    let (n, usd) = group(&usage.by_scope, "team-a");
    assert_eq!(n, 3);
    assert!(close(usd, 0.053));
    assert_eq!(usage.by_alert_type[0].key, "PodCrash", "costliest first");

    let top: Vec<&str> = usage
        .top_sessions
        .iter()
        .map(|s| s.session_id.as_str())
        .collect();
    assert_eq!(top, ["b", "a", "c"]);
    assert_eq!(usage.top_sessions[0].status, SessionStatus::Pending);
    let by_tokens = store
        .usage_summary(&filter(UsageRank::Tokens))
        .await
        .unwrap();
    assert_eq!(by_tokens.top_sessions[0].session_id, "c");

    // Outside the window: nothing.
    let before = UsageFilter {
        from: now - Duration::days(2),
        to: now - Duration::days(1),
        rank: UsageRank::Cost,
    };
    let empty = store.usage_summary(&before).await.unwrap();
    assert_eq!(
        (empty.sessions, empty.cost, empty.top_sessions.len()),
        (0, Cost::default(), 0)
    );
    // A window that ends before it starts is refused.
    let backwards = UsageFilter {
        from: now,
        to: now - Duration::hours(1),
        rank: UsageRank::Cost,
    };
    assert!(store.usage_summary(&backwards).await.is_err());
}

async fn cost_totals_outlive_their_sessions(store: Store) {
    let (stage_id, ex) = seeded(&store, "gone").await;
    store
        .create_llm_interaction(call(
            scope("gone", &stage_id, &ex),
            "pro",
            10,
            1,
            Some(0.25),
        ))
        .await
        .unwrap();
    store
        .create_llm_interaction(call(scope("gone", &stage_id, &ex), "pro", 10, 1, Some(0.5)))
        .await
        .unwrap();
    let totals = store.cost_totals().await.unwrap();
    assert_eq!(totals.len(), 1);
    assert_eq!(
        (totals[0].model.as_str(), totals[0].chain_id.as_str()),
        ("pro", session("x").chain_id.as_str())
    );
    assert!(close(totals[0].usd, 0.75));
    // Retention removes the session; the counter keeps what was spent.
    store.soft_delete_session("gone").await.unwrap();
    assert_eq!(
        store
            .purge_deleted_sessions(Utc::now() + Duration::days(1))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.session_cost("gone").await.unwrap(), None);
    assert!(close(store.cost_totals().await.unwrap()[0].usd, 0.75));
}

async fn a_scope_spends_its_sessions_of_the_day_and_holds_pending_ones(store: Store) {
    for (id, scope_name, usd) in [
        ("ns-a", "team-a", 0.5),
        ("ns-a-project", "team-a/payments", 0.25),
        ("ns-ab", "team-ab", 4.0),
        ("ns-b", "team-b", 8.0),
    ] {
        store
            .create_session(NewSession {
                memory_scope: Some(scope_name.into()),
                ..session(id)
            })
            .await
            .unwrap();
        let st = store.create_stage(stage(id, 0)).await.unwrap();
        let ex = store
            .create_agent_execution(execution(id, &st.id, "Agent", 1))
            .await
            .unwrap();
        store
            .create_llm_interaction(call(scope(id, &st.id, &ex.id), "pro", 10, 1, Some(usd)))
            .await
            .unwrap();
    }
    let today = Utc::now() - Duration::hours(1);
    // A namespace's spend counts its projects, not a namespace sharing its prefix.
    assert!(close(
        store.scope_spend_since("team-a", today).await.unwrap(),
        0.75
    ));
    assert!(close(
        store.scope_spend_since("team-b", today).await.unwrap(),
        8.0
    ));
    assert!(close(
        store.scope_spend_since("nobody", today).await.unwrap(),
        0.0
    ));
    // Sessions created before the day began do not count.
    let tomorrow = Utc::now() + Duration::hours(1);
    assert!(close(
        store.scope_spend_since("team-a", tomorrow).await.unwrap(),
        0.0
    ));

    // A pending session says why it waits, until it starts.
    store.create_session(session("waiting")).await.unwrap();
    store.hold_session("waiting", Some("spent")).await.unwrap();
    assert_eq!(
        store
            .get_session("waiting")
            .await
            .unwrap()
            .hold_reason
            .as_deref(),
        Some("spent")
    );
    let listed = store.list_sessions(&Default::default()).await.unwrap();
    let row = listed.sessions.iter().find(|s| s.id == "waiting").unwrap();
    assert_eq!(row.hold_reason.as_deref(), Some("spent"));
    // The oldest first: the four before it, then it.
    let claimed = loop {
        let next = store
            .claim_next_pending_session("pod")
            .await
            .unwrap()
            .unwrap();
        if next.id == "waiting" {
            break next;
        }
    };
    assert_eq!(claimed.hold_reason, None, "{claimed:?}");
    // A session no longer pending is not held.
    store.hold_session(&claimed.id, Some("late")).await.unwrap();
    assert_eq!(
        store.get_session(&claimed.id).await.unwrap().hold_reason,
        None
    );
}
