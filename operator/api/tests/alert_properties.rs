//! Property tests of `POST /api/v1/alerts` over real HTTP on both
//! backends: whatever a client sends — bytes, JSON of any shape, every
//! field full of odd Unicode — the answer is a 202 whose session reads back
//! what was sent, or a 4xx `{error, message}` that creates nothing; never a
//! 5xx. 1 MiB bodies are accepted or refused precisely.
//!
//! `PROPTEST_CASES=500 cargo test -p tarsy-api --test alert_properties`
//! explores more than the 64 cases CI runs.

#[path = "common/mod.rs"]
mod common;

use common::TestApp;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestRunner;
use serde_json::{Map, Value, json};
use tarsy_store::Store;

/// 64 cases unless `PROPTEST_CASES` asks for more; failures are not
/// written into the source tree (the shrunk input is printed).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Any Unicode, control characters and NUL (which Postgres cannot store)
/// included.
fn odd_text(max: usize) -> impl Strategy<Value = String> {
    prop::string::string_regex(&format!(
        "(\\PC|\\x00|\\x01|\\x1b|\\x7f|\\n|\\r|\\t|\\u{{85}}|\\u{{2028}}|\\u{{FEFF}}|\\u{{FFFD}}|\"|\\\\|/|<|>|&|%|'){{0,{max}}}"
    ))
    .unwrap()
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        odd_text(16).prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(odd_text(6), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A request: each field absent, well-formed, or anything at all.
fn request() -> impl Strategy<Value = Value> {
    let known = select(vec!["PodCrashLooping", "HighLatency", "NoChat"]);
    let alert_type = prop_oneof![
        4 => (known, select(vec!["", " ", "\t", "\n "])).prop_map(|(t, pad)| json!(format!("{pad}{t}{pad}"))),
        2 => odd_text(40).prop_map(Value::String),
        1 => Just(json!("T".repeat(254))),
        1 => any_json(),
    ];
    let data = prop_oneof![
        4 => odd_text(200).prop_map(Value::String),
        2 => any_json(),
    ];
    let optional = |good: Vec<Value>| {
        prop_oneof![
            6 => Just(None),
            2 => select(good).prop_map(Some),
            1 => any_json().prop_map(Some),
        ]
    };
    (
        prop::option::weighted(0.95, alert_type),
        prop::option::weighted(0.95, data),
        optional(vec![json!("k8s-chain"), json!(" latency-chain "), json!("nope")]),
        optional(vec![
            json!("https://runbooks.example.com/a.md"),
            json!("file:///etc/passwd"),
            json!("  "),
        ]),
        optional(vec![
            json!({"servers": [{"name": "kubernetes"}]}),
            json!({"servers": [{"name": "kubernetes", "tools": ["pods_list"]}, {"name": "prometheus"}]}),
            json!({"servers": []}),
            json!({"servers": [{"name": "grafana"}]}),
        ]),
        prop::option::weighted(0.15, (odd_text(8), any_json())),
    )
        .prop_map(|(alert_type, data, chain, runbook, selection, extra)| {
            let mut m = Map::new();
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    m.insert(k.to_string(), v);
                }
            };
            put("alert_type", alert_type);
            put("data", data);
            put("chain", chain);
            put("runbook_url", runbook);
            put("mcp_selection", selection);
            if let Some((k, v)) = extra {
                m.insert(k, v);
            }
            Value::Object(m)
        })
}

/// A body: a request, JSON of any shape, or bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => request().prop_map(|v| v.to_string().into_bytes()),
        1 => any_json().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

