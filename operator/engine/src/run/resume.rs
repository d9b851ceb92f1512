//! Continuing an execution that was interrupted (its process was killed,
//! stopped or evicted). Everything the execution did is stored already —
//! every message, tool call and result — so a new run reads the
//! conversation back and carries on from it instead of starting over:
//!
//! * events left `streaming` (a model answer or a tool call cut off
//!   mid-way) are closed as failed and marked `interrupted`;
//! * numbering continues after the stored events and messages, so nothing
//!   is numbered twice;
//! * a model answer whose follow-up never happened is taken up again: its
//!   unanswered tool calls are re-issued once (marked `retried`; a call
//!   interrupted again is answered with an error instead), a final answer
//!   is concluded;
//! * the iteration count continues from the answers already given.

use std::collections::HashSet;

use serde_json::{Value, json};
use tarsy_core::{
    ConversationMessage, MessageRole, StoredMessage, TimelineEvent, TimelineEventStatus,
    TimelineEventType, ToolCall,
};
use tokio::time::Instant;

use super::tool_call::ToolOutcome;
use super::{CallError, Run, Stop, UNAVAILABLE_KIND};
use crate::window::Conversation;

/// The last model answer of an interrupted execution whose follow-up did
/// not (fully) happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTurn {
    /// The answer's text.
    pub text: String,
    /// Its tool calls that have no result yet (function calling); empty
    /// for a final answer or a ReAct answer.
    pub tool_calls: Vec<ToolCall>,
}

/// What a resumed run knows beyond its conversation.
#[derive(Debug, Default)]
pub(super) struct Resumed {
    pending: Option<PendingTurn>,
    /// Tool calls (by call id) already re-issued once.
    retried: HashSet<String>,
    /// A final analysis was recorded before the interruption.
    final_recorded: bool,
    /// Servers already said to be unavailable.
    reported: HashSet<String>,
}

/// The answer given to a tool call that was interrupted again after being
/// re-issued once.
const INTERRUPTED_TWICE: &str =
    "Error: the tool call was interrupted twice by a restart and is not retried again";

/// The pending turn of a stored conversation: the last assistant message,
/// when only tool results (and not all of them) or nothing follow it.
fn pending_turn(messages: &[ConversationMessage]) -> Option<PendingTurn> {
    let last = messages
        .iter()
        .rposition(|m| m.role == MessageRole::Assistant)?;
    let after = &messages[last + 1..];
    if after.iter().any(|m| m.role != MessageRole::Tool) {
        return None;
    }
    let answered: HashSet<&str> = after
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    let assistant = &messages[last];
    let unanswered: Vec<ToolCall> = assistant
        .tool_calls
        .iter()
        .filter(|c| !answered.contains(c.id.as_str()))
        .cloned()
        .collect();
    if !after.is_empty() && unanswered.is_empty() {
        return None;
    }
    Some(PendingTurn {
        text: assistant.content.clone(),
        tool_calls: unanswered,
    })
}

fn flag(metadata: &Value, key: &str) -> bool {
    metadata.get(key).and_then(Value::as_bool).unwrap_or(false)
}

