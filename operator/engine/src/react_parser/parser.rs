//! The section state machine behind [`parse`].

use std::sync::LazyLock;

use regex::Regex;

/// A ReAct section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    /// `Thought:` — reasoning.
    Thought,
    /// `Action:` — the tool to call.
    Action,
    /// `Action Input:` — the tool's arguments.
    ActionInput,
    /// `Final Answer:` — the conclusion.
    FinalAnswer,
}

impl Section {
    /// The canonical header, e.g. `"Action Input:"`.
    pub const fn header(self) -> &'static str {
        match self {
            Self::Thought => "Thought:",
            Self::Action => "Action:",
            Self::ActionInput => "Action Input:",
            Self::FinalAnswer => "Final Answer:",
        }
    }

    /// The snake_case key used in diagnostics, e.g. `"action_input"`.
    pub const fn key(self) -> &'static str {
        match self {
            Self::Thought => "thought",
            Self::Action => "action",
            Self::ActionInput => "action_input",
            Self::FinalAnswer => "final_answer",
        }
    }

    /// All sections in format order.
    pub const ALL: [Section; 4] = [
        Self::Thought,
        Self::Action,
        Self::ActionInput,
        Self::FinalAnswer,
    ];
}

/// Which sections the parser found (after recovery). A section counts as
/// found when its header was seen, even if its content is empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FoundSections {
    /// A `Thought:` header (unlabelled leading text does not count).
    pub thought: bool,
    /// An `Action:` header, or an action recovered from the text.
    pub action: bool,
    /// An `Action Input:` header belonging to the last action.
    pub action_input: bool,
    /// A `Final Answer:` header.
    pub final_answer: bool,
}

impl FoundSections {
    /// Whether `section` was found.
    pub const fn has(&self, section: Section) -> bool {
        match section {
            Section::Thought => self.thought,
            Section::Action => self.action,
            Section::ActionInput => self.action_input,
            Section::FinalAnswer => self.final_answer,
        }
    }
}

/// What the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReactOutcome {
    /// Call a tool. `action` has the `server.tool` shape (at least one dot);
    /// whether the tool exists is checked against the tool list by
    /// [`super::ParsedReactResponse::step`]. `input` is the raw Action Input
    /// (code fences removed), possibly empty; the MCP executor parses it.
    ToolCall {
        /// Tool name as written.
        action: String,
        /// Raw arguments.
        input: String,
    },
    /// An action whose name cannot be a tool (no `server.` prefix).
    InvalidToolName {
        /// Tool name as written.
        action: String,
        /// Raw arguments.
        input: String,
        /// Explanation for the model.
        message: String,
    },
    /// The model concluded.
    FinalAnswer(String),
    /// Neither a usable action nor a final answer; see
    /// [`super::format_error_feedback`].
    Malformed,
}

/// A parsed model response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedReactResponse {
    /// Reasoning: the `Thought:` sections (joined by blank lines), or, when
    /// there is none, the unlabelled text before the first section.
    pub thought: Option<String>,
    /// What to do next.
    pub outcome: ReactOutcome,
    /// Which sections were found (drives the format feedback).
    pub found: FoundSections,
    /// The Action line as written (after recovery), even when unusable.
    pub raw_action: Option<String>,
    /// The Action Input as written, even when unusable.
    pub raw_action_input: Option<String>,
    /// The model wrote an `Observation:` of its own; everything from there on
    /// was ignored.
    pub hallucinated_observation: bool,
    /// The action name was recovered from text without a proper header.
    pub recovered_action: bool,
}

impl ParsedReactResponse {
    /// True when the model concluded.
    pub fn is_final_answer(&self) -> bool {
        matches!(self.outcome, ReactOutcome::FinalAnswer(_))
    }

    /// The final answer, if the model concluded.
    pub fn final_answer(&self) -> Option<&str> {
        match &self.outcome {
            ReactOutcome::FinalAnswer(answer) => Some(answer),
            _ => None,
        }
    }

    /// True when the model asked for a tool (valid name or not).
    pub fn has_action(&self) -> bool {
        matches!(
            self.outcome,
            ReactOutcome::ToolCall { .. } | ReactOutcome::InvalidToolName { .. }
        )
    }

