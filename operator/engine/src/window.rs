//! Context-window management, in three layers:
//!
//! 1. **Cap**: a single tool result may take at most 30 % of the provider's
//!    context window (and at most the provider's `max_tool_result_tokens`).
//! 2. **Prune**: before each call, when the conversation passes 60 % of the
//!    window, older tool results are soft-trimmed (head + tail kept); past
//!    80 % they are cleared to a placeholder. The newest tool result, and
//!    everything that is not a tool result — above all the model's own
//!    reasoning — are never touched.
//! 3. **Compact**: when the provider still reports a context overflow, the
//!    middle of the conversation is summarized by a separate call (see the
//!    engine's loop) and replaced by that summary; the call is retried once.
//!
//! The conversation here is what is *sent*; the message table keeps the full
//! record.

use std::borrow::Cow;

use tarsy_core::{ConversationMessage, LlmProviderConfig, MessageRole};

use crate::tokens::{CHARS_PER_TOKEN, ceil_char_boundary, floor_char_boundary};

/// A single tool result may use at most this share of the context window.
pub(crate) const MAX_TOOL_RESULT_CONTEXT_SHARE: f64 = 0.3;
/// Soft-trimming of old tool results starts at this share of the window.
pub(crate) const SOFT_TRIM_RATIO: f64 = 0.6;
/// Clearing of old tool results starts at this share of the window.
pub(crate) const HARD_CLEAR_RATIO: f64 = 0.8;
/// The newest tool results kept intact.
pub(crate) const KEEP_LAST_N_RESULTS: usize = 1;
/// Characters kept from the start of a soft-trimmed result.
pub(crate) const SOFT_TRIM_HEAD: usize = 2000;
/// Characters kept from the end of a soft-trimmed result.
pub(crate) const SOFT_TRIM_TAIL: usize = 500;
/// Exchanges (assistant turn + its results) kept verbatim by compaction.
pub(crate) const COMPACTION_KEEP_EXCHANGES: usize = 2;

/// What replaces a cleared tool result.
pub(crate) const CLEARED_PLACEHOLDER: &str = "[Earlier tool result removed to save context space. Your analysis of it above still applies; call the tool again if you need the data.]";

/// The byte budget for one tool result in the conversation, if the provider
/// declares a window or a per-result limit.
pub(crate) fn tool_result_budget(provider: &LlmProviderConfig) -> Option<usize> {
    let by_window = provider
        .context_window_tokens
        .map(|w| (w as f64 * MAX_TOOL_RESULT_CONTEXT_SHARE) as usize * CHARS_PER_TOKEN);
    let by_limit = provider
        .max_tool_result_tokens
        .map(|t| t as usize * CHARS_PER_TOKEN);
    match (by_window, by_limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Layer 1: cuts a tool result to `budget` bytes (head kept, a note says how
/// much was dropped and that the model can ask for less).
pub(crate) fn cap_tool_result(content: &str, budget: Option<usize>) -> Cow<'_, str> {
    match budget {
        Some(b) if content.len() > b => {
            let cut = floor_char_boundary(content, b);
            Cow::Owned(format!(
                "{}\n\n[Tool result truncated to fit the context window: {} of {} characters shown. Narrow the query to see the rest.]",
                &content[..cut],
                cut,
                content.len()
            ))
        }
        _ => Cow::Borrowed(content),
    }
}

fn message_size(m: &ConversationMessage) -> usize {
    m.content.len()
        + m.tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>()
}

fn soft_trim(content: &str) -> Option<String> {
    if content.len() <= SOFT_TRIM_HEAD + SOFT_TRIM_TAIL + 100 {
        return None;
    }
    let head = floor_char_boundary(content, SOFT_TRIM_HEAD);
    let tail = ceil_char_boundary(content, content.len() - SOFT_TRIM_TAIL);
    Some(format!(
        "{}\n\n[... {} characters of this earlier tool result trimmed to save context space ...]\n\n{}",
        &content[..head],
        tail - head,
        &content[tail..]
    ))
}

/// What a pruning pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PruneReport {
    /// Tool results soft-trimmed.
    pub soft_trimmed: usize,
    /// Tool results cleared.
    pub cleared: usize,
}

/// The conversation sent to the model, knowing which messages are tool
/// results (tool-role messages, or ReAct observations sent as user
/// messages) and which leading messages (system + task) are pinned.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conversation {
    messages: Vec<ConversationMessage>,
    tool_result: Vec<bool>,
    trimmed: Vec<bool>,
    pinned: usize,
    size: usize,
}

