//! TARSy's MCP client: transports (stdio, streamable HTTP, legacy HTTP+SSE),
//! tool routing, the ActionInput parse cascade, error recovery, the health
//! monitor, per-alert selection overrides and the stdio ⇄ HTTP bridge.
//!
//! The main entry point is [`McpClientFactory::create_executor`], which builds
//! an [`McpToolExecutor`] for one agent execution: its own MCP sessions, its own
//! tool cache, closed with the execution. Every tool result goes through the
//! masking service before anyone (model, storage, logs) sees it.

pub mod bridge;
pub mod client;
pub mod error;
pub mod executor;
pub mod health;
pub mod params;
pub mod recovery;
pub mod router;
pub mod selection;
pub mod timeouts;
pub mod tokens;
pub mod transport;
pub mod warnings;

pub use client::McpClient;
pub use error::McpError;
pub use executor::{ExecutorRequest, McpClientFactory, McpToolExecutor};
pub use health::{HealthMonitor, ServerHealth, validate_servers};
pub use selection::resolve_servers;
pub use timeouts::McpTimeouts;
pub use warnings::{SystemWarning, SystemWarnings};
