//! The `tarsy` binary: one executable, one subcommand per role.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

mod api;
mod controller;
mod dashboard;
mod eval;
mod investigate;
mod mcp_bridge;
mod memory;
mod notify;
mod process;
mod replay;
mod retention;
mod runner;
mod serve;
mod webhooks;

/// TARSy investigates alerts with LLM agents and MCP tools.
#[derive(Debug, Parser)]
#[command(name = "tarsy", version, about)]
struct Cli {
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true, env = "TARSY_LOG_JSON")]
    log_json: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write the CustomResourceDefinition manifests (one YAML file per kind).
    Crdgen {
        /// Directory to write into.
        #[arg(long, default_value = "kubernetes/crds/manifests")]
        out: PathBuf,
    },
    /// Serve a stdio MCP server over streamable HTTP at http://ADDR:PORT/mcp
    /// (used for stdio servers inside investigation pods).
    McpBridge(mcp_bridge::BridgeArgs),
    /// Local mode: the REST/WebSocket API and the orchestration in one
    /// process (SQLite, no cluster).
    Serve(Box<serve::ServeArgs>),
    /// Investigate one alert locally, with live progress, then print the
    /// final analysis and executive summary.
    Investigate(investigate::InvestigateArgs),
    /// Serve the Alertmanager bridge and the validating admission webhook.
    Webhooks(webhooks::WebhooksArgs),
    /// Run the Kubernetes operator: reconcile Alerts, Chains and
    /// AgentExecutions, run investigation pods.
    Controller(Box<controller::ControllerArgs>),
    /// Run one AgentExecution (inside its investigation pod).
    Runner(runner::RunnerArgs),
    /// Serve the REST/WebSocket API in cluster mode: alerts, cancellation
    /// and chat become Kubernetes resources of one namespace.
    Api(api::ApiArgs),
    /// Serve recorded tool fixtures as an MCP server (stdio, or streamable
    /// HTTP with --port): the tools and the results a session recorded.
    McpReplay(replay::McpReplayArgs),
    /// Write a session's MCP interactions (masked, as recorded) as a
    /// fixture directory that `tarsy mcp-replay` serves.
    ExportFixture(replay::ExportFixtureArgs),
    /// Run evaluation cases (alert, recorded fixture, expected findings)
    /// with a configured LLM provider; print per-case results and a
    /// summary. Exits non-zero unless every case passed.
    Eval(eval::EvalArgs),
    /// Export or import a scope's investigation memories (YAML).
    Memory(memory::MemoryArgs),
}

#[tokio::main]
async fn main() {
    let started = std::time::Instant::now();
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Investigate(_) | Command::Serve(_) | Command::Runner(_)
    ) {
        // On the second core while the configuration loads: compiling them
        // is the largest part of start-up. Then the schemas the
        // configuration is validated against, in the reverse of the order
        // the loader usually meets them (it builds the others meanwhile).
        tarsy_masking::precompile_builtins();
        tarsy_config::schema::precompile(&["Alert", "Chain", "Agent"]);
    }
    // The investigate report owns the terminal, and a replay server's
    // stderr is its parent's: only warnings are logged.
    let default_level = match cli.command {
        Command::Investigate(_)
        | Command::McpReplay(_)
        | Command::ExportFixture(_)
        | Command::Eval(_)
        | Command::Memory(_) => "warn",
        _ => "info",
    };
    init_logging(cli.log_json, default_level);
    let outcome = run(cli.command, started).await;
    // `exit` skips destructors: flush what the report wrote.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    match outcome {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // One line (causes joined by `: `) rather than a debug dump.
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}

