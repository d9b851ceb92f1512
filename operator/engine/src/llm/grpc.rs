//! [`LlmClient`] over gRPC to the LLM service (`llm.v1.LLMService/Generate`).

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use futures::StreamExt;
use tarsy_core::{ConversationMessage, TokenUsage, ToolCall, ToolDefinition};
use tarsy_proto::v1 as pb;
use tarsy_proto::v1::generate_response::Content;
use tarsy_proto::v1::llm_service_client::LlmServiceClient;
use tonic::transport::{Channel, Endpoint};

use super::{
    Chunk, ChunkStream, GenerateInput, Grounding, GroundingSource, LlmClient, LlmError,
    LlmErrorInfo, UrlContext,
};

/// The gRPC client. Cloning is cheap (one shared HTTP/2 connection).
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
        let ep = Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| LlmError::Unavailable(format!("invalid endpoint {endpoint:?}: {e}")))?
            .tcp_nodelay(true);
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

    /// A client connected now (fails fast when the service is not there).
    pub async fn connect(endpoint: &str) -> Result<Self, LlmError> {
        let ep = Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| LlmError::Unavailable(format!("invalid endpoint {endpoint:?}: {e}")))?
            .tcp_nodelay(true);
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

/// The chunk for one proto response (`None` for an empty final marker).
pub(crate) fn from_response(content: Content) -> Chunk {
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

/// gRPC statuses worth another attempt (service restarting, overloaded).
fn status_info(status: &tonic::Status) -> LlmErrorInfo {
    use tonic::Code;
    LlmErrorInfo {
        message: format!("{}: {}", status.code(), status.message()),
        code: "transport".into(),
        retryable: matches!(
            status.code(),
            Code::Unavailable | Code::ResourceExhausted | Code::Aborted | Code::Unknown
        ),
    }
}

#[async_trait]
impl LlmClient for GrpcLlmClient {
    async fn generate(&self, input: GenerateInput) -> Result<ChunkStream, LlmError> {
        let request = to_request(input);
        let mut client = self.early.get().unwrap_or(&self.client).clone();
        let streaming = match client.generate(request).await {
            Ok(resp) => resp.into_inner(),
            Err(status) => {
                let info = status_info(&status);
                return Ok(Box::pin(futures::stream::once(async move {
                    Chunk::Error(info)
                })));
            }
        };
        // State: the open stream, or None once the call has ended. Dropping
        // the returned stream drops `tonic::Streaming`, which resets the
        // HTTP/2 stream: the service sees the cancellation.
        let stream = futures::stream::unfold(Some(streaming), |state| async move {
            let mut s = state?;
            loop {
                match s.message().await {
                    Ok(Some(resp)) => {
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
                    Ok(None) => return None,
                    Err(status) => return Some((Chunk::Error(status_info(&status)), None)),
                }
            }
        });
        Ok(stream.boxed())
    }
}