    /// The requested tool name, when the model asked for a tool.
    pub fn action(&self) -> Option<&str> {
        match &self.outcome {
            ReactOutcome::ToolCall { action, .. }
            | ReactOutcome::InvalidToolName { action, .. } => Some(action),
            _ => None,
        }
    }

    /// The raw tool arguments, when the model asked for a tool.
    pub fn action_input(&self) -> Option<&str> {
        match &self.outcome {
            ReactOutcome::ToolCall { input, .. } | ReactOutcome::InvalidToolName { input, .. } => {
                Some(input)
            }
            _ => None,
        }
    }

    /// True when the action name is not of the `server.tool` shape.
    pub fn is_unknown_tool(&self) -> bool {
        matches!(self.outcome, ReactOutcome::InvalidToolName { .. })
    }

    /// True when the response is neither an action nor a final answer.
    pub fn is_malformed(&self) -> bool {
        matches!(self.outcome, ReactOutcome::Malformed)
    }

    /// The explanation for an invalid tool name.
    pub fn error_message(&self) -> Option<&str> {
        match &self.outcome {
            ReactOutcome::InvalidToolName { message, .. } => Some(message),
            _ => None,
        }
    }
}

/// Line-start header, tolerant of case, Markdown emphasis/heading marks and
/// spaces before the colon: `Action:`, `action:`, `**Action:**`,
/// `**Action**:`, `### Final Answer:`, `Final answer :`.
static LENIENT_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:#{1,6}\s*)?(?:\*\*|__|\*|_)?\s*(thought|action[ \t]+input|action|final[ \t]+answer)\s*(?:\*\*|__|\*|_)?\s*:[ \t]*(?:\*\*|__|\*)?(.*)$",
    )
    .expect("valid regex")
});

/// A bare `Thought` or `Final Answer` line, e.g. a `## Final Answer`
/// heading (the content follows on the next lines).
static BARE_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:#{1,6}\s*)?(?:\*\*|__|\*|_)?\s*(thought|final[ \t]+answer)\s*(?:\*\*|__|\*|_)?$",
    )
    .expect("valid regex")
});

/// A header in the middle of a line, after the end of a sentence (tiers 2
/// and 3): `I have what I need. Final Answer: ...`.
static MIDLINE_FINAL_ANSWER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[.!?][`*_\s]*Final Answer(?:\*\*)?:(?:\*\*)?").expect("valid regex")
});
static MIDLINE_ACTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[.!?][`*_\s]*Action(?:\*\*)?:(?:\*\*)?").expect("valid regex"));
static MIDLINE_ACTION_INPUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[.!?][`*_\s]*Action Input(?:\*\*)?:(?:\*\*)?").expect("valid regex")
});

/// `Action Input:` anywhere (splits `Action: a.b Action Input: {}` written on
/// one line).
static INLINE_ACTION_INPUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:\*\*)?Action[ \t]+Input(?:\*\*)?[ \t]*:(?:\*\*)?").expect("valid regex")
});

/// A model-written observation (it must stop and wait for the real one).
static OBSERVATION_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:\*\*|__)?observation(?:\*\*|__)?\s*:").expect("valid regex")
});

/// `server.tool`, the only shape a recovered action may have.
static TOOL_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[\w-]+\.[\w-]+$").expect("valid regex"));

static RECOVER_ACTION_INPUT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)Action[ \t]+Input\s*:").expect("valid regex"));
static RECOVER_ACTION_COLON: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bAction\s*:").expect("valid regex"));
static RECOVER_ACTION_WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bAction\b").expect("valid regex"));

/// Phrases of TARSy's own prompts; an `Observation:` line quoting them is an
/// echo of a prompt, not a hallucinated tool result.
const OBSERVATION_ECHO_MARKERS: [&str; 3] = [
    "Please specify",
    "what Action you want to take",
    "Error in reasoning",
];

/// Parses a model response written in the ReAct format. Never fails: a
/// response that cannot be used becomes [`ReactOutcome::Malformed`] (see
/// [`super::format_error_feedback`]).
///
/// Precedence: an action with an Action Input wins over a final answer in
/// the same response (the model may not conclude and keep acting); a final
/// answer wins over anything malformed.
pub fn parse(text: &str) -> ParsedReactResponse {
    let mut machine = Machine::default();
    for raw_line in text.trim().lines() {
        if !machine.feed_line(raw_line) {
            break;
        }
    }
    machine.finish(text)
}

#[derive(Default)]
struct Machine {
    current: Option<Section>,
    lines: Vec<String>,
    in_fence: bool,
    preamble: Vec<String>,
    thoughts: Vec<String>,
    thought_header: bool,
    action: Option<String>,
    action_input: Option<String>,
    final_answer: Option<String>,
    /// Every line from the first Final Answer on, headers included: when the
    /// response concludes, later header-like lines (`Action: restart the
    /// pod` in a list of recommendations) stay part of the answer.
    final_capture: Option<Vec<String>>,
    final_capture_pending: bool,
    final_seen: bool,
    hallucinated_observation: bool,
}

