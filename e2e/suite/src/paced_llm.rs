//! A slow model that answers from the conversation it is sent, served over
//! real gRPC as the `LLMService`.
//!
//! The scripted LLM serves queued answers in arrival order: a call made
//! again (an execution resumed after an outage asks the question it could
//! not record the answer to) would be given the next answer, and the
//! investigation would change shape. This one derives each answer from the
//! request alone, so asking again gets the same answer:
//!
//! - the executive-summary prompt gets a summary;
//! - a conversation with fewer than `tool_turns` tool results gets one more
//!   tool call (`testmcp__echo`, numbered by the results so far);
//! - otherwise the final answer, which counts the results it saw.
//!
//! Every answer streams as several chunks with `gap` before each, so an
//! investigation writes to its store all along (streamed text, then the
//! turn's records), and a test can break the store while answers stream.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tarsy_proto::v1::llm_service_server::{LlmService, LlmServiceServer};
use tarsy_proto::v1::{
    EmbedRequest, EmbedResponse, GenerateRequest, GenerateResponse, TextDelta, ToolCallDelta,
    UsageInfo, generate_response::Content,
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};

/// Words the executive-summary prompt opens with.
const SUMMARY_PROMPT: &str = "You write executive summaries";

/// The final answer of a conversation that saw `results` tool results.
pub fn final_answer(results: usize) -> String {
    format!("FINAL: {results} checks done; the pod is OOMKilled, raise its limit.")
}

/// The executive summary every session gets.
pub const SUMMARY: &str = "SUMMARY: OOMKilled; raise the limit.";

#[derive(Clone)]
struct Model {
    tool_turns: usize,
    gap: Duration,
    /// Calls received, per session id.
    calls: Arc<Mutex<HashMap<String, usize>>>,
}

impl Model {
    fn answer(&self, request: &GenerateRequest) -> Vec<Content> {
        let text = |s: &str| Content::Text(TextDelta { content: s.into() });
        let system = request
            .messages
            .iter()
            .find(|m| m.role == "system")
            .map_or("", |m| m.content.as_str());
        if system.contains(SUMMARY_PROMPT) {
            return vec![text("SUMMARY: "), text("OOMKilled; raise the limit.")];
        }
        let results = request.messages.iter().filter(|m| m.role == "tool").count();
        if results < self.tool_turns {
            let n = results + 1;
            vec![
                text(&format!("Check {n}: ")),
                text("looking at the pod "),
                text("once more."),
                Content::ToolCall(ToolCallDelta {
                    call_id: format!("call_{n}"),
                    name: "testmcp__echo".into(),
                    arguments: format!(r#"{{"text":"check {n}"}}"#),
                }),
            ]
        } else {
            // Several pieces: the streamed event is appended to each time.
            let answer = final_answer(results);
            let mut pieces: Vec<Content> = answer
                .split_inclusive(' ')
                .collect::<Vec<_>>()
                .chunks(3)
                .map(|words| text(&words.concat()))
                .collect();
            pieces.push(Content::Usage(UsageInfo {
                input_tokens: 100,
                output_tokens: 20,
                total_tokens: 120,
                thinking_tokens: 0,
                cached_input_tokens: 0,
            }));
            pieces
        }
    }
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<GenerateResponse, Status>> + Send>>;

#[tonic::async_trait]
impl LlmService for Model {
    type GenerateStream = ResponseStream;

    async fn generate(
        &self,
        request: Request<GenerateRequest>,
    ) -> Result<Response<Self::GenerateStream>, Status> {
        let request = request.into_inner();
        *self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(request.session_id.clone())
            .or_default() += 1;
        let chunks = self.answer(&request);
        let gap = self.gap;
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            let n = chunks.len();
            for (i, content) in chunks.into_iter().enumerate() {
                tokio::select! {
                    _ = tokio::time::sleep(gap) => {}
                    _ = tx.closed() => return,
                }
                let chunk = GenerateResponse {
                    content: Some(content),
                    is_final: i + 1 == n,
                };
                if tx.send(Ok(chunk)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn embed(
        &self,
        _request: Request<EmbedRequest>,
    ) -> Result<Response<EmbedResponse>, Status> {
        Err(Status::unimplemented("the paced model does not embed"))
    }
}

/// The model served on a loopback port; stopped when dropped.
pub struct PacedLlm {
    addr: SocketAddr,
    model: Model,
    shutdown: Option<oneshot::Sender<()>>,
}

impl PacedLlm {
    /// Serves a model that calls a tool `tool_turns` times before its final
    /// answer, `gap` before each streamed chunk.
    pub async fn start(tool_turns: usize, gap: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("paced LLM: {e}"));
        let addr = listener.local_addr().expect("a bound address");
        let model = Model {
            tool_turns,
            gap,
            calls: Arc::default(),
        };
        let (tx, rx) = oneshot::channel::<()>();
        let incoming = TcpListenerStream::new(listener).map(|conn| {
            conn.inspect(|s| {
                let _ = s.set_nodelay(true);
            })
        });
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(LlmServiceServer::new(model.clone()))
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = rx.await;
                }),
        );
        Self {
            addr,
            model,
            shutdown: Some(tx),
        }
    }

    /// The endpoint URL for a gRPC client (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Calls received for `session_id` so far.
    pub fn calls(&self, session_id: &str) -> usize {
        self.model
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session_id)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for PacedLlm {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
