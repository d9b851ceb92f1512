//! Error classification and recovery of MCP calls: transport failures get
//! one retry on a fresh session after a jittered backoff; everything else
//! (timeouts, cancellations, protocol errors, unknown errors) is not
//! retried.

use std::error::Error as StdError;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::io;
use std::time::Duration;

use rmcp::service::ServiceError;

/// What to do after a failed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Give up: retrying cannot help or could repeat a side effect for nothing.
    NoRetry,
    /// The session is broken: recreate it and retry once.
    RetryNewSession,
}

/// Maximum number of retries of one operation.
pub const MAX_RETRIES: u32 = 1;

/// Classifies an rmcp service error.
pub fn classify(error: &ServiceError) -> Recovery {
    match error {
        // JSON-RPC errors are the server's answer: asking again gets the same.
        ServiceError::McpError(_) => Recovery::NoRetry,
        ServiceError::Timeout { .. } | ServiceError::Cancelled { .. } => Recovery::NoRetry,
        // The connection ended (EOF, process exit, stream closed).
        ServiceError::TransportClosed => Recovery::RetryNewSession,
        ServiceError::TransportSend(e) => classify_chain(e),
        _ => Recovery::NoRetry,
    }
}

/// Classifies an arbitrary error by walking its source chain: network
/// timeouts never retry; refused, reset, aborted or closed connections, broken
/// pipes and EOF retry on a new session; anything unrecognised does not.
pub fn classify_chain(error: &(dyn StdError + 'static)) -> Recovery {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    let mut text = String::new();
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            match io.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => return Recovery::NoRetry,
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::NotConnected
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof => return Recovery::RetryNewSession,
                _ => {}
            }
        }
        if let Some(re) = e.downcast_ref::<reqwest::Error>() {
            if re.is_timeout() {
                return Recovery::NoRetry;
            }
            if re.is_connect() {
                return Recovery::RetryNewSession;
            }
        }
        text.push_str(&e.to_string().to_ascii_lowercase());
        text.push('\n');
        current = e.source();
    }
    classify_message(&text)
}

/// Last resort: recognise transport failures by their usual wording.
pub fn classify_message(message: &str) -> Recovery {
    let m = message.to_ascii_lowercase();
    if m.contains("timed out") || m.contains("timeout") || m.contains("deadline") {
        return Recovery::NoRetry;
    }
    const TRANSPORT: [&str; 9] = [
        "connection refused",
        "connection reset",
        "connection closed",
        "connection aborted",
        "broken pipe",
        "eof",
        "transport closed",
        "error sending request",
        "unexpected end",
    ];
    if TRANSPORT.iter().any(|t| m.contains(t)) {
        Recovery::RetryNewSession
    } else {
        Recovery::NoRetry
    }
}

/// A random delay in `[min, max]`, so that executions retrying against the
/// same restarted server do not all arrive at once.
pub fn jittered_backoff(min: Duration, max: Duration) -> Duration {
    if max <= min {
        return min;
    }
    let span = (max - min).as_nanos() as u64;
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(span);
    let r = hasher.finish();
    min + Duration::from_nanos(r % (span + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::ErrorData;
    use rmcp::transport::DynamicTransportError;

    fn send_error(e: impl StdError + Send + Sync + 'static) -> ServiceError {
        ServiceError::TransportSend(DynamicTransportError::from_parts(
            "test",
            std::any::TypeId::of::<()>(),
            Box::new(e),
        ))
    }

    #[test]
    fn seed_table() {
        use Recovery::*;
        let cases: Vec<(ServiceError, Recovery)> = vec![
            (ServiceError::Cancelled { reason: None }, NoRetry),
            (
                ServiceError::Timeout {
                    timeout: Duration::from_secs(1),
                },
                NoRetry,
            ),
            (
                send_error(io::Error::from(io::ErrorKind::TimedOut)),
                NoRetry,
            ),
            (
                send_error(io::Error::from(io::ErrorKind::ConnectionRefused)),
                RetryNewSession,
            ),
            (
                send_error(io::Error::from(io::ErrorKind::ConnectionReset)),
                RetryNewSession,
            ),
            (
                send_error(io::Error::from(io::ErrorKind::BrokenPipe)),
                RetryNewSession,
            ),
            (
                send_error(io::Error::from(io::ErrorKind::UnexpectedEof)),
                RetryNewSession,
            ),
            (ServiceError::TransportClosed, RetryNewSession),
            (
                ServiceError::McpError(ErrorData::invalid_params("bad", None)),
                NoRetry,
            ),
            (
                ServiceError::McpError(ErrorData::parse_error("bad", None)),
                NoRetry,
            ),
            (
                ServiceError::McpError(ErrorData::invalid_request("bad", None)),
                NoRetry,
            ),
            (send_error(io::Error::other("something odd")), NoRetry),
            (ServiceError::UnexpectedResponse, NoRetry),
        ];
        for (err, expected) in cases {
            assert_eq!(classify(&err), expected, "{err}");
        }
    }

    #[test]
    fn wrapped_io_errors_are_found_in_the_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("stream failed")]
        struct Wrapper(#[source] io::Error);
        let e = send_error(Wrapper(io::Error::from(io::ErrorKind::ConnectionReset)));
        assert_eq!(classify(&e), Recovery::RetryNewSession);
    }

    #[test]
    fn messages() {
        assert_eq!(
            classify_message("Connection closed: EOF"),
            Recovery::RetryNewSession
        );
        assert_eq!(classify_message("read timed out"), Recovery::NoRetry);
        assert_eq!(classify_message("invalid params"), Recovery::NoRetry);
    }

    #[test]
    fn backoff_stays_in_range_and_varies() {
        let min = Duration::from_millis(250);
        let max = Duration::from_millis(750);
        let samples: Vec<_> = (0..200).map(|_| jittered_backoff(min, max)).collect();
        assert!(samples.iter().all(|d| *d >= min && *d <= max));
        let distinct: std::collections::BTreeSet<_> = samples.iter().collect();
        assert!(distinct.len() > 100, "backoff should be random");
        assert_eq!(jittered_backoff(max, min), max);
    }
}
