//! Why a call fails and a run stops, and what a failed model call leaves on
//! the timeline.

use serde_json::json;
use tarsy_core::{RecordError, TimelineEventStatus};

use super::Run;
use crate::llm::LlmErrorInfo;

/// Why a run stops before its strategy decides the outcome.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The cancellation token fired.
    Cancelled,
    /// The session deadline passed.
    SessionTimeout,
    /// Storage failed (infrastructure).
    Record(RecordError),
    /// The LLM service rejected the configuration itself (bad credentials,
    /// unknown backend): no feedback to the model can fix it, so the run fails
    /// at once instead of spending every remaining iteration on it.
    Fatal(String),
}

/// LLM service error codes that mean the configuration is wrong.
const FATAL_LLM_CODES: &[&str] = &["credentials", "invalid_backend"];

impl From<RecordError> for Stop {
    fn from(e: RecordError) -> Self {
        Stop::Record(e)
    }
}

/// Why a call (LLM or tool) did not produce a result.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The model or service failed.
    Llm(LlmErrorInfo),
    /// The iteration's time ran out.
    IterationTimeout,
    /// The whole run must stop.
    Stop(Stop),
}

impl From<RecordError> for CallError {
    fn from(e: RecordError) -> Self {
        CallError::Stop(Stop::Record(e))
    }
}

impl From<Stop> for CallError {
    fn from(s: Stop) -> Self {
        CallError::Stop(s)
    }
}

/// What cut a wait short.
#[derive(Debug, Clone, Copy)]
pub(super) enum Interrupt {
    Cancelled,
    SessionTimeout,
    IterationTimeout,
}

impl Interrupt {
    /// The status an event left open by it gets.
    pub(super) fn status(self) -> TimelineEventStatus {
        match self {
            Interrupt::Cancelled => TimelineEventStatus::Cancelled,
            Interrupt::SessionTimeout | Interrupt::IterationTimeout => {
                TimelineEventStatus::TimedOut
            }
        }
    }

    /// A short description for event texts.
    pub(super) fn describe(self) -> &'static str {
        match self {
            Interrupt::Cancelled => "cancelled",
            Interrupt::SessionTimeout => "session timeout reached",
            Interrupt::IterationTimeout => "iteration timed out",
        }
    }
}

impl From<Interrupt> for CallError {
    fn from(i: Interrupt) -> Self {
        match i {
            Interrupt::Cancelled => CallError::Stop(Stop::Cancelled),
            Interrupt::SessionTimeout => CallError::Stop(Stop::SessionTimeout),
            Interrupt::IterationTimeout => CallError::IterationTimeout,
        }
    }
}

impl Run<'_> {
    /// Records a failed LLM call of the loop: `error` event, failure in the
    /// iteration state. Returns the error text for the feedback message; a
    /// stop passes through as `Err`.
    pub async fn llm_failure(&mut self, err: CallError) -> Result<String, Stop> {
        let (message, is_timeout, meta) = match err {
            CallError::Llm(e) => (
                format!("LLM call failed: {} ({})", e.message, e.code),
                false,
                json!({"kind": "llm_error", "code": e.code, "retryable": e.retryable}),
            ),
            CallError::IterationTimeout => (
                format!(
                    "Iteration {} timed out after {}s",
                    self.state.current_iteration,
                    self.ctx.config.iteration_timeout.as_secs()
                ),
                true,
                json!({"kind": "timeout"}),
            ),
            CallError::Stop(stop) => return Err(stop),
        };
        let fatal = meta
            .get("code")
            .and_then(|c| c.as_str())
            .is_some_and(|c| FATAL_LLM_CODES.contains(&c))
            && meta.get("retryable").and_then(|r| r.as_bool()) == Some(false);
        self.error_event(&message, meta).await?;
        if fatal {
            return Err(Stop::Fatal(message));
        }
        self.state.record_failure(message.clone(), is_timeout);
        Ok(message)
    }

    /// The aborted-after-timeouts result message.
    pub fn timeout_abort_message(&self) -> String {
        format!(
            "aborted after {} consecutive iteration timeouts: {}",
            self.state.consecutive_timeout_failures, self.state.last_error_message
        )
    }
}
