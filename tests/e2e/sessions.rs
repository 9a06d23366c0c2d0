//! Issue 36, "Proof with the real CLIs", on Claude Code: what a person does in one session.
//! Several questions then a new task, a new instruction after three turns that failed, and a long
//! command run in the background and polled until it finishes. The session is continued as
//! `claude -p --input-format stream-json` continues one: each prompt a user message of the same
//! session, its own turn (UserPromptSubmit with a new `prompt_id`). Assertions are what a user
//! would notice: every prompt reached the model, nothing was refused, the change landed.
//!
//! The same prompt fed again after three failed turns (an outer loop with nobody there) is still
//! refused: `e2e_the_same_prompt_fed_again_after_three_failed_turns_is_refused`.

use super::expect::*;
use super::fake_api::{bash, read, write, Script, ToolCall, Turn};
use super::harness::{Install, Scenario};
use super::run::Run;
use serde_json::json;
use std::fs;

/// A command that fails the same way every time and changes nothing.
const FAILING: &str = "cat config/settings.yml";

/// The informational lines of the stream that say a prompt was refused.
fn refused_prompts(run: &Run) -> Vec<String> {
    run.stream
        .iter()
        .filter(|l| l["type"] == "system" && l["subtype"] == "informational")
        .filter_map(|l| l["content"].as_str().map(String::from))
        .filter(|m| m.starts_with("UserPromptSubmit operation blocked by hook:"))
        .collect()
}

/// An event of loopgate refusing something: a call denied, a Stop or prompt blocked, a run ended.
fn refusal(e: &serde_json::Value) -> bool {
    e["enforced"] == true
        && matches!(
            e["decision"].as_str(),
            Some("deny" | "block" | "ask" | "halt")
        )
}

/// Asserts the prompt of conversation `label` reached the model.
fn assert_reached(run: &Run, label: &str) {
    assert!(
        !run.requests_of(label).is_empty(),
        "the prompt of `{label}` never reached the model\n{}",
        run.summary()
    );
}

/// (a) Three questions that need no change (one read), each its own prompt of one session, then
/// a task that writes a file: every prompt reaches the model, nothing is refused or blocked,
/// nothing from loopgate reaches the model, and the file is written.
#[test]
fn e2e_questions_then_a_new_task_in_one_session() {
    let Some(mut s) = Scenario::new("questions-then-task") else {
        return;
    };
    s.install(Install::Script);
    let prompts = [
        "Question one: what is this project?",
        "Question two: how are its tests run?",
        "Question three: is anything uncommitted?",
        "Now add a CHANGELOG.md that says the first release is out.",
    ];
    let script = Script::default()
        .prompt(
            "q1",
            prompts[0],
            vec![
                Turn::call(read(&s.path("README.md"))),
                Turn::text("A tiny demo project."),
            ],
        )
        .prompt(
            "q2",
            prompts[1],
            vec![Turn::text(
                "With ./run_tests.sh, which prints its failures.",
            )],
        )
        .prompt(
            "q3",
            prompts[2],
            vec![
                Turn::call(bash("git status --short")),
                Turn::text("Nothing is uncommitted."),
            ],
        )
        .prompt(
            "task",
            prompts[3],
            vec![
                Turn::call(write(
                    &s.path("CHANGELOG.md"),
                    "# Changelog\n\nThe first release is out.\n",
                )),
                Turn::text("CHANGELOG.md is written."),
            ],
        );
    let run = s.run_prompts(&prompts, script);
    assert_clean_exit(&run);
    for label in ["q1", "q2", "q3", "task"] {
        assert_reached(&run, label);
    }
    assert!(
        refused_prompts(&run).is_empty(),
        "{:?}\n{}",
        refused_prompts(&run),
        run.summary()
    );
    for id in ["toolu_e2e_q1_0_0", "toolu_e2e_q3_0_0", "toolu_e2e_task_0_0"] {
        assert_ran(&run, &run.tool_result(id));
    }
    assert_eq!(
        fs::read_to_string(s.project.join("CHANGELOG.md"))
            .ok()
            .as_deref(),
        Some("# Changelog\n\nThe first release is out.\n"),
        "the task's file change landed\n{}",
        run.summary()
    );
    let sent = run.everything_sent("task");
    assert!(
        !sent.contains("loopgate:") && !sent.contains("(loopgate)"),
        "nothing from loopgate reached the model: {sent}"
    );
    let stepped_in = run.events_where(refusal);
    assert!(stepped_in.is_empty(), "{}", run.summary());
}

/// One failed turn: the failing command twice, loopgate's denial, the denied call asked again,
/// then an answer. Nothing changes.
fn failed_turn() -> Vec<Turn> {
    let mut turns = vec![Turn::call(bash(FAILING)); 4];
    turns.push(Turn::text("I could not read the config."));
    turns
}

