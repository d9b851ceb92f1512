//! Benchmark of the triage page's queries and the session list's review and
//! score filters on a large table: seeds SESSIONS sessions (default
//! 100,000) in a fresh SQLite file (WAL, as local mode runs it) and a fresh
//! Postgres database, then times each `list_sessions` call (page + COUNT)
//! and prints p50/p95 per query and backend. The budget is 100 ms per
//! triage query.
//!
//! ```text
//! cargo run --release -p tarsy-store --example bench_triage [-- SESSIONS [FINISHED_PERCENT [ITERATIONS]]]
//! ```
//!
//! FINISHED_PERCENT (default 33) of the sessions have finished: of those
//! 40% need review, 10% are being reviewed, 50% are reviewed (rated or
//! acknowledged; cancelled ones are reviewed by TARSy), 70% carry a score
//! (0–100, with 0–2 failure tags) and 1% are soft-deleted; the others are
//! pending, in progress or cancelling. Rows are written with one multi-row
//! INSERT per 1,000 sessions (values generated here, deterministically),
//! then the tables are analysed on Postgres (what autovacuum does on a live
//! table); SQLite is left as the store leaves it.
//!
//! Postgres is taken from `TARSY_TEST_DATABASE_URL` (default: the test
//! server); a scratch database is created and dropped. If it is unreachable
//! only SQLite is measured. With `TARSY_BENCH_KEEP=1` both databases are
//! kept (and named) for EXPLAIN.

use std::fmt::Write as _;
use std::future::Future;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, TimeZone, Utc};
use tarsy_core::{ReviewRating, ReviewStatus, SessionStatus};
use tarsy_store::{ConnectOptions, SessionFilter, Store};

mod bench_support;
use bench_support::{ALERT_TYPES, BoxError, CHAINS, Rng, text, ts};

const BATCH: usize = 1_000;
const TAGS: [&str; 6] = [
    "premature-conclusion",
    "missed-available-tool",
    "unsupported-confidence",
    "incomplete-evidence",
    "hallucinated-evidence",
    "wrong-conclusion",
];
const REVIEWERS: [&str; 4] = ["alice", "bob", "carol", "dave"];

const COLUMNS: &str = "id, alert_data, alert_type, chain_id, status, author, pod_id, \
     final_analysis, executive_summary, created_at, started_at, completed_at, \
     last_interaction_at, deleted_at, score_status, score, score_failure_tags, review_status, \
     review_assignee, review_rating, reviewed_at";

