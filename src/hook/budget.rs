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
use crate::replay::spend;
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
    if !b.enabled || !budget::follows(event) {
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
                .map(|t| spend::of(&spend::claude(&t), since, u64::MAX, prices))
                .unwrap_or_default();
            // Claude Code's own figure, where loopgate's status line recorded it, prices what the
            // table cannot (a model it does not list, a transcript it cannot read): the dollars
            // between two loop calls are its difference. Only then: the status line is redrawn
            // with the screen, so in a fast loop it lags the calls (seen with the real CLI: ten
            // loop calls in 4 s and no redraw) and would hide what the loop spent.
            let live =
                dir.and_then(|d| crate::store::budget::read_live(d, &call.payload.session_id));
            if let (Some(now), Some(mark)) = (live, state.budget.live_mark) {
                if now >= mark && s.usd == 0.0 {
                    s.usd = now - mark;
                }
            }
            state.budget.live_mark = live;
            s
        }
        Agent::Codex => tail()
            .map(|t| spend::of(&spend::codex(&t), since, u64::MAX, prices))
            .unwrap_or_default(),
        // No usage loopgate can read: one loop call is taken to cost the configured estimate.
        _ if call.event == Event::PreToolUse => spend::estimate(&cfg.budget, call.now_ms),
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
