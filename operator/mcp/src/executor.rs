//! The tool executor: what the engine calls to run a tool. It routes
//! `server.tool` names (or `server__tool`), enforces the execution's servers
//! and tool filter, parses the model's input, calls the server with recovery,
//! extracts text, **masks it** (the single chokepoint: nothing unmasked leaves
//! this module), and records the MCP interaction.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Value, json};
use tarsy_core::{
    ExecutionRecorder, McpInteractionType, McpSelection, McpServerConfig, NewMcpInteraction,
    RecordScope, ToolCall, ToolDefinition, ToolFilter, ToolResult,
};
use tarsy_masking::MaskingService;

use crate::client::{CallOutcome, McpClient};
use crate::error::McpError;
use crate::params::parse_action_input;
use crate::router::{ToolAccess, canonical_name, normalize_tool_name};
use crate::selection::resolve_servers;
use crate::timeouts::McpTimeouts;
use crate::tokens::truncate_for_storage;
use tarsy_telemetry::McpOutcome;

/// Creates executors for agent executions from the configured servers.
pub struct McpClientFactory {
    servers: BTreeMap<String, McpServerConfig>,
    masking: Arc<MaskingService>,
    timeouts: McpTimeouts,
}

/// What one agent execution needs from MCP.
#[derive(Clone, Default)]
pub struct ExecutorRequest {
    /// The agent's servers (ignored when `selection` is set).
    pub servers: Vec<String>,
    /// The agent's tool filter (ignored when `selection` is set).
    pub tool_filter: ToolFilter,
    /// The alert's selection override: replaces servers and filter.
    pub selection: Option<McpSelection>,
    /// Where MCP interactions are recorded, if anywhere.
    pub recorder: Option<Arc<dyn ExecutionRecorder>>,
    /// Scope of the recorded interactions.
    pub scope: RecordScope,
}

impl ExecutorRequest {
    /// Servers and filter of the agent.
    pub fn new(servers: Vec<String>, tool_filter: ToolFilter) -> Self {
        Self {
            servers,
            tool_filter,
            ..Self::default()
        }
    }

    /// Applies an alert's selection override.
    pub fn with_selection(mut self, selection: Option<McpSelection>) -> Self {
        self.selection = selection;
        self
    }

    /// Records interactions through `recorder` under `scope`.
    pub fn with_recorder(
        mut self,
        recorder: Arc<dyn ExecutionRecorder>,
        scope: RecordScope,
    ) -> Self {
        self.recorder = Some(recorder);
        self.scope = scope;
        self
    }
}

impl McpClientFactory {
    /// A factory over the configured servers; every result is masked by
    /// `masking`.
    pub fn new(
        servers: impl IntoIterator<Item = McpServerConfig>,
        masking: Arc<MaskingService>,
    ) -> Self {
        Self {
            servers: servers.into_iter().map(|s| (s.name.clone(), s)).collect(),
            masking,
            timeouts: McpTimeouts::default(),
        }
    }

