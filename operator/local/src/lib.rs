//! TARSy local mode: alerts in, chains run, analyses out — in one process,
//! with no cluster.
//!
//! [`LocalApp::start`] opens the store (SQLite file or in-memory by default,
//! Postgres when given a `postgres://` URL), takes back the sessions a
//! previous run left in progress, admits pending sessions oldest first
//! within `maxConcurrentSessions`, drives each one with the chain state
//! machine ([`tarsy_chain::decide`]) and, when asked, serves the REST and
//! WebSocket API. Agent executions are in-process tasks launched through the
//! mode-neutral execution layer ([`tarsy_exec::Launcher`]); each gets its own
//! MCP sessions (stdio servers are child processes), closed when it ends.
//!
//! | module | what |
//! |---|---|
//! | [`app`] | [`LocalApp`], [`LocalOptions`] |
//! | [`control`] | [`LocalControl`]: submit (masked, fail-open), cancel, chat — the API's [`tarsy_api::SessionControl`] |
//! | `session_loop` | one session's loop: decide, apply, wait |
//! | `view` | the machine's view read back from the store (restart recovery) |
//! | `admission` | admission and take-over at start |
//! | `chat` | follow-up chat answers |
//! | `scoring` | the judge of completed sessions, and re-scores on request |
//! | [`stdio`] | local rules of stdio MCP servers: run in the configuration directory, `tarsy` = this executable, missing commands stop the start |
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use tarsy_api::NewAlert;
//! let config = tarsy_config::load_dir("examples/config".as_ref())?;
//! let app = tarsy_local::LocalApp::start(
//!     tarsy_local::LocalOptions::new(config, "examples/config"),
//! ).await?;
//! let accepted = app.control().submit_alert(NewAlert {
//!     alert_type: "PodCrashLooping".into(),
//!     data: "pod web-1 restarts".into(),
//!     chain: None,
//!     runbook_url: None,
//!     mcp_selection: None,
//!     author: "me".into(),
//! }).await?;
//! let session = app.wait_for_terminal(&accepted.session_id, Duration::from_secs(600)).await?;
//! println!("{:?}", session.final_analysis);
//! app.shutdown().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod admission;
pub mod app;
mod chat;
pub mod control;
pub mod error;
mod memory;
mod runtime;
mod scoring;
mod session_loop;
pub mod stdio;
mod view;

pub use app::{LocalApp, LocalOptions, default_pod_id};
pub use control::LocalControl;
pub use error::{Result, SessionError};
pub use runtime::DriverSettings;
