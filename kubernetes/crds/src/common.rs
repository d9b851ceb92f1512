//! What several statuses share: the execution phase (Kubernetes-style
//! CamelCase, unlike `tarsy-core`'s wire strings) and the bounds that keep
//! status objects small.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Largest alert payload, in bytes (1 MiB): `tarsy-core`'s, which the CEL
/// rule on `Alert.spec.data` states too.
pub use tarsy_core::MAX_ALERT_DATA_BYTES;

/// Upper bound, in characters, of free text kept in a status (final analysis,
/// executive summary, errors). Full text lives in Postgres.
pub const MAX_STATUS_TEXT_CHARS: usize = 16 * 1024;

/// Number of timeline events an AgentExecution status keeps.
pub const MAX_RECENT_TIMELINE: usize = 20;

/// Upper bound, in characters, of one recent-timeline snippet.
pub const MAX_SNIPPET_CHARS: usize = 512;

/// Marker appended to text clipped by [`clip`].
pub const CLIP_MARKER: &str = " [...]";

/// Clips `text` to at most `max_chars` characters (never splitting a
/// character), ending clipped text with [`CLIP_MARKER`]. Status writers use
/// it so that an object never outgrows its schema bounds.
pub fn clip(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let marker_len = CLIP_MARKER.chars().count();
    if max_chars <= marker_len {
        return text.chars().take(max_chars).collect();
    }
    let mut out: String = text.chars().take(max_chars - marker_len).collect();
    out.push_str(CLIP_MARKER);
    out
}

/// Lifecycle of a stage or an agent execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
pub enum ExecutionPhase {
    /// Created, not started.
    Pending,
    /// Running.
    Active,
    /// Finished with a result.
    Completed,
    /// Finished without a usable result.
    Failed,
    /// Stopped by a timeout.
    TimedOut,
    /// Stopped by a user.
    Cancelled,
}

impl ExecutionPhase {
    /// True for Completed, Failed, TimedOut and Cancelled.
    pub const fn is_terminal(self) -> bool {
        !matches!(self, Self::Pending | Self::Active)
    }
}

impl From<ExecutionPhase> for tarsy_core::ExecutionStatus {
    fn from(phase: ExecutionPhase) -> Self {
        use tarsy_core::ExecutionStatus as S;
        match phase {
            ExecutionPhase::Pending => S::Pending,
            ExecutionPhase::Active => S::Active,
            ExecutionPhase::Completed => S::Completed,
            ExecutionPhase::Failed => S::Failed,
            ExecutionPhase::TimedOut => S::TimedOut,
            ExecutionPhase::Cancelled => S::Cancelled,
        }
    }
}

impl From<tarsy_core::ExecutionStatus> for ExecutionPhase {
    fn from(status: tarsy_core::ExecutionStatus) -> Self {
        use tarsy_core::ExecutionStatus as S;
        match status {
            S::Pending => ExecutionPhase::Pending,
            S::Active => ExecutionPhase::Active,
            S::Completed => ExecutionPhase::Completed,
            S::Failed => ExecutionPhase::Failed,
            S::TimedOut => ExecutionPhase::TimedOut,
            S::Cancelled => ExecutionPhase::Cancelled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_respects_bounds_and_characters() {
        assert_eq!(clip("short", 10), "short");
        let clipped = clip(&"é".repeat(100), 20);
        assert_eq!(clipped.chars().count(), 20);
        assert!(clipped.ends_with(CLIP_MARKER));
        assert_eq!(clip("abcdef", 3), "abc");
    }
}
