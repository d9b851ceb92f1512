//! Refreshing the price book from a catalog URL, with a cache file and the
//! bundled snapshot as fallbacks.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::PriceBook;

/// How long a process waits at start for the catalog.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(10);

/// The cache of a fetched catalog, in the system's temporary directory.
const CACHE_FILE: &str = "tarsy-price-catalog.json";

/// At a process's start: with a catalog URL (`TARSY_PRICE_CATALOG_URL`,
/// `pricing.catalogUrl`), installs the book [`refreshed`] gives (the
/// catalog, else its cache, else the bundled book); without one, nothing.
pub async fn install_catalog(url: Option<&str>) {
    if let Some(url) = url {
        let cache = std::env::temp_dir().join(CACHE_FILE);
        crate::install(refreshed(url, &cache, REFRESH_TIMEOUT).await);
    }
}

/// A newer price book: LiteLLM's catalog fetched from `url` (the format of
/// [`PriceBook::from_catalog`]), within `timeout`.
///
/// On success the raw catalog is written to `cache` (a temporary file then
/// a rename, so a reader never sees half a file) and the converted book is
/// returned. On any failure (network, HTTP status, a catalog that does not
/// convert), the catalog in `cache` if there is a valid one, else the
/// bundled book. Logs which one it returns; never fails.
pub async fn refreshed(url: &str, cache: &Path, timeout: Duration) -> PriceBook {
    let fetch_error = match tokio::time::timeout(timeout, fetch(url, timeout)).await {
        Ok(Ok((raw, book))) => {
            let book = book.with_origin(url, "fetched", today());
            if let Err(e) = write_atomically(cache, &raw).await {
                tracing::warn!(cache = %cache.display(), error = %e, "price catalog not cached");
            }
            tracing::info!(url, "price book refreshed from the catalog URL");
            return book;
        }
        Ok(Err(e)) => e,
        Err(_) => format!("no answer within {timeout:?}"),
    };
    match read_cache(cache).await {
        Ok(book) => {
            tracing::warn!(
                url,
                error = %fetch_error,
                cache = %cache.display(),
                "price catalog refresh failed; using the cached catalog"
            );
            book
        }
        Err(cache_error) => {
            let bundled = PriceBook::bundled();
            tracing::warn!(
                url,
                error = %fetch_error,
                cache = %cache.display(),
                cache_error = %cache_error,
                version = bundled.version(),
                date = bundled.date(),
                "price catalog refresh failed and no usable cache; using the bundled price book"
            );
            bundled.clone()
        }
    }
}

/// The catalog's text and its book.
async fn fetch(url: &str, timeout: Duration) -> Result<(String, PriceBook), String> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let response = client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("fetch: {e}"))?;
    let raw = response
        .text()
        .await
        .map_err(|e| format!("read body: {e}"))?;
    let book = PriceBook::from_catalog(&raw).map_err(|e| format!("catalog: {e}"))?;
    Ok((raw, book))
}

async fn read_cache(cache: &Path) -> Result<PriceBook, String> {
    let raw = tokio::fs::read_to_string(cache)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let book = PriceBook::from_catalog(&raw).map_err(|e| format!("catalog: {e}"))?;
    let date = match tokio::fs::metadata(cache).await.and_then(|m| m.modified()) {
        Ok(modified) => chrono::DateTime::<chrono::Utc>::from(modified)
            .format("%Y-%m-%d")
            .to_string(),
        Err(_) => String::new(),
    };
    Ok(book.with_origin(cache.display().to_string(), "cached", date))
}

/// Writes `text` to `path` through a temporary file in the same directory
/// and a rename.
async fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir).await?;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    name.push(format!(".tmp.{}.{seq}", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = async {
        tokio::fs::write(&tmp, text).await?;
        tokio::fs::rename(&tmp, path).await
    }
    .await;
    if written.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    written
}

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}
