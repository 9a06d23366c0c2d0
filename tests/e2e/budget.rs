//! Issue 39, point 1, with the real Claude Code: a loop reaches a small loop budget and, `claude
//! -p` being unattended, the turn ends with the budget's halt. The fake model reports usage on
//! every response (100 input and 20 output tokens of `claude-opus-5-5`: $0.001 at the table's
//! price), which Claude Code writes into the transcript, where loopgate reads it.

use super::expect::*;
use super::fake_api::{bash, Script, Turn};
use super::harness::Scenario;

const FAILING: &str = "cat config/settings.yml";
const PROMPT: &str = "Read the settings file.";

#[test]
fn e2e_a_loop_reaches_the_budget_and_the_unattended_turn_ends() {
    let Some(mut s) = Scenario::new("budget-loop") else {
        return;
    };
    let bin = env!("CARGO_BIN_EXE_loopgate");
    s.register_hooks(|_, sub| format!("'{bin}' {sub}"));
    // Four and a half responses of the fake model: paused at the 5th of the loop (a warning
    // comes before it when a call sees the spend between 80 % and the bound: Claude Code writes
    // a response into the transcript a little after the call it makes, so a call may see two).
    s.set_env("LOOPGATE_BUDGET__SESSION_USD", "0.0045");
    let mut turns = vec![Turn::call(bash(FAILING)); 12];
    turns.push(Turn::text("I could not read the config."));
    let run = s.run(
        PROMPT,
        Script::default().conversation("main", PROMPT, turns),
    );
    assert_clean_exit(&run);
    let warned = run.events_where(|e| e["detector"] == "budget" && e["decision"] == "warn");
    assert!(warned.len() <= 1, "{}", run.summary());
    let paused = assert_refused_then_run_ended(&run, "budget");
    assert_eq!(paused[1]["evidence"]["halt"], "budget");
    // The figure is the transcript's: five responses of the loop, priced.
    let spent = paused[1]["evidence"]["spent"].as_f64().unwrap();
    assert!(
        (0.0045..0.0065).contains(&spent),
        "{spent}\n{}",
        run.summary()
    );
    let last_turn = run.requests.iter().map(|r| r.turn).max().unwrap_or(0);
    assert!(
        last_turn < 12,
        "the run ended before the script did\n{}",
        run.summary()
    );
    // A script reads the halt; the status shows the spend.
    let halted = s.loopgate(&["halted", "--json"]);
    assert_eq!(halted.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&halted.stdout).unwrap();
    assert_eq!(v["halt"]["reason_code"], "budget", "{v:#}");
    let status = s.status_json();
    assert!(
        status["budget"]["session_usd"].as_f64().unwrap() >= 0.0045,
        "{status:#}"
    );
}
