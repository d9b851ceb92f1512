//! Tool execution as the strategies see it: the [`ToolExecutor`] trait (the
//! MCP client implements it) and [`InMemoryToolExecutor`] for tests and
//! benchmarks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tarsy_core::{ToolCall, ToolDefinition, ToolResult};

/// An infrastructure failure of a tool call. Errors the tool itself reports
/// are not this: they come back as [`ToolResult`] with `is_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The call did not finish in time.
    #[error("tool call timed out: {0}")]
    Timeout(String),
    /// The server could not be reached or its session broke.
    #[error("tool server unavailable: {0}")]
    Unavailable(String),
    /// No such tool, or not allowed for this execution.
    #[error("unknown tool: {0}")]
    UnknownTool(String),
    /// The arguments could not be turned into tool parameters.
    #[error("invalid tool arguments: {0}")]
    InvalidArguments(String),
    /// Anything else.
    #[error("tool execution failed: {0}")]
    Other(String),
}

impl ToolError {
    /// True for timeouts (they count towards the consecutive-timeout abort).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ToolError::Timeout(_))
    }
}

/// Executes the tools of one agent execution.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    /// Runs one call. `call.name` is canonical `server.tool`, or
    /// `server__tool` as function calling may return it (implementations
    /// accept both); `call.arguments` is JSON for function calling and free
    /// text for ReAct (the executor parses it: JSON → YAML → key-value → raw).
    async fn execute(&self, call: &ToolCall) -> Result<ToolResult, ToolError>;

    /// The tools this execution may use, with canonical names.
    async fn list_tools(&self) -> Result<Vec<ToolDefinition>, ToolError>;

    /// Servers that could not be used, with why (known after listing):
    /// the model is told and the timeline shows them.
    fn unavailable_servers(&self) -> Vec<crate::prompt::FailedServer> {
        Vec::new()
    }

    /// Releases sessions and child processes. Called once, at the end.
    async fn close(&self) -> Result<(), ToolError>;
}

/// `server__tool` → `server.tool` (the function-calling spelling back to the
/// canonical one); canonical names are returned unchanged.
pub(crate) fn normalize_tool_name(name: &str) -> String {
    if name.contains('.') {
        return name.to_string();
    }
    match name.split_once("__") {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => {
            format!("{server}.{tool}")
        }
        _ => name.to_string(),
    }
}

/// What an in-memory tool does when called.
type ToolHandler = Arc<dyn Fn(&ToolCall) -> Result<ToolResult, ToolError> + Send + Sync>;

struct MemoryTool {
    definition: ToolDefinition,
    handler: ToolHandler,
    delay: Duration,
}

/// A [`ToolExecutor`] backed by closures: deterministic tools for tests and
/// the engine benchmark. Records every call.
#[derive(Default)]
pub struct InMemoryToolExecutor {
    tools: BTreeMap<String, MemoryTool>,
    calls: Mutex<Vec<ToolCall>>,
    closed: AtomicBool,
}

impl InMemoryToolExecutor {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool answered by `handler`.
    pub fn with_tool(
        mut self,
        name: &str,
        description: &str,
        handler: impl Fn(&ToolCall) -> Result<ToolResult, ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.tools.insert(
            name.to_string(),
            MemoryTool {
                definition: ToolDefinition {
                    name: name.to_string(),
                    description: description.to_string(),
                    parameters_schema: r#"{"type":"object"}"#.to_string(),
                },
                handler: Arc::new(handler),
                delay: Duration::ZERO,
            },
        );
        self
    }

    /// Adds a tool that always returns `content`.
    pub fn with_static_tool(self, name: &str, description: &str, content: &str) -> Self {
        let content = content.to_string();
        self.with_tool(name, description, move |call| {
            Ok(ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: content.clone(),
                is_error: false,
                recovered: None,
            })
        })
    }

    /// Makes an existing tool wait before answering (timeout tests).
    pub fn with_delay(mut self, name: &str, delay: Duration) -> Self {
        if let Some(t) = self.tools.get_mut(name) {
            t.delay = delay;
        }
        self
    }

    /// Calls received so far (names normalized).
    pub fn calls(&self) -> Vec<ToolCall> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ToolExecutor for InMemoryToolExecutor {
    async fn execute(&self, call: &ToolCall) -> Result<ToolResult, ToolError> {
        let call = ToolCall {
            name: normalize_tool_name(&call.name),
            ..call.clone()
        };
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(call.clone());
        }
        let tool = self
            .tools
            .get(&call.name)
            .ok_or_else(|| ToolError::UnknownTool(call.name.clone()))?;
        if !tool.delay.is_zero() {
            tokio::time::sleep(tool.delay).await;
        }
        (tool.handler)(&call)
    }

    async fn list_tools(&self) -> Result<Vec<ToolDefinition>, ToolError> {
        Ok(self.tools.values().map(|t| t.definition.clone()).collect())
    }

    async fn close(&self) -> Result<(), ToolError> {
        self.closed.store(true, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_calling_names_map_back_to_canonical() {
        assert_eq!(
            normalize_tool_name("kubernetes__pods_list"),
            "kubernetes.pods_list"
        );
        assert_eq!(
            normalize_tool_name("kubernetes.pods_list"),
            "kubernetes.pods_list"
        );
        assert_eq!(normalize_tool_name("plain"), "plain");
        assert_eq!(normalize_tool_name("__x"), "__x");
    }

    #[tokio::test]
    async fn in_memory_executor_records_and_rejects_unknown_tools() {
        let ex = InMemoryToolExecutor::new().with_static_tool("k8s.pods", "list pods", "pod-a");
        let ok = ex
            .execute(&ToolCall {
                id: "1".into(),
                name: "k8s__pods".into(),
                arguments: "{}".into(),
            })
            .await
            .unwrap();
        assert_eq!(ok.content, "pod-a");
        let err = ex
            .execute(&ToolCall {
                id: "2".into(),
                name: "k8s.nodes".into(),
                arguments: "{}".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(err, ToolError::UnknownTool("k8s.nodes".into()));
        assert_eq!(ex.calls().len(), 2);
        assert_eq!(ex.calls()[0].name, "k8s.pods");
    }
}
