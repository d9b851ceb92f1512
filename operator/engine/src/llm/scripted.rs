//! [`ScriptedLlmClient`]: the `scripted` provider type, replayed in process.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use tarsy_scripted_llm::{ScriptFile, ScriptedLlm};

use super::grpc::{chunk_stream, to_request};
use super::{ChunkStream, GenerateInput, LlmClient, LlmError};

/// Sessions whose script copies are kept; the oldest copy is dropped beyond
/// this (a later chat of that session would start its script over).
const MAX_SCRIPTED_SESSIONS: usize = 1024;

/// An [`LlmClient`] answering from one script file, without a server.
///
/// Every session replays the script from its start: a session gets its own
/// copy of the queues (keyed by the request's session id, at most
/// 1024 sessions kept), and its chat continues that copy. A call goes through
/// the same conversions as over gRPC (the request the service would receive,
/// the chunks the gRPC client would make of the responses), so a script
/// answers alike in process and from a `ScriptedLlmServer`.
pub struct ScriptedLlmClient {
    file: ScriptFile,
    sessions: Mutex<Sessions>,
}

/// The script copies by session id, and the ids oldest first.
#[derive(Default)]
struct Sessions {
    scripts: HashMap<String, ScriptedLlm>,
    order: VecDeque<String>,
}

impl ScriptedLlmClient {
    /// A client replaying `file`.
    pub fn new(file: ScriptFile) -> Self {
        Self {
            file,
            sessions: Mutex::default(),
        }
    }

    /// The session's copy of the script, made on its first call.
    fn for_session(&self, session_id: &str) -> ScriptedLlm {
        // A panic elsewhere cannot leave the map inconsistent: keep serving.
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(script) = sessions.scripts.get(session_id) {
            return script.clone();
        }
        let script = ScriptedLlm::from_file(self.file.clone());
        sessions
            .scripts
            .insert(session_id.to_string(), script.clone());
        sessions.order.push_back(session_id.to_string());
        while sessions.order.len() > MAX_SCRIPTED_SESSIONS {
            if let Some(oldest) = sessions.order.pop_front() {
                sessions.scripts.remove(&oldest);
            }
        }
        script
    }
}

