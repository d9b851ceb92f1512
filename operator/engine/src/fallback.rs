//! Provider fallback: an execution walks its provider's `fallback` chain when
//! a provider keeps failing, and a circuit breaker stops sending work to a
//! provider that failed repeatedly until it has had time to recover.
//!
//! A provider error counts when the LLM service reports it as retryable: the
//! service has already done its own transient retries (rate limits, empty
//! responses), so another attempt on the same provider is unlikely to help.
//! A call that runs out its iteration's time counts too (a hung provider).
//! Context overflows are not provider failures (compaction handles them).
//!
//! The breakers of a process can share their state with every other process
//! calling the same providers ([`SharedBreakerState`], a database row per
//! provider): each runner pod of a cluster then skips a provider that
//! another pod's execution saw fail. Each execution reads the shared state
//! of its providers when it starts and writes every failure, and the first
//! success after failures, through to it; a shared store that cannot be
//! reached leaves the process with its own view (logged, never fatal).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tarsy_core::LlmProviderConfig;
use tokio::time::Instant;

use crate::llm::LlmErrorInfo;

/// Circuit breaker settings.
#[derive(Debug, Clone, Copy)]
pub struct BreakerConfig {
    /// Consecutive failures that open the circuit.
    pub failure_threshold: u32,
    /// How long an open circuit rejects work before one trial call.
    pub open_for: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 3,
            open_for: Duration::from_secs(60),
        }
    }
}

/// One provider's circuit as the shared store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedBreaker {
    /// Provider name.
    pub provider: String,
    /// Failed calls since the last success.
    pub consecutive_failures: u32,
    /// How much longer the circuit stays open (`None`: closed, or its open
    /// period has passed and a trial call is allowed).
    pub open_for: Option<Duration>,
}

/// Breaker state shared between processes. Implementations live outside the
/// engine (a database table); errors are reported as text and never stop an
/// execution.
#[async_trait]
pub trait SharedBreakerState: Send + Sync {
    /// The recorded circuits of `providers` (providers closed or never
    /// recorded may be left out).
    async fn load(&self, providers: &[String]) -> Result<Vec<SharedBreaker>, String>;
    /// Counts a failed call of `provider` atomically, opening its circuit
    /// for `config.open_for` once `config.failure_threshold` failures
    /// happened in a row; returns the new state.
    async fn record_failure(
        &self,
        provider: &str,
        config: BreakerConfig,
    ) -> Result<SharedBreaker, String>;
    /// A call of `provider` succeeded: its circuit closes.
    async fn record_success(&self, provider: &str) -> Result<(), String>;
}

#[derive(Debug, Default, Clone, Copy)]
struct Breaker {
    consecutive_failures: u32,
    open_until: Option<Instant>,
}

/// Per-provider circuit breakers of a process (shared by all its
/// executions), optionally backed by a [`SharedBreakerState`].
#[derive(Default)]
pub struct CircuitBreakers {
    config: BreakerConfig,
    state: Mutex<HashMap<String, Breaker>>,
    shared: Option<Arc<dyn SharedBreakerState>>,
}

impl std::fmt::Debug for CircuitBreakers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitBreakers")
            .field("config", &self.config)
            .field("state", &*self.lock())
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

