//! Benchmark of memory recall and the search over past sessions on large
//! tables: seeds MEMORIES memories (default 100,000) in one scope plus a
//! tenth as many spread over five other scopes, written as varied
//! sentences about services, pods, metrics and errors (a fifth with a
//! 384-dimension embedding, most learned from one of SESSIONS finished
//! sessions, 5% deprecated, reinforced over the last year), in a fresh
//! SQLite file (WAL, as local mode runs it) and a fresh Postgres database;
//! then times `recall_memories` for alert-like texts (with and without a
//! vector, only reviewed, rare words, no known word) and
//! `search_past_sessions`, and prints p50/p95/p99 per case and backend.
//! The budget is 10 ms p99 per recall.
//!
//! ```text
//! cargo run --release -p tarsy-store --example bench_memory [-- MEMORIES [SESSIONS [ITERATIONS]]]
//! ```
//!
//! Rows are written with one multi-row INSERT per 1,000 (values generated
//! here, deterministically); the tables are analysed on Postgres (what
//! autovacuum does on a live table); SQLite is left as the store leaves it.
//! Postgres is taken from `TARSY_TEST_DATABASE_URL` (default: the test
//! server); a scratch database is created and dropped. If it is unreachable
//! only SQLite is measured. With `TARSY_BENCH_KEEP=1` both databases are
//! kept (and named) for EXPLAIN; `TARSY_BENCH_SQLITE_URL` and
//! `TARSY_BENCH_POSTGRES_URL` measure kept databases again, without seeding.

use std::fmt::Write as _;
use std::future::Future;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use tarsy_store::{BackendKind, ConnectOptions, RecallQuery, SessionSearch, Store};

mod bench_support;
use bench_support::{BoxError, Rng, text, ts};

const BATCH: usize = 1_000;
const SCOPE: &str = "prod/payments";
const OTHER_SCOPES: [&str; 5] = [
    "staging/payments",
    "prod/search",
    "prod/identity",
    "dev/payments",
    "prod/data",
];
const DIMENSIONS: usize = 384;
const QUERIES: usize = 50;

const SERVICES: [&str; 30] = [
    "payments-api",
    "checkout",
    "cart",
    "ledger-db",
    "auth-service",
    "user-profile",
    "inventory",
    "shipping",
    "notification-worker",
    "search-indexer",
    "recommendation",
    "pricing",
    "invoice-exporter",
    "kafka-broker",
    "redis-cache",
    "postgres-primary",
    "ingress-nginx",
    "api-gateway",
    "billing",
    "fraud-detector",
    "email-sender",
    "image-resizer",
    "session-store",
    "feature-flags",
    "audit-log",
    "report-generator",
    "order-service",
    "catalog",
    "reviews",
    "loyalty",
];
const COMPONENTS: [&str; 16] = [
    "pod",
    "container",
    "node",
    "deployment",
    "replica",
    "statefulset",
    "job",
    "cronjob",
    "service",
    "ingress",
    "volume",
    "sidecar",
    "init container",
    "daemonset",
    "autoscaler",
    "endpoint",
];
const METRICS: [&str; 20] = [
    "cpu usage",
    "memory working set",
    "p99 latency",
    "error rate",
    "5xx rate",
    "request rate",
    "queue depth",
    "consumer lag",
    "connection count",
    "disk usage",
    "iops",
    "gc pause",
    "heap size",
    "thread count",
    "open file descriptors",
    "replication lag",
    "cache hit ratio",
    "restart count",
    "network egress",
    "dns lookup time",
];
const METRIC_NAMES: [&str; 12] = [
    "container_memory_working_set_bytes",
    "http_requests_total",
    "kafka_consumergroup_lag",
    "pg_replication_lag_seconds",
    "node_filesystem_avail_bytes",
    "redis_evicted_keys_total",
    "istio_request_duration_seconds",
    "kube_pod_container_status_restarts_total",
    "process_open_fds",
    "jvm_gc_pause_seconds",
    "nginx_ingress_controller_requests",
    "container_cpu_cfs_throttled_seconds_total",
];
const ERRORS: [&str; 20] = [
    "OOMKilled",
    "CrashLoopBackOff",
    "connection refused",
    "connection pool exhausted",
    "deadline exceeded",
    "TLS handshake failure",
    "certificate expired",
    "upstream timeout",
    "ImagePullBackOff",
    "readiness probe failed",
    "liveness probe failed",
    "disk pressure",
    "pod evicted",
    "CPU throttling",
    "503 service unavailable",
    "too many open files",
    "deadlock detected",
    "out of memory",
    "segmentation fault",
    "leader election lost",
];
const WHEN: [&str; 8] = [
    "during batch runs",
    "at midnight",
    "after deploys",
    "on weekends",
    "under peak traffic",
    "during backups",
    "after node upgrades",
    "when the cache is cold",
];
const STATES: [&str; 6] = [
    "saturated",
    "degraded",
    "failing over",
    "rebalancing",
    "throttled",
    "restarting",
];
const ALERT_TYPES: [&str; 10] = [
    "PodCrashLooping",
    "KubeNodeNotReady",
    "HighErrorRate",
    "PostgresReplicationLag",
    "DiskFillingUp",
    "CertificateExpiring",
    "HighLatency",
    "TargetDown",
    "OOMKilled",
    "KafkaConsumerLag",
];
const CATEGORIES: [&str; 3] = ["fact", "experience", "procedure"];
const VALENCES: [&str; 3] = ["helped", "misled", "neutral"];

