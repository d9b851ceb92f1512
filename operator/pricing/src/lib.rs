//! TARSy's LLM price book: what a model's tokens cost, by provider and model.
//!
//! The crate bundles a snapshot, `price-book.json` (next to `Cargo.toml`),
//! converted from LiteLLM's public model price map
//! (`model_prices_and_context_window.json`) as the `litellm` package on PyPI
//! ships it in its wheel (`litellm/model_prices_and_context_window_backup.json`).
//! The snapshot is litellm 1.110.2, taken 2026-11-28; the file itself says
//! which ([`PriceBook::version`], [`PriceBook::date`]).
//!
//! It keeps the chat models of the providers TARSy serves (google, vertexai,
//! openai, anthropic, xai) in TARSy's own format: [`ModelPrice`] in US dollars
//! per million tokens, with long-context tiers. The conversion is
//! [`PriceBook::from_catalog`], which says which of LiteLLM's keys it reads.
//!
//! Regenerate the snapshot with `scripts/price-book.sh [litellm-version]`:
//! it downloads the pinned litellm wheel, extracts the catalog and runs
//! `cargo run -p tarsy-pricing --example price_book -- <catalog.json> <version>`.
//!
//! At run time, [`current`] is the book in use: the bundled one until
//! [`install`] replaces it, e.g. with the book [`refreshed`] fetches.

#![warn(missing_docs)]

mod catalog;
mod refresh;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock, RwLock};

use serde::{Deserialize, Serialize};
use tarsy_core::{ModelPrice, ProviderType};

pub use refresh::{install_catalog, refreshed};

/// The bundled snapshot, in TARSy's price book format.
const BUNDLED: &str = include_str!("../price-book.json");

/// Why a catalog or price book could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    /// Not JSON, or not the expected shape.
    #[error("invalid price JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A provider name in a price book that is not a [`ProviderType`].
    #[error("unknown provider {0:?} in the price book")]
    UnknownProvider(String),
    /// A price that fails [`ModelPrice::problem`].
    #[error("price of {provider} model {model:?}: {problem}")]
    BadPrice {
        /// Provider of the model.
        provider: ProviderType,
        /// The model.
        model: String,
        /// What is wrong with its price.
        problem: String,
    },
    /// A catalog without a single usable chat model of a served provider.
    #[error("the catalog has no priced chat model of a served provider")]
    Empty,
}

/// Prices of models by provider, with where they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceBook {
    source: String,
    version: String,
    date: String,
    models: HashMap<ProviderType, BTreeMap<String, ModelPrice>>,
}

/// The price book file: `{"source", "sourceVersion", "date", "models":
/// {provider: {model: ModelPrice}}}`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BookFile {
    source: String,
    source_version: String,
    date: String,
    models: BTreeMap<String, BTreeMap<String, ModelPrice>>,
}

impl PriceBook {
    /// Converts LiteLLM's model price map (per-token costs) into a book:
    /// chat models of the served providers, prices per million tokens,
    /// LiteLLM's provider prefixes stripped from model names. Entries
    /// without input and output costs or with invalid prices are left out.
    /// The book's version and date are empty: see [`PriceBook::with_origin`].
    ///
    /// Keys read of an entry (all others are ignored): `litellm_provider`
    /// (`gemini` → google, `vertex_ai-language-models` → vertexai, `openai`,
    /// `anthropic`, `xai`), `mode` (`chat` only), `input_cost_per_token`,
    /// `output_cost_per_token`, `output_cost_per_reasoning_token` (thinking),
    /// `cache_read_input_token_cost` (cached prompt), and the long-context
    /// tiers `input_cost_per_token_above_<N>k_tokens`,
    /// `output_cost_per_token_above_<N>k_tokens`,
    /// `cache_read_input_token_cost_above_<N>k_tokens`,
    /// `output_cost_per_reasoning_token_above_<N>k_tokens` (N = 128, 200,
    /// 272...: a tier above N × 1000 prompt tokens). Batch, flex, priority,
    /// audio, image and cache-write prices are not read.
    pub fn from_catalog(json: &str) -> Result<PriceBook, PricingError> {
        catalog::convert(json)
    }

