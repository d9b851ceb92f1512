//! [`LlmClient`] over gRPC to the LLM service (`llm.v1.LLMService/Generate`),
//! and the conversions between the engine's calls and the service's
//! messages (the in-process scripted client uses them too).

use std::error::Error as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use tarsy_core::{ConversationMessage, TokenUsage, ToolCall, ToolDefinition};
use tarsy_proto::v1 as pb;
use tarsy_proto::v1::generate_response::Content;
use tarsy_proto::v1::llm_service_client::LlmServiceClient;
use tonic::transport::{Channel, Endpoint};

use super::{
    Chunk, ChunkStream, GenerateInput, Grounding, GroundingSource, LlmClient, LlmError,
    LlmErrorInfo, UrlContext,
};

/// How long a connection attempt to the LLM service may take. Without a
/// bound, a service whose address stopped answering (a node gone, packets
/// dropped) would hold each call until the iteration timeout instead of
/// failing as unreachable and being retried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The gRPC client. Cloning is cheap (one shared HTTP/2 connection).
///
/// The channel reconnects by itself: after the service went away, the next
/// call connects again (and fails as [`LlmErrorInfo::is_service_unavailable`]
/// while nothing answers), whether the channel first connected or not.
#[derive(Clone, Debug)]
pub struct GrpcLlmClient {
    client: LlmServiceClient<Channel>,
    /// A channel connected ahead of the first call (see
    /// [`GrpcLlmClient::connect_lazy`]); used once it is there.
    early: Arc<OnceLock<LlmServiceClient<Channel>>>,
}

impl GrpcLlmClient {
    /// A client for `endpoint` (e.g. `http://127.0.0.1:50051`) that never
    /// fails for want of the service: calls connect (and reconnect) as needed.
    /// Inside a Tokio runtime it also starts connecting at once in the
    /// background, so that the first call, made after the MCP sessions are
    /// open, finds the connection ready.
    pub fn connect_lazy(endpoint: &str) -> Result<Self, LlmError> {
        let ep = endpoint_for(endpoint)?;
        let early = Arc::new(OnceLock::new());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let ep = ep.clone();
            let slot = Arc::clone(&early);
            runtime.spawn(async move {
                // Not there yet (the service starting): calls connect lazily.
                if let Ok(channel) = ep.connect().await {
                    let _ = slot.set(LlmServiceClient::new(channel));
                }
            });
        }
        Ok(Self {
            client: LlmServiceClient::new(ep.connect_lazy()),
            early,
        })
    }

    /// The service client a call goes through: the channel connected ahead
    /// of the first call once it is there (shared with `GrpcEmbedder`).
    pub(crate) fn service_client(&self) -> LlmServiceClient<Channel> {
        self.early.get().unwrap_or(&self.client).clone()
    }

    /// A client connected now (fails fast when the service is not there).
    pub async fn connect(endpoint: &str) -> Result<Self, LlmError> {
        let ep = endpoint_for(endpoint)?;
        let channel = ep
            .connect()
            .await
            .map_err(|e| LlmError::Unavailable(format!("cannot connect to {endpoint}: {e}")))?;
        Ok(Self {
            client: LlmServiceClient::new(channel),
            early: Arc::new(OnceLock::new()),
        })
    }
}

fn endpoint_for(endpoint: &str) -> Result<Endpoint, LlmError> {
    Ok(Endpoint::from_shared(endpoint.to_string())
        .map_err(|e| LlmError::Unavailable(format!("invalid endpoint {endpoint:?}: {e}")))?
        .tcp_nodelay(true)
        .connect_timeout(CONNECT_TIMEOUT))
}

