//! Startup validation, the health monitor and the stdio ⇄ HTTP bridge,
//! against the test server.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tarsy_core::ToolFilter;
use tarsy_mcp::bridge::{self, StdioBridgeConfig};
use tarsy_mcp::warnings::CATEGORY_MCP_HEALTH;
use tarsy_mcp::{
    ExecutorRequest, HealthMonitor, McpClientFactory, SystemWarnings, validate_servers,
};
use tarsy_test_mcp_server::spawn_http;

#[tokio::test]
async fn startup_validation_names_every_broken_server() {
    let server = spawn_http("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let mut missing = stdio("missing-binary", &[]);
    missing.transport = tarsy_core::McpTransport::Stdio {
        command: "/nonexistent/server".into(),
        args: vec![],
        env: Default::default(),
        cwd: None,
    };
    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let unreachable = http("unreachable", &format!("http://{closed}/mcp"));
    let good = vec![stdio("test", &[]), http("remote", &server.url())];
    assert_eq!(validate_servers(&good, fast_timeouts()).await, Ok(()));

    let mut all = good.clone();
    all.push(missing);
    all.push(unreachable);
    let failures = validate_servers(&all, fast_timeouts()).await.unwrap_err();
    let names: Vec<_> = failures.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(names, vec!["missing-binary", "unreachable"]);
    assert!(
        failures[0].1.contains("cannot start '/nonexistent/server'"),
        "{failures:?}"
    );
    assert!(
        failures[1]
            .1
            .starts_with("MCP server 'unreachable' failed to initialise"),
        "{failures:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn health_monitor_raises_and_clears_warnings() {
    let server = spawn_http("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr: SocketAddr = server.addr;
    let warnings = Arc::new(SystemWarnings::new());
    let monitor = HealthMonitor::new(
        [http("remote", &server.url()), stdio("local", &[])],
        warnings.clone(),
        fast_timeouts(),
    );
    monitor.check_once().await;
    assert!(monitor.is_healthy(), "{:?}", monitor.statuses());
    assert!(warnings.list().is_empty());

    // The remote server goes away.
    server.stop().await;
    monitor.check_once().await;
    assert!(!monitor.is_healthy());
    let statuses = monitor.statuses();
    assert!(statuses["local"].healthy);
    assert!(!statuses["remote"].healthy);
    let list = warnings.list();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].category, CATEGORY_MCP_HEALTH);
    assert_eq!(list[0].server_id.as_deref(), Some("remote"));
    assert_eq!(list[0].message, "MCP server 'remote' is not responding");
    // Still down: still one warning, not two.
    monitor.check_once().await;
    assert_eq!(warnings.list().len(), 1);

    // It comes back on the same address: the monitor recreates its session
    // and clears the warning.
    let server = spawn_http(addr).await.unwrap();
    monitor.check_once().await;
    assert!(monitor.is_healthy(), "{:?}", monitor.statuses());
    assert!(warnings.list().is_empty());
    monitor.stop().await;
    server.stop().await;
}

#[tokio::test]
async fn health_monitor_loop_runs_in_the_background() {
    let warnings = Arc::new(SystemWarnings::new());
    let mut broken = stdio("broken", &[]);
    broken.transport = tarsy_core::McpTransport::Stdio {
        command: "/nonexistent/server".into(),
        args: vec![],
        env: Default::default(),
        cwd: None,
    };
    let monitor = HealthMonitor::new([broken], warnings.clone(), fast_timeouts());
    monitor.start();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while warnings.list().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no warning raised");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(warnings.list()[0].details.contains("cannot start"));
    monitor.stop().await;
}

#[tokio::test]
async fn bridge_serves_a_stdio_server_over_http_and_ends_with_it() {
    let bridge = bridge::start(StdioBridgeConfig::new(0, bin(), vec![]))
        .await
        .unwrap();
    assert!(bridge.url().starts_with("http://127.0.0.1:"));
    let factory = McpClientFactory::new([http("bridged", &bridge.url())], masking(&["bridged"]))
        .with_timeouts(fast_timeouts());
    let ex = factory
        .create_executor(ExecutorRequest::new(
            vec!["bridged".into()],
            ToolFilter::new(),
        ))
        .await
        .unwrap();
    assert!(ex.failed_servers().is_empty(), "{:?}", ex.failed_servers());
    let tools = ex.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "bridged.echo"));
    let r = ex
        .execute(&call("bridged.echo", "text: through the bridge"))
        .await
        .unwrap();
    assert_eq!(r.content, "through the bridge");
    let r = ex
        .execute(&call("bridged.fail", "message: nope"))
        .await
        .unwrap();
    assert!(r.is_error);
    assert_eq!(r.content, "nope");
    let r = ex.execute(&call("bridged.reject", "{}")).await.unwrap();
    assert!(
        r.is_error && r.content.starts_with("MCP error -32602"),
        "{}",
        r.content
    );

    // The child crashes: the bridge ends with the child's status.
    let _ = ex.execute(&call("bridged.crash", "exit_code: 7")).await;
    let status = tokio::time::timeout(Duration::from_secs(10), bridge.wait())
        .await
        .expect("bridge must end when its child exits")
        .unwrap();
    assert_eq!(status.code(), Some(7));
    ex.close().await;
}

#[tokio::test]
async fn stopping_the_bridge_stops_the_child() {
    use std::os::unix::process::ExitStatusExt;
    let bridge = bridge::start(StdioBridgeConfig::new(0, bin(), vec![]))
        .await
        .unwrap();
    let url = bridge.url();
    bridge.stop();
    let status = tokio::time::timeout(Duration::from_secs(15), bridge.wait())
        .await
        .expect("bridge must stop")
        .unwrap();
    // SIGTERM ends the test server (no handler), so the status is the signal.
    assert_eq!(status.signal(), Some(libc_sigterm()), "{status:?}");
    // Nothing listens any more.
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

fn libc_sigterm() -> i32 {
    15
}

#[tokio::test]
async fn bridge_reports_a_command_that_is_not_an_mcp_server() {
    let err = bridge::start(StdioBridgeConfig {
        init_timeout: Duration::from_secs(3),
        ..StdioBridgeConfig::new(0, "true", vec![])
    })
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the MCP server did not initialise"),
        "{err}"
    );
    let err = bridge::start(StdioBridgeConfig::new(0, "/nonexistent/server", vec![]))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot start '/nonexistent/server'"),
        "{err}"
    );
}
