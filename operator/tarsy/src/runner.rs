//! `tarsy runner`: runs one AgentExecution inside its investigation pod
//! (see `tarsy_runner`). Exit code 0 whenever a terminal phase was recorded
//! (Completed, Failed, TimedOut or Cancelled alike); 1 when none could be.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Arguments of `tarsy runner` (the pod builder passes them as environment).
#[derive(Debug, clap::Args)]
pub struct RunnerArgs {
    /// The AgentExecution to run, as NAMESPACE/NAME.
    #[arg(long, env = "TARSY_EXECUTION")]
    execution: String,
    /// Postgres URL.
    #[arg(long, env = "TARSY_DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// Address of the LLM service.
    #[arg(long, env = "TARSY_LLM_SERVICE_ADDR", default_value = tarsy_exec::DEFAULT_LLM_ADDR)]
    llm_addr: String,
    /// `name=url,...`: the MCP endpoint of each server on localhost.
    #[arg(long, env = "TARSY_MCP_ENDPOINTS", default_value = "")]
    mcp_endpoints: String,
    /// `name=port,...`: the bridge port of each stdio server.
    #[arg(long, env = "TARSY_MCP_BRIDGE_PORTS", default_value = "")]
    bridge_ports: String,
    /// Directory relative scripted-provider scripts are read from.
    #[arg(long, env = "TARSY_SCRIPT_DIR", default_value = ".")]
    script_dir: PathBuf,
    /// How long to keep retrying Postgres at start, in seconds.
    #[arg(long, env = "TARSY_DATABASE_RETRY_SECONDS", default_value_t = 30)]
    database_retry_seconds: u64,
    /// How long one write waits out an unavailable Postgres (a failover)
    /// before the execution is interrupted and resumed once it is back.
    #[arg(long, env = "TARSY_STORE_PATIENCE_SECONDS", default_value_t = 120)]
    store_patience_seconds: u64,
}

/// Runs the execution; returns the process exit code. `started` is when
/// the process started (the origin of the start-up figure it logs).
pub async fn run(args: RunnerArgs, started: Instant) -> anyhow::Result<i32> {
    let (namespace, name) = tarsy_runner::status_view::parse_execution_ref(&args.execution)?;
    let mut options =
        tarsy_runner::RunnerOptions::new(namespace, name, args.database_url, args.llm_addr);
    options.mcp_endpoints =
        tarsy_runner::status_view::parse_pairs("TARSY_MCP_ENDPOINTS", &args.mcp_endpoints)?;
    options.bridge_ports = tarsy_runner::status_view::parse_ports(&args.bridge_ports)?;
    options.script_dir = args.script_dir;
    options.database_retry = Duration::from_secs(args.database_retry_seconds);
    options.store_patience = Duration::from_secs(args.store_patience_seconds);
    options.started = started;

    let cancel = CancellationToken::new();
    {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            crate::process::stop_requested().await;
            tracing::info!("stop requested: cancelling the execution");
            cancel.cancel();
        });
    }
    let client = kube::Client::try_default().await?;
    match tarsy_runner::run(client, options, cancel).await {
        Ok(report) => {
            tracing::info!(phase = ?report.phase, "runner done");
            Ok(0)
        }
        Err(tarsy_runner::RunnerError::Interrupted) => {
            tracing::warn!("stopped without a stop request: left for a replacement pod to resume");
            Ok(1)
        }
        Err(e) => {
            tracing::error!(error = %e, "runner could not record a terminal phase");
            eprintln!("tarsy runner: {e}");
            Ok(1)
        }
    }
}
