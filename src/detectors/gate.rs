//! The per-turn runtime gate (seed 004), in Claude Code terms. Three signals, escalating:
//! - consecutiveness: the same tool N times in a row with no new result among them → an advisory
//!   hint, the call still runs (a run of calls that keep learning something is ordinary work);
//! - call identity: the same call past a ceiling within the turn, whatever it returned → BLOCKED;
//! - output identity: the same non-trivial successful output from the same call again → BLOCKED.
//!
//! A BLOCKED call is denied without running until the turn ends or a file changes. The seed's
//! tools were narrow (one search API), so it blocked a whole tool; Claude Code's tools are broad
//! (Bash runs anything), so the unit that is BLOCKED here is the call (tool + input). Failures are
//! left to the identical-failure breaker, whose budgets let a transient error be retried; read-only
//! tools get one more repeat, so re-reading an unchanged file once is never blocked; and since a
//! file change starts a new epoch, `git status` before and after an edit is never the same call.

use crate::config::Gate;
use crate::detectors::describe;
use crate::state::{AgentState, Run};
use crate::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "turn_gate";

/// Hint when the same tool has been called `consecutive_warn` times in a row (then every further
/// `consecutive_warn`). Call after updating `agent.same_tool_run`.
pub fn consecutive(agent: &AgentState, tool: &str, cfg: &Gate) -> Option<Verdict> {
    let n = agent.same_tool_run;
    let every = cfg.consecutive_warn.max(1);
    if !cfg.enabled
        || n < every
        || !n.is_multiple_of(every)
        || cfg.consecutive_exempt_tools.iter().any(|t| t == tool)
    {
        return None;
    }
    let reason = format!(
        "loopgate: this is the {n}th {tool} call in a row. If these calls are not getting you closer to the goal, \
         step back: say what you expected, what you got, and try a different approach."
    );
    Some(
        Verdict::new(NAME, Action::Warn, Severity::of_count(n), reason)
            .with("same_tool_in_a_row", n),
    )
}

/// Counts a call about to run against its identity ceiling; blocks it for the turn past it.
pub fn on_call(
    run: &mut Run,
    agent_epoch: u64,
    turn: u32,
    poll: bool,
    cfg: &Gate,
) -> Option<Verdict> {
    if run.epoch_of_calls != agent_epoch {
        run.epoch_of_calls = agent_epoch;
        run.epoch_calls = 0;
    }
    run.epoch_calls += 1;
    if !cfg.enabled || poll || run.epoch_calls <= cfg.identity_ceiling.max(1) {
        return None;
    }
    let reason = format!(
        "loopgate: {} has been called {} times in this turn with nothing changed in between, so it is blocked \
         until the turn ends or a file changes. Use what it already returned, or take a different step.",
        describe(&run.tool, &run.target),
        run.epoch_calls - 1,
    );
    block(run, turn, &reason);
    Some(
        Verdict::new(
            NAME,
            Action::Deny,
            Severity::of_count(run.epoch_calls),
            reason,
        )
        .with("signal", "BLOCK_IDENTITY")
        .with("calls_this_turn", run.epoch_calls - 1),
    )
}

/// Denies a call the gate blocked earlier in this turn and epoch.
pub fn blocked(run: &Run, agent_epoch: u64, turn: u32, cfg: &Gate) -> Option<Verdict> {
    if !cfg.enabled || run.blocked_turn != Some(turn) || run.epoch != agent_epoch {
        return None;
    }
    Some(
        Verdict::new(
            NAME,
            Action::Deny,
            Severity::High,
            run.blocked_reason.clone(),
        )
        .with("signal", "BLOCKED"),
    )
}

/// After a successful call: the same non-trivial output again blocks the call for the turn.
pub fn on_output(run: &mut Run, tool: &str, turn: u32, poll: bool, cfg: &Gate) -> Option<Verdict> {
    let read_only = cfg.read_only_tools.iter().any(|t| t == tool);
    let limit = if read_only {
        cfg.read_only_output_repeats
    } else {
        cfg.output_repeats
    }
    .max(2);
    if !cfg.enabled || poll || run.failed || run.outcome.is_none() || run.count < limit {
        return None;
    }
    let reason = format!(
        "loopgate: {} returned exactly the same output {} times with nothing changed in between; calling it again \
         cannot tell you anything new, so it is blocked until the turn ends or a file changes. Act on what it returned.",
        describe(&run.tool, &run.target),
        run.count,
    );
    let first = run.blocked_turn != Some(turn);
    block(run, turn, &reason);
    first.then(|| {
        Verdict::new(NAME, Action::Warn, Severity::Medium, reason)
            .loop_warning()
            .with("signal", "BLOCK_OUTPUT")
            .with("identical_outputs", run.count)
    })
}

fn block(run: &mut Run, turn: u32, reason: &str) {
    run.blocked_turn = Some(turn);
    run.blocked_reason = reason.to_string();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_ceiling_blocks_past_twenty_then_stays_blocked() {
        let cfg = Gate::default();
        let mut run = Run::default();
        for _ in 0..20 {
            assert!(on_call(&mut run, 0, 1, false, &cfg).is_none());
        }
        assert!(on_call(&mut run, 0, 1, false, &cfg).is_some());
        assert!(blocked(&run, 0, 1, &cfg).is_some());
        assert!(blocked(&run, 0, 2, &cfg).is_none(), "next turn");
        assert!(blocked(&run, 1, 1, &cfg).is_none(), "a file changed");
    }

    #[test]
    fn output_identity_spares_reads_and_failures() {
        let cfg = Gate::default();
        let mut run = Run {
            count: 2,
            outcome: Some("o".into()),
            ..Run::default()
        };
        assert!(
            on_output(&mut run.clone(), "Read", 1, false, &cfg).is_none(),
            "re-reading once"
        );
        assert!(
            on_output(&mut run.clone(), "Bash", 1, true, &cfg).is_none(),
            "polls"
        );
        run.failed = true;
        assert!(
            on_output(&mut run.clone(), "Bash", 1, false, &cfg).is_none(),
            "failures"
        );
        run.failed = false;
        assert!(on_output(&mut run, "Bash", 1, false, &cfg).is_some());
    }

    #[test]
    fn consecutiveness_hints_every_fifth_and_spares_edits() {
        let cfg = Gate::default();
        let mut a = AgentState {
            same_tool_run: 5,
            ..AgentState::default()
        };
        assert!(consecutive(&a, "Bash", &cfg).is_some());
        assert!(consecutive(&a, "Edit", &cfg).is_none());
        a.same_tool_run = 6;
        assert!(consecutive(&a, "Bash", &cfg).is_none());
    }
}
