//! Loop state shared by the iterating strategies.

/// After this many consecutive timed-out iterations the execution aborts.
pub(crate) const MAX_CONSECUTIVE_TIMEOUTS: u32 = 2;

/// Where an iteration loop stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct IterationState {
    /// Current iteration, from 1.
    pub(crate) current_iteration: u32,
    /// Iteration budget.
    pub(crate) max_iterations: u32,
    /// The last LLM call or tool call failed.
    pub(crate) last_interaction_failed: bool,
    /// Why it failed.
    pub(crate) last_error_message: String,
    /// Timeouts in a row.
    pub(crate) consecutive_timeout_failures: u32,
}

impl IterationState {
    /// A fresh state for `max_iterations`.
    pub(crate) fn new(max_iterations: u32) -> Self {
        Self {
            max_iterations,
            ..Self::default()
        }
    }

    /// True once [`MAX_CONSECUTIVE_TIMEOUTS`] timeouts happened in a row.
    pub(crate) fn should_abort_on_timeouts(&self) -> bool {
        self.consecutive_timeout_failures >= MAX_CONSECUTIVE_TIMEOUTS
    }

    /// A successful interaction clears the failure tracking.
    pub(crate) fn record_success(&mut self) {
        self.last_interaction_failed = false;
        self.last_error_message.clear();
        self.consecutive_timeout_failures = 0;
    }

    /// A failed interaction; timeouts count towards the abort, other
    /// failures reset the streak.
    pub(crate) fn record_failure(&mut self, message: impl Into<String>, is_timeout: bool) {
        self.last_interaction_failed = true;
        self.last_error_message = message.into();
        if is_timeout {
            self.consecutive_timeout_failures += 1;
        } else {
            self.consecutive_timeout_failures = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_timeouts_in_a_row_abort_but_other_failures_reset() {
        let mut s = IterationState::new(5);
        s.record_failure("t1", true);
        assert!(!s.should_abort_on_timeouts());
        s.record_failure("llm", false);
        s.record_failure("t2", true);
        assert!(!s.should_abort_on_timeouts());
        s.record_failure("t3", true);
        assert!(s.should_abort_on_timeouts());
        s.record_success();
        assert!(!s.should_abort_on_timeouts());
        assert!(!s.last_interaction_failed);
    }
}
