//! Issue 22: a denial storm ends its turn. The model retries one failing call after every
//! denial (one call, so the ladder's stage 3, which needs two, never comes); at the 10th refused
//! call loopgate's ceiling refuses it and the turn's PostToolBatch ends the run.

use super::expect::*;
use super::fake_api::{bash, Script, Turn};
use super::harness::Scenario;
use super::run::Run;

const FAILING: &str = "cat config/settings.yml";
const CEILING: &str =
    "loopgate: 10 refused calls in this turn were made again regardless, with nothing changed between";

#[test]
fn e2e_a_denial_storm_ends_the_turn_at_the_ceiling() {
    let Some(s) = Scenario::new("ceiling-denial-storm") else {
        return;
    };
    // The debug binary of this build, registered as install.sh would register the release one.
    let bin = env!("CARGO_BIN_EXE_loopgate");
    s.register_hooks(|_, sub| format!("'{bin}' {sub}"));
    let run = s.run(STORM_PROMPT, storm_script());
    assert_storm_ended(&run);
}

/// The prompt of the denial storm.
pub const STORM_PROMPT: &str = "Read the settings file.";

/// The model retries one failing call 16 times, then gives up.
pub fn storm_script() -> Script {
    let mut turns = vec![Turn::call(bash(FAILING)); 16];
    turns.push(Turn::text("I could not read the config."));
    Script::default().conversation("main", STORM_PROMPT, turns)
}

/// The storm was refused and its run ended at the ceiling: calls 1–2 ran, 3–11 were denied by
/// the repeat rule, the 12th (the 10th refusal) by the ceiling, the turn's PostToolBatch ended
/// the run, and nothing was asked of the model after it.
pub fn assert_storm_ended(run: &Run) {
    assert_clean_exit(run);
    for t in 2..11 {
        let reason = assert_denied(run, &run.tool_result(&format!("toolu_e2e_{t}_0")), "Bash");
        assert!(
            reason.starts_with("LOOP_DETECTED"),
            "call {}: {reason}",
            t + 1
        );
    }
    let last = assert_denied(run, &run.tool_result("toolu_e2e_11_0"), "Bash");
    assert!(last.starts_with(CEILING), "{last}");
    assert!(
        run.requests.iter().all(|r| r.turn <= 11),
        "no request after the 12th call\n{}",
        run.summary()
    );
    assert_refused_then_run_ended(run, "ceiling");
}
