//! The provider circuit breakers every execution runs with, in both modes:
//! the engine's [`CircuitBreakers`] with their state shared through the
//! store, so that failures one execution (one runner pod, one `tarsy
//! serve`) saw open the circuit for the next, wherever it runs.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use tarsy_engine::fallback::{BreakerConfig, CircuitBreakers, SharedBreaker, SharedBreakerState};
use tarsy_store::{BreakerState, Store};

/// Scope of local mode's providers (one configuration per process).
pub const LOCAL_SCOPE: &str = "local";

/// The breaker state of the providers configured in one scope (a cluster
/// namespace, or [`LOCAL_SCOPE`]), kept in the store.
pub struct StoreBreakers {
    store: Store,
    scope: String,
}

impl StoreBreakers {
    /// Breakers of `scope` in `store`.
    pub fn new(store: Store, scope: impl Into<String>) -> Self {
        Self {
            store,
            scope: scope.into(),
        }
    }
}

fn shared(s: &BreakerState) -> SharedBreaker {
    SharedBreaker {
        provider: s.provider.clone(),
        consecutive_failures: s.consecutive_failures,
        open_for: s.open_for(Utc::now()),
    }
}

#[async_trait]
impl SharedBreakerState for StoreBreakers {
    async fn load(&self, providers: &[String]) -> Result<Vec<SharedBreaker>, String> {
        self.store
            .breaker_states(&self.scope, providers)
            .await
            .map(|rows| rows.iter().map(shared).collect())
            .map_err(|e| e.to_string())
    }

    async fn record_failure(
        &self,
        provider: &str,
        config: BreakerConfig,
    ) -> Result<SharedBreaker, String> {
        self.store
            .record_breaker_failure(
                &self.scope,
                provider,
                config.failure_threshold,
                config.open_for,
            )
            .await
            .map(|s| shared(&s))
            .map_err(|e| e.to_string())
    }

    async fn record_success(&self, provider: &str) -> Result<(), String> {
        self.store
            .reset_breaker(&self.scope, provider)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The breakers of a process: the settings of `defaults`, state shared
/// through `store` under `scope`.
pub fn shared_breakers(
    store: &Store,
    scope: &str,
    defaults: &tarsy_config::Defaults,
) -> Arc<CircuitBreakers> {
    let config = BreakerConfig {
        failure_threshold: defaults.breaker_failure_threshold.max(1),
        open_for: defaults.breaker_open_for,
    };
    Arc::new(
        CircuitBreakers::new(config)
            .with_shared(Arc::new(StoreBreakers::new(store.clone(), scope))),
    )
}

/// One open circuit, as system warnings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCircuit {
    /// Where the provider is configured (namespace, or `local`).
    pub scope: String,
    /// Provider name.
    pub provider: String,
    /// Failed calls in a row.
    pub consecutive_failures: u32,
    /// Time left before a trial call is allowed.
    pub open_for: Duration,
}

impl OpenCircuit {
    /// The warning's one-line message.
    pub fn message(&self) -> String {
        format!(
            "LLM provider {} is failing: circuit breaker open ({} failures in a row)",
            self.provider, self.consecutive_failures
        )
    }

    /// The warning's details.
    pub fn details(&self) -> String {
        format!(
            "executions use its fallback providers (or wait) for another {}s; scope {}",
            self.open_for.as_secs().max(1),
            self.scope
        )
    }
}

/// The circuits `breakers` (this process's view) has open now, in `scope`.
pub fn open_in_process(breakers: &CircuitBreakers, scope: &str) -> Vec<OpenCircuit> {
    breakers
        .open_circuits()
        .into_iter()
        .map(|b| OpenCircuit {
            scope: scope.to_string(),
            provider: b.provider,
            consecutive_failures: b.consecutive_failures,
            open_for: b.open_for.unwrap_or_default(),
        })
        .collect()
}

/// Every circuit open now, in every scope (system warnings).
pub async fn open_circuits(store: &Store) -> Result<Vec<OpenCircuit>, tarsy_store::StoreError> {
    let now = Utc::now();
    Ok(store
        .open_breakers(now)
        .await?
        .into_iter()
        .filter_map(|s| {
            s.open_for(now).map(|open_for| OpenCircuit {
                scope: s.scope,
                provider: s.provider,
                consecutive_failures: s.consecutive_failures,
                open_for,
            })
        })
        .collect())
}
