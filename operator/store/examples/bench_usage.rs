//! Benchmark of the usage page's aggregate (`Store::usage_summary`, one call
//! of `GET /api/v1/usage`) on a large store: seeds SESSIONS sessions
//! (default 100,000, created over 90 days, in 10 alert types, 5 chains and
//! 20 scopes) with their usage rows (1–3 models each, as the trigger on LLM
//! interactions keeps them), in a fresh SQLite file (WAL, as local mode
//! runs it, left as the store leaves it) and a fresh Postgres database
//! (analysed, as autovacuum would), then prints p50/p95 of the
//! summary over the last 7 days, the last 30 days and all 90, ranked by
//! cost and by tokens. The budget is 200 ms per call.
//!
//! ```text
//! cargo run --release -p tarsy-store --example bench_usage [-- SESSIONS [ITERATIONS]]
//! ```
//!
//! Postgres is taken from `TARSY_TEST_DATABASE_URL` (default: the test
//! server); a scratch database is created and dropped. If it is unreachable
//! only SQLite is measured. With `TARSY_BENCH_KEEP=1` both databases are
//! kept (and named) for EXPLAIN.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use tarsy_store::{ConnectOptions, Store, UsageFilter, UsageRank};

mod bench_support;
use bench_support::{ALERT_TYPES, BoxError, CHAINS, Rng, text, ts};

const BATCH: usize = 1_000;
/// LLMProvider, model, price per token (none: no price).
const MODELS: [(&str, &str, Option<f64>); 4] = [
    ("gemini", "gemini-2.5-pro", Some(3e-6)),
    ("gemini-flash", "gemini-2.5-flash", Some(6e-7)),
    ("claude", "claude-sonnet-4-5", Some(5e-6)),
    ("local", "llama-3.3-70b", None),
];

const SESSION_COLUMNS: &str = "id, alert_data, alert_type, chain_id, status, created_at, \
     started_at, completed_at, memory_scope";
const USAGE_COLUMNS: &str = "session_id, provider, model, calls, input_tokens, output_tokens, \
     thinking_tokens, cached_input_tokens, total_tokens, cost_usd, unpriced_calls";

/// The window's end: the newest session is created just before it.
fn end() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-04-01T00:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

/// The INSERT statements of `n` sessions and their usage rows.
fn inserts(n: usize) -> Vec<String> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let span = 90 * 24 * 3600 * 1_000_000_i64;
    let start = end() - TimeDelta::microseconds(span);
    let mut out = Vec::new();
    for first in (0..n).step_by(BATCH) {
        let mut sessions = format!("INSERT INTO alert_sessions ({SESSION_COLUMNS}) VALUES ");
        let mut usage = format!("INSERT INTO session_usage ({USAGE_COLUMNS}) VALUES ");
        let mut first_usage = true;
        for i in first..(first + BATCH).min(n) {
            let created = start + TimeDelta::microseconds(span * i as i64 / n.max(1) as i64);
            let done = created + TimeDelta::seconds(60 + rng.below(1800) as i64);
            if i > first {
                sessions.push_str(",\n");
            }
            let _ = write!(
                sessions,
                "('usage-{i:07}', '{{}}', '{}', '{}', 'completed', {}, {}, {}, {})",
                rng.pick(&ALERT_TYPES),
                rng.pick(&CHAINS),
                ts(created),
                ts(created),
                ts(done),
                text(Some(&format!("ns-{}", rng.below(20)))),
            );
            let models = 1 + rng.below(3) as usize;
            let offset = rng.below(MODELS.len() as u64) as usize;
            for m in 0..models {
                let (provider, model, price) = MODELS[(offset + m) % MODELS.len()];
                let calls = 1 + rng.below(30) as i64;
                let input = calls * (2_000 + rng.below(30_000) as i64);
                let output = calls * (100 + rng.below(1_500) as i64);
                let thinking = calls * rng.below(2_000) as i64;
                let cached = input / (1 + rng.below(4) as i64);
                let total = input + output + thinking;
                let (cost, unpriced) = match price {
                    Some(p) => (total as f64 * p, 0),
                    None => (0.0, calls),
                };
                if !first_usage {
                    usage.push_str(",\n");
                }
                first_usage = false;
                let _ = write!(
                    usage,
                    "('usage-{i:07}', '{provider}', '{model}', {calls}, {input}, {output}, \
                     {thinking}, {cached}, {total}, {cost}, {unpriced})"
                );
            }
        }
        out.push(sessions);
        out.push(usage);
    }
    out
}

async fn measure(store: &Store, backend: &str, iterations: usize) -> Result<(), BoxError> {
    for (window, days) in [("7d", 7), ("30d", 30), ("90d (all)", 90)] {
        for rank in [UsageRank::Cost, UsageRank::Tokens] {
            let filter = UsageFilter {
                from: end() - TimeDelta::days(days),
                to: end(),
                rank,
            };
            let mut sessions = 0;
            for _ in 0..3 {
                sessions = store.usage_summary(&filter).await?.sessions;
            }
            let mut samples = Vec::with_capacity(iterations);
            for _ in 0..iterations {
                let t0 = Instant::now();
                store.usage_summary(&filter).await?;
                samples.push(t0.elapsed());
            }
            samples.sort();
            let pick = |q: f64| bench_support::quantile(&samples, q);
            let (p50, p95) = (pick(0.5), pick(0.95));
            let over = if p95 > Duration::from_millis(200) {
                "  OVER 200 ms"
            } else {
                ""
            };
            let name = format!("usage summary {window}, top by {rank:?}");
            println!(
                "{backend:<9} {name:<40} sessions={sessions:<6} n={:<3} p50={:>7.2}ms p95={:>7.2}ms{over}",
                samples.len(),
                p50.as_secs_f64() * 1e3,
                p95.as_secs_f64() * 1e3,
            );
        }
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
    let sessions = arg(100_000)?;
    let iterations = arg(20)?.max(1);
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("{sessions} sessions, {iterations} timed runs per query ({profile} build)");
    let statements = inserts(sessions);
    let options = ConnectOptions {
        max_connections: 4,
        ..ConnectOptions::default()
    };

    bench_support::on_both_backends(
        "tarsy_usage",
        &statements,
        options,
        "VACUUM ANALYZE alert_sessions, session_usage",
        async |store, backend| measure(store, backend, iterations).await,
    )
    .await
}
