//! Serving: the combined router, HTTPS (required for admission: the API
//! server only calls webhooks over TLS) and optional plain HTTP for the bridge.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use futures::FutureExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::admission::{self, AdmissionState};
use crate::alertmanager::{self, BridgeState};
use crate::tls::{ReloadingCert, TlsError, TlsFiles, server_config};

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for open connections.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serving failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The certificate could not be loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A listener could not be bound or failed.
    #[error("{addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// HTTPS address: `/validate`, `/alertmanager`, `/healthz`.
    pub https_addr: SocketAddr,
    /// Optional plain-HTTP address: `/alertmanager` and `/healthz` only
    /// (admission is never served without TLS).
    pub http_addr: Option<SocketAddr>,
    /// Certificate and key files.
    pub tls: TlsFiles,
    /// How often the certificate files are checked for changes.
    pub tls_reload_interval: Duration,
}

/// `GET /healthz`: liveness and readiness; `GET /metrics`: the process's
/// metrics (alerts received by outcome, among others).
pub fn health_router() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(|headers: axum::http::HeaderMap| async move {
                let accept = headers
                    .get(axum::http::header::ACCEPT)
                    .and_then(|v| v.to_str().ok());
                let (content_type, page) =
                    tarsy_telemetry::negotiate(accept, tarsy_telemetry::global().encode(""));
                ([(axum::http::header::CONTENT_TYPE, content_type)], page)
            }),
        )
}

/// The routes of whichever parts are enabled, plus `/healthz`.
pub fn app(bridge: Option<BridgeState>, admission: Option<AdmissionState>) -> Router {
    let mut router = health_router();
    if let Some(b) = bridge {
        router = router.merge(alertmanager::router(b));
    }
    if let Some(a) = admission {
        router = router.merge(admission::router(a));
    }
    router
}

/// Serves the enabled parts until `shutdown` completes: everything over
/// HTTPS, and the bridge over plain HTTP too when `http_addr` is set.
pub async fn serve(
    config: ServeConfig,
    bridge: Option<BridgeState>,
    admission: Option<AdmissionState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let cert = ReloadingCert::load(config.tls.clone())?;
    let reloader = cert.spawn_reloader(config.tls_reload_interval);
    let tls = server_config(cert)?;
    let shutdown = shutdown.boxed().shared();

    let https = bind(config.https_addr).await?;
    tracing::info!(addr = %config.https_addr, "webhooks listening (HTTPS)");
    let https_app = app(bridge.clone(), admission);
    let https_task = serve_https(https, https_app, tls, shutdown.clone());

    let result = match config.http_addr {
        Some(addr) => {
            let http = bind(addr).await?;
            tracing::info!(%addr, "Alertmanager bridge listening (HTTP)");
            let http_task = serve_http(http, app(bridge, None), shutdown);
            let (a, b) = tokio::join!(https_task, http_task);
            a.map_err(|source| ServeError::Io {
                addr: config.https_addr,
                source,
            })
            .and(b.map_err(|source| ServeError::Io { addr, source }))
        }
        None => https_task.await.map_err(|source| ServeError::Io {
            addr: config.https_addr,
            source,
        }),
    };
    reloader.abort();
    result
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Io { addr, source })
}

/// Serves `app` over plain HTTP until `shutdown`.
pub async fn serve_http(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    use axum::serve::ListenerExt;
    // Without TCP_NODELAY, small responses on keep-alive connections wait
    // for the peer's delayed ACK (~40 ms each).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Serves `app` over TLS (HTTP/1.1 and HTTP/2 by ALPN) until `shutdown`,
/// then waits up to 10 s for open connections.
pub async fn serve_https(
    listener: TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        // Per-connection errors (EMFILE, aborted handshakes)
                        // must not stop the server.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                }
                let acceptor = acceptor.clone();
                let builder = builder.clone();
                let service = TowerToHyperService::new(app.clone());
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(tls), service)
                        .into_owned();
                    if let Err(e) = watcher.watch(conn).await {
                        tracing::debug!(%peer, error = %e, "connection error");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain timeout");
    }
    Ok(())
}
