//! LLM routing, in every process that calls a model (local mode, the
//! runner, the operator's executive summaries): each call goes where its
//! provider says.
//!
//! * `scripted` providers replay their script file. The script is served by
//!   an in-process `LLMService` gRPC server on 127.0.0.1 (one per script
//!   file, started on first use) and reached through the real
//!   [`GrpcLlmClient`], so the whole gRPC path runs. Every session replays
//!   the script from its start: a session gets its own copy of the queues
//!   (keyed by the request's session id), and its chat continues that copy.
//! * every other provider type goes to the LLM service (`TARSY_LLM_ADDR`).
//!   A real provider never falls back to canned answers.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tarsy_config::Config;
use tarsy_core::ProviderType;
use tarsy_engine::llm::{ChunkStream, GenerateInput, LlmError};
use tarsy_engine::{GrpcLlmClient, LlmClient};
use tarsy_proto::v1::GenerateRequest;
use tarsy_proto::v1::llm_service_server::{LlmService, LlmServiceServer};
use tarsy_scripted_llm::{ScriptFile, ScriptedLlm};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::error::{ExecError, Result};

/// Default address of the LLM service.
pub const DEFAULT_LLM_ADDR: &str = "http://127.0.0.1:50051";

/// Sessions whose script copies are kept; the oldest copy is dropped beyond
/// this (a later chat of that session would start its script over).
const MAX_SCRIPTED_SESSIONS: usize = 1024;

/// One LLM call as it starts (progress display counts iterations with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmCallNotice {
    /// Session of the call.
    pub session_id: String,
    /// Execution of the call (empty for the executive summary).
    pub execution_id: String,
    /// Provider name.
    pub provider: String,
}

/// Reads and parses a script file (YAML or JSON: YAML parses both).
pub fn load_script(path: &Path) -> Result<ScriptFile> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ExecError::Config(format!("cannot read LLM script {}: {e}", path.display()))
    })?;
    serde_yaml::from_str(&text)
        .map_err(|e| ExecError::Config(format!("invalid LLM script {}: {e}", path.display())))
}

/// The script file a scripted provider names, relative paths taken from the
/// configuration directory.
pub fn script_path(base_dir: &Path, script: &str) -> PathBuf {
    let p = Path::new(script);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base_dir.join(p)
    }
}

/// The `LLMService` of one script file: a fresh copy of the script per
/// session.
struct SessionScripts {
    file: ScriptFile,
    sessions: Mutex<(HashMap<String, ScriptedLlm>, VecDeque<String>)>,
}

impl SessionScripts {
    fn for_session(&self, session_id: &str) -> ScriptedLlm {
        let mut guard = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *guard;
        if let Some(s) = map.get(session_id) {
            return s.clone();
        }
        let script = ScriptedLlm::from_file(self.file.clone());
        map.insert(session_id.to_string(), script.clone());
        order.push_back(session_id.to_string());
        while order.len() > MAX_SCRIPTED_SESSIONS {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
        script
    }
}

#[tonic::async_trait]
impl LlmService for SessionScripts {
    type GenerateStream = <ScriptedLlm as LlmService>::GenerateStream;

    async fn generate(
        &self,
        request: tonic::Request<GenerateRequest>,
    ) -> std::result::Result<tonic::Response<Self::GenerateStream>, tonic::Status> {
        let script = self.for_session(&request.get_ref().session_id);
        <ScriptedLlm as LlmService>::generate(&script, request).await
    }
}

/// A running script server and the client that reaches it.
struct ScriptHost {
    client: GrpcLlmClient,
}

/// Starts the gRPC server of one script on 127.0.0.1 with an ephemeral
/// port; it stops when `stop` is cancelled.
async fn start_script_server(file: ScriptFile, stop: CancellationToken) -> Result<ScriptHost> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|source| ExecError::Listen {
            addr: "127.0.0.1:0".into(),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ExecError::Listen {
        addr: "127.0.0.1:0".into(),
        source,
    })?;
    let service = SessionScripts {
        file,
        sessions: Mutex::new((HashMap::new(), VecDeque::new())),
    };
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(LlmServiceServer::new(service))
            .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "scripted LLM server stopped");
        }
    });
    let client = GrpcLlmClient::connect_lazy(&format!("http://{addr}"))
        .map_err(|e| ExecError::Config(e.to_string()))?;
    Ok(ScriptHost { client })
}

/// The process's [`LlmClient`]: routes each call by provider type.
pub struct LlmRouter {
    service: Arc<dyn LlmClient>,
    base_dir: PathBuf,
    scripts: tokio::sync::Mutex<HashMap<PathBuf, Arc<ScriptHost>>>,
    stop: CancellationToken,
    calls: broadcast::Sender<LlmCallNotice>,
}

impl LlmRouter {
    /// A router sending real providers to the LLM service at `llm_addr` and
    /// resolving relative script paths from `base_dir`.
    pub fn new(llm_addr: &str, base_dir: impl Into<PathBuf>) -> Result<Self> {
        let service = GrpcLlmClient::connect_lazy(llm_addr)
            .map_err(|e| ExecError::Config(format!("LLM service address: {e}")))?;
        Ok(Self::with_service(Arc::new(service), base_dir))
    }

    /// A router sending real providers to `service`.
    pub fn with_service(service: Arc<dyn LlmClient>, base_dir: impl Into<PathBuf>) -> Self {
        let (calls, _) = broadcast::channel(256);
        Self {
            service,
            base_dir: base_dir.into(),
            scripts: tokio::sync::Mutex::new(HashMap::new()),
            stop: CancellationToken::new(),
            calls,
        }
    }