impl Machine {
    /// Processes one line; returns false when parsing must stop.
    fn feed_line(&mut self, raw_line: &str) -> bool {
        let line = raw_line.trim_end();
        let trimmed = line.trim();

        if trimmed.is_empty() && self.current.is_none() && self.preamble.is_empty() {
            return true;
        }
        if !self.in_fence && self.is_fake_continuation(trimmed) {
            self.hallucinated_observation = true;
            self.close_section();
            return false;
        }
        if let Some(capture) = self.final_capture.as_mut() {
            capture.push(line.to_string());
        }
        if let Some((section, rest)) = self.line_header(trimmed) {
            // A header inside a code block also ends the block: the model
            // forgot to close it.
            self.in_fence = false;
            self.switch_to(section);
            let rest = rest.trim();
            if rest.starts_with("```") && rest.matches("```").count() % 2 == 1 {
                self.in_fence = true;
            }
            self.feed_text(rest);
            return true;
        }
        if trimmed.starts_with("```") {
            self.in_fence = !self.in_fence;
            self.push(line);
            return true;
        }
        self.feed_text(line);
        true
    }

    /// `Observation:` written by the model, or a `[Based on ...` summary of
    /// an imagined result: the model should have stopped before.
    fn is_fake_continuation(&self, trimmed: &str) -> bool {
        if trimmed.starts_with("[Based on") {
            return true;
        }
        OBSERVATION_LINE.is_match(trimmed)
            && !OBSERVATION_ECHO_MARKERS.iter().any(|m| trimmed.contains(m))
    }

