//! A scripted OpenAI-compatible chat endpoint on a loopback port.
//!
//! `POST /v1/chat/completions` answers each request with the next queued
//! [`FakeReply`]: a server-sent-event stream shaped like OpenAI's
//! (`chat.completion.chunk` objects, tool call arguments split over several
//! deltas, a usage-only chunk, `data: [DONE]`) or an HTTP error with OpenAI's
//! error body. Every request is recorded, so tests can assert what the LLM
//! service really sent over the wire. Anything else, and a request with no
//! reply left, gets an error answer that names the problem (and is recorded
//! too), so a mis-scripted test fails loudly instead of hanging.
//!
//! [`FakeOptions`] choose how the socket and the stream behave (for the
//! overhead benchmark): whether accepted connections set `TCP_NODELAY` (real
//! providers' servers do; a server that leaves Nagle on exposes delayed-ACK
//! stalls in the client), and whether each event is written on its own, as a
//! provider streaming tokens does. [`FakeOpenAi::timings`] tells when each
//! request arrived and when its answer was handed to the socket.
//!
//! A [`FakeReply::paced`] answer is a slow model: a pause before each event,
//! so that a test can act (stop the LLM service) while it is in flight;
//! [`FakeOpenAi::events_written`] tells how far each answer has got.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// Path of the chat completions API under the base URL's host.
pub const CHAT_PATH: &str = "/v1/chat/completions";

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum FakeReply {
    /// A streamed answer: the `choices` / `usage` part of each
    /// `chat.completion.chunk`, in order. The envelope (`id`, `object`,
    /// `created`, `model` echoed from the request) is added when sent, then
    /// `data: [DONE]` ends the stream.
    Stream(Vec<Value>),
    /// `reply` (a stream) with a pause before each event after the first:
    /// a slow model, so that a test can act while the answer is in flight.
    Paced {
        /// The pause between two events.
        gap: Duration,
        /// The answer.
        reply: Box<FakeReply>,
    },
    /// A plain HTTP error with a JSON body.
    Error {
        /// HTTP status.
        status: u16,
        /// Response body.
        body: Value,
    },
}

impl FakeReply {
    /// A turn in which the model calls one function. The arguments are sent
    /// in up to three pieces, as OpenAI streams them.
    pub fn tool_call(call_id: &str, function: &str, arguments: &str) -> Self {
        let mut chunks = vec![json!({"choices": [{
            "index": 0,
            "delta": {"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": call_id, "type": "function",
                "function": {"name": function, "arguments": ""}
            }]},
            "finish_reason": null
        }]})];
        for piece in split_in_three(arguments) {
            chunks.push(json!({"choices": [{
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]},
                "finish_reason": null
            }]}));
        }
        chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
        FakeReply::Stream(chunks)
    }

    /// A turn that answers with text, streamed as the given deltas.
    pub fn text(deltas: &[&str]) -> Self {
        let mut chunks = vec![json!({"choices": [{
            "index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null
        }]})];
        for d in deltas {
            chunks.push(json!({"choices": [{
                "index": 0, "delta": {"content": d}, "finish_reason": null
            }]}));
        }
        chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
        FakeReply::Stream(chunks)
    }

    /// Appends OpenAI's usage-only chunk (`choices: []`) to a stream (also a
    /// paced one); errors are returned unchanged.
    pub fn with_usage(self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        match self {
            FakeReply::Stream(mut chunks) => {
                chunks.push(json!({"choices": [], "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens
                }}));
                FakeReply::Stream(chunks)
            }
            FakeReply::Paced { gap, reply } => FakeReply::Paced {
                gap,
                reply: Box::new(reply.with_usage(prompt_tokens, completion_tokens)),
            },
            other => other,
        }
    }

    /// This answer streamed slowly, `gap` between two events (errors are
    /// written at once all the same).
    pub fn paced(self, gap: Duration) -> Self {
        FakeReply::Paced {
            gap,
            reply: Box::new(self),
        }
    }

    /// An HTTP error in OpenAI's shape, e.g. 401 `invalid_api_key`.
    pub fn error(status: u16, message: &str, error_type: &str, code: &str) -> Self {
        FakeReply::Error {
            status,
            body: json!({"error": {
                "message": message, "type": error_type, "param": null, "code": code
            }}),
        }
    }
}

