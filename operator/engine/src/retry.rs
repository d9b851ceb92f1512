//! Waiting out an unreachable LLM service.
//!
//! A call that fails because the LLM service itself cannot be reached
//! ([`LlmErrorInfo::is_service_unavailable`]: connection refused or reset,
//! `Unavailable` from the channel, a stream cut by the transport) is tried
//! again on the same provider after a growing, jittered wait, until the
//! iteration's deadline: a restart of the service (a rollout) then costs an
//! investigation a few seconds, not its iterations. The waits neither count
//! against the provider's circuit breaker nor walk the fallback chain: the
//! provider was not asked, and every provider goes through the same service.
//!
//! The schedule is `backon`'s exponential backoff. The attempts are made by
//! the engine's call loop (`run::llm_call`) rather than `backon`'s
//! `Retryable`: each one is recorded, each wait is announced on the
//! timeline first and gives way to cancellation and the session deadline,
//! and all of that needs the run the loop holds.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;

use crate::llm::LlmErrorInfo;
use crate::recording::EventHandle;

/// How long the engine waits between attempts while the LLM service is
/// unreachable. Each wait doubles, starting at `initial_delay`; with
/// `jitter`, up to as much again is added at random (so that executions
/// cut off by the same restart do not come back in step); no wait is longer
/// than `max_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceRetry {
    /// The first wait.
    pub initial_delay: Duration,
    /// The longest wait.
    pub max_delay: Duration,
    /// Randomize the waits.
    pub jitter: bool,
}

impl Default for ServiceRetry {
    /// 250 ms, doubling to at most 5 s, jittered.
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(5),
            jitter: true,
        }
    }
}

impl ServiceRetry {
    /// Waits from `initial_delay` doubling up to `max_delay`, without jitter
    /// (tests: short and predictable).
    pub fn new(initial_delay: Duration, max_delay: Duration) -> Self {
        Self {
            initial_delay,
            max_delay,
            jitter: false,
        }
    }

    fn schedule(&self) -> ExponentialBackoff {
        let builder = ExponentialBuilder::new()
            .with_min_delay(self.initial_delay)
            .with_max_delay(self.max_delay)
            // The iteration deadline bounds the attempts, not a count.
            .without_max_times();
        if self.jitter {
            builder.with_jitter().build()
        } else {
            builder.build()
        }
    }
}

/// How an outage ended for the call that met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutageEnd {
    /// An attempt reached the service again.
    Reached,
    /// The iteration deadline came (or the next attempt would be too close
    /// to it).
    GaveUp,
    /// The run stopped (cancelled, session timeout) before either.
    Stopped(&'static str),
}

/// One call's consecutive attempts that found the LLM service unreachable,
/// and the timeline event saying so (one per outage, updated as it goes).
#[derive(Debug)]
pub(crate) struct Outage {
    schedule: ExponentialBackoff,
    max_delay: Duration,
    since: Instant,
    /// Failed attempts so far.
    pub failed: u32,
    /// What the last one failed with.
    pub last_error: String,
    /// The timeline marker, once created.
    pub marker: Option<EventHandle>,
}

impl Outage {
    /// An outage starting now.
    pub fn new(policy: &ServiceRetry) -> Self {
        Self {
            schedule: policy.schedule(),
            max_delay: policy.max_delay,
            since: Instant::now(),
            failed: 0,
            last_error: String::new(),
            marker: None,
        }
    }

    /// Counts a failed attempt and returns the wait before the next one, or
    /// `None` when that attempt would have less time before `deadline` than
    /// the wait before it: one started right at the deadline would only be
    /// cut off by it.
    pub fn failed_attempt(&mut self, error: &LlmErrorInfo, deadline: Instant) -> Option<Duration> {
        self.failed += 1;
        self.last_error.clone_from(&error.message);
        // Jitter may go past the cap; the cap is what the setting promises.
        let wait = self.schedule.next()?.min(self.max_delay);
        (Instant::now() + wait * 2 < deadline).then_some(wait)
    }

    /// How long the service has been unreachable.
    pub fn duration(&self) -> Duration {
        self.since.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadline_in(d: Duration) -> Instant {
        Instant::now() + d
    }

    fn err() -> LlmErrorInfo {
        LlmErrorInfo::service_unavailable("tcp connect error")
    }

    #[tokio::test(start_paused = true)]
    async fn waits_double_up_to_the_cap() {
        let policy = ServiceRetry::new(Duration::from_millis(250), Duration::from_secs(2));
        let mut o = Outage::new(&policy);
        let far = deadline_in(Duration::from_secs(600));
        let waits: Vec<u64> = (0..6)
            .map(|_| o.failed_attempt(&err(), far).unwrap().as_millis() as u64)
            .collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000]);
        assert_eq!(o.failed, 6);
    }

    #[tokio::test(start_paused = true)]
    async fn jittered_waits_stay_between_the_base_and_the_cap() {
        let policy = ServiceRetry::default();
        let far = deadline_in(Duration::from_secs(600));
        for _ in 0..20 {
            let mut o = Outage::new(&policy);
            let first = o.failed_attempt(&err(), far).unwrap();
            assert!(
                first >= Duration::from_millis(250) && first < Duration::from_millis(500),
                "{first:?}"
            );
            for _ in 0..10 {
                let w = o.failed_attempt(&err(), far).unwrap();
                assert!(w <= Duration::from_secs(5), "{w:?}");
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_attempt_is_made_too_close_to_the_deadline() {
        let policy = ServiceRetry::new(Duration::from_millis(400), Duration::from_secs(5));
        let mut o = Outage::new(&policy);
        let deadline = deadline_in(Duration::from_secs(1));
        // Attempt 2 at 400 ms, 600 ms before the deadline.
        assert_eq!(
            o.failed_attempt(&err(), deadline),
            Some(Duration::from_millis(400))
        );
        tokio::time::advance(Duration::from_millis(400)).await;
        // Attempt 3 would start at 1.2 s, past the deadline.
        assert_eq!(o.failed_attempt(&err(), deadline), None);
        assert_eq!(o.failed, 2);
        assert_eq!(o.last_error, "tcp connect error");
        assert_eq!(o.duration(), Duration::from_millis(400));

        // Attempt 2 would start at 400 ms, 300 ms before the deadline.
        let mut o = Outage::new(&policy);
        assert_eq!(
            o.failed_attempt(&err(), deadline_in(Duration::from_millis(700))),
            None
        );
    }
}