    /// Tier 1: a header at the start of the line. Inside a code block only
    /// the exact canonical spelling counts, so `action: restart` in a YAML
    /// block stays content.
    fn line_header<'a>(&self, trimmed: &'a str) -> Option<(Section, &'a str)> {
        if self.in_fence {
            if trimmed == "Thought" {
                return Some((Section::Thought, ""));
            }
            return Section::ALL
                .iter()
                .find_map(|s| trimmed.strip_prefix(s.header()).map(|rest| (*s, rest)))
                .filter(|(s, _)| self.accepts(*s));
        }
        if let Some(caps) = BARE_HEADER.captures(trimmed) {
            let section = if caps[1].to_ascii_lowercase().starts_with("thought") {
                Section::Thought
            } else {
                Section::FinalAnswer
            };
            return self.accepts(section).then_some((section, ""));
        }
        let caps = LENIENT_HEADER.captures(trimmed)?;
        let word = caps.get(1)?.as_str().to_ascii_lowercase();
        let section = if word.starts_with("thought") {
            Section::Thought
        } else if word.starts_with("final") {
            Section::FinalAnswer
        } else if word.contains("input") {
            Section::ActionInput
        } else {
            Section::Action
        };
        let rest = caps.get(2).map_or("", |m| m.as_str());
        self.accepts(section).then_some((section, rest))
    }

    /// The first Final Answer wins; later ones are plain content.
    fn accepts(&self, section: Section) -> bool {
        !(section == Section::FinalAnswer && self.final_seen)
    }

    /// Adds text to the current section, splitting off headers that appear
    /// in the middle of it (tiers 2 and 3).
    fn feed_text(&mut self, text: &str) {
        let mut text = text.to_string();
        loop {
            if self.current == Some(Section::Action)
                && let Some(m) = INLINE_ACTION_INPUT.find(&text)
            {
                let (before, after) = (text[..m.start()].to_string(), text[m.end()..].to_string());
                self.push(before.trim_end());
                self.switch_to(Section::ActionInput);
                text = after.trim().to_string();
                continue;
            }
            if !self.in_fence
                && matches!(self.current, None | Some(Section::Thought))
                && let Some((section, split_at, resume_at)) = self.midline_header(&text)
            {
                let before = text[..split_at].trim_end().to_string();
                let after = text[resume_at..].trim().to_string();
                if !before.trim().is_empty() {
                    self.push(&before);
                }
                self.switch_to(section);
                text = after;
                continue;
            }
            self.push(&text);
            return;
        }
    }

    /// The earliest mid-line header in `text`: (section, end of the text that
    /// stays in the current section, start of the new section's content).
    fn midline_header(&self, text: &str) -> Option<(Section, usize, usize)> {
        let mut candidates: Vec<(Section, &Regex)> = vec![(Section::Action, &MIDLINE_ACTION)];
        if !self.final_seen {
            candidates.push((Section::FinalAnswer, &MIDLINE_FINAL_ANSWER));
        }
        if self.action.is_some() {
            candidates.push((Section::ActionInput, &MIDLINE_ACTION_INPUT));
        }
        candidates
            .into_iter()
            .filter_map(|(section, re)| re.find(text).map(|m| (section, m.start() + 1, m.end())))
            .min_by_key(|(_, start, _)| *start)
    }

    fn push(&mut self, line: &str) {
        if self.final_capture_pending && self.current == Some(Section::FinalAnswer) {
            self.final_capture_pending = false;
            self.final_capture = Some(vec![line.to_string()]);
        }
        match self.current {
            Some(_) => self.lines.push(line.to_string()),
            None => self.preamble.push(line.to_string()),
        }
    }

    fn switch_to(&mut self, section: Section) {
        self.close_section();
        if section == Section::Action {
            // A new action starts a new call: an earlier Action Input belongs
            // to the earlier action.
            self.action_input = None;
        }
        if section == Section::Thought {
            self.thought_header = true;
        }
        if section == Section::FinalAnswer {
            self.final_seen = true;
            self.final_capture_pending = true;
        }
        self.current = Some(section);
    }

    fn close_section(&mut self) {
        let Some(section) = self.current.take() else {
            return;
        };
        let content = block_text(&std::mem::take(&mut self.lines));
        match section {
            Section::Thought => {
                if !content.is_empty() {
                    self.thoughts.push(content);
                }
            }
            Section::Action => set_slot(&mut self.action, content),
            Section::ActionInput => set_slot(&mut self.action_input, content),
            Section::FinalAnswer => set_slot(&mut self.final_answer, content),
        }
    }

    fn finish(mut self, original: &str) -> ParsedReactResponse {
        self.close_section();

        let mut recovered_action = false;
        if self.action.is_none()
            && self.action_input.is_some()
            && let Some(name) = recover_missing_action(original)
        {
            self.action = Some(name);
            recovered_action = true;
        }

        let thought = if self.thoughts.is_empty() {
            Some(block_text(&self.preamble)).filter(|t| !t.is_empty())
        } else {
            Some(self.thoughts.join("\n\n"))
        };
        let found = FoundSections {
            thought: self.thought_header,
            action: self.action.is_some(),
            action_input: self.action_input.is_some(),
            final_answer: self.final_answer.is_some(),
        };
        let action = self.action.as_deref().and_then(usable_action_name);
        let input = self.action_input.as_deref().map(clean_action_input);

        let outcome = match (&action, &input, &self.final_answer) {
            (Some(action), Some(input), _) => {
                if action.contains('.') {
                    ReactOutcome::ToolCall {
                        action: action.clone(),
                        input: input.clone(),
                    }
                } else {
                    ReactOutcome::InvalidToolName {
                        action: action.clone(),
                        input: input.clone(),
                        message: format!(
                            "Unknown tool '{action}'. Tool names have the form 'server.tool'; \
                             use one of the tools listed below."
                        ),
                    }
                }
            }
            (_, _, Some(answer)) if !answer.is_empty() => {
                let full = self.final_capture.as_deref().map(block_text);
                ReactOutcome::FinalAnswer(
                    full.filter(|f| !f.is_empty())
                        .unwrap_or_else(|| answer.clone()),
                )
            }
            _ => ReactOutcome::Malformed,
        };

        ParsedReactResponse {
            thought,
            outcome,
            found,
            raw_action: self.action,
            raw_action_input: self.action_input,
            hallucinated_observation: self.hallucinated_observation,
            recovered_action,
        }
    }
}

