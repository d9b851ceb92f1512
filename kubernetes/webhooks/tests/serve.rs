//! `serve`: HTTPS for everything, plain HTTP for the bridge only, graceful
//! shutdown.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{get, post, post_tls, tls_connector};
use rcgen::{CertificateParams, KeyPair};
use tarsy_core::SecretValue;
use tarsy_webhooks::{
    AdmissionConfig, AdmissionState, BridgeAuth, BridgeConfig, BridgeState, InMemoryAlertSink,
    InMemoryResources, ServeConfig, TlsFiles, serve,
};

fn free_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

#[tokio::test]
async fn serves_https_and_http_and_shuts_down() {
    // A self-signed certificate, as the README's openssl procedure makes.
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let dir = std::env::temp_dir().join(format!("tarsy-webhooks-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = TlsFiles::in_dir(&dir);
    std::fs::write(&files.cert, cert.pem()).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();

    let sink = InMemoryAlertSink::new("tarsy");
    let bridge = BridgeState::new(
        BridgeConfig::new("tarsy"),
        BridgeAuth::Bearer(SecretValue::new("tok")),
        Arc::new(sink.clone()),
    );
    let admission = AdmissionState::new(
        AdmissionConfig::default(),
        Arc::new(InMemoryResources::new()),
    );
    let config = ServeConfig {
        https_addr: free_port(),
        http_addr: Some(free_port()),
        tls: files,
        tls_reload_interval: Duration::from_secs(60),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        config.clone(),
        Some(bridge),
        Some(admission),
        async move {
            let _ = stopped.await;
        },
    ));

    let http = config.http_addr.unwrap();
    let tls = tls_connector(&cert.pem());
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(config.https_addr)
            .await
            .is_ok()
            && tokio::net::TcpStream::connect(http).await.is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(up, "listeners never came up");

    assert_eq!(get(http, "/healthz").await.body, "ok");
    // Admission is never served without TLS.
    assert_eq!(post(http, "/validate", &[], "{}").await.status, 404);
    let body = include_str!("fixtures/single_firing.json");
    let r = post(
        http,
        "/alertmanager",
        &[("authorization", "Bearer tok")],
        body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Over HTTPS: both endpoints.
    let r = post_tls(&tls, "localhost", config.https_addr, "/validate", "{}")
        .await
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    let r = post_tls(&tls, "localhost", config.https_addr, "/alertmanager", body)
        .await
        .unwrap();
    assert_eq!(
        r.status, 401,
        "the bridge is there and still wants its token"
    );
    assert_eq!(sink.len(), 1);

    stop.send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("serve returns after shutdown")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert!(tokio::net::TcpStream::connect(http).await.is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn missing_certificate_is_a_startup_error() {
    let dir = std::env::temp_dir().join("tarsy-webhooks-no-such-dir");
    let config = ServeConfig {
        https_addr: free_port(),
        http_addr: None,
        tls: TlsFiles::in_dir(&dir),
        tls_reload_interval: Duration::from_secs(60),
    };
    let err = serve(config, None, None, std::future::pending())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("tls.crt"), "{err}");
}

/// Runs the README's self-signed openssl procedure (steps 1 and 2) and serves
/// the result: the documented commands must produce a certificate that a
/// client trusting the CA accepts for the Service name.
#[tokio::test]
async fn readme_openssl_procedure_produces_a_working_certificate() {
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        eprintln!("openssl not installed; skipping the README procedure check");
        return;
    }
    let readme = include_str!("../README.md");
    let start = readme
        .find("### Self-signed, with openssl")
        .expect("README section");
    let block = &readme[start..];
    let block = &block[block.find("```sh\n").unwrap() + 6..];
    let block = &block[..block.find("```").unwrap()];
    // Steps 1 and 2 only: step 3 talks to a cluster.
    let script = &block[..block.find("# 3.").expect("step 3")];
    let dir = std::env::temp_dir().join(format!("tarsy-webhooks-openssl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-euc")
        .arg(script)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let files = TlsFiles::in_dir(&dir);
    let cert = tarsy_webhooks::tls::ReloadingCert::load(files).unwrap();
    let tls = tarsy_webhooks::tls::server_config(cert).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(tarsy_webhooks::server::serve_https(
        listener,
        tarsy_webhooks::server::health_router(),
        tls,
        std::future::pending(),
    ));
    let ca = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
    let client = tls_connector(&ca);
    for name in [
        "tarsy-webhooks.tarsy.svc",
        "tarsy-webhooks.tarsy.svc.cluster.local",
    ] {
        let r = post_tls(&client, name, addr, "/healthz", "").await.unwrap();
        assert_eq!(r.status, 405, "TLS works for {name}; /healthz is GET-only");
    }
    assert!(
        post_tls(&client, "other.tarsy.svc", addr, "/healthz", "")
            .await
            .is_err()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
