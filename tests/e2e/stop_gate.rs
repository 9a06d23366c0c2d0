//! Issue 4 scenarios for the progress gate on Stop. `claude -p` runs unattended
//! (`CLAUDE_CODE_SESSION_ATTENDED=0`), so the gate is active: it holds the end of a turn that
//! tried to change files and changed nothing, and lets every other kind of turn end.

use super::expect::*;
use super::fake_api::{bash, edit, read, write, Script, Turn};
use super::harness::{Install, Scenario};

fn one_conversation(prompt: &str, turns: Vec<Turn>) -> Script {
    Script::default().conversation("main", prompt, turns)
}

/// The prompt of [`edits_missed`].
pub const EDITS_MISSED: &str = "Improve the README wording.";

/// Two README edits that both miss, a claim of success, then (after a Stop block) the truth.
pub fn edits_missed(s: &Scenario) -> Script {
    let readme = s.path("README.md");
    let turns = vec![
        // Claude Code rejects both before PreToolUse; only PostToolBatch sees them.
        Turn::call(edit(&readme, "A small project.", "A tiny, tested project.")),
        Turn::call(edit(&readme, "# Demo", "# Demo app")),
        Turn::text("Updated the README."),
        Turn::text("The edits did not apply: the README text differs. Not finished."),
    ];
    one_conversation(EDITS_MISSED, turns)
}

#[test]
fn e2e_turn_whose_edits_all_missed_is_held_at_stop() {
    let Some(mut s) = Scenario::new("edits-missed") else {
        return;
    };
    s.install(Install::Script);
    let run = s.run(EDITS_MISSED, edits_missed(&s));
    assert_clean_exit(&run);

    for id in ["toolu_e2e_0_0", "toolu_e2e_1_0"] {
        let r = run.tool_result(id);
        assert!(
            r.is_error && r.content.contains("String to replace not found"),
            "{r:?}"
        );
    }
    assert_stop_blocked_then_released(&run);
    // The agent continued after the block: its next turn was requested and played.
    assert!(
        run.requests_of("main").iter().any(|r| r.turn == 3),
        "{}",
        run.summary()
    );
    assert_eq!(
        s.git(&["status", "--porcelain"]),
        "",
        "nothing changed on disk"
    );
}

#[test]
fn e2e_turn_with_a_denied_repeat_is_held_at_stop() {
    let Some(mut s) = Scenario::new("denied-stop") else {
        return;
    };
    s.install(Install::Script);
    // A turn that tries to change something (the README rewritten as it was: nothing changes)
    // and walks into a refusal: four identical failures, the 3rd denied and the 4th asked again
    // regardless and denied, not enough to end the run, and nothing changes on disk.
    let failing = "cat config/settings.yml";
    let mut turns = vec![Turn::call(write(
        &s.path("README.md"),
        "# demo\n\nA tiny project.\n",
    ))];
    turns.extend(vec![Turn::call(bash(failing)); 4]);
    turns.push(Turn::text("Read the settings."));
    turns.push(Turn::text(
        "The settings file does not exist; I could not read it.",
    ));
    let prompt = "Fix the settings file.";
    let run = s.run(prompt, one_conversation(prompt, turns));
    assert_clean_exit(&run);
    assert_denied(&run, &run.tool_result("toolu_e2e_3_0"), "Bash");
    assert_denied(&run, &run.tool_result("toolu_e2e_4_0"), "Bash");
    assert_stop_blocked_then_released(&run);
}

#[test]
fn e2e_turn_that_wrote_a_file_may_stop() {
    let Some(mut s) = Scenario::new("wrote-file") else {
        return;
    };
    s.install(Install::Script);
    let turns = vec![
        // A miss first, so the turn has a failed edit on record, then a real change.
        Turn::call(edit(&s.path("README.md"), "no such text", "x")),
        Turn::call(write(
            &s.path("CHANGELOG.md"),
            "# Changelog\n\n- First entry.\n",
        )),
        Turn::text("Added a changelog."),
    ];
    let prompt = "Add a changelog.";
    let run = s.run(prompt, one_conversation(prompt, turns));
    assert_clean_exit(&run);
    assert_ran(&run, &run.tool_result("toolu_e2e_1_0"));
    assert_stop_allowed(&run);
}

#[test]
fn e2e_turn_that_ran_failing_tests_and_reported_may_stop() {
    let Some(mut s) = Scenario::new("failing-tests") else {
        return;
    };
    s.install(Install::Plugin);
    let turns = vec![
        Turn::call(bash("sh run_tests.sh")),
        Turn::call(bash("sh run_tests.sh -k test_parse")),
        Turn::text("1 test fails: test_parse. Everything else passes."),
    ];
    let prompt = "Run the tests and tell me what fails.";
    let run = s.run(prompt, one_conversation(prompt, turns));
    assert_clean_exit(&run);
    for id in ["toolu_e2e_0_0", "toolu_e2e_1_0"] {
        let r = run.tool_result(id);
        assert_ran(&run, &r);
        assert!(r.is_error && r.content.contains("FAILED"), "{r:?}");
    }
    assert_stop_allowed(&run);
    assert_silent(&run, "main");
}

#[test]
fn e2e_read_only_question_may_stop() {
    let Some(mut s) = Scenario::new("read-only") else {
        return;
    };
    s.install(Install::Script);
    let turns = vec![
        Turn::call(read(&s.path("README.md"))),
        Turn::call(bash("git log --oneline -1")),
        Turn::text("It is a tiny demo project with one commit."),
    ];
    let prompt = "What is this project?";
    let run = s.run(prompt, one_conversation(prompt, turns));
    assert_clean_exit(&run);
    assert!(run
        .tool_result("toolu_e2e_0_0")
        .content
        .contains("A tiny project."));
    assert_stop_allowed(&run);
    assert_silent(&run, "main");
}
