//! The script and its replay ([`ScriptedLlm::respond`]), the `LLMService`
//! implementation on top of it (`Embed` answered by a [`ScriptedEmbedder`]
//! unless scripted), and a handle on a local gRPC server.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tarsy_proto::v1::llm_service_server::{LlmService, LlmServiceServer};
use tarsy_proto::v1::{
    CodeExecutionDelta, EmbedRequest, EmbedResponse, Embedding, ErrorInfo, GenerateRequest,
    GenerateResponse, GroundingChunk, GroundingDelta, TextDelta, ThinkingDelta, ToolCallDelta,
    UrlContextResult, UsageInfo, generate_response::Content,
};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};

use crate::embed::ScriptedEmbedder;
use crate::script::{Ending, ScriptFile, ScriptedChunk, ScriptedResponse};

/// A scripted answer to one `Embed` call, in place of the
/// [`ScriptedEmbedder`]'s vectors (see [`ScriptedLlm::push_embed`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptedEmbedReply {
    /// These vectors, whatever the texts (wrong counts and lengths included).
    Vectors(Vec<Vec<f32>>),
    /// The call fails with this status.
    Fail(tonic::Code, String),
    /// No answer until the client gives up (deadlines, cancellation).
    Hang,
}

/// One request the server received, and how it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The request as received.
    pub request: GenerateRequest,
    /// The route that answered it (`None`: the sequential queue or nothing).
    pub route: Option<String>,
    /// False when no scripted response was left (the server answered with an
    /// `internal` error).
    pub scripted: bool,
}

impl RecordedRequest {
    /// The first system message's content ("" when there is none).
    pub fn system_prompt(&self) -> &str {
        self.request
            .messages
            .iter()
            .find(|m| m.role == "system")
            .map_or("", |m| m.content.as_str())
    }

    /// The last message's content ("" when there is none).
    pub fn last_message(&self) -> &str {
        self.request
            .messages
            .last()
            .map_or("", |m| m.content.as_str())
    }

    /// Names of the tools bound to the request.
    pub fn tool_names(&self) -> Vec<&str> {
        self.request.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// The provider name sent in `llm_config`.
    pub fn provider(&self) -> &str {
        self.request
            .llm_config
            .as_ref()
            .map_or("", |c| c.provider.as_str())
    }

    /// The model sent in `llm_config`.
    pub fn model(&self) -> &str {
        self.request
            .llm_config
            .as_ref()
            .map_or("", |c| c.model.as_str())
    }
}

#[derive(Default)]
struct State {
    sequential: VecDeque<ScriptedResponse>,
    routes: Vec<(String, VecDeque<ScriptedResponse>)>,
    default_response: Option<ScriptedResponse>,
    requests: Vec<RecordedRequest>,
    cancellations: usize,
    embed_script: VecDeque<ScriptedEmbedReply>,
    embed_requests: Vec<EmbedRequest>,
    embedder: ScriptedEmbedder,
}

/// The script and the record of what happened: cheap to clone (shared state),
/// so a test keeps one handle while the server owns another.
#[derive(Clone, Default)]
pub struct ScriptedLlm {
    state: Arc<Mutex<State>>,
    cancelled: Arc<Notify>,
}

impl ScriptedLlm {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// A script loaded from a [`ScriptFile`].
    pub fn from_file(file: ScriptFile) -> Self {
        let s = Self::new();
        for r in file.sequential {
            s.push(r);
        }
        for (key, responses) in file.routes {
            for r in responses {
                s.push_route(&key, r);
            }
        }
        s
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the queues half-updated
        // in a way that matters to a test double; keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a response for requests no route claims.
    pub fn push(&self, response: ScriptedResponse) -> &Self {
        self.lock().sequential.push_back(response);
        self
    }

    /// Queues a response for requests whose system prompt contains `key`
    /// (an agent name). When several keys match, the longest wins, so
    /// `Agent-10` is not served `Agent-1`'s script.
    pub fn push_route(&self, key: &str, response: ScriptedResponse) -> &Self {
        let mut st = self.lock();
        if let Some((_, q)) = st.routes.iter_mut().find(|(k, _)| k == key) {
            q.push_back(response);
        } else {
            st.routes
                .push((key.to_string(), VecDeque::from([response])));
        }
        self
    }

    /// The response served when every queue is empty (benchmarks use it to
    /// answer forever). Without one, an exhausted script answers with a
    /// non-retryable `internal` error chunk.
    pub fn set_default(&self, response: Option<ScriptedResponse>) -> &Self {
        self.lock().default_response = response;
        self
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        self.lock().requests.len()
    }

    /// Responses not yet served (sequential plus all routes).
    pub fn remaining(&self) -> usize {
        let st = self.lock();
        st.sequential.len() + st.routes.iter().map(|(_, q)| q.len()).sum::<usize>()
    }

    /// Queues the answer of the next `Embed` call; once the queue is empty,
    /// calls are answered by the [`ScriptedEmbedder`].
    pub fn push_embed(&self, reply: ScriptedEmbedReply) -> &Self {
        self.lock().embed_script.push_back(reply);
        self
    }

    /// Answers unscripted `Embed` calls with `embedder` (default:
    /// [`ScriptedEmbedder::new`]).
    pub fn set_embedder(&self, embedder: ScriptedEmbedder) -> &Self {
        self.lock().embedder = embedder;
        self
    }

    /// Every `Embed` request received so far, in arrival order.
    pub fn embed_requests(&self) -> Vec<EmbedRequest> {
        self.lock().embed_requests.clone()
    }

    /// Answers one `Embed` request as the gRPC server does: records it, then
    /// plays the next [`ScriptedEmbedReply`], or embeds the texts.
    pub async fn embed_request(&self, request: EmbedRequest) -> Result<EmbedResponse, Status> {
        let (reply, embedder) = {
            let mut st = self.lock();
            st.embed_requests.push(request.clone());
            (st.embed_script.pop_front(), st.embedder)
        };
        let vectors = match reply {
            None => embedder.embed_all(&request.texts),
            Some(ScriptedEmbedReply::Vectors(vectors)) => vectors,
            Some(ScriptedEmbedReply::Fail(code, message)) => {
                return Err(Status::new(code, message));
            }
            Some(ScriptedEmbedReply::Hang) => std::future::pending().await,
        };
        Ok(EmbedResponse {
            embeddings: vectors
                .into_iter()
                .map(|values| Embedding { values })
                .collect(),
        })
    }

    /// Streams the server saw the client abandon before they ended.
    pub fn cancellations(&self) -> usize {
        self.lock().cancellations
    }

    /// Waits until at least `n` client cancellations were observed, or the
    /// timeout passes; returns whether the count was reached.
    pub async fn wait_for_cancellations(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.cancelled.notified();
            if self.cancellations() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.cancellations() >= n;
            }
        }
    }

