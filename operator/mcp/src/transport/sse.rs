//! Legacy HTTP+SSE transport (MCP 2024-11-05), which many deployed servers
//! still speak and which rmcp no longer ships a client for.
//!
//! The client opens one `GET` event stream. The server's first event,
//! `endpoint`, names the URL to `POST` JSON-RPC messages to; the server's
//! messages (responses, requests, notifications) then arrive on the stream as
//! `message` events. This type plugs that into rmcp's [`Transport`] trait, so
//! the rest of the client (handshake, request correlation, cancellation) is
//! rmcp's own.

use std::time::Duration;

use futures::StreamExt;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Largest event accepted from the server; a larger one ends the stream
/// rather than growing memory without bound.
pub const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

/// Errors of the SSE transport.
#[derive(Debug, thiserror::Error)]
pub enum SseTransportError {
    /// The HTTP request failed (connect, send, read).
    #[error("HTTP request failed: {0}")]
    Http(#[from] reqwest::Error),
    /// The server answered with an unexpected status.
    #[error("{method} {url} returned HTTP {status}: {body}")]
    Status {
        /// GET or POST.
        method: &'static str,
        /// URL without query.
        url: String,
        /// Status code.
        status: u16,
        /// Start of the response body.
        body: String,
    },
    /// The stream did not announce a usable endpoint.
    #[error("invalid SSE endpoint event: {0}")]
    Endpoint(String),
    /// A message could not be serialised.
    #[error("cannot encode message: {0}")]
    Encode(#[from] serde_json::Error),
    /// The event stream ended before the endpoint event.
    #[error("connection closed: the SSE stream ended before announcing its endpoint")]
    ClosedBeforeEndpoint,
}

/// One parsed server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// `event:` field (empty means `message`).
    pub event: String,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// `id:` field, if any.
    pub id: Option<String>,
}

/// Incremental `text/event-stream` parser (WHATWG rules: LF, CRLF or CR line
/// ends; `:` comments; an empty line dispatches; one leading space after the
/// colon is dropped).
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    current: SseEvent,
    has_data: bool,
    pending_cr: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events completed by them. Fails when one line
    /// or event exceeds [`MAX_EVENT_BYTES`].
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        let mut events = Vec::new();
        for &b in bytes {
            if self.pending_cr {
                self.pending_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.pending_cr = b == b'\r';
                    let line = std::mem::take(&mut self.buffer);
                    if let Some(ev) = self.line(&line) {
                        events.push(ev);
                    }
                }
                _ => {
                    self.buffer.push(b);
                    if self.buffer.len() + self.current.data.len() > MAX_EVENT_BYTES {
                        return Err(format!("event larger than {MAX_EVENT_BYTES} bytes"));
                    }
                }
            }
        }
        Ok(events)
    }

    fn line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            let ev = std::mem::take(&mut self.current);
            let had = std::mem::replace(&mut self.has_data, false);
            return had.then_some(ev);
        }
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.current.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "id" => self.current.id = Some(value.to_owned()),
            _ => {}
        }
        None
    }
}

/// The client side of an HTTP+SSE connection.
pub struct SseClientTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    post_timeout: Option<Duration>,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: JoinHandle<()>,
}

impl std::fmt::Debug for SseClientTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseClientTransport")
            .field("endpoint", &redact_query(&self.endpoint))
            .finish_non_exhaustive()
    }
}

/// A URL for messages: the endpoint's query (a session id) is a credential.
fn redact_query(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.to_string()
}

impl SseClientTransport {
    /// Opens the event stream at `url` and waits for the endpoint event. The
    /// caller bounds the wait (initialisation timeout). `post_timeout` bounds
    /// each message POST.
    pub async fn connect(
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
        post_timeout: Option<Duration>,
    ) -> Result<Self, SseTransportError> {
        let base =
            Url::parse(url).map_err(|e| SseTransportError::Endpoint(format!("{url}: {e}")))?;
        let response = client
            .get(base.clone())
            .headers(headers.clone())
            .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(SseTransportError::Status {
                method: "GET",
                url: redact_query(&base),
                status: status.as_u16(),
                body: body.chars().take(200).collect(),
            });
        }
        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        let (msg_tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(read_stream(
            response.bytes_stream().boxed(),
            base,
            endpoint_tx,
            msg_tx,
        ));
        let endpoint = match endpoint_rx.await {
            Ok(result) => result?,
            Err(_) => return Err(SseTransportError::ClosedBeforeEndpoint),
        };
        Ok(Self {
            client,
            endpoint,
            headers,
            post_timeout,
            incoming,
            reader,
        })
    }

    /// Where messages are posted.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }
}

