use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::*;

/// In-memory fetcher recording every URL it is asked for.
#[derive(Default, Clone)]
struct MemoryFetcher {
    docs: Arc<Mutex<HashMap<String, Result<String, String>>>>,
    calls: Arc<Mutex<Vec<String>>>,
    delay: Option<Duration>,
}

impl MemoryFetcher {
    fn with(docs: &[(&str, Result<&str, &str>)]) -> Self {
        let fetcher = Self::default();
        for (url, doc) in docs {
            fetcher.set(url, *doc);
        }
        fetcher
    }

    fn set(&self, url: &str, doc: Result<&str, &str>) {
        self.docs.lock().unwrap().insert(
            url.to_string(),
            doc.map(str::to_string).map_err(str::to_string),
        );
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl RunbookFetcher for MemoryFetcher {
    async fn fetch(&self, url: &str) -> Result<String, RunbookError> {
        self.calls.lock().unwrap().push(url.to_string());
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        match self.docs.lock().unwrap().get(url) {
            Some(Ok(doc)) => Ok(doc.clone()),
            Some(Err(message)) => Err(RunbookError::fetch(url, message.clone())),
            None => Err(RunbookError::fetch(url, "404 Not Found")),
        }
    }
}

const BLOB: &str = "https://github.com/acme/runbooks/blob/main/k8s/oom.md";
const RAW: &str = "https://raw.githubusercontent.com/acme/runbooks/main/k8s/oom.md";

fn source(fetcher: MemoryFetcher) -> CachingRunbookSource<MemoryFetcher> {
    CachingRunbookSource::new(fetcher, RunbookSettings::default())
}

// --- URL rules -------------------------------------------------------------------

#[test]
fn github_page_urls_are_fetched_raw() {
    let cases = [
        (BLOB, RAW),
        ("https://github.com/acme/runbooks/raw/main/k8s/oom.md", RAW),
        (
            "https://www.github.com/acme/runbooks/blob/v1.2/oom.md?plain=1#L10-L20",
            "https://raw.githubusercontent.com/acme/runbooks/v1.2/oom.md",
        ),
        (
            "  https://GitHub.com/acme/runbooks/blob/main/a/b/c.md  ",
            "https://raw.githubusercontent.com/acme/runbooks/main/a/b/c.md",
        ),
    ];
    for (input, expected) in cases {
        let url = resolve_runbook_url(input).unwrap();
        assert_eq!(url.fetch_url, expected, "{input}");
        assert_eq!(url.fetch_host, "raw.githubusercontent.com");
        assert!(url.rewritten);
    }
}

#[test]
fn other_urls_are_kept_without_their_fragment() {
    let cases = [
        (
            "https://github.com/acme/runbooks",
            "https://github.com/acme/runbooks",
            "github.com",
        ),
        (RAW, RAW, "raw.githubusercontent.com"),
        (
            "http://wiki.example.com:8080/runbooks/oom?lang=en#steps",
            "http://wiki.example.com:8080/runbooks/oom?lang=en",
            "wiki.example.com",
        ),
    ];
    for (input, expected, host) in cases {
        let url = resolve_runbook_url(input).unwrap();
        assert_eq!(url.fetch_url, expected);
        assert_eq!(url.fetch_host, host);
        assert!(!url.rewritten);
    }
}

#[test]
fn unusable_urls_are_rejected_with_a_reason() {
    let cases = [
        (
            "github.com/acme/runbooks/blob/main/oom.md",
            "missing scheme",
        ),
        ("ftp://example.com/oom.md", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        (
            "https://user:token@github.com/acme/r/blob/main/a.md",
            "credentials",
        ),
        ("https:///oom.md", "missing host"),
        ("https://example.com/run book.md", "whitespace"),
    ];
    for (input, reason) in cases {
        match resolve_runbook_url(input) {
            Err(RunbookError::InvalidUrl { reason: got, .. }) => {
                assert!(got.contains(reason), "{input}: {got}")
            }
            other => panic!("{input}: expected InvalidUrl, got {other:?}"),
        }
    }
}

#[test]
fn allow_list_matches_exact_hosts_and_wildcard_subdomains() {
    let list = DomainAllowList::new(["GitHub.com", "*.corp.example", " ", "wiki.example.com."]);
    assert!(list.allows("github.com"));
    assert!(list.allows("GITHUB.COM"));
    assert!(!list.allows("evil-github.com"));
    assert!(!list.allows("github.com.evil.io"));
    assert!(list.allows("docs.corp.example"));
    assert!(list.allows("a.b.corp.example"));
    assert!(!list.allows("corp.example"));
    assert!(!list.allows("xcorp.example"));
    assert!(list.allows("wiki.example.com"));
    assert_eq!(list.entries().len(), 3);
    assert!(!DomainAllowList::default().allows("github.com"));
}

#[test]
fn rewritten_github_urls_are_allowed_by_github_dot_com() {
    let list = DomainAllowList::new(["github.com"]);
    assert!(list.allows_url(&resolve_runbook_url(BLOB).unwrap()));
    assert!(!list.allows_url(&resolve_runbook_url(RAW).unwrap()));
}

// --- the caching source ------------------------------------------------------------

#[tokio::test]
async fn no_url_means_the_default_runbook_without_warning() {
    let fetcher = MemoryFetcher::default();
    let src = source(fetcher.clone());
    for url in [None, Some(""), Some("   ")] {
        let runbook = src.resolve(url).await;
        assert_eq!(runbook.content, default_runbook());
        assert_eq!(runbook.origin, RunbookOrigin::Default);
        assert!(runbook.warning.is_none());
    }
    assert!(fetcher.calls().is_empty());
    assert!(default_runbook().contains("root cause"));
}

#[tokio::test]
async fn a_github_runbook_is_fetched_raw_and_then_served_from_the_cache() {
    let fetcher = MemoryFetcher::with(&[(RAW, Ok("# OOM\nCheck limits."))]);
    let src = source(fetcher.clone());
    for _ in 0..3 {
        let runbook = src.resolve(Some(BLOB)).await;
        assert_eq!(runbook.content, "# OOM\nCheck limits.");
        assert_eq!(runbook.origin, RunbookOrigin::Url(RAW.to_string()));
        assert!(runbook.warning.is_none());
    }
    assert_eq!(fetcher.calls(), vec![RAW.to_string()]);
    // The raw URL and the page URL share the cache entry.
    assert!(src.fetch_runbook(RAW).await.unwrap().cached);
    assert_eq!(fetcher.calls().len(), 1);
}

#[tokio::test]
async fn cache_entries_expire() {
    let fetcher = MemoryFetcher::with(&[(RAW, Ok("v1"))]);
    let src = CachingRunbookSource::new(
        fetcher.clone(),
        RunbookSettings {
            cache_ttl: Duration::from_millis(40),
            ..RunbookSettings::default()
        },
    );
    assert_eq!(src.resolve(Some(RAW)).await.content, "v1");
    fetcher.set(RAW, Ok("v2"));
    assert_eq!(src.resolve(Some(RAW)).await.content, "v1");
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(src.resolve(Some(RAW)).await.content, "v2");
    assert_eq!(fetcher.calls().len(), 2);
}

#[tokio::test]
async fn the_oldest_entry_is_evicted_when_the_cache_is_full() {
    let other = "https://raw.githubusercontent.com/acme/runbooks/main/disk.md";
    let fetcher = MemoryFetcher::with(&[(RAW, Ok("oom")), (other, Ok("disk"))]);
    let src = CachingRunbookSource::new(
        fetcher.clone(),
        RunbookSettings {
            max_cache_entries: 1,
            ..RunbookSettings::default()
        },
    );
    src.resolve(Some(RAW)).await;
    src.resolve(Some(other)).await;
    src.resolve(Some(other)).await;
    src.resolve(Some(RAW)).await;
    assert_eq!(fetcher.calls(), vec![RAW, other, RAW]);
}

#[tokio::test]
async fn failures_fall_back_to_the_default_with_a_warning_and_are_not_cached() {
    let fetcher = MemoryFetcher::with(&[(RAW, Err("503 Service Unavailable"))]);
    let src = source(fetcher.clone());
    let runbook = src.resolve(Some(BLOB)).await;
    assert_eq!(runbook.content, default_runbook());
    assert_eq!(runbook.origin, RunbookOrigin::Default);
    let warning = runbook.warning.unwrap();
    assert!(warning.contains("503 Service Unavailable"), "{warning}");
    assert!(warning.contains(RAW));

    fetcher.set(RAW, Ok("recovered"));
    assert_eq!(src.resolve(Some(BLOB)).await.content, "recovered");
    assert_eq!(fetcher.calls().len(), 2);
}

/// A query string may carry a credential: warnings never show it, whether
/// the error quotes the URL as given or as fetched.
#[tokio::test]
async fn warnings_show_urls_without_their_query_string() {
    let url = "https://wiki.example.com/rb/oom?token=s3cret#steps";
    let fetched = "https://wiki.example.com/rb/oom?token=s3cret";
    let fetcher = MemoryFetcher::with(&[(fetched, Err("HTTP 500"))]);
    let src = CachingRunbookSource::new(
        fetcher.clone(),
        RunbookSettings {
            allowed_domains: DomainAllowList::new(["wiki.example.com"]),
            ..RunbookSettings::default()
        },
    );
    let warning = src.resolve(Some(url)).await.warning.unwrap();
    assert!(
        warning.contains("https://wiki.example.com/rb/oom"),
        "{warning}"
    );
    assert!(!warning.contains("s3cret"), "{warning}");
    assert_eq!(fetcher.calls(), [fetched]);

    let denied = source(MemoryFetcher::default())
        .resolve(Some("https://metadata.internal/x?sig=s3cret"))
        .await;
    assert!(!denied.warning.unwrap().contains("s3cret"));
    let invalid = source(MemoryFetcher::default())
        .resolve(Some("ftp://files.example.com/rb?sig=s3cret"))
        .await;
    assert!(!invalid.warning.unwrap().contains("s3cret"));
    assert_eq!(url_for_display(url), "https://wiki.example.com/rb/oom");
}

#[tokio::test]
async fn disallowed_domains_are_never_fetched() {
    let fetcher = MemoryFetcher::default();
    let src = source(fetcher.clone());
    let runbook = src
        .resolve(Some("https://metadata.internal/latest/secrets"))
        .await;
    assert_eq!(runbook.origin, RunbookOrigin::Default);
    let warning = runbook.warning.unwrap();
    assert!(
        warning.contains("metadata.internal") && warning.contains("github.com"),
        "{warning}"
    );
    assert!(fetcher.calls().is_empty());

    let strict = src.fetch_runbook("https://metadata.internal/x").await;
    assert!(matches!(strict, Err(RunbookError::DomainNotAllowed { .. })));

    let closed = CachingRunbookSource::new(
        MemoryFetcher::default(),
        RunbookSettings {
            allowed_domains: DomainAllowList::default(),
            ..RunbookSettings::default()
        },
    );
    let err = closed.fetch_runbook(BLOB).await.unwrap_err();
    assert!(err.to_string().contains("allowed: none"), "{err}");
}

#[tokio::test]
async fn invalid_urls_fall_back_with_a_warning() {
    let src = source(MemoryFetcher::default());
    let runbook = src.resolve(Some("not a url")).await;
    assert_eq!(runbook.origin, RunbookOrigin::Default);
    assert!(runbook.warning.unwrap().contains("invalid runbook URL"));
}

#[tokio::test]
async fn slow_fetches_time_out() {
    let fetcher = MemoryFetcher {
        delay: Some(Duration::from_secs(30)),
        ..MemoryFetcher::with(&[(RAW, Ok("late"))])
    };
    let src = CachingRunbookSource::new(
        fetcher,
        RunbookSettings {
            fetch_timeout: Duration::from_millis(30),
            ..RunbookSettings::default()
        },
    );
    let started = std::time::Instant::now();
    let err = src.fetch_runbook(RAW).await.unwrap_err();
    assert!(matches!(err, RunbookError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let runbook = src.resolve(Some(RAW)).await;
    assert!(runbook.warning.unwrap().contains("timed out"));
}

#[tokio::test]
async fn empty_runbooks_are_not_used() {
    let src = source(MemoryFetcher::with(&[(RAW, Ok(" \n "))]));
    assert!(matches!(
        src.fetch_runbook(RAW).await,
        Err(RunbookError::Empty { .. })
    ));
    assert_eq!(src.resolve(Some(RAW)).await.content, default_runbook());
}

#[tokio::test]
async fn large_runbooks_are_truncated_on_a_character_boundary_with_a_warning() {
    let src = CachingRunbookSource::new(
        MemoryFetcher::with(&[(RAW, Ok("ééééé"))]),
        RunbookSettings {
            max_bytes: 5,
            ..RunbookSettings::default()
        },
    );
    let runbook = src.resolve(Some(RAW)).await;
    assert_eq!(runbook.content, "éé");
    assert!(runbook.warning.unwrap().contains("truncated"));
    let again = src.fetch_runbook(RAW).await.unwrap();
    assert!(again.cached && again.truncated);
}

#[tokio::test]
async fn the_caching_source_is_itself_a_strict_fetcher() {
    let src = source(MemoryFetcher::with(&[(RAW, Ok("doc"))]));
    let as_fetcher: &dyn RunbookFetcher = &src;
    assert_eq!(as_fetcher.fetch(BLOB).await.unwrap(), "doc");
    assert!(as_fetcher.fetch("https://example.org/x").await.is_err());
}
