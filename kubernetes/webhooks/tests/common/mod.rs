//! Test helpers: a minimal HTTP/1.1 client (plain and TLS) and servers on
//! ephemeral ports.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

/// A response, body as text.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Serves `app` over plain HTTP on an ephemeral port.
pub async fn serve_http(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(tarsy_webhooks::server::serve_http(
        listener,
        app,
        std::future::pending(),
    ));
    addr
}

async fn send<S>(io: S, req: Request<Full<Bytes>>) -> Resp
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Resp {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn build(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Request<Full<Bytes>> {
    let mut b = Request::post(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::from(body))).unwrap()
}

/// POSTs `body` to `http://addr{path}`.
pub async fn post(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Vec<u8>>,
) -> Resp {
    let stream = TcpStream::connect(addr).await.unwrap();
    send(stream, build(addr, path, headers, body.into())).await
}

/// GETs `http://addr{path}`.
pub async fn get(addr: SocketAddr, path: &str) -> Resp {
    let stream = TcpStream::connect(addr).await.unwrap();
    let req = Request::get(path)
        .header("host", addr.to_string())
        .body(Full::new(Bytes::new()))
        .unwrap();
    send(stream, req).await
}

/// A TLS client trusting only `ca_pem`.
pub fn tls_connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// POSTs `body` to `https://{server_name}{path}` at `addr`.
pub async fn post_tls(
    connector: &tokio_rustls::TlsConnector,
    server_name: &str,
    addr: SocketAddr,
    path: &str,
    body: impl Into<Vec<u8>>,
) -> Result<Resp, std::io::Error> {
    let stream = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).unwrap();
    let tls = connector.connect(name, stream).await?;
    Ok(send(tls, build(addr, path, &[], body.into())).await)
}