    /// The same book, saying where it comes from (a source, its version,
    /// the date it was taken, `YYYY-MM-DD`).
    pub fn with_origin(
        mut self,
        source: impl Into<String>,
        version: impl Into<String>,
        date: impl Into<String>,
    ) -> PriceBook {
        self.source = source.into();
        self.version = version.into();
        self.date = date.into();
        self
    }

    /// The snapshot bundled in the binary. Should it ever fail to parse (a
    /// test guards against it), an empty book: no price is better than a
    /// crash.
    pub fn bundled() -> &'static PriceBook {
        static BOOK: OnceLock<PriceBook> = OnceLock::new();
        BOOK.get_or_init(|| {
            PriceBook::from_json(BUNDLED).unwrap_or_else(|e| {
                tracing::error!(error = %e, "the bundled price book is invalid; no prices known");
                PriceBook {
                    source: "none (invalid bundled price book)".into(),
                    version: String::new(),
                    date: String::new(),
                    models: HashMap::new(),
                }
            })
        })
    }

    /// The price of `model` served by `provider`.
    ///
    /// The exact name first, then the name without a leading `models/` (as
    /// Google SDKs write it) and without a `<provider>/` prefix (ours or
    /// LiteLLM's: `google/`, `gemini/`, `vertexai/`, `vertex_ai/`...). A
    /// vertexai model the book has no vertex price for takes the google
    /// price of the same name. Nothing fuzzier: a wrong price is worse than
    /// none. `scripted` never has a price.
    pub fn price(&self, provider: ProviderType, model: &str) -> Option<&ModelPrice> {
        let names = lookup_names(provider, model);
        let find = |p: ProviderType| {
            let models = self.models.get(&p)?;
            names.iter().find_map(|n| models.get(*n))
        };
        match provider {
            ProviderType::Scripted => None,
            ProviderType::Vertexai => {
                find(ProviderType::Vertexai).or_else(|| find(ProviderType::Google))
            }
            _ => find(provider),
        }
    }

    /// The models of `provider` and their prices, by name.
    pub fn models(&self, provider: ProviderType) -> impl Iterator<Item = (&str, &ModelPrice)> {
        self.models
            .get(&provider)
            .into_iter()
            .flatten()
            .map(|(m, p)| (m.as_str(), p))
    }

    /// Where the prices come from (a catalog, a URL, a cache file).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The version of the source (`litellm 1.110.2`); may be empty.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// When the prices were taken, `YYYY-MM-DD`; may be empty.
    pub fn date(&self) -> &str {
        &self.date
    }

    /// The book in TARSy's price book format: pretty-printed, keys sorted,
    /// the same text for the same book, ending with a newline.
    pub fn to_json(&self) -> String {
        let file = BookFile {
            source: self.source.clone(),
            source_version: self.version.clone(),
            date: self.date.clone(),
            models: self
                .models
                .iter()
                .map(|(p, m)| (p.as_str().to_string(), m.clone()))
                .collect(),
        };
        let mut text = serde_json::to_string_pretty(&file)
            .unwrap_or_else(|e| unreachable!("a price book always serializes: {e}"));
        text.push('\n');
        text
    }

    /// Reads a book in TARSy's price book format, checking every price.
    fn from_json(json: &str) -> Result<PriceBook, PricingError> {
        let file: BookFile = serde_json::from_str(json)?;
        let mut models = HashMap::new();
        for (name, prices) in file.models {
            let provider: ProviderType = name
                .parse()
                .map_err(|_| PricingError::UnknownProvider(name.clone()))?;
            if let Some((model, problem)) = prices
                .iter()
                .find_map(|(m, p)| p.problem().map(|problem| (m, problem)))
            {
                return Err(PricingError::BadPrice {
                    provider,
                    model: model.clone(),
                    problem,
                });
            }
            models.insert(provider, prices);
        }
        Ok(PriceBook {
            source: file.source,
            version: file.source_version,
            date: file.date,
            models,
        })
    }
}

