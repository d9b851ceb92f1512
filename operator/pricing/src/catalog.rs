//! Reading LiteLLM's model price map (`model_prices_and_context_window.json`).
//!
//! The catalog is one JSON object: model key → entry. Of an entry, only
//! these keys are read (every other key is ignored):
//!
//! - `litellm_provider`: which provider serves the model; only
//!   `gemini` (→ google), `vertex_ai-language-models` (→ vertexai),
//!   `openai`, `anthropic` and `xai` are kept;
//! - `mode`: only `chat` entries are kept (no embeddings, images, audio,
//!   `responses`-only models...);
//! - `input_cost_per_token`, `output_cost_per_token` (both required);
//! - `output_cost_per_reasoning_token` → thinking price;
//! - `cache_read_input_token_cost` → cached prompt price;
//! - long-context tiers, `N` in thousands of prompt tokens (200k, 128k,
//!   272k...): `input_cost_per_token_above_<N>k_tokens`,
//!   `output_cost_per_token_above_<N>k_tokens`,
//!   `cache_read_input_token_cost_above_<N>k_tokens`,
//!   `output_cost_per_reasoning_token_above_<N>k_tokens`. A tier exists
//!   when its input or output key does; a price it lacks is the base one
//!   (cached: the base cached price, as LiteLLM bills it; thinking: the
//!   tier's output price).
//!
//! Variants priced apart (`*_batches`, `*_flex`, `*_priority`, audio, image,
//! cache writes, search) are not read: TARSy estimates standard calls.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};
use tarsy_core::{ModelPrice, PriceTier, ProviderType};

use crate::{PriceBook, PricingError};

/// What the snapshot and a refreshed book say they come from.
pub(crate) const LITELLM_SOURCE: &str = "LiteLLM model price map \
(model_prices_and_context_window.json; litellm wheel on PyPI: \
litellm/model_prices_and_context_window_backup.json)";

/// The providers we serve: LiteLLM's `litellm_provider`, ours, and the
/// prefix LiteLLM puts on that provider's model keys.
const PROVIDERS: [(&str, ProviderType, &str); 5] = [
    ("gemini", ProviderType::Google, "gemini/"),
    (
        "vertex_ai-language-models",
        ProviderType::Vertexai,
        "vertex_ai/",
    ),
    ("openai", ProviderType::Openai, "openai/"),
    ("anthropic", ProviderType::Anthropic, "anthropic/"),
    ("xai", ProviderType::Xai, "xai/"),
];

const INPUT: &str = "input_cost_per_token";
const OUTPUT: &str = "output_cost_per_token";
const REASONING: &str = "output_cost_per_reasoning_token";
const CACHE_READ: &str = "cache_read_input_token_cost";

/// Converts a LiteLLM catalog; see the module documentation for the keys
/// read. Two keys naming the same model of a provider ("gemini/x" and "x"):
/// the one with LiteLLM's provider prefix wins.
pub(crate) fn convert(json: &str) -> Result<PriceBook, PricingError> {
    let catalog: Map<String, Value> = serde_json::from_str(json)?;
    // (provider, model) → (key had the provider prefix, price)
    let mut found: HashMap<(ProviderType, String), (bool, ModelPrice)> = HashMap::new();
    for (key, entry) in &catalog {
        let Some(entry) = entry.as_object() else {
            continue;
        };
        if entry.get("mode").and_then(Value::as_str) != Some("chat") {
            continue;
        }
        let Some(litellm_provider) = entry.get("litellm_provider").and_then(Value::as_str) else {
            continue;
        };
        let Some(&(_, provider, prefix)) = PROVIDERS.iter().find(|p| p.0 == litellm_provider)
        else {
            continue;
        };
        let Some(price) = entry_price(entry) else {
            continue;
        };
        let (model, prefixed) = match key.strip_prefix(prefix) {
            Some(rest) => (rest, true),
            None => (key.as_str(), false),
        };
        if model.is_empty() {
            continue;
        }
        let slot = (provider, model.to_string());
        match found.get(&slot) {
            Some((had_prefix, _)) if *had_prefix || !prefixed => {}
            _ => {
                found.insert(slot, (prefixed, price));
            }
        }
    }
    if found.is_empty() {
        return Err(PricingError::Empty);
    }
    let mut models: HashMap<ProviderType, BTreeMap<String, ModelPrice>> = HashMap::new();
    for ((provider, model), (_, price)) in found {
        models.entry(provider).or_default().insert(model, price);
    }
    Ok(PriceBook {
        source: LITELLM_SOURCE.to_string(),
        version: String::new(),
        date: String::new(),
        models,
    })
}

