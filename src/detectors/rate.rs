//! Call-rate window (seed 000, IronCurtain's CallCircuitBreaker): the same call 20 times within a
//! sliding 60 s is denied whatever it returned — the answer to loops whose output always differs.

use crate::config::Rate;
use crate::detectors::describe;
use crate::state::Run;
use crate::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "call_rate";

/// Records a call start and judges the window. Start times in the future (the clock went
/// backwards) are dropped so the window can never wedge.
pub fn on_call(run: &mut Run, now_ms: u64, cfg: &Rate) -> Option<Verdict> {
    let window = cfg.window_seconds * 1000;
    run.recent_ms
        .retain(|&t| t <= now_ms && now_ms - t < window);
    let max = cfg.max_calls.max(1) as usize;
    let over = cfg.enabled && run.recent_ms.len() >= max;
    if !over {
        run.recent_ms.push_back(now_ms);
        while run.recent_ms.len() > max {
            run.recent_ms.pop_front();
        }
        return None;
    }
    let reason = format!(
        "loopgate: {} was called {} times within {} s. Slow down and change approach: whatever it returns, \
         calling it this fast is a loop.",
        describe(&run.tool, &run.target),
        run.recent_ms.len(),
        cfg.window_seconds
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::Critical, reason)
            .with("calls_in_window", run.recent_ms.len())
            .with("window_seconds", cfg.window_seconds),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_in_sixty_seconds_then_the_window_slides() {
        let cfg = Rate::default();
        let mut run = Run::default();
        for i in 0..20 {
            assert!(on_call(&mut run, i * 1000, &cfg).is_none(), "call {i}");
        }
        assert!(on_call(&mut run, 20_000, &cfg).is_some());
        assert!(
            on_call(&mut run, 61_000, &cfg).is_none(),
            "oldest left the window"
        );
        let mut back = Run::default();
        for i in 0..20 {
            on_call(&mut back, 100_000 + i, &cfg);
        }
        assert!(
            on_call(&mut back, 5_000, &cfg).is_none(),
            "clock went backwards"
        );
    }
}