/// The proto request for an input.
pub(crate) fn to_request(input: GenerateInput) -> pb::GenerateRequest {
    let p = input.provider;
    let native_tools = input
        .native_tools_override
        .unwrap_or(p.native_tools)
        .into_iter()
        .collect();
    pb::GenerateRequest {
        session_id: input.session_id,
        messages: input.messages.into_iter().map(to_message).collect(),
        llm_config: Some(pb::LlmConfig {
            provider: p.provider_type.as_str().to_string(),
            model: p.model,
            api_key_env: p.api_key_env.unwrap_or_default(),
            credentials_env: p.credentials_env.unwrap_or_default(),
            base_url: p.base_url.unwrap_or_default(),
            native_tools,
            project: p.project.unwrap_or_default(),
            location: p.location.unwrap_or_default(),
            max_output_tokens: 0,
            backend: input.backend.as_str().to_string(),
        }),
        tools: input.tools.into_iter().map(to_tool).collect(),
        execution_id: input.execution_id,
        clear_cache: input.clear_cache,
    }
}

fn to_message(m: ConversationMessage) -> pb::ConversationMessage {
    pb::ConversationMessage {
        role: m.role.as_str().to_string(),
        content: m.content,
        tool_calls: m
            .tool_calls
            .into_iter()
            .map(|c| pb::ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect(),
        tool_call_id: m.tool_call_id.unwrap_or_default(),
        tool_name: m.tool_name.unwrap_or_default(),
    }
}

fn to_tool(t: ToolDefinition) -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: t.name,
        description: t.description,
        parameters_schema: t.parameters_schema,
    }
}

/// The chunk for one response's content.
fn from_response(content: Content) -> Chunk {
    match content {
        Content::Text(t) => Chunk::Text(t.content),
        Content::Thinking(t) => Chunk::Thinking(t.content),
        Content::ToolCall(c) => Chunk::ToolCall(ToolCall {
            id: c.call_id,
            name: c.name,
            arguments: c.arguments,
        }),
        Content::Usage(u) => Chunk::Usage(TokenUsage {
            input_tokens: i64::from(u.input_tokens),
            output_tokens: i64::from(u.output_tokens),
            total_tokens: i64::from(u.total_tokens),
            thinking_tokens: i64::from(u.thinking_tokens),
            cached_input_tokens: i64::from(u.cached_input_tokens),
        }),
        Content::Error(e) => Chunk::Error(LlmErrorInfo {
            message: e.message,
            code: e.code,
            retryable: e.retryable,
        }),
        Content::CodeExecution(c) => Chunk::CodeExecution {
            code: c.code,
            result: c.result,
        },
        Content::Grounding(g) => Chunk::Grounding(Grounding {
            web_search_queries: g.web_search_queries,
            sources: g
                .grounding_chunks
                .into_iter()
                .map(|c| GroundingSource {
                    uri: c.uri,
                    title: c.title,
                })
                .collect(),
            url_context: g
                .url_context
                .into_iter()
                .map(|u| UrlContext {
                    url: u.url,
                    status: u.status,
                })
                .collect(),
        }),
    }
}

/// Whether a failed RPC means the LLM service itself could not be reached.
///
/// The service reports every failure of its own or of a provider inside the
/// stream (`ErrorInfo`), never as a gRPC status. So a status is about the
/// path to the service: `Unavailable` is what the channel says when it
/// cannot connect or the connection was closed (and what a proxy in front
/// of the service says when nothing is behind it), and a status with a
/// source was made here, by the transport, from a connection that failed
/// (reset, closed mid-stream): a status the other side sent has none.
/// `Cancelled` is what grpc itself answers a call that reached a server the
/// moment it began to stop (a drain on rollout): the call never reached a
/// provider. (A call this side cancels is dropped, never read as a status.)
fn service_unreachable(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Cancelled
    ) || status.source().is_some()
}

/// The error for a failed RPC: [`LlmErrorInfo::service_unavailable`] when
/// the service could not be reached, else `transport`, retryable for the
/// statuses worth another attempt (overloaded, aborted, unknown).
pub(super) fn status_info(status: &tonic::Status) -> LlmErrorInfo {
    use tonic::Code;
    let mut message = format!("{}: {}", status.code(), status.message());
    // The root cause ("Connection refused") says more than tonic's summary.
    let mut cause = status.source();
    while let Some(next) = cause.and_then(|c| c.source()) {
        cause = Some(next);
    }
    if let Some(root) = cause.map(|c| c.to_string())
        && !message.contains(&root)
    {
        message = format!("{message} ({root})");
    }
    if service_unreachable(status) {
        return LlmErrorInfo::service_unavailable(message);
    }
    LlmErrorInfo {
        message,
        code: "transport".into(),
        retryable: matches!(
            status.code(),
            Code::ResourceExhausted | Code::Aborted | Code::Unknown
        ),
    }
}