    fn next_response(
        &self,
        request: &GenerateRequest,
    ) -> (Option<ScriptedResponse>, Option<String>) {
        let system = request
            .messages
            .iter()
            .find(|m| m.role == "system")
            .map_or("", |m| m.content.as_str());
        let mut st = self.lock();
        let best = st
            .routes
            .iter()
            .enumerate()
            .filter(|(_, (k, q))| !q.is_empty() && system.contains(k.as_str()))
            .max_by_key(|(_, (k, _))| k.len())
            .map(|(i, _)| i);
        let (response, route) = match best {
            Some(i) => {
                let (key, q) = &mut st.routes[i];
                (q.pop_front(), Some(key.clone()))
            }
            None => (st.sequential.pop_front(), None),
        };
        let response = response.or_else(|| st.default_response.clone());
        st.requests.push(RecordedRequest {
            request: request.clone(),
            route: route.clone(),
            scripted: response.is_some(),
        });
        (response, route)
    }

    fn record_cancellation(&self) {
        self.lock().cancellations += 1;
        self.cancelled.notify_waiters();
    }
}

fn to_proto(chunk: ScriptedChunk) -> Content {
    match chunk {
        ScriptedChunk::Text { content } => Content::Text(TextDelta { content }),
        ScriptedChunk::Thinking { content } => Content::Thinking(ThinkingDelta { content }),
        ScriptedChunk::ToolCall {
            id,
            name,
            arguments,
        } => Content::ToolCall(ToolCallDelta {
            call_id: id,
            name,
            arguments,
        }),
        ScriptedChunk::Usage {
            input_tokens,
            output_tokens,
            thinking_tokens,
            cached_input_tokens,
        } => Content::Usage(UsageInfo {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens + output_tokens + thinking_tokens,
            thinking_tokens,
            cached_input_tokens,
        }),
        ScriptedChunk::Error {
            message,
            code,
            retryable,
        } => Content::Error(ErrorInfo {
            message,
            code,
            retryable,
        }),
        ScriptedChunk::CodeExecution { code, result } => {
            Content::CodeExecution(CodeExecutionDelta { code, result })
        }
        ScriptedChunk::GoogleSearch { queries, sources } => Content::Grounding(GroundingDelta {
            web_search_queries: queries,
            grounding_chunks: sources
                .into_iter()
                .map(|(uri, title)| GroundingChunk { uri, title })
                .collect(),
            ..GroundingDelta::default()
        }),
        ScriptedChunk::UrlContext { urls } => Content::Grounding(GroundingDelta {
            url_context: urls
                .into_iter()
                .map(|(url, status)| UrlContextResult { url, status })
                .collect(),
            ..GroundingDelta::default()
        }),
    }
}

/// What one `Generate` call answers: the responses in order; a
/// [`Ending::GrpcError`] ends it with the `Status` the RPC fails with.
pub type ResponseStream = Pin<Box<dyn Stream<Item = Result<GenerateResponse, Status>> + Send>>;

