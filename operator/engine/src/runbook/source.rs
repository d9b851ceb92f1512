//! The fetcher trait and the caching, fail-open runbook source.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::url::{DomainAllowList, hide_queries, resolve_runbook_url, url_for_display};
use crate::prompt::assets;

/// Why a runbook could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunbookError {
    /// The URL is not a fetchable http(s) URL.
    #[error("invalid runbook URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The host is not in the allow-list.
    #[error("runbook host {host:?} is not an allowed runbook domain (allowed: {allowed})")]
    DomainNotAllowed {
        /// The rejected host.
        host: String,
        /// The allowed domains, comma separated.
        allowed: String,
    },
    /// The fetcher failed (network, HTTP status, ...).
    #[error("fetching runbook {url} failed: {message}")]
    Fetch {
        /// The fetched URL.
        url: String,
        /// The fetcher's explanation.
        message: String,
    },
    /// The fetcher took too long.
    #[error("fetching runbook {url} timed out after {timeout:?}")]
    Timeout {
        /// The fetched URL.
        url: String,
        /// The limit.
        timeout: Duration,
    },
    /// The runbook has no content.
    #[error("runbook {url} is empty")]
    Empty {
        /// The fetched URL.
        url: String,
    },
}

impl RunbookError {
    /// A fetch failure, for [`RunbookFetcher`] implementations.
    pub fn fetch(url: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Fetch {
            url: url.into(),
            message: message.into(),
        }
    }
}

/// Downloads a runbook. Implemented outside the engine (HTTP) and in tests.
/// Receives the final URL to fetch (already rewritten and allow-listed).
#[async_trait]
pub trait RunbookFetcher: Send + Sync {
    /// The document at `url` as text.
    async fn fetch(&self, url: &str) -> Result<String, RunbookError>;
}

/// Limits and policy of a [`CachingRunbookSource`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunbookSettings {
    /// Hosts runbooks may come from.
    pub allowed_domains: DomainAllowList,
    /// How long a fetched runbook is reused.
    pub cache_ttl: Duration,
    /// Most runbooks kept in the cache (the oldest is evicted).
    pub max_cache_entries: usize,
    /// Longest a single fetch may take.
    pub fetch_timeout: Duration,
    /// Larger runbooks are cut to this many bytes.
    pub max_bytes: usize,
    /// Runbook used when none is given or fetching fails.
    pub default_runbook: String,
}

impl Default for RunbookSettings {
    /// GitHub allow-list, 5 min cache of up to 128 runbooks, 10 s timeout,
    /// 256 KiB cap, the built-in default runbook.
    fn default() -> Self {
        Self {
            allowed_domains: DomainAllowList::github(),
            cache_ttl: Duration::from_secs(300),
            max_cache_entries: 128,
            fetch_timeout: Duration::from_secs(10),
            max_bytes: 256 * 1024,
            default_runbook: default_runbook(),
        }
    }
}

/// The built-in runbook (general investigation steps).
pub fn default_runbook() -> String {
    assets::DEFAULT_RUNBOOK.trim().to_string()
}

/// A fetched runbook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runbook {
    /// Its text.
    pub content: String,
    /// The URL it was fetched from.
    pub fetch_url: String,
    /// Served from the cache.
    pub cached: bool,
    /// Cut to [`RunbookSettings::max_bytes`].
    pub truncated: bool,
}

/// Where a resolved runbook came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunbookOrigin {
    /// Fetched (or served from the cache) from this URL.
    Url(String),
    /// The default runbook.
    Default,
}

/// The runbook to put in the prompt, with a warning to record when the
/// alert's runbook could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRunbook {
    /// Runbook text.
    pub content: String,
    /// Where it came from.
    pub origin: RunbookOrigin,
    /// Why the alert's runbook was not (fully) used, if it was not.
    pub warning: Option<String>,
}

struct CacheEntry {
    content: String,
    truncated: bool,
    fetched_at: Instant,
}

/// A [`RunbookFetcher`] wrapped with the URL rules, the allow-list, a
/// timeout, a size cap and a TTL cache keyed by the URL fetched. Failures
/// are not cached. Safe to share between concurrent executions.
pub struct CachingRunbookSource<F> {
    fetcher: F,
    settings: RunbookSettings,
    cache: Mutex<HashMap<String, CacheEntry>>,
}

