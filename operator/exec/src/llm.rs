//! LLM routing, in every process that calls a model (local mode, the
//! runner, the operator's executive summaries): each call goes where its
//! provider says.
//!
//! * `scripted` providers replay their script file in process, through a
//!   [`ScriptedLlmClient`] (one per script file, loaded on first use): no
//!   server, no socket. Every session replays the script from its start: a
//!   session gets its own copy of the queues (keyed by the request's session
//!   id), and its chat continues that copy.
//! * every other provider type goes to the LLM service (`TARSY_LLM_ADDR`).
//!   A real provider never falls back to canned answers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tarsy_config::Config;
use tarsy_core::ProviderType;
use tarsy_engine::llm::{ChunkStream, GenerateInput, LlmError};
use tarsy_engine::{GrpcLlmClient, LlmClient, ScriptedLlmClient};
use tarsy_scripted_llm::ScriptFile;
use tokio::sync::broadcast;

use crate::error::{ExecError, Result};

/// Default address of the LLM service.
pub const DEFAULT_LLM_ADDR: &str = "http://127.0.0.1:50051";

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

/// The process's [`LlmClient`]: routes each call by provider type.
pub struct LlmRouter {
    service: Arc<dyn LlmClient>,
    base_dir: PathBuf,
    /// The client of each script file loaded, by path.
    scripts: Mutex<HashMap<PathBuf, Arc<ScriptedLlmClient>>>,
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
            scripts: Mutex::default(),
            calls,
        }
    }

    /// Parses the script of every scripted provider of `config` now, so a
    /// broken script stops the start instead of failing an investigation.
    pub fn check_scripts(&self, config: &Config) -> Result<()> {
        for provider in config.llm_providers() {
            if provider.spec.provider_type != tarsy_core::ProviderType::Scripted {
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

    /// Drops the scripts loaded and every session's copy of them (a later
    /// scripted call loads its script again). Processes call it once they
    /// are done with the router.
    pub fn stop(&self) {
        self.lock_scripts().clear();
    }

    fn lock_scripts(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<ScriptedLlmClient>>> {
        // A panic elsewhere cannot leave the map inconsistent: keep serving.
        self.scripts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client of a script file, loading the file on first use.
    fn script_client(&self, script: &str) -> std::result::Result<Arc<ScriptedLlmClient>, LlmError> {
        let path = script_path(&self.base_dir, script);
        let mut scripts = self.lock_scripts();
        if let Some(client) = scripts.get(&path) {
            return Ok(Arc::clone(client));
        }
        let file = load_script(&path).map_err(|e| LlmError::Rejected(e.to_string()))?;
        let client = Arc::new(ScriptedLlmClient::new(file));
        scripts.insert(path, Arc::clone(&client));
        Ok(client)
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
            return self.script_client(&script)?.generate(input).await;
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
                price: None,
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
