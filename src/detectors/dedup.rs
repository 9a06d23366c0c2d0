//! Layer 1: repeated calls. A call is denied when the same call has already returned the same
//! result `max_identical` times with nothing changed in between, so a test re-run after an edit,
//! or a poll whose output moves, is never stopped. `strict` mode restores the design's plain count.

use crate::clock::time_of_day;
use crate::config::{Dedup, DedupMode};
use crate::detectors::describe;
use crate::outcome::{ErrorClass, Outcome};
use crate::state::Run;
use crate::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "dedup";

pub fn exempt(cfg: &Dedup, tool: &str) -> bool {
    !cfg.enabled || cfg.exempt_tools.iter().any(|t| t == tool)
}

/// Judges a call about to run, before it is counted.
pub fn check(run: &Run, agent_epoch: u64, cfg: &Dedup) -> Option<Verdict> {
    if run.total == 0 {
        return None;
    }
    let max = cfg.max_identical.max(1);
    let (repeats, verdict_text) = match cfg.mode {
        DedupMode::Strict if run.total >= max => (
            run.total,
            format!(
                "loopgate: {} has already been called {} times in this session (first at {}); the limit is {}. \
                 Do not call it again: use what it returned, change the command, or tell the user what blocks you.",
                describe(&run.tool, &run.target),
                run.total,
                time_of_day(run.first_ms),
                max
            ),
        ),
        DedupMode::Outcome if run.count >= max && run.epoch == agent_epoch => (
            run.count,
            repeat_message(run),
        ),
        _ => return None,
    };
    Some(
        Verdict::new(
            NAME,
            Action::Deny,
            Severity::of_count(repeats + 1),
            verdict_text,
        )
        .with("identical_calls", repeats)
        .with("limit", max)
        .with(
            "mode",
            if cfg.mode == DedupMode::Strict {
                "strict"
            } else {
                "outcome"
            },
        ),
    )
}

fn repeat_message(run: &Run) -> String {
    format!(
        "loopgate: {} has run {} times in a row since {} and returned the same result each time, \
         with no file changed in between, so running it again will tell you nothing new. \
         Change something first (fix what the output points to, or try a different command), or tell the user what is blocking you.",
        describe(&run.tool, &run.target),
        run.count,
        time_of_day(run.streak_ms),
    )
}

/// Folds a finished call's outcome into its identity's streak. `call_epoch` is the epoch the call
/// started in: a change between two identical calls makes the second a new experiment.
///
/// Transient failures (a 503, a reset connection) are expected to change by themselves: they never
/// count as the same result again here; the identical-failure breaker gives them their own budget.
pub fn record(run: &mut Run, outcome: &Outcome, call_epoch: u64, now_ms: u64) {
    let transient = outcome.error_class == Some(ErrorClass::Transient);
    let same = !outcome.is_trivial()
        && !transient
        && run.count > 0
        && run.outcome == outcome.digest
        && run.epoch == call_epoch;
    run.failed = outcome.failed();
    if same {
        run.count += 1;
    } else {
        run.count = 1;
        run.outcome = outcome.digest.clone();
        run.epoch = call_epoch;
        run.streak_ms = now_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{of_failure, of_success};
    use serde_json::json;

    use crate::state::AgentState;

    fn check_k(a: &AgentState, cfg: &Dedup) -> Option<Verdict> {
        check(a.runs.get("k")?, a.epoch, cfg)
    }

    fn agent_with(n: u32, outcome: &Outcome, epoch: u64) -> AgentState {
        let mut a = AgentState::default();
        for i in 0..n {
            let r = a.run_mut("k", "Bash", "npm test", i as u64);
            r.total += 1;
            record(r, outcome, epoch, i as u64);
        }
        a
    }

    #[test]
    fn fourth_identical_call_with_same_result_is_denied() {
        let cfg = Dedup::default();
        let fail = of_failure("Exit code 1\nboom");
        assert!(check_k(&agent_with(2, &fail, 0), &cfg).is_none());
        let v = check_k(&agent_with(3, &fail, 0), &cfg).expect("deny");
        assert_eq!(v.action, Action::Deny);
        assert!(
            v.reason
                .contains("Bash `npm test` has run 3 times in a row"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn changed_outcome_or_epoch_restarts_the_count() {
        let cfg = Dedup::default();
        let mut a = agent_with(2, &of_failure("Exit code 1\n3 failed"), 0);
        record(
            a.runs.get_mut("k").unwrap(),
            &of_failure("Exit code 1\n2 failed"),
            0,
            9,
        );
        assert_eq!(a.runs["k"].count, 1);
        let mut a = agent_with(3, &of_failure("x"), 0);
        a.epoch = 1; // a file changed since
        assert!(check_k(&a, &cfg).is_none());
        record(a.runs.get_mut("k").unwrap(), &of_failure("x"), 1, 9);
        assert_eq!(a.runs["k"].count, 1);
    }

    #[test]
    fn trivial_results_never_repeat() {
        let empty = of_success("Bash", Some(&json!({"stdout": "", "stderr": ""})));
        assert!(check_k(&agent_with(10, &empty, 0), &Dedup::default()).is_none());
    }

    #[test]
    fn strict_counts_every_call() {
        let cfg = Dedup {
            mode: DedupMode::Strict,
            ..Dedup::default()
        };
        let mut a = AgentState::default();
        for (i, text) in ["a", "b", "c"].iter().enumerate() {
            let r = a.run_mut("k", "Bash", "x", 0);
            r.total += 1;
            record(r, &of_failure(text), i as u64, 0);
        }
        assert!(check_k(&a, &cfg).is_some());
    }
}
