//! The operator at scale: the real `tarsy controller` process against the
//! project's Kubernetes API emulator (no kubelet: investigation pods stay
//! Pending), real Postgres, a chain with one single-agent stage.
//!
//! Creates 100 Alerts (warm-up), then 1,000 as fast as a bounded number of
//! concurrent requests allows, and prints: per-Alert latency from the create
//! request to "status.phase InProgress and its AgentExecution exists" (from
//! watch events; p50/p95/p99/max), the time until all are InProgress, the
//! operator's peak and final RSS (VmHWM/VmRSS), its reconcile counts and
//! errors from /metrics, and the CPU time of the operator and of the
//! emulator (the Python emulator can be the bottleneck; its share says so).
//! Then churn: 10,000 more Alerts, in waves of 1,000, of a chain whose
//! sessions time out after 2 s, each deleted by the Alert TTL (1 s) after
//! it ended — what a busy Alertmanager does over weeks — and the operator's
//! RSS once they are all gone.
//! Figures only, no assertions.
//!
//! Run: `cargo bench -p tarsy --bench operator_scale` (needs the emulator
//! venv, `eval "$(e2e/kube/install.sh)"`, and Postgres,
//! `TARSY_TEST_DATABASE_URL`). `TARSY_BENCH_ALERTS` changes the 1,000,
//! `TARSY_BENCH_CHURN` the 10,000 (0: no churn).

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Controller, ControllerConfig, apply_yaml};
use futures::StreamExt;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tarsy_crds::{AgentExecution, Alert, AlertPhase, AlertSpec};

const NS: &str = "bench";
/// Concurrent create requests.
const CONCURRENCY: usize = 16;

/// When each Alert was created, went InProgress, and got its execution.
#[derive(Default)]
struct Times {
    created: HashMap<String, Instant>,
    in_progress: HashMap<String, Instant>,
    execution: HashMap<String, Instant>,
    /// Alerts seen deleted.
    deleted: std::collections::HashSet<String>,
}

impl Times {
    /// Latency of `name`: create → both InProgress and execution seen.
    fn latency(&self, name: &str) -> Option<Duration> {
        let done = (*self.in_progress.get(name)?).max(*self.execution.get(name)?);
        Some(done.saturating_duration_since(*self.created.get(name)?))
    }
}

fn alert(name: &str, alert_type: &str) -> Alert {
    Alert::new(
        name,
        AlertSpec {
            alert_type: alert_type.into(),
            data: format!("bench alert {name}"),
            chain_ref: None,
            runbook_url: None,
            mcp_selection: None,
            author: Some("bench".into()),
            source: None,
            cancel: None,
        }
        .into(),
    )
}

/// Watches Alerts and AgentExecutions, recording first sightings. The
/// tasks must be aborted before the emulator goes (a watcher retrying
/// against a closed port would keep the runtime from shutting down).
fn spawn_watchers(client: &Client, times: Arc<Mutex<Times>>) -> Vec<tokio::task::JoinHandle<()>> {
    let alerts: Api<Alert> = Api::namespaced(client.clone(), NS);
    let t = times.clone();
    let alert_task = tokio::spawn(async move {
        let mut events = watcher(alerts, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(watcher::Event::Apply(a) | watcher::Event::InitApply(a))
                    if a.status.as_ref().and_then(|s| s.phase) == Some(AlertPhase::InProgress) =>
                {
                    let now = Instant::now();
                    t.lock()
                        .unwrap()
                        .in_progress
                        .entry(a.name_any())
                        .or_insert(now);
                }
                Ok(watcher::Event::Delete(a)) => {
                    t.lock().unwrap().deleted.insert(a.name_any());
                }
                _ => {}
            }
        }
    });
    let executions: Api<AgentExecution> = Api::namespaced(client.clone(), NS);
    let execution_task = tokio::spawn(async move {
        let mut events = watcher(executions, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = events.next().await {
            if let Ok(watcher::Event::Apply(ae) | watcher::Event::InitApply(ae)) = ev {
                let now = Instant::now();
                times
                    .lock()
                    .unwrap()
                    .execution
                    .entry(ae.spec.alert_name.clone())
                    .or_insert(now);
            }
        }
    });
    vec![alert_task, execution_task]
}

