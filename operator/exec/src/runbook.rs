//! Runbooks over HTTP(S): the engine's runbook rules (allow-list, GitHub
//! rewrite, cache, size cap, fail-open default) with a real downloader.

use async_trait::async_trait;
use tarsy_engine::runbook::{
    CachingRunbookSource, DomainAllowList, RunbookError, RunbookFetcher, RunbookSettings,
};

/// Downloads runbooks over HTTP(S).
pub struct HttpRunbookFetcher {
    /// Built on the first download: building it loads the platform's TLS
    /// root store, which most processes (no runbook URL) never need.
    client: std::sync::OnceLock<reqwest::Client>,
}

impl HttpRunbookFetcher {
    fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(reqwest::Client::new)
    }
}

#[async_trait]
impl RunbookFetcher for HttpRunbookFetcher {
    async fn fetch(&self, url: &str) -> Result<String, RunbookError> {
        let response = self
            .client()
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| RunbookError::fetch(url, e.to_string()))?;
        response
            .text()
            .await
            .map_err(|e| RunbookError::fetch(url, e.to_string()))
    }
}

/// The runbook source of a process: shared by its executions (one cache).
pub type Runbooks = CachingRunbookSource<HttpRunbookFetcher>;

/// A runbook source fetching from the hosts `allowed_domains` names (exact
/// names or `*.example.com`), with the engine's default limits.
pub fn runbook_source(allowed_domains: &[String]) -> Runbooks {
    CachingRunbookSource::new(
        HttpRunbookFetcher {
            client: std::sync::OnceLock::new(),
        },
        RunbookSettings {
            allowed_domains: DomainAllowList::new(allowed_domains),
            ..RunbookSettings::default()
        },
    )
}
