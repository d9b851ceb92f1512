//! The error body of the webhooks' HTTP endpoints, as the API's: a stable
//! code and a message naming the problem.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Serialize)]
struct ErrorBody {
    error: &'static str,
    message: String,
}

/// `status` with `{error, message}`.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let code = match status {
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    };
    (
        status,
        Json(ErrorBody {
            error: code,
            message: message.into(),
        }),
    )
        .into_response()
}
