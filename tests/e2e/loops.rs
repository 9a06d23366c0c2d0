//! Issue 4 scenarios about repeated and failing calls: denials of an unchanged repeat, the
//! consecutive-failure warning, observe mode, parallel calls, `cd`, and subagents.

use super::expect::*;
use super::fake_api::{agent, bash, edit, Script, Turn};
use super::harness::{Install, Scenario};
use super::run::{Run, ToolResult};
use serde_json::Value;

/// A command that fails the same way every time and changes nothing.
const FAILING: &str = "cat config/settings.yml";

fn repeat(turn: Turn, n: usize) -> Vec<Turn> {
    vec![turn; n]
}

/// The looping agent: the same failing command 8 times, then a claim it is done.
pub(super) fn looping_script(prompt: &str) -> Script {
    let mut turns = repeat(Turn::call(bash(FAILING)), 8);
    turns.push(Turn::text("I could not read the config."));
    Script::default().conversation("main", prompt, turns)
}

fn main_results(run: &Run, expected: usize) -> Vec<ToolResult> {
    let results = run.tool_results("main");
    assert_eq!(results.len(), expected, "tool results\n{}", run.summary());
    results
}

/// Results of the main agent's one-call turns (`toolu_e2e_<turn>_0`) in order, up to the first
/// call that was never made because a hook ended the run.
pub(super) fn call_results(run: &Run, turns: usize) -> Vec<ToolResult> {
    (0..turns)
        .map_while(|t| run.find_tool_result(&format!("toolu_e2e_{t}_0")))
        .collect()
}

#[test]
fn e2e_repeated_failing_command_is_denied_and_stays_denied() {
    let Some(mut s) = Scenario::new("repeat") else {
        return;
    };
    s.install(Install::Script);
    let prompt = "Read the settings file.";
    let run = s.run(prompt, looping_script(prompt));
    assert_clean_exit(&run);
    // loopgate's SessionStart hook says nothing: a SessionStart hook's output would be put
    // before the first request's system context (hooks-observed.md).
    assert!(
        run.system_messages("main")
            .iter()
            .all(|m| !m.contains("SessionStart")),
        "{:?}",
        run.system_messages("main")
    );

    let results = call_results(&run, 8);
    let first = assert_loop_broken(&run, &results, "Bash");
    assert!(
        results.len() > first + 1,
        "the agent must have tried again after the denial\n{}",
        run.summary()
    );
    for r in &results[..first] {
        assert!(r.is_error && r.content.starts_with("Exit code 1"), "{r:?}");
    }
    let reason = &results[first].content;
    assert!(
        reason.contains(FAILING),
        "the reason names the command: {reason}"
    );

    // What the model read is what loopgate logged: enforced PreToolUse denials, main agent.
    let denials: Vec<&Value> = run.events_where(|e| {
        e["event"] == "PreToolUse" && e["decision"] == "deny" && e["enforced"] == true
    });
    assert!(denials.len() >= results.len() - first, "{}", run.summary());
    assert!(denials.iter().all(|e| e["agent"] == "main"));
    assert_event_shape(&run);

    // Either the agent made all 8 calls and stopped, or loopgate ended the unattended run
    // itself once denials did not break the loop (PostToolBatch `decision: block`).
    if results.len() < 8 {
        assert_eq!(
            run.terminal_reason(),
            Some("hook_stopped"),
            "{}",
            run.summary()
        );
        let halts = run.events_where(|e| {
            e["event"] == "PostToolBatch" && e["decision"] == "block" && e["enforced"] == true
        });
        assert_eq!(halts.len(), 1, "{}", run.summary());
    }
}

#[test]
fn e2e_five_consecutive_failures_reach_the_model_as_context() {
    let Some(mut s) = Scenario::new("failures") else {
        return;
    };
    s.install(Install::Script);
    let mut turns: Vec<Turn> = (1..=5)
        .map(|i| Turn::call(bash(&format!("ls missing-dir-{i}"))))
        .collect();
    turns.push(Turn::text("None of the directories exist."));
    let prompt = "List the data directories.";
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    assert_clean_exit(&run);

    let results = main_results(&run, 5);
    results.iter().for_each(|r| assert_ran(&run, r));
    let warnings = loopgate_context(&run, "main", "PostToolUseFailure");
    assert_eq!(warnings.len(), 1, "{}", run.summary());
    assert!(
        warnings[0].starts_with("PostToolUseFailure:Bash hook additional context: "),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains("5 tool calls in a row have failed"),
        "{warnings:?}"
    );
    assert_warning_follows_fifth_result(&run);
}

/// The warning must arrive with the 5th failure, not earlier: the system message sits after the
/// 5th tool_result in the history.
fn assert_warning_follows_fifth_result(run: &Run) {
    let history = run.history("main");
    let fifth = history
        .iter()
        .position(|m| m.to_string().contains("\"toolu_e2e_4_0\"") && m["role"] == "user")
        .expect("5th result in history");
    let warning = history
        .iter()
        .position(|m| m["role"] == "system" && m.to_string().contains("in a row have failed"))
        .expect("warning in history");
    assert!(
        warning > fifth,
        "warning before the 5th failure\n{}",
        run.summary()
    );
}

