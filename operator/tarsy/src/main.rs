//! The `tarsy` binary: one executable, one subcommand per role.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

mod api;
mod controller;
mod dashboard;
mod investigate;
mod mcp_bridge;
mod process;
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
        #[arg(long, default_value = "crds/manifests")]
        out: PathBuf,
    },
    /// Serve a stdio MCP server over streamable HTTP at http://ADDR:PORT/mcp
    /// (used for stdio servers inside investigation pods).
    McpBridge(mcp_bridge::BridgeArgs),
    /// Local mode: the REST/WebSocket API and the orchestration in one
    /// process (SQLite, no cluster).
    Serve(serve::ServeArgs),
    /// Investigate one alert locally, with live progress, then print the
    /// final analysis and executive summary.
    Investigate(investigate::InvestigateArgs),
    /// Serve the Alertmanager bridge and the validating admission webhook.
    Webhooks(webhooks::WebhooksArgs),
    /// Run the Kubernetes operator: reconcile Alerts, Chains and
    /// AgentExecutions, run investigation pods.
    Controller(controller::ControllerArgs),
    /// Run one AgentExecution (inside its investigation pod).
    Runner(runner::RunnerArgs),
    /// Serve the REST/WebSocket API in cluster mode: alerts, cancellation
    /// and chat become Kubernetes resources of one namespace.
    Api(api::ApiArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
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
        tarsy_crds::validate::precompile(&["Alert", "Chain", "Agent"]);
    }
    // The investigate report owns the terminal: only warnings are logged.
    let default_level = match cli.command {
        Command::Investigate(_) => "warn",
        _ => "info",
    };
    init_logging(cli.log_json, default_level);
    match cli.command {
        Command::Crdgen { out } => crdgen(&out),
        Command::McpBridge(args) => {
            let code = mcp_bridge::run(args).await?;
            std::process::exit(code);
        }
        Command::Serve(args) => serve::run(args).await,
        Command::Webhooks(args) => webhooks::run(args).await,
        Command::Controller(args) => controller::run(args).await,
        Command::Api(args) => api::run(args).await,
        Command::Runner(args) => {
            let code = runner::run(args, started).await?;
            std::process::exit(code);
        }
        Command::Investigate(args) => {
            if !investigate::run(args, started).await? {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

fn init_logging(json: bool, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
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
