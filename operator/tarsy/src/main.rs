//! The `tarsy` binary: one executable, one subcommand per role.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_json);
    match cli.command {
        Command::Crdgen { out } => crdgen(&out),
    }
}

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
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
