//! What the store benches share: a deterministic generator for their rows,
//! SQL literals for bulk inserts, percentiles of timed samples.

// Each bench uses a part of this module.
#![allow(dead_code)]

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