impl Drop for SseClientTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Reads the event stream: resolves the endpoint once, then forwards every
/// `message` event. Ends (closing the channel, which rmcp sees as a closed
/// transport) when the stream ends or fails.
async fn read_stream<S, B>(
    mut stream: S,
    base: Url,
    endpoint_tx: oneshot::Sender<Result<Url, SseTransportError>>,
    msg_tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
) where
    S: futures::Stream<Item = reqwest::Result<B>> + Unpin + Send,
    B: AsRef<[u8]>,
{
    let mut parser = SseParser::new();
    let mut endpoint_tx = Some(endpoint_tx);
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "SSE stream failed");
                if let Some(tx) = endpoint_tx.take() {
                    let _ = tx.send(Err(e.into()));
                }
                return;
            }
        };
        let events = match parser.push(chunk.as_ref()) {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "SSE stream dropped");
                return;
            }
        };
        for event in events {
            match event.event.as_str() {
                "endpoint" => {
                    let Some(tx) = endpoint_tx.take() else {
                        continue; // only the first endpoint counts
                    };
                    let _ = tx.send(resolve_endpoint(&base, event.data.trim()));
                }
                "" | "message" => {
                    if endpoint_tx.is_some() {
                        continue; // messages before the endpoint have no session
                    }
                    match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&event.data) {
                        Ok(msg) => {
                            if msg_tx.send(msg).await.is_err() {
                                return; // transport dropped
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "ignoring malformed SSE message"),
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(tx) = endpoint_tx.take() {
        let _ = tx.send(Err(SseTransportError::ClosedBeforeEndpoint));
    }
}

/// Resolves the announced endpoint against the stream URL. It must stay on
/// the same origin: credentials are sent with every message.
fn resolve_endpoint(base: &Url, announced: &str) -> Result<Url, SseTransportError> {
    let url = base
        .join(announced)
        .map_err(|e| SseTransportError::Endpoint(format!("{announced}: {e}")))?;
    if url.origin() != base.origin() {
        return Err(SseTransportError::Endpoint(format!(
            "{} is not on the origin of {}",
            redact_query(&url),
            redact_query(base)
        )));
    }
    Ok(url)
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseTransportError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let body = serde_json::to_vec(&item);
        let mut request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(t) = self.post_timeout {
            request = request.timeout(t);
        }
        let url = redact_query(&self.endpoint);
        async move {
            let response = request.body(body?).send().await?;
            let status = response.status();
            if status.is_success() {
                // Read to the end (servers answer "Accepted" or nothing): only
                // a fully read response gives its connection back to the pool.
                let _ = response.bytes().await;
                return Ok(());
            }
            let body = response.text().await.unwrap_or_default();
            Err(SseTransportError::Status {
                method: "POST",
                url,
                status: status.as_u16(),
                body: body.chars().take(200).collect(),
            })
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Ending the GET stream ends the session on the server side.
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&str]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        chunks
            .iter()
            .flat_map(|c| p.push(c.as_bytes()).unwrap())
            .collect()
    }

    #[test]
    fn parses_events_across_chunks_and_line_endings() {
        let got = events(&[
            ": keep-alive comment\n\n",
            "event: endpoint\r\ndata: /messages?sessionId=abc\r\n\r\n",
            "event: message\nda",
            "ta: {\"a\":1}\n\n",
            "data: line1\rdata:line2\r\r",
            "id: 7\ndata\n\n",
        ]);
        assert_eq!(
            got,
            vec![
                SseEvent {
                    event: "endpoint".into(),
                    data: "/messages?sessionId=abc".into(),
                    id: None
                },
                SseEvent {
                    event: "message".into(),
                    data: "{\"a\":1}".into(),
                    id: None
                },
                SseEvent {
                    event: "".into(),
                    data: "line1\nline2".into(),
                    id: None
                },
                SseEvent {
                    event: "".into(),
                    data: "".into(),
                    id: Some("7".into())
                },
            ]
        );
    }

    #[test]
    fn split_crlf_is_one_line_end() {
        let got = events(&["data: x\r", "\n", "\r", "\n"]);
        assert_eq!(
            got,
            vec![SseEvent {
                event: "".into(),
                data: "x".into(),
                id: None
            }]
        );
    }

    #[test]
    fn endpoints_resolve_on_the_same_origin_only() {
        let base = Url::parse("http://127.0.0.1:3001/sse").unwrap();
        assert_eq!(
            resolve_endpoint(&base, "/message?sessionId=1")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:3001/message?sessionId=1"
        );
        assert_eq!(
            resolve_endpoint(&base, "messages/?id=2").unwrap().as_str(),
            "http://127.0.0.1:3001/messages/?id=2"
        );
        assert!(resolve_endpoint(&base, "http://127.0.0.1:3001/m").is_ok());
        let err = resolve_endpoint(&base, "http://elsewhere.example/m?token=x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid SSE endpoint event: http://elsewhere.example/m is not on the origin of http://127.0.0.1:3001/sse"
        );
    }

    #[test]
    fn oversized_events_fail() {
        let mut p = SseParser::new();
        let big = vec![b'a'; MAX_EVENT_BYTES + 1];
        assert!(p.push(&big).is_err());
    }
}
