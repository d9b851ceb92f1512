//! Shared helpers of the executor tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tarsy_core::config::{HttpTransport, TlsOptions};
use tarsy_core::{
    ExecutionRecorder, McpServerConfig, McpTransport, NewLlmInteraction, NewMcpInteraction,
    NewMessage, NewTimelineEvent, RecordError, StoredMessage, SummarizationConfig, TimelineEvent,
    TimelineEventStatus,
};
use tarsy_masking::{AlertMaskingConfig, MaskingConfig, MaskingService};
use tarsy_mcp::McpTimeouts;

/// The test server binary.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tarsy-test-mcp-server")
}

/// Timeouts short enough for tests.
pub fn fast_timeouts() -> McpTimeouts {
    McpTimeouts {
        init: Duration::from_secs(10),
        call: Duration::from_secs(5),
        reinit: Duration::from_secs(5),
        health_ping: Duration::from_secs(1),
        health_interval: Duration::from_millis(200),
        ..McpTimeouts::default()
    }
}

pub fn stdio(name: &str, env: &[(&str, &str)]) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        transport: McpTransport::Stdio {
            command: bin().to_owned(),
            args: vec![],
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cwd: None,
        },
        instructions: String::new(),
        summarization: SummarizationConfig::default(),
    }
}

pub fn http_transport(url: &str) -> HttpTransport {
    HttpTransport {
        url: url.to_owned(),
        bearer_token: None,
        headers: BTreeMap::new(),
        tls: TlsOptions::default(),
        timeout: None,
    }
}

pub fn http(name: &str, url: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        transport: McpTransport::Http(http_transport(url)),
        instructions: String::new(),
        summarization: SummarizationConfig::default(),
    }
}

/// Masking with the `kubernetes` group for each named server.
pub fn masking(servers: &[&str]) -> Arc<MaskingService> {
    let cfg = MaskingConfig {
        pattern_groups: vec!["kubernetes".into()],
        ..MaskingConfig::default()
    };
    Arc::new(
        MaskingService::new(
            servers.iter().map(|s| ((*s).to_owned(), cfg.clone())),
            AlertMaskingConfig::default(),
        )
        .unwrap(),
    )
}

/// Keeps MCP interactions in memory.
#[derive(Default)]
pub struct MemoryRecorder {
    pub mcp: Mutex<Vec<NewMcpInteraction>>,
}

impl MemoryRecorder {
    pub fn interactions(&self) -> Vec<NewMcpInteraction> {
        self.mcp.lock().unwrap().clone()
    }
}

fn unused() -> RecordError {
    RecordError::Storage("not used by the MCP client".into())
}

#[async_trait]
impl ExecutionRecorder for MemoryRecorder {
    async fn create_timeline_event(&self, _: NewTimelineEvent) -> Result<String, RecordError> {
        Err(unused())
    }
    async fn append_timeline_content(&self, _: &str, _: &str) -> Result<(), RecordError> {
        Err(unused())
    }
    async fn complete_timeline_event(
        &self,
        _: &str,
        _: &str,
        _: TimelineEventStatus,
        _: Option<serde_json::Value>,
    ) -> Result<(), RecordError> {
        Err(unused())
    }
    async fn create_message(&self, _: NewMessage) -> Result<String, RecordError> {
        Err(unused())
    }
    async fn create_llm_interaction(&self, _: NewLlmInteraction) -> Result<String, RecordError> {
        Err(unused())
    }
    async fn create_mcp_interaction(&self, i: NewMcpInteraction) -> Result<String, RecordError> {
        let mut list = self.mcp.lock().unwrap();
        list.push(i);
        Ok(list.len().to_string())
    }
    async fn execution_timeline(&self, _: &str) -> Result<Vec<TimelineEvent>, RecordError> {
        Err(unused())
    }
    async fn session_timeline(&self, _: &str) -> Result<Vec<TimelineEvent>, RecordError> {
        Err(unused())
    }
    async fn execution_messages(&self, _: &str) -> Result<Vec<StoredMessage>, RecordError> {
        Err(unused())
    }
}

/// A tool call as a model would make it.
pub fn call(name: &str, arguments: &str) -> tarsy_core::ToolCall {
    tarsy_core::ToolCall {
        id: format!("call-{name}"),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

/// A unique temp path (not created).
pub fn temp_path(tag: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "tarsy-mcp-test-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}
