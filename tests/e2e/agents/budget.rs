//! Issue 39, point 1, with the real Codex CLI: a loop reaches a small loop budget, its figure
//! read from the rollout's `token_count` events (the fake model reports 15 tokens a response).
//! Codex honours no answer that ends a run mid-turn and has no `ask`, so from the budget on every
//! loop call is refused with the budget's reason, and the halt is recorded as `budget`.

use super::clis::Cli;
use super::harness::{loopgate_bin, Scenario};
use super::script::{call, script, shell, text};

#[test]
fn e2e_codex_a_loop_reaches_the_budget() {
    let Some(mut s) = Scenario::new(Cli::Codex, "budget") else {
        return;
    };
    // Four responses of the loop, counted in tokens (exact for Codex).
    s.set_env("LOOPGATE_BUDGET__SESSION_TOKENS", "60");
    s.install(false);
    let mut turns: Vec<_> = (0..10)
        .map(|_| call(shell(Cli::Codex, "cat config/settings.yml")))
        .collect();
    turns.push(text("I could not read the settings."));
    let run = s.run(
        "Read the settings file.",
        &script(turns, "The settings file does not exist."),
    );
    assert!(!run.timed_out && run.code() == Some(0), "{}", run.summary());
    let paused = run.events_where(|e| {
        e["detector"] == "budget" && e["event"] == "PreToolUse" && e["decision"] != "warn"
    });
    assert!(
        !paused.is_empty(),
        "the budget paused the loop\n{}",
        run.summary()
    );
    let first = paused[0];
    assert_eq!(first["evidence"]["unit"], "tokens", "{first:#}");
    assert!(
        first["evidence"]["spent"].as_f64().unwrap() >= 60.0,
        "{first:#}"
    );
    assert_eq!(first["evidence"]["halt"], "budget", "{first:#}");
    assert!(
        run.model_saw("loop budget is spent"),
        "the model read the budget's refusal\n{}",
        run.summary()
    );
    let halted = std::process::Command::new(loopgate_bin())
        .arg("--state-dir")
        .arg(&s.state_dir)
        .args(["halted", "--json"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(halted.status.code(), Some(3), "{}", run.summary());
    let v: serde_json::Value = serde_json::from_slice(&halted.stdout).unwrap();
    assert_eq!(v["halt"]["reason_code"], "budget", "{v:#}");
}