/// What the store keeps of a text: NUL becomes U+FFFD, visibly.
fn stored(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

async fn session_count(store: &Store) -> i64 {
    store
        .list_sessions(&Default::default())
        .await
        .unwrap()
        .total
}

/// One case: the answer is a 202 whose session reads back what was sent,
/// or a 4xx `{error, message}` and no new session. Returns the status.
async fn check(app: &TestApp, store: &Store, body: Vec<u8>) -> Result<u16, TestCaseError> {
    let sent: Option<Value> = serde_json::from_slice(&body).ok();
    let before = session_count(store).await;
    let (status, answer) = app.post_raw("/api/v1/alerts", body).await;
    let after = session_count(store).await;
    match status {
        202 => {
            prop_assert_eq!(after, before + 1);
            let sent = sent.expect("a 202 for a JSON body");
            let id = answer["session_id"].as_str().unwrap();
            let (status, detail) = app.get(&format!("/api/v1/sessions/{id}")).await;
            prop_assert_eq!(status, 200, "{}", detail);
            let alert_type = stored(sent["alert_type"].as_str().unwrap().trim());
            prop_assert_eq!(detail["alert_type"].as_str(), Some(alert_type.as_str()));
            let data = stored(&match &sent["data"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            prop_assert_eq!(detail["alert_data"].as_str(), Some(data.as_str()));
        }
        400..=499 => {
            prop_assert_eq!(
                after,
                before,
                "a refused alert created a session: {}",
                answer
            );
            let code = answer["error"].as_str().unwrap_or("");
            let message = answer["message"].as_str().unwrap_or("");
            prop_assert!(
                !code.is_empty() && !message.trim().is_empty(),
                "{} without a precise error: {}",
                status,
                answer
            );
        }
        _ => prop_assert!(false, "{} for {:?}: {}", status, sent, answer),
    }
    Ok(status)
}

/// Runs the property inside the async test: the runner is synchronous, so
/// each case blocks on this runtime (multi-threaded, as the tests are).
fn run<S: Strategy>(strategy: S, case: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(config());
    let outcome = tokio::task::block_in_place(|| runner.run(&strategy, case));
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

async fn any_body_gets_a_202_or_a_precise_4xx(store: Store) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let app = TestApp::start(store.clone()).await;
    let handle = tokio::runtime::Handle::current();
    let accepted = AtomicUsize::new(0);
    let refused = AtomicUsize::new(0);
    run(body(), |body| {
        let status = handle.block_on(check(&app, &store, body))?;
        let counter = if status == 202 { &accepted } else { &refused };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    // The generator reaches both outcomes (else the property says little).
    let (accepted, refused) = (accepted.into_inner(), refused.into_inner());
    eprintln!("{accepted} accepted, {refused} refused");
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

/// A known alert type with any data (a string of any Unicode, or any JSON
/// value but null) is always accepted and reads back as sent.
async fn any_data_for_a_known_type_is_accepted(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let handle = tokio::runtime::Handle::current();
    let data = prop_oneof![
        odd_text(300)
            .prop_filter("not blank", |s| !s.trim().is_empty())
            .prop_map(Value::String),
        any_json().prop_filter("not null or blank", |v| match v {
            Value::Null => false,
            Value::String(s) => !s.trim().is_empty(),
            _ => true,
        }),
    ];
    run(data, |data| {
        let body = json!({"alert_type": "PodCrashLooping", "data": data}).to_string();
        let status = handle.block_on(check(&app, &store, body.into_bytes()))?;
        prop_assert_eq!(status, 202);
        Ok(())
    });
}

/// 1 MiB: data of exactly the limit in multi-byte characters is accepted
/// and read back whole; one byte more, 1 MiB of garbage and 1 MiB of
/// nesting are refused precisely.
async fn one_mib_bodies(store: Store) {
    let app = TestApp::start(store.clone()).await;
    let limit = tarsy_core::MAX_ALERT_DATA_BYTES;

    let data = "é".repeat(limit / 2);
    let started = std::time::Instant::now();
    let (status, answer) = app
        .post_json(
            "/api/v1/alerts",
            &json!({"alert_type": "PodCrashLooping", "data": data}),
        )
        .await;
    eprintln!("1 MiB alert accepted in {:?}", started.elapsed());
    assert_eq!(status, 202, "{answer}");
    let id = answer["session_id"].as_str().unwrap();
    let detail = app.get(&format!("/api/v1/sessions/{id}")).await.1;
    assert_eq!(detail["alert_data"].as_str().map(str::len), Some(limit));

    let (status, answer) = app
        .post_json(
            "/api/v1/alerts",
            &json!({"alert_type": "PodCrashLooping", "data": format!("{data}x")}),
        )
        .await;
    assert_eq!(status, 413, "{answer}");
    assert_eq!(answer["error"], "payload_too_large", "{answer}");

    let garbage: Vec<u8> = (0..limit).map(|i| (i * 7919 % 251) as u8).collect();
    let nested = format!(
        "{{\"alert_type\": \"PodCrashLooping\", \"data\": {}",
        "[".repeat(limit)
    );
    for (what, body) in [("garbage", garbage), ("nesting", nested.into_bytes())] {
        let (status, answer) = app.post_raw("/api/v1/alerts", body).await;
        assert_eq!(status, 400, "{what}: {answer}");
        assert_eq!(answer["error"], "bad_request", "{what}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid JSON"),
            "{what}: {answer}"
        );
    }
    assert_eq!(session_count(&store).await, 1);
}

on_both_backends!(
    any_body_gets_a_202_or_a_precise_4xx,
    any_data_for_a_known_type_is_accepted,
    one_mib_bodies,
);