/// Runs a subcommand; returns the process exit code.
async fn run(command: Command, started: std::time::Instant) -> anyhow::Result<i32> {
    match command {
        Command::Crdgen { out } => crdgen(&out).map(|()| 0),
        Command::McpBridge(args) => mcp_bridge::run(args).await,
        Command::Serve(args) => serve::run(*args).await.map(|()| 0),
        Command::Webhooks(args) => webhooks::run(args).await.map(|()| 0),
        Command::Controller(args) => controller::run(*args).await.map(|()| 0),
        Command::Api(args) => api::run(args).await.map(|()| 0),
        Command::Runner(args) => runner::run(args, started).await,
        Command::McpReplay(args) => replay::mcp_replay(args).await.map(|()| 0),
        Command::ExportFixture(args) => replay::export_fixture(args).await.map(|()| 0),
        Command::Eval(args) => Ok(if eval::run(args).await? { 0 } else { 1 }),
        Command::Memory(args) => memory::run(args).await.map(|()| 0),
        Command::Investigate(args) => {
            let completed = investigate::run(args, started).await?;
            Ok(if completed { 0 } else { 1 })
        }
    }
}

/// Logs go to stderr, never to stdout (progress, reports, URLs and MCP on
/// stdio live there), and carry colour codes only when stderr is a terminal
/// and `NO_COLOR` is unset.
/// Dependencies that log request and response payloads (tool results, model
/// output) at debug and trace: never below info, whatever `RUST_LOG` asks,
/// so that no log level prints unmasked data.
const PAYLOAD_LOGGERS: [&str; 7] = [
    "rmcp",
    "reqwest",
    "hyper",
    "hyper_util",
    "h2",
    "tonic",
    "tower",
];

/// `RUST_LOG`, else `default_level`.
fn log_filter(rust_log: Option<&str>, default_level: &str) -> tracing_subscriber::EnvFilter {
    rust_log
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default_level))
}

/// Keeps [`PAYLOAD_LOGGERS`] at info or less verbose, on top of
/// [`log_filter`]. A second filter rather than `target=info` directives:
/// those would also *raise* them to info under a quieter level (`warn` for
/// `tarsy investigate`, whose stderr must stay empty).
fn payload_cap() -> tracing_subscriber::filter::FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool> {
    tracing_subscriber::filter::filter_fn(|m| {
        *m.level() <= tracing::Level::INFO || !is_payload_logger(m.target())
    })
}

fn is_payload_logger(target: &str) -> bool {
    PAYLOAD_LOGGERS.iter().any(|p| {
        target
            .strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

fn init_logging(json: bool, default_level: &str) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref(), default_level);
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    if json {
        builder.json().finish().with(payload_cap()).init();
    } else {
        builder.finish().with(payload_cap()).init();
    }
}

fn crdgen(out: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for (file, yaml) in tarsy_crds::render_manifests() {
        let path = out.join(&file);
        std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod log_tests {
    use super::{log_filter, payload_cap};
    use tracing::Level;
    use tracing_subscriber::layer::SubscriberExt as _;

    /// What is enabled under `RUST_LOG=rust_log` (unset: `None`) and
    /// `default_level`: rmcp at trace, rmcp at info, ours at trace.
    fn enabled(rust_log: Option<&str>, default_level: &str) -> (bool, bool, bool) {
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(log_filter(rust_log, default_level))
            .with_writer(std::io::sink)
            .finish()
            .with(payload_cap());
        tracing::subscriber::with_default(subscriber, || {
            (
                tracing::enabled!(target: "rmcp::transport::streamable_http_client", Level::TRACE),
                tracing::enabled!(target: "rmcp::service", Level::INFO),
                tracing::enabled!(target: "tarsy_engine::run", Level::TRACE),
            )
        })
    }

    #[test]
    fn payload_loggers_stay_at_info_whatever_rust_log_says() {
        for rust_log in ["trace", "rmcp=trace", "trace,rmcp=trace"] {
            let (rmcp_trace, rmcp_info, _) = enabled(Some(rust_log), "info");
            assert!(!rmcp_trace, "rmcp traces with RUST_LOG={rust_log}");
            assert!(rmcp_info, "rmcp info is kept with RUST_LOG={rust_log}");
        }
        assert!(
            enabled(Some("trace"), "info").2,
            "our own trace logs still work"
        );
    }

    #[test]
    fn a_quieter_level_keeps_payload_loggers_quiet_too() {
        // `tarsy investigate`: warnings only, rmcp's info lines included.
        assert_eq!(enabled(None, "warn"), (false, false, false));
        assert_eq!(enabled(Some("warn"), "info"), (false, false, false));
    }
}
