//! What a model call costs: a model's prices and the estimate of one call.
//!
//! Prices are in US dollars per million tokens, as providers publish them.
//! An estimate is made once, when the call is recorded, so a later price
//! change never rewrites history.

use serde::{Deserialize, Serialize};

use crate::TokenUsage;

/// Prices of one model, in US dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPrice {
    /// Prompt tokens.
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub input_per_million: f64,
    /// Answer tokens.
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub output_per_million: f64,
    /// Thinking tokens; unset: the output price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub thinking_per_million: Option<f64>,
    /// Prompt tokens read from the provider's cache; unset: the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub cached_input_per_million: Option<f64>,
    /// Prices that replace these when a prompt is larger than a size
    /// (long-context pricing); the largest tier the prompt passes applies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 8)))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["aboveInputTokens"]))
    )]
    pub tiers: Vec<PriceTier>,
}

/// Prices for prompts larger than `above_input_tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriceTier {
    /// The tier applies to a prompt of more than this many tokens.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub above_input_tokens: i64,
    /// Prompt tokens.
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub input_per_million: f64,
    /// Answer tokens.
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub output_per_million: f64,
    /// Thinking tokens; unset: this tier's output price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub thinking_per_million: Option<f64>,
    /// Cached prompt tokens; unset: this tier's input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub cached_input_per_million: Option<f64>,
}

impl ModelPrice {
    /// A price with input and output only.
    pub fn new(input_per_million: f64, output_per_million: f64) -> Self {
        Self {
            input_per_million,
            output_per_million,
            thinking_per_million: None,
            cached_input_per_million: None,
            tiers: Vec::new(),
        }
    }

    /// The estimated cost of one call, in US dollars.
    ///
    /// `usage.input_tokens` counts the whole prompt, cached tokens included;
    /// `output_tokens` the answer and `thinking_tokens` the thinking apart
    /// from it (the LLM service reports every provider that way).
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        let rates = self.rates_for(usage.input_tokens);
        let cached = usage
            .cached_input_tokens
            .clamp(0, usage.input_tokens.max(0));
        let fresh = usage.input_tokens.max(0) - cached;
        let tokens = [
            (fresh, rates.input),
            (cached, rates.cached_input),
            (usage.output_tokens.max(0), rates.output),
            (usage.thinking_tokens.max(0), rates.thinking),
        ];
        tokens
            .iter()
            .map(|&(n, per_million)| n as f64 * per_million)
            .sum::<f64>()
            / 1_000_000.0
    }

    /// The error in this price, if any: negative or non-finite prices, or
    /// two tiers of the same size.
    pub fn problem(&self) -> Option<String> {
        let base = [
            Some(self.input_per_million),
            Some(self.output_per_million),
            self.thinking_per_million,
            self.cached_input_per_million,
        ];
        let tiers = self.tiers.iter().flat_map(|t| {
            [
                Some(t.input_per_million),
                Some(t.output_per_million),
                t.thinking_per_million,
                t.cached_input_per_million,
            ]
        });
        if base
            .into_iter()
            .chain(tiers)
            .flatten()
            .any(|p| !p.is_finite() || p < 0.0)
        {
            return Some("prices must be finite and not negative".into());
        }
        let mut sizes: Vec<i64> = self.tiers.iter().map(|t| t.above_input_tokens).collect();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.len() != self.tiers.len() || sizes.first().is_some_and(|&s| s < 1) {
            return Some("tiers need distinct aboveInputTokens of at least 1".into());
        }
        None
    }

    fn rates_for(&self, prompt_tokens: i64) -> Rates {
        match self
            .tiers
            .iter()
            .filter(|t| prompt_tokens > t.above_input_tokens)
            .max_by_key(|t| t.above_input_tokens)
        {
            Some(t) => Rates {
                input: t.input_per_million,
                output: t.output_per_million,
                thinking: t.thinking_per_million.unwrap_or(t.output_per_million),
                cached_input: t.cached_input_per_million.unwrap_or(t.input_per_million),
            },
            None => Rates {
                input: self.input_per_million,
                output: self.output_per_million,
                thinking: self.thinking_per_million.unwrap_or(self.output_per_million),
                cached_input: self
                    .cached_input_per_million
                    .unwrap_or(self.input_per_million),
            },
        }
    }
}