/// One lesson.
fn sentence(rng: &mut Rng) -> String {
    let svc = rng.pick(&SERVICES);
    let svc2 = rng.pick(&SERVICES);
    let comp = rng.pick(&COMPONENTS);
    let metric = rng.pick(&METRICS);
    let err = rng.pick(&ERRORS);
    let err2 = rng.pick(&ERRORS);
    let when = rng.pick(&WHEN);
    let n = rng.below(95) + 5;
    let mut s = match rng.below(12) {
        0 => format!("{svc} {metric} spikes {when}; that is normal and not the cause"),
        1 => format!("When {svc} shows {err}, check the {metric} of {svc2} first"),
        2 => format!("{err} on {svc} {comp}s was caused by {svc2} {metric} {when}"),
        3 => format!(
            "The metric {} does not exist in this cluster; use {} for {svc}",
            rng.pick(&METRIC_NAMES),
            rng.pick(&METRIC_NAMES)
        ),
        4 => format!("{svc} depends on {svc2}: a {err} there surfaces as {err2} here"),
        5 => format!("Raising the memory limit of {svc} to {n}Gi fixed {err} {when}"),
        6 => format!(
            "Do not restart {svc} {comp}s on {err}; the {} recovers within {n} minutes",
            rng.pick(&COMPONENTS)
        ),
        7 => format!(
            "{svc} {metric} above {n}% means {svc2} is {}",
            rng.pick(&STATES)
        ),
        8 => format!("Logs of {svc} show {err} {when}: harmless retries, ignore them"),
        9 => format!("Investigate {svc2} {metric} before blaming {svc} for {err}"),
        10 => format!(
            "Rolling back the last deploy of {svc} cleared {err} on its {comp}s within {n} minutes"
        ),
        _ => format!(
            "The runbook for {svc} {err} is outdated: query {} and compare with {svc2}",
            rng.pick(&METRIC_NAMES)
        ),
    };
    // Rare words: an error code in one memory of twenty.
    if rng.chance(5) {
        let _ = write!(s, " (error code E{:05})", rng.below(100_000));
    }
    s
}

/// An alert as an investigation would recall with it.
fn alert(rng: &mut Rng) -> (String, String) {
    let alert_type = rng.pick(&ALERT_TYPES).to_string();
    let svc = rng.pick(&SERVICES);
    let text = format!(
        "{alert_type}: {svc} {} in namespace prod, {} {svc}-{:x} {}; {} at {}% ({}). \
         Summary: {svc} has been firing for 10 minutes {}",
        rng.pick(&ERRORS),
        rng.pick(&COMPONENTS),
        rng.below(0xffff_ffff),
        rng.pick(&STATES),
        rng.pick(&METRICS),
        rng.below(100),
        rng.pick(&METRIC_NAMES),
        rng.pick(&WHEN),
    );
    (alert_type, text)
}

fn vector(rng: &mut Rng) -> Vec<f32> {
    (0..DIMENSIONS).map(|_| rng.unit()).collect()
}