impl CircuitBreakers {
    /// Breakers with `config`.
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            state: Mutex::new(HashMap::new()),
            shared: None,
        }
    }

    /// The same breakers, their state shared through `shared`.
    pub fn with_shared(mut self, shared: Arc<dyn SharedBreakerState>) -> Self {
        self.shared = Some(shared);
        self
    }

    /// The settings.
    pub fn config(&self) -> BreakerConfig {
        self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Breaker>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `provider` may be called now (closed, or open long enough for
    /// a trial call).
    pub fn allows(&self, provider: &str) -> bool {
        match self.lock().get(provider).and_then(|b| b.open_until) {
            Some(until) => Instant::now() >= until,
            None => true,
        }
    }

    /// Whether the circuit of `provider` is open right now.
    pub fn is_open(&self, provider: &str) -> bool {
        !self.allows(provider)
    }

    /// The circuits open now as this process sees them, by provider name
    /// (`open_for` is the time left).
    pub fn open_circuits(&self) -> Vec<SharedBreaker> {
        let now = Instant::now();
        let mut open: Vec<SharedBreaker> = self
            .lock()
            .iter()
            .filter_map(|(p, b)| {
                b.open_until.filter(|u| *u > now).map(|u| SharedBreaker {
                    provider: p.clone(),
                    consecutive_failures: b.consecutive_failures,
                    open_for: Some(u - now),
                })
            })
            .collect();
        open.sort_by(|a, b| a.provider.cmp(&b.provider));
        open
    }

    fn adopt(&self, shared: &SharedBreaker) {
        let now = Instant::now();
        let entry = Breaker {
            consecutive_failures: shared.consecutive_failures,
            // An elapsed opening still counts as opened: the next failure
            // reopens at once (the trial call failed).
            open_until: match shared.open_for {
                Some(left) => Some(now + left),
                None if shared.consecutive_failures >= self.config.failure_threshold => Some(now),
                None => None,
            },
        };
        self.lock().insert(shared.provider.clone(), entry);
    }

    /// Reads the shared state of `providers` (an execution's chain) into
    /// this process's view; without a shared state, does nothing.
    pub async fn refresh(&self, providers: &[String]) {
        let Some(shared) = &self.shared else { return };
        match shared.load(providers).await {
            Ok(states) => {
                let mut seen = std::collections::HashSet::new();
                for s in &states {
                    seen.insert(s.provider.as_str());
                    self.adopt(s);
                }
                // A provider without a row was closed by someone else.
                let mut g = self.lock();
                for p in providers {
                    if !seen.contains(p.as_str()) {
                        g.remove(p);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "shared circuit breaker state unreadable; using this process's own")
            }
        }
    }

    /// A call succeeded: the circuit closes (everywhere, when shared and it
    /// had failures; a success on a clean circuit writes nothing).
    pub async fn record_success(&self, provider: &str) {
        let had_failures = self.lock().remove(provider).is_some();
        if had_failures {
            tarsy_telemetry::global().llm_circuit(provider, false);
        }
        if had_failures
            && let Some(shared) = &self.shared
            && let Err(e) = shared.record_success(provider).await
        {
            tracing::warn!(%provider, error = %e, "shared circuit breaker not closed");
        }
    }

    /// A call failed: after the threshold the circuit opens (again).
    pub async fn record_failure(&self, provider: &str) {
        {
            let mut g = self.lock();
            let b = g.entry(provider.to_string()).or_default();
            b.consecutive_failures += 1;
            if b.consecutive_failures >= self.config.failure_threshold {
                b.open_until = Some(Instant::now() + self.config.open_for);
            }
        }
        if let Some(shared) = &self.shared {
            match shared.record_failure(provider, self.config).await {
                // Everyone's failures count, not only this process's.
                Ok(state) => self.adopt(&state),
                Err(e) => {
                    tracing::warn!(%provider, error = %e, "shared circuit breaker not updated")
                }
            }
        }
        tarsy_telemetry::global().llm_circuit(provider, self.is_open(provider));
    }
}

/// A move from one provider to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProviderSwitch {
    /// Provider left.
    pub from: String,
    /// Provider now used.
    pub to: String,
    /// Why.
    pub reason: String,
}

/// The providers of one execution, in order, and which one is in use. Once
/// switched, the execution stays on the fallback (switching back mid-
/// conversation would lose provider-side state such as thought signatures).
#[derive(Debug, Clone)]
pub(crate) struct ProviderChain {
    providers: Vec<LlmProviderConfig>,
    current: usize,
}

impl ProviderChain {
    /// The chain of `primary` followed by its fallbacks.
    pub fn new(primary: &LlmProviderConfig) -> Self {
        let mut first = primary.clone();
        let fallbacks = std::mem::take(&mut first.fallback);
        let mut providers = vec![first];
        providers.extend(fallbacks.into_iter().map(|mut f| {
            f.fallback.clear();
            f
        }));
        Self {
            providers,
            current: 0,
        }
    }

    /// The provider in use.
    pub fn current(&self) -> &LlmProviderConfig {
        &self.providers[self.current]
    }

    /// The names of every provider of the chain, in order.
    pub fn names(&self) -> Vec<String> {
        self.providers.iter().map(|p| p.name.clone()).collect()
    }

    /// At start: reads the shared breaker state of the chain's providers,
    /// then skips providers whose circuit is open (if every circuit is open,
    /// stays on the primary: trying beats failing without a call).
    pub async fn skip_open(&mut self, breakers: &CircuitBreakers) -> Option<ProviderSwitch> {
        breakers.refresh(&self.names()).await;
        if breakers.allows(&self.current().name) {
            return None;
        }
        let next = (self.current + 1..self.providers.len())
            .find(|&i| breakers.allows(&self.providers[i].name))?;
        let from = self.current().name.clone();
        self.current = next;
        Some(ProviderSwitch {
            from: from.clone(),
            to: self.current().name.clone(),
            reason: format!("circuit breaker open for provider {from}"),
        })
    }

    /// After a failed call: records it and, for a retryable provider error,
    /// moves to the next provider whose circuit allows calls.
    pub async fn on_failure(
        &mut self,
        err: &LlmErrorInfo,
        breakers: &CircuitBreakers,
    ) -> Option<ProviderSwitch> {
        if err.is_context_overflow() {
            return None;
        }
        breakers.record_failure(&self.current().name).await;
        if !err.retryable {
            return None;
        }
        self.switch(breakers, format!("{} ({})", err.message, err.code))
    }

    /// After a call that ran out its iteration's time (a hung provider):
    /// records a failure and moves to the next provider whose circuit
    /// allows calls.
    pub async fn on_timeout(
        &mut self,
        timeout: Duration,
        breakers: &CircuitBreakers,
    ) -> Option<ProviderSwitch> {
        breakers.record_failure(&self.current().name).await;
        self.switch(
            breakers,
            format!(
                "no answer within the iteration timeout ({}s)",
                timeout.as_secs()
            ),
        )
    }

    fn switch(&mut self, breakers: &CircuitBreakers, reason: String) -> Option<ProviderSwitch> {
        let next = (self.current + 1..self.providers.len())
            .find(|&i| breakers.allows(&self.providers[i].name))?;
        let from = self.current().name.clone();
        self.current = next;
        Some(ProviderSwitch {
            from,
            to: self.current().name.clone(),
            reason,
        })
    }

    /// After a successful call.
    pub async fn on_success(&self, breakers: &CircuitBreakers) {
        breakers.record_success(&self.current().name).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, fallback: Vec<LlmProviderConfig>) -> LlmProviderConfig {
        LlmProviderConfig {
            name: name.into(),
            provider_type: tarsy_core::ProviderType::Google,
            model: format!("{name}-model"),
            api_key_env: None,
            credentials_env: None,
            base_url: None,
            project: None,
            location: None,
            native_tools: Default::default(),
            max_tool_result_tokens: None,
            context_window_tokens: None,
            script: None,
            fallback,
            price: None,
        }
    }

    fn err(retryable: bool, code: &str) -> LlmErrorInfo {
        LlmErrorInfo {
            message: "boom".into(),
            code: code.into(),
            retryable,
        }
    }

    #[tokio::test]
    async fn retryable_errors_walk_the_chain_then_stop() {
        let b = CircuitBreakers::default();
        let mut c = ProviderChain::new(&p("a", vec![p("b", vec![]), p("c", vec![])]));
        assert_eq!(c.current().name, "a");
        assert!(c.on_failure(&err(false, "credentials"), &b).await.is_none());
        assert_eq!(c.current().name, "a");
        let s = c.on_failure(&err(true, "max_retries"), &b).await.unwrap();
        assert_eq!((s.from.as_str(), s.to.as_str()), ("a", "b"));
        assert!(s.reason.contains("max_retries"));
        c.on_failure(&err(true, "max_retries"), &b).await.unwrap();
        assert_eq!(c.current().name, "c");
        assert!(c.on_failure(&err(true, "max_retries"), &b).await.is_none());
        assert!(
            c.on_failure(&err(true, "context_overflow"), &b)
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_timeout_moves_to_the_next_provider() {
        let b = CircuitBreakers::default();
        let mut c = ProviderChain::new(&p("a", vec![p("b", vec![])]));
        let s = c.on_timeout(Duration::from_secs(120), &b).await.unwrap();
        assert_eq!((s.from.as_str(), s.to.as_str()), ("a", "b"));
        assert!(s.reason.contains("120s"), "{}", s.reason);
        // The last provider has nowhere to go.
        assert!(c.on_timeout(Duration::from_secs(120), &b).await.is_none());
    }

    /// The breaker's state is in the process's metrics (a provider name no
    /// other test uses: the metrics are process-wide).
    #[tokio::test]
    async fn an_open_circuit_shows_in_the_metrics() {
        let gauge = "tarsy_llm_circuit_open{provider=\"gauge-provider\"}";
        let b = CircuitBreakers::new(BreakerConfig {
            failure_threshold: 1,
            open_for: Duration::from_secs(30),
        });
        b.record_failure("gauge-provider").await;
        let metrics = tarsy_telemetry::global().encode("");
        assert!(metrics.contains(&format!("{gauge} 1")), "{metrics}");
        b.record_success("gauge-provider").await;
        let metrics = tarsy_telemetry::global().encode("");
        assert!(metrics.contains(&format!("{gauge} 0")), "{metrics}");
    }

    #[tokio::test(start_paused = true)]
    async fn breaker_opens_after_threshold_and_half_opens_later() {
        // A provider name of its own: the gauge is process-wide, and other
        // tests running at the same time move provider "a"'s.
        let b = CircuitBreakers::new(BreakerConfig {
            failure_threshold: 2,
            open_for: Duration::from_secs(30),
        });
        b.record_failure("half-open-a").await;
        assert!(b.allows("half-open-a"));
        b.record_failure("half-open-a").await;
        assert!(b.is_open("half-open-a"));
        let gauge = |provider: &str| format!("tarsy_llm_circuit_open{{provider=\"{provider}\"}}");
        let metrics = tarsy_telemetry::global().encode("");
        assert!(
            metrics.contains(&format!("{} 1", gauge("half-open-a"))),
            "{metrics}"
        );
        assert_eq!(
            b.open_circuits(),
            [SharedBreaker {
                provider: "half-open-a".into(),
                consecutive_failures: 2,
                open_for: Some(Duration::from_secs(30)),
            }]
        );
        let mut c = ProviderChain::new(&p("half-open-a", vec![p("b", vec![])]));
        let s = c.skip_open(&b).await.unwrap();
        assert_eq!(s.to, "b");
        assert!(s.reason.contains("circuit breaker open"));
        tokio::time::advance(Duration::from_secs(31)).await;
        assert!(b.allows("half-open-a"));
        assert!(b.open_circuits().is_empty());
        b.record_success("half-open-a").await;
        assert!(b.allows("half-open-a"));
    }

    /// A shared state in memory, as two processes would see one table.
    #[derive(Default)]
    struct Table(Mutex<HashMap<String, (u32, Option<Instant>)>>);

    #[async_trait]
    impl SharedBreakerState for Table {
        async fn load(&self, providers: &[String]) -> Result<Vec<SharedBreaker>, String> {
            let g = self.0.lock().unwrap();
            Ok(providers
                .iter()
                .filter_map(|p| g.get(p).map(|(n, until)| shared(p, *n, *until)))
                .collect())
        }
        async fn record_failure(
            &self,
            provider: &str,
            config: BreakerConfig,
        ) -> Result<SharedBreaker, String> {
            let mut g = self.0.lock().unwrap();
            let e = g.entry(provider.to_string()).or_default();
            e.0 += 1;
            if e.0 >= config.failure_threshold {
                e.1 = Some(Instant::now() + config.open_for);
            }
            Ok(shared(provider, e.0, e.1))
        }
        async fn record_success(&self, provider: &str) -> Result<(), String> {
            self.0.lock().unwrap().remove(provider);
            Ok(())
        }
    }

    fn shared(provider: &str, n: u32, until: Option<Instant>) -> SharedBreaker {
        SharedBreaker {
            provider: provider.into(),
            consecutive_failures: n,
            open_for: until
                .map(|u| u.saturating_duration_since(Instant::now()))
                .filter(|d| !d.is_zero()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failures_in_one_process_open_the_circuit_in_another() {
        let table: Arc<Table> = Arc::default();
        let config = BreakerConfig {
            failure_threshold: 2,
            open_for: Duration::from_secs(60),
        };
        let pod_1 = CircuitBreakers::new(config).with_shared(table.clone());
        let pod_2 = CircuitBreakers::new(config).with_shared(table.clone());
        pod_1.record_failure("a").await;
        // One failure each: together they reach the threshold.
        pod_2.record_failure("a").await;
        assert!(pod_2.is_open("a"));
        assert!(!pod_1.is_open("a"), "pod 1 has not looked yet");

        let mut c = ProviderChain::new(&p("a", vec![p("b", vec![])]));
        let s = c
            .skip_open(&pod_1)
            .await
            .expect("pod 1 skips the open circuit");
        assert_eq!(s.to, "b");

        // A success anywhere closes it everywhere.
        pod_2.record_success("a").await;
        let mut c = ProviderChain::new(&p("a", vec![p("b", vec![])]));
        assert!(c.skip_open(&pod_1).await.is_none());
        assert!(pod_1.allows("a"));
    }
}
