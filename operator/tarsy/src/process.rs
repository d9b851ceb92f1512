//! What every long-running subcommand needs from its process: the
//! operator's defaults from the environment, and the stop signal.

use anyhow::anyhow;
use tarsy_config::{Defaults, DefaultsSpec};

/// The operator's defaults (`TARSY_DEFAULT_*`). The operator, the API and
/// admission read the same variables, so they complete configuration and
/// mask alert data alike.
pub(crate) fn defaults_from_env() -> anyhow::Result<Defaults> {
    fn joined<A: std::fmt::Display, B: std::fmt::Display>(errors: &[(A, B)]) -> String {
        errors
            .iter()
            .map(|(at, problem)| format!("{at}: {problem}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
    let spec = DefaultsSpec::from_env(&|name| std::env::var(name).ok())
        .map_err(|errors| anyhow!("invalid defaults in the environment: {}", joined(&errors)))?;
    let mut defaults = Defaults::default();
    defaults
        .apply(&spec)
        .map_err(|errors| anyhow!("invalid defaults in the environment: {}", joined(&errors)))?;
    Ok(defaults)
}

/// Resolves on SIGTERM (Kubernetes stopping the pod) or Ctrl-C.
pub(crate) async fn stop_requested() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