    /// Parses the script of every scripted provider of `config` now, so a
    /// broken script stops the start instead of failing an investigation.
    pub fn check_scripts(&self, config: &Config) -> Result<()> {
        for provider in config.llm_providers() {
            if provider.spec.provider_type != tarsy_crds::ProviderType::Scripted {
                continue;
            }
            let script = provider.spec.script.as_deref().ok_or_else(|| {
                ExecError::Config(format!(
                    "LLMProvider {:?} is scripted but names no script",
                    provider.name
                ))
            })?;
            load_script(&script_path(&self.base_dir, script))?;
        }
        Ok(())
    }

    /// Receives a notice for every call that starts.
    pub fn subscribe_calls(&self) -> broadcast::Receiver<LlmCallNotice> {
        self.calls.subscribe()
    }

    /// Stops the script servers.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    async fn script_client(&self, script: &str) -> std::result::Result<GrpcLlmClient, LlmError> {
        let path = script_path(&self.base_dir, script);
        let mut scripts = self.scripts.lock().await;
        if let Some(host) = scripts.get(&path) {
            return Ok(host.client.clone());
        }
        let file = load_script(&path).map_err(|e| LlmError::Rejected(e.to_string()))?;
        let host = start_script_server(file, self.stop.child_token())
            .await
            .map_err(|e| LlmError::Unavailable(e.to_string()))?;
        let client = host.client.clone();
        scripts.insert(path, Arc::new(host));
        Ok(client)
    }
}

impl Drop for LlmRouter {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[async_trait]
impl LlmClient for LlmRouter {
    async fn generate(&self, input: GenerateInput) -> std::result::Result<ChunkStream, LlmError> {
        let _ = self.calls.send(LlmCallNotice {
            session_id: input.session_id.clone(),
            execution_id: input.execution_id.clone(),
            provider: input.provider.name.clone(),
        });
        if input.provider.provider_type == ProviderType::Scripted {
            let script = input.provider.script.clone().ok_or_else(|| {
                LlmError::Rejected(format!(
                    "LLMProvider {:?} is scripted but names no script",
                    input.provider.name
                ))
            })?;
            let client = self.script_client(&script).await?;
            return client.generate(input).await;
        }
        self.service.generate(input).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tarsy_core::{Backend, ConversationMessage, LlmProviderConfig};
    use tarsy_engine::llm::Chunk;

    /// Stands in for the LLM service: answers "service" to everything.
    struct Service;

    #[async_trait]
    impl LlmClient for Service {
        async fn generate(&self, _: GenerateInput) -> std::result::Result<ChunkStream, LlmError> {
            Ok(futures::stream::iter([Chunk::Text("service".into())]).boxed())
        }
    }

    fn input(session: &str, provider_type: ProviderType, script: Option<&str>) -> GenerateInput {
        GenerateInput {
            session_id: session.into(),
            execution_id: "e".into(),
            messages: vec![ConversationMessage::system("You are Agent.")],
            provider: LlmProviderConfig {
                name: "p".into(),
                provider_type,
                model: "m".into(),
                api_key_env: None,
                credentials_env: None,
                base_url: None,
                project: None,
                location: None,
                native_tools: Default::default(),
                max_tool_result_tokens: None,
                context_window_tokens: None,
                script: script.map(str::to_string),
                fallback: Vec::new(),
            },
            native_tools_override: None,
            backend: Backend::Langchain,
            tools: Vec::new(),
            clear_cache: false,
        }
    }

    async fn text(router: &LlmRouter, input: GenerateInput) -> String {
        let mut out = String::new();
        let mut stream = router.generate(input).await.unwrap();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Chunk::Text(t) => out.push_str(&t),
                Chunk::Error(e) => out.push_str(&format!("[error: {}]", e.message)),
                _ => {}
            }
        }
        out
    }

    #[tokio::test]
    async fn scripted_providers_replay_per_session_and_real_ones_reach_the_service() {
        let dir = std::env::temp_dir().join(format!("tarsy-llm-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("s.yaml"),
            "sequential:\n- chunks: [{kind: text, content: first}]\n- chunks: [{kind: text, content: second}]\n",
        )
        .unwrap();
        let router = LlmRouter::with_service(Arc::new(Service), &dir);
        let mut calls = router.subscribe_calls();

        assert_eq!(
            text(&router, input("a", ProviderType::Google, None)).await,
            "service"
        );
        assert_eq!(
            text(&router, input("a", ProviderType::Scripted, Some("s.yaml"))).await,
            "first"
        );
        assert_eq!(
            text(&router, input("a", ProviderType::Scripted, Some("s.yaml"))).await,
            "second"
        );
        // Another session replays the script from its start.
        assert_eq!(
            text(&router, input("b", ProviderType::Scripted, Some("s.yaml"))).await,
            "first"
        );
        assert_eq!(calls.recv().await.unwrap().session_id, "a");

        let missing = router
            .generate(input("a", ProviderType::Scripted, Some("nope.yaml")))
            .await;
        assert!(matches!(missing, Err(LlmError::Rejected(m)) if m.contains("nope.yaml")));
        let unnamed = router
            .generate(input("a", ProviderType::Scripted, None))
            .await;
        assert!(matches!(unnamed, Err(LlmError::Rejected(_))));

        std::fs::write(dir.join("bad.yaml"), "sequential: 7").unwrap();
        let err = load_script(&dir.join("bad.yaml")).unwrap_err();
        assert!(err.to_string().contains("invalid LLM script"), "{err}");
        router.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn relative_scripts_start_at_the_config_dir() {
        assert_eq!(
            script_path(Path::new("/etc/tarsy"), "../s.yaml"),
            Path::new("/etc/tarsy/../s.yaml")
        );
        assert_eq!(
            script_path(Path::new("/etc/tarsy"), "/abs/s.yaml"),
            Path::new("/abs/s.yaml")
        );
    }
}