/// The price of one chat entry; `None` when it lacks an input or output
/// cost or a price is invalid.
fn entry_price(entry: &Map<String, Value>) -> Option<ModelPrice> {
    let cost = |key: &str| entry.get(key).and_then(Value::as_f64).map(per_million);
    let input = cost(INPUT)?;
    let output = cost(OUTPUT)?;
    let cached = cost(CACHE_READ);

    let mut thresholds: Vec<i64> = entry
        .keys()
        .filter_map(|k| {
            k.strip_prefix(INPUT)
                .or_else(|| k.strip_prefix(OUTPUT))
                .and_then(tier_threshold)
        })
        .collect();
    thresholds.sort_unstable();
    thresholds.dedup();

    let tiers = thresholds
        .into_iter()
        .map(|above| {
            let suffix = format!("_above_{}k_tokens", above / 1000);
            let tier_cost = |key: &str| cost(&format!("{key}{suffix}"));
            PriceTier {
                above_input_tokens: above,
                input_per_million: tier_cost(INPUT).unwrap_or(input),
                output_per_million: tier_cost(OUTPUT).unwrap_or(output),
                thinking_per_million: tier_cost(REASONING),
                cached_input_per_million: tier_cost(CACHE_READ).or(cached),
            }
        })
        .collect();

    let price = ModelPrice {
        input_per_million: input,
        output_per_million: output,
        thinking_per_million: cost(REASONING),
        cached_input_per_million: cached,
        tiers,
    };
    price.problem().is_none().then_some(price)
}

/// The prompt size of a tier key's rest, `_above_<N>k_tokens` → N × 1000;
/// `None` for anything else (`_above_200k_tokens_batches`, `_flex`...).
fn tier_threshold(rest: &str) -> Option<i64> {
    let thousands = rest.strip_prefix("_above_")?.strip_suffix("k_tokens")?;
    if thousands.is_empty() || !thousands.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    thousands.parse::<i64>().ok()?.checked_mul(1000)
}

