//! State shared by every process through the store, on both backends:
//! circuit breakers (failures from several writers add up, the circuit
//! opens at the threshold, a success closes it, scopes stay apart) and
//! system warnings (raised, refreshed, cleared, expired).

mod common;

use std::time::Duration;

use chrono::Utc;
use tarsy_store::Store;

on_both_backends!(
    failures_open_the_circuit_and_success_closes_it,
    concurrent_failures_all_count
);

async fn failures_open_the_circuit_and_success_closes_it(store: Store) {
    let names = vec!["gemini".to_string(), "openai".to_string()];
    assert!(
        store
            .breaker_states("ns-a", &names)
            .await
            .unwrap()
            .is_empty()
    );

    let minute = Duration::from_secs(60);
    let first = store
        .record_breaker_failure("ns-a", "gemini", 2, minute)
        .await
        .unwrap();
    assert_eq!(first.consecutive_failures, 1);
    assert_eq!(
        first.open_until, None,
        "below the threshold it stays closed"
    );
    let second = store
        .record_breaker_failure("ns-a", "gemini", 2, minute)
        .await
        .unwrap();
    assert_eq!(second.consecutive_failures, 2);
    let open = second.open_for(Utc::now()).expect("open at the threshold");
    assert!(open > Duration::from_secs(55) && open <= minute, "{open:?}");

    // Another namespace's provider of the same name is another circuit.
    assert!(
        store
            .breaker_states("ns-b", &names)
            .await
            .unwrap()
            .is_empty()
    );
    let states = store.breaker_states("ns-a", &names).await.unwrap();
    assert_eq!(states.len(), 1);
    assert_eq!(states[0].provider, "gemini");

    let open_now = store.open_breakers(Utc::now()).await.unwrap();
    assert_eq!(open_now.len(), 1);
    assert_eq!(open_now[0].scope, "ns-a");
    // An hour later nothing is open any more.
    let later = Utc::now() + chrono::Duration::hours(1);
    assert!(store.open_breakers(later).await.unwrap().is_empty());

    store.reset_breaker("ns-a", "gemini").await.unwrap();
    assert!(
        store
            .breaker_states("ns-a", &names)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.open_breakers(Utc::now()).await.unwrap().is_empty());
}

async fn concurrent_failures_all_count(store: Store) {
    let writers = (0..8).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .record_breaker_failure("ns", "p", 100, Duration::from_secs(60))
                .await
                .unwrap()
        })
    });
    for w in writers {
        w.await.unwrap();
    }
    let states = store
        .breaker_states("ns", &["p".to_string()])
        .await
        .unwrap();
    assert_eq!(states[0].consecutive_failures, 8);
}

on_both_backends!(system_warnings_are_refreshed_cleared_and_expire);

async fn system_warnings_are_refreshed_cleared_and_expire(store: Store) {
    let hour = Duration::from_secs(3600);
    store
        .raise_system_warning("runbook:a", "runbook", "Runbook a failed", "404", hour)
        .await
        .unwrap();
    store
        .raise_system_warning("runbook:b", "runbook", "Runbook b failed", "timeout", hour)
        .await
        .unwrap();
    // Raised again: one row, the new details.
    store
        .raise_system_warning("runbook:a", "runbook", "Runbook a failed", "403", hour)
        .await
        .unwrap();
    let active = store.active_system_warnings(Utc::now()).await.unwrap();
    assert_eq!(active.len(), 2, "{active:?}");
    let a = active.iter().find(|w| w.id == "runbook:a").unwrap();
    assert_eq!(a.details, "403");
    assert!(a.updated_at >= a.created_at);

    store.clear_system_warning("runbook:b").await.unwrap();
    let ids: Vec<String> = store
        .active_system_warnings(Utc::now())
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(ids, ["runbook:a"]);

    // Two hours on, it has expired: not shown.
    let later = Utc::now() + chrono::Duration::hours(2);
    assert!(
        store
            .active_system_warnings(later)
            .await
            .unwrap()
            .is_empty()
    );

    // An expired warning is removed when the next one is raised (seen from
    // before it expired, it would still be listed otherwise).
    let before = Utc::now() - chrono::Duration::minutes(1);
    store
        .raise_system_warning(
            "runbook:gone",
            "runbook",
            "Runbook gone",
            "x",
            Duration::ZERO,
        )
        .await
        .unwrap();
    assert!(
        store
            .active_system_warnings(before)
            .await
            .unwrap()
            .iter()
            .any(|w| w.id == "runbook:gone")
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    store
        .raise_system_warning("runbook:c", "runbook", "Runbook c failed", "500", hour)
        .await
        .unwrap();
    let ids: Vec<String> = store
        .active_system_warnings(before)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(ids, ["runbook:c", "runbook:a"]);

    // A TTL too long to add to a date is capped, not a panic.
    store
        .raise_system_warning("runbook:d", "runbook", "Runbook d", "", Duration::MAX)
        .await
        .unwrap();
}
