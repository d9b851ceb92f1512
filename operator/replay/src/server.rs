//! The replay MCP server: serves one [`ServerFixture`]'s tools and answers
//! `tools/call` from its recorded results, over stdio or streamable HTTP.
//!
//! Sequences of recorded calls (see [`crate::matching`]) advance per MCP
//! session, so every agent execution — one session each — replays the
//! recording from its start, whatever other sessions did.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fixture::{JsonObject, ServerFixture};
use crate::matching::{Choice, ToolIndex};

/// Path of the streamable HTTP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// How many recorded argument sets an unmatched-call error lists.
const LISTED_CALLS: usize = 5;

/// Errors of serving a fixture.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The MCP session over stdio failed.
    #[error("the MCP session on stdio failed: {0}")]
    Stdio(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A fixture ready to serve: tool definitions built once, calls indexed.
#[derive(Debug)]
struct Prepared {
    fixture: ServerFixture,
    tools: Vec<Tool>,
    indexes: Vec<ToolIndex>,
}

/// The MCP handler of one session.
#[derive(Debug, Clone)]
pub struct ReplayServer {
    prepared: Arc<Prepared>,
    /// Calls served per (tool, sequence) in this session.
    served: Arc<Mutex<HashMap<(usize, usize), usize>>>,
}

impl ReplayServer {
    /// A server for `fixture` (validated by its loader).
    pub fn new(fixture: ServerFixture) -> Self {
        let tools = fixture
            .tools
            .iter()
            .map(|t| {
                let description = (!t.description.is_empty()).then(|| t.description.clone().into());
                Tool::new_with_raw(
                    t.name.clone(),
                    description,
                    Arc::new(t.input_schema.clone()),
                )
            })
            .collect();
        let indexes = fixture.tools.iter().map(ToolIndex::new).collect();
        Self {
            prepared: Arc::new(Prepared {
                fixture,
                tools,
                indexes,
            }),
            served: Arc::default(),
        }
    }

    /// A handler for a new session: same fixture, its own sequence counters.
    pub fn new_session(&self) -> Self {
        Self {
            prepared: self.prepared.clone(),
            served: Arc::default(),
        }
    }

    /// The fixture served.
    pub fn fixture(&self) -> &ServerFixture {
        &self.prepared.fixture
    }

    /// Answers a call of `tool` with `arguments`: the recorded result, the
    /// tool's default, or an error result explaining what is recorded. A
    /// tool the fixture does not have is a JSON-RPC error, as a live server
    /// would answer.
    pub fn answer(&self, tool: &str, arguments: &JsonObject) -> Result<CallToolResult, ErrorData> {
        let p = &self.prepared;
        let Some(position) = p.fixture.tools.iter().position(|t| t.name == tool) else {
            let names: Vec<&str> = p.fixture.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {tool:?}; the recorded MCP server {:?} has: {}",
                    p.fixture.server,
                    names.join(", ")
                ),
                None,
            ));
        };
        let recorded = &p.fixture.tools[position];
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        let choice = p.indexes[position].choose(recorded, arguments, |group| {
            served.get(&(position, group)).copied().unwrap_or(0)
        });
        let (text, is_error) = match choice {
            Choice::Call { group, index } => {
                *served.entry((position, group)).or_default() += 1;
                let call = &recorded.calls[index];
                (call.text.clone(), call.is_error)
            }
            Choice::Default => match &recorded.default {
                Some(d) => (d.text.clone(), d.is_error),
                None => (unmatched(&p.fixture, tool, arguments), true),
            },
            Choice::Unmatched => {
                let message = unmatched(&p.fixture, tool, arguments);
                tracing::warn!(server = %p.fixture.server, tool, "{message}");
                (message, true)
            }
        };
        let content = vec![ContentBlock::text(text)];
        Ok(if is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        })
    }
}

/// The error text of a call nothing answers: what was asked, what the
/// fixture records, and how to fix it.
pub fn unmatched(fixture: &ServerFixture, tool: &str, arguments: &JsonObject) -> String {
    let asked = Value::Object(arguments.clone()).to_string();
    let recorded: Vec<String> = fixture
        .tool(tool)
        .map(|t| {
            let mut seen: Vec<String> = Vec::new();
            for c in &t.calls {
                let shown = Value::Object(c.arguments.clone()).to_string();
                if !seen.contains(&shown) {
                    seen.push(shown);
                }
            }
            seen
        })
        .unwrap_or_default();
    let what = if recorded.is_empty() {
        format!("records no call of {tool}")
    } else {
        let more = recorded.len().saturating_sub(LISTED_CALLS);
        let mut list = recorded
            .into_iter()
            .take(LISTED_CALLS)
            .collect::<Vec<_>>()
            .join(", ");
        if more > 0 {
            list.push_str(&format!(" and {more} more"));
        }
        format!("records {tool} only for the arguments {list}")
    };
    format!(
        "no recorded result for {tool} with arguments {asked}: the fixture of MCP server {:?} {what} and has no default for it",
        fixture.server
    )
}

impl ServerHandler for ReplayServer {
    fn get_info(&self) -> ServerConfig {
        let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "tarsy-mcp-replay",
                env!("CARGO_PKG_VERSION"),
            ));
        match &self.prepared.fixture.instructions {
            Some(text) => info.with_instructions(text.clone()),
            None => info,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.prepared.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        self.answer(&request.name, &arguments).map(Into::into)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.prepared.tools.iter().find(|t| t.name == name).cloned()
    }
}

/// Serves `fixture` on stdin/stdout until the client closes the session.
pub async fn serve_stdio(fixture: ServerFixture) -> Result<(), ReplayError> {
    let running = ReplayServer::new(fixture)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ReplayError::Stdio(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ReplayError::Stdio(e.to_string()))?;
    Ok(())
}

/// A replay server listening on streamable HTTP.
#[derive(Debug)]
pub struct RunningHttp {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl RunningHttp {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// Stops serving and waits for the server to end.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }

    /// Waits until the server ends (after [`stop`](Self::stop) from a clone
    /// of the token, or a failure).
    pub async fn wait(self) {
        let _ = self.task.await;
    }

    /// The token that stops the server.
    pub fn stopper(&self) -> CancellationToken {
        self.stop.clone()
    }
}

/// Serves `fixture` at `http://addr/mcp` in the background; each MCP
/// session replays the recording from its start.
pub async fn spawn_http(
    fixture: ServerFixture,
    addr: SocketAddr,
) -> Result<RunningHttp, ReplayError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ReplayError::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ReplayError::Bind { addr, source })?;
    let stop = CancellationToken::new();
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    if !addr.ip().is_loopback() {
        // Host checks guard desktop servers against DNS rebinding from a
        // browser; a server reached by its IP from elsewhere must accept it.
        config = config.disable_allowed_hosts();
    }
    let template = ReplayServer::new(fixture);
    let service: StreamableHttpService<ReplayServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(template.new_session()), Arc::default(), config);
    let router = axum::Router::new().nest_service(MCP_PATH, service);
    let task = {
        let stop = stop.clone();
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
            {
                tracing::error!(error = %e, "replay HTTP server stopped");
            }
        })
    };
    Ok(RunningHttp { addr, stop, task })
}
