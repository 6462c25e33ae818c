//! Prices, usage and cost. The price table lives here and nowhere else.

use keel_protocol::Usage;
use serde_json::{json, Map, Value};

/// Dollars per million tokens, and the model's context window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens written to the prompt cache (5-minute entries).
    pub cache_write: f64,
    /// Input tokens read from the prompt cache.
    pub cache_read: f64,
    /// Tokens the model can take in one request (input and output).
    pub context_window: u64,
}

/// A price whose cache rates are the usual multiples of the input rate (writes 1.25×, reads
/// 0.1×), for a model with a 200 k-token window.
const fn priced(input: f64, output: f64) -> Price {
    Price {
        input,
        output,
        cache_write: input * 1.25,
        cache_read: input * 0.1,
        context_window: 200_000,
    }
}

/// An OpenAI price: no charge for writing the cache, a per-model rate for reading it.
const fn openai(input: f64, output: f64, cached: f64, context_window: u64) -> Price {
    Price {
        input,
        output,
        cache_write: input,
        cache_read: cached,
        context_window,
    }
}

/// Prices by model family: the first entry whose prefix the model id starts with wins, so
/// more specific prefixes come first. The context windows live here too: one table per model.
const PRICES: &[(&str, Price)] = &[
    ("claude-opus-5", priced(4.0, 20.0)),
    ("claude-opus-4-5", priced(5.0, 25.0)),
    ("claude-opus-4-6", priced(5.0, 25.0)),
    ("claude-opus-4", priced(15.0, 75.0)),
    ("claude-3-opus", priced(15.0, 75.0)),
    ("claude-sonnet", priced(3.0, 15.0)),
    ("claude-3-7-sonnet", priced(3.0, 15.0)),
    ("claude-3-5-sonnet", priced(3.0, 15.0)),
    ("claude-haiku-4", priced(1.0, 5.0)),
    ("claude-3-5-haiku", priced(0.8, 4.0)),
    ("claude-3-haiku", priced(0.25, 1.25)),
    ("gpt-5-nano", openai(0.05, 0.40, 0.005, 400_000)),
    ("gpt-5-mini", openai(0.25, 2.0, 0.025, 400_000)),
    ("gpt-5", openai(1.25, 10.0, 0.125, 400_000)),
    ("gpt-4.1-nano", openai(0.10, 0.40, 0.025, 1_047_576)),
    ("gpt-4.1-mini", openai(0.40, 1.60, 0.10, 1_047_576)),
    ("gpt-4.1", openai(2.0, 8.0, 0.50, 1_047_576)),
    ("gpt-4o-mini", openai(0.15, 0.60, 0.075, 128_000)),
    ("gpt-4o", openai(2.50, 10.0, 1.25, 128_000)),
    ("o4-mini", openai(1.10, 4.40, 0.275, 200_000)),
    ("o3", openai(2.0, 8.0, 0.50, 200_000)),
];

/// What an unknown model is charged: the highest known rate, so a budget always binds; and a
/// conservative context window, so compaction comes early rather than too late.
pub const UNKNOWN_MODEL_PRICE: Price = Price {
    context_window: 128_000,
    ..priced(15.0, 75.0)
};

/// The price of `model`, and whether it was found in the table.
pub fn price_of(model: &str) -> (Price, bool) {
    // `openai/gpt-5` and a gateway's `openai/gpt-4o` are priced as the model after the slash.
    let model = model.rsplit('/').next().unwrap_or(model);
    // Bedrock's ids (`us.anthropic.claude-sonnet-4-5-20250929-v1:0`, also the last part of an
    // inference-profile ARN) are priced as the Claude model they name; Vertex's
    // (`claude-sonnet-4-5@20250929`) already start with it.
    let model = match model.split_once("anthropic.") {
        Some((geo, rest)) if geo.len() <= 8 && !geo.contains(':') => rest,
        _ => model,
    };
    PRICES
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map(|(_, p)| (*p, true))
        .unwrap_or((UNKNOWN_MODEL_PRICE, false))
}

