//! `tarsy mcp-replay DIR`: serve recorded tool fixtures as an MCP server;
//! `tarsy export-fixture SESSION_ID`: write a session's MCP interactions as
//! such a fixture. The format is in `operator/replay/README.md`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::Context;
use tarsy_replay::FixtureSet;
use tarsy_store::Store;

/// Arguments of `tarsy mcp-replay`.
#[derive(Debug, clap::Args)]
pub struct McpReplayArgs {
    /// Fixture directory (one `<server>.yaml` per MCP server) or one
    /// fixture file.
    pub fixture: PathBuf,
    /// The server to serve, when the directory records several.
    #[arg(long)]
    pub server: Option<String>,
    /// Serve streamable HTTP on this port (`http://ADDR:PORT/mcp`, printed
    /// on stdout once listening; 0 picks a free port) instead of stdio.
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to listen on with `--port`.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub listen: IpAddr,
}

/// Serves the fixture until the client closes stdio, or until Ctrl-C or
/// SIGTERM in HTTP mode.
pub async fn mcp_replay(args: McpReplayArgs) -> anyhow::Result<()> {
    let set = FixtureSet::load(&args.fixture)?;
    let fixture = set.select(args.server.as_deref(), &args.fixture)?.clone();
    match args.port {
        None => {
            tarsy_replay::serve_stdio(fixture).await?;
        }
        Some(port) => {
            let server = fixture.server.clone();
            let running =
                tarsy_replay::spawn_http(fixture, SocketAddr::new(args.listen, port)).await?;
            println!("{}", running.url());
            tracing::info!(server, url = %running.url(), "replaying recorded MCP server");
            crate::process::stop_requested().await;
            running.stop().await;
        }
    }
    Ok(())
}

/// Arguments of `tarsy export-fixture`.
#[derive(Debug, clap::Args)]
pub struct ExportFixtureArgs {
    /// The session whose MCP interactions to export.
    pub session_id: String,
    /// Directory to write the fixture into (one `<server>.yaml` per MCP
    /// server; created when missing, existing files of the same servers
    /// are replaced).
    #[arg(long)]
    pub out: PathBuf,
    /// The database holding the session: `sqlite:PATH` or `postgres://…`.
    /// Default: the one `tarsy serve` uses (`DATABASE_URL`, else the SQLite
    /// file in --data-dir).
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Directory of `tarsy serve`'s default SQLite database.
    #[arg(long, env = "TARSY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Writes the fixture; prints each file written on stdout and each
/// interaction left out on stderr.
pub async fn export_fixture(args: ExportFixtureArgs) -> anyhow::Result<()> {
    let url = match args.database_url {
        Some(url) => url,
        None => {
            let dir = args.data_dir.unwrap_or_else(crate::serve::default_data_dir);
            format!("sqlite:{}", dir.join("tarsy.db").display())
        }
    };
    require_sqlite_file(&url)?;
    let store = Store::connect(&url)
        .await
        .with_context(|| format!("opening the database {}", crate::serve::redact(&url)))?;
    let export = tarsy_replay::export_session(&store, &args.session_id).await;
    store.close().await;
    let export = export?;
    let written = export.fixtures.write(&args.out)?;
    for skipped in &export.skipped {
        eprintln!("left out: {skipped}");
    }
    eprintln!(
        "exported {} tool call(s) of {} MCP server(s)",
        export.calls,
        written.len()
    );
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}

/// Opening a SQLite file creates it: refuse a path with no database rather
/// than export from an empty one made on the spot.
fn require_sqlite_file(url: &str) -> anyhow::Result<()> {
    let Some(rest) = url.strip_prefix("sqlite:") else {
        return Ok(());
    };
    if rest.contains(":memory:") || rest.contains("mode=memory") {
        anyhow::bail!("{url} is an in-memory database: it holds no earlier session");
    }
    let path = rest.trim_start_matches("//");
    let path = path.split('?').next().unwrap_or(path);
    if !Path::new(path).is_file() {
        anyhow::bail!(
            "no database at {path}: give the one the session was recorded in with --database-url \
             (`tarsy investigate` keeps its records only with --database-url)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_in_memory_sqlite_is_refused_by_name() {
        let e = require_sqlite_file("sqlite:/nonexistent/tarsy.db").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("no database at /nonexistent/tarsy.db"),
            "{e}"
        );
        assert!(require_sqlite_file("sqlite::memory:").is_err());
        assert!(require_sqlite_file("postgres://db/tarsy").is_ok());
    }
}
