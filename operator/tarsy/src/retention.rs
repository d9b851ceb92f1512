//! Retention flags, the same for `tarsy serve` and `tarsy controller`.

use std::time::Duration;

use anyhow::Context;
use tarsy_exec::retention::Retention;

/// How long sessions and live events are kept (Go durations; `0` keeps
/// forever).
#[derive(Debug, Clone, clap::Args)]
pub struct RetentionArgs {
    /// Finished sessions are hidden from lists this long after they
    /// finished (still readable by id).
    #[arg(long, env = "TARSY_RETENTION_HIDE_AFTER", default_value = "2160h")]
    pub retention_hide_after: String,
    /// Hidden sessions are removed, with their timelines, this long after
    /// they were hidden.
    #[arg(long, env = "TARSY_RETENTION_PURGE_AFTER", default_value = "720h")]
    pub retention_purge_after: String,
    /// Live events (WebSocket catch-up) are deleted after this long.
    #[arg(long, env = "TARSY_EVENT_TTL", default_value = "24h")]
    pub event_ttl: String,
    /// Time between two retention sweeps.
    #[arg(long, env = "TARSY_RETENTION_INTERVAL", default_value = "1h")]
    pub retention_interval: String,
}

impl RetentionArgs {
    /// The retention and the sweep interval.
    pub fn retention(&self) -> anyhow::Result<(Retention, Duration)> {
        let retention = Retention {
            hide_after: optional("--retention-hide-after", &self.retention_hide_after)?,
            purge_after: optional("--retention-purge-after", &self.retention_purge_after)?,
            event_ttl: optional("--event-ttl", &self.event_ttl)?,
        };
        let interval = duration("--retention-interval", &self.retention_interval)?;
        anyhow::ensure!(!interval.is_zero(), "--retention-interval must be positive");
        Ok((retention, interval))
    }
}

/// A Go duration; `0` means never.
pub(crate) fn optional(flag: &str, value: &str) -> anyhow::Result<Option<Duration>> {
    let d = duration(flag, value)?;
    Ok((!d.is_zero()).then_some(d))
}

fn duration(flag: &str, value: &str) -> anyhow::Result<Duration> {
    tarsy_crds::parse_duration(value).with_context(|| format!("{flag} {value:?}"))
}