impl<F: RunbookFetcher> CachingRunbookSource<F> {
    /// Wraps `fetcher`.
    pub fn new(fetcher: F, settings: RunbookSettings) -> Self {
        Self {
            fetcher,
            settings,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The settings in use.
    pub fn settings(&self) -> &RunbookSettings {
        &self.settings
    }

    /// Fail-open resolution for an alert: no URL → the default runbook; a
    /// usable URL → its content; any error → the default runbook and a
    /// warning saying why. A truncated runbook is used, with a warning.
    /// Warnings show the URL without its query string (see
    /// [`url_for_display`]); the caller logs and records them.
    pub async fn resolve(&self, url: Option<&str>) -> ResolvedRunbook {
        let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
            return self.fallback(None);
        };
        match self.fetch_runbook(url).await {
            Ok(runbook) => ResolvedRunbook {
                warning: runbook.truncated.then(|| {
                    format!(
                        "Runbook {} is larger than {} bytes and was truncated",
                        url_for_display(url),
                        self.settings.max_bytes
                    )
                }),
                content: runbook.content,
                origin: RunbookOrigin::Url(runbook.fetch_url),
            },
            Err(error) => self.fallback(Some(hide_queries(
                &format!("Runbook unavailable, using the default runbook: {error}"),
                url,
            ))),
        }
    }

    /// Strict fetch: URL rules, allow-list, cache, timeout, size cap. Errors
    /// are returned, not replaced by the default.
    pub async fn fetch_runbook(&self, url: &str) -> Result<Runbook, RunbookError> {
        let target = resolve_runbook_url(url)?;
        if !self.settings.allowed_domains.allows_url(&target) {
            return Err(RunbookError::DomainNotAllowed {
                host: target.fetch_host,
                allowed: match self.settings.allowed_domains.entries() {
                    [] => "none".to_string(),
                    entries => entries.join(", "),
                },
            });
        }
        if let Some(hit) = self.cached(&target.fetch_url) {
            return Ok(hit);
        }

        let fetched = tokio::time::timeout(
            self.settings.fetch_timeout,
            self.fetcher.fetch(&target.fetch_url),
        )
        .await
        .map_err(|_| RunbookError::Timeout {
            url: target.fetch_url.clone(),
            timeout: self.settings.fetch_timeout,
        })??;
        if fetched.trim().is_empty() {
            return Err(RunbookError::Empty {
                url: target.fetch_url,
            });
        }
        let (content, truncated) = truncate_to(fetched, self.settings.max_bytes);
        self.store(&target.fetch_url, &content, truncated);
        Ok(Runbook {
            content,
            fetch_url: target.fetch_url,
            cached: false,
            truncated,
        })
    }

    fn fallback(&self, warning: Option<String>) -> ResolvedRunbook {
        ResolvedRunbook {
            content: self.settings.default_runbook.clone(),
            origin: RunbookOrigin::Default,
            warning,
        }
    }

    fn cached(&self, fetch_url: &str) -> Option<Runbook> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cache.get(fetch_url)?;
        if entry.fetched_at.elapsed() >= self.settings.cache_ttl {
            cache.remove(fetch_url);
            return None;
        }
        Some(Runbook {
            content: entry.content.clone(),
            fetch_url: fetch_url.to_string(),
            cached: true,
            truncated: entry.truncated,
        })
    }

    fn store(&self, fetch_url: &str, content: &str, truncated: bool) {
        if self.settings.max_cache_entries == 0 || self.settings.cache_ttl.is_zero() {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if !cache.contains_key(fetch_url)
            && cache.len() >= self.settings.max_cache_entries
            && let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, e)| e.fetched_at)
                .map(|(k, _)| k.clone())
        {
            cache.remove(&oldest);
        }
        cache.insert(
            fetch_url.to_string(),
            CacheEntry {
                content: content.to_string(),
                truncated,
                fetched_at: Instant::now(),
            },
        );
    }
}

/// The caching source is itself a fetcher (strict: errors are returned).
#[async_trait]
impl<F: RunbookFetcher> RunbookFetcher for CachingRunbookSource<F> {
    async fn fetch(&self, url: &str) -> Result<String, RunbookError> {
        self.fetch_runbook(url).await.map(|r| r.content)
    }
}

/// Cuts `text` to at most `max_bytes` on a character boundary.
fn truncate_to(mut text: String, max_bytes: usize) -> (String, bool) {
    if text.len() <= max_bytes {
        return (text, false);
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    (text, true)
}