/// Plays one response into the channel; returns false if the client left.
async fn play(
    response: ScriptedResponse,
    tx: &mpsc::Sender<Result<GenerateResponse, Status>>,
) -> bool {
    let delay = Duration::from_millis(response.chunk_delay_ms);
    let n = response.chunks.len();
    let finish = matches!(response.ending, Ending::Finish);
    for (i, chunk) in response.chunks.into_iter().enumerate() {
        if !delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = tx.closed() => return false,
            }
        }
        let is_error = matches!(chunk, ScriptedChunk::Error { .. });
        let msg = GenerateResponse {
            content: Some(to_proto(chunk)),
            // An error ends the call, like the real service.
            is_final: (finish && i + 1 == n) || is_error,
        };
        if tx.send(Ok(msg)).await.is_err() {
            return false;
        }
        if is_error {
            return true;
        }
    }
    match response.ending {
        Ending::Finish => {
            if n == 0 {
                return tx
                    .send(Ok(GenerateResponse {
                        content: None,
                        is_final: true,
                    }))
                    .await
                    .is_ok();
            }
            true
        }
        Ending::Hang => {
            tx.closed().await;
            false
        }
        Ending::GrpcError { code, message } => {
            let status = Status::new(tonic::Code::from_i32(code), message);
            tx.send(Err(status)).await.is_ok()
        }
    }
}

impl ScriptedLlm {
    /// Answers one request, as the gRPC server does and without one: takes
    /// the next scripted response (an `internal` error chunk once the script
    /// is exhausted), records the request, and plays the response. Dropping
    /// the stream before it ends counts as a client cancellation. Must run
    /// inside a Tokio runtime (the response plays on its own task, so that
    /// chunk delays and hangs see the client leave).
    pub fn respond(&self, request: GenerateRequest) -> ResponseStream {
        let (response, _route) = self.next_response(&request);
        let response = response.unwrap_or_else(|| {
            ScriptedResponse::error(
                "internal",
                format!(
                    "scripted LLM: no response left for request #{}",
                    self.request_count()
                ),
                false,
            )
        });
        let (tx, rx) = mpsc::channel(16);
        let me = self.clone();
        tokio::spawn(async move {
            if !play(response, &tx).await {
                me.record_cancellation();
            }
        });
        Box::pin(ReceiverStream::new(rx))
    }
}

#[tonic::async_trait]
impl LlmService for ScriptedLlm {
    type GenerateStream = ResponseStream;

    async fn generate(
        &self,
        request: Request<GenerateRequest>,
    ) -> Result<Response<Self::GenerateStream>, Status> {
        Ok(Response::new(self.respond(request.into_inner())))
    }

    async fn embed(
        &self,
        request: Request<EmbedRequest>,
    ) -> Result<Response<EmbedResponse>, Status> {
        self.embed_request(request.into_inner())
            .await
            .map(Response::new)
    }
}

/// A running in-process scripted server. Dropping it stops the server.
pub struct ScriptedLlmServer {
    addr: SocketAddr,
    script: ScriptedLlm,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
}

impl ScriptedLlmServer {
    /// Serves `script` on 127.0.0.1 with an ephemeral port.
    pub async fn start(script: ScriptedLlm) -> std::io::Result<Self> {
        Self::start_on(
            "127.0.0.1:0".parse().map_err(std::io::Error::other)?,
            script,
        )
        .await
    }

    /// Serves `script` on `addr`.
    pub async fn start_on(addr: SocketAddr, script: ScriptedLlm) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel();
        let svc = LlmServiceServer::new(script.clone());
        // Small streamed messages must not wait for Nagle + delayed ACK
        // (≈ 40 ms per round trip otherwise).
        let incoming = TcpListenerStream::new(listener).map(|conn| {
            conn.inspect(|s| {
                let _ = s.set_nodelay(true);
            })
        });
        let task = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = rx.await;
                }),
        );
        Ok(Self {
            addr,
            script,
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint URL for a gRPC client (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The script (shared with the server).
    pub fn script(&self) -> &ScriptedLlm {
        &self.script
    }

    /// Stops the server and waits for it to finish.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ScriptedLlmServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(json: &str) -> UsageInfo {
        let chunk: ScriptedChunk = serde_json::from_str(json).unwrap();
        match to_proto(chunk) {
            Content::Usage(u) => u,
            other => panic!("not usage: {other:?}"),
        }
    }

    #[test]
    fn usage_may_give_cached_input_tokens() {
        let u = usage(
            r#"{"kind": "usage", "input_tokens": 100, "output_tokens": 10,
                "thinking_tokens": 5, "cached_input_tokens": 64}"#,
        );
        assert_eq!(
            (
                u.input_tokens,
                u.output_tokens,
                u.thinking_tokens,
                u.cached_input_tokens,
                u.total_tokens
            ),
            (100, 10, 5, 64, 115)
        );
    }

    #[test]
    fn usage_without_thinking_or_cached_tokens_stays_valid() {
        let u = usage(r#"{"kind": "usage", "input_tokens": 100, "output_tokens": 10}"#);
        assert_eq!((u.thinking_tokens, u.cached_input_tokens), (0, 0));
        assert_eq!(u.total_tokens, 110);
    }
}