#[async_trait]
impl LlmClient for GrpcLlmClient {
    async fn generate(&self, input: GenerateInput) -> Result<ChunkStream, LlmError> {
        let request = to_request(input);
        let mut client = self.early.get().unwrap_or(&self.client).clone();
        match client.generate(request).await {
            // Dropping the chunk stream drops `tonic::Streaming`, which resets
            // the HTTP/2 stream: the service sees the cancellation.
            Ok(resp) => Ok(chunk_stream(resp.into_inner())),
            Err(status) => {
                let info = status_info(&status);
                Ok(Box::pin(futures::stream::once(async move {
                    Chunk::Error(info)
                })))
            }
        }
    }
}

/// The chunks of a call's responses, as the service streams them: one chunk
/// per response with content; the call ends after the final response, an
/// error chunk or a failed RPC (an error chunk from [`status_info`]).
/// Dropping the chunk stream drops `responses`.
pub(crate) fn chunk_stream<S>(responses: S) -> ChunkStream
where
    S: Stream<Item = Result<pb::GenerateResponse, tonic::Status>> + Send + Unpin + 'static,
{
    // State: the open response stream, or None once the call has ended.
    let stream = futures::stream::unfold(Some(responses), |state| async move {
        let mut s = state?;
        loop {
            match s.next().await {
                Some(Ok(resp)) => {
                    let last = resp.is_final;
                    match resp.content {
                        Some(c) => {
                            let chunk = from_response(c);
                            let ended = last || matches!(chunk, Chunk::Error(_));
                            return Some((chunk, if ended { None } else { Some(s) }));
                        }
                        None if last => return None,
                        None => continue,
                    }
                }
                None => return None,
                Some(Err(status)) => return Some((Chunk::Error(status_info(&status)), None)),
            }
        }
    });
    stream.boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_from_the_channel_or_a_proxy_is_an_unreachable_service() {
        let info = status_info(&tonic::Status::unavailable("tcp connect error"));
        assert!(info.is_service_unavailable(), "{info:?}");
        assert!(info.retryable);
        assert_eq!(
            info.message,
            "The service is currently unavailable: tcp connect error"
        );
    }

    #[test]
    fn a_status_made_from_a_broken_connection_is_an_unreachable_service() {
        // What tonic makes of a connection reset mid-stream: the code varies
        // (here Unknown), the transport error is its source.
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset");
        let status = tonic::Status::from_error(Box::new(reset));
        assert_eq!(status.code(), tonic::Code::Unknown);
        let info = status_info(&status);
        assert!(info.is_service_unavailable(), "{info:?}");
        assert!(
            info.message.contains("connection reset"),
            "{}",
            info.message
        );
    }

    #[test]
    fn a_call_cancelled_by_a_stopping_server_is_an_unreachable_service() {
        let info = status_info(&tonic::Status::cancelled("server shutting down"));
        assert!(info.is_service_unavailable(), "{info:?}");
    }

    #[test]
    fn statuses_the_other_side_sent_keep_their_handling() {
        let busy = status_info(&tonic::Status::resource_exhausted("too many requests"));
        assert_eq!(busy.code, "transport");
        assert!(busy.retryable);
        let unknown = status_info(&tonic::Status::unknown("Exception calling application"));
        assert_eq!(unknown.code, "transport");
        assert!(unknown.retryable);
        let internal = status_info(&tonic::Status::internal("bad message"));
        assert_eq!(internal.code, "transport");
        assert!(!internal.retryable);
    }

    #[test]
    fn errors_the_service_reports_are_never_an_unreachable_service() {
        let Chunk::Error(info) = from_response(Content::Error(pb::ErrorInfo {
            message: "rate limited after 3 retries".into(),
            code: "max_retries".into(),
            retryable: true,
        })) else {
            panic!("an error chunk");
        };
        assert!(!info.is_service_unavailable());
        assert!(info.retryable);
    }
}