/// The cost in dollars of `usage` on `model`.
pub fn cost_of(model: &str, usage: &Usage) -> f64 {
    let (p, _) = price_of(model);
    let m = 1_000_000.0;
    usage.input_tokens as f64 * p.input / m
        + usage.cache_creation_input_tokens as f64 * p.cache_write / m
        + usage.cache_read_input_tokens as f64 * p.cache_read / m
        + usage.output_tokens as f64 * p.output / m
}

/// Usage and cost accumulated per model over a session.
#[derive(Clone, Debug, Default)]
pub struct CostTracker {
    per_model: Vec<(String, Usage, f64)>,
    unknown_models: Vec<String>,
}

impl CostTracker {
    /// Record one reply's usage.
    pub fn add(&mut self, model: &str, usage: &Usage) {
        let cost = cost_of(model, usage);
        if !price_of(model).1 && !self.unknown_models.iter().any(|m| m == model) {
            self.unknown_models.push(model.to_owned());
        }
        match self.per_model.iter_mut().find(|(m, _, _)| m == model) {
            Some((_, u, c)) => {
                u.add(usage);
                *c += cost;
            }
            None => self.per_model.push((model.to_owned(), usage.clone(), cost)),
        }
    }

    /// Total dollars so far.
    pub fn total_usd(&self) -> f64 {
        self.per_model.iter().fold(0.0, |acc, (_, _, c)| acc + c)
    }

    /// Models priced at the fallback rate because the table does not know them.
    pub fn unknown_models(&self) -> &[String] {
        &self.unknown_models
    }

    /// Summed usage, shaped like the result frame's `usage`.
    pub fn usage_json(&self) -> Value {
        let mut total = Usage::default();
        for (_, u, _) in &self.per_model {
            total.add(u);
        }
        json!({
            "input_tokens": total.input_tokens,
            "cache_creation_input_tokens": total.cache_creation_input_tokens,
            "cache_read_input_tokens": total.cache_read_input_tokens,
            "output_tokens": total.output_tokens,
        })
    }

    /// Per-model usage and cost, shaped like the result frame's `modelUsage`.
    pub fn model_usage_json(&self) -> Value {
        let mut out = Map::new();
        for (model, u, cost) in &self.per_model {
            let (price, known) = price_of(model);
            out.insert(
                model.clone(),
                json!({
                    "inputTokens": u.input_tokens,
                    "outputTokens": u.output_tokens,
                    "cacheReadInputTokens": u.cache_read_input_tokens,
                    "cacheCreationInputTokens": u.cache_creation_input_tokens,
                    "webSearchRequests": 0,
                    "costUSD": cost,
                    "contextWindow": price.context_window,
                    "priceKnown": known,
                }),
            );
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
            ..Usage::default()
        }
    }

    #[test]
    fn matches_reference_pricing() {
        // The reference CLI charged 5238 in + 59 out on claude-opus-5-5 at $0.022132.
        let c = cost_of("claude-opus-5-5", &usage(5238, 59));
        assert!((c - 0.022132).abs() < 1e-9, "{c}");
    }

    #[test]
    fn cloud_model_ids_are_priced_as_their_claude_model() {
        let sonnet = price_of("claude-sonnet-4-5").0;
        for id in [
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "claude-sonnet-4-5@20250929",
        ] {
            assert_eq!(price_of(id), (sonnet, true), "{id}");
        }
        assert_eq!(
            price_of("eu.anthropic.claude-opus-4-5-20251101-v1:0").0,
            price_of("claude-opus-4-5").0
        );
    }

    #[test]
    fn unknown_models_are_never_free() {
        let (p, known) = price_of("some-new-model");
        assert!(!known);
        assert_eq!(p, UNKNOWN_MODEL_PRICE);
        let mut t = CostTracker::default();
        t.add("some-new-model", &usage(1000, 0));
        assert!(t.total_usd() > 0.0);
        assert_eq!(t.unknown_models(), ["some-new-model"]);
        assert_eq!(t.model_usage_json()["some-new-model"]["priceKnown"], false);
    }
}
