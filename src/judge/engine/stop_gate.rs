//! The Stop gate: a turn that tried to change the work and changed nothing may not end yet.

use super::turns::{baseline, end_turn};
use super::Ctx;
use crate::judge::detectors::{self, Stop};
use crate::judge::state::SessionState;
use crate::protocol::payload::Payload;
use crate::protocol::verdict::Verdict;

pub(super) fn stop(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
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
    } else {
        end_at_stop(state, ctx);
    }
    verdicts
}

/// A Stop that lets the turn end judges it for the circuit breaker there, not at the next
/// prompt: `status` and the next prompt see where the session stands as soon as the turn is over,
/// however long until the next one comes.
pub(super) fn end_at_stop(state: &mut SessionState, ctx: &Ctx) {
    let now = baseline(ctx, state.turn.baseline.is_some());
    end_turn(state, now.as_deref(), ctx);
}