    /// Overrides the timeouts (tests, benchmarks).
    pub fn with_timeouts(mut self, timeouts: McpTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Configured server names, sorted.
    pub fn server_names(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    /// Builds the executor of one execution and initialises its servers
    /// concurrently. Servers that fail to initialise do not fail the call:
    /// see [`McpToolExecutor::failed_servers`]. A selection naming unknown
    /// servers does (checked again here because the configuration may have
    /// changed since the alert was accepted).
    pub async fn create_executor(
        &self,
        request: ExecutorRequest,
    ) -> Result<McpToolExecutor, McpError> {
        if let Some(selection) = &request.selection {
            selection.validate(self.server_names())?;
        }
        let (servers, filter) = resolve_servers(
            request.selection.as_ref(),
            &request.servers,
            &request.tool_filter,
        );
        let configs = servers
            .iter()
            .map(|name| {
                self.servers
                    .get(name)
                    .cloned()
                    .ok_or_else(|| McpError::UnknownServer(name.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let client = McpClient::new(configs, self.timeouts);
        client.initialize().await;
        Ok(McpToolExecutor {
            client,
            access: ToolAccess::new(servers, filter),
            masking: self.masking.clone(),
            recorder: request.recorder.map(|r| (r, request.scope)),
            list_failures: StdMutex::new(BTreeMap::new()),
        })
    }
}

/// Runs tools for one agent execution. Close it when the execution ends.
pub struct McpToolExecutor {
    client: McpClient,
    access: ToolAccess,
    masking: Arc<MaskingService>,
    recorder: Option<(Arc<dyn ExecutionRecorder>, RecordScope)>,
    list_failures: StdMutex<BTreeMap<String, String>>,
}

impl std::fmt::Debug for McpToolExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolExecutor")
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl McpToolExecutor {
    /// The servers this execution may use.
    pub fn servers(&self) -> Vec<String> {
        self.access.servers().map(str::to_owned).collect()
    }

    /// The underlying client.
    pub fn client(&self) -> &McpClient {
        &self.client
    }

    /// Servers that could not be initialised or listed, with the reason (the
    /// prompt tells the model they are unavailable).
    pub fn failed_servers(&self) -> BTreeMap<String, String> {
        let mut failed = self.client.failed_servers();
        let listed = self.list_failures.lock().unwrap_or_else(|p| p.into_inner());
        for (server, reason) in listed.iter() {
            failed
                .entry(server.clone())
                .or_insert_with(|| reason.clone());
        }
        failed
    }

    /// Runs one tool call.
    ///
    /// Tool failures come back as `Ok` with `is_error: true` so the model can
    /// react: errors the tool reported, JSON-RPC errors of the server (unknown
    /// tool, invalid arguments), and calls this execution may not make
    /// (unknown or disallowed server or tool, malformed name). Infrastructure
    /// failures (server unreachable even after the retry, timeouts) are `Err`;
    /// [`error_result`] turns one into what the model should see.
    pub async fn execute(&self, call: &ToolCall) -> Result<ToolResult, McpError> {
        let started = Instant::now();
        let (server, tool) = match self.access.resolve(&call.name) {
            Ok(route) => route,
            Err(e) => {
                let message = e.to_string();
                let name = normalize_tool_name(&call.name);
                let (server, tool) = name.split_once('.').unwrap_or(("", name.as_str()));
                self.record(
                    McpInteractionType::ToolCall,
                    server,
                    tool,
                    json!({"raw": call.arguments}),
                    Value::Null,
                    Value::Null,
                    started,
                    Some(message.clone()),
                )
                .await;
                return Ok(ToolResult {
                    call_id: call.id.clone(),
                    name,
                    content: format!("Error: {message}"),
                    is_error: true,
                    recovered: None,
                });
            }
        };
        let name = canonical_name(&server, &tool);
        let arguments = parse_action_input(&call.arguments);
        let outcome = self
            .client
            .call_tool(&server, &tool, arguments.clone())
            .await;
        let (raw, is_error, recovered) = match outcome {
            Ok(CallOutcome::Completed { result, recovered }) => {
                let is_error = result.is_error.unwrap_or(false);
                (extract_text(&result), is_error, recovered)
            }
            Ok(CallOutcome::Rejected(data)) => (
                format!("MCP error {}: {}", data.code.0, data.message),
                true,
                None,
            ),
            Err(e) => {
                let outcome = match e {
                    McpError::Timeout { .. } => McpOutcome::Timeout,
                    _ => McpOutcome::Error,
                };
                tarsy_telemetry::global().mcp_call(&server, &tool, started.elapsed(), outcome);
                self.record(
                    McpInteractionType::ToolCall,
                    &server,
                    &tool,
                    Value::Object(arguments),
                    Value::Null,
                    Value::Null,
                    started,
                    Some(e.to_string()),
                )
                .await;
                return Err(e);
            }
        };
        let outcome = if is_error {
            McpOutcome::ToolError
        } else {
            McpOutcome::Ok
        };
        tarsy_telemetry::global().mcp_call(&server, &tool, started.elapsed(), outcome);
        // The chokepoint: from here on only masked text exists.
        let content = self.masking.mask_tool_result(&server, &raw);
        drop(raw);
        self.record(
            McpInteractionType::ToolCall,
            &server,
            &tool,
            Value::Object(arguments),
            json!({"content": truncate_for_storage(&content), "is_error": is_error}),
            Value::Null,
            started,
            None,
        )
        .await;
        Ok(ToolResult {
            call_id: call.id.clone(),
            name,
            content,
            is_error,
            recovered,
        })
    }

    /// The tools the model may call, with canonical `server.tool` names,
    /// after the tool filter. Servers that fail are left out and reported by
    /// [`failed_servers`](Self::failed_servers).
    pub async fn list_tools(&self) -> Result<Vec<ToolDefinition>, McpError> {
        let failed_init = self.client.failed_servers();
        let servers: Vec<String> = self
            .access
            .servers()
            .filter(|s| !failed_init.contains_key(*s))
            .map(str::to_owned)
            .collect();
        let listings = futures::future::join_all(servers.iter().map(|server| async move {
            let started = Instant::now();
            (server, started, self.client.list_tools(server).await)
        }))
        .await;
        let mut definitions = Vec::new();
        for (server, started, listing) in listings {
            match listing {
                Ok(tools) => {
                    let offered: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
                    let unknown: Vec<&str> = self.access.unknown_tools(server, &offered).collect();
                    if !unknown.is_empty() {
                        // Said, not silently narrowed to nothing: the model
                        // is told, and so is whoever reads the timeline.
                        let reason = format!(
                            "the tool selection names tools {server} does not have: {} (it has: {})",
                            unknown.join(", "),
                            offered.join(", ")
                        );
                        tracing::warn!(%server, %reason, "MCP tool selection does not match the server");
                        self.list_failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(server.clone(), reason);
                    }
                    let allowed: Vec<_> = tools
                        .iter()
                        .filter(|t| self.access.tool_allowed(server, &t.name))
                        .collect();
                    // The input schema is kept so that a recorded session
                    // can be replayed with the same tool definitions.
                    let available: Vec<Value> = allowed
                        .iter()
                        .map(|t| {
                            json!({
                                "name": t.name,
                                "description": t.description,
                                "input_schema": t.input_schema.as_ref(),
                            })
                        })
                        .collect();
                    for t in allowed {
                        definitions.push(ToolDefinition {
                            name: canonical_name(server, &t.name),
                            description: t.description.as_deref().unwrap_or_default().to_owned(),
                            parameters_schema: serde_json::to_string(t.input_schema.as_ref())
                                .unwrap_or_else(|_| "{}".to_owned()),
                        });
                    }
                    self.record(
                        McpInteractionType::ToolList,
                        server,
                        "",
                        Value::Null,
                        Value::Null,
                        Value::Array(available),
                        started,
                        None,
                    )
                    .await;
                }
                Err(McpError::Closed) => return Err(McpError::Closed),
                Err(e) => {
                    tracing::warn!(server = %server, error = %e, "listing MCP tools failed");
                    self.record(
                        McpInteractionType::ToolList,
                        server,
                        "",
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        started,
                        Some(e.to_string()),
                    )
                    .await;
                    self.list_failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(server.clone(), e.to_string());
                }
            }
        }
        Ok(definitions)
    }

    /// Closes every session (stdio servers exit).
    pub async fn close(&self) {
        self.client.close().await;
    }

    #[allow(clippy::too_many_arguments)]
    async fn record(
        &self,
        interaction_type: McpInteractionType,
        server: &str,
        tool: &str,
        arguments: Value,
        result: Value,
        available_tools: Value,
        started: Instant,
        error_message: Option<String>,
    ) {
        let Some((recorder, scope)) = &self.recorder else {
            return;
        };
        let interaction = NewMcpInteraction {
            scope: scope.clone(),
            interaction_type,
            server_name: server.to_owned(),
            tool_name: tool.to_owned(),
            tool_arguments: arguments,
            tool_result: result,
            available_tools,
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            error_message,
        };
        // A recording failure must not fail the investigation.
        if let Err(e) = recorder.create_mcp_interaction(interaction).await {
            tracing::warn!(server, tool, error = %e, "recording MCP interaction failed");
        }
    }
}

/// What the model should see when [`McpToolExecutor::execute`] failed.
pub fn error_result(call: &ToolCall, error: &McpError) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        name: normalize_tool_name(&call.name),
        content: format!("Error: {error}"),
        is_error: true,
        recovered: None,
    }
}

/// The text of a tool result: text blocks and embedded text resources, in
/// order, one per line; other content is named, not inlined; structured
/// content stands in when there is no text.
pub fn extract_text(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text, .. } => parts.push(text.clone()),
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => {
                    parts.push(format!(
                        "[binary resource {uri} ({}) omitted]",
                        mime_type.as_deref().unwrap_or("unknown type")
                    ))
                }
                _ => parts.push("[resource omitted]".to_owned()),
            },
            ContentBlock::Image(i) => parts.push(format!("[image ({}) omitted]", i.mime_type)),
            ContentBlock::Audio(a) => parts.push(format!("[audio ({}) omitted]", a.mime_type)),
            ContentBlock::ResourceLink(l) => parts.push(format!("[resource link: {}]", l.uri)),
            _ => parts.push("[content omitted]".to_owned()),
        }
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        return structured.to_string();
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_extraction() {
        let r = CallToolResult::success(vec![
            ContentBlock::text("first"),
            ContentBlock::image("aGk=", "image/png"),
            ContentBlock::text("second"),
            ContentBlock::embedded_text("file:///log", "embedded log"),
        ]);
        assert_eq!(
            extract_text(&r),
            "first\n[image (image/png) omitted]\nsecond\nembedded log"
        );
        let mut r = CallToolResult::success(vec![]);
        r.structured_content = Some(json!({"pods": 3}));
        assert_eq!(extract_text(&r), r#"{"pods":3}"#);
        assert_eq!(extract_text(&CallToolResult::success(vec![])), "");
    }

    #[test]
    fn error_results_name_the_canonical_tool() {
        let call = ToolCall {
            id: "c9".into(),
            name: "k8s__pods_list".into(),
            arguments: "{}".into(),
        };
        let r = error_result(&call, &McpError::Closed);
        assert_eq!(r.name, "k8s.pods_list");
        assert_eq!(r.call_id, "c9");
        assert!(r.is_error);
        assert_eq!(r.content, "Error: the MCP client is closed");
    }
}
