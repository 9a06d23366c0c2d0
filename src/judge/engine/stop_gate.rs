//! The Stop gate: a turn that tried to change the work and changed nothing may not end yet.

use super::turns::{baseline, end_turn};
use super::Ctx;
use crate::judge::detectors::{self, Stop};
use crate::judge::halt;
use crate::judge::state::SessionState;
use crate::protocol::payload::Payload;
use crate::protocol::verdict::{Action, Severity, Verdict};

pub(super) fn stop(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    if ctx.caps.stop_end && ctx.enforced() {
        if let Some(v) = halt::other_hooks_loop(state, p.stop_hook_active, ctx.now_ms) {
            end_at_stop(state, ctx);
            return vec![v];
        }
    }
    let verdicts = gate(state, p, ctx);
    halt::stop_judged(
        state,
        !verdicts.is_empty() && ctx.enforced() && !spent_only(&verdicts),
    );
    verdicts
}

/// Whether the only verdict is the gate's note that its blocks are spent (which blocks nothing).
fn spent_only(verdicts: &[Verdict]) -> bool {
    verdicts.iter().all(|v| v.action < Action::Deny)
}

/// loopgate's own Stop gate.
fn gate(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    // Under an OPEN breaker the agent was told to summarise and stop: let it.
    if state.breaker.state == crate::judge::state::BreakerState::Open {
        end_at_stop(state, ctx);
        return Vec::new();
    }
    // Progress is a state of the work the turn did not start from: a turn whose changes were all
    // undone changed nothing.
    state.turn.changes = u32::from(state.world.id != state.turn.start_world);
    let world = &state.world;
    let changed = |base: &str| ctx.changed_since(base, world);
    let at = Stop {
        config: ctx.config,
        attended: ctx.attended,
        active: p.stop_hook_active == Some(true),
        changed: &changed,
    };
    let verdicts: Vec<Verdict> = detectors::AT_STOP
        .iter()
        .filter_map(|(_, at_stop)| at_stop(&mut state.turn, &at))
        .collect();
    if !verdicts.is_empty() && ctx.enforced() {
        state.turn.stop_blocks += 1;
        return verdicts;
    }
    let spent = spent(state, ctx);
    end_at_stop(state, ctx);
    verdicts.into_iter().chain(spent).collect()
}

/// The gate blocked this turn's end and its blocks are spent, and the turn still changed
/// nothing: it ends unfinished. Nothing is said to the agent (a warning at Stop would make it go
/// on); the halt is recorded for the person and for scripts.
fn spent(state: &SessionState, ctx: &Ctx) -> Option<Verdict> {
    let t = &state.turn;
    if !ctx.enforced() || t.stop_blocks == 0 || t.progress != Some(false) {
        return None;
    }
    let reason = format!(
        "loopgate: the Stop gate blocked the end of this turn {} time{} and it still changed \
         nothing under the project, so the turn ended unfinished ({} of {} file edits failed or \
         were rejected).",
        t.stop_blocks,
        if t.stop_blocks == 1 { "" } else { "s" },
        t.edit_failures,
        t.edit_attempts.max(t.edit_failures),
    );
    Some(
        Verdict::new(
            detectors::progress::NAME,
            Action::Warn,
            Severity::High,
            reason,
        )
        .with(crate::judge::halt::GATE_SPENT, true)
        .with("stop_blocks", t.stop_blocks)
        .with("edit_failures", t.edit_failures)
        .with("edit_attempts", t.edit_attempts),
    )
}

/// A Stop that lets the turn end judges it for the circuit breaker there, not at the next
/// prompt: `status` and the next prompt see where the session stands as soon as the turn is over,
/// however long until the next one comes.
pub(super) fn end_at_stop(state: &mut SessionState, ctx: &Ctx) {
    let now = baseline(ctx, state.turn.baseline.is_some());
    end_turn(state, now.as_deref(), ctx);
}