/// Creates `names` with bounded concurrency; returns the wall time.
async fn create_all(
    client: &Client,
    names: Vec<String>,
    alert_type: &str,
    times: &Arc<Mutex<Times>>,
) -> Duration {
    let api: Api<Alert> = Api::namespaced(client.clone(), NS);
    let start = Instant::now();
    let results: Vec<_> = futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            let times = times.clone();
            async move {
                let sent = Instant::now();
                let r = api
                    .create(&PostParams::default(), &alert(&name, alert_type))
                    .await;
                times.lock().unwrap().created.insert(name.clone(), sent);
                r.map(|_| ()).map_err(|e| format!("{name}: {e}"))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let errors: Vec<_> = results.into_iter().filter_map(Result::err).collect();
    if !errors.is_empty() {
        println!("  create errors: {} (first: {})", errors.len(), errors[0]);
    }
    start.elapsed()
}

/// Waits until every name is done (or `limit` passes); returns the time.
async fn wait_done(names: &[String], times: &Arc<Mutex<Times>>, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let pending = {
            let t = times.lock().unwrap();
            names.iter().filter(|n| t.latency(n).is_none()).count()
        };
        if pending == 0 {
            return start.elapsed();
        }
        if start.elapsed() > limit {
            println!(
                "  NOT DONE: {pending} Alerts not InProgress with an execution after {limit:?}"
            );
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// `metric{labels} value` lines of the operator's reconcile counters.
fn reconcile_lines(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| {
            (l.starts_with("tarsy_operator_reconciles_total")
                || l.starts_with("tarsy_operator_reconcile_errors_total")
                || l.starts_with("tarsy_operator_sessions"))
                && !l.starts_with('#')
        })
        .map(str::to_string)
        .collect()
}

async fn round(
    label: &str,
    client: &Client,
    prefix: &str,
    count: usize,
    times: &Arc<Mutex<Times>>,
    pids: (u32, u32),
) {
    let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i:04}")).collect();
    let cpu0 = (common::cpu_seconds(pids.0), common::cpu_seconds(pids.1));
    let wall = Instant::now();
    let create = create_all(client, names.clone(), "Scale", times).await;
    let all = wait_done(&names, times, Duration::from_secs(900)).await + create;
    let elapsed = wall.elapsed().as_secs_f64();
    let cpu1 = (common::cpu_seconds(pids.0), common::cpu_seconds(pids.1));
    let mut lat: Vec<Duration> = {
        let t = times.lock().unwrap();
        names.iter().filter_map(|n| t.latency(n)).collect()
    };
    lat.sort();
    println!("{label}: {count} Alerts");
    println!(
        "  creates: {} ({:.0}/s, {CONCURRENCY} concurrent)",
        ms(create),
        count as f64 / create.as_secs_f64()
    );
    println!("  all InProgress with their AgentExecution: {}", ms(all));
    println!(
        "  latency create -> InProgress+execution: p50 {} p95 {} p99 {} max {} ({} measured)",
        ms(percentile(&lat, 0.50)),
        ms(percentile(&lat, 0.95)),
        ms(percentile(&lat, 0.99)),
        ms(lat.last().copied().unwrap_or_default()),
        lat.len()
    );
    let share = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!(
            "{:.1} s CPU = {:.0}% of one core",
            b - a,
            (b - a) / elapsed * 100.0
        ),
        _ => "n/a".into(),
    };
    println!("  operator CPU: {}", share(cpu0.0, cpu1.0));
    println!("  emulator CPU: {}", share(cpu0.1, cpu1.1));
}

