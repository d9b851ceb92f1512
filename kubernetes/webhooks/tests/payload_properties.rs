//! Property tests of the Alertmanager bridge's input: any body — bytes,
//! JSON of any shape, well-formed payloads full of odd Unicode — is
//! answered over real HTTP with a report or a precise 4xx `{error}`, never
//! a 5xx or a panic; well-formed payloads round-trip through the parser and
//! into the Alert's data; 1 MiB bodies are handled or refused.
//!
//! `PROPTEST_CASES=1000 cargo test -p tarsy-webhooks --test payload_properties`
//! explores more than the 64 cases CI runs.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use common::{Resp, post, serve_http};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Value;
use tarsy_core::SecretValue;
use tarsy_webhooks::alertmanager::{AmAlert, AmStatus, WebhookPayload, parse_payload};
use tarsy_webhooks::{BridgeAuth, BridgeConfig, BridgeState, InMemoryAlertSink, app};

const TOKEN: &str = "am-token-0123456789";
const MIB: usize = 1024 * 1024;

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

/// One runtime for every case (the proptest runner is synchronous).
fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Runtime::new().unwrap())
}

struct Bridge {
    addr: SocketAddr,
    sink: InMemoryAlertSink,
}

/// A bridge with an empty sink, served over plain HTTP.
async fn bridge(config: BridgeConfig) -> Bridge {
    let sink = InMemoryAlertSink::new("tarsy");
    let state = BridgeState::new(
        config,
        BridgeAuth::Bearer(SecretValue::new(TOKEN)),
        Arc::new(sink.clone()),
    );
    let addr = serve_http(app(Some(state), None)).await;
    Bridge { addr, sink }
}

async fn send(b: &Bridge, body: Vec<u8>) -> Resp {
    post(
        b.addr,
        "/alertmanager",
        &[("authorization", &format!("Bearer {TOKEN}"))],
        body,
    )
    .await
}

/// A refusal is a 4xx whose JSON body says why.
fn assert_refusal(resp: &Resp, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        resp.status.is_client_error(),
        "{}: {} {}",
        what,
        resp.status,
        resp.body
    );
    let body: Value = serde_json::from_str(&resp.body)
        .map_err(|e| TestCaseError::fail(format!("{what}: not JSON ({e}): {}", resp.body)))?;
    let error = body["message"].as_str().unwrap_or("");
    prop_assert!(
        !error.trim().is_empty(),
        "{}: no error text: {}",
        what,
        body
    );
    Ok(())
}

/// Strings as they come from label values written by anyone: any Unicode,
/// control characters, line and paragraph separators, BOMs.
fn odd_text(max: usize) -> impl Strategy<Value = String> {
    prop::string::string_regex(&format!(
        "(\\PC|\\x00|\\x01|\\x1b|\\x7f|\\n|\\r|\\t|\\u{{85}}|\\u{{2028}}|\\u{{FEFF}}|\"|'|: |- |#|&|\\*|!|%|@|`|\\{{|\\}}|\\[|\\]){{0,{max}}}"
    ))
    .unwrap()
}

fn time() -> impl Strategy<Value = DateTime<Utc>> {
    (0i64..4_102_444_800, 0u32..1000)
        .prop_map(|(s, ms)| DateTime::from_timestamp(s, ms * 1_000_000).expect("in range"))
}

fn alert() -> impl Strategy<Value = AmAlert> {
    (
        any::<bool>(),
        prop::collection::btree_map(odd_text(12), odd_text(30), 0..5),
        prop::option::of(odd_text(40)),
        prop::collection::btree_map(odd_text(12), odd_text(60), 0..4),
        time(),
        prop::option::of(time()),
        odd_text(40),
        prop_oneof!["[0-9a-f]{16}", odd_text(20)],
    )
        .prop_map(
            |(
                firing,
                mut labels,
                alertname,
                annotations,
                starts_at,
                ends_at,
                generator_url,
                fingerprint,
            )| {
                if let Some(name) = alertname {
                    labels.insert("alertname".into(), name);
                }
                AmAlert {
                    status: if firing {
                        AmStatus::Firing
                    } else {
                        AmStatus::Resolved
                    },
                    labels,
                    annotations,
                    starts_at,
                    ends_at,
                    generator_url,
                    fingerprint,
                }
            },
        )
}

fn payload() -> impl Strategy<Value = WebhookPayload> {
    (
        prop::collection::vec(alert(), 0..5),
        odd_text(20),
        odd_text(20),
        any::<u64>(),
        prop::collection::btree_map(odd_text(10), odd_text(20), 0..3),
    )
        .prop_map(
            |(alerts, receiver, group_key, truncated_alerts, common_labels)| WebhookPayload {
                version: "4".into(),
                group_key,
                truncated_alerts,
                status: if alerts.iter().all(|a| a.status == AmStatus::Resolved) {
                    AmStatus::Resolved
                } else {
                    AmStatus::Firing
                },
                receiver,
                group_labels: BTreeMap::new(),
                common_labels,
                common_annotations: BTreeMap::new(),
                external_url: "http://alertmanager:9093".into(),
                alerts,
            },
        )
}

