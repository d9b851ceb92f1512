//! Slack notifications of investigations, the same in both modes: when a
//! session ends (completed, failed, timed out, cancelled) and, optionally,
//! when it starts — alert type, status, the executive summary (else the
//! final analysis or the error) and a link to the session in the dashboard.
//!
//! Messages thread per key: an Alertmanager fingerprint (every episode of
//! the alert in one thread), else the session id. The first message opens
//! the thread; later ones reply in it. Fail-open: Slack being down, slow or
//! refusing never touches an investigation — the notice is logged and
//! counted, and dropped.

use std::time::Duration;

use serde_json::{Value, json};
use tarsy_core::{Cost, ScoreStatus, SecretValue, SessionStatus};
use tarsy_store::{Session, SessionScore, Store};

pub use tarsy_config::DEFAULT_SLACK_API_URL;

/// Longest text of one message (Slack's limit is 40,000 characters; a
/// summary longer than this is cut, with the dashboard link for the rest).
const MAX_TEXT_CHARS: usize = 3000;

/// Attempts of one message while Slack answers 429.
const MAX_ATTEMPTS: u32 = 3;

/// Longest `Retry-After` honoured; longer waits drop the message.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Where and how to notify.
#[derive(Debug, Clone)]
pub struct SlackSettings {
    /// Bot token (`chat:write`).
    pub token: SecretValue,
    /// Channel used when the chain names none.
    pub channel: String,
    /// Base URL of the Web API (a fake in tests).
    pub api_url: String,
    /// Base URL of the dashboard (`…/ui/sessions/{id}` is linked), if any.
    pub dashboard_url: Option<String>,
    /// Also notify when an investigation starts.
    pub notify_start: bool,
    /// Limit of one request.
    pub timeout: Duration,
}

/// One session's notice: which session, the chain's channel override and
/// the thread key (an Alertmanager fingerprint, when there is one).
#[derive(Debug, Clone)]
pub struct Notice {
    /// The session (as stored when it started or ended).
    pub session: Session,
    /// The chain's own channel, overriding the default.
    pub channel: Option<String>,
    /// What messages thread by (default: the session id).
    pub thread_key: Option<String>,
    /// The judge's scoring attempt that just ended: the notice is then the
    /// score, replied in the session's thread, instead of its status.
    pub score: Option<SessionScore>,
}

/// Posts notices to Slack.
#[derive(Debug, Clone)]
pub struct SlackNotifier {
    http: reqwest::Client,
    settings: SlackSettings,
    store: Store,
}

/// Why a message was not posted (logged, never returned to a caller that
/// could fail an investigation with it).
#[derive(Debug, thiserror::Error)]
enum SlackError {
    #[error("request failed: {0}")]
    Http(String),
    #[error("Slack refused the message: {0}")]
    Refused(String),
    #[error("rate limited; retry after {0:?} is longer than allowed")]
    RateLimited(Duration),
    #[error("thread bookkeeping failed: {0}")]
    Store(#[from] tarsy_store::StoreError),
}

impl SlackNotifier {
    /// A notifier with its own HTTP client.
    pub fn new(settings: SlackSettings, store: Store) -> Self {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .unwrap_or_default();
        Self {
            http,
            settings,
            store,
        }
    }

    /// Whether start notices are wanted.
    pub fn notifies_start(&self) -> bool {
        self.settings.notify_start
    }

    /// Posts the notice of a session's start or end, in the background:
    /// returns at once; failures are logged and counted.
    pub fn send(&self, notice: Notice) {
        let this = self.clone();
        tokio::spawn(async move {
            let metrics = tarsy_telemetry::global();
            match this.post_notice(&notice).await {
                Ok(()) => metrics.slack_notification(true),
                Err(e) => {
                    metrics.slack_notification(false);
                    tracing::warn!(session_id = %notice.session.id, error = %e, "Slack notification not sent");
                }
            }
        });
    }

    async fn post_notice(&self, notice: &Notice) -> Result<(), SlackError> {
        let channel = notice
            .channel
            .clone()
            .unwrap_or_else(|| self.settings.channel.clone());
        let key = notice
            .thread_key
            .clone()
            .unwrap_or_else(|| notice.session.id.clone());
        let text = match &notice.score {
            Some(attempt) => self.score_text(&notice.session, attempt),
            None => {
                // The end notice says what the investigation cost; without
                // the store's answer it says nothing of it.
                let cost = if notice.session.status.is_terminal() {
                    self.store.session_cost(&notice.session.id).await
                } else {
                    Ok(None)
                };
                self.text(&notice.session, cost.ok().flatten().as_ref())
            }
        };
        let thread = self.store.slack_thread(&key, &channel).await?;
        let ts = self.post(&channel, &text, thread.as_deref()).await?;
        if thread.is_none() {
            self.store.open_slack_thread(&key, &channel, &ts).await?;
        }
        Ok(())
    }

