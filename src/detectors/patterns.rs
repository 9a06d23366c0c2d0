//! Pattern repetition and state cycles (seed 001): A-B-A-B, A-B-C-A-B-C … (period 2–10) repeating
//! with the same results at every position. A pattern compares whole calls (tool + input); a state
//! cycle compares (tool, target file), so an Edit whose `old_string` drifts but keeps being rejected
//! still counts. Work that makes progress never matches: a changing result breaks the cycle, and a
//! successful edit's result carries no information, so it never equals anything.

use crate::config::Patterns;
use crate::detectors::describe;
use crate::state::{AgentState, Call, CallStatus, PatternMark};
use crate::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "pattern_repetition";
pub const STATE_CYCLE: &str = "state_cycle";

fn finished(c: &Call) -> bool {
    matches!(
        c.status,
        CallStatus::Ok | CallStatus::Failed | CallStatus::Rejected
    )
}

/// Length of the repeating tail for period `p`: how many trailing items equal the item `p` earlier.
fn tail_len<T: PartialEq>(items: &[Option<T>], p: usize) -> usize {
    let n = items.len();
    (0..n.saturating_sub(p))
        .take_while(|&i| {
            let (a, b) = (&items[n - 1 - i], &items[n - 1 - i - p]);
            a.is_some() && a == b
        })
        .count()
}

/// The shortest period whose tail covers at least `min_cycles` full cycles of distinct calls:
/// (period, cycles, matched tail length).
fn find<T: PartialEq>(items: &[Option<T>], cfg: &Patterns) -> Option<(usize, usize, usize)> {
    (cfg.min_period.max(2)..=cfg.max_period).find_map(|p| {
        let matched = tail_len(items, p);
        let cycles = (matched + p) / p;
        let n = items.len();
        // A cycle of one call repeated is an action loop, the core's business.
        let distinct = n >= p && items[n - p..].windows(2).any(|w| w[0] != w[1]);
        (cycles >= cfg.min_cycles.max(2) && distinct).then_some((p, cycles, matched))
    })
}

/// After a call finishes: guidance when the last calls repeat a cycle; from one more full cycle
/// on, the next call of the cycle is marked for denial (stage 2).
pub fn on_outcome(agent: &mut AgentState, cfg: &Patterns) -> Option<Verdict> {
    if !cfg.enabled {
        return None;
    }
    let calls: Vec<&Call> = agent.calls.iter().filter(|c| finished(c)).collect();
    let by_call: Vec<Option<(&str, &str)>> = calls
        .iter()
        .map(|c| c.outcome.as_deref().map(|o| (c.key.as_str(), o)))
        .collect();
    // A state is where the agent was and whether it got anywhere: any failure counts as the same
    // failure (a rejected Edit's text quotes its drifting `old_string`), a success by its result.
    let by_state: Vec<Option<(&str, &str, &str)>> = calls
        .iter()
        .map(|c| {
            let failed = matches!(c.status, CallStatus::Failed | CallStatus::Rejected);
            let o = if failed {
                Some("failed")
            } else {
                c.outcome.as_deref()
            };
            o.map(|o| (c.tool.as_str(), c.target.as_str(), o))
        })
        .collect();
    let (detector, (period, cycles, matched)) = match find(&by_call, cfg) {
        Some(found) => (NAME, found),
        None => (STATE_CYCLE, find(&by_state, cfg)?),
    };
    let n = calls.len();
    let steps: Vec<String> = calls[n - period..]
        .iter()
        .map(|c| describe(&c.tool, &c.target))
        .collect();
    // Speak once per completed cycle, not on every call inside one.
    if !matched.is_multiple_of(period) {
        return None;
    }
    let reason = format!(
        "loopgate: the same {period} steps have now repeated {cycles} times with the same results each time: {}. \
         This cycle is not converging. Stop and name why it fails, then try a fundamentally different approach \
         (or ask the user).",
        steps.join(" → ")
    );
    if cycles > cfg.min_cycles.max(2) {
        let next = calls[n - period];
        agent.pattern_next = Some(PatternMark {
            key: next.key.clone(),
            reason: reason.clone(),
            epoch: agent.epoch,
        });
    }
    Some(
        Verdict::new(
            detector,
            Action::Warn,
            Severity::of_count((period * cycles) as u32),
            reason,
        )
        .with("period", period)
        .with("cycles", cycles),
    )
}

/// Stage 2: the call that would start the cycle once more is denied.
pub fn check(agent: &AgentState, key: &str) -> Option<Verdict> {
    let m = agent.pattern_next.as_ref()?;
    (m.key == key && m.epoch == agent.epoch).then(|| {
        Verdict::new(NAME, Action::Deny, Severity::High, m.reason.clone()).with("stage", 2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(a: &mut AgentState, key: &str, outcome: Option<&str>) -> Option<Verdict> {
        a.push_call(Call {
            id: String::new(),
            tool: "Bash".into(),
            key: key.into(),
            target: key.into(),
            at_ms: 0,
            epoch: a.epoch,
            status: CallStatus::Ok,
            outcome: outcome.map(String::from),
        });
        on_outcome(a, &Patterns::default())
    }

    #[test]
    fn alternation_with_the_same_results_is_caught() {
        let mut a = AgentState::default();
        let fired: Vec<bool> = (0..8)
            .map(|i| {
                push(
                    &mut a,
                    if i % 2 == 0 { "A" } else { "B" },
                    Some(if i % 2 == 0 { "x" } else { "y" }),
                )
                .is_some()
            })
            .collect();
        assert_eq!(
            fired,
            vec![false, false, false, true, false, true, false, true]
        );
        assert!(check(&a, "A").is_some(), "stage 2 marks the next call");
    }

    #[test]
    fn three_step_cycles_and_progress() {
        let mut a = AgentState::default();
        for i in 0..6 {
            let k = ["A", "B", "C"][i % 3];
            let v = push(&mut a, k, Some(k));
            assert_eq!(v.is_some(), i == 5, "step {i}");
        }
        let mut a = AgentState::default();
        for i in 0..12 {
            let k = ["read", "edit", "test"][i % 3];
            let o = format!("{k} {i}");
            // Edits are trivial (None), tests change: a working cycle.
            let outcome = if k == "edit" { None } else { Some(o.as_str()) };
            assert!(push(&mut a, k, outcome).is_none());
        }
    }
}