#[test]
fn e2e_observe_mode_lets_the_loop_run_and_logs_would_fire_lines() {
    let Some(mut s) = Scenario::new("observe") else {
        return;
    };
    s.install(Install::ScriptObserve);
    let prompt = "Read the settings file.";
    let run = s.run(prompt, looping_script(prompt));
    assert_clean_exit(&run);

    let results = main_results(&run, 8);
    results.iter().for_each(|r| assert_ran(&run, r));
    assert_silent(&run, "main");
    assert!(stop_feedback(&run).is_empty());

    // Each would-be denial is logged, unenforced, from the same call on as when enforcing.
    let would_deny = run.events_where(|e| e["event"] == "PreToolUse" && e["decision"] == "deny");
    assert!(
        would_deny.len() >= 8 - FIRST_DENIAL.end(),
        "{}",
        run.summary()
    );
    assert!(run.events.iter().all(|e| e["enforced"] == false));
    assert_event_shape(&run);
}

#[test]
fn e2e_parallel_identical_polls_without_waiting_are_stopped() {
    let Some(mut s) = Scenario::new("parallel") else {
        return;
    };
    s.install(Install::Plugin);
    let check = "wc -l README.md";
    let three = Turn::Tools(vec![bash(check), bash(check), bash(check)]);
    let mut turns = repeat(three, 3);
    turns.push(Turn::text("The README has 3 lines."));
    let prompt = "Count the README lines.";
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    assert_clean_exit(&run);

    // Turns 0 and 1: three concurrent copies each, the same answer six times, back to back with
    // no new state: the successful-call budget (3 repeats) is spent, so every copy in turn 2 is
    // refused, and the model is told to wait between checks.
    for t in 0..2 {
        for n in 0..3 {
            assert_ran(&run, &run.tool_result(&format!("toolu_e2e_{t}_{n}")));
        }
    }
    for n in 0..3 {
        let reason = assert_denied(&run, &run.tool_result(&format!("toolu_e2e_2_{n}")), "Bash");
        assert!(
            reason.contains("returned the same answer 6 times"),
            "{reason}"
        );
        assert!(reason.contains("wait between checks"), "{reason}");
    }

    // Nine PreToolUse hooks ran, three at a time, and six PostToolUse hooks, three at once:
    // exactly nine calls and six identical answers must be on record. A lost update shows as
    // fewer, a call counted again from PostToolBatch as more.
    let status = s.status_json();
    assert_eq!(status["totals"]["calls"], 9, "calls: {status:#}");
    let entry = status["agents"]["main"]["repeats"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["call"] == format!("Bash `{check}`")))
        .unwrap_or_else(|| panic!("no repeat entry for {check:?}: {status:#}"))
        .clone();
    assert_eq!(entry["same_answer_in_a_row"], 6, "{entry}");
}

#[test]
fn e2e_cd_into_a_subdirectory_keeps_config_and_gate_on_the_project_root() {
    let Some(mut s) = Scenario::new("cd-sub") else {
        return;
    };
    // Two traps for a hook that anchors on cwd instead of CLAUDE_PROJECT_DIR: a project config
    // that allows no repeat at all, and a nested repository under an ignored `sub/` whose
    // fingerprint differs from the project's (so the gate would see "progress").
    s.write_file(".claude/loopgate.toml", "[detectors.repeat]\nsuccess = 0\n");
    s.write_file(".gitignore", "sub/\n");
    s.git(&["add", "."]);
    s.git(&["commit", "-q", "-m", "config"]);
    s.nested_repo("sub");
    s.install(Install::Script);

    let check = "wc -l notes.txt";
    let turns = vec![
        Turn::call(bash("cd sub")),
        Turn::call(bash(check)),
        Turn::call(bash(check)),
        Turn::call(edit(&s.path("README.md"), "no such text", "x")),
        Turn::text("Updated the README."),
    ];
    let prompt = "Fix the README from the sub folder.";
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    assert_clean_exit(&run);

    // The command ran in sub/ (notes.txt is only there), and its first repeat is denied, which
    // only the project's limit of 1 does.
    let first = run.tool_result("toolu_e2e_1_0");
    assert_ran(&run, &first);
    assert!(first.content.contains("notes.txt"), "{first:?}");
    assert_denied(&run, &run.tool_result("toolu_e2e_2_0"), "Bash");
    assert_stop_blocked_then_released(&run);
}

#[test]
fn e2e_subagent_repeats_do_not_trip_the_main_agent() {
    let Some(mut s) = Scenario::new("subagent") else {
        return;
    };
    s.install(Install::Script);
    let sub_marker = "SUBTASK: read the settings file";
    let mut sub_turns = repeat(Turn::call(bash(FAILING)), 4);
    sub_turns.push(Turn::text("The settings file is missing."));
    // The subagent runs in the background. The main agent's own copies of the same call are
    // held back until the subagent has made all four: on a count shared between them, the main
    // agent's very first copy would be denied.
    let mut main_turns = vec![Turn::call(agent("read settings", sub_marker))];
    main_turns.extend(repeat(Turn::call(bash(FAILING)), 2));
    main_turns.push(Turn::text("Waiting for the subagent."));
    let prompt = "Delegate reading the settings file.";
    let script = Script::default()
        .conversation("sub", sub_marker, sub_turns)
        .conversation("main", prompt, main_turns)
        .wait("main", 1, "sub", 4);
    let run = s.run(prompt, script);
    assert_clean_exit(&run);

    let sub = run.tool_results("sub");
    assert_eq!(sub.len(), 4, "{}", run.summary());
    assert_loop_broken(&run, &sub, "Bash");
    for turn in 1..3 {
        assert_ran(&run, &run.tool_result(&format!("toolu_e2e_{turn}_0")));
    }
    let denials = run.events_where(|e| e["decision"] == "deny");
    assert!(!denials.is_empty(), "{}", run.summary());
    assert!(
        denials.iter().all(|e| e["agent"] != "main"),
        "denials belong to the subagent\n{}",
        run.summary()
    );
    // Nor do the subagent's denials count against the main agent's turn at Stop.
    assert_stop_allowed(&run);
}
