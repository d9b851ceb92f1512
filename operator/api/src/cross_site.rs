//! No cross-site requests: any web page a user visits can make the browser
//! send a form or a `text/plain` POST to the API without asking (no CORS
//! preflight), with whatever credentials the browser holds for it (an
//! authenticating proxy's cookie). So every state-changing request (any
//! method but GET, HEAD, OPTIONS) must come from the server's own origin or
//! an allowed one, and carry its body as JSON, which a page of another
//! origin can only send after a preflight this API never answers. Clients
//! that are not browsers send no `Origin`: only the body rule applies to
//! them. The WebSocket applies the same origin rule to its upgrade.

use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, REFERER, TRANSFER_ENCODING};
use axum::http::{HeaderMap, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

/// Refuses a state-changing request from another origin (403) or with a
/// body that is not JSON (415).
pub(crate) async fn refuse_cross_site(
    State(api): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if request.method().is_safe() {
        return next.run(request).await;
    }
    let headers = request.headers();
    if let Some(origin) = request_origin(headers)
        && !origin_allowed(&origin, headers, &api.config.allowed_origins)
    {
        return ApiError::forbidden(format!(
            "cross-site request refused: {} {} from origin {origin:?}, which is neither this \
             server's nor an allowed origin",
            request.method(),
            request.uri().path()
        ))
        .into_response();
    }
    if has_body(headers) && !is_json(headers) {
        let sent = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("no content type");
        return ApiError::unsupported_media_type(format!(
            "the request body must be JSON (content-type: application/json), not {sent:?}"
        ))
        .into_response();
    }
    next.run(request).await
}

/// Whether a WebSocket upgrade may be accepted: no `Origin` (not a
/// browser), or an allowed one.
pub(crate) fn upgrade_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    request_origin(headers).is_none_or(|origin| origin_allowed(&origin, headers, allowed))
}

/// The origin a browser says the request comes from: `Origin`, else the
/// origin of `Referer` (some browsers omit `Origin` on same-origin
/// requests). `None`: neither, not a browser. An unreadable header is an
/// origin that matches nothing.
fn request_origin(headers: &HeaderMap) -> Option<String> {
    if let Some(origin) = headers.get(ORIGIN) {
        return Some(origin.to_str().unwrap_or("unreadable").trim().to_string());
    }
    let referer = headers.get(REFERER)?;
    let origin = referer
        .to_str()
        .ok()
        .and_then(|r| r.parse::<Uri>().ok())
        .and_then(|uri| Some(format!("{}://{}", uri.scheme_str()?, uri.authority()?)));
    Some(origin.unwrap_or_else(|| "unreadable".into()))
}

/// Whether `origin` is allowed: listed (or `*` is), or the server's own
/// (its authority is the request's `Host`).
fn origin_allowed(origin: &str, headers: &HeaderMap, allowed: &[String]) -> bool {
    let origin = origin.trim_end_matches('/');
    if allowed
        .iter()
        .any(|a| a == "*" || a.trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let authority = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    match (authority, headers.get(HOST).and_then(|h| h.to_str().ok())) {
        (Some(authority), Some(host)) => authority.eq_ignore_ascii_case(host),
        _ => false,
    }
}

/// Whether the request carries a body (an unreadable length counts).
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(TRANSFER_ENCODING) {
        return true;
    }
    headers.get(CONTENT_LENGTH).is_some_and(|v| {
        v.to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_none_or(|n| n > 0)
    })
}

/// Whether the body is declared JSON (`application/json` or `+json`, with
/// any parameters).
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|s| s.ends_with("+json"))
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
    fn origins() {
        let allowed = vec!["https://dash.example.com".to_string()];
        assert!(upgrade_allowed(&HeaderMap::new(), &allowed));
        assert!(upgrade_allowed(
            &headers(&[("origin", "https://dash.example.com")]),
            &allowed
        ));
        assert!(!upgrade_allowed(
            &headers(&[("origin", "https://evil.example.com"), ("host", "api:8080")]),
            &allowed
        ));
        assert!(upgrade_allowed(
            &headers(&[("origin", "http://api:8080"), ("host", "api:8080")]),
            &[]
        ));
        assert!(upgrade_allowed(
            &headers(&[("origin", "https://any.where")]),
            &["*".to_string()]
        ));
        assert!(!upgrade_allowed(
            &headers(&[("origin", "null"), ("host", "api:8080")]),
            &[]
        ));
    }

    #[test]
    fn a_referer_stands_for_a_missing_origin() {
        let h = headers(&[
            ("referer", "http://evil.example/page?x=1"),
            ("host", "api:8080"),
        ]);
        assert_eq!(request_origin(&h).as_deref(), Some("http://evil.example"));
        assert!(!upgrade_allowed(&h, &[]));
        let h = headers(&[("referer", "http://api:8080/ui/"), ("host", "api:8080")]);
        assert!(upgrade_allowed(&h, &[]));
        let h = headers(&[("referer", "not a url"), ("host", "api:8080")]);
        assert!(!upgrade_allowed(&h, &[]));
    }

    #[test]
    fn bodies_and_their_types() {
        assert!(!has_body(&HeaderMap::new()));
        assert!(!has_body(&headers(&[("content-length", "0")])));
        assert!(has_body(&headers(&[("content-length", "12")])));
        assert!(has_body(&headers(&[("transfer-encoding", "chunked")])));
        assert!(is_json(&headers(&[("content-type", "application/json")])));
        assert!(is_json(&headers(&[(
            "content-type",
            "Application/JSON; charset=utf-8"
        )])));
        assert!(is_json(&headers(&[(
            "content-type",
            "application/merge-patch+json"
        )])));
        for other in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/json+plain",
        ] {
            assert!(!is_json(&headers(&[("content-type", other)])), "{other}");
        }
        assert!(!is_json(&HeaderMap::new()));
    }
}
