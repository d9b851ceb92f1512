//! The HTTP client shared by the streamable HTTP and SSE transports: TLS
//! options, connect timeout, custom headers, bearer token.

use std::collections::HashMap;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use tarsy_core::config::HttpTransport;

use crate::error::McpError;

fn config_error(server: &str, message: impl Into<String>) -> McpError {
    McpError::Config {
        server: server.to_owned(),
        message: message.into(),
    }
}

/// Builds the reqwest client of one server. The configured `timeout` bounds
/// connecting only: a total-request timeout would cut the long-lived event
/// streams both HTTP transports keep open (operations have their own
/// deadline, see [`crate::McpTimeouts`]).
///
/// One client per MCP session: its connections are kept alive and reused for
/// the whole execution (no TCP or TLS handshake per tool call). HTTPS servers
/// verified against the platform's roots (no CA file) share one client per
/// TLS configuration in the process: the root store is read once, and a
/// remote server's connections outlive an execution. Both
/// transports read every response to its end, so a connection goes back to
/// the pool as soon as its answer is in; `TCP_NODELAY` keeps small requests
/// from waiting on the server's delayed ACKs. Redirects are followed only
/// within the same origin, so credentials never travel to another host.
pub fn build_client(server: &str, cfg: &HttpTransport) -> Result<reqwest::Client, McpError> {
    if !is_https(&cfg.url) || cfg.tls.ca_file.is_some() {
        return new_client(server, cfg);
    }
    type Shared = Vec<((bool, Option<std::time::Duration>), reqwest::Client)>;
    static SHARED: std::sync::Mutex<Shared> = std::sync::Mutex::new(Vec::new());
    let key = (cfg.tls.insecure_skip_verify, cfg.timeout);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, client)) = shared.iter().find(|(k, _)| *k == key) {
        return Ok(client.clone());
    }
    let client = new_client(server, cfg)?;
    shared.push((key, client.clone()));
    Ok(client)
}

fn new_client(server: &str, cfg: &HttpTransport) -> Result<reqwest::Client, McpError> {
    let mut builder = reqwest::Client::builder()
        .tcp_nodelay(true)
        .redirect(same_origin_redirects());
    if let Some(timeout) = cfg.timeout {
        builder = builder.connect_timeout(timeout);
    }
    if !is_https(&cfg.url) {
        // Plain HTTP (sidecars on localhost, in-cluster services), and
        // redirects never leave the origin's scheme: no TLS will be spoken,
        // so the platform's root store is not loaded (it costs milliseconds
        // per client).
        builder = builder.tls_certs_only(Vec::new());
    }
    if cfg.tls.insecure_skip_verify {
        builder = builder.tls_danger_accept_invalid_certs(true);
    }
    if let Some(ca_file) = &cfg.tls.ca_file {
        let pem = std::fs::read(ca_file)
            .map_err(|e| config_error(server, format!("cannot read CA file {ca_file}: {e}")))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| config_error(server, format!("invalid CA file {ca_file}: {e}")))?;
        if certs.is_empty() {
            return Err(config_error(
                server,
                format!("CA file {ca_file} holds no certificate"),
            ));
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|e| config_error(server, format!("cannot build HTTP client: {e}")))
}

/// True for an `https://` URL (scheme compared case-insensitively).
fn is_https(url: &str) -> bool {
    url.get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// Follows up to 10 redirects that stay on the original scheme, host and port.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt.previous().first().is_some_and(|first| {
            let next = attempt.url();
            first.scheme() == next.scheme()
                && first.host_str() == next.host_str()
                && first.port_or_known_default() == next.port_or_known_default()
        });
        if attempt.previous().len() > 10 {
            attempt.error("too many redirects")
        } else if same_origin {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// The configured extra headers, validated.
pub fn custom_headers(
    server: &str,
    cfg: &HttpTransport,
) -> Result<HashMap<HeaderName, HeaderValue>, McpError> {
    cfg.headers
        .iter()
        .map(|(name, value)| {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| config_error(server, format!("invalid header name '{name}'")))?;
            // The value may be a credential: never echo it.
            let mut v = HeaderValue::from_str(value)
                .map_err(|_| config_error(server, format!("invalid value of header '{name}'")))?;
            v.set_sensitive(true);
            Ok((n, v))
        })
        .collect()
}

/// Headers for transports that send everything themselves (SSE): the custom
/// headers plus `Authorization: Bearer ...` when a token is configured.
pub fn all_headers(server: &str, cfg: &HttpTransport) -> Result<HeaderMap, McpError> {
    let mut map: HeaderMap = custom_headers(server, cfg)?.into_iter().collect();
    if let Some(token) = &cfg.bearer_token {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| config_error(server, "bearer token is not a valid header value"))?;
        v.set_sensitive(true);
        map.insert(AUTHORIZATION, v);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tarsy_core::SecretValue;
    use tarsy_core::config::TlsOptions;

    fn cfg() -> HttpTransport {
        HttpTransport {
            url: "http://127.0.0.1:1/mcp".into(),
            bearer_token: Some(SecretValue::new("s3cr3t-token")),
            headers: BTreeMap::from([("X-Tenant".to_owned(), "blue".to_owned())]),
            tls: TlsOptions::default(),
            timeout: None,
        }
    }

    #[test]
    fn only_https_urls_need_tls() {
        assert!(is_https("https://mcp.example.com/mcp"));
        assert!(is_https("HTTPS://mcp.example.com/mcp"));
        assert!(!is_https("http://127.0.0.1:8080/mcp"));
        assert!(!is_https("http"));
        let mut c = cfg();
        assert!(build_client("s", &c).is_ok());
        c.url = "https://mcp.example.com/mcp".into();
        assert!(build_client("s", &c).is_ok());
    }

    #[test]
    fn headers_include_bearer_and_hide_it() {
        let h = all_headers("s", &cfg()).unwrap();
        assert_eq!(h["x-tenant"], "blue");
        assert_eq!(h[AUTHORIZATION], "Bearer s3cr3t-token");
        assert!(!format!("{h:?}").contains("s3cr3t"));
    }

    #[test]
    fn bad_headers_and_ca_files_are_config_errors() {
        let mut c = cfg();
        c.headers.insert("bad header".into(), "x".into());
        let e = all_headers("s", &c).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid configuration of MCP server 's': invalid header name 'bad header'"
        );
        let mut c = cfg();
        c.tls.ca_file = Some("/nonexistent/ca.pem".into());
        assert!(matches!(
            build_client("s", &c),
            Err(McpError::Config { .. })
        ));
        let dir = std::env::temp_dir().join(format!("tarsy-mcp-ca-{}", std::process::id()));
        std::fs::write(&dir, "not a certificate").unwrap();
        c.tls.ca_file = Some(dir.to_string_lossy().into_owned());
        let e = build_client("s", &c).unwrap_err();
        assert!(
            e.to_string().contains("holds no certificate")
                || e.to_string().contains("invalid CA file"),
            "{e}"
        );
        let _ = std::fs::remove_file(dir);
    }
}
