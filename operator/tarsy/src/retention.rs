//! Retention flags, the same for `tarsy serve` and `tarsy controller`. Each
//! overrides its field of the defaults (`retention` of a local Defaults
//! document, or the `TARSY_*` variables).

use std::time::Duration;

use anyhow::Context;
use tarsy_config::{Defaults, Retention};

/// How long sessions and live events are kept (Go durations; `0` keeps
/// forever).
#[derive(Debug, Clone, clap::Args)]
pub struct RetentionArgs {
    /// Finished sessions are hidden from lists this long after they
    /// finished (still readable by id). Default: 2160h
    /// (TARSY_RETENTION_HIDE_AFTER).
    #[arg(long)]
    pub retention_hide_after: Option<String>,
    /// Hidden sessions are removed, with their timelines, this long after
    /// they were hidden. Default: 720h (TARSY_RETENTION_PURGE_AFTER).
    #[arg(long)]
    pub retention_purge_after: Option<String>,
    /// Live events (WebSocket catch-up) are deleted after this long.
    /// Default: 24h (TARSY_EVENT_TTL).
    #[arg(long)]
    pub event_ttl: Option<String>,
    /// Time between two retention sweeps. Default: 1h
    /// (TARSY_RETENTION_INTERVAL).
    #[arg(long)]
    pub retention_interval: Option<String>,
}

impl RetentionArgs {
    /// The retention and the sweep interval: `defaults` with these flags.
    pub fn retention(&self, defaults: &Defaults) -> anyhow::Result<(Retention, Duration)> {
        let mut retention = defaults.retention;
        for (flag, value, target) in [
            (
                "--retention-hide-after",
                &self.retention_hide_after,
                &mut retention.hide_after,
            ),
            (
                "--retention-purge-after",
                &self.retention_purge_after,
                &mut retention.purge_after,
            ),
            ("--event-ttl", &self.event_ttl, &mut retention.event_ttl),
        ] {
            if let Some(v) = value {
                *target = optional(flag, v)?;
            }
        }
        let interval = match &self.retention_interval {
            Some(v) => duration("--retention-interval", v)?,
            None => defaults.retention_interval,
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(hide: Option<&str>, interval: Option<&str>) -> RetentionArgs {
        RetentionArgs {
            retention_hide_after: hide.map(String::from),
            retention_purge_after: None,
            event_ttl: None,
            retention_interval: interval.map(String::from),
        }
    }

    #[test]
    fn flags_override_the_defaults_field_by_field() {
        let mut defaults = Defaults::default();
        defaults.retention.purge_after = None;
        defaults.retention_interval = Duration::from_secs(600);

        let (r, interval) = flags(None, None).retention(&defaults).unwrap();
        assert_eq!(r, defaults.retention);
        assert_eq!(interval, Duration::from_secs(600));

        let (r, interval) = flags(Some("0"), Some("5m")).retention(&defaults).unwrap();
        assert_eq!(r.hide_after, None, "0 keeps forever");
        assert_eq!(r.purge_after, None);
        assert_eq!(r.event_ttl, defaults.retention.event_ttl);
        assert_eq!(interval, Duration::from_secs(300));
    }

    #[test]
    fn bad_flags_name_themselves() {
        let d = Defaults::default();
        let e = flags(Some("soon"), None).retention(&d).unwrap_err();
        assert!(format!("{e:#}").contains("--retention-hide-after"), "{e:#}");
        let e = flags(None, Some("0")).retention(&d).unwrap_err();
        assert!(e.to_string().contains("--retention-interval"), "{e}");
    }
}
