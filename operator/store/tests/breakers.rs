//! Shared circuit breakers on both backends: failures from several writers
//! add up, the circuit opens at the threshold, a success closes it, and
//! scopes stay apart.

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
