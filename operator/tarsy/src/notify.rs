//! Slack notification flags, the same for `tarsy serve` and `tarsy
//! controller`. Each overrides its field of the defaults (`notifications`
//! of a local Defaults document, or the `TARSY_*` variables). The bot token
//! comes from the environment only (`TARSY_SLACK_BOT_TOKEN`), never from the
//! command line, where process listings would show it.

use std::time::Duration;

use tarsy_config::Notifications;
use tarsy_core::SecretValue;
use tarsy_exec::notify::SlackSettings;

/// The environment variable holding the Slack bot token.
const TOKEN_ENV: &str = "TARSY_SLACK_BOT_TOKEN";

/// Where investigations are announced.
#[derive(Debug, Clone, clap::Args)]
pub struct NotifyArgs {
    /// Slack channel notified when investigations end (chains may name
    /// their own); needs TARSY_SLACK_BOT_TOKEN. Default: the Defaults'
    /// `notifications.slack.channel` (TARSY_SLACK_CHANNEL); unset: no
    /// notifications.
    #[arg(long)]
    pub slack_channel: Option<String>,
    /// Also notify when an investigation starts (TARSY_SLACK_NOTIFY_START).
    #[arg(long)]
    pub slack_notify_start: bool,
    /// Slack Web API base URL (TARSY_SLACK_API_URL).
    #[arg(long)]
    pub slack_api_url: Option<String>,
    /// The dashboard's external URL, linked from notifications, e.g.
    /// `https://tarsy.example.com` (TARSY_DASHBOARD_URL).
    #[arg(long)]
    pub dashboard_url: Option<String>,
}

impl NotifyArgs {
    /// The Slack settings from `defaults` and these flags, if notifications
    /// are configured.
    pub fn slack(&self, defaults: &Notifications) -> anyhow::Result<Option<SlackSettings>> {
        self.slack_with_token(defaults, std::env::var(TOKEN_ENV).ok())
    }

    fn slack_with_token(
        &self,
        defaults: &Notifications,
        token: Option<String>,
    ) -> anyhow::Result<Option<SlackSettings>> {
        let channel = self
            .slack_channel
            .clone()
            .or_else(|| defaults.slack_channel.clone())
            .filter(|c| !c.trim().is_empty());
        let Some(channel) = channel else {
            return Ok(None);
        };
        let token = token.filter(|t| !t.trim().is_empty()).ok_or_else(|| {
            anyhow::anyhow!("Slack channel {channel:?} set, but no bot token in {TOKEN_ENV}")
        })?;
        Ok(Some(SlackSettings {
            token: SecretValue::new(token.trim()),
            channel,
            api_url: self
                .slack_api_url
                .clone()
                .unwrap_or_else(|| defaults.slack_api_url.clone()),
            dashboard_url: self
                .dashboard_url
                .clone()
                .or_else(|| defaults.dashboard_url.clone()),
            notify_start: self.slack_notify_start || defaults.slack_notify_start,
            timeout: Duration::from_secs(10),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(channel: Option<&str>, dashboard: Option<&str>) -> NotifyArgs {
        NotifyArgs {
            slack_channel: channel.map(String::from),
            slack_notify_start: false,
            slack_api_url: None,
            dashboard_url: dashboard.map(String::from),
        }
    }

    #[test]
    fn the_defaults_configure_slack_and_flags_override_them() {
        let defaults = Notifications {
            slack_channel: Some("#from-defaults".into()),
            slack_notify_start: true,
            dashboard_url: Some("https://tarsy.example.com".into()),
            ..Notifications::default()
        };
        let token = || Some("xoxb-1".to_string());
        let s = flags(None, None)
            .slack_with_token(&defaults, token())
            .unwrap()
            .unwrap();
        assert_eq!(s.channel, "#from-defaults");
        assert!(s.notify_start);
        assert_eq!(
            s.dashboard_url.as_deref(),
            Some("https://tarsy.example.com")
        );
        assert_eq!(s.api_url, tarsy_config::DEFAULT_SLACK_API_URL);

        let s = flags(Some("#flag"), Some("https://other.example.com"))
            .slack_with_token(&defaults, token())
            .unwrap()
            .unwrap();
        assert_eq!(s.channel, "#flag");
        assert_eq!(
            s.dashboard_url.as_deref(),
            Some("https://other.example.com")
        );

        // No channel anywhere: no notifications, and no token needed.
        let none = flags(None, None)
            .slack_with_token(&Notifications::default(), None)
            .unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn a_channel_without_a_token_is_refused_without_leaking_anything() {
        let defaults = Notifications {
            slack_channel: Some("#sre".into()),
            ..Notifications::default()
        };
        let e = flags(None, None)
            .slack_with_token(&defaults, Some("  ".into()))
            .unwrap_err();
        assert!(e.to_string().contains(TOKEN_ENV), "{e}");
    }
}
