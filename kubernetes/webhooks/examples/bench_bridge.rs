//! Alertmanager bridge throughput (budget: ≥ 1,000 alerts/s accepted; the
//! benchmarks are listed in the README, `README.md#what-is-built`).
//!
//! Serves the bridge with the in-memory sink on localhost and sends
//! Alertmanager notifications over keep-alive HTTP/1.1 connections; prints
//! accepted alerts per second for new alerts, for repeat notifications
//! (deduplicated) and for one-alert notifications.
//!
//! ```text
//! cargo run -p tarsy-webhooks --example bench_bridge --release -- [alerts] [per-notification] [connections]
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tarsy_core::SecretValue;
use tarsy_webhooks::{BridgeAuth, BridgeConfig, BridgeState, InMemoryAlertSink, app};
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "bench-token";

fn notification(first: usize, count: usize) -> String {
    let alerts: Vec<_> = (first..first + count)
        .map(|i| {
            json!({
                "status": "firing",
                "labels": {
                    "alertname": "KubePodCrashLooping",
                    "namespace": "bench",
                    "pod": format!("api-{i}"),
                    "severity": "warning"
                },
                "annotations": {
                    "summary": "Pod is crash looping.",
                    "runbook_url": "https://runbooks.example.com/kubepodcrashlooping"
                },
                "startsAt": "2025-06-02T08:14:30.512Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
                "fingerprint": format!("{i:016x}")
            })
        })
        .collect();
    json!({
        "version": "4",
        "groupKey": "{}:{alertname=\"KubePodCrashLooping\"}",
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "tarsy",
        "groupLabels": {"alertname": "KubePodCrashLooping"},
        "commonLabels": {"alertname": "KubePodCrashLooping"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": alerts
    })
    .to_string()
}

/// Sends every body over `connections` keep-alive connections; returns the
/// elapsed time.
async fn run(addr: std::net::SocketAddr, bodies: Arc<Vec<String>>, connections: usize) -> Duration {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let bodies = Arc::clone(&bodies);
        let next = Arc::clone(&next);
        tasks.push(tokio::spawn(async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .expect("handshake");
            tokio::spawn(conn);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else { break };
                let req = Request::post("/alertmanager")
                    .header("host", "bench")
                    .header("content-type", "application/json")
                    .header("authorization", format!("Bearer {TOKEN}"))
                    .body(Full::new(Bytes::from(body.clone())))
                    .expect("request");
                sender.ready().await.expect("ready");
                let resp = sender.send_request(req).await.expect("send");
                let status = resp.status();
                let _ = resp.into_body().collect().await.expect("body");
                assert_eq!(status, 200, "notification refused");
            }
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    start.elapsed()
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are numbers"))
        .collect();
    let total = args.first().copied().unwrap_or(20_000);
    let per = args.get(1).copied().unwrap_or(10).max(1);
    let connections = args.get(2).copied().unwrap_or(8).max(1);

    let sink = InMemoryAlertSink::new("bench");
    let state = BridgeState::new(
        BridgeConfig::new("bench"),
        BridgeAuth::Bearer(SecretValue::new(TOKEN)),
        Arc::new(sink.clone()),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(tarsy_webhooks::server::serve_http(
        listener,
        app(Some(state.clone()), None),
        std::future::pending(),
    ));

    let grouped: Arc<Vec<String>> = Arc::new(
        (0..total)
            .step_by(per)
            .map(|i| notification(i, per.min(total - i)))
            .collect(),
    );
    let rate = |n: usize, d: Duration| n as f64 / d.as_secs_f64();

    let t = run(addr, Arc::clone(&grouped), connections).await;
    assert_eq!(sink.len(), total, "every alert must be created once");
    println!(
        "new alerts:      {total} alerts, {per}/notification, {connections} connections: {:>9.0} alerts/s ({:.0} notifications/s)",
        rate(total, t),
        rate(grouped.len(), t)
    );

    let t = run(addr, Arc::clone(&grouped), connections).await;
    assert_eq!(sink.len(), total, "repeats must not create alerts");
    println!(
        "repeat (dedup):  {total} alerts, {per}/notification, {connections} connections: {:>9.0} alerts/s",
        rate(total, t)
    );

    let singles: Arc<Vec<String>> = Arc::new(
        (total..total + total / 4)
            .map(|i| notification(i, 1))
            .collect(),
    );
    let t = run(addr, Arc::clone(&singles), connections).await;
    println!(
        "single alerts:   {} alerts, 1/notification, {connections} connections: {:>9.0} alerts/s",
        singles.len(),
        rate(singles.len(), t)
    );
    if cfg!(debug_assertions) {
        println!("(debug build: run with --release for the budget figure)");
    }
    let stats = state.stats();
    println!(
        "bridge counters: created {} duplicates {} rejected {} failed {}",
        stats.created, stats.duplicates, stats.rejected, stats.failed
    );
}
