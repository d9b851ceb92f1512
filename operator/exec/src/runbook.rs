//! Runbooks over HTTP(S): the engine's runbook rules (allow-list, GitHub
//! rewrite, cache, size cap, fail-open default) with a real downloader, a
//! token for private repositories, and what a failed fetch leaves behind: an
//! event on the execution's timeline and a system warning every API replica
//! shows (cleared by the next successful fetch of that runbook).

use std::time::Duration;

use async_trait::async_trait;
use tarsy_config::Defaults;
use tarsy_core::{SecretValue, error_kind};
use tarsy_engine::ExecutionWarning;
use tarsy_engine::runbook::{
    CachingRunbookSource, DomainAllowList, ResolvedRunbook, RunbookError, RunbookFetcher,
    RunbookOrigin, RunbookSettings, resolve_runbook_url, url_for_display,
};
use tarsy_store::Store;

/// Environment variable holding the token sent with runbook downloads from
/// [`Defaults::runbook_token_domains`] (a GitHub token with read access to
/// private runbook repositories). Cluster mode: the operator puts it in
/// investigation pods' environment from the Secret `--runbook-token-secret`
/// names (the runner contract's variable).
pub const GITHUB_TOKEN_ENV: &str = tarsy_config::defaults::RUNBOOK_TOKEN_ENV;

/// How long the warning of a failed runbook fetch is shown unless the
/// runbook is fetched again (successfully or not).
pub const WARNING_TTL: Duration = Duration::from_secs(6 * 3600);

/// The runbook token of this process ([`GITHUB_TOKEN_ENV`]), if set.
pub fn token_from_env() -> Option<SecretValue> {
    std::env::var(GITHUB_TOKEN_ENV)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .map(SecretValue::new)
}

/// Downloads runbooks over HTTP(S).
pub struct HttpRunbookFetcher {
    /// Built on the first download: building it loads the platform's TLS
    /// root store, which most processes (no runbook URL) never need.
    client: std::sync::OnceLock<reqwest::Client>,
    token: Option<SecretValue>,
    token_domains: DomainAllowList,
}

impl HttpRunbookFetcher {
    fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(reqwest::Client::new)
    }

    /// The token goes only to its hosts, and only over HTTPS (a loopback
    /// address aside): never in clear text across a network.
    fn token_for(&self, url: &str) -> Option<&SecretValue> {
        let token = self.token.as_ref()?;
        let target = resolve_runbook_url(url).ok()?;
        let loopback = matches!(
            target.fetch_host.as_str(),
            "127.0.0.1" | "localhost" | "[::1]" | "::1"
        );
        let secure = target.fetch_url.starts_with("https://") || loopback;
        (secure && self.token_domains.allows(&target.fetch_host)).then_some(token)
    }
}

#[async_trait]
impl RunbookFetcher for HttpRunbookFetcher {
    async fn fetch(&self, url: &str) -> Result<String, RunbookError> {
        let mut request = self.client().get(url);
        if let Some(token) = self.token_for(url) {
            request = request.bearer_auth(token.expose());
        }
        let response = request
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| failed(url, e))?;
        response.text().await.map_err(|e| failed(url, e))
    }
}

/// A failed download. reqwest's message would quote the URL in its own
/// (normalised) spelling, which the engine could not strip the query string
/// from; the error names the URL already.
fn failed(url: &str, e: reqwest::Error) -> RunbookError {
    RunbookError::fetch(url, e.without_url().to_string())
}

/// The runbook source of a process: shared by its executions (one cache).
pub type Runbooks = CachingRunbookSource<HttpRunbookFetcher>;

/// A runbook source fetching from the hosts of `defaults.runbook_domains`
/// (exact names or `*.example.com`), with the engine's default limits,
/// sending `token` to the hosts of `defaults.runbook_token_domains`.
pub fn runbook_source(defaults: &Defaults, token: Option<SecretValue>) -> Runbooks {
    CachingRunbookSource::new(
        HttpRunbookFetcher {
            client: std::sync::OnceLock::new(),
            token,
            token_domains: DomainAllowList::new(&defaults.runbook_token_domains),
        },
        RunbookSettings {
            allowed_domains: DomainAllowList::new(&defaults.runbook_domains),
            ..RunbookSettings::default()
        },
    )
}

/// Identity of the system warning about runbook `url` (one per runbook,
/// whatever its query string).
fn warning_id(url: &str) -> String {
    format!("runbook:{}", url_for_display(url))
}

/// What the timeline shows about the runbook of an execution (a fetch that
/// failed, or a runbook cut to the size limit), and the system warning it
/// raises or clears. Store problems are logged: a runbook never fails an
/// execution.
pub(crate) async fn report(
    store: &Store,
    url: Option<&str>,
    resolved: &ResolvedRunbook,
) -> Option<ExecutionWarning> {
    let url = url.map(str::trim).filter(|u| !u.is_empty())?;
    let Some(warning) = &resolved.warning else {
        if let Err(e) = store.clear_system_warning(&warning_id(url)).await {
            tracing::debug!(error = %e, "runbook warning not cleared");
        }
        return None;
    };
    // The engine's warnings show the URL without its query string already.
    let failed = resolved.origin == RunbookOrigin::Default;
    if failed
        && let Err(e) = store
            .raise_system_warning(
                &warning_id(url),
                "runbook",
                &format!(
                    "Runbook {} could not be fetched; investigations use the default runbook",
                    url_for_display(url)
                ),
                warning,
                WARNING_TTL,
            )
            .await
    {
        tracing::warn!(error = %e, "runbook warning not stored");
    }
    Some(ExecutionWarning {
        kind: if failed {
            error_kind::RUNBOOK_UNAVAILABLE
        } else {
            error_kind::RUNBOOK_TRUNCATED
        }
        .to_string(),
        message: warning.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetcher(token_domains: &[&str]) -> HttpRunbookFetcher {
        HttpRunbookFetcher {
            client: std::sync::OnceLock::new(),
            token: Some(SecretValue::new("ghp_secret")),
            token_domains: DomainAllowList::new(token_domains),
        }
    }

    #[test]
    fn the_token_goes_only_to_its_hosts_over_https() {
        let f = fetcher(&["github.com", "raw.githubusercontent.com"]);
        assert!(
            f.token_for("https://raw.githubusercontent.com/acme/rb/main/a.md")
                .is_some()
        );
        assert!(f.token_for("https://wiki.example.com/a.md").is_none());
        assert!(
            f.token_for("http://raw.githubusercontent.com/acme/rb/main/a.md")
                .is_none()
        );
        let local = fetcher(&["127.0.0.1"]);
        assert!(local.token_for("http://127.0.0.1:8080/a.md").is_some());
    }

    #[test]
    fn one_warning_per_runbook_whatever_its_query_string() {
        assert_eq!(
            warning_id("https://wiki.example.com/rb?token=abc#x"),
            "runbook:https://wiki.example.com/rb"
        );
    }
}