#[async_trait]
impl LlmClient for ScriptedLlmClient {
    async fn generate(&self, input: GenerateInput) -> Result<ChunkStream, LlmError> {
        let request = to_request(input);
        let script = self.for_session(&request.session_id);
        Ok(chunk_stream(script.respond(request)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;
    use tarsy_core::{Backend, ConversationMessage, LlmProviderConfig, ProviderType};
    use tarsy_scripted_llm::{ScriptedChunk, ScriptedLlmServer, ScriptedResponse};

    use super::*;
    use crate::llm::{Chunk, GrpcLlmClient};

    fn input(session: &str, agent: &str) -> GenerateInput {
        GenerateInput {
            session_id: session.into(),
            execution_id: "e".into(),
            messages: vec![ConversationMessage::system(format!("You are {agent}."))],
            provider: LlmProviderConfig {
                name: "p".into(),
                provider_type: ProviderType::Scripted,
                model: "m".into(),
                api_key_env: None,
                credentials_env: None,
                base_url: None,
                project: None,
                location: None,
                native_tools: Default::default(),
                max_tool_result_tokens: None,
                context_window_tokens: None,
                script: Some("s.yaml".into()),
                fallback: Vec::new(),
                price: None,
            },
            native_tools_override: None,
            backend: Backend::Langchain,
            tools: Vec::new(),
            clear_cache: false,
        }
    }

    async fn chunks(client: &dyn LlmClient, input: GenerateInput) -> Vec<Chunk> {
        client.generate(input).await.unwrap().collect().await
    }

    fn text(s: &str) -> ScriptedChunk {
        ScriptedChunk::Text { content: s.into() }
    }

    /// Every chunk kind, an error that ends its call, the endings, a route.
    fn script() -> ScriptFile {
        let every_kind = ScriptedResponse::default()
            .then_thinking("thinking")
            .then_text("text")
            .then_tool_call("c1", "k8s.get", r#"{"name":"x"}"#)
            .then_usage(10, 5)
            .then(ScriptedChunk::CodeExecution {
                code: "1+1".into(),
                result: "2".into(),
            })
            .then(ScriptedChunk::GoogleSearch {
                queries: vec!["q".into()],
                sources: vec![("https://a".into(), "A".into())],
            })
            .then(ScriptedChunk::UrlContext {
                urls: vec![("https://b".into(), "ok".into())],
            });
        let error_ends_the_call = ScriptedResponse::default()
            .then_text("partial")
            .then(ScriptedChunk::Error {
                message: "rate limited".into(),
                code: "max_retries".into(),
                retryable: true,
            })
            .then_text("never sent");
        let mut unavailable = ScriptedResponse::grpc_error(14, "gone");
        unavailable.chunks.push(text("before"));
        ScriptFile {
            sequential: vec![
                every_kind,
                error_ends_the_call,
                ScriptedResponse::default(),
                unavailable,
                ScriptedResponse::grpc_error(8, "busy"),
            ],
            routes: [("Agent-B".to_string(), vec![ScriptedResponse::text("b")])].into(),
        }
    }

    #[tokio::test]
    async fn a_script_answers_in_process_as_it_does_over_grpc() {
        let in_process = ScriptedLlmClient::new(script());
        let server = ScriptedLlmServer::start(ScriptedLlm::from_file(script()))
            .await
            .unwrap();
        let grpc = GrpcLlmClient::connect(&server.endpoint()).await.unwrap();
        // Five sequential answers, the route, then the exhausted script.
        let agents = ["A", "A", "A", "A", "A", "Agent-B", "A"];
        let mut seen = Vec::new();
        for agent in agents {
            let expected = chunks(&grpc, input("s", agent)).await;
            let got = chunks(&in_process, input("s", agent)).await;
            assert_eq!(got, expected, "answer to {agent} #{}", seen.len());
            seen.push(got);
        }
        // The script did play (not two equally empty answers).
        assert_eq!(seen[0].len(), 7);
        assert_eq!(seen[1].len(), 2);
        assert!(seen[2].is_empty());
        assert!(matches!(&seen[3][1], Chunk::Error(e) if e.is_service_unavailable()));
        assert!(matches!(&seen[4][0], Chunk::Error(e) if e.code == "transport"));
        assert_eq!(seen[5], vec![Chunk::Text("b".into())]);
        assert!(matches!(&seen[6][0], Chunk::Error(e) if e.code == "internal"));
        server.shutdown().await;
    }

    #[tokio::test]
    async fn each_session_replays_its_own_copy_and_the_oldest_copies_go() {
        let file = ScriptFile {
            sequential: vec![
                ScriptedResponse::text("first"),
                ScriptedResponse::text("second"),
            ],
            ..ScriptFile::default()
        };
        let client = ScriptedLlmClient::new(file);
        let first = vec![Chunk::Text("first".into())];
        assert_eq!(chunks(&client, input("a", "A")).await, first);
        // Another session starts over; the first one's chat continues.
        assert_eq!(chunks(&client, input("b", "A")).await, first);
        assert_eq!(
            chunks(&client, input("a", "A")).await,
            vec![Chunk::Text("second".into())]
        );
        for i in 0..MAX_SCRIPTED_SESSIONS {
            client.for_session(&format!("other-{i}"));
        }
        // "a" was dropped: its script starts over.
        assert_eq!(chunks(&client, input("a", "A")).await, first);
    }

    #[tokio::test]
    async fn dropping_the_stream_cancels_a_hanging_answer() {
        let file = ScriptFile {
            sequential: vec![ScriptedResponse::text("wait").then_hang()],
            ..ScriptFile::default()
        };
        let client = ScriptedLlmClient::new(file);
        let mut stream = client.generate(input("s", "A")).await.unwrap();
        assert_eq!(stream.next().await, Some(Chunk::Text("wait".into())));
        drop(stream);
        let script = client.for_session("s");
        assert!(
            script
                .wait_for_cancellations(1, Duration::from_secs(5))
                .await
        );
    }
}