    /// `chat.postMessage`, honouring 429 `Retry-After`; returns the
    /// message's `ts`.
    async fn post(
        &self,
        channel: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> Result<String, SlackError> {
        let mut body = json!({"channel": channel, "text": text, "unfurl_links": false});
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let url = format!(
            "{}/chat.postMessage",
            self.settings.api_url.trim_end_matches('/')
        );
        for attempt in 1..=MAX_ATTEMPTS {
            let response = self
                .http
                .post(&url)
                .bearer_auth(self.settings.token.expose())
                .json(&body)
                .send()
                .await
                .map_err(|e| SlackError::Http(e.without_url().to_string()))?;
            if response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
                let wait = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map_or(Duration::from_secs(1), Duration::from_secs);
                if wait > MAX_RETRY_AFTER || attempt == MAX_ATTEMPTS {
                    return Err(SlackError::RateLimited(wait));
                }
                tokio::time::sleep(wait).await;
                continue;
            }
            let status = response.status();
            let reply: Value = response
                .json()
                .await
                .map_err(|e| SlackError::Http(format!("HTTP {status}: {}", e.without_url())))?;
            if reply["ok"] == json!(true) {
                return reply["ts"]
                    .as_str()
                    .map(String::from)
                    .ok_or_else(|| SlackError::Refused("no ts in the answer".into()));
            }
            let error = reply["error"].as_str().unwrap_or("unknown error");
            return Err(SlackError::Refused(error.to_string()));
        }
        Err(SlackError::RateLimited(Duration::ZERO))
    }

    /// The message: status, alert type, cost, what was found, the link.
    fn text(&self, s: &Session, cost: Option<&Cost>) -> String {
        let (icon, what) = match s.status {
            SessionStatus::Completed => (":white_check_mark:", "completed"),
            SessionStatus::Failed => (":x:", "failed"),
            SessionStatus::TimedOut => (":hourglass:", "timed out"),
            SessionStatus::Cancelled => (":no_entry_sign:", "was cancelled"),
            SessionStatus::Pending | SessionStatus::InProgress | SessionStatus::Cancelling => {
                (":mag:", "started")
            }
        };
        let mut text = format!("{icon} Investigation of *{}* {what}", s.alert_type);
        // Nothing priced (estimates off, no known price): nothing said.
        if let Some(cost) = cost.filter(|c| c.usd > 0.0) {
            let bound = if cost.partial { " at least" } else { "" };
            text.push_str(&format!(
                " (cost{bound} ${})",
                tarsy_core::cost::usd(cost.usd)
            ));
        }
        if let Some(base) = &self.settings.dashboard_url {
            text.push_str(&format!(
                " — <{}/ui/sessions/{}|open in TARSy>",
                base.trim_end_matches('/'),
                s.id
            ));
        }
        let detail = s
            .executive_summary
            .as_deref()
            .or(s.final_analysis.as_deref())
            .or(s.error_message.as_deref());
        if s.status.is_terminal()
            && let Some(detail) = detail.filter(|d| !d.trim().is_empty())
        {
            text.push_str("\n\n");
            text.push_str(&clip(detail, MAX_TEXT_CHARS));
        }
        text
    }
}

impl SlackNotifier {
    /// The judge's verdict as a thread reply: the score and failure tags
    /// (or why there is none), the first missing tools, the link.
    fn score_text(&self, s: &Session, attempt: &SessionScore) -> String {
        let mut text = match attempt.score {
            Some(score) if attempt.status == ScoreStatus::Completed => {
                let tags = if attempt.failure_tags.is_empty() {
                    "no failure tag".to_string()
                } else {
                    attempt.failure_tags.join(", ")
                };
                format!(":bar_chart: The judge scored this investigation *{score}/100* ({tags})")
            }
            _ => format!(
                ":grey_question: The judge could not score this investigation: {}",
                attempt.error.as_deref().unwrap_or("the attempt failed")
            ),
        };
        if let Some(base) = &self.settings.dashboard_url {
            text.push_str(&format!(
                " — <{}/ui/sessions/{}/scoring|the assessment>",
                base.trim_end_matches('/'),
                s.id
            ));
        }
        if let Some(report) = &attempt.tool_report {
            let missing = tarsy_scoring::parse_tool_report(report).missing;
            if !missing.is_empty() {
                text.push_str("\nMissing tools: ");
                text.push_str(&clip(&missing.join("; "), MAX_TEXT_CHARS / 4));
            }
        }
        text
    }
}

/// At most `max` characters, marked when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