/// Stores section content: a later empty duplicate never erases earlier
/// content.
fn set_slot(slot: &mut Option<String>, content: String) {
    if !content.is_empty() || slot.is_none() {
        *slot = Some(content);
    }
}

/// Joins a section's lines, removing the indentation common to the lines
/// after the header line (so YAML nesting and Markdown lists survive), and
/// trims the result.
fn block_text(lines: &[String]) -> String {
    let Some((first, rest)) = lines.split_first() else {
        return String::new();
    };
    let indent = rest
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.bytes().take_while(|b| *b == b' ' || *b == b'\t').count())
        .min()
        .unwrap_or(0);
    let mut out = Vec::with_capacity(lines.len());
    out.push(first.as_str());
    for line in rest {
        // Only ASCII spaces and tabs count as indentation, so `indent` is a
        // character boundary of every non-blank line; blank lines become
        // empty.
        out.push(line.get(indent..).unwrap_or("").trim_end());
    }
    out.join("\n").trim().to_string()
}

/// Words models write in the Action line when they do not want to act.
const NO_ACTION_MARKERS: [&str; 9] = [
    "none",
    "n/a",
    "na",
    "null",
    "nil",
    "-",
    "nothing",
    "no action",
    "no_action",
];

/// The tool name of an Action section, or `None` when it names nothing
/// (empty, or a "no action" marker such as `None` or `N/A`).
pub(crate) fn usable_action_name(raw: &str) -> Option<String> {
    let name = clean_action(raw);
    let lower = name.to_ascii_lowercase();
    (!name.is_empty() && !NO_ACTION_MARKERS.contains(&lower.as_str())).then_some(name)
}

/// The tool name from the Action section: its first line without Markdown
/// decoration, quotes, trailing punctuation or `()`. Prose after a valid
/// name (`pods_list (to see restarts)`) is dropped.
fn clean_action(raw: &str) -> String {
    let first = raw
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let cleaned = strip_decoration(first);
    if cleaned.contains(char::is_whitespace)
        && let Some(token) = cleaned.split_whitespace().next()
    {
        let token = strip_decoration(token);
        if TOOL_NAME.is_match(&token) {
            return token;
        }
    }
    cleaned
}

fn strip_decoration(text: &str) -> String {
    let mut s = text.trim();
    loop {
        let before = s;
        s = s.trim_matches(|c| matches!(c, '`' | '*' | '"' | '\''));
        s = s.trim_end_matches(['.', ',', ';', ':']);
        s = s.strip_suffix("()").unwrap_or(s);
        s = s.trim();
        if s == before {
            return s.to_string();
        }
    }
}

/// The Action Input without an enclosing code fence or inline backticks;
/// otherwise verbatim (the MCP executor runs the JSON → YAML → key-value →
/// raw cascade).
fn clean_action_input(raw: &str) -> String {
    let mut s = raw.trim();
    if s.starts_with("```") {
        s = match s.find('\n') {
            Some(newline) => &s[newline + 1..],
            None => s.trim_start_matches('`'),
        };
    }
    if let Some(stripped) = s.trim_end().strip_suffix("```") {
        s = stripped;
    }
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('`') && s.ends_with('`') && !s[1..s.len() - 1].contains('`') {
        return s[1..s.len() - 1].trim().to_string();
    }
    s.to_string()
}

/// Missing-Action recovery: the response has an Action Input but no usable
/// Action header. Looks backwards from the Action Input for `Action:` (then
/// for the bare word `Action`) followed by a `server.tool` name on the same
/// line.
fn recover_missing_action(text: &str) -> Option<String> {
    let input_at = RECOVER_ACTION_INPUT.find(text)?.start();
    let before = &text[..input_at];
    for pattern in [&*RECOVER_ACTION_COLON, &*RECOVER_ACTION_WORD] {
        if let Some(m) = pattern.find_iter(before).last() {
            let line = before[m.end()..].lines().next().unwrap_or("");
            let token = line
                .trim_start_matches(|c: char| c == ':' || c == '*' || c.is_whitespace())
                .split_whitespace()
                .next()
                .unwrap_or("");
            let candidate = strip_decoration(token);
            if TOOL_NAME.is_match(&candidate) {
                return Some(candidate);
            }
        }
    }
    None
}