/// What a session, a stage or an execution cost: the sum of its LLM calls'
/// estimates and tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Cost {
    /// Sum of the estimates, in US dollars.
    pub usd: f64,
    /// Some calls used tokens but have no estimate (a model without a price,
    /// or estimates off): `usd` is a lower bound.
    pub partial: bool,
    /// LLM calls counted (failed attempts included).
    pub calls: i64,
    /// Calls that used tokens but have no estimate.
    pub unpriced_calls: i64,
    /// Tokens of the calls.
    pub tokens: TokenUsage,
}

impl Cost {
    /// Adds another part's cost to this total.
    pub fn add(&mut self, other: &Cost) {
        self.usd += other.usd;
        self.calls += other.calls;
        self.unpriced_calls += other.unpriced_calls;
        self.partial = self.unpriced_calls > 0;
        self.tokens.add(&other.tokens);
    }
}

/// What one session may spend: its investigation stops calling tools and
/// concludes once it has spent this much, and later stages do not start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// Estimated US dollars of the session's LLM calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0)))]
    pub max_cost_usd: Option<f64>,
    /// Tokens of the session's LLM calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_tokens: Option<i64>,
}

impl Budget {
    /// Whether it sets no limit.
    pub fn is_unlimited(&self) -> bool {
        self.max_cost_usd.is_none() && self.max_tokens.is_none()
    }

    /// How `spent` exhausts this budget, said for people; none while it
    /// does not.
    pub fn exhausted_by(&self, spent: &Cost) -> Option<String> {
        if let Some(max) = self.max_cost_usd
            && spent.usd >= max
        {
            return Some(format!(
                "the session's budget of ${} is spent (${} so far)",
                usd(max),
                usd(spent.usd)
            ));
        }
        if let Some(max) = self.max_tokens
            && spent.tokens.total_tokens >= max
        {
            return Some(format!(
                "the session's budget of {max} tokens is spent ({} so far)",
                spent.tokens.total_tokens
            ));
        }
        None
    }
}

/// What a session has spent so far, as a running execution asks for it
/// before each iteration (the store's sums in both modes).
#[async_trait::async_trait]
pub trait SpendGauge: Send + Sync {
    /// The session's cost so far; `None` when it cannot be read (the
    /// execution then goes on: a budget never fails an investigation).
    async fn spent(&self) -> Option<Cost>;
}

/// An amount in US dollars as people read it: four decimals (a call can
/// cost a hundredth of a cent), without a currency sign.
pub fn usd(amount: f64) -> String {
    format!("{amount:.4}")
}

