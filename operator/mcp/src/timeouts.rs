//! Operation timeouts of MCP calls (defaults below). Configurable so tests
//! can exercise timeouts without waiting 90 seconds.

use std::time::Duration;

/// Timeouts and retry pacing of MCP operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpTimeouts {
    /// Per-server initialisation: transport + MCP handshake (30 s).
    pub init: Duration,
    /// One tools/call or tools/list (90 s; must stay below the 120 s
    /// iteration timeout). An HTTP server's own `timeout` overrides it.
    pub call: Duration,
    /// Session recreation during recovery (10 s).
    pub reinit: Duration,
    /// Health check: listing the tools (5 s).
    pub health_ping: Duration,
    /// Health check interval (15 s).
    pub health_interval: Duration,
    /// Lower bound of the jittered backoff before a retry (250 ms).
    pub retry_backoff_min: Duration,
    /// Upper bound of the jittered backoff before a retry (750 ms).
    pub retry_backoff_max: Duration,
}

impl Default for McpTimeouts {
    fn default() -> Self {
        Self {
            init: Duration::from_secs(30),
            call: Duration::from_secs(90),
            reinit: Duration::from_secs(10),
            health_ping: Duration::from_secs(5),
            health_interval: Duration::from_secs(15),
            retry_backoff_min: Duration::from_millis(250),
            retry_backoff_max: Duration::from_millis(750),
        }
    }
}