/// JSON of any shape, and payloads with a field removed or retyped.
fn json_body() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        odd_text(10).prop_map(Value::String),
    ];
    let any_json = leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    select(vec![
                        "version",
                        "status",
                        "alerts",
                        "labels",
                        "startsAt",
                        "fingerprint"
                    ])
                    .prop_map(str::to_string),
                    odd_text(6)
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let mutated = (
        payload(),
        select(vec![
            "version",
            "status",
            "alerts",
            "receiver",
            "truncatedAlerts",
        ]),
        any_json.clone(),
    )
        .prop_map(|(p, field, replacement)| {
            let mut v = serde_json::to_value(&p).unwrap();
            v[field] = replacement;
            v
        });
    prop_oneof![any_json, mutated].prop_map(|v| v.to_string().into_bytes())
}

fn any_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        json_body(),
        // Valid JSON cut anywhere.
        (payload(), any::<prop::sample::Index>()).prop_map(|(p, cut)| {
            let bytes = serde_json::to_vec(&p).unwrap();
            let at = cut.index(bytes.len() + 1);
            bytes[..at].to_vec()
        }),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// The parser never panics: a body is a payload of version 4, or an
    /// error that says where and what.
    #[test]
    fn any_body_parses_or_is_refused(body in any_body()) {
        match parse_payload(&body) {
            Ok(p) => prop_assert_eq!(p.version, "4"),
            Err(e) => prop_assert!(!e.to_string().trim().is_empty()),
        }
    }

    /// Over HTTP, any body gets a JSON report (200) or a 4xx with an
    /// `error` — never a 5xx — and nothing is created from a refused body.
    #[test]
    fn any_body_over_http_is_answered(body in any_body()) {
        rt().block_on(async {
            let b = bridge(BridgeConfig::new("tarsy")).await;
            let parsed = parse_payload(&body);
            let resp = send(&b, body.clone()).await;
            match parsed {
                Ok(p) => {
                    prop_assert_eq!(resp.status.as_u16(), 200, "{}", resp.body);
                    let report: Value = serde_json::from_str(&resp.body).unwrap();
                    prop_assert_eq!(report["results"].as_array().map(Vec::len), Some(p.alerts.len()));
                }
                Err(_) => {
                    assert_refusal(&resp, "a malformed body")?;
                    prop_assert!(b.sink.is_empty());
                }
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// A well-formed payload survives serialisation and parsing unchanged,
    /// whatever its strings contain.
    #[test]
    fn payloads_round_trip_through_the_parser(p in payload()) {
        let body = serde_json::to_vec(&p).unwrap();
        prop_assert_eq!(parse_payload(&body).unwrap(), p);
    }

    /// Every firing alert with a type and a fingerprint becomes an Alert
    /// whose data carries its labels and annotations exactly (odd Unicode
    /// included); the others are refused with a reason. One report line per
    /// alert, in order.
    #[test]
    fn firing_alerts_become_alerts_with_their_labels(p in payload()) {
        rt().block_on(async {
            let b = bridge(BridgeConfig::new("tarsy")).await;
            let resp = send(&b, serde_json::to_vec(&p).unwrap()).await;
            prop_assert_eq!(resp.status.as_u16(), 200, "{}", resp.body);
            let report: Value = serde_json::from_str(&resp.body).unwrap();
            let results = report["results"].as_array().unwrap();
            prop_assert_eq!(results.len(), p.alerts.len());
            let created = b.sink.alerts();
            for (alert, result) in p.alerts.iter().zip(results) {
                prop_assert_eq!(result["fingerprint"].as_str(), Some(alert.fingerprint.as_str()));
                let outcome = result["outcome"].as_str().unwrap();
                let alert_type = alert.labels.get("alertname").map(|s| s.trim()).unwrap_or("");
                let usable = alert.status == AmStatus::Firing
                    && !alert_type.is_empty()
                    && alert_type.chars().count() <= 253;
                if alert.fingerprint.trim().is_empty() {
                    prop_assert_eq!(outcome, "rejected", "{}", result);
                    prop_assert_eq!(result["message"].as_str(), Some("fingerprint is empty"));
                    continue;
                }
                if alert.status == AmStatus::Resolved {
                    prop_assert!(matches!(outcome, "resolved" | "unknown"), "{}", result);
                    continue;
                }
                if !usable {
                    prop_assert_eq!(outcome, "rejected", "{}", result);
                    prop_assert!(result["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", result);
                    continue;
                }
                prop_assert!(matches!(outcome, "created" | "duplicate"), "{}", result);
                if outcome != "created" {
                    continue;
                }
                let name = result["alerts"][0].as_str().unwrap();
                let resource = created
                    .iter()
                    .find(|a| a.metadata.name.as_deref() == Some(name))
                    .unwrap();
                prop_assert_eq!(&resource.spec.alert_type, alert_type);
                let data: serde_yaml::Value = serde_yaml::from_str(&resource.spec.data)
                    .map_err(|e| TestCaseError::fail(format!("data is not YAML ({e}): {}", resource.spec.data)))?;
                let labels: BTreeMap<String, String> = serde_yaml::from_value(data["labels"].clone()).unwrap();
                prop_assert_eq!(&labels, &alert.labels, "labels changed in {}", resource.spec.data);
                let annotations: BTreeMap<String, String> =
                    serde_yaml::from_value(data["annotations"].clone()).unwrap_or_default();
                prop_assert_eq!(&annotations, &alert.annotations);
                prop_assert_eq!(data["fingerprint"].as_str(), Some(alert.fingerprint.as_str()));
            }
            Ok::<(), TestCaseError>(())
        })?;
    }
}

// ------------------------------------------------------------ 1 MiB bodies

fn firing(fingerprint: &str, annotations: BTreeMap<String, String>) -> AmAlert {
    AmAlert {
        status: AmStatus::Firing,
        labels: BTreeMap::from([("alertname".to_string(), "BigAlert".to_string())]),
        annotations,
        starts_at: DateTime::from_timestamp(1_750_000_000, 0).unwrap(),
        ends_at: None,
        generator_url: String::new(),
        fingerprint: fingerprint.into(),
    }
}

fn notification(alerts: Vec<AmAlert>) -> WebhookPayload {
    WebhookPayload {
        version: "4".into(),
        group_key: "{}:{alertname=\"BigAlert\"}".into(),
        truncated_alerts: 0,
        status: AmStatus::Firing,
        receiver: "tarsy".into(),
        group_labels: BTreeMap::new(),
        common_labels: BTreeMap::new(),
        common_annotations: BTreeMap::new(),
        external_url: String::new(),
        alerts,
    }
}

/// 1 MiB bodies of every kind: an alert with a huge annotation (refused
/// for its data size, precisely), many alerts (handled), garbage, JSON
/// nested deeper than any parser allows, and a body over a lowered limit.
#[tokio::test]
async fn one_mib_bodies_are_handled_or_refused() {
    let b = bridge(BridgeConfig::new("tarsy")).await;

    // One alert whose description alone is 1 MiB: Alert.spec.data would be
    // over its limit, so that alert is refused and the request succeeds.
    let huge = notification(vec![firing(
        "aaaa000000000001",
        BTreeMap::from([("description".to_string(), "d".repeat(MIB))]),
    )]);
    let resp = send(&b, serde_json::to_vec(&huge).unwrap()).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let report = resp.json();
    assert_eq!(report["results"][0]["outcome"], "rejected", "{report}");
    let message = report["results"][0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("alert data is ")
            && message.ends_with(" bytes; the limit is 1048576 bytes"),
        "{report}"
    );
    assert!(b.sink.is_empty());

    // 1 MiB of 900 alerts with 1 KiB of annotations each: all created.
    let alerts: Vec<AmAlert> = (0..900)
        .map(|i| {
            firing(
                &format!("{i:016x}"),
                BTreeMap::from([("summary".to_string(), format!("{i} {}", "s".repeat(1100)))]),
            )
        })
        .collect();
    let body = serde_json::to_vec(&notification(alerts)).unwrap();
    assert!(body.len() >= MIB, "{} bytes", body.len());
    let started = std::time::Instant::now();
    let resp = send(&b, body).await;
    eprintln!("900 alerts in 1 MiB answered in {:?}", started.elapsed());
    assert_eq!(
        resp.status,
        200,
        "{}",
        &resp.body[..resp.body.len().min(500)]
    );
    assert_eq!(resp.json()["created"], 900);
    assert_eq!(b.sink.alerts().len(), 900);

    // Garbage (invalid UTF-8 included) and JSON nested 256 Ki levels deep.
    let garbage: Vec<u8> = (0..MIB).map(|i| (i * 7919 % 251) as u8).collect();
    let nested = format!("{{\"a\":{}", "[".repeat(MIB - 8)).into_bytes();
    for (what, body) in [("1 MiB of bytes", garbage), ("1 MiB of nesting", nested)] {
        let resp = send(&b, body).await;
        assert_eq!(resp.status, 400, "{what}: {}", resp.body);
        let error = resp.json()["message"].as_str().unwrap().to_string();
        assert!(
            error.starts_with("malformed Alertmanager payload"),
            "{what}: {error}"
        );
    }

    // Over a lowered body limit: 413 with the limit named.
    let mut config = BridgeConfig::new("tarsy");
    config.max_body_bytes = 256 * 1024;
    let small = bridge(config).await;
    let (status, body) = send_raw(small.addr, &serde_json::to_vec(&huge).unwrap()).await;
    assert_eq!(status, 413, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("exceeds 262144 bytes"),
        "{body}"
    );
    assert!(small.sink.is_empty());
}

/// POSTs `body` over a raw connection, reading the answer while still
/// writing (a server may refuse before reading a large body, and then
/// close): (status, response body).
async fn send_raw(addr: SocketAddr, body: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let mut request = format!(
        "POST /alertmanager HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    let writer = tokio::spawn(async move {
        // A reset after the answer is fine: the server said what it had to.
        let _ = wr.write_all(&request).await;
    });
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        rd.read_to_end(&mut answer),
    )
    .await
    .expect("an answer within 30 s")
    .ok();
    writer.abort();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}
