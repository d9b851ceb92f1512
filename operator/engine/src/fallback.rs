//! Provider fallback: an execution walks its provider's `fallback` chain when
//! a provider keeps failing, and a process-wide circuit breaker stops sending
//! work to a provider that failed repeatedly until it has had time to
//! recover.
//!
//! A provider error counts when the LLM service reports it as retryable: the
//! service has already done its own transient retries (rate limits, empty
//! responses), so another attempt on the same provider is unlikely to help.
//! Context overflows are not provider failures (compaction handles them).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

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

#[derive(Debug, Default, Clone, Copy)]
struct Breaker {
    consecutive_failures: u32,
    open_until: Option<Instant>,
}

/// Per-provider circuit breakers, shared by all executions of a process.
#[derive(Debug, Default)]
pub struct CircuitBreakers {
    config: BreakerConfig,
    state: Mutex<HashMap<String, Breaker>>,
}

impl CircuitBreakers {
    /// Breakers with `config`.
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            state: Mutex::new(HashMap::new()),
        }
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

    /// A call succeeded: the circuit closes.
    pub fn record_success(&self, provider: &str) {
        self.lock().remove(provider);
    }

    /// A call failed: after the threshold the circuit opens (again).
    pub fn record_failure(&self, provider: &str) {
        let mut g = self.lock();
        let b = g.entry(provider.to_string()).or_default();
        b.consecutive_failures += 1;
        if b.consecutive_failures >= self.config.failure_threshold {
            b.open_until = Some(Instant::now() + self.config.open_for);
        }
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

    /// At start: skips providers whose circuit is open (if every circuit is
    /// open, stays on the primary: trying beats failing without a call).
    pub fn skip_open(&mut self, breakers: &CircuitBreakers) -> Option<ProviderSwitch> {
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
    pub fn on_failure(
        &mut self,
        err: &LlmErrorInfo,
        breakers: &CircuitBreakers,
    ) -> Option<ProviderSwitch> {
        if err.is_context_overflow() {
            return None;
        }
        breakers.record_failure(&self.current().name);
        if !err.retryable {
            return None;
        }
        let next = (self.current + 1..self.providers.len())
            .find(|&i| breakers.allows(&self.providers[i].name))?;
        let from = self.current().name.clone();
        self.current = next;
        Some(ProviderSwitch {
            from,
            to: self.current().name.clone(),
            reason: format!("{} ({})", err.message, err.code),
        })
    }

    /// After a successful call.
    pub fn on_success(&self, breakers: &CircuitBreakers) {
        breakers.record_success(&self.current().name);
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
        }
    }

    fn err(retryable: bool, code: &str) -> LlmErrorInfo {
        LlmErrorInfo {
            message: "boom".into(),
            code: code.into(),
            retryable,
        }
    }

    #[test]
    fn retryable_errors_walk_the_chain_then_stop() {
        let b = CircuitBreakers::default();
        let mut c = ProviderChain::new(&p("a", vec![p("b", vec![]), p("c", vec![])]));
        assert_eq!(c.current().name, "a");
        assert!(c.on_failure(&err(false, "credentials"), &b).is_none());
        assert_eq!(c.current().name, "a");
        let s = c.on_failure(&err(true, "max_retries"), &b).unwrap();
        assert_eq!((s.from.as_str(), s.to.as_str()), ("a", "b"));
        assert!(s.reason.contains("max_retries"));
        c.on_failure(&err(true, "max_retries"), &b).unwrap();
        assert_eq!(c.current().name, "c");
        assert!(c.on_failure(&err(true, "max_retries"), &b).is_none());
        assert!(c.on_failure(&err(true, "context_overflow"), &b).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn breaker_opens_after_threshold_and_half_opens_later() {
        let b = CircuitBreakers::new(BreakerConfig {
            failure_threshold: 2,
            open_for: Duration::from_secs(30),
        });
        b.record_failure("a");
        assert!(b.allows("a"));
        b.record_failure("a");
        assert!(b.is_open("a"));
        let mut c = ProviderChain::new(&p("a", vec![p("b", vec![])]));
        let s = c.skip_open(&b).unwrap();
        assert_eq!(s.to, "b");
        assert!(s.reason.contains("circuit breaker open"));
        tokio::time::advance(Duration::from_secs(31)).await;
        assert!(b.allows("a"));
        b.record_success("a");
        assert!(b.allows("a"));
    }
}