/// Creates `total` Alerts of the `Churn` chain in waves of `wave`, each
/// wave left to end (session timeout) and be deleted (Alert TTL) before the
/// next; prints the time and the operator's RSS afterwards.
async fn churn(client: &Client, total: usize, wave: usize, times: &Arc<Mutex<Times>>, pid: u32) {
    // Deletions come from the bench's Alert watch: listing thousands of
    // Alerts every second would load the emulator, the bottleneck here.
    let left = |names: &[String]| {
        let t = times.lock().unwrap();
        names.iter().filter(|n| !t.deleted.contains(*n)).count()
    };
    let start = Instant::now();
    let mut created = 0;
    while created < total {
        let n = wave.min(total - created);
        let names: Vec<String> = (created..created + n)
            .map(|i| format!("churn-{i:05}"))
            .collect();
        create_all(client, names.clone(), "Churn", times).await;
        created += n;
        let wave_start = Instant::now();
        loop {
            let remaining = left(&names);
            if remaining == 0 {
                break;
            }
            if wave_start.elapsed() > Duration::from_secs(600) {
                println!("  NOT DONE: {remaining} churn Alerts still there after 600 s");
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        if let Some((hwm, rss)) = common::rss_kib(pid) {
            println!(
                "  after {created} churn Alerts: RSS {:.1} MiB (peak {:.1} MiB), {:.0} s",
                rss as f64 / 1024.0,
                hwm as f64 / 1024.0,
                start.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "churn: {total} Alerts created, ended and deleted by the Alert TTL in {:.0} s",
        start.elapsed().as_secs_f64()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let count: usize = std::env::var("TARSY_BENCH_ALERTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let churned: usize = std::env::var("TARSY_BENCH_CHURN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let wave = churned.min(1000);
    let dir = common::scratch_dir("operator-bench");
    let emu = common::start_emulator(&dir, false);
    let client = common::client(emu.kubeconfig()).await;
    let db = common::test_database("tarsy_operator_bench").await;
    std::fs::write(dir.join("script.yaml"), "sequential: []\n").unwrap();
    apply_yaml(
        &client,
        NS,
        &format!(
            r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: tarsy-database}}
stringData: {{url: "{url}"}}
---
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {{name: scripted}}
spec: {{type: scripted, model: bench, script: "{script}"}}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {{name: solo}}
spec: {{description: one agent}}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {{name: scale}}
spec:
  alertTypes: [Scale]
  llmProvider: scripted
  iterationStrategy: langchain
  sessionTimeout: 1h
  stages:
  - name: only
    agents: [{{name: solo}}]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {{name: churn}}
spec:
  alertTypes: [Churn]
  llmProvider: scripted
  iterationStrategy: langchain
  sessionTimeout: 2s
  stages:
  - name: only
    agents: [{{name: solo}}]
"#,
            url = db.url(),
            script = dir.join("script.yaml").display()
        ),
    )
    .await;
    let controller = Controller::start(&ControllerConfig {
        kubeconfig: emu.kubeconfig().to_path_buf(),
        database_url: db.url().to_string(),
        image: "tarsy:bench".into(),
        namespace: NS.into(),
        // Default is 5: admit every Alert of the bench at once.
        env: vec![
            (
                "TARSY_MAX_CONCURRENT_SESSIONS".into(),
                (count + 200 + wave).to_string(),
            ),
            ("TARSY_ALERT_TTL".into(), "1s".into()),
            // As the image sets it (Dockerfile).
            ("MALLOC_ARENA_MAX".into(), "2".into()),
        ],
        llm_service_addr: None,
        log: dir.join("controller.log"),
    });
    let pids = (controller.pid(), emu.pid());
    let times = Arc::new(Mutex::new(Times::default()));
    let watchers = spawn_watchers(&client, times.clone());
    println!(
        "operator_scale: tarsy controller (pid {}) + kube emulator without kubelet \
         (investigation pods stay Pending: nothing runs them)",
        pids.0
    );
    if let Some((hwm, rss)) = common::rss_kib(pids.0) {
        println!(
            "  operator RSS at start: {:.1} MiB (peak {:.1} MiB)",
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
    }
    round("warm-up", &client, "warm", 100, &times, pids).await;
    round("measured", &client, "scale", count, &times, pids).await;
    // Let the operator settle (status writes, periodic rechecks), then read.
    tokio::time::sleep(Duration::from_secs(5)).await;
    if let Some((hwm, rss)) = common::rss_kib(pids.0) {
        println!(
            "operator RSS: peak (VmHWM) {:.1} MiB, at the end (VmRSS) {:.1} MiB, with {} Alerts",
            hwm as f64 / 1024.0,
            rss as f64 / 1024.0,
            count + 100
        );
    }
    for line in reconcile_lines(&controller.metrics()) {
        println!("  {line}");
    }
    if churned > 0 {
        churn(&client, churned, wave, &times, pids.0).await;
        for line in reconcile_lines(&controller.metrics()) {
            println!("  {line}");
        }
    }
    for w in watchers {
        w.abort();
        let _ = w.await;
    }
    drop(controller);
    drop(emu);
    let _ = db.drop_database().await;
    let _ = std::fs::remove_dir_all(&dir);
}
