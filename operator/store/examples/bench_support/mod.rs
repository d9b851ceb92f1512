//! What the store benches share: a deterministic generator for their rows,
//! SQL literals for bulk inserts, percentiles of timed samples.

// Each bench uses a part of this module.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use tarsy_store::{ConnectOptions, Store};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The chains sessions are spread over.
pub const CHAINS: [&str; 5] = [
    "kubernetes",
    "database",
    "network",
    "storage",
    "application",
];

/// The alert types sessions are spread over.
pub const ALERT_TYPES: [&str; 10] = [
    "PodCrashLooping",
    "KubeNodeNotReady",
    "HighErrorRate",
    "PostgresReplicationLag",
    "DiskFillingUp",
    "CertificateExpiring",
    "HighLatency",
    "TargetDown",
    "OOMKilled",
    "DeploymentReplicasMismatch",
];

/// A small deterministic generator (xorshift64*): the same rows every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// 0..n
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }

    /// A number in -1..=1.
    pub fn unit(&mut self) -> f32 {
        (self.below(2_000_001) as f32 / 1_000_000.0) - 1.0
    }
}

/// A SQL timestamp literal.
pub fn ts(t: DateTime<Utc>) -> String {
    format!("'{}'", t.to_rfc3339_opts(SecondsFormat::Micros, false))
}

/// A SQL string literal, or NULL.
pub fn text(v: Option<&str>) -> String {
    v.map_or_else(
        || "NULL".to_string(),
        |s| format!("'{}'", s.replace('\'', "''")),
    )
}

/// The `q` quantile (0..=1) of `sorted` samples.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Keeps the bench's SQLite database (says where) or removes its files.
pub fn finish_sqlite(path: &std::path::Path, keep: bool) {
    if keep {
        println!("sqlite    kept: {}", path.display());
    } else {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}

/// Seeds `statements` into a fresh SQLite file (WAL, as local mode runs it;
/// left as the store leaves it) and a fresh Postgres database (the test
/// server of `TARSY_TEST_DATABASE_URL`; skipped when unreachable, its
/// `analyze` statements run after the seed as autovacuum would), and runs
/// `measure` on each with the backend's name. `TARSY_BENCH_KEEP=1` keeps
/// both databases (and names them) for EXPLAIN; otherwise they are removed.
pub async fn on_both_backends(
    name: &str,
    statements: &[String],
    options: ConnectOptions,
    analyze: &str,
    measure: impl AsyncFn(&Store, &'static str) -> Result<(), BoxError>,
) -> Result<(), BoxError> {
    let keep = std::env::var_os("TARSY_BENCH_KEEP").is_some();
    let path = std::env::temp_dir().join(format!("{name}_{}.db", uuid::Uuid::new_v4().simple()));
    let url = format!("sqlite:{}", path.display());
    let result = async {
        // Migrate through the store, seed through a plain pool.
        Store::connect(&url).await?.close().await;
        let t0 = Instant::now();
        let pool = sqlx::SqlitePool::connect(&url).await?;
        for sql in statements {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.as_str()))
                .execute(&pool)
                .await?;
        }
        pool.close().await;
        println!("sqlite    seeded in {:.1}s", t0.elapsed().as_secs_f64());
        let store = Store::connect_with(&url, options.clone()).await?;
        let measured = measure(&store, "sqlite").await;
        store.close().await;
        measured
    }
    .await;
    finish_sqlite(&path, keep);
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
        let t0 = Instant::now();
        for sql in statements {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.as_str()))
                .execute(&pool)
                .await?;
        }
        sqlx::raw_sql(sqlx::AssertSqlSafe(analyze))
            .execute(&pool)
            .await?;
        println!("postgres  seeded in {:.1}s", t0.elapsed().as_secs_f64());
        let measured = measure(&store, "postgres").await;
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
