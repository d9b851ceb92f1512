//! `tarsy-test-mcp-server [--http ADDR:PORT]`: stdio by default; with
//! `--http`, streamable HTTP at `http://ADDR:PORT/mcp` (prints the URL on
//! stdout once listening). When `TARSY_TEST_SPAWN_LOG` names a file, each
//! start appends the process id to it.

use std::net::SocketAddr;

#[tokio::main]
async fn main() {
    // Tests count server starts (session recreations) through this log.
    if let Some(log) = std::env::var_os("TARSY_TEST_SPAWN_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(f, "{}", std::process::id());
        }
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => tarsy_test_mcp_server::serve_stdio().await,
        [flag, addr] if flag == "--http" => serve_http(addr).await,
        _ => {
            eprintln!("usage: tarsy-test-mcp-server [--http ADDR:PORT]");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("tarsy-test-mcp-server: {e}");
        std::process::exit(1);
    }
}

async fn serve_http(addr: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let addr: SocketAddr = addr.parse()?;
    let server = tarsy_test_mcp_server::spawn_http(addr).await?;
    println!("{}", server.url());
    tokio::signal::ctrl_c().await?;
    server.stop().await;
    Ok(())
}