/// Splits on character boundaries into up to three non-empty pieces (one
/// empty piece for an empty string).
fn split_in_three(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(chars.len().div_ceil(3))
        .map(|c| c.iter().collect())
        .collect()
}

/// A request the endpoint received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path (no query).
    pub path: String,
    /// `Authorization` header, if sent.
    pub authorization: Option<String>,
    /// The JSON body (`Value::Null` when empty or not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// `body.messages`, empty when absent.
    pub fn messages(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The roles of `body.messages`, in order.
    pub fn roles(&self) -> Vec<String> {
        self.messages()
            .iter()
            .map(|m| m["role"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Names of the functions offered in `body.tools`.
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// How the endpoint's sockets and streams behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeOptions {
    /// Set `TCP_NODELAY` on accepted connections (as real providers' servers
    /// do). Off, small writes wait for the client's ACK of the previous one.
    pub nodelay: bool,
    /// Write every event of a streamed answer separately (yielding to the
    /// runtime between events), as a provider streaming tokens does; off,
    /// the whole answer may leave in one write.
    pub write_each_event: bool,
}

impl Default for FakeOptions {
    fn default() -> Self {
        Self {
            nodelay: true,
            write_each_event: false,
        }
    }
}

/// When one request was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTiming {
    /// The request (headers and body) had been read.
    pub received: Instant,
    /// The last byte of the answer was handed to the connection (`None`
    /// while it is being written).
    pub answered: Option<Instant>,
}

#[derive(Default)]
struct Shared {
    options: FakeOptions,
    replies: Mutex<VecDeque<FakeReply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    timings: Mutex<Vec<RequestTiming>>,
    /// Per request (as `timings`): stream events handed to the connection.
    written: Mutex<Vec<usize>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running endpoint. Dropping it stops the server.
pub struct FakeOpenAi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FakeOpenAi {
    /// Binds `127.0.0.1:0` and serves in the background.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(FakeOptions::default()).await
    }

    /// Like [`FakeOpenAi::start`], with explicit socket and stream behaviour.
    pub async fn start_with(options: FakeOptions) -> std::io::Result<Self> {
        use axum::serve::ListenerExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            options,
            ..Shared::default()
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let nodelay = options.nodelay;
        let listener = listener.tap_io(move |tcp| {
            if let Err(e) = tcp.set_nodelay(nodelay) {
                eprintln!("fake OpenAI endpoint: cannot set TCP_NODELAY: {e}");
            }
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("fake OpenAI endpoint stopped: {e}");
            }
        });
        Ok(Self { addr, shared, task })
    }

    /// The OpenAI-style base URL (`http://127.0.0.1:PORT/v1`) for an
    /// LLMProvider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues the answer to the next request.
    pub fn push(&self, reply: FakeReply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// When each request so far arrived and was answered, in order.
    pub fn timings(&self) -> Vec<RequestTiming> {
        lock(&self.shared.timings).clone()
    }

    /// How many events of each request's streamed answer have been handed
    /// to the connection so far, in request order (0 for error answers).
    pub fn events_written(&self) -> Vec<usize> {
        lock(&self.shared.written).clone()
    }

    /// Replies queued but not used.
    pub fn unused_replies(&self) -> usize {
        lock(&self.shared.replies).len()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        // Not graceful: the LLM service keeps pooled connections open.
        self.task.abort();
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let received = Instant::now();
    let slot = {
        let mut timings = lock(&shared.timings);
        timings.push(RequestTiming {
            received,
            answered: None,
        });
        lock(&shared.written).push(0);
        timings.len() - 1
    };
    let response = answer(&shared, method, uri, headers, body, slot);
    // Error answers are written whole at once.
    if response.headers().get(header::CONTENT_TYPE)
        != Some(&header::HeaderValue::from_static("text/event-stream"))
    {
        mark_answered(&shared, slot);
    }
    response
}

fn mark_answered(shared: &Shared, slot: usize) {
    if let Some(t) = lock(&shared.timings).get_mut(slot) {
        t.answered = Some(Instant::now());
    }
}

fn answer(
    shared: &Arc<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    slot: usize,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = body["model"].as_str().unwrap_or("fake-model").to_string();
    lock(&shared.requests).push(RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body,
    });
    if method != Method::POST || uri.path() != CHAT_PATH {
        return failure(
            StatusCode::NOT_FOUND,
            &format!("fake endpoint serves only POST {CHAT_PATH}"),
        );
    }
    // The request count is the sequence number: ids stay unique per call.
    let n = lock(&shared.requests).len();
    let (reply, gap) = match lock(&shared.replies).pop_front() {
        Some(FakeReply::Paced { gap, reply }) => (Some(*reply), Some(gap)),
        other => (other, None),
    };
    match reply {
        None => failure(
            StatusCode::BAD_REQUEST,
            "fake endpoint: no scripted reply left for this request",
        ),
        Some(FakeReply::Paced { .. }) => failure(
            StatusCode::BAD_REQUEST,
            "fake endpoint: a paced reply must wrap a stream or an error",
        ),
        Some(FakeReply::Error { status, body }) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        Some(FakeReply::Stream(chunks)) => {
            let id = format!("chatcmpl-fake-{n}");
            let events: Vec<Result<Bytes, Infallible>> = chunks
                .into_iter()
                .map(|mut c| {
                    if let Value::Object(o) = &mut c {
                        o.insert("id".into(), json!(id));
                        o.insert("object".into(), json!("chat.completion.chunk"));
                        o.insert("created".into(), json!(1_700_000_000));
                        o.insert("model".into(), json!(model));
                        o.entry("usage").or_insert(Value::Null);
                    }
                    Ok(Bytes::from(format!("data: {c}\n\n")))
                })
                .chain(std::iter::once(Ok(Bytes::from_static(b"data: [DONE]\n\n"))))
                .collect();
            let each = shared.options.write_each_event;
            let done = shared.clone();
            let events = futures::stream::unfold(
                (events.into_iter(), false),
                move |(mut rest, first_sent)| {
                    let done = done.clone();
                    async move {
                        // Yielding makes hyper flush what it has buffered:
                        // one write per event, as a token stream arrives.
                        if each && first_sent && gap.is_none() {
                            tokio::task::yield_now().await;
                        }
                        match rest.next() {
                            Some(event) => {
                                // Before an event, not before the end: a
                                // client that has read `[DONE]` may hang up,
                                // and the answer is complete by then.
                                if let (true, Some(gap)) = (first_sent, gap) {
                                    tokio::time::sleep(gap).await;
                                }
                                // Counted as handed to hyper; once the
                                // client is gone it stops polling for more.
                                if let Some(n) = lock(&done.written).get_mut(slot) {
                                    *n += 1;
                                }
                                Some((event, (rest, true)))
                            }
                            None => {
                                mark_answered(&done, slot);
                                None
                            }
                        }
                    }
                },
            );
            (
                [
                    (header::CONTENT_TYPE, "text/event-stream"),
                    (header::CACHE_CONTROL, "no-cache"),
                ],
                Body::from_stream(events),
            )
                .into_response()
        }
    }
}

fn failure(status: StatusCode, message: &str) -> Response {
    let body = json!({"error": {
        "message": message, "type": "invalid_request_error", "param": null, "code": null
    }});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_split_without_losing_characters() {
        for s in ["", "{}", r#"{"namespace":"shop"}"#, "é€x"] {
            let parts = split_in_three(s);
            assert!(!parts.is_empty() && parts.len() <= 3, "{s:?} → {parts:?}");
            assert_eq!(parts.concat(), s);
        }
        assert_eq!(split_in_three(r#"{"a":1}"#).len(), 3);
    }

    #[test]
    fn a_paced_answer_keeps_its_usage_inside() {
        let gap = Duration::from_millis(5);
        let paced = FakeReply::text(&["hi"]).paced(gap).with_usage(10, 2);
        assert_eq!(paced, FakeReply::text(&["hi"]).with_usage(10, 2).paced(gap));
    }

    #[test]
    fn usage_is_a_separate_chunk_without_choices() {
        let FakeReply::Stream(chunks) = FakeReply::text(&["hi"]).with_usage(10, 2) else {
            panic!("stream expected");
        };
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["total_tokens"], 12);
        assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "hi");
    }
}
