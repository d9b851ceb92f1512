//! Slack notification flags, the same for `tarsy serve` and `tarsy
//! controller`. The bot token comes from the environment only
//! (`TARSY_SLACK_BOT_TOKEN`), never from the command line, where process
//! listings would show it.

use std::time::Duration;

use tarsy_core::SecretValue;
use tarsy_exec::notify::{DEFAULT_SLACK_API_URL, SlackSettings};

/// The environment variable holding the Slack bot token.
const TOKEN_ENV: &str = "TARSY_SLACK_BOT_TOKEN";

/// Where investigations are announced.
#[derive(Debug, Clone, clap::Args)]
pub struct NotifyArgs {
    /// Slack channel notified when investigations end (chains may name
    /// their own); needs TARSY_SLACK_BOT_TOKEN. Unset: no notifications.
    #[arg(long, env = "TARSY_SLACK_CHANNEL")]
    pub slack_channel: Option<String>,
    /// Also notify when an investigation starts.
    #[arg(long, env = "TARSY_SLACK_NOTIFY_START")]
    pub slack_notify_start: bool,
    /// Slack Web API base URL.
    #[arg(long, env = "TARSY_SLACK_API_URL", default_value = DEFAULT_SLACK_API_URL)]
    pub slack_api_url: String,
    /// The dashboard's external URL, linked from notifications (e.g.
    /// https://tarsy.example.com).
    #[arg(long, env = "TARSY_DASHBOARD_URL")]
    pub dashboard_url: Option<String>,
}

impl NotifyArgs {
    /// The Slack settings, if notifications are configured.
    pub fn slack(&self) -> anyhow::Result<Option<SlackSettings>> {
        let Some(channel) = self.slack_channel.clone().filter(|c| !c.trim().is_empty()) else {
            return Ok(None);
        };
        let token = std::env::var(TOKEN_ENV)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| anyhow::anyhow!("--slack-channel needs the bot token in {TOKEN_ENV}"))?;
        Ok(Some(SlackSettings {
            token: SecretValue::new(token.trim()),
            channel,
            api_url: self.slack_api_url.clone(),
            dashboard_url: self.dashboard_url.clone(),
            notify_start: self.slack_notify_start,
            timeout: Duration::from_secs(10),
        }))
    }
}
