//! `tarsy mcp-bridge`: serve a stdio-only MCP server over streamable HTTP.
//!
//! Investigation pods run stdio MCP servers behind this bridge so that the
//! runner reaches every server the same way, on localhost. As in local mode,
//! the command `tarsy` is this executable (e.g. `tarsy mcp-replay`).

use std::net::IpAddr;
use std::os::unix::process::ExitStatusExt;

use anyhow::Context;

/// Arguments of `tarsy mcp-bridge`.
#[derive(Debug, clap::Args)]
pub struct BridgeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    listen: IpAddr,
    /// Port to listen on; the endpoint is `http://ADDR:PORT/mcp`.
    #[arg(long)]
    port: u16,
    /// The stdio MCP server to run, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<String>,
}

/// Runs the bridge until the child exits or a signal arrives, and returns the
/// process exit code: the child's own, or 128 + the signal that ended it.
pub async fn run(args: BridgeArgs) -> anyhow::Result<i32> {
    let (command, rest) = args
        .command
        .split_first()
        .context("mcp-bridge needs the command to run after `--`")?;
    let command = self_command(command, std::env::current_exe().ok());
    let status = tarsy_mcp::bridge::run(args.listen, args.port, &command, rest)
        .await
        .context("running the MCP bridge")?;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

/// `tarsy` names this executable, as in local mode: in an investigation
/// pod the binary is injected at a path that is not on the image's PATH,
/// and a stdio server such as `tarsy mcp-replay` must still start.
fn self_command(command: &str, exe: Option<std::path::PathBuf>) -> String {
    match exe {
        Some(exe) if command == tarsy_local::stdio::SELF_COMMAND => exe.display().to_string(),
        _ => command.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tarsy_is_this_executable_and_other_commands_are_left_alone() {
        let exe = Some(std::path::PathBuf::from("/tarsy-bin/tarsy"));
        assert_eq!(self_command("tarsy", exe.clone()), "/tarsy-bin/tarsy");
        assert_eq!(self_command("npx", exe.clone()), "npx");
        assert_eq!(self_command("./tarsy", exe), "./tarsy");
        assert_eq!(self_command("tarsy", None), "tarsy");
    }
}
