//! Closed vocabularies shared by every part of TARSy: statuses, event types,
//! roles, strategies. Each is stored and sent as its lowercase wire string.

/// The wire string did not name a known value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}; expected one of: {expected}")]
pub struct UnknownValue {
    /// What was being parsed, e.g. "session status".
    pub kind: &'static str,
    /// The rejected input.
    pub value: String,
    /// The accepted values, comma separated.
    pub expected: String,
}

/// Declares a closed vocabulary stored and sent as wire strings.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident, $kind:literal { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        // The field that uses the enum describes it: an enum-level description
        // would replace the field's in optional fields of a CRD schema.
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(description = ""))]
        pub enum $name {
            // utoipa does not see a macro-substituted literal in `serde(rename)`:
            // it is repeated in `schema(rename)`, which it parses.
            $($(#[$vmeta])* #[serde(rename = $wire)]
            #[cfg_attr(feature = "openapi", schema(rename = $wire))] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire string of this value.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::status::UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    _ => Err($crate::status::UnknownValue {
                        kind: $kind,
                        value: s.to_string(),
                        expected: [$($wire),+].join(", "),
                    }),
                }
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum!(
    /// Lifecycle of an alert session.
    SessionStatus, "session status" {
        /// Accepted, waiting for admission (concurrency limit).
        Pending = "pending",
        /// The chain is running.
        InProgress = "in_progress",
        /// Cancellation requested; executions are being stopped.
        Cancelling = "cancelling",
        /// Every stage finished successfully.
        Completed = "completed",
        /// A stage (or synthesis) failed.
        Failed = "failed",
        /// Cancelled by a user.
        Cancelled = "cancelled",
        /// The session timeout expired.
        TimedOut = "timed_out",
    }
);

impl SessionStatus {
    /// True once the session can no longer change (chat is allowed on
    /// completed, failed and timed-out sessions).
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Cancelled | Self::TimedOut
        )
    }
}

wire_enum!(
    /// Why a session that ran its course ended early (with its status).
    SessionEndReason, "session end reason" {
        /// Its LLM calls spent the chain's budget: running agents concluded
        /// without more tools and later stages did not start.
        BudgetExhausted = "budget_exhausted",
    }
);

wire_enum!(
    /// Lifecycle of a stage and of an agent execution (they share one vocabulary).
    ExecutionStatus, "execution status" {
        /// Created, not started.
        Pending = "pending",
        /// Running.
        Active = "active",
        /// Finished with a result.
        Completed = "completed",
        /// Finished without a usable result.
        Failed = "failed",
        /// Stopped by a timeout.
        TimedOut = "timed_out",
        /// Stopped by a user.
        Cancelled = "cancelled",
    }
);

wire_enum!(
    /// Where a scoring attempt of a finished session stands.
    ScoreStatus, "score status" {
        /// The judge is at work.
        InProgress = "in_progress",
        /// Scored.
        Completed = "completed",
        /// The attempt ended without a usable score (its error says why).
        Failed = "failed",
    }
);

wire_enum!(
    /// Where a finished session's review by a person stands.
    ReviewStatus, "review status" {
        /// Finished, nobody has looked at it yet.
        NeedsReview = "needs_review",
        /// Someone claimed it and is reviewing it.
        InProgress = "in_progress",
        /// Reviewed (rated, or acknowledged without a rating).
        Reviewed = "reviewed",
    }
);

wire_enum!(
    /// A reviewer's verdict on an investigation's quality.
    ReviewRating, "review rating" {
        /// The investigation got it right.
        Accurate = "accurate",
        /// Partly right.
        PartiallyAccurate = "partially_accurate",
        /// Wrong.
        Inaccurate = "inaccurate",
    }
);

wire_enum!(
    /// A step of a session's review, as its audit log records it.
    ReviewAction, "review action" {
        /// Taken for review.
        Claim = "claim",
        /// Given back to the queue.
        Unclaim = "unclaim",
        /// Handed to another reviewer.
        Reassign = "reassign",
        /// Reviewed with a rating.
        Complete = "complete",
        /// Reviewed without a rating.
        Acknowledge = "acknowledge",
        /// A finished review edited.
        Update = "update",
        /// Reviewed by TARSy itself: a cancelled session needs no review.
        AutoAcknowledge = "auto_acknowledge",
    }
);

