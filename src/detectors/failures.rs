//! Layer 2: consecutive failures. Any success resets the count; the warning repeats only every
//! further `warn_after` failures so the model is not nagged on each one.

use crate::clock::time_of_day;
use crate::config::Failures;
use crate::state::AgentState;
use crate::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "consecutive_failures";

/// Failed calls named in the warning.
const NAMED: usize = 5;

pub fn on_success(agent: &mut AgentState) {
    agent.consecutive_failures = 0;
    agent.failed_calls.clear();
}

pub fn on_failure(
    agent: &mut AgentState,
    call: String,
    now_ms: u64,
    cfg: &Failures,
) -> Option<Verdict> {
    if agent.consecutive_failures == 0 {
        agent.failure_streak_since_ms = now_ms;
    }
    agent.consecutive_failures += 1;
    if agent.failed_calls.len() >= NAMED {
        agent.failed_calls.pop_front();
    }
    agent.failed_calls.push_back(call);
    let n = agent.consecutive_failures;
    let every = cfg.warn_after.max(1);
    if !cfg.enabled || n < every || !n.is_multiple_of(every) {
        return None;
    }
    let names: Vec<&str> = agent.failed_calls.iter().map(String::as_str).collect();
    let reason = format!(
        "loopgate: {n} tool calls in a row have failed since {} (latest: {}). \
         Stop and reconsider before the next call: read the last error closely, check your assumptions \
         (paths, names, versions, whether the command exists), and change approach instead of retrying.",
        time_of_day(agent.failure_streak_since_ms),
        names.join("; "),
    );
    Some(
        Verdict::new(NAME, Action::Warn, Severity::of_count(n), reason)
            .with("consecutive_failures", n)
            .with("warn_after", every),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_at_five_then_every_five() {
        let cfg = Failures::default();
        let mut a = AgentState::default();
        let fired: Vec<u32> = (1..=15)
            .filter_map(|i| on_failure(&mut a, format!("Bash `c{i}`"), 0, &cfg).map(|_| i))
            .collect();
        assert_eq!(fired, vec![5, 10, 15]);
        on_success(&mut a);
        assert!((1..=4).all(|i| on_failure(&mut a, format!("c{i}"), 0, &cfg).is_none()));
        let v = on_failure(&mut a, "Bash `last`".into(), 0, &cfg).unwrap();
        assert!(v.reason.contains("5 tool calls in a row have failed"));
        assert!(v.reason.contains("Bash `last`"));
    }
}
