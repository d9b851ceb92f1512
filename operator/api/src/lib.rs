//! TARSy's REST and WebSocket API (axum).
//!
//! The API reads sessions, timelines and traces straight from
//! [`tarsy_store::Store`], delivers live events through
//! [`tarsy_events::EventHub`], and hands everything that changes a session
//! (alert submission, cancellation, chat) to a [`SessionControl`]: the local
//! driver in local mode, `Alert` resources in cluster mode. Requests that
//! change anything are refused from other origins and without a JSON body
//! (`cross_site.rs`). Every endpoint is
//! documented in `API.md` beside this crate, and the REST endpoints in the
//! OpenAPI document generated from this crate's types ([`openapi()`], served
//! at `GET /api/v1/openapi.json`).
//!
//! ```no_run
//! # async fn demo(store: tarsy_store::Store, control: std::sync::Arc<dyn tarsy_api::SessionControl>) -> std::io::Result<()> {
//! let hub = tarsy_events::EventHub::start(store);
//! let app = tarsy_api::Api::new(hub, control, tarsy_api::ApiConfig::default()).router();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await
//! # }
//! ```

#![warn(missing_docs)]

mod control;
mod cross_site;
pub mod dashboard;
mod error;
mod handlers;
mod memories;
mod openapi;
mod quality;
mod review;
mod system;
mod usage;
mod ws;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::get;
use tarsy_events::EventHub;
use tarsy_store::Store;

pub use control::{
    AlertAccepted, CancelError, CancelOutcome, ChatAccepted, ChatError, ChatSubmission,
    DependencyHealth, DependencyHealthSource, McpHealthSource, McpServerHealth, NewAlert,
    ScoreAccepted, ScoreError, SessionControl, SubmitError, SystemWarning, SystemWarningsSource,
};
pub use dashboard::{Asset, Dashboard};
pub use error::{ApiError, ApiResult, ErrorBody, ErrorCode};
pub use openapi::{openapi, openapi_json};
pub use system::{
    AgentView, AlertObject, ChainStageView, ChainView, ClusterObjectsSource, ExecutionObject,
    LlmProviderView, McpServerView, SessionObjects, StaticConfiguration, SystemConfiguration,
    SystemConfigurationSource, configuration_view,
};
pub use tarsy_events::lifecycle::publish_chat_accepted;

/// Author recorded when no trusted identity header is present.
pub const DEFAULT_AUTHOR: &str = "api-client";

/// Room for JSON syntax and escaping around the alert data in a request body.
const BODY_OVERHEAD: usize = 64 * 1024;

/// Settings of the API.
#[derive(Clone)]
pub struct ApiConfig {
    /// Trust `X-Forwarded-User` / `X-Forwarded-Email` for the author. Only
    /// set this when the API is reachable solely through an authenticating
    /// proxy that sets (and strips client-sent) headers; otherwise any
    /// client could claim any name.
    pub trust_forwarded_identity: bool,
    /// Origins (`scheme://host[:port]`) besides the server's own allowed to
    /// send state-changing requests and to open the WebSocket; `"*"` allows
    /// every origin. A request without
    /// `Origin` (not a browser) is not held to it.
    pub allowed_origins: Vec<String>,
    /// Largest chat message, in bytes (413 above it).
    pub max_chat_message_bytes: usize,
    /// Serve the web dashboard under `/ui` (and `/` redirecting to it).
    /// `None`: no UI routes (tests, embedders).
    pub dashboard: Option<Dashboard>,
    /// Source of `GET /api/v1/system/configuration` (404 without one).
    pub configuration: Option<Arc<dyn SystemConfigurationSource>>,
    /// Cluster mode: fills the optional `cluster` fields of a session.
    pub cluster_objects: Option<Arc<dyn ClusterObjectsSource>>,
    /// The API's own investigation-memory scope: the project in local mode
    /// (`Defaults.memory.project`), the namespace it serves in cluster mode.
    /// The memory endpoints default to it and serve nothing outside it and
    /// its projects (`<scope>/<project>`). `None` (embedders, tests): a
    /// request names its scope, any scope.
    pub memory_scope: Option<String>,
}

impl std::fmt::Debug for ApiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiConfig")
            .field("trust_forwarded_identity", &self.trust_forwarded_identity)
            .field("allowed_origins", &self.allowed_origins)
            .field("max_chat_message_bytes", &self.max_chat_message_bytes)
            .field("dashboard", &self.dashboard.map(|d| d.is_built()))
            .field("configuration", &self.configuration.is_some())
            .field("cluster_objects", &self.cluster_objects.is_some())
            .field("memory_scope", &self.memory_scope)
            .finish()
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            trust_forwarded_identity: false,
            allowed_origins: Vec::new(),
            max_chat_message_bytes: 100_000,
            dashboard: None,
            configuration: None,
            cluster_objects: None,
            memory_scope: None,
        }
    }
}