wire_enum!(
    /// What an investigation memory is about.
    MemoryCategory, "memory category" {
        /// A fact about the environment ("service X's error rate is 200/h
        /// during batch runs; that is normal").
        Fact = "fact",
        /// What happened in an investigation ("the pod metric queried
        /// first does not exist here").
        Experience = "experience",
        /// How to investigate ("check the connection pool first").
        Procedure = "procedure",
    }
);

wire_enum!(
    /// Whether a memory helped the investigation it came from.
    MemoryValence, "memory valence" {
        /// Following it helped.
        Helped = "helped",
        /// Following it misled: a warning for the next investigations.
        Misled = "misled",
        /// Neither.
        Neutral = "neutral",
    }
);

impl ExecutionStatus {
    /// True for completed, failed, timed_out and cancelled.
    pub const fn is_terminal(self) -> bool {
        !matches!(self, Self::Pending | Self::Active)
    }
}

wire_enum!(
    /// How the agents of one stage relate.
    ParallelType, "parallel type" {
        /// Different agents side by side.
        MultiAgent = "multi_agent",
        /// The same agent N times.
        Replica = "replica",
    }
);

wire_enum!(
    /// When a stage with several executions counts as successful.
    SuccessPolicy, "success policy" {
        /// Every execution must complete.
        All = "all",
        /// One completed execution is enough (the default).
        Any = "any",
    }
);

#[allow(clippy::derivable_impls)] // the enum comes from a macro without #[default]
impl Default for SuccessPolicy {
    fn default() -> Self {
        Self::Any
    }
}

wire_enum!(
    /// The iteration strategy an agent runs with; it picks the controller and backend.
    IterationStrategy, "iteration strategy" {
        /// Gemini native function calling with native thinking.
        NativeThinking = "native-thinking",
        /// Multi-provider function calling through LangChain.
        Langchain = "langchain",
        /// Text-parsed Thought/Action/Observation loop.
        React = "react",
        /// One tool-less call combining parallel results.
        Synthesis = "synthesis",
        /// Synthesis with Gemini native thinking.
        SynthesisNativeThinking = "synthesis-native-thinking",
        /// One tool-less call.
        SingleCall = "single-call",
    }
);

impl IterationStrategy {
    /// The LLM service backend this strategy needs: the backend comes from
    /// the strategy, never from the provider type.
    pub const fn backend(self) -> Backend {
        match self {
            Self::NativeThinking | Self::SynthesisNativeThinking => Backend::GoogleNative,
            Self::Langchain | Self::React | Self::Synthesis | Self::SingleCall => {
                Backend::Langchain
            }
        }
    }

    /// True when the strategy calls tools.
    pub const fn uses_tools(self) -> bool {
        matches!(self, Self::NativeThinking | Self::Langchain | Self::React)
    }
}

wire_enum!(
    /// The LLM service provider implementation a request is routed to.
    Backend, "backend" {
        /// google-genai SDK (native thinking, thought signatures, native tools).
        GoogleNative = "google-native",
        /// LangChain multi-provider.
        Langchain = "langchain",
    }
);

wire_enum!(
    /// What an agent execution is for.
    ExecutionKind, "execution kind" {
        /// An agent of a chain stage.
        Investigation = "investigation",
        /// The synthesis of a stage with several executions.
        Synthesis = "synthesis",
        /// A follow-up chat answer.
        Chat = "chat",
        /// A judge scoring the finished investigation.
        Scoring = "scoring",
        /// The reflector learning memories from a scored investigation.
        Memory = "memory",
    }
);

wire_enum!(
    /// What a stage record is for. Stored with the stage (never guessed from
    /// its name): the chain state machine, the context builders and the
    /// dashboard read it.
    StageKind, "stage kind" {
        /// A configured stage of the chain: its agents or replicas.
        Investigation = "investigation",
        /// The synthesis of the preceding stage's parallel executions.
        Synthesis = "synthesis",
        /// The answer to a follow-up chat question.
        Chat = "chat",
        /// A judge scoring the finished investigation (after the session's
        /// own outcome is final).
        Scoring = "scoring",
        /// The reflector learning memories from the scored investigation
        /// (after the score).
        Memory = "memory",
    }
);