fn blob(kind: BackendKind, v: &[f32]) -> String {
    let mut hex = String::with_capacity(v.len() * 8);
    for x in v {
        for b in x.to_le_bytes() {
            let _ = write!(hex, "{b:02x}");
        }
    }
    match kind {
        BackendKind::Postgres => format!("decode('{hex}', 'hex')"),
        BackendKind::Sqlite => format!("X'{hex}'"),
    }
}

fn session_id(i: u64) -> String {
    format!("bench-session-{i:06}")
}

/// The INSERT statements of the sessions and memories.
fn inserts(kind: BackendKind, memories: usize, sessions: usize) -> Vec<String> {
    let now = Utc::now();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    for first in (0..sessions).step_by(BATCH) {
        let mut sql = String::from(
            "INSERT INTO alert_sessions (id, alert_data, alert_type, chain_id, status, \
             final_analysis, created_at, completed_at, memory_scope, review_status, \
             review_rating) VALUES ",
        );
        for i in first..(first + BATCH).min(sessions) {
            if i > first {
                sql.push_str(",\n");
            }
            let (alert_type, alert_text) = alert(&mut rng);
            let analysis: Vec<String> = (0..3 + rng.below(4)).map(|_| sentence(&mut rng)).collect();
            let created = now - TimeDelta::minutes(rng.below(180 * 24 * 60) as i64);
            let scope = if rng.chance(90) {
                SCOPE
            } else {
                rng.pick(&OTHER_SCOPES)
            };
            let rating = match rng.below(100) {
                0..40 => Some("accurate"),
                40..60 => Some("partially_accurate"),
                60..70 => Some("inaccurate"),
                _ => None,
            };
            let _ = write!(
                sql,
                "({}, {}, '{alert_type}', 'kubernetes', '{}', {}, {}, {}, '{scope}', {}, {})",
                text(Some(&session_id(i as u64))),
                text(Some(&format!("{{\"summary\": \"{alert_text}\"}}"))),
                if rng.chance(85) {
                    "completed"
                } else {
                    "failed"
                },
                text(Some(&format!("## Root cause\n{}", analysis.join(". ")))),
                ts(created),
                ts(created + TimeDelta::minutes(15)),
                text(Some(if rating.is_some() {
                    "reviewed"
                } else {
                    "needs_review"
                })),
                text(rating),
            );
        }
        out.push(sql);
    }
    let total = memories + memories / 10;
    for first in (0..total).step_by(BATCH) {
        let mut sql = String::from(
            "INSERT INTO memories (id, scope, content, category, valence, confidence, \
             seen_count, alert_type, chain_id, source_session_id, deprecated, embedding, \
             created_at, updated_at, last_reinforced_at) VALUES ",
        );
        for i in first..(first + BATCH).min(total) {
            if i > first {
                sql.push_str(",\n");
            }
            let scope = if i < memories {
                SCOPE
            } else {
                rng.pick(&OTHER_SCOPES)
            };
            let content = sentence(&mut rng);
            let created = now - TimeDelta::minutes(rng.below(365 * 24 * 60) as i64);
            let reinforced = created + TimeDelta::minutes(rng.below(60 * 24 * 60) as i64);
            let reinforced = reinforced.min(now);
            let embedding = if rng.chance(20) {
                blob(kind, &vector(&mut rng))
            } else {
                "NULL".into()
            };
            let source =
                (sessions > 0 && rng.chance(80)).then(|| session_id(rng.below(sessions as u64)));
            let _ = write!(
                sql,
                "('bench-memory-{i:07}', '{scope}', {}, '{}', '{}', {}, {}, '{}', 'kubernetes', \
                 {}, {}, {embedding}, {}, {}, {})",
                text(Some(&content)),
                rng.pick(&CATEGORIES),
                rng.pick(&VALENCES),
                0.3 + rng.below(71) as f64 / 100.0,
                1 + rng.below(5),
                rng.pick(&ALERT_TYPES),
                text(source.as_deref()),
                if rng.chance(5) { "TRUE" } else { "FALSE" },
                ts(created),
                ts(reinforced),
                ts(reinforced),
            );
        }
        out.push(sql);
    }
    out
}

