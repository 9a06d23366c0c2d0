//! What the model spent, read from a CLI's own session file: Claude Code's transcript (each
//! assistant message's `usage` and `model`), Codex's rollout (`token_count` events and the turn's
//! model), else the configured estimate per loop call. The loop budget reads a bounded tail of
//! the file for a loop call; `replay` reads the whole file once.

use super::cost::ms;
use super::pricing::{price_with, Usage};
use crate::config::{Budget, BudgetPrices};
use crate::judge::budget::Spend;
use serde_json::Value;

/// One model response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub at_ms: u64,
    pub model: String,
    pub usage: Usage,
}

/// Claude Code's assistant messages, one per `message.id` (it writes a line per content block,
/// each with the message's usage: the last one stands).
pub fn claude(text: &str) -> Vec<Response> {
    let mut out: Vec<(String, Response)> = Vec::new();
    for line in text.lines() {
        if !line.contains("\"assistant\"") {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["type"] != "assistant" {
            continue;
        }
        let msg = &v["message"];
        let id = msg["id"].as_str().unwrap_or("").to_string();
        let usage = Usage::of(&msg["usage"]);
        match out.last_mut() {
            Some(last) if !id.is_empty() && last.0 == id => last.1.usage = usage,
            _ => out.push((
                id,
                Response {
                    at_ms: ms(&v),
                    model: msg["model"].as_str().unwrap_or("").to_string(),
                    usage,
                },
            )),
        }
    }
    out.into_iter().map(|(_, r)| r).collect()
}

/// Codex's model requests: each `token_count` event's `last_token_usage` (an event repeating the
/// previous total is the same request said again), with the model of the turn it belongs to.
pub fn codex(text: &str) -> Vec<Response> {
    let mut out = Vec::new();
    let mut model = String::new();
    let mut total = None;
    for line in text.lines() {
        if !line.contains("\"token_count\"") && !line.contains("\"turn_context\"") {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let p = &v["payload"];
        if v["type"] == "turn_context" {
            if let Some(m) = p["model"].as_str() {
                model = m.to_string();
            }
            continue;
        }
        if p["type"] != "token_count" || p["info"]["last_token_usage"].is_null() {
            continue;
        }
        let info = &p["info"];
        let now_total = info["total_token_usage"]["total_tokens"].as_u64();
        if now_total.is_some() && now_total == total {
            continue;
        }
        total = now_total;
        out.push(Response {
            at_ms: ms(&v),
            model: model.clone(),
            usage: Usage::of_codex(&info["last_token_usage"]),
        });
    }
    out
}

/// The responses from `since` to `until` (both included), priced.
pub fn of(responses: &[Response], since: u64, until: u64, prices: &BudgetPrices) -> Spend {
    let mut s = Spend::default();
    for r in responses
        .iter()
        .filter(|r| r.at_ms >= since && r.at_ms <= until)
    {
        s.usd += price_with(&r.model, &r.usage, prices).unwrap_or(0.0);
        s.tokens += r.usage.total();
        s.responses += 1;
        s.latest_ms = s.latest_ms.max(r.at_ms);
    }
    s
}

/// One loop call of a CLI whose usage loopgate cannot read: the configured estimate.
pub fn estimate(b: &Budget, now_ms: u64) -> Spend {
    let u = Usage {
        input: b.estimate_input_tokens,
        output: b.estimate_output_tokens,
        ..Usage::default()
    };
    Spend {
        usd: price_with(&b.estimate_model, &u, &b.prices).unwrap_or(0.0),
        tokens: u.total(),
        responses: 1,
        latest_ms: now_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_counts_each_response_once_from_the_loop_on() {
        let line = |id: &str, ts: &str, out: u64| {
            serde_json::json!({"type": "assistant", "timestamp": ts, "message": {
                "id": id, "model": "claude-opus-4-5",
                "usage": {"input_tokens": 1_000_000, "output_tokens": out}}})
            .to_string()
        };
        let text = [
            line("a", "2026-01-01T00:00:00Z", 0),
            line("b", "2026-01-01T00:01:00Z", 0),
            line("b", "2026-01-01T00:01:01Z", 1_000_000),
        ]
        .join("\n");
        let since = 1_767_225_660_000; // 00:01:00
        let s = of(&claude(&text), since, u64::MAX, &BudgetPrices::new());
        assert_eq!(s.responses, 1);
        assert_eq!(s.usd, 30.0);
    }

    #[test]
    fn codex_skips_a_total_said_again() {
        let ev = |ts: &str, total: u64| {
            serde_json::json!({"timestamp": ts, "type": "event_msg", "payload": {"type": "token_count",
                "info": {"total_token_usage": {"total_tokens": total},
                         "last_token_usage": {"input_tokens": 1_000_000, "output_tokens": 0}}}})
            .to_string()
        };
        let ctx = r#"{"timestamp":"2026-01-01T00:00:00Z","type":"turn_context","payload":{"model":"gpt-5.5"}}"#;
        let text = [
            ctx.to_string(),
            ev("2026-01-01T00:00:01Z", 10),
            ev("2026-01-01T00:00:02Z", 10),
            ev("2026-01-01T00:00:03Z", 20),
        ]
        .join("\n");
        let s = of(&codex(&text), 0, u64::MAX, &BudgetPrices::new());
        assert_eq!(s.responses, 2);
        assert_eq!(s.usd, 2.5);
    }
}
