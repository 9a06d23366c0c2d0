//! Halts: loopgate ended a turn or a session, or refused to go on with it (issue 39). Each has a
//! stable reason code a script can branch on, and the last one is kept with its evidence in the
//! session's state, so `loopgate status --json`, `loopgate halted` and the out-of-band notice all
//! read one record. The person's `/loopgate continue` marks it continued and lifts what keeps the
//! session stopped, keeping everything else loopgate knows (a `reset` would forget it).

use crate::judge::state::SessionState;
pub use crate::judge::state::{Halt, Halts, StopLoop};
use crate::protocol::payload::{clip, Event};
use crate::protocol::verdict::{Action, Severity, Verdict};

/// The reason codes, stable across versions: scripts compare them.
pub mod code {
    /// A turn ended at the loop ceiling (refusals walked into).
    pub const TURN_CEILING: &str = "turn_ceiling";
    /// A prompt refused: too many turns of the session ended at the ceiling.
    pub const SESSION_CEILING: &str = "session_ceiling";
    /// Stage 3 of the ladder ended the run where nobody attends.
    pub const LADDER: &str = "ladder";
    /// A Code Mode script repeated the same step until the run was ended.
    pub const SCRIPT: &str = "script";
    /// The circuit breaker is open: tool calls paused, or a re-fed prompt refused.
    pub const BREAKER: &str = "breaker";
    /// An outer loop's next session was refused at its first prompt.
    pub const OUTER_LOOP: &str = "outer_loop";
    /// The Stop gate spent its blocks and the turn ended with nothing changed: not finished.
    pub const STOP_GATE: &str = "stop_gate";
    /// Another hook kept blocking the turn's end with nothing done between: loopgate ended it.
    pub const STOP_HOOK_LOOP: &str = "stop_hook_loop";
    /// The loop budget was spent: the session paused and asked, or its turn ended.
    pub const BUDGET: &str = "budget";
    /// Every code, for the docs' test.
    pub const ALL: [&str; 9] = [
        TURN_CEILING,
        SESSION_CEILING,
        LADDER,
        SCRIPT,
        BREAKER,
        OUTER_LOOP,
        STOP_GATE,
        STOP_HOOK_LOOP,
        BUDGET,
    ];
}

/// The evidence key the deciding verdict carries when it halts; the event log shows it.
pub const EVIDENCE_KEY: &str = "halt";

/// Blocks of the turn's end by another hook, in a row with nothing done between, that loopgate
/// lets pass; the next Stop ends the turn. Claude Code ends it itself after 9, Codex never.
pub const STOP_LOOP_BOUND: u32 = 5;

/// At a Stop of the main agent (before loopgate's own gate judges it): another hook has blocked
/// the turn's end [`STOP_LOOP_BOUND`] times in a row with nothing done between (no call, no new
/// state; the CLI's `stop_hook_active` says each Stop follows a block), so this Stop ends the
/// turn. A Stop loopgate's own gate blocked is never counted: that gate bounds itself.
pub fn other_hooks_loop(
    state: &mut SessionState,
    stop_hook_active: Option<bool>,
    now_ms: u64,
) -> Option<Verdict> {
    let (turn, calls, states) = (
        state.turn.number,
        state.totals.calls,
        state.world.novel_states,
    );
    let l = &mut state.halts.stop_loop;
    // Gemini CLI turns a blocked AfterAgent's reason into a new prompt (BeforeAgent), so its
    // next Stop is in a new turn: the CLI's own "this Stop follows a block" keeps it one loop.
    let same_turn = l.turn == turn || stop_hook_active == Some(true);
    let again = same_turn && l.calls == calls && l.states == states && l.stops > 0;
    // The CLI says whether the previous Stop was blocked; a Stop after our own block is ours.
    if !again || l.ours || stop_hook_active == Some(false) {
        *l = StopLoop {
            turn,
            stops: 1,
            ours: false,
            first_ms: now_ms,
            calls,
            states,
        };
        return None;
    }
    l.stops += 1;
    let blocked = l.stops - 1;
    if blocked < STOP_LOOP_BOUND {
        return None;
    }
    let secs = now_ms.saturating_sub(l.first_ms) / 1000;
    let reason = format!(
        "loopgate: another hook blocked the end of this turn {blocked} times in a row in {secs} s \
         with nothing done between (no tool call, no change), so loopgate ends the turn here: a \
         Stop hook that always blocks would keep the model answering at a cost. Check the other \
         Stop hooks in the CLI's settings."
    );
    let v = Verdict::new(STOP_HOOK_LOOP, Action::Halt, Severity::Critical, reason)
        .with("blocked_by_other_hooks", blocked)
        .with("seconds", secs);
    // Once said, the loop starts counting again (the CLI may still send a Stop).
    *l = StopLoop::default();
    Some(v)
}

/// After loopgate's own gate judged a Stop: whether it blocked it.
pub fn stop_judged(state: &mut SessionState, blocked: bool) {
    state.halts.stop_loop.ours = blocked;
}

