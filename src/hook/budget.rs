//! The loop budget's step of a hook call: after the engine judged the call, follow the loop
//! window, and for a call inside a loop only, read what the model spent since the last loop call
//! and weigh it against the bounds (`judge::budget`). An ordinary call does nothing more here:
//! no file is read, nothing is written.
//!
//! Where the figure comes from, per CLI: Claude Code's transcript (each assistant message's
//! `usage` and `model`, priced by the table), or the difference of its own session cost between
//! two loop calls where loopgate's status line recorded it; Codex's rollout (`token_count`
//! events, priced by the turn's model); elsewhere an estimate per loop call
//! (`[budget] estimate_*`).

use super::{Call, Told};
use crate::config::Config;
use crate::judge::budget::{self, Spend};
use crate::judge::state::SessionState;
use crate::protocol::dialect::Agent;
use crate::protocol::payload::Event;
use crate::protocol::verdict::{Action, Verdict};
use crate::replay::cost::ms;
use crate::replay::pricing::{price_with, Usage};
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The most of a transcript's end a loop call reads: the responses since the previous loop call.
const TAIL_BYTES: u64 = 256 << 10;

/// Runs the budget for this call; its verdict, if any, joins the others.
pub(super) fn step(
    call: &Call,
    dir: Option<&Path>,
    state: &mut SessionState,
    cfg: &Config,
    attended: Option<bool>,
    verdicts: &mut Vec<Verdict>,
    told: &mut Told,
) {
    let b = &cfg.budget;
    let event = call.event;
    if !b.enabled
        || !matches!(
            event,
            Event::PreToolUse
                | Event::PostToolUse
                | Event::PostToolUseFailure
                | Event::PostToolBatch
                | Event::Stop
        )
    {
        return;
    }
    if !budget::follow(state, &call.payload.agent_key(), verdicts, call.now_ms) {
        return;
    }
    // Each model response is read once: at the call it made, or at the turn's end.
    if matches!(event, Event::PreToolUse | Event::Stop) {
        let spend = spend(call, dir, state, cfg);
        let day = if spend.usd > 0.0 || spend.tokens > 0 {
            dir.and_then(|d| {
                let (day, problem) =
                    crate::store::budget::add_to_day(d, call.now_ms, spend.usd, spend.tokens);
                told.problems.extend(problem);
                day
            })
        } else {
            None
        };
        budget::add(&mut state.budget, &spend, day);
    }
    let today = crate::store::budget::date_of(call.now_ms);
    let caps = call.agent.caps();
    if let Some(v) = budget::weigh(&mut state.budget, b, event, attended, caps, &today) {
        if v.action == Action::Warn {
            told.budget = Some((v.reason.clone(), Value::Object(v.evidence.clone())));
            // A refusal of the same call would hide the warning: the agent reads it there.
            if let Some(d) = crate::protocol::verdict::strongest_mut(verdicts)
                .filter(|d| d.action > Action::Warn)
            {
                d.reason = format!("{} {}", d.reason, v.reason.trim_start_matches("loopgate: "));
            }
        }
        verdicts.push(v);
    }
}

/// What the model spent since the last response counted, inside the loop's window.
fn spend(call: &Call, dir: Option<&Path>, state: &mut SessionState, cfg: &Config) -> Spend {
    let b = &state.budget;
    let since = b.since_ms.unwrap_or(call.now_ms).max(b.counted_ms + 1);
    let prices = &cfg.budget.prices;
    let tail = || {
        call.payload
            .transcript_path
            .as_deref()
            .and_then(|p| tail(Path::new(p)))
    };
    match call.agent {
        Agent::Claude => {
            let mut s = tail()
                .map(|t| claude(&t, since, prices))
                .unwrap_or_default();
            // Claude Code's own figure, where loopgate's status line recorded it: the dollars
            // between two loop calls are its difference (tokens still from the transcript).
            let live =
                dir.and_then(|d| crate::store::budget::read_live(d, &call.payload.session_id));
            if let (Some(now), Some(mark)) = (live, state.budget.live_mark) {
                if now >= mark {
                    s.usd = now - mark;
                }
            }
            state.budget.live_mark = live;
            s
        }
        Agent::Codex => tail().map(|t| codex(&t, since, prices)).unwrap_or_default(),
        // No usage loopgate can read: one loop call is taken to cost the configured estimate.
        _ if call.event == Event::PreToolUse => {
            let u = Usage {
                input: cfg.budget.estimate_input_tokens,
                output: cfg.budget.estimate_output_tokens,
                ..Usage::default()
            };
            Spend {
                usd: price_with(&cfg.budget.estimate_model, &u, prices).unwrap_or(0.0),
                tokens: u.total(),
                responses: 1,
                latest_ms: call.now_ms,
            }
        }
        _ => Spend::default(),
    }
}

/// The last [`TAIL_BYTES`] of a regular file, from its first whole line; `None` when it cannot
/// be read (the budget then counts nothing for this call: it fails open).
fn tail(path: &Path) -> Option<String> {
    let mut f = crate::platform::open_read_nonblocking(path).ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let from = meta.len().saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::with_capacity((meta.len() - from) as usize);
    f.take(TAIL_BYTES).read_to_end(&mut buf).ok()?;
    let start = if from > 0 {
        buf.iter()
            .position(|&c| c == b'\n')
            .map_or(buf.len(), |i| i + 1)
    } else {
        0
    };
    Some(String::from_utf8_lossy(&buf[start..]).into_owned())
}

/// Claude Code's assistant messages from `since` on: one response per `message.id` (it writes a
/// line per content block, each with the message's usage), priced by its model.
fn claude(text: &str, since: u64, prices: &crate::config::BudgetPrices) -> Spend {
    let mut responses: Vec<(String, u64, String, Usage)> = Vec::new();
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
        match responses.last_mut() {
            Some(last) if !id.is_empty() && last.0 == id => last.3 = usage,
            _ => responses.push((
                id,
                ms(&v),
                msg["model"].as_str().unwrap_or("").to_string(),
                usage,
            )),
        }
    }
    let mut s = Spend::default();
    for (_, at, model, usage) in responses.iter().filter(|r| r.1 >= since) {
        s.usd += price_with(model, usage, prices).unwrap_or(0.0);
        s.tokens += usage.total();
        s.responses += 1;
        s.latest_ms = s.latest_ms.max(*at);
    }
    s
}

/// Codex's `token_count` events from `since` on (each model request's `last_token_usage`; an
/// event repeating the previous total is the same request said again), priced by the model of
/// the turn they belong to.
fn codex(text: &str, since: u64, prices: &crate::config::BudgetPrices) -> Spend {
    let mut s = Spend::default();
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
        if p["type"] != "token_count" {
            continue;
        }
        let info = &p["info"];
        let now_total = info["total_token_usage"]["total_tokens"].as_u64();
        if now_total.is_some() && now_total == total {
            continue;
        }
        total = now_total;
        let at = ms(&v);
        if at < since || info["last_token_usage"].is_null() {
            continue;
        }
        let usage = Usage::of_codex(&info["last_token_usage"]);
        s.usd += price_with(&model, &usage, prices).unwrap_or(0.0);
        s.tokens += usage.total();
        s.responses += 1;
        s.latest_ms = s.latest_ms.max(at);
    }
    s
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
        let s = claude(&text, since, &Default::default());
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
        let s = codex(&text, 0, &Default::default());
        assert_eq!(s.responses, 2);
        assert_eq!(s.usd, 2.5);
    }
}
