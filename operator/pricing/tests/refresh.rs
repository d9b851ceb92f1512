//! `refreshed`: a fetched catalog, a cached one, the bundled book.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tarsy_core::{ModelPrice, ProviderType};
use tarsy_pricing::{PriceBook, refreshed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CATALOG: &str = r#"{
    "gpt-test": {
        "litellm_provider": "openai", "mode": "chat",
        "input_cost_per_token": 1e-06, "output_cost_per_token": 4e-06
    }
}"#;

const CACHED_CATALOG: &str = r#"{
    "xai/grok-cached": {
        "litellm_provider": "xai", "mode": "chat",
        "input_cost_per_token": 2e-06, "output_cost_per_token": 8e-06
    }
}"#;

const TIMEOUT: Duration = Duration::from_secs(5);

/// A directory of its own under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "tarsy-pricing-{name}-{}-{}",
            std::process::id(),
            chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Serves `status` and `body` to every request on 127.0.0.1; the URL.
async fn serve(status: &'static str, body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    format!("http://{addr}/model_prices_and_context_window.json")
}

/// A URL nothing listens on.
async fn unreachable_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    drop(listener);
    format!("http://{addr}/catalog.json")
}

#[tokio::test]
async fn a_fetched_catalog_is_converted_and_cached() {
    let dir = TempDir::new("fetch");
    let cache = dir.path().join("sub").join("catalog.json");
    let url = serve("200 OK", CATALOG).await;

    let book = refreshed(&url, &cache, TIMEOUT).await;

    assert_eq!(
        book.price(ProviderType::Openai, "gpt-test"),
        Some(&ModelPrice::new(1.0, 4.0))
    );
    assert_eq!(book.source(), url);
    assert_eq!(book.version(), "fetched");
    assert_eq!(std::fs::read_to_string(&cache).expect("cache"), CATALOG);
    // Only the cache file: the temporary one was renamed.
    let files = std::fs::read_dir(cache.parent().expect("dir"))
        .expect("list")
        .count();
    assert_eq!(files, 1);
}

#[tokio::test]
async fn unreachable_with_a_cache_uses_the_cache() {
    let dir = TempDir::new("cached");
    let cache = dir.path().join("catalog.json");
    std::fs::write(&cache, CACHED_CATALOG).expect("write cache");

    let book = refreshed(&unreachable_url().await, &cache, TIMEOUT).await;

    assert_eq!(
        book.price(ProviderType::Xai, "grok-cached"),
        Some(&ModelPrice::new(2.0, 8.0))
    );
    assert_eq!(book.version(), "cached");
    assert_eq!(book.date().len(), "YYYY-MM-DD".len());
}

#[tokio::test]
async fn unreachable_without_a_cache_uses_the_bundled_book() {
    let dir = TempDir::new("none");
    let cache = dir.path().join("catalog.json");

    let book = refreshed(&unreachable_url().await, &cache, TIMEOUT).await;

    assert_eq!(&book, PriceBook::bundled());
    assert!(!cache.exists());
}

#[tokio::test]
async fn a_bad_answer_keeps_the_cache() {
    let dir = TempDir::new("bad");
    let cache = dir.path().join("catalog.json");
    std::fs::write(&cache, CACHED_CATALOG).expect("write cache");

    for (status, body) in [
        ("500 Internal Server Error", CATALOG),
        ("200 OK", "<html>not a catalog</html>"),
        (
            "200 OK",
            r#"{"m": {"litellm_provider": "mistral", "mode": "chat"}}"#,
        ),
    ] {
        let book = refreshed(&serve(status, body).await, &cache, TIMEOUT).await;
        assert!(
            book.price(ProviderType::Xai, "grok-cached").is_some(),
            "{status} {body}"
        );
        assert_eq!(
            std::fs::read_to_string(&cache).expect("cache"),
            CACHED_CATALOG
        );
    }
}

#[tokio::test]
async fn an_invalid_cache_falls_back_to_the_bundled_book() {
    let dir = TempDir::new("invalid");
    let cache = dir.path().join("catalog.json");
    std::fs::write(&cache, "{ truncated").expect("write cache");

    let book = refreshed(&unreachable_url().await, &cache, TIMEOUT).await;

    assert_eq!(&book, PriceBook::bundled());
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let dir = TempDir::new("slow");
    let cache = dir.path().join("catalog.json");
    // Accepts connections (the backlog) but never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!(
        "http://{}/catalog.json",
        listener.local_addr().expect("addr")
    );

    let started = std::time::Instant::now();
    let book = refreshed(&url, &cache, Duration::from_millis(300)).await;

    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(&book, PriceBook::bundled());
    drop(listener);
}
