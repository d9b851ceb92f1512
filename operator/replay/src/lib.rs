//! Recorded MCP tool fixtures: investigations that can be replayed offline.
//!
//! - [`fixture`]: the versioned, human-editable YAML format (one file per
//!   MCP server: its tools and their recorded results) and its loader;
//! - [`matching`]: which recorded result answers a call (by tool and
//!   arguments, with a per-tool default);
//! - [`server`]: the replay MCP server behind `tarsy mcp-replay` (stdio and
//!   streamable HTTP, built on rmcp);
//! - [`export`]: a session's recorded (already masked) MCP interactions as a
//!   fixture, behind `tarsy export-fixture`.
//!
//! The format is documented for people who write fixtures by hand in this
//! crate's `README.md`.

pub mod export;
pub mod fixture;
pub mod matching;
pub mod server;

pub use export::{Export, ExportError, export_session};
pub use fixture::{
    FORMAT_VERSION, FixtureError, FixtureSet, RecordedCall, RecordedResult, ServerFixture,
    ToolFixture,
};
pub use server::{ReplayError, ReplayServer, RunningHttp, serve_stdio, spawn_http};