/// The reason code of a verdict that halts, or `None` for one that does not (a denial of one
/// call, a warning, a Stop block that keeps the turn going).
pub fn code_of(event: Event, v: &Verdict) -> Option<&'static str> {
    use crate::judge::{ceiling, detectors};
    let has = |k: &str| v.evidence.contains_key(k);
    Some(match v.detector {
        ceiling::NAME if event == Event::UserPromptSubmit && v.action >= Action::Deny => {
            code::SESSION_CEILING
        }
        // The verdict that ends the turn carries the count of ended turns; the refusals of the
        // calls after it only repeat the end.
        ceiling::NAME if v.action == Action::Halt || has("ended_turns") => code::TURN_CEILING,
        // The ladder's name (`engine::LADDER`; the engine uses this module).
        "ladder" if v.action == Action::Halt => code::LADDER,
        detectors::script::NAME if v.action == Action::Halt => code::SCRIPT,
        detectors::breaker::NAME if v.action >= Action::Deny => code::BREAKER,
        OUTER_LOOP if v.action >= Action::Deny => code::OUTER_LOOP,
        detectors::progress::NAME if has(GATE_SPENT) => code::STOP_GATE,
        STOP_HOOK_LOOP if v.action >= Action::Deny => code::STOP_HOOK_LOOP,
        crate::judge::budget::NAME if v.action >= Action::Deny => code::BUDGET,
        _ => return None,
    })
}

/// The outer loop's detector (`store::outer_loop`, a layer below this one).
const OUTER_LOOP: &str = "outer_loop";

/// The evidence key of the Stop gate's verdict when its blocks are spent and the turn ends.
pub const GATE_SPENT: &str = "gate_spent";
/// The detector that ends another hook's endless Stop blocks.
pub const STOP_HOOK_LOOP: &str = "stop_hook_loop";

/// Records the strongest halting verdict of this call as the session's last halt, and marks it
/// in its evidence for the event log. Returns the halt when it is new (not the same halt of the
/// same turn said again), for the notice.
pub fn note(
    state: &mut SessionState,
    event: Event,
    verdicts: &mut [Verdict],
    now_ms: u64,
) -> Option<Halt> {
    let v = verdicts
        .iter_mut()
        .filter(|v| code_of(event, v).is_some())
        .max_by_key(|v| (v.action, v.severity))?;
    let code = code_of(event, v)?;
    v.evidence.insert(EVIDENCE_KEY.into(), code.into());
    let turn = state.turn.number;
    let same = state
        .halts
        .last
        .as_ref()
        .is_some_and(|h| h.code == code && h.turn == turn && h.stands());
    if same {
        return None;
    }
    let halt = Halt {
        code: code.into(),
        at_ms: now_ms,
        turn,
        event: event.name().into(),
        detector: v.detector.into(),
        reason: clip(&crate::judge::redact::mask(&v.reason), 1000),
        evidence: serde_json::Value::Object(v.evidence.clone()).to_string(),
        continued_ms: None,
    };
    state.halts.last = Some(halt.clone());
    state.halts.count += 1;
    Some(halt)
}

/// The person's `/loopgate continue`: the last halt is marked continued, and what keeps the
/// session stopped is lifted (the ceiling's count of ended turns, an open breaker, an
/// escalation waiting to end the run, the prompts the breaker would refuse again). The ledger,
/// the world state, the totals and the history stay. Returns the halt continued, if any stood.
pub fn continue_session(state: &mut SessionState, now_ms: u64) -> Option<Halt> {
    let halt = state.halts.last.as_mut().filter(|h| h.stands())?;
    halt.continued_ms = Some(now_ms);
    let halt = halt.clone();
    if halt.code == code::BUDGET {
        crate::judge::budget::forgive(&mut state.budget);
    }
    state.ceiling.ended = false;
    state.ceiling.halted = false;
    state.ceiling.refusals = 0;
    state.ceiling.ended_turns = 0;
    state.turn.escalation = None;
    state.turn.stop_blocks = 0;
    state.failed_prompts.clear();
    state.halts.stop_loop = StopLoop::default();
    crate::judge::detectors::breaker::reset(&mut state.breaker, now_ms);
    Some(halt)
}

/// How the person goes on after a halt, per CLI (in the notice and `loopgate halted`).
pub fn how_to_resume(session: &str, claude: bool) -> String {
    if claude {
        format!(
            "type `/loopgate continue` in the session (or run `loopgate continue --session \
             {session}`), then your next prompt"
        )
    } else {
        format!("run `loopgate continue --session {session}`, then send your next prompt")
    }
}

#[cfg(test)]
mod tests {
    /// Scripts read the codes from the docs' table: every code is there.
    #[test]
    fn every_reason_code_is_in_the_docs_table() {
        let doc = include_str!("../../docs/commands.md");
        for code in super::code::ALL {
            assert!(
                doc.contains(&format!("| `{code}` |")),
                "docs/commands.md lacks the halt code {code}"
            );
        }
    }
}
