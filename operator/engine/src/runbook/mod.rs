//! Runbooks: the rules for fetching an alert's runbook, independent of HTTP.
//!
//! The engine knows nothing of HTTP: the actual download is a
//! [`RunbookFetcher`] implemented outside the engine (and in-memory in
//! tests). This module provides everything around it:
//!
//! * [`resolve_runbook_url`] — validation (http/https, no credentials in the
//!   URL) and the GitHub rule: `github.com/{owner}/{repo}/blob/{ref}/{path}`
//!   (or `/raw/`) is fetched from `raw.githubusercontent.com`.
//! * [`DomainAllowList`] — only allowed hosts are fetched (exact names or
//!   `*.example.com` wildcards; an empty list allows nothing). A rewritten
//!   GitHub URL is allowed when `github.com` is.
//! * [`CachingRunbookSource`] — wraps a fetcher with the allow-list check, a
//!   timeout, a size cap and a TTL cache. [`CachingRunbookSource::resolve`]
//!   is fail-open: any problem yields the built-in default runbook plus a
//!   warning to record, never an error.
//!
//! ```
//! use async_trait::async_trait;
//! use tarsy_engine::runbook::{
//!     CachingRunbookSource, DomainAllowList, RunbookError, RunbookFetcher, RunbookSettings,
//! };
//!
//! struct Fixed;
//! #[async_trait]
//! impl RunbookFetcher for Fixed {
//!     async fn fetch(&self, url: &str) -> Result<String, RunbookError> {
//!         assert_eq!(url, "https://raw.githubusercontent.com/acme/runbooks/main/oom.md");
//!         Ok("# OOM runbook".into())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let source = CachingRunbookSource::new(Fixed, RunbookSettings {
//!     allowed_domains: DomainAllowList::github(),
//!     ..RunbookSettings::default()
//! });
//! let runbook = source
//!     .resolve(Some("https://github.com/acme/runbooks/blob/main/oom.md"))
//!     .await;
//! assert_eq!(runbook.content, "# OOM runbook");
//! assert!(runbook.warning.is_none());
//! # });
//! ```

mod source;
mod url;

pub use source::{
    CachingRunbookSource, ResolvedRunbook, Runbook, RunbookError, RunbookFetcher, RunbookOrigin,
    RunbookSettings, default_runbook,
};
pub use url::{DomainAllowList, RunbookUrl, resolve_runbook_url, url_for_display};

#[cfg(test)]
mod tests;
