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

/// Attended (an interactive `claude` in tmux): at the budget the person is asked, in Claude
/// Code's permission dialog with loopgate's reason, and what they answer decides; then
/// `/loopgate budget +1`, typed by them, raises the budget and the loop's next call runs unasked.
#[test]
fn e2e_an_attended_loop_at_the_budget_asks_the_person() {
    use super::interactive::Terminal;
    use super::sanction::{report, started};
    use std::time::Duration;
    let Some(mut s) = Scenario::new("budget-ask") else {
        return;
    };
    s.install(super::harness::Install::Script);
    s.set_env("LOOPGATE_BUDGET__SESSION_USD", "0.0045");
    let mut turns = vec![Turn::call(bash(FAILING)); 12];
    turns.push(Turn::text("I could not read the config."));
    let script = Script::default().prompt("loop", "READ-THE-SETTINGS", turns);
    let api = super::fake_api::FakeApi::start(script);
    let Some(term) = Terminal::start("budget-ask", &s.interactive_script(&api)) else {
        return;
    };
    let out_dir = s.out_dir();
    let finish = |why: &str| report(&s, &term, &out_dir, why);
    let events = || super::run::read_jsonl(&s.state_dir.join("events.jsonl"));
    assert!(started(&term), "{}", finish("claude did not start"));

    term.type_line("READ-THE-SETTINGS please");
    assert!(
        term.wait(Duration::from_secs(90), || term
            .screen()
            .contains("the loop budget is spent")),
        "{}",
        finish("the person was not asked")
    );
    let asked = events()
        .into_iter()
        .filter(|e| e["detector"] == "budget" && e["decision"] == "ask")
        .count();
    assert_eq!(asked, 1, "{}", finish("one ask"));
    assert!(
        !events()
            .iter()
            .any(|e| e["evidence"]["halt"] == "budget" && e["decision"] != "ask"),
        "{}",
        finish("an attended session is asked, never ended")
    );
    // The person says no; then raises the budget themselves.
    term.press_escape();
    std::thread::sleep(Duration::from_secs(2));
    term.type_line("/loopgate budget +1");
    let limit = || {
        let status = s.status_json();
        status["budget"]["session_limit_usd"]
            .as_f64()
            .unwrap_or(0.0)
    };
    assert!(
        term.wait(Duration::from_secs(30), || limit() > 1.0),
        "{}",
        finish(&format!("the budget was not raised: {}", limit()))
    );
}