fn print(backend: &str, name: &str, samples: &mut [Duration], found: f64) {
    samples.sort();
    let pick = |q: f64| bench_support::quantile(samples, q);
    let (p50, p95, p99) = (pick(0.5), pick(0.95), pick(0.99));
    let over = if p99 > Duration::from_millis(10) {
        "  OVER 10 ms"
    } else {
        ""
    };
    println!(
        "{backend:<9} {name:<40} found={found:<5.1} n={:<4} p50={:>6.2}ms p95={:>6.2}ms p99={:>6.2}ms{over}",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
    );
}

/// Times `iterations` calls (after a warm-up), cycling through the inputs;
/// returns the samples and the mean number of results.
async fn time<F, Fut>(
    iterations: usize,
    inputs: usize,
    mut call: F,
) -> Result<(Vec<Duration>, f64), BoxError>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<usize, BoxError>>,
{
    for i in 0..inputs.min(10) {
        call(i).await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    let mut found = 0;
    for i in 0..iterations {
        let t0 = Instant::now();
        found += call(i % inputs).await?;
        samples.push(t0.elapsed());
    }
    Ok((samples, found as f64 / iterations as f64))
}

/// The recall query of input `i`.
type MakeQuery<'a> = Box<dyn Fn(usize) -> RecallQuery + 'a>;

struct Queries {
    alerts: Vec<(String, String)>,
    vectors: Vec<Vec<f32>>,
    rare: Vec<String>,
    mixed: Vec<String>,
    short: Vec<String>,
    unknown: Vec<String>,
}

fn queries() -> Queries {
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    Queries {
        alerts: (0..QUERIES).map(|_| alert(&mut rng)).collect(),
        vectors: (0..QUERIES).map(|_| vector(&mut rng)).collect(),
        rare: (0..QUERIES)
            .map(|_| format!("E{:05} raised by the legacy importer", rng.below(100_000)))
            .collect(),
        mixed: (0..QUERIES)
            .map(|_| {
                format!(
                    "E{:05} raised by the legacy batch importer",
                    rng.below(100_000)
                )
            })
            .collect(),
        short: (0..QUERIES)
            .map(|_| format!("{} {}", rng.pick(&METRICS), rng.pick(&SERVICES)))
            .collect(),
        unknown: (0..QUERIES)
            .map(|i| format!("zorblax quuxinator frobnicated {i}x"))
            .collect(),
    }
}

async fn measure(store: &Store, backend: &str, iterations: usize) -> Result<(), BoxError> {
    let q = queries();
    let recall = |text: &str, alert_type: Option<&str>| RecallQuery {
        alert_type: alert_type.map(String::from),
        ..RecallQuery::new(SCOPE, text)
    };
    let cases: Vec<(&str, MakeQuery)> = vec![
        (
            "recall: alert text",
            Box::new(|i| recall(&q.alerts[i].1, Some(&q.alerts[i].0))),
        ),
        (
            "recall: alert text + 384-d vector",
            Box::new(|i| RecallQuery {
                vector: Some(q.vectors[i].clone()),
                ..recall(&q.alerts[i].1, Some(&q.alerts[i].0))
            }),
        ),
        (
            "recall: alert text, reviewed only",
            Box::new(|i| RecallQuery {
                reviewed_only: true,
                ..recall(&q.alerts[i].1, Some(&q.alerts[i].0))
            }),
        ),
        ("recall: rare words", Box::new(|i| recall(&q.rare[i], None))),
        (
            "recall: rare words and one in 20",
            Box::new(|i| recall(&q.mixed[i], None)),
        ),
        (
            "recall: a metric and a service",
            Box::new(|i| recall(&q.short[i], None)),
        ),
        (
            "recall: no known word",
            Box::new(|i| recall(&q.unknown[i], None)),
        ),
        (
            "recall: vector only",
            Box::new(|i| RecallQuery {
                vector: Some(q.vectors[i].clone()),
                ..recall("", None)
            }),
        ),
    ];
    for (name, make) in &cases {
        let (mut samples, found) = time(iterations, QUERIES, |i| {
            let query = make(i);
            async move { Ok(store.recall_memories(&query).await?.len()) }
        })
        .await?;
        print(backend, name, &mut samples, found);
    }
    let (mut samples, found) = time(iterations, QUERIES, |i| {
        let search = SessionSearch {
            scope: SCOPE.into(),
            text: q.alerts[i].1.clone(),
            alert_type: None,
            days_back: None,
            limit: 5,
        };
        async move { Ok(store.search_past_sessions(&search).await?.len()) }
    })
    .await?;
    print(
        backend,
        "search past sessions: alert text",
        &mut samples,
        found,
    );
    let (mut samples, found) = time(iterations, QUERIES, |i| {
        let search = SessionSearch {
            scope: SCOPE.into(),
            text: q.alerts[i].1.clone(),
            alert_type: Some(q.alerts[i].0.clone()),
            days_back: Some(30),
            limit: 5,
        };
        async move { Ok(store.search_past_sessions(&search).await?.len()) }
    })
    .await?;
    print(
        backend,
        "search past sessions: type, 30 days",
        &mut samples,
        found,
    );
    Ok(())
}

async fn seed<'e, E>(executor: E, statements: &[String]) -> Result<(), BoxError>
where
    E: sqlx::Executor<'e> + Copy,
{
    for sql in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.as_str()))
            .execute(executor)
            .await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let mut arg = |default: usize| -> Result<usize, BoxError> {
        Ok(args
            .next()
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let memories = arg(100_000)?;
    let sessions = arg(20_000)?;
    let iterations = arg(300)?.max(1);
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "{memories} memories in {SCOPE} (+{} elsewhere), {sessions} sessions, {iterations} timed \
         calls per case ({profile} build)",
        memories / 10
    );
    let options = ConnectOptions {
        max_connections: 4,
        ..ConnectOptions::default()
    };
    let keep = std::env::var_os("TARSY_BENCH_KEEP").is_some();
    // Databases kept by an earlier run, measured again as they are.
    let reuse = [
        ("sqlite", std::env::var("TARSY_BENCH_SQLITE_URL").ok()),
        ("postgres", std::env::var("TARSY_BENCH_POSTGRES_URL").ok()),
    ];
    if reuse.iter().any(|(_, url)| url.is_some()) {
        for (backend, url) in reuse {
            if let Some(url) = url {
                let store = Store::connect_with(&url, options.clone()).await?;
                let measured = measure(&store, backend, iterations).await;
                store.close().await;
                measured?;
            }
        }
        return Ok(());
    }

    let path =
        std::env::temp_dir().join(format!("tarsy_memory_{}.db", uuid::Uuid::new_v4().simple()));
    let url = format!("sqlite:{}", path.display());
    let result = async {
        Store::connect(&url).await?.close().await;
        let statements = inserts(BackendKind::Sqlite, memories, sessions);
        let t0 = Instant::now();
        let pool = sqlx::SqlitePool::connect(&url).await?;
        seed(&pool, &statements).await?;
        pool.close().await;
        println!("sqlite    seeded in {:.1}s", t0.elapsed().as_secs_f64());
        let store = Store::connect_with(&url, options.clone()).await?;
        let measured = measure(&store, "sqlite", iterations).await;
        store.close().await;
        measured
    }
    .await;
    bench_support::finish_sqlite(&path, keep);
    result?;

    let db = match tarsy_store::testing::TestDatabase::create("tarsy_bench").await {
        Ok(db) => db,
        Err(e) => {
            println!("postgres  skipped: {e}");
            return Ok(());
        }
    };
    let result = async {
        let store = Store::connect_with(db.url(), options).await?;
        let pool = store.postgres_pool().expect("a Postgres store").clone();
        let statements = inserts(BackendKind::Postgres, memories, sessions);
        let t0 = Instant::now();
        seed(&pool, &statements).await?;
        // What autovacuum does to live tables: statistics (the full-text
        // tables' too) and the visibility map.
        sqlx::raw_sql("VACUUM ANALYZE").execute(&pool).await?;
        println!("postgres  seeded in {:.1}s", t0.elapsed().as_secs_f64());
        let measured = measure(&store, "postgres", iterations).await;
        store.close().await;
        measured
    }
    .await;
    if keep {
        println!("postgres  kept: {}", db.url());
        std::mem::forget(db);
    } else {
        db.drop_database().await?;
    }
    result
}