impl Run<'_> {
    /// Reads back what an earlier attempt of this execution recorded (none
    /// for a new execution): numbering continues after it, its events left
    /// streaming are closed as interrupted.
    pub(super) async fn close_earlier_attempt(
        &mut self,
        stored: &[StoredMessage],
    ) -> Result<Resumed, Stop> {
        let timeline = self
            .ctx
            .recorder
            .execution_timeline(&self.ctx.execution_id)
            .await?;
        let last_event = timeline.iter().map(|e| e.sequence_number).max();
        let last_message = stored.iter().map(|m| m.sequence_number).max();
        self.rec
            .continue_after(last_event.unwrap_or(0), last_message.unwrap_or(0));
        let mut resumed = Resumed::default();
        for event in &timeline {
            if event.status == TimelineEventStatus::Streaming {
                self.rec.close_interrupted(event).await?;
            }
            resumed.final_recorded |= event.event_type == TimelineEventType::FinalAnalysis;
            if event.event_type == TimelineEventType::LlmToolCall
                && flag(&event.metadata, "retried")
                && let Some(id) = event.metadata.get("call_id").and_then(Value::as_str)
            {
                resumed.retried.insert(id.to_string());
            }
            if let Some(server) = unavailable_server(event) {
                resumed.reported.insert(server.to_string());
            }
        }
        Ok(resumed)
    }

    /// Prepares the run of an interrupted execution from its stored
    /// conversation (see the module documentation).
    pub(super) async fn resume(
        &mut self,
        stored: Vec<StoredMessage>,
        mut resumed: Resumed,
    ) -> Result<(), Stop> {
        tracing::info!(
            session_id = %self.ctx.session_id,
            execution_id = %self.ctx.execution_id,
            messages = stored.len(),
            "resuming an interrupted execution from its stored conversation"
        );
        // Servers that became unusable since are said; those said before
        // are not said twice.
        let unavailable = self.list_tools().await?;
        for f in unavailable
            .iter()
            .filter(|f| !resumed.reported.contains(&f.server))
        {
            self.unavailable_event(f).await?;
        }
        if let Some(switch) = self.chain.skip_open(&self.ctx.breakers).await {
            self.fallback_event(&switch).await?;
        }

        self.rec
            .set_last_message_id(stored.last().map(|m| m.id.clone()));
        let messages: Vec<ConversationMessage> = stored.into_iter().map(|m| m.message).collect();
        let answers = messages
            .iter()
            .filter(|m| m.role == MessageRole::Assistant)
            .count();
        self.state.current_iteration = u32::try_from(answers)
            .unwrap_or(u32::MAX)
            .min(self.state.max_iterations);
        resumed.pending = pending_turn(&messages);
        self.conv = Conversation::new(messages);
        self.resumed = Some(resumed);
        Ok(())
    }

    /// The answer the interrupted execution was acting on, once.
    pub fn take_pending_turn(&mut self) -> Option<PendingTurn> {
        self.resumed.as_mut().and_then(|r| r.pending.take())
    }

    /// Records the final analysis, unless the interrupted execution had
    /// recorded it already.
    pub async fn conclude(&mut self, content: &str, metadata: Value) -> Result<(), Stop> {
        if self.resumed.as_ref().is_some_and(|r| r.final_recorded) {
            return Ok(());
        }
        self.final_event(content, metadata).await?;
        Ok(())
    }

    /// Runs again a tool call the interruption cut off: once, marked
    /// `retried` on the timeline; a call already retried is answered with
    /// an error instead of running a third time.
    pub async fn reissue_tool(
        &mut self,
        call: ToolCall,
        deadline: Instant,
    ) -> Result<ToolOutcome, CallError> {
        let retried_before = self
            .resumed
            .as_ref()
            .is_some_and(|r| r.retried.contains(&call.id));
        if retried_before {
            return Ok(ToolOutcome {
                name: call.name,
                content: INTERRUPTED_TWICE.to_string(),
                is_error: true,
                failed: false,
            });
        }
        self.run_tool(call, deadline, json!({"retried": true}))
            .await
    }
}

/// The server an `mcp_server_unavailable` event names.
fn unavailable_server(event: &TimelineEvent) -> Option<&str> {
    (event.event_type == TimelineEventType::Error
        && event.metadata.get("kind").and_then(Value::as_str) == Some(UNAVAILABLE_KIND))
    .then(|| event.metadata.get("server").and_then(Value::as_str))
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "k8s.get".into(),
            arguments: "{}".into(),
        }
    }

    fn base() -> Vec<ConversationMessage> {
        vec![
            ConversationMessage::system("sys"),
            ConversationMessage::user("alert"),
        ]
    }

    #[test]
    fn nothing_is_pending_before_the_first_answer_or_after_a_full_turn() {
        assert_eq!(pending_turn(&base()), None);
        let mut m = base();
        m.push(ConversationMessage::assistant("look", vec![call("a")]));
        m.push(ConversationMessage::tool("a", "k8s.get", "pods"));
        assert_eq!(pending_turn(&m), None);
        m.push(ConversationMessage::user("feedback"));
        assert_eq!(pending_turn(&m), None);
    }

    #[test]
    fn unanswered_tool_calls_are_pending() {
        let mut m = base();
        m.push(ConversationMessage::assistant(
            "look",
            vec![call("a"), call("b")],
        ));
        assert_eq!(pending_turn(&m).unwrap().tool_calls.len(), 2);
        m.push(ConversationMessage::tool("a", "k8s.get", "pods"));
        let pending = pending_turn(&m).unwrap();
        assert_eq!(pending.tool_calls, vec![call("b")]);
        assert_eq!(pending.text, "look");
    }

    #[test]
    fn a_last_answer_without_tool_calls_is_pending() {
        let mut m = base();
        m.push(ConversationMessage::assistant("Final Answer: x", vec![]));
        let pending = pending_turn(&m).unwrap();
        assert!(pending.tool_calls.is_empty());
        assert_eq!(pending.text, "Final Answer: x");
    }
}
