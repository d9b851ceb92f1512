//! Serving the web dashboard: a single-page app whose files the `tarsy`
//! binary embeds at build time and hands to the API as a [`Dashboard`].
//!
//! The app lives under [`UI_PREFIX`] so that none of its routes can shadow
//! `/api`, `/health` or `/metrics`. Files under `assets/` carry a content
//! hash in their names and are cached for a year; everything else (notably
//! `index.html`, which names the current hashes) is revalidated on every
//! load. Any other path under the prefix answers `index.html`: the app's
//! router reads the path (deep links). Every UI response carries a strict
//! Content-Security-Policy: scripts, styles and connections from this origin
//! only, no inline script, no framing.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Path prefix of the dashboard (no trailing slash).
pub const UI_PREFIX: &str = "/ui";

/// The policy of every UI response. `connect-src 'self'` covers the
/// same-origin WebSocket (`ws:`/`wss:` of this host) in CSP Level 3.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; \
     manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Cache policy of content-hashed files.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Cache policy of everything else: always revalidate.
const NO_CACHE: &str = "no-cache";

/// One file of the built dashboard.
#[derive(Clone, Copy)]
pub struct Asset {
    /// Path relative to the build output, with `/` separators
    /// (`index.html`, `assets/index-3f9a.js`).
    pub path: &'static str,
    /// The file's content.
    pub bytes: &'static [u8],
}

impl std::fmt::Debug for Asset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asset")
            .field("path", &self.path)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// The dashboard's files. Empty when the binary was built before the
/// dashboard was (`npm run build`): the UI routes then say how to build it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Dashboard {
    assets: &'static [Asset],
}

impl Dashboard {
    /// A dashboard made of these files.
    pub const fn new(assets: &'static [Asset]) -> Self {
        Self { assets }
    }

    /// True when the build output (its `index.html`) is present.
    pub fn is_built(&self) -> bool {
        self.file("index.html").is_some()
    }

    fn file(&self, path: &str) -> Option<&'static Asset> {
        self.assets.iter().find(|a| a.path == path)
    }

    /// The routes: `/` (redirect to the app, or how to build it), the
    /// prefix itself and everything under it.
    pub(crate) fn router<S>(self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        Router::new()
            .route("/", get(root))
            .route(UI_PREFIX, get(redirect_to_app))
            .route(&format!("{UI_PREFIX}/"), get(index))
            .route(&format!("{UI_PREFIX}/{{*path}}"), get(file))
            .with_state(self)
    }
}

/// The headers every UI response carries.
fn ui_response(status: StatusCode, content_type: &str, cache: &str, body: Body) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        headers.insert(CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(cache) {
        headers.insert(CACHE_CONTROL, v);
    }
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    response
}

/// A redirect to the app's start page.
fn redirect_to_start() -> Response {
    let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
    response
        .headers_mut()
        .insert(LOCATION, HeaderValue::from_static("/ui/"));
    response
}

/// `GET /`: the app when it is built, otherwise how to build it.
async fn root(State(dashboard): State<Dashboard>) -> Response {
    if dashboard.is_built() {
        redirect_to_start()
    } else {
        not_built()
    }
}

async fn redirect_to_app() -> Response {
    redirect_to_start()
}

async fn index(State(dashboard): State<Dashboard>) -> Response {
    serve_index(dashboard)
}

fn serve_index(dashboard: Dashboard) -> Response {
    match dashboard.file("index.html") {
        Some(asset) => ui_response(
            StatusCode::OK,
            "text/html; charset=utf-8",
            NO_CACHE,
            Body::from(asset.bytes),
        ),
        None => not_built(),
    }
}

/// `GET /ui/{*path}`: the file, else (for app routes) `index.html`.
async fn file(State(dashboard): State<Dashboard>, Path(path): Path<String>) -> Response {
    if let Some(asset) = dashboard.file(&path) {
        let cache = if path.starts_with("assets/") {
            IMMUTABLE
        } else {
            NO_CACHE
        };
        return ui_response(
            StatusCode::OK,
            content_type(&path),
            cache,
            Body::from(asset.bytes),
        );
    }
    // A missing hashed file is a stale page asking for an old build: a 404
    // tells the browser so, where index.html would be run as a script.
    if path.starts_with("assets/") {
        return ui_response(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            NO_CACHE,
            Body::from(format!("no dashboard file {path:?}; reload the page")),
        );
    }
    serve_index(dashboard)
}

/// What `/` and the UI routes answer when the dashboard was not built.
fn not_built() -> Response {
    const PAGE: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>TARSy: dashboard not built</title></head><body>\
<h1>The TARSy dashboard is not built into this binary</h1>\
<p>This <code>tarsy</code> was compiled before the dashboard was. Build the dashboard, \
then rebuild <code>tarsy</code>; the build embeds it:</p>\
<pre>cd dashboard &amp;&amp; npm ci &amp;&amp; npm run build\ncargo build -p tarsy</pre>\
<p>The API works without it: <a href=\"/health\">/health</a>, \
<code>/api/v1/sessions</code>, <code>/api/v1/ws</code>.</p></body></html>\n";
    ui_response(
        StatusCode::OK,
        "text/html; charset=utf-8",
        NO_CACHE,
        Body::from(PAGE),
    )
}

/// The content type of a dashboard file, by extension.
fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_by_extension() {
        assert_eq!(
            content_type("assets/index-1a2b.js"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(
            content_type("assets/index-1a2b.css"),
            "text/css; charset=utf-8"
        );
        assert_eq!(content_type("favicon.svg"), "image/svg+xml");
        assert_eq!(content_type("LICENSE"), "application/octet-stream");
    }

    #[test]
    fn built_means_index_present() {
        static FILES: &[Asset] = &[Asset {
            path: "index.html",
            bytes: b"<html></html>",
        }];
        assert!(Dashboard::new(FILES).is_built());
        assert!(!Dashboard::default().is_built());
    }
}
