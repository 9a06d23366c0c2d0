//! Identical-failure circuit breaker (seed 002): the same call failing the same way. Each error
//! class has a retry budget — transient errors deserve retries, deterministic ones do not — and
//! once a signature has spent it, the next identical call is denied with a LOOP_DETECTED message.
//!
//! Signature = call identity + error class. Errors of unknown class also carry their normalised
//! text: without a class to go on, only the same text says "the same failure" (a test run whose
//! failure count changes is not repeating itself).

use crate::clock::time_of_day;
use crate::config::IdenticalFailure;
use crate::detectors::describe;
use crate::outcome::{ErrorClass, Outcome};
use crate::state::{AgentState, FailureSig};
use crate::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "identical_failure";
const MAX_SIGS: usize = 64;

fn retries(cfg: &IdenticalFailure, class: ErrorClass) -> u32 {
    match class {
        ErrorClass::Transient => cfg.transient_retries,
        ErrorClass::Deterministic => cfg.deterministic_retries,
        ErrorClass::Unknown => cfg.unknown_retries,
    }
}

fn prune(agent: &mut AgentState, now_ms: u64, cfg: &IdenticalFailure) {
    let ttl = cfg.prune_after_minutes * 60_000;
    // A clock that went backwards makes ages negative: keep those records rather than guess.
    agent
        .failure_sigs
        .retain(|_, s| now_ms.saturating_sub(s.last_ms) <= ttl);
}

/// Records a failure of the call `key` that started in `epoch`.
#[allow(clippy::too_many_arguments)]
pub fn on_failure(
    agent: &mut AgentState,
    key: &str,
    tool: &str,
    target: &str,
    outcome: &Outcome,
    epoch: u64,
    now_ms: u64,
    cfg: &IdenticalFailure,
) {
    prune(agent, now_ms, cfg);
    let class = outcome.error_class.unwrap_or_default();
    let sig = match class {
        ErrorClass::Unknown => format!("{key}:{}", outcome.digest.as_deref().unwrap_or("")),
        c => format!("{key}:{}", c.name()),
    };
    if !agent.failure_sigs.contains_key(&sig) && agent.failure_sigs.len() >= MAX_SIGS {
        if let Some(old) = agent
            .failure_sigs
            .iter()
            .min_by_key(|(_, s)| s.last_ms)
            .map(|(k, _)| k.clone())
        {
            agent.failure_sigs.remove(&old);
        }
    }
    let s = agent.failure_sigs.entry(sig).or_insert_with(|| FailureSig {
        key: key.to_string(),
        tool: tool.to_string(),
        target: target.to_string(),
        class,
        first_ms: now_ms,
        epoch,
        ..FailureSig::default()
    });
    // A file changed since the last failure: this one is a new experiment.
    if s.epoch != epoch {
        s.count = 0;
        s.epoch = epoch;
        s.first_ms = now_ms;
    }
    s.count += 1;
    s.last_ms = now_ms;
    s.error = outcome.preview.clone();
}

/// A success of the same call ends its failure signatures.
pub fn on_success(agent: &mut AgentState, key: &str) {
    agent.failure_sigs.retain(|_, s| s.key != key);
}

/// Denies a call whose identical failures have spent their class's budget.
pub fn check(
    agent: &AgentState,
    key: &str,
    now_ms: u64,
    cfg: &IdenticalFailure,
) -> Option<Verdict> {
    if !cfg.enabled {
        return None;
    }
    let ttl = cfg.prune_after_minutes * 60_000;
    let s = agent
        .failure_sigs
        .values()
        .filter(|s| s.key == key && s.epoch == agent.epoch)
        .filter(|s| now_ms.saturating_sub(s.last_ms) <= ttl)
        .filter(|s| s.count > retries(cfg, s.class))
        .max_by_key(|s| s.count)?;
    let reason = format!(
        "LOOP_DETECTED (loopgate): {} has failed {} times with the same {} error (first {}, last {}): «{}». \
         Retrying it unchanged will fail again. Options: fix the arguments or what the error points to, skip this step, \
         or ask the user how to proceed.",
        describe(&s.tool, &s.target),
        s.count,
        s.class.name(),
        time_of_day(s.first_ms),
        time_of_day(s.last_ms),
        crate::payload::clip(&s.error, 160),
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::of_count(s.count + 2), reason)
            .with("failures", s.count)
            .with("error_class", s.class.name())
            .with("retries_allowed", retries(cfg, s.class)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::of_failure;

    fn fail(a: &mut AgentState, err: &str, epoch: u64) {
        let cfg = IdenticalFailure::default();
        on_failure(
            a,
            "k",
            "Bash",
            "npm run buld",
            &of_failure(err),
            epoch,
            1000,
            &cfg,
        );
    }

    #[test]
    fn budgets_follow_the_error_class() {
        let cfg = IdenticalFailure::default();
        for (err, allowed) in [
            (
                "npm ERR! missing script: buld\nNo such file or directory",
                2,
            ),
            ("connect ECONNREFUSED 127.0.0.1:5432", 4),
            ("Exit code 1\nsomething odd", 3),
        ] {
            let mut a = AgentState::default();
            for n in 1..=allowed {
                assert!(
                    check(&a, "k", 1000, &cfg).is_none(),
                    "{err}: call {n} allowed"
                );
                fail(&mut a, err, 0);
            }
            let v = check(&a, "k", 1000, &cfg).expect("denied after the budget");
            assert!(v.reason.starts_with("LOOP_DETECTED"), "{}", v.reason);
        }
    }

    #[test]
    fn changed_unknown_errors_edits_successes_and_age_reset() {
        let cfg = IdenticalFailure::default();
        let mut a = AgentState::default();
        for n in 0..5 {
            fail(&mut a, &format!("Exit code 1\n{n} tests failed"), 0);
        }
        assert!(
            check(&a, "k", 1000, &cfg).is_none(),
            "different unknown errors"
        );
        let mut a = AgentState::default();
        fail(&mut a, "No such file or directory", 0);
        fail(&mut a, "No such file or directory", 0);
        a.epoch = 1;
        assert!(check(&a, "k", 1000, &cfg).is_none(), "a file changed since");
        let mut a = AgentState::default();
        fail(&mut a, "No such file or directory", 0);
        fail(&mut a, "No such file or directory", 0);
        assert!(
            check(&a, "k", 1000 + 121 * 60_000, &cfg).is_none(),
            "older than 2 h"
        );
        on_success(&mut a, "k");
        assert!(a.failure_sigs.is_empty());
    }
}
