//! What the scripted server answers: a response is a list of chunks and an
//! ending. Scripts are plain data (serde), so e2e scenarios can load them from
//! files as well as build them in code.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One streamed piece of a scripted response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ScriptedChunk {
    /// Answer text.
    Text {
        /// The text delta.
        content: String,
    },
    /// Native thinking.
    Thinking {
        /// The thinking delta.
        content: String,
    },
    /// A complete tool call.
    ToolCall {
        /// Call id.
        id: String,
        /// Tool name as the model returns it.
        name: String,
        /// Arguments (a JSON string).
        arguments: String,
    },
    /// Token usage, as the LLM service reports it for every provider.
    /// `thinking_tokens` and `cached_input_tokens` may be left out (0); the
    /// total sent is input + output + thinking.
    Usage {
        /// The whole prompt, cached tokens included.
        input_tokens: i32,
        /// The answer, thinking tokens excluded.
        output_tokens: i32,
        /// Thinking tokens.
        #[serde(default)]
        thinking_tokens: i32,
        /// Prompt tokens read from the provider's cache (a part of
        /// `input_tokens`).
        #[serde(default)]
        cached_input_tokens: i32,
    },
    /// A provider error; the stream ends after it.
    Error {
        /// Error text.
        message: String,
        /// Error code (`max_retries`, `context_overflow`, ...).
        code: String,
        /// Whether the orchestrator may retry.
        retryable: bool,
    },
    /// Gemini code execution output.
    CodeExecution {
        /// Generated code.
        code: String,
        /// Execution output.
        result: String,
    },
    /// Google Search grounding.
    GoogleSearch {
        /// Queries issued.
        queries: Vec<String>,
        /// Sources as (uri, title).
        sources: Vec<(String, String)>,
    },
    /// URL context grounding.
    UrlContext {
        /// URLs as (url, status).
        urls: Vec<(String, String)>,
    },
}

/// How a scripted response ends once its chunks are sent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Ending {
    /// The last chunk carries `is_final = true` (an empty final chunk when
    /// there are no chunks).
    #[default]
    Finish,
    /// Keep the stream open until the client goes away (cancellation and
    /// timeout tests).
    Hang,
    /// Fail the RPC with a gRPC status after the chunks.
    GrpcError {
        /// gRPC status code number (14 = unavailable).
        code: i32,
        /// Status message.
        message: String,
    },
}

/// One scripted answer to one `Generate` call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ScriptedResponse {
    /// Chunks in order.
    #[serde(default)]
    pub chunks: Vec<ScriptedChunk>,
    /// What happens after the chunks.
    #[serde(default)]
    pub ending: Ending,
    /// Pause before each chunk, in milliseconds (0 = none).
    #[serde(default)]
    pub chunk_delay_ms: u64,
}

impl ScriptedResponse {
    /// A plain text answer.
    pub fn text(content: impl Into<String>) -> Self {
        Self::default().then_text(content)
    }

    /// An answer that only calls tools: each entry is (id, name, JSON arguments).
    pub fn tool_calls<I, A, B, C>(calls: I) -> Self
    where
        I: IntoIterator<Item = (A, B, C)>,
        A: Into<String>,
        B: Into<String>,
        C: Into<String>,
    {
        let mut r = Self::default();
        for (id, name, args) in calls {
            r = r.then_tool_call(id, name, args);
        }
        r
    }

    /// A single tool call.
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self::default().then_tool_call(id, name, arguments)
    }

    /// A provider error chunk.
    pub fn error(code: impl Into<String>, message: impl Into<String>, retryable: bool) -> Self {
        Self {
            chunks: vec![ScriptedChunk::Error {
                message: message.into(),
                code: code.into(),
                retryable,
            }],
            ..Self::default()
        }
    }

    /// A response that never ends until the client cancels.
    pub fn hang() -> Self {
        Self {
            ending: Ending::Hang,
            ..Self::default()
        }
    }

    /// A failed RPC (gRPC status `code`).
    pub fn grpc_error(code: i32, message: impl Into<String>) -> Self {
        Self {
            ending: Ending::GrpcError {
                code,
                message: message.into(),
            },
            ..Self::default()
        }
    }

    /// Appends a thinking chunk.
    pub fn then_thinking(mut self, content: impl Into<String>) -> Self {
        self.chunks.push(ScriptedChunk::Thinking {
            content: content.into(),
        });
        self
    }

    /// Appends a text chunk.
    pub fn then_text(mut self, content: impl Into<String>) -> Self {
        self.chunks.push(ScriptedChunk::Text {
            content: content.into(),
        });
        self
    }

    /// Appends a tool call chunk.
    pub fn then_tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.chunks.push(ScriptedChunk::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// Appends a usage chunk.
    pub fn then_usage(mut self, input_tokens: i32, output_tokens: i32) -> Self {
        self.chunks.push(ScriptedChunk::Usage {
            input_tokens,
            output_tokens,
            thinking_tokens: 0,
            cached_input_tokens: 0,
        });
        self
    }

    /// Appends any chunk.
    pub fn then(mut self, chunk: ScriptedChunk) -> Self {
        self.chunks.push(chunk);
        self
    }

    /// Sends the chunks, then keeps the stream open until cancelled.
    pub fn then_hang(mut self) -> Self {
        self.ending = Ending::Hang;
        self
    }

    /// Pauses before each chunk.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self
    }
}

/// A whole script as a file holds it: a sequential queue and per-agent routes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScriptFile {
    /// Answers served in order to requests no route claims.
    #[serde(default)]
    pub sequential: Vec<ScriptedResponse>,
    /// Answers per route key (an agent name found in the system prompt).
    #[serde(default)]
    pub routes: std::collections::BTreeMap<String, Vec<ScriptedResponse>>,
}