/// The VALUES tuple of session `i` of `n` (created over the last 90 days,
/// oldest first).
fn row(i: usize, n: usize, finished_percent: u64, rng: &mut Rng, out: &mut String) {
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let span = 90 * 24 * 3600 * 1_000_000_i64;
    let created = start + TimeDelta::microseconds(span * i as i64 / n.max(1) as i64);
    let alert_type = rng.pick(&ALERT_TYPES);
    let chain = rng.pick(&CHAINS);
    let alert_data = format!(
        "{{\"alertname\": \"{alert_type}\", \"namespace\": \"ns-{}\", \"pod\": \"api-{}\", \
         \"severity\": \"warning\", \"summary\": \"{alert_type} has been firing for 10 minutes \
         on the production cluster\"}}",
        rng.below(50),
        rng.below(10_000)
    );
    let started = created + TimeDelta::seconds(rng.below(60) as i64);
    let mut completed = None;
    let (status, review, score) = if rng.chance(finished_percent) {
        let status = match rng.below(100) {
            0..80 => SessionStatus::Completed,
            80..95 => SessionStatus::Failed,
            95..98 => SessionStatus::TimedOut,
            _ => SessionStatus::Cancelled,
        };
        completed = Some(started + TimeDelta::seconds(60 + rng.below(1800) as i64));
        let review = if status == SessionStatus::Cancelled {
            ReviewStatus::Reviewed
        } else {
            match rng.below(100) {
                0..40 => ReviewStatus::NeedsReview,
                40..50 => ReviewStatus::InProgress,
                _ => ReviewStatus::Reviewed,
            }
        };
        let score = (status != SessionStatus::Cancelled && rng.chance(70)).then(|| {
            let tags: Vec<String> = (0..rng.below(3))
                .map(|_| format!("\"{}\"", rng.pick(&TAGS)))
                .collect();
            (rng.below(101), format!("[{}]", tags.join(",")))
        });
        (status, Some(review), score)
    } else {
        let status = match rng.below(100) {
            0..10 => SessionStatus::Pending,
            10..95 => SessionStatus::InProgress,
            _ => SessionStatus::Cancelling,
        };
        (status, None, None)
    };
    let running = status != SessionStatus::Pending;
    let (assignee, rating, reviewed_at) = match (review, completed) {
        (Some(ReviewStatus::InProgress), _) => (Some(rng.pick(&REVIEWERS)), None, None),
        (Some(ReviewStatus::Reviewed), Some(done)) if status == SessionStatus::Cancelled => {
            (None, None, Some(done))
        }
        (Some(ReviewStatus::Reviewed), Some(done)) => {
            let rating = match rng.below(100) {
                0..55 => Some(ReviewRating::Accurate),
                55..75 => Some(ReviewRating::PartiallyAccurate),
                75..85 => Some(ReviewRating::Inaccurate),
                _ => None,
            };
            let at = done + TimeDelta::seconds(300 + rng.below(3 * 86_400) as i64);
            (Some(rng.pick(&REVIEWERS)), rating, Some(at))
        }
        _ => (None, None, None),
    };
    let deleted = completed.filter(|_| rng.chance(1));
    let finished = completed.is_some();
    let analysis = finished.then(|| {
        format!(
            "## Root cause\n{alert_type} in namespace ns-{}: the container exits with code 137 \
             after the memory limit is reached. {}",
            rng.below(50),
            "The deployment's memory limit is lower than its working set; logs show the \
             allocation pattern grows with request volume. "
                .repeat(8)
        )
    });
    let summary = finished.then(|| {
        format!("{alert_type}: the memory limit is too low for the working set; raise it.")
    });
    let _ = write!(
        out,
        "('bench-{i:07}', {}, '{alert_type}', '{chain}', '{}', {}, {}, {}, {}, {}, \
         {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
        text(Some(&alert_data)),
        status.as_str(),
        text(Some(rng.pick(&["alertmanager", "alice", "bob"]))),
        text(running.then_some("tarsy-0")),
        text(analysis.as_deref()),
        text(summary.as_deref()),
        ts(created),
        if running { ts(started) } else { "NULL".into() },
        completed.map_or("NULL".into(), ts),
        if running {
            ts(completed.unwrap_or(started))
        } else {
            "NULL".into()
        },
        deleted.map_or("NULL".into(), |d| ts(d + TimeDelta::days(30))),
        text(score.as_ref().map(|_| "completed")),
        score.as_ref().map_or("NULL".into(), |(s, _)| s.to_string()),
        text(score.as_ref().map(|(_, t)| t.as_str())),
        text(review.map(ReviewStatus::as_str)),
        text(assignee),
        text(rating.map(ReviewRating::as_str)),
        reviewed_at.map_or("NULL".into(), ts),
    );
}

/// The INSERT statements of `n` sessions, `BATCH` rows each.
fn inserts(n: usize, finished_percent: u64) -> Vec<String> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .step_by(BATCH)
        .map(|first| {
            let mut sql = format!("INSERT INTO alert_sessions ({COLUMNS}) VALUES ");
            for i in first..(first + BATCH).min(n) {
                if i > first {
                    sql.push_str(",\n");
                }
                row(i, n, finished_percent, &mut rng, &mut sql);
            }
            sql
        })
        .collect()
}

fn print(backend: &str, name: &str, samples: &mut [Duration], total: i64) {
    samples.sort();
    let pick = |q: f64| bench_support::quantile(samples, q);
    let (p50, p95) = (pick(0.5), pick(0.95));
    let over = if p95 > Duration::from_millis(100) {
        "  OVER 100 ms"
    } else {
        ""
    };
    println!(
        "{backend:<9} {name:<44} matches={total:<6} n={:<3} p50={:>7.2}ms p95={:>7.2}ms{over}",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3,
    );
}

async fn time<F, Fut>(iterations: usize, mut call: F) -> Result<(Vec<Duration>, i64), BoxError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<i64, BoxError>>,
{
    // Warm the caches (and the statement cache) first.
    let mut total = 0;
    for _ in 0..3 {
        total = call().await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t0 = Instant::now();
        call().await?;
        samples.push(t0.elapsed());
    }
    Ok((samples, total))
}

fn review(status: ReviewStatus) -> SessionFilter {
    SessionFilter {
        review_status: Some(status),
        ..SessionFilter::default()
    }
}

