//! The harness itself, with a recorder hook instead of loopgate: the CLI runs against the fake
//! model, the scripted call runs, its result reaches the model, and the tool hooks fire with the
//! CLI's payload. When this fails, the scenarios' failures say nothing about loopgate.

use super::clis::Cli;
use super::harness::Scenario;
use super::script::{call, script, shell, text};

fn harness_runs_the_cli(cli: Cli) {
    let Some(s) = Scenario::new(cli, "smoke") else {
        return;
    };
    s.install_recorder();
    let turns = vec![
        call(shell(cli, "echo hello-from-shell")),
        text("Said hello."),
    ];
    let run = s.run("Say hello.", &script(turns, "Done."));
    assert!(!run.timed_out && run.code() == Some(0), "{}", run.summary());
    assert_eq!(run.main_requests().len(), 2, "{}", run.summary());
    let outputs = run.tool_outputs();
    assert!(
        outputs.len() == 1 && outputs[0].contains("hello-from-shell"),
        "{}",
        run.summary()
    );
    let tool_hooks = s
        .recorded_hooks()
        .into_iter()
        .filter(|h| {
            let name = h["tool_name"].as_str().or(h["toolName"].as_str());
            name.is_some_and(|n| n.eq_ignore_ascii_case("bash") || n == "run_shell_command")
        })
        .count();
    assert!(
        tool_hooks >= 2,
        "the shell call's pre and post hooks ran: {:?}\n{}",
        s.recorded_hooks(),
        run.summary()
    );
}

#[test]
fn e2e_codex_harness_runs_the_cli() {
    harness_runs_the_cli(Cli::Codex);
}

#[test]
fn e2e_gemini_harness_runs_the_cli() {
    harness_runs_the_cli(Cli::Gemini);
}

#[test]
fn e2e_qwen_harness_runs_the_cli() {
    harness_runs_the_cli(Cli::Qwen);
}

#[test]
fn e2e_copilot_harness_runs_the_cli() {
    harness_runs_the_cli(Cli::Copilot);
}
