//! The design's proxy level (seed 000) for Claude Code's Code Mode: one model step is a script,
//! and every tool call the script makes fires the ordinary tool hooks, told apart only by its
//! `tool_use_id` prefix (`toolu_cc_`; observed, `code-mode-and-config-change-observed.md`).
//! - **Each call** is judged by an answer-blind sliding window, [`WINDOW_CALLS`] identical
//!   `(tool, input)` calls within [`WINDOW_MS`] are refused whatever they returned, plus the
//!   repeat rule; the agent-level rules (different calls with one answer, edits, cycles) do not
//!   judge a script's calls one by one, so hundreds of distinct reads are ordinary work.
//! - **The step as a whole** is judged at its PostToolBatch, which lists every call the script
//!   made: the same calls with the same results as an earlier step of the turn is the design's
//!   "full stagnation" (warn at [`STEP_WARN`], end the run at [`STEP_STOP`]).

use crate::judge::state::Ceiling;
use crate::protocol::verdict::{Action, Severity, Verdict};
use crate::util::canon::Digest16;

pub const NAME: &str = "script";

pub const WINDOW_CALLS: usize = 20;
pub const WINDOW_MS: u64 = 60_000;
/// Script calls remembered for the window (the state stays bounded whatever a script does).
const MAX_WINDOW: usize = 256;
/// Steps of the turn remembered.
const MAX_STEPS: usize = 16;
pub const STEP_WARN: usize = 3;
pub const STEP_STOP: usize = 5;

/// Whether a call was made by a Code Mode script, not by the model directly.
pub fn is_script_call(tool_use_id: &str) -> bool {
    tool_use_id.starts_with("toolu_cc_") || tool_use_id.starts_with("repl_")
}

/// Before a script's call: refused when the window already holds [`WINDOW_CALLS`] - 1 identical
/// calls (this one would be the 20th). Every call is remembered, refused or not.
pub fn window(c: &mut Ceiling, key: Digest16, now_ms: u64, what: &str) -> Option<Verdict> {
    c.script_calls
        .retain(|(_, at)| now_ms.saturating_sub(*at) < WINDOW_MS && *at <= now_ms);
    let same = c.script_calls.iter().filter(|(k, _)| *k == key).count() + 1;
    if c.script_calls.len() >= MAX_WINDOW {
        c.script_calls.pop_front();
    }
    c.script_calls.push_back((key, now_ms));
    if same < WINDOW_CALLS {
        return None;
    }
    let reason = format!(
        "LOOP_DETECTED (loopgate): your script has called {what} {same} times within {} seconds. \
         A loop in the script is repeating one call whatever it returns: stop the loop, use the \
         answer you have, or tell the user what blocks you.",
        WINDOW_MS / 1000
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::of_count(same as u32), reason)
            .loop_warning()
            .with("identical_calls", same as u64)
            .with("window_seconds", WINDOW_MS / 1000),
    )
}

/// At a script step's PostToolBatch: `signature` is the step's calls and results; the same step
/// again in the turn is stagnation.
pub fn step(c: &mut Ceiling, turn: u32, signature: Digest16, calls: usize) -> Option<Verdict> {
    c.script_steps.retain(|(t, _)| *t == turn);
    let same = c
        .script_steps
        .iter()
        .filter(|(_, s)| *s == signature)
        .count()
        + 1;
    if c.script_steps.len() >= MAX_STEPS {
        c.script_steps.pop_front();
    }
    c.script_steps.push_back((turn, signature));
    if same < STEP_WARN {
        return None;
    }
    let stop = same >= STEP_STOP;
    let reason = format!(
        "LOOP_DETECTED (loopgate): this script step made the same {calls} calls with the same \
         results as {} earlier step{} of this turn, and nothing changed. {}",
        same - 1,
        if same == 2 { "" } else { "s" },
        if stop {
            "The run ends here: tell the user what you tried and what blocks you."
        } else {
            "Running the script again will not tell you anything new: change the approach, or \
             stop and tell the user what blocks you."
        }
    );
    let action = if stop { Action::Halt } else { Action::Warn };
    Some(
        Verdict::new(NAME, action, Severity::of_count(same as u32 + 2), reason)
            .loop_warning()
            .with("same_steps", same as u64)
            .with("calls", calls as u64),
    )
}

/// A Code Mode step as a whole (the design's agent level): its PostToolBatch lists every call
/// the script made; the same calls with the same results again in the turn is stagnation.
pub fn after_batch(b: &super::Batch, g: &mut super::Gates) -> Option<Verdict> {
    let scripted = |bc: &&crate::protocol::payload::BatchCall| {
        bc.tool_use_id.as_deref().is_some_and(is_script_call)
    };
    if !b.main || !b.calls.iter().any(|bc| scripted(&bc)) {
        return None;
    }
    let mut pairs: Vec<[u8; 32]> = b
        .calls
        .iter()
        .filter(scripted)
        .map(|bc| {
            let said = crate::judge::outcome::of_failure(&bc.response_text()).digest;
            let mut out = [0u8; 32];
            out[..16].copy_from_slice(
                &crate::judge::call_key::call_key(&bc.tool_name, &bc.tool_input).0,
            );
            out[16..].copy_from_slice(&said.unwrap_or_default().0);
            out
        })
        .collect();
    let n = pairs.len();
    pairs.sort_unstable();
    let mut parts: Vec<&[u8]> = vec![&b.world.0];
    parts.extend(pairs.iter().map(|p| &p[..]));
    step(g.ceiling, b.turn, Digest16::of_parts(&parts), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_twentieth_identical_call_in_a_minute_is_refused_distinct_calls_never() {
        let mut c = Ceiling::default();
        let k = Digest16::of(b"same");
        for i in 0..(WINDOW_CALLS as u64 - 1) {
            assert!(window(&mut c, k, i * 100, "Bash").is_none());
        }
        assert!(window(&mut c, k, 2_000, "Bash").is_some());
        // A minute later the window has emptied.
        assert!(window(&mut c, k, 70_000, "Bash").is_none());
        for i in 0..1_000u64 {
            let d = Digest16::of(&i.to_le_bytes());
            assert!(window(&mut c, d, 80_000 + i, "Read").is_none());
        }
        assert!(c.script_calls.len() <= MAX_WINDOW);
    }

    #[test]
    fn the_same_step_warns_at_three_and_ends_the_run_at_five() {
        let mut c = Ceiling::default();
        let s = Digest16::of(b"step");
        assert!(step(&mut c, 1, s, 25).is_none());
        assert!(step(&mut c, 1, s, 25).is_none());
        assert_eq!(step(&mut c, 1, s, 25).unwrap().action, Action::Warn);
        assert_eq!(step(&mut c, 1, s, 25).unwrap().action, Action::Warn);
        assert_eq!(step(&mut c, 1, s, 25).unwrap().action, Action::Halt);
        assert!(step(&mut c, 2, s, 25).is_none(), "a new turn starts over");
    }
}
