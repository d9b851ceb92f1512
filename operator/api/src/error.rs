//! The API's error responses: a status code and `{"error": CODE, "message": TEXT}`.

use axum::Json;
use axum::extract::{FromRequestParts, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tarsy_store::StoreError;
use utoipa::ToSchema;

/// Longest message sent back: messages may quote what the client sent.
const MAX_MESSAGE_CHARS: usize = 2048;

/// The stable, machine-readable `error` of an error response; each code
/// has one HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: malformed JSON, a missing, unknown or mistyped field, an invalid
    /// value or query parameter.
    BadRequest,
    /// 403: a state-changing request or a WebSocket upgrade from an origin
    /// that is not allowed, or a memory outside the API's scope.
    Forbidden,
    /// 404: unknown session, interaction or route.
    NotFound,
    /// 405: a route asked with a method it does not serve.
    MethodNotAllowed,
    /// 409: the request conflicts with the session's state.
    Conflict,
    /// 413: a body or field over its size limit.
    PayloadTooLarge,
    /// 415: a request body that is not JSON.
    UnsupportedMediaType,
    /// 500: unexpected failure (details in the server log only).
    Internal,
    /// 503: the service cannot take the request now (the database is
    /// unavailable, TARSy is shutting down); `Retry-After` says when to try
    /// again.
    Unavailable,
    /// 507: the database's disk is full; nothing can be stored until space
    /// is freed.
    InsufficientStorage,
}

impl ErrorCode {
    /// The HTTP status of this code.
    pub const fn status(self) -> StatusCode {
        match self {
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict => StatusCode::CONFLICT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::InsufficientStorage => StatusCode::INSUFFICIENT_STORAGE,
        }
    }

    /// The wire string (`not_found`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Internal => "internal",
            Self::Unavailable => "unavailable",
            Self::InsufficientStorage => "insufficient_storage",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {code}: {message}", code.status())]
pub struct ApiError {
    /// Stable machine-readable code; it fixes the HTTP status.
    pub code: ErrorCode,
    /// What went wrong, for a human.
    pub message: String,
}

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"error": "not_found", "message": "session \"0b7c\" not found"}))]
pub struct ErrorBody {
    /// What kind of error (it matches the HTTP status).
    pub error: ErrorCode,
    /// What went wrong, for a human (at most 2,048 characters, then ` [...]`).
    pub message: String,
}

impl ApiError {
    /// An error of this code.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.chars().count() > MAX_MESSAGE_CHARS {
            message = message.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + " [...]";
        }
        Self { code, message }
    }

    /// 405 Method Not Allowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::MethodNotAllowed, message)
    }

    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// 404 Not Found.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// 409 Conflict.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// 413 Payload Too Large.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::PayloadTooLarge, message)
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// 415 Unsupported Media Type.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UnsupportedMediaType, message)
    }

    /// 503 Service Unavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    /// 500 Internal Server Error. The detail is logged, not sent: it may name
    /// internals the client has no business seeing.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(ErrorCode::Internal, "internal error; see the server log")
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { kind, id } => {
                Self::not_found(format!("{kind} {id:?} not found"))
            }
            StoreError::Conflict { kind, message } => {
                Self::conflict(format!("conflict on {kind}: {message}"))
            }
            StoreError::InvalidInput(message) => Self::bad_request(message),
            e if e.is_disk_full() => {
                tracing::error!(error = %e, "the database's disk is full");
                Self::new(
                    ErrorCode::InsufficientStorage,
                    "the database's disk is full: nothing can be stored until space is freed",
                )
            }
            e if e.is_transient() => {
                tracing::warn!(error = %e, "the database is unavailable");
                Self::unavailable(format!(
                    "the database is unavailable ({e}); try again in a few seconds"
                ))
            }
            other => Self::internal(other),
        }
    }
}

/// Seconds a client is asked to wait before trying a 503 or 507 again.
pub const RETRY_AFTER_SECS: u64 = 5;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.code,
            message: self.message,
        };
        let mut response = (self.code.status(), Json(body)).into_response();
        if matches!(
            self.code,
            ErrorCode::Unavailable | ErrorCode::InsufficientStorage
        ) {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(RETRY_AFTER_SECS),
            );
        }
        response
    }
}

/// A path parameter whose rejection (bad percent-encoding, invalid UTF-8)
/// is the API's `{error, message}` 400, like every other error.
pub(crate) struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Self(value)),
            Err(e) => Err(ApiError::bad_request(format!(
                "invalid path {:?}: {}",
                parts.uri.path(),
                e.body_text()
            ))),
        }
    }
}

/// Result alias of handlers.
pub type ApiResult<T> = Result<T, ApiError>;
