//! The MCP executor as the engine's [`ToolExecutor`].

use async_trait::async_trait;
use tarsy_core::{ToolCall, ToolDefinition, ToolResult};
use tarsy_engine::prompt::FailedServer;
use tarsy_engine::{ToolError, ToolExecutor};
use tarsy_mcp::{McpError, McpToolExecutor};

/// Adapts one execution's [`McpToolExecutor`] to the engine's trait.
pub struct McpTools {
    inner: McpToolExecutor,
}

impl McpTools {
    /// Wraps an executor.
    pub fn new(inner: McpToolExecutor) -> Self {
        Self { inner }
    }

    /// The tool names each usable server offers (unfiltered: what a
    /// selection may name), from the listing the execution uses anyway.
    pub async fn server_tools(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut out = std::collections::BTreeMap::new();
        let failed = self.inner.failed_servers();
        for server in self.inner.servers() {
            if failed.contains_key(&server) {
                continue;
            }
            if let Ok(tools) = self.inner.client().list_tools(&server).await {
                out.insert(server, tools.iter().map(|t| t.name.to_string()).collect());
            }
        }
        out
    }

    /// Servers that could not be started or listed, for the prompt.
    pub fn failed_servers(&self) -> Vec<FailedServer> {
        self.inner
            .failed_servers()
            .into_iter()
            .map(|(server, error)| FailedServer { server, error })
            .collect()
    }
}

/// Maps an MCP infrastructure failure to the engine's error kinds
/// (timeouts count towards the consecutive-timeout abort).
fn tool_error(e: McpError) -> ToolError {
    match e {
        McpError::Timeout { .. } => ToolError::Timeout(e.to_string()),
        McpError::UnknownServer(_) | McpError::Selection(_) => {
            ToolError::UnknownTool(e.to_string())
        }
        McpError::Init { .. }
        | McpError::Unavailable { .. }
        | McpError::Operation { .. }
        | McpError::Closed => ToolError::Unavailable(e.to_string()),
        McpError::Config { .. } => ToolError::Other(e.to_string()),
    }
}

#[async_trait]
impl ToolExecutor for McpTools {
    async fn execute(&self, call: &ToolCall) -> Result<ToolResult, ToolError> {
        self.inner.execute(call).await.map_err(tool_error)
    }

    async fn list_tools(&self) -> Result<Vec<ToolDefinition>, ToolError> {
        self.inner.list_tools().await.map_err(tool_error)
    }

    fn unavailable_servers(&self) -> Vec<FailedServer> {
        self.failed_servers()
    }

    async fn close(&self) -> Result<(), ToolError> {
        self.inner.close().await;
        Ok(())
    }
}
