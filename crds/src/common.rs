//! Types shared by several resources: closed vocabularies, secret references,
//! durations and the bounds that keep status objects small.

use std::time::Duration;

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

/// CEL rule of every duration field: Go duration syntax (checked by regex
/// first, so a malformed value gets the rule's message rather than an
/// evaluation error) and strictly positive.
pub const DURATION_RULE: &str =
    "self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s')";

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

/// How an agent iterates: picks the controller and, from it, the LLM service
/// backend. `native-thinking` (Gemini native function calling and thinking),
/// `langchain` (multi-provider function calling), `react` (text-parsed
/// Thought/Action/Observation), `synthesis` and `synthesis-native-thinking`
/// (one tool-less call combining parallel results), `single-call` (one
/// tool-less call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
pub enum IterationStrategy {
    /// Gemini native function calling with native thinking (google-native backend).
    #[serde(rename = "native-thinking")]
    NativeThinking,
    /// Multi-provider function calling through LangChain (langchain backend).
    #[serde(rename = "langchain")]
    Langchain,
    /// Text-parsed Thought/Action/Observation loop (langchain backend).
    #[serde(rename = "react")]
    React,
    /// One tool-less call combining parallel results (langchain backend).
    #[serde(rename = "synthesis")]
    Synthesis,
    /// Synthesis with Gemini native thinking (google-native backend).
    #[serde(rename = "synthesis-native-thinking")]
    SynthesisNativeThinking,
    /// One tool-less call (langchain backend).
    #[serde(rename = "single-call")]
    SingleCall,
}

impl IterationStrategy {
    /// The wire string (`native-thinking`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NativeThinking => "native-thinking",
            Self::Langchain => "langchain",
            Self::React => "react",
            Self::Synthesis => "synthesis",
            Self::SynthesisNativeThinking => "synthesis-native-thinking",
            Self::SingleCall => "single-call",
        }
    }
}

/// LLM service backend: `google-native` (google-genai SDK) or `langchain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
pub enum Backend {
    /// google-genai SDK (native thinking, native tools).
    #[serde(rename = "google-native")]
    GoogleNative,
    /// LangChain multi-provider.
    #[serde(rename = "langchain")]
    Langchain,
}

/// When a stage with several executions succeeds: `all` (every execution
/// completes) or `any` (one completed execution is enough; the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
#[serde(rename_all = "lowercase")]
pub enum SuccessPolicy {
    /// Every execution must complete.
    All,
    /// One completed execution is enough.
    Any,
}

/// What an agent does when one of its MCP servers cannot be used (it failed
/// to start or to list its tools): `continue` investigating with the tools
/// it has (the default; the timeline and the model are told) or `fail` the
/// execution at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
#[serde(rename_all = "lowercase")]
pub enum McpUnavailablePolicy {
    /// Investigate with the tools that are available.
    Continue,
    /// Fail the execution, naming the servers.
    Fail,
}