/// Per-token US dollars → per million tokens, rounded to a millionth of a
/// dollar so that 1.25e-06 gives 1.25, not 1.2499999999999998.
fn per_million(per_token: f64) -> f64 {
    (per_token * 1e12).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-written sample in LiteLLM's format.
    const SAMPLE: &str = r#"{
        "sample_spec": {
            "litellm_provider": "one of https://docs.litellm.ai/docs/providers",
            "mode": "one of: chat, embedding, ...",
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0
        },
        "gemini/gemini-2.5-pro": {
            "litellm_provider": "gemini",
            "mode": "chat",
            "input_cost_per_token": 1.25e-06,
            "output_cost_per_token": 1e-05,
            "cache_read_input_token_cost": 1.25e-07,
            "input_cost_per_token_above_200k_tokens": 2.5e-06,
            "output_cost_per_token_above_200k_tokens": 1.5e-05,
            "cache_read_input_token_cost_above_200k_tokens": 2.5e-07,
            "input_cost_per_token_above_200k_tokens_batches": 1.25e-06,
            "input_cost_per_token_priority": 9e-06,
            "max_input_tokens": 1048576
        },
        "gemini/gemini-2.5-flash": {
            "litellm_provider": "gemini",
            "mode": "chat",
            "input_cost_per_token": 3e-07,
            "output_cost_per_token": 2.5e-06,
            "output_cost_per_reasoning_token": 2.5e-06,
            "cache_read_input_token_cost": 3e-08,
            "input_cost_per_audio_token_above_200k_tokens": 3e-07
        },
        "gemini/gemini-exp": {
            "litellm_provider": "gemini", "mode": "chat",
            "input_cost_per_token": 0, "output_cost_per_token": 0
        },
        "gemini-exp": {
            "litellm_provider": "gemini", "mode": "chat",
            "input_cost_per_token": 3e-07, "output_cost_per_token": 2.5e-06
        },
        "gemini/text-embedding-004": {
            "litellm_provider": "gemini", "mode": "embedding",
            "input_cost_per_token": 1e-07, "output_cost_per_token": 0
        },
        "gemini-2.5-pro": {
            "litellm_provider": "vertex_ai-language-models",
            "mode": "chat",
            "input_cost_per_token": 1.25e-06,
            "output_cost_per_token": 1e-05
        },
        "o3": {
            "litellm_provider": "openai",
            "mode": "chat",
            "input_cost_per_token": 2e-06,
            "output_cost_per_token": 8e-06,
            "output_cost_per_reasoning_token": 1.2e-05,
            "input_cost_per_token_above_128k_tokens": 4e-06,
            "input_cost_per_token_above_272k_tokens": 6e-06,
            "output_cost_per_token_above_272k_tokens": 1.6e-05
        },
        "gpt-image-1": {
            "litellm_provider": "openai", "mode": "image_generation",
            "input_cost_per_token": 5e-06, "output_cost_per_token": 4e-05
        },
        "o1-pro": {
            "litellm_provider": "openai", "mode": "responses",
            "input_cost_per_token": 1.5e-04, "output_cost_per_token": 6e-04
        },
        "gpt-no-output": {
            "litellm_provider": "openai", "mode": "chat",
            "input_cost_per_token": 1e-06
        },
        "gpt-negative": {
            "litellm_provider": "openai", "mode": "chat",
            "input_cost_per_token": -1e-06, "output_cost_per_token": 1e-06
        },
        "gpt-string": {
            "litellm_provider": "openai", "mode": "chat",
            "input_cost_per_token": "cheap", "output_cost_per_token": 1e-06
        },
        "claude-sonnet-4-5": {
            "litellm_provider": "anthropic",
            "mode": "chat",
            "input_cost_per_token": 3e-06,
            "output_cost_per_token": 1.5e-05,
            "cache_read_input_token_cost": 3e-07,
            "cache_creation_input_token_cost": 3.75e-06
        },
        "xai/grok-4": {
            "litellm_provider": "xai", "mode": "chat",
            "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
            "cache_read_input_token_cost": 7.5e-07
        },
        "mistral/mistral-large": {
            "litellm_provider": "mistral", "mode": "chat",
            "input_cost_per_token": 2e-06, "output_cost_per_token": 6e-06
        },
        "vertex_ai/claude-sonnet-4-5": {
            "litellm_provider": "vertex_ai-anthropic_models", "mode": "chat",
            "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05
        },
        "not-an-entry": 42
    }"#;

    fn book() -> PriceBook {
        PriceBook::from_catalog(SAMPLE).expect("sample converts")
    }

    fn tier(above: i64, input: f64, output: f64, cached: Option<f64>) -> PriceTier {
        PriceTier {
            above_input_tokens: above,
            input_per_million: input,
            output_per_million: output,
            thinking_per_million: None,
            cached_input_per_million: cached,
        }
    }

    #[test]
    fn conversion_table() {
        let book = book();
        let with = |input: f64, output: f64, thinking, cached, tiers| ModelPrice {
            input_per_million: input,
            output_per_million: output,
            thinking_per_million: thinking,
            cached_input_per_million: cached,
            tiers,
        };
        let cases: Vec<(&str, ProviderType, &str, Option<ModelPrice>)> = vec![
            (
                "per million, cached, 200k tier; batches/priority ignored",
                ProviderType::Google,
                "gemini-2.5-pro",
                Some(with(
                    1.25,
                    10.0,
                    None,
                    Some(0.125),
                    vec![tier(200_000, 2.5, 15.0, Some(0.25))],
                )),
            ),
            (
                "reasoning price; audio tier ignored",
                ProviderType::Google,
                "gemini-2.5-flash",
                Some(with(0.3, 2.5, Some(2.5), Some(0.03), vec![])),
            ),
            (
                "prefixed key wins over the bare one",
                ProviderType::Google,
                "gemini-exp",
                Some(ModelPrice::new(0.0, 0.0)),
            ),
            (
                "vertex entry of its own",
                ProviderType::Vertexai,
                "gemini-2.5-pro",
                Some(ModelPrice::new(1.25, 10.0)),
            ),
            (
                "tiers sorted; a missing tier price is the base one",
                ProviderType::Openai,
                "o3",
                Some(with(
                    2.0,
                    8.0,
                    Some(12.0),
                    None,
                    vec![
                        tier(128_000, 4.0, 8.0, None),
                        tier(272_000, 6.0, 16.0, None),
                    ],
                )),
            ),
            (
                "cache writes ignored",
                ProviderType::Anthropic,
                "claude-sonnet-4-5",
                Some(with(3.0, 15.0, None, Some(0.3), vec![])),
            ),
            (
                "xai prefix stripped",
                ProviderType::Xai,
                "grok-4",
                Some(with(3.0, 15.0, None, Some(0.75), vec![])),
            ),
            (
                "embedding dropped",
                ProviderType::Google,
                "text-embedding-004",
                None,
            ),
            (
                "image generation dropped",
                ProviderType::Openai,
                "gpt-image-1",
                None,
            ),
            (
                "responses mode dropped",
                ProviderType::Openai,
                "o1-pro",
                None,
            ),
            (
                "no output cost dropped",
                ProviderType::Openai,
                "gpt-no-output",
                None,
            ),
            (
                "negative price dropped",
                ProviderType::Openai,
                "gpt-negative",
                None,
            ),
            (
                "non-numeric price dropped",
                ProviderType::Openai,
                "gpt-string",
                None,
            ),
            (
                "other provider dropped",
                ProviderType::Openai,
                "mistral-large",
                None,
            ),
            (
                "vertex anthropic dropped",
                ProviderType::Vertexai,
                "claude-sonnet-4-5",
                None,
            ),
            ("unknown model", ProviderType::Openai, "gpt-9", None),
            (
                "scripted never priced",
                ProviderType::Scripted,
                "gemini-2.5-pro",
                None,
            ),
        ];
        for (name, provider, model, want) in cases {
            assert_eq!(book.price(provider, model), want.as_ref(), "{name}");
        }
    }

    #[test]
    fn only_served_providers_are_kept() {
        let book = book();
        let names = |p| {
            book.models(p)
                .map(|(m, _)| m.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(ProviderType::Google),
            ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-exp"]
        );
        assert_eq!(names(ProviderType::Vertexai), ["gemini-2.5-pro"]);
        assert_eq!(names(ProviderType::Openai), ["o3"]);
        assert_eq!(names(ProviderType::Anthropic), ["claude-sonnet-4-5"]);
        assert_eq!(names(ProviderType::Xai), ["grok-4"]);
        assert_eq!(names(ProviderType::Scripted), Vec::<String>::new());
    }

    #[test]
    fn lookup_normalization() {
        let book = book();
        let pro = book.price(ProviderType::Google, "gemini-2.5-pro");
        assert!(pro.is_some());
        let cases: [(&str, ProviderType, &str, bool); 10] = [
            (
                "models/ prefix",
                ProviderType::Google,
                "models/gemini-2.5-pro",
                true,
            ),
            (
                "provider prefix",
                ProviderType::Google,
                "google/gemini-2.5-pro",
                true,
            ),
            (
                "LiteLLM prefix",
                ProviderType::Google,
                "gemini/gemini-2.5-pro",
                true,
            ),
            (
                "both",
                ProviderType::Google,
                "google/models/gemini-2.5-pro",
                true,
            ),
            (
                "other provider's prefix",
                ProviderType::Google,
                "openai/gemini-2.5-pro",
                false,
            ),
            (
                "no fuzzy suffix",
                ProviderType::Google,
                "gemini-2.5-pro-001",
                false,
            ),
            (
                "no fuzzy case",
                ProviderType::Google,
                "Gemini-2.5-Pro",
                false,
            ),
            (
                "vertex falls back to google",
                ProviderType::Vertexai,
                "gemini-2.5-flash",
                true,
            ),
            (
                "vertex prefix",
                ProviderType::Vertexai,
                "vertex_ai/gemini-2.5-flash",
                true,
            ),
            (
                "no cross-provider",
                ProviderType::Openai,
                "gemini-2.5-pro",
                false,
            ),
        ];
        for (name, provider, model, found) in cases {
            assert_eq!(book.price(provider, model).is_some(), found, "{name}");
        }
        assert_eq!(
            book.price(ProviderType::Vertexai, "models/gemini-2.5-flash"),
            book.price(ProviderType::Google, "gemini-2.5-flash"),
        );
    }

    #[test]
    fn bad_catalogs_are_errors() {
        assert!(matches!(
            PriceBook::from_catalog("not json"),
            Err(PricingError::Json(_))
        ));
        assert!(matches!(
            PriceBook::from_catalog("[1, 2]"),
            Err(PricingError::Json(_))
        ));
        assert!(matches!(
            PriceBook::from_catalog(r#"{"m": {"litellm_provider": "mistral", "mode": "chat"}}"#),
            Err(PricingError::Empty)
        ));
    }

    #[test]
    fn rounding_and_thresholds() {
        assert_eq!(per_million(1.25e-06), 1.25);
        assert_eq!(per_million(3.75e-08), 0.0375);
        assert_eq!(per_million(2.25e-05), 22.5);
        assert_eq!(tier_threshold("_above_200k_tokens"), Some(200_000));
        assert_eq!(tier_threshold("_above_200k_tokens_batches"), None);
        assert_eq!(tier_threshold("_above_k_tokens"), None);
        assert_eq!(tier_threshold("_above_1hr"), None);
        assert_eq!(tier_threshold("_priority"), None);
    }
}