/// (b) Three turns that failed (each walked into loopgate's refusal, nothing changed), then the
/// person types a new, different instruction: it reaches the model and its tool calls run.
/// (Before issue 36 the breaker opened after the third failed turn and refused any next prompt
/// of an unattended session, so this fails there.)
#[test]
fn e2e_a_new_instruction_after_three_failed_turns_reaches_the_model() {
    let Some(mut s) = Scenario::new("new-instruction") else {
        return;
    };
    s.install(Install::Script);
    let prompts = [
        "Turn one: fix the settings file.",
        "Turn two: fix the settings file, please.",
        "Turn three: the settings file still needs fixing.",
        "Forget the settings. Write a NOTES.md that says hello.",
    ];
    let script = Script::default()
        .prompt("t1", prompts[0], failed_turn())
        .prompt("t2", prompts[1], failed_turn())
        .prompt("t3", prompts[2], failed_turn())
        .prompt(
            "new",
            prompts[3],
            vec![
                Turn::call(write(&s.path("NOTES.md"), "hello\n")),
                Turn::call(bash("cat NOTES.md")),
                Turn::text("NOTES.md says hello."),
            ],
        );
    let run = s.run_prompts(&prompts, script);
    assert!(!run.timed_out, "{}", run.summary());
    for t in ["t1", "t2", "t3"] {
        let reason = assert_denied(
            &run,
            &run.tool_result(&format!("toolu_e2e_{t}_2_0")),
            "Bash",
        );
        assert!(reason.contains("loopgate"), "{t}: {reason}");
    }
    assert!(
        refused_prompts(&run).is_empty(),
        "the new instruction was refused: {:?}\n{}",
        refused_prompts(&run),
        run.summary()
    );
    assert_reached(&run, "new");
    for id in ["toolu_e2e_new_0_0", "toolu_e2e_new_1_0"] {
        assert_ran(&run, &run.tool_result(id));
    }
    assert_eq!(
        fs::read_to_string(s.project.join("NOTES.md"))
            .ok()
            .as_deref(),
        Some("hello\n"),
        "the new instruction's change landed\n{}",
        run.summary()
    );
}

/// The other side of (b): the SAME prompt fed again, as an outer loop with nobody there would,
/// after three failed turns of it: the fourth is stopped before the failing command runs again.
#[test]
fn e2e_the_same_prompt_fed_again_after_three_failed_turns_is_refused() {
    let Some(mut s) = Scenario::new("same-prompt-again") else {
        return;
    };
    s.install(Install::Script);
    let prompt = "Fix the settings file.";
    let script = Script::default().prompt("same", prompt, failed_turn());
    let run = s.run_prompts(&[prompt; 4], script);
    assert!(!run.timed_out, "{}", run.summary());
    // Copies 2 and 3 of the prompt play the same turns, with ids of their own.
    for t in ["same", "samex1", "samex2"] {
        assert!(
            run.find_tool_result(&format!("toolu_e2e_{t}_0_0"))
                .is_some(),
            "turn `{t}` ran\n{}",
            run.summary()
        );
    }
    // The 4th copy: refused at the prompt, or every call of it refused; the command never ran
    // again.
    let fourth: Vec<_> = (0..4)
        .filter_map(|n| run.find_tool_result(&format!("toolu_e2e_samex3_{n}_0")))
        .collect();
    assert!(
        fourth
            .iter()
            .all(|r| r.content.starts_with(&deny_prefix("Bash"))),
        "a call of the 4th copy ran: {fourth:?}\n{}",
        run.summary()
    );
    assert!(
        !refused_prompts(&run).is_empty() || !fourth.is_empty(),
        "the 4th copy was neither refused nor denied\n{}",
        run.summary()
    );
    assert!(
        !run.events_where(|e| e["detector"] == "breaker" && e["enforced"] == true)
            .is_empty(),
        "{}",
        run.summary()
    );
}

/// A Bash call run in the background (Claude Code answers with the task's id and its output
/// file).
fn background(command: &str) -> ToolCall {
    ToolCall {
        name: "Bash".into(),
        input: json!({"command": command, "description": "long build", "run_in_background": true}),
    }
}

/// (c) A long command started in the background, its output file read (polled) until it says it
/// finished, then the same command run and polled again: nothing is refused, the command really
/// ran to its end both times. 2.1.330 has no BashOutput/TaskOutput tool ("Read a background
/// task's output file with the Read tool instead"), so the polls are Reads of that file, a few
/// seconds apart (the fake model takes its time), and the same Read each time.
#[test]
fn e2e_a_long_background_command_polled_until_it_finishes() {
    let Some(mut s) = Scenario::new("long-command") else {
        return;
    };
    s.install(Install::Script);
    let log = s.tmp_dir().join("long-runs");
    let long = format!(
        "for i in 1 2 3 4 5 6; do echo step $i; sleep 1; done; echo finished; echo run >> {}",
        log.display()
    );
    let prompt = "Run the long build and tell me when it is done; then run it once more.";
    let poll = || Turn::call(read("{{output}}"));
    let turns = vec![
        Turn::call(background(&long)),
        poll(),
        poll(),
        poll(),
        Turn::call(background(&long)),
        poll(),
        poll(),
        poll(),
        Turn::text("The build finished twice."),
    ];
    let mut script = Script::default()
        .conversation("main", prompt, turns)
        .capture(
            "output",
            r#"Output is being written to: ([^\s"\\]+?)\.?(?:["\\\s]|$)"#,
        );
    for turn in [1, 2, 3, 5, 6, 7] {
        script = script.delay("main", turn, 3.0);
    }
    let run = s.run(prompt, script);
    assert_clean_exit(&run);
    let results = run.tool_results("main");
    assert!(results.len() >= 8, "{}", run.summary());
    for r in &results {
        assert_ran(&run, r);
    }
    let sent = run.everything_sent("main");
    assert!(
        !sent.contains("loopgate:") && !sent.contains("(loopgate)"),
        "nothing from loopgate reached the model\n{}",
        run.summary()
    );
    assert!(
        results.iter().any(|r| r.content.contains("finished")),
        "a poll saw the command finish\n{}",
        run.summary()
    );
    assert_eq!(
        fs::read_to_string(&log).unwrap_or_default().lines().count(),
        2,
        "the long command ran to its end twice\n{}",
        run.summary()
    );
    let stepped_in = run.events_where(refusal);
    assert!(stepped_in.is_empty(), "{}", run.summary());
}