/// How the executions of one stage relate: `multi_agent` (different agents)
/// or `replica` (the same agent N times).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
#[serde(rename_all = "snake_case")]
pub enum ParallelType {
    /// Different agents side by side.
    MultiAgent,
    /// The same agent N times.
    Replica,
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

/// What an agent execution is for: `investigation` (an agent of a stage),
/// `synthesis` (combining a stage's parallel results) or `chat` (a follow-up
/// question).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
#[serde(rename_all = "lowercase")]
pub enum ExecutionKind {
    /// An agent of a chain stage.
    Investigation,
    /// The synthesis of a stage with several executions.
    Synthesis,
    /// A follow-up chat answer.
    Chat,
}

/// What a stage record is for: `investigation` (a configured stage of the
/// chain), `synthesis` (combining the previous stage's parallel results) or
/// `chat` (answering a follow-up question).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
#[serde(rename_all = "lowercase")]
pub enum StageKind {
    /// A configured stage of the chain.
    Investigation,
    /// The synthesis of the previous stage's parallel executions.
    Synthesis,
    /// A follow-up chat answer.
    Chat,
}

/// A key of a Kubernetes Secret in the resource's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
// The field using the enum describes it; an enum-level description would
// replace the field's in optional fields.
#[schemars(description = "")]
pub struct SecretKeyRef {
    /// Name of the Secret (same namespace as the referring resource).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key inside the Secret's data.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// A Go-style duration string (`120s`, `15m`, `1h30m`, `1.5h`) could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. \"120s\", \"15m\", \"1h30m\")")]
pub struct DurationError {
    /// The rejected text.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Parses a duration in the format Kubernetes and CEL's `duration()` use:
/// a sequence of decimal numbers, each with a unit (`ns`, `us`, `µs`, `ms`,
/// `s`, `m`, `h`), e.g. `120s`, `1h30m`, `1.5h`. Negative durations are rejected.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(err("negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut total_nanos: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("missing unit"))?;
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| err("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(err("unknown unit")),
        };
        total_nanos += number * nanos_per_unit;
    }
    if !total_nanos.is_finite() || total_nanos > u64::MAX as f64 {
        return Err(err("too large"));
    }
    Ok(Duration::from_nanos(total_nanos.round() as u64))
}

/// Formats a duration the way [`parse_duration`] reads it (`2m0s` style is
/// avoided: the largest exact unit is used, e.g. `120s` → `2m`).
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    const UNITS: [(&str, u128); 6] = [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ];
    for (unit, size) in UNITS {
        if nanos.is_multiple_of(size) {
            return format!("{}{unit}", nanos / size);
        }
    }
    format!("{nanos}ns")
}

/// Converts between this crate's schema-carrying enums and tarsy-core's
/// vocabulary (same variants, same wire strings).
macro_rules! mirror_enum {
    ($ours:ident <=> $core:path { $($v:ident = $cv:ident),+ $(,)? }) => {
        impl From<$ours> for $core {
            fn from(v: $ours) -> Self {
                match v { $($ours::$v => <$core>::$cv),+ }
            }
        }
        impl From<$core> for $ours {
            fn from(v: $core) -> Self {
                match v { $(<$core>::$cv => $ours::$v),+ }
            }
        }
    };
}

mirror_enum!(IterationStrategy <=> tarsy_core::IterationStrategy {
    NativeThinking = NativeThinking,
    Langchain = Langchain,
    React = React,
    Synthesis = Synthesis,
    SynthesisNativeThinking = SynthesisNativeThinking,
    SingleCall = SingleCall,
});
mirror_enum!(Backend <=> tarsy_core::Backend {
    GoogleNative = GoogleNative,
    Langchain = Langchain,
});
mirror_enum!(SuccessPolicy <=> tarsy_core::SuccessPolicy { All = All, Any = Any });
mirror_enum!(ParallelType <=> tarsy_core::ParallelType {
    MultiAgent = MultiAgent,
    Replica = Replica,
});
mirror_enum!(ExecutionPhase <=> tarsy_core::ExecutionStatus {
    Pending = Pending,
    Active = Active,
    Completed = Completed,
    Failed = Failed,
    TimedOut = TimedOut,
    Cancelled = Cancelled,
});
mirror_enum!(ExecutionKind <=> tarsy_core::ExecutionKind {
    Investigation = Investigation,
    Synthesis = Synthesis,
    Chat = Chat,
});
mirror_enum!(StageKind <=> tarsy_core::StageKind {
    Investigation = Investigation,
    Synthesis = Synthesis,
    Chat = Chat,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("120s").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "15", "m", "15x", "-5s", "1h-5m", "1..5s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn durations_format_round_trip() {
        for s in ["2m", "15m", "1h", "90s", "250ms"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
    }

    #[test]
    fn clip_respects_bounds_and_characters() {
        assert_eq!(clip("short", 10), "short");
        let clipped = clip(&"é".repeat(100), 20);
        assert_eq!(clipped.chars().count(), 20);
        assert!(clipped.ends_with(CLIP_MARKER));
        assert_eq!(clip("abcdef", 3), "abc");
    }
}