struct Rates {
    input: f64,
    output: f64,
    thinking: f64,
    cached_input: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: i64, cached: i64, output: i64, thinking: i64) -> TokenUsage {
        TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output + thinking,
            thinking_tokens: thinking,
            cached_input_tokens: cached,
        }
    }

    fn long_context() -> ModelPrice {
        ModelPrice {
            input_per_million: 1.25,
            output_per_million: 10.0,
            thinking_per_million: None,
            cached_input_per_million: Some(0.31),
            tiers: vec![PriceTier {
                above_input_tokens: 200_000,
                input_per_million: 2.5,
                output_per_million: 15.0,
                thinking_per_million: None,
                cached_input_per_million: Some(0.625),
            }],
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn cost_table() {
        let flat = ModelPrice::new(3.0, 15.0);
        let reasoning = ModelPrice {
            thinking_per_million: Some(60.0),
            ..ModelPrice::new(1.0, 4.0)
        };
        let cases: [(&str, &ModelPrice, TokenUsage, f64); 9] = [
            ("nothing costs nothing", &flat, usage(0, 0, 0, 0), 0.0),
            (
                "input and output",
                &flat,
                usage(1_000, 0, 500, 0),
                0.003 + 0.0075,
            ),
            (
                "one million each",
                &flat,
                usage(1_000_000, 0, 1_000_000, 0),
                18.0,
            ),
            // Thinking at the output price when the model has no own price.
            ("thinking as output", &flat, usage(0, 0, 100, 900), 0.015),
            (
                "thinking priced apart",
                &reasoning,
                usage(0, 0, 1_000, 1_000),
                0.004 + 0.06,
            ),
            // 100k prompt of which 40k cached: 60k × 1.25 + 40k × 0.31.
            (
                "cached input",
                &long_context(),
                usage(100_000, 40_000, 0, 0),
                0.075 + 0.0124,
            ),
            // Exactly at the threshold is still the base tier.
            (
                "at the threshold",
                &long_context(),
                usage(200_000, 0, 1_000, 0),
                0.25 + 0.01,
            ),
            // Above it, every token of the call at the tier's prices.
            (
                "above the threshold",
                &long_context(),
                usage(200_001, 1, 1_000, 1_000),
                (200_000.0 * 2.5 + 0.625 + 2_000.0 * 15.0) / 1e6,
            ),
            // A provider reporting more cached than prompt tokens: all cached.
            (
                "cached capped",
                &long_context(),
                usage(10, 50, 0, 0),
                10.0 * 0.31 / 1e6,
            ),
        ];
        for (name, price, u, want) in cases {
            let got = price.cost(&u);
            assert!(close(got, want), "{name}: got {got}, want {want}");
        }
    }

    #[test]
    fn the_largest_passed_tier_applies() {
        let mut p = ModelPrice::new(1.0, 1.0);
        p.tiers = vec![
            PriceTier {
                above_input_tokens: 10,
                input_per_million: 2.0,
                output_per_million: 2.0,
                thinking_per_million: None,
                cached_input_per_million: None,
            },
            PriceTier {
                above_input_tokens: 100,
                input_per_million: 3.0,
                output_per_million: 3.0,
                thinking_per_million: None,
                cached_input_per_million: None,
            },
        ];
        assert!(close(p.cost(&usage(5, 0, 0, 0)), 5e-6));
        assert!(close(p.cost(&usage(50, 0, 0, 0)), 100e-6));
        assert!(close(p.cost(&usage(500, 0, 0, 0)), 1500e-6));
        assert_eq!(p.problem(), None);
        // Listed in any order.
        p.tiers.reverse();
        assert!(close(p.cost(&usage(500, 0, 0, 0)), 1500e-6));
        assert_eq!(p.problem(), None);
        p.tiers[0].above_input_tokens = 10;
        assert!(p.problem().is_some());
    }

    #[test]
    fn a_budget_is_exhausted_by_cost_or_tokens() {
        let mut spent = Cost {
            usd: 0.049,
            ..Cost::default()
        };
        spent.tokens.total_tokens = 9_999;
        let budget = Budget {
            max_cost_usd: Some(0.05),
            max_tokens: Some(10_000),
        };
        assert_eq!(budget.exhausted_by(&spent), None);
        spent.usd = 0.05;
        let why = budget.exhausted_by(&spent).unwrap();
        assert!(why.contains("$0.0500"), "{why}");
        spent.usd = 0.0;
        spent.tokens.total_tokens = 10_000;
        assert!(
            budget
                .exhausted_by(&spent)
                .unwrap()
                .contains("10000 tokens")
        );
        assert!(Budget::default().is_unlimited());
        assert_eq!(Budget::default().exhausted_by(&spent), None);
    }

    #[test]
    fn bad_prices_are_named() {
        assert!(ModelPrice::new(-1.0, 1.0).problem().is_some());
        assert!(ModelPrice::new(f64::NAN, 1.0).problem().is_some());
        assert_eq!(ModelPrice::new(0.0, 0.0).problem(), None);
    }
}