/// The triage endpoint's four groups (`GET /api/v1/triage`), limit 50.
fn triage() -> Vec<(&'static str, SessionFilter)> {
    let page = |f: SessionFilter| SessionFilter {
        limit: Some(50),
        ..f
    };
    vec![
        (
            "triage: investigating",
            page(SessionFilter {
                statuses: vec![
                    SessionStatus::Pending,
                    SessionStatus::InProgress,
                    SessionStatus::Cancelling,
                ],
                ..SessionFilter::default()
            }),
        ),
        (
            "triage: needs_review",
            page(review(ReviewStatus::NeedsReview)),
        ),
        (
            "triage: review in_progress",
            page(review(ReviewStatus::InProgress)),
        ),
        ("triage: reviewed", page(review(ReviewStatus::Reviewed))),
    ]
}

/// Session list pages (default size) with the review and score filters.
fn lists() -> Vec<(&'static str, SessionFilter)> {
    vec![
        (
            "list: review_status=needs_review",
            review(ReviewStatus::NeedsReview),
        ),
        (
            "list: score_min=90",
            SessionFilter {
                score_min: Some(90),
                ..SessionFilter::default()
            },
        ),
        (
            "list: score_max=20",
            SessionFilter {
                score_max: Some(20),
                ..SessionFilter::default()
            },
        ),
        (
            "list: failure_tag=wrong-conclusion",
            SessionFilter {
                failure_tag: Some("wrong-conclusion".into()),
                ..SessionFilter::default()
            },
        ),
        (
            "list: reviewed, rating=inaccurate",
            SessionFilter {
                rating: Some(ReviewRating::Inaccurate),
                ..review(ReviewStatus::Reviewed)
            },
        ),
        (
            "list: needs_review, score_max=40",
            SessionFilter {
                score_max: Some(40),
                ..review(ReviewStatus::NeedsReview)
            },
        ),
    ]
}

async fn measure(store: &Store, backend: &str, iterations: usize) -> Result<(), BoxError> {
    for (name, filter) in triage().into_iter().chain(lists()) {
        let (mut samples, total) = time(iterations, || async {
            Ok(store.list_sessions(&filter).await?.total)
        })
        .await?;
        print(backend, name, &mut samples, total);
    }
    // The endpoint runs its four queries at once.
    let groups = triage();
    let (mut samples, total) = time(iterations, || async {
        let [a, b, c, d] = [0, 1, 2, 3].map(|i| store.list_sessions(&groups[i].1));
        let (a, b, c, d) = tokio::try_join!(a, b, c, d)?;
        Ok(a.total + b.total + c.total + d.total)
    })
    .await?;
    print(
        backend,
        "triage endpoint (4 queries concurrently)",
        &mut samples,
        total,
    );
    // The quality page's aggregates over its default window (30 days)
    // and over everything.
    for (window, since) in [
        ("30d", Some(chrono::Utc::now() - chrono::Duration::days(30))),
        ("all", None),
    ] {
        let filter = tarsy_store::QualityFilter {
            since,
            ..Default::default()
        };
        let (mut samples, total) = time(iterations, || async {
            Ok(store.score_days(&filter).await?.len() as i64)
        })
        .await?;
        print(
            backend,
            &format!("quality {window}: scores by day"),
            &mut samples,
            total,
        );
        let (mut samples, total) = time(iterations, || async {
            Ok(store.failure_tag_counts(&filter).await?.len() as i64)
        })
        .await?;
        print(
            backend,
            &format!("quality {window}: failure tags"),
            &mut samples,
            total,
        );
        let (mut samples, total) = time(iterations, || async {
            Ok(store.ratings_against_scores(&filter, 20).await?.0.len() as i64)
        })
        .await?;
        print(
            backend,
            &format!("quality {window}: ratings against scores"),
            &mut samples,
            total,
        );
        let (mut samples, total) = time(iterations, || async {
            Ok(store.tool_reports(&filter, 2000).await?.len() as i64)
        })
        .await?;
        print(
            backend,
            &format!("quality {window}: tool reports"),
            &mut samples,
            total,
        );
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
    let finished_percent = arg(33)?.min(100) as u64;
    let iterations = arg(30)?.max(1);
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "{sessions} sessions, {finished_percent}% finished, {iterations} timed runs per query \
         ({profile} build)"
    );
    let t0 = Instant::now();
    let statements = inserts(sessions, finished_percent);
    println!("generated in {:.1}s", t0.elapsed().as_secs_f64());
    let options = ConnectOptions {
        max_connections: 4,
        ..ConnectOptions::default()
    };

    // What autovacuum does to a live table: statistics and the visibility
    // map (index-only counts).
    bench_support::on_both_backends(
        "tarsy_triage",
        &statements,
        options,
        "VACUUM ANALYZE alert_sessions",
        async |store, backend| measure(store, backend, iterations).await,
    )
    .await
}