/// The API: its dependencies and settings. Build it, then serve
/// [`Api::router`].
pub struct Api {
    store: Store,
    hub: EventHub,
    control: Arc<dyn SessionControl>,
    config: ApiConfig,
    warnings: Option<Arc<dyn SystemWarningsSource>>,
    mcp_health: Option<Arc<dyn McpHealthSource>>,
    dependencies: Option<Arc<dyn DependencyHealthSource>>,
    ws_connections: AtomicUsize,
}

impl Api {
    /// An API on the hub's store and its live events.
    pub fn new(hub: EventHub, control: Arc<dyn SessionControl>, config: ApiConfig) -> Self {
        Self {
            store: hub.store().clone(),
            hub,
            control,
            config,
            warnings: None,
            mcp_health: None,
            dependencies: None,
            ws_connections: AtomicUsize::new(0),
        }
    }

    /// Shows these warnings in `/health`.
    pub fn with_warnings(mut self, warnings: Arc<dyn SystemWarningsSource>) -> Self {
        self.warnings = Some(warnings);
        self
    }

    /// Shows this MCP health snapshot in `/health`.
    pub fn with_mcp_health(mut self, health: Arc<dyn McpHealthSource>) -> Self {
        self.mcp_health = Some(health);
        self
    }

    /// Reports these dependencies (e.g. the Kubernetes API) in `/health`.
    pub fn with_dependencies(mut self, dependencies: Arc<dyn DependencyHealthSource>) -> Self {
        self.dependencies = Some(dependencies);
        self
    }

    /// Largest alert request body: the largest data
    /// ([`tarsy_core::MAX_ALERT_DATA_BYTES`]) plus room for JSON escaping.
    pub(crate) fn alert_body_limit(&self) -> usize {
        tarsy_core::MAX_ALERT_DATA_BYTES
            .saturating_mul(2)
            .saturating_add(BODY_OVERHEAD)
    }

    /// Largest chat request body.
    pub(crate) fn chat_body_limit(&self) -> usize {
        self.config
            .max_chat_message_bytes
            .saturating_mul(2)
            .saturating_add(BODY_OVERHEAD)
    }

    /// The REST routes (those of the OpenAPI document, which is one of
    /// them), the WebSocket and, when configured, the dashboard.
    pub fn router(self) -> Router {
        let dashboard = self.config.dashboard;
        let state = Arc::new(self);
        let (rest, _) = openapi::routes().split_for_parts();
        let api = rest
            .route("/api/v1/ws", get(ws::upgrade))
            .fallback(handlers::not_found)
            .method_not_allowed_fallback(handlers::method_not_allowed)
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                cross_site::refuse_cross_site,
            ))
            .layer(axum::middleware::from_fn(count_request))
            .with_state(state);
        match dashboard {
            Some(dashboard) => api.merge(dashboard.router()),
            None => api,
        }
    }
}

/// Shared state of the handlers.
pub(crate) type AppState = Arc<Api>;

/// Counts every request by its route pattern (ids never become labels;
/// unmatched paths count as `unmatched`).
async fn count_request(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(request).await;
    tarsy_telemetry::global().http_request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// The request's author: the first non-empty trusted identity header, else
/// [`DEFAULT_AUTHOR`].
pub(crate) fn author(headers: &HeaderMap, trust_forwarded: bool) -> String {
    if trust_forwarded {
        for name in ["x-forwarded-user", "x-forwarded-email"] {
            if let Some(value) = headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
            {
                return value.to_string();
            }
        }
    }
    DEFAULT_AUTHOR.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn author_prefers_user_then_email_when_trusted() {
        let h = headers(&[
            ("x-forwarded-user", "alice"),
            ("x-forwarded-email", "a@x.io"),
        ]);
        assert_eq!(author(&h, true), "alice");
        assert_eq!(author(&h, false), DEFAULT_AUTHOR);
        let h = headers(&[("x-forwarded-user", "  "), ("x-forwarded-email", "a@x.io")]);
        assert_eq!(author(&h, true), "a@x.io");
        assert_eq!(author(&HeaderMap::new(), true), DEFAULT_AUTHOR);
    }
}