impl Conversation {
    /// Starts with the initial messages (pinned: never pruned or compacted).
    pub(crate) fn new(initial: Vec<ConversationMessage>) -> Self {
        let n = initial.len();
        let size = initial.iter().map(message_size).sum();
        Self {
            messages: initial,
            tool_result: vec![false; n],
            trimmed: vec![false; n],
            pinned: n,
            size,
        }
    }

    /// Appends a message that is not a tool result.
    pub(crate) fn push(&mut self, m: ConversationMessage) {
        self.size += message_size(&m);
        self.messages.push(m);
        self.tool_result.push(false);
        self.trimmed.push(false);
    }

    /// Appends a tool result (prunable later).
    pub(crate) fn push_tool_result(&mut self, m: ConversationMessage) {
        self.size += message_size(&m);
        self.messages.push(m);
        self.tool_result.push(true);
        self.trimmed.push(false);
    }

    /// The messages, oldest first.
    pub(crate) fn messages(&self) -> &[ConversationMessage] {
        &self.messages
    }

    /// Approximate size in bytes.
    #[cfg(test)]
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Layer 2: trims, then clears, older tool results while the
    /// conversation is above 60 % / 80 % of `window_tokens`.
    pub(crate) fn prune(&mut self, window_tokens: Option<u64>) -> PruneReport {
        let mut report = PruneReport::default();
        let Some(window) = window_tokens else {
            return report;
        };
        let max = window as usize * CHARS_PER_TOKEN;
        let soft = (max as f64 * SOFT_TRIM_RATIO) as usize;
        let hard = (max as f64 * HARD_CLEAR_RATIO) as usize;
        if self.size < soft {
            return report;
        }
        let results: Vec<usize> = (0..self.messages.len())
            .filter(|&i| self.tool_result[i])
            .collect();
        if results.len() <= KEEP_LAST_N_RESULTS {
            return report;
        }
        let prunable = &results[..results.len() - KEEP_LAST_N_RESULTS];
        for &i in prunable {
            if self.size < soft {
                break;
            }
            if self.trimmed[i] {
                continue;
            }
            if let Some(t) = soft_trim(&self.messages[i].content) {
                self.replace_content(i, t);
                self.trimmed[i] = true;
                report.soft_trimmed += 1;
            }
        }
        if self.size > hard {
            for &i in prunable {
                if self.size < hard {
                    break;
                }
                if self.messages[i].content == CLEARED_PLACEHOLDER {
                    continue;
                }
                self.replace_content(i, CLEARED_PLACEHOLDER.to_string());
                report.cleared += 1;
            }
        }
        report
    }

    fn replace_content(&mut self, i: usize, content: String) {
        let m = &mut self.messages[i];
        self.size = self.size - m.content.len() + content.len();
        m.content = content;
    }

    /// Layer 3, step 1: the messages compaction would summarize — after the
    /// pinned ones, before the last [`COMPACTION_KEEP_EXCHANGES`] assistant
    /// turns — or `None` when there is nothing to summarize. The split always
    /// falls on an assistant message, so tool calls stay with their results.
    pub(crate) fn compaction_range(&self) -> Option<std::ops::Range<usize>> {
        let assistants: Vec<usize> = (self.pinned..self.messages.len())
            .filter(|&i| self.messages[i].role == MessageRole::Assistant)
            .collect();
        if assistants.len() <= COMPACTION_KEEP_EXCHANGES {
            return None;
        }
        let split = assistants[assistants.len() - COMPACTION_KEEP_EXCHANGES];
        (split > self.pinned).then_some(self.pinned..split)
    }

    /// Layer 3, step 2: replaces `range` by the summary (as a user message)
    /// and a short assistant acknowledgement.
    pub(crate) fn apply_compaction(&mut self, range: std::ops::Range<usize>, summary: &str) {
        let replacement = vec![
            ConversationMessage::user(format!(
                "[Summary of the earlier part of this investigation, condensed to fit the context window]\n\n{summary}"
            )),
            ConversationMessage::assistant(
                "Understood. I will continue the investigation from this summary.",
                Vec::new(),
            ),
        ];
        let n = replacement.len();
        self.messages.splice(range.clone(), replacement);
        self.tool_result
            .splice(range.clone(), std::iter::repeat_n(false, n));
        self.trimmed.splice(range, std::iter::repeat_n(false, n));
        self.size = self.messages.iter().map(message_size).sum();
    }
}

