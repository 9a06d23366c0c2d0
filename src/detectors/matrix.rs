//! The approach/outcome matrix (seed 000, IronCurtain's step detector). Each finished call is an
//! approach (its identity) with an outcome (its normalised result), each new or seen before:
//!
//! |               | new outcome  | seen outcome |
//! |---------------|--------------|--------------|
//! | new approach  | progress     | stuck        |
//! | seen approach | world changed| stagnation   |
//!
//! Progress and "world changed" reset both streaks. Trivial outcomes are neutral (they are never
//! "seen"), and a file change resets the streaks: edit-then-rerun is a new experiment.

use crate::config::Matrix;
use crate::state::{AgentState, StickyBlock};
use crate::verdict::{Action, Severity, Verdict};
use std::collections::VecDeque;

pub const NAME: &str = "stagnation";
const MAX_SEEN: usize = 256;

fn seen_or_add(set: &mut VecDeque<String>, item: &str) -> bool {
    if set.iter().any(|s| s == item) {
        return true;
    }
    if set.len() >= MAX_SEEN {
        set.pop_front();
    }
    set.push_back(item.to_string());
    false
}

pub fn reset_streaks(agent: &mut AgentState) {
    agent.stagnation = 0;
    agent.stuck = 0;
}

/// Classifies a finished call; warns or sets the sticky block at the thresholds.
pub fn on_outcome(
    agent: &mut AgentState,
    approach: &str,
    outcome: Option<&str>,
    now_ms: u64,
    cfg: &Matrix,
) -> Option<Verdict> {
    let outcome = outcome?;
    let seen_approach = seen_or_add(&mut agent.seen_approaches, approach);
    let seen_outcome = seen_or_add(&mut agent.seen_outcomes, outcome);
    match (seen_approach, seen_outcome) {
        (_, false) => {
            reset_streaks(agent);
            return None;
        }
        (true, true) => {
            agent.stagnation += 1;
            agent.stuck = 0;
        }
        (false, true) => {
            agent.stuck += 1;
            agent.stagnation = 0;
        }
    }
    if !cfg.enabled {
        return None;
    }
    let (kind, n, warn, block) = if agent.stagnation > 0 {
        (
            "the same calls returning the same results",
            agent.stagnation,
            cfg.stagnation_warn,
            cfg.stagnation_block,
        )
    } else {
        (
            "different calls all returning results you have already seen",
            agent.stuck,
            cfg.stuck_warn,
            cfg.stuck_block,
        )
    };
    let signal = if agent.stagnation > 0 {
        "stagnation"
    } else {
        "stuck"
    };
    if n >= block.max(1) {
        let reason = format!(
            "loopgate: {n} steps in a row were {kind}: no progress. Tool calls are now paused until the user \
             answers. Summarise what you tried, what you found, and what blocks you, then stop."
        );
        if agent.blocked.is_none() {
            agent.blocked = Some(StickyBlock {
                detector: NAME.to_string(),
                reason: reason.clone(),
                since_ms: now_ms,
            });
            return Some(
                Verdict::new(NAME, Action::Warn, Severity::High, reason)
                    .loop_warning()
                    .with("signal", signal)
                    .with("streak", n)
                    .with("blocked", true),
            );
        }
        return None;
    }
    // Warn once when the streak reaches the threshold; the next word is the block.
    if n == warn.max(1) {
        let reason = format!(
            "loopgate: {n} steps in a row were {kind} ({n}/{block} before tool calls are paused). \
             Stop repeating: decide what the results tell you and take a different step."
        );
        return Some(
            Verdict::new(NAME, Action::Warn, Severity::of_count(n), reason)
                .loop_warning()
                .with("signal", signal)
                .with("streak", n),
        );
    }
    None
}

/// The sticky block: every call is denied until the next prompt or `loopgate reset`.
pub fn check_blocked(agent: &AgentState) -> Option<Verdict> {
    let b = agent.blocked.as_ref()?;
    Some(
        Verdict::new(NAME, Action::Deny, Severity::High, b.reason.clone())
            .with("signal", "sticky_block")
            .with("since_ms", b.since_ms),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stagnation_warns_at_three_and_blocks_at_five() {
        let cfg = Matrix::default();
        let mut a = AgentState::default();
        assert!(
            on_outcome(&mut a, "A", Some("x"), 0, &cfg).is_none(),
            "progress"
        );
        let fired: Vec<_> = (2..=6)
            .map(|_| {
                on_outcome(&mut a, "A", Some("x"), 0, &cfg).map(|v| v.evidence["streak"].clone())
            })
            .collect();
        assert_eq!(fired[0], None);
        assert_eq!(fired[1], None);
        assert!(fired[2].is_some(), "warn at 3");
        assert_eq!(fired[3], None, "warned once");
        assert!(fired[4].is_some(), "block at 5");
        assert!(check_blocked(&a).is_some());
    }

    #[test]
    fn changing_results_and_trivial_ones_never_count() {
        let cfg = Matrix::default();
        let mut a = AgentState::default();
        for i in 0..30 {
            let o = format!("o{i}");
            assert!(on_outcome(
                &mut a,
                if i % 2 == 0 { "A" } else { "B" },
                Some(&o),
                0,
                &cfg
            )
            .is_none());
            assert!(on_outcome(&mut a, "C", None, 0, &cfg).is_none());
        }
        assert_eq!(a.stagnation + a.stuck, 0);
    }

    #[test]
    fn stuck_counts_new_approaches_with_old_results() {
        let cfg = Matrix::default();
        let mut a = AgentState::default();
        on_outcome(&mut a, "A0", Some("same"), 0, &cfg);
        let warned: Vec<_> = (1..=8)
            .filter_map(|i| on_outcome(&mut a, &format!("A{i}"), Some("same"), 0, &cfg).map(|_| i))
            .collect();
        assert_eq!(warned, vec![5, 8]);
        assert!(a.blocked.is_some());
    }
}