wire_enum!(
    /// Kinds of timeline events (what the user sees).
    TimelineEventType, "timeline event type" {
        /// Model reasoning (metadata.source: native or react).
        LlmThinking = "llm_thinking",
        /// Intermediate model text.
        LlmResponse = "llm_response",
        /// A tool call; arguments in metadata, raw result as content on completion.
        LlmToolCall = "llm_tool_call",
        /// Summary of a large tool result.
        McpToolSummary = "mcp_tool_summary",
        /// An error the agent met (and fed back to the model).
        Error = "error",
        /// A chat question.
        UserQuestion = "user_question",
        /// The session's executive summary (session-level).
        ExecutiveSummary = "executive_summary",
        /// An agent's conclusion.
        FinalAnalysis = "final_analysis",
        /// Gemini code execution.
        CodeExecution = "code_execution",
        /// Google Search grounding.
        GoogleSearchResult = "google_search_result",
        /// URL context grounding.
        UrlContextResult = "url_context_result",
        /// The engine moved to a fallback LLM provider.
        ProviderFallback = "provider_fallback",
    }
);

wire_enum!(
    /// Lifecycle of a timeline event.
    TimelineEventStatus, "timeline event status" {
        /// Content is still arriving.
        Streaming = "streaming",
        /// Final content stored.
        Completed = "completed",
        /// The producing call failed.
        Failed = "failed",
        /// Stopped by cancellation.
        Cancelled = "cancelled",
        /// Stopped by a timeout.
        TimedOut = "timed_out",
    }
);

wire_enum!(
    /// Role of a conversation message.
    MessageRole, "message role" {
        /// Instructions.
        System = "system",
        /// Alert, context, observations.
        User = "user",
        /// Model output (possibly with tool calls).
        Assistant = "assistant",
        /// A tool result answering a tool call.
        Tool = "tool",
    }
);

wire_enum!(
    /// Why an LLM call was made (LLM interaction records).
    LlmInteractionType, "LLM interaction type" {
        /// A regular loop iteration.
        Iteration = "iteration",
        /// The call that produced the final analysis.
        FinalAnalysis = "final_analysis",
        /// The tool-less call at max iterations.
        ForcedConclusion = "forced_conclusion",
        /// Summarizing a tool result.
        Summarization = "summarization",
        /// Synthesis of parallel results.
        Synthesis = "synthesis",
        /// The session's executive summary.
        ExecutiveSummary = "executive_summary",
        /// Summarizing old conversation to recover from a context overflow.
        Compaction = "compaction",
        /// A judge's turn scoring a finished investigation.
        Scoring = "scoring",
        /// The reflector's turn learning memories from an investigation.
        Reflection = "reflection",
    }
);

wire_enum!(
    /// Kind of MCP interaction record.
    McpInteractionType, "MCP interaction type" {
        /// A tools/call.
        ToolCall = "tool_call",
        /// A tools/list.
        ToolList = "tool_list",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_strings_round_trip() {
        for s in SessionStatus::ALL {
            assert_eq!(s.as_str().parse::<SessionStatus>().unwrap(), *s);
            assert_eq!(
                serde_json::to_string(s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        for s in IterationStrategy::ALL {
            assert_eq!(s.as_str().parse::<IterationStrategy>().unwrap(), *s);
        }
    }

    #[test]
    fn unknown_value_names_the_choices() {
        let err = "reactive".parse::<IterationStrategy>().unwrap_err();
        assert!(err.to_string().contains("native-thinking"), "{err}");
        assert!(err.to_string().contains("\"reactive\""), "{err}");
    }

    #[test]
    fn backend_follows_strategy() {
        assert_eq!(
            IterationStrategy::NativeThinking.backend(),
            Backend::GoogleNative
        );
        assert_eq!(
            IterationStrategy::SynthesisNativeThinking.backend(),
            Backend::GoogleNative
        );
        assert_eq!(IterationStrategy::React.backend(), Backend::Langchain);
        assert_eq!(IterationStrategy::Langchain.backend(), Backend::Langchain);
        assert_eq!(IterationStrategy::Synthesis.backend(), Backend::Langchain);
    }

    #[test]
    fn terminal_states() {
        assert!(!SessionStatus::Cancelling.is_terminal());
        assert!(SessionStatus::TimedOut.is_terminal());
        assert!(ExecutionStatus::Cancelled.is_terminal());
        assert!(!ExecutionStatus::Active.is_terminal());
    }
}
