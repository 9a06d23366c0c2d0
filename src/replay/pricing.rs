//! What model tokens cost: a list-price table by model id prefix, which the person's
//! `[budget.prices]` overrides. Shared by `report`'s loop cost and the loop budget. Every figure
//! priced here is an estimate: list prices, not the person's contract.

use crate::config::Price;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// Tokens of one or more model responses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
    pub cache_read: u64,
    pub output: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input + self.cache_write_5m + self.cache_write_1h + self.cache_read + self.output
    }

    pub fn add(&mut self, o: &Usage) {
        self.input += o.input;
        self.cache_write_5m += o.cache_write_5m;
        self.cache_write_1h += o.cache_write_1h;
        self.cache_read += o.cache_read;
        self.output += o.output;
    }

    /// A Claude (Anthropic API) `usage` object.
    pub fn of(u: &Value) -> Usage {
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        let write = n(&u["cache_creation_input_tokens"]);
        let h1 = n(&u["cache_creation"]["ephemeral_1h_input_tokens"]).min(write);
        Usage {
            input: n(&u["input_tokens"]),
            cache_write_5m: write - h1,
            cache_write_1h: h1,
            cache_read: n(&u["cache_read_input_tokens"]),
            output: n(&u["output_tokens"]),
        }
    }

    /// A Codex rollout's `token_count` usage (`last_token_usage`): its input counts the cached
    /// part too, its output the reasoning.
    pub fn of_codex(u: &Value) -> Usage {
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        let cached = n("cached_input_tokens").min(n("input_tokens"));
        Usage {
            input: n("input_tokens") - cached,
            cache_read: cached,
            output: n("output_tokens"),
            ..Usage::default()
        }
    }
}

/// List prices in US dollars per million tokens: input, output (cache writes cost 1.25× input for
/// 5 minutes, 2× for an hour; cache reads 0.1×). The first model id prefix that matches applies,
/// so a longer prefix comes before a shorter one. Models released after the date are priced as
/// their family's latest known model (`claude-opus-5-5` as Opus 4.5, `gpt-5.5` as GPT-5) until
/// the table learns better: set `[budget.prices]` for your own.
pub const PRICES_DATE: &str = "2025-11-24";
pub const PRICES: &[(&str, f64, f64)] = &[
    ("claude-opus-4-5", 5.0, 25.0),
    ("claude-opus-4-1", 15.0, 75.0),
    ("claude-opus-4-2025", 15.0, 75.0),
    ("claude-opus-5", 5.0, 25.0),
    ("claude-sonnet-4-5", 3.0, 15.0),
    ("claude-sonnet-4-2025", 3.0, 15.0),
    ("claude-sonnet-5", 3.0, 15.0),
    ("claude-3-7-sonnet", 3.0, 15.0),
    ("claude-haiku-4-5", 1.0, 5.0),
    ("claude-3-5-haiku", 0.8, 4.0),
    ("gpt-5-mini", 0.25, 2.0),
    ("gpt-5-nano", 0.05, 0.4),
    ("gpt-5", 1.25, 10.0),
    ("gemini-2.5-flash-lite", 0.1, 0.4),
    ("gemini-2.5-flash", 0.3, 2.5),
    ("gemini-2.5-pro", 1.25, 10.0),
    ("gemini-3-pro", 2.0, 12.0),
    ("gemini-", 1.25, 10.0),
    ("qwen3-coder", 1.0, 5.0),
];

/// The list price of `usage` on `model`, if the model is in [`PRICES`].
pub fn price(model: &str, u: &Usage) -> Option<f64> {
    price_with(model, u, &BTreeMap::new())
}

/// [`price`], the person's `[budget.prices]` first (the longest prefix that matches).
pub fn price_with(model: &str, u: &Usage, over: &BTreeMap<String, Price>) -> Option<f64> {
    let mine = over
        .iter()
        .filter(|(p, _)| model.starts_with(p.as_str()))
        .max_by_key(|(p, _)| p.len())
        .map(|(_, p)| (p.input, p.output));
    let (input, output) = mine.or_else(|| {
        PRICES
            .iter()
            .find(|(p, _, _)| model.starts_with(p))
            .map(|(_, i, o)| (*i, *o))
    })?;
    let per = |tokens: u64, rate: f64| tokens as f64 * rate / 1e6;
    Some(
        per(u.input, input)
            + per(u.cache_write_5m, input * 1.25)
            + per(u.cache_write_1h, input * 2.0)
            + per(u.cache_read, input * 0.1)
            + per(u.output, output),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_persons_price_wins_and_longer_prefixes_first() {
        let u = Usage {
            input: 1_000_000,
            ..Usage::default()
        };
        assert_eq!(price("gpt-5-mini-2025", &u), Some(0.25));
        assert_eq!(price("gpt-5.5", &u), Some(1.25));
        let mut over = BTreeMap::new();
        over.insert(
            "gpt-5.5".to_string(),
            Price {
                input: 2.0,
                output: 8.0,
            },
        );
        assert_eq!(price_with("gpt-5.5", &u, &over), Some(2.0));
        assert_eq!(price_with("mystery", &u, &over), None);
    }

    #[test]
    fn codex_usage_splits_the_cached_input() {
        let u = Usage::of_codex(&serde_json::json!({
            "input_tokens": 20967, "cached_input_tokens": 19328, "output_tokens": 154
        }));
        assert_eq!((u.input, u.cache_read, u.output), (1639, 19328, 154));
    }
}