/// The names `model` is looked up by, in order: as given, then without a
/// provider prefix and a `models/` prefix.
fn lookup_names(provider: ProviderType, model: &str) -> Vec<&str> {
    let prefixes: &[&str] = match provider {
        ProviderType::Google => &["google/", "gemini/"],
        ProviderType::Vertexai => &["vertexai/", "vertex_ai/"],
        ProviderType::Openai => &["openai/"],
        ProviderType::Anthropic => &["anthropic/"],
        ProviderType::Xai => &["xai/"],
        ProviderType::Scripted => &[],
    };
    let unprefixed = prefixes
        .iter()
        .find_map(|p| model.strip_prefix(p))
        .unwrap_or(model);
    let normalized = unprefixed.strip_prefix("models/").unwrap_or(unprefixed);
    let mut names = vec![model];
    for name in [unprefixed, normalized] {
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

fn current_slot() -> &'static RwLock<Arc<PriceBook>> {
    static CURRENT: OnceLock<RwLock<Arc<PriceBook>>> = OnceLock::new();
    CURRENT.get_or_init(|| RwLock::new(Arc::new(PriceBook::bundled().clone())))
}

/// The price book in use in this process: the bundled one until
/// [`install`] replaces it.
pub fn current() -> Arc<PriceBook> {
    let slot = current_slot().read().unwrap_or_else(|e| e.into_inner());
    Arc::clone(&slot)
}

/// Makes `book` the one [`current`] returns from now on.
pub fn install(book: PriceBook) {
    tracing::info!(
        source = book.source(),
        version = book.version(),
        date = book.date(),
        "price book installed"
    );
    let mut slot = current_slot().write().unwrap_or_else(|e| e.into_inner());
    *slot = Arc::new(book);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_book_is_valid_and_canonical() {
        let book = PriceBook::from_json(BUNDLED).expect("bundled book parses");
        assert_eq!(&book, PriceBook::bundled());
        for provider in [
            ProviderType::Google,
            ProviderType::Openai,
            ProviderType::Anthropic,
        ] {
            assert!(book.models(provider).next().is_some(), "{provider}");
        }
        for provider in ProviderType::ALL {
            for (model, price) in book.models(*provider) {
                assert_eq!(price.problem(), None, "{provider}/{model}");
            }
        }
        assert!(book.version().starts_with("litellm "));
        assert_eq!(book.date().len(), "YYYY-MM-DD".len());
        // Checked in as generated: the same text again.
        assert_eq!(book.to_json(), BUNDLED);
        assert!(
            book.price(ProviderType::Google, "models/gemini-2.5-pro")
                .is_some()
        );
    }

    #[test]
    fn bad_books_are_errors() {
        let wrap = |models: &str| {
            format!(r#"{{"source": "s", "sourceVersion": "v", "date": "d", "models": {models}}}"#)
        };
        assert!(matches!(
            PriceBook::from_json(&wrap(r#"{"mistral": {}}"#)),
            Err(PricingError::UnknownProvider(p)) if p == "mistral"
        ));
        assert!(matches!(
            PriceBook::from_json(&wrap(
                r#"{"openai": {"m": {"inputPerMillion": -1, "outputPerMillion": 1}}}"#
            )),
            Err(PricingError::BadPrice { model, .. }) if model == "m"
        ));
        assert!(matches!(
            PriceBook::from_json(&wrap(
                r#"{"openai": {"m": {"inputPerMillion": 1, "outputPerMillion": 1, "extra": 1}}}"#
            )),
            Err(PricingError::Json(_))
        ));
        let ok = PriceBook::from_json(&wrap(
            r#"{"openai": {"m": {"inputPerMillion": 1, "outputPerMillion": 2}}}"#,
        ))
        .expect("valid book");
        assert_eq!(
            ok.price(ProviderType::Openai, "m"),
            Some(&ModelPrice::new(1.0, 2.0))
        );
        assert_eq!(PriceBook::from_json(&ok.to_json()).ok(), Some(ok));
    }

    #[test]
    fn install_replaces_the_current_book() {
        assert!(current().models(ProviderType::Google).next().is_some());
        let book = PriceBook::from_catalog(
            r#"{"m": {"litellm_provider": "openai", "mode": "chat",
                "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}"#,
        )
        .expect("converts")
        .with_origin("test", "1", "2026-01-01");
        install(book.clone());
        assert_eq!(*current(), book);
        install(PriceBook::bundled().clone());
        assert_eq!(&*current(), PriceBook::bundled());
    }
}
