//! `tarsy eval DIR`: runs the evaluation cases of DIR (alert + recorded
//! fixture + expected findings) with a configured LLM provider, and prints
//! per-case results and a summary table (or one JSON object). Exits non-zero
//! unless every case passed. The runner is `tarsy-eval`; the cases' format
//! is in `eval/README.md`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tarsy_eval::EvalOptions;
use tarsy_exec::DEFAULT_LLM_ADDR;

/// Arguments of `tarsy eval`.
#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// A suite (a directory with `cases/` and `config/`), a directory of
    /// cases, or one case (a directory with `case.yaml`).
    pub dir: PathBuf,
    /// Configuration directory (chains, agents, LLM providers); default:
    /// `DIR/config`. Each case's MCP servers are added from its fixture.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Run every LLM call with this LLMProvider of the configuration (for
    /// example a real model instead of the scripted answers).
    #[arg(long)]
    pub provider: Option<String>,
    /// Only the cases whose name contains this (repeatable).
    #[arg(long = "case")]
    pub cases: Vec<String>,
    /// Skip the LLM judge of the cases that have one.
    #[arg(long)]
    pub no_judge: bool,
    /// Which judges run: `rubric` (the cases' own LLM judge, the default)
    /// or `scoring` (also TARSy's scoring judge, as a scoring chain would
    /// run it: its score, failure tags and missing tools are reported next
    /// to the rubric's results, without passing or failing a case).
    #[arg(long, value_enum, default_value = "rubric")]
    pub judge: Judge,
    /// Longest one investigation may take (e.g. 90s, 10m).
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// The LLM service (gRPC) for every provider but `scripted` ones.
    #[arg(long, env = "TARSY_LLM_ADDR", default_value = DEFAULT_LLM_ADDR)]
    pub llm_addr: String,
    /// Print one JSON object (every case with its checks, and the summary).
    #[arg(long)]
    pub json: bool,
    /// No line per case: the summary table only.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The judges `tarsy eval` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Judge {
    /// The cases' rubric (with its LLM judge when a case has one).
    Rubric,
    /// The rubric, and TARSy's scoring judge on each completed case.
    Scoring,
}

/// Runs the cases; true when every one passed.
pub async fn run(args: EvalArgs) -> anyhow::Result<bool> {
    let config_dir = match args.config {
        Some(dir) => dir,
        None => {
            let default = args.dir.join("config");
            if !default.is_dir() {
                anyhow::bail!(
                    "{} has no config/ directory: name the configuration with --config",
                    args.dir.display()
                );
            }
            default
        }
    };
    let cases = tarsy_eval::load_cases(&args.dir, &args.cases)?;
    let config = tarsy_eval::load_config(&config_dir, &cases)?;
    let options = EvalOptions {
        config,
        config_dir: config_dir.clone(),
        provider: args.provider.clone(),
        llm_addr: args.llm_addr,
        judge: !args.no_judge,
        scoring: args.judge == Judge::Scoring,
        timeout: args.timeout,
    };
    let progress = !(args.json || args.quiet);
    if progress {
        println!(
            "{} case(s) from {}, provider {}",
            cases.len(),
            args.dir.display(),
            args.provider.as_deref().unwrap_or("as configured")
        );
    }
    let report = tarsy_eval::run_cases(&cases, &options, |result| {
        if progress {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "{}", tarsy_eval::case_lines(result));
            let _ = out.flush();
        }
    })
    .await;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report).context("serializing the report")?
        )?;
    } else {
        if progress {
            writeln!(out)?;
        }
        write!(out, "{}", report.table())?;
    }
    Ok(report.passed())
}