/// Renders messages as plain text for the compaction summarizer.
pub(crate) fn transcript(messages: &[ConversationMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&format!("[{}]", m.role));
        if let Some(name) = &m.tool_name {
            out.push_str(&format!(" ({name})"));
        }
        out.push('\n');
        out.push_str(&m.content);
        for c in &m.tool_calls {
            out.push_str(&format!("\n-> call {}({})", c.name, c.arguments));
        }
        out.push_str("\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tarsy_core::ToolCall;

    fn provider(window: Option<u64>, max_result: Option<u64>) -> LlmProviderConfig {
        LlmProviderConfig {
            name: "p".into(),
            provider_type: tarsy_core::ProviderType::Google,
            model: "m".into(),
            api_key_env: None,
            credentials_env: None,
            base_url: None,
            project: None,
            location: None,
            native_tools: Default::default(),
            max_tool_result_tokens: max_result,
            context_window_tokens: window,
            script: None,
            fallback: vec![],
            price: None,
        }
    }

    fn conv_with_results(n: usize, size: usize) -> Conversation {
        let mut c = Conversation::new(vec![
            ConversationMessage::system("sys"),
            ConversationMessage::user("alert"),
        ]);
        for i in 0..n {
            c.push(ConversationMessage::assistant(
                format!("reasoning {i}"),
                vec![ToolCall {
                    id: format!("c{i}"),
                    name: "k8s.pods".into(),
                    arguments: "{}".into(),
                }],
            ));
            c.push_tool_result(ConversationMessage::tool(
                format!("c{i}"),
                "k8s.pods",
                format!("{i}:{}", "x".repeat(size)),
            ));
        }
        c
    }

    #[test]
    fn budget_is_thirty_percent_of_window_or_provider_limit() {
        assert_eq!(
            tool_result_budget(&provider(Some(1000), None)),
            Some(300 * 4)
        );
        assert_eq!(
            tool_result_budget(&provider(Some(1000), Some(100))),
            Some(400)
        );
        assert_eq!(tool_result_budget(&provider(None, None)), None);
        let long = "y".repeat(5000);
        let capped = cap_tool_result(&long, Some(1200));
        assert!(capped.starts_with(&"y".repeat(1200)));
        assert!(capped.contains("1200 of 5000"));
        assert!(matches!(
            cap_tool_result("small", Some(1200)),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn no_pruning_below_sixty_percent() {
        let mut c = conv_with_results(3, 1000);
        let before = c.messages().to_vec();
        // ~3 KB of 10_000 tokens = 40 KB window.
        assert_eq!(c.prune(Some(10_000)), PruneReport::default());
        assert_eq!(c.messages(), before.as_slice());
    }

    #[test]
    fn soft_trim_keeps_head_tail_and_the_newest_result() {
        let mut c = conv_with_results(3, 10_000);
        // 30 KB of a 12 KB-token (48 KB) window = 62 %: soft trim only.
        let r = c.prune(Some(12_000));
        assert!(r.soft_trimmed >= 1 && r.cleared == 0, "{r:?}");
        let msgs = c.messages();
        assert!(msgs[3].content.starts_with("0:xxx"));
        assert!(msgs[3].content.contains("trimmed to save context space"));
        assert!(msgs[3].content.len() < 3000);
        // The newest result is untouched; assistant reasoning is untouched.
        assert_eq!(msgs[7].content.len(), 10_002);
        assert!(
            msgs.iter()
                .filter(|m| m.role == MessageRole::Assistant)
                .all(|m| m.content.starts_with("reasoning"))
        );
        assert!(c.size() < 48_000 * 6 / 10);
    }

    #[test]
    fn hard_clear_past_eighty_percent_never_touches_reasoning() {
        let mut c = conv_with_results(4, 10_000);
        // 40 KB in a 4_000-token (16 KB) window: trimming alone is not enough.
        let r = c.prune(Some(4_000));
        assert!(r.cleared >= 1, "{r:?}");
        let msgs = c.messages();
        assert_eq!(msgs[3].content, CLEARED_PLACEHOLDER);
        assert_eq!(msgs[9].content.len(), 10_002, "newest result kept");
        for (i, m) in msgs.iter().enumerate() {
            if m.role == MessageRole::Assistant {
                assert_eq!(m.content, format!("reasoning {}", (i - 2) / 2));
            }
        }
        assert_eq!(msgs[0].content, "sys");
        assert_eq!(msgs[1].content, "alert");
    }

    #[test]
    fn compaction_keeps_pinned_and_recent_exchanges() {
        let mut c = conv_with_results(4, 10);
        let range = c.compaction_range().unwrap();
        assert_eq!(range, 2..6);
        c.apply_compaction(range, "looked at pods 0 and 1");
        let msgs = c.messages();
        assert_eq!(msgs.len(), 2 + 2 + 4);
        assert!(msgs[2].content.contains("looked at pods 0 and 1"));
        assert_eq!(msgs[3].role, MessageRole::Assistant);
        assert_eq!(msgs[4].content, "reasoning 2");
        assert_eq!(msgs[5].tool_call_id.as_deref(), Some("c2"));
        assert!(conv_with_results(2, 10).compaction_range().is_none());
    }
}
