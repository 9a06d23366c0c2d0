//! Issue 12, "Proven against each real CLI": the same loops as the Claude Code suite, played by
//! each CLI against the fake model with loopgate installed by `loopgate setup --agent <cli>`.
//! Assertions are what a user would notice: the text the model read, whether a command really
//! ran (scripted commands leave a line in the scratch dir outside the project), how the run ended.

use super::clis::Cli;
use super::harness::{Run, Scenario};
use super::script::{call, read, script, shell, text, write};

/// Whether a text the model read is loopgate's: its reasons start with `loopgate:` or, for a
/// refused repeat, `LOOP_DETECTED (loopgate):`.
fn by_loopgate(text: &str) -> bool {
    text.contains("loopgate:") || text.contains("(loopgate):")
}

/// A command that fails the same way every time and changes nothing under the project; each run
/// leaves a line in `{{SCRATCH}}/attempts`.
const FAILING: &str = "echo tried >> {{SCRATCH}}/attempts; cat config/settings.yml";

fn assert_ended_by_itself(run: &Run) {
    assert!(
        !run.timed_out && run.code() == Some(0),
        "the run should end by itself with exit 0\n{}",
        run.summary()
    );
}

/// (a) and (d): the same failing shell call 4 times. Gemini and Qwen intercept the 5th identical
/// consecutive call themselves, so loopgate has to act within 4.
fn failing_loop(cli: Cli) -> serde_json::Value {
    let mut turns = vec![call(shell(cli, FAILING)); 4];
    turns.push(text("I could not read the config."));
    script(turns, "The config file does not exist.")
}

/// (a) A repeated failing shell command is denied, the reason reaches the model, and the denied
/// calls do not run.
fn repeated_failure_denied(cli: Cli) {
    let Some(mut s) = Scenario::new(cli, "repeat") else {
        return;
    };
    s.install(false);
    let run = s.run("Read the settings file.", &failing_loop(cli));
    assert_ended_by_itself(&run);

    let outputs = run.tool_outputs();
    assert_eq!(outputs.len(), 4, "four tool results\n{}", run.summary());
    let first = outputs
        .iter()
        .position(|o| by_loopgate(o))
        .unwrap_or_else(|| panic!("no call was denied by loopgate\n{}", run.summary()));
    // One retry of a deterministic failure is legitimate; by the 4th identical call, before the
    // CLI's own guard, the loop must be broken.
    assert!(
        (1..=3).contains(&first),
        "first denial at call #{}\n{}",
        first + 1,
        run.summary()
    );
    assert!(
        outputs[first..].iter().all(|o| by_loopgate(o)),
        "every call after the first denial is denied too\n{}",
        run.summary()
    );
    assert_eq!(
        s.scratch_lines("attempts"),
        first,
        "the denied calls must not run\n{}",
        run.summary()
    );
    let denials = run.events_where(|e| {
        e["event"] == "PreToolUse" && e["decision"] == "deny" && e["enforced"] == true
    });
    assert_eq!(denials.len(), 4 - first, "{}", run.summary());
}

/// (b) The same broken file written again and again, each time followed by the same failing run
/// of it (interleaved, so no CLI's consecutive-call guard fires first): the loop is refused.
/// The run fails with a traceback, which every CLI's dialect reads as a failure (Codex reports
/// no exit code to hooks; its dialect judges only unambiguous text).
fn same_content_write_loop_stopped(cli: Cli) {
    let Some(mut s) = Scenario::new(cli, "same-write") else {
        return;
    };
    s.install(false);
    let run_it = "echo ran >> {{SCRATCH}}/runs; python3 tool.py";
    let mut turns = Vec::new();
    for _ in 0..4 {
        turns.push(call(write(
            cli,
            "tool.py",
            "import settings_loader\n\nsettings_loader.main()\n",
        )));
        turns.push(call(shell(cli, run_it)));
    }
    turns.push(text("The tool still does not parse."));
    let run = s.run(
        "Make tool.py run.",
        &script(turns, "I could not fix tool.py."),
    );
    assert_ended_by_itself(&run);

    let outputs = run.tool_outputs();
    assert_eq!(outputs.len(), 8, "eight tool results\n{}", run.summary());
    let first = outputs
        .iter()
        .position(|o| by_loopgate(o))
        .unwrap_or_else(|| panic!("the loop was never refused\n{}", run.summary()));
    assert!(
        first <= 5,
        "refused only at call #{}\n{}",
        first + 1,
        run.summary()
    );
    assert!(
        s.scratch_lines("runs") < 4,
        "the failing run of the unchanged file must be refused before its 4th try\n{}",
        run.summary()
    );
    assert!(
        !run.events_where(|e| e["decision"] == "deny" && e["enforced"] == true)
            .is_empty(),
        "{}",
        run.summary()
    );
}

/// (c) A turn that only reads ends freely: nothing denied, Stop not blocked, nothing from
/// loopgate reaches the model.
fn read_only_turn_ends_freely(cli: Cli) {
    let Some(mut s) = Scenario::new(cli, "read-only") else {
        return;
    };
    s.install(false);
    let turns = vec![
        call(read(cli, "README.md")),
        call(shell(cli, "git status --short")),
        text("The README describes a tiny project."),
    ];
    let run = s.run("What is this project?", &script(turns, "Nothing else."));
    assert_ended_by_itself(&run);
    assert_eq!(
        run.main_requests().len(),
        3,
        "two tool turns and the answer, no continuation\n{}",
        run.summary()
    );
    assert!(
        run.tool_outputs()
            .iter()
            .any(|o| o.contains("A tiny project.")),
        "the read ran\n{}",
        run.summary()
    );
    assert!(!run.model_heard_from_loopgate(), "{}", run.summary());
    assert!(
        run.events_where(|e| e["decision"] != "allow").is_empty(),
        "{}",
        run.summary()
    );
}

/// The loop of (a), run to its end as if loopgate were not there: every call ran and the model
/// never heard of loopgate.
fn untouched_loop(s: &Scenario, cli: Cli) -> Run {
    let run = s.run("Read the settings file.", &failing_loop(cli));
    assert_ended_by_itself(&run);
    assert_eq!(
        s.scratch_lines("attempts"),
        4,
        "every call ran\n{}",
        run.summary()
    );
    assert!(!run.model_heard_from_loopgate(), "{}", run.summary());
    run
}

/// (d) Observe mode: the loop of (a) runs to its end, the model never hears of loopgate, and the
/// denials it would have made are on record.
fn observe_mode_is_silent(cli: Cli) {
    let Some(mut s) = Scenario::new(cli, "observe") else {
        return;
    };
    s.install(true);
    let run = untouched_loop(&s, cli);
    assert_eq!(
        run.main_requests().len(),
        5,
        "four calls and the answer, no Stop continuation\n{}",
        run.summary()
    );
    let would = run.events_where(|e| {
        e["event"] == "PreToolUse" && e["decision"] == "deny" && e["enforced"] == false
    });
    assert!(!would.is_empty(), "{}", run.summary());
    assert!(
        run.events.iter().all(|e| e["enforced"] == false),
        "{}",
        run.summary()
    );
}

/// (e) Codex and Gemini have no cap on Stop blocks. A turn that was stepped in on and changed
/// nothing is held at Stop, the model keeps claiming it is done, and loopgate lets it end after a
/// few blocks: the run ends by itself with a small number of model requests (every Stop call
/// either ends the run or causes one more request, so that also bounds the Stop calls).
fn stop_block_is_bounded(cli: Cli) {
    let Some(mut s) = Scenario::new(cli, "stop-bounded") else {
        return;
    };
    // The gate acts on unattended sessions by default; these CLIs say nothing about attendance,
    // so it is switched on for every session, as a user of a headless CLI would.
    s.set_env("LOOPGATE_PROGRESS__WHEN", "always");
    s.install(false);
    // A turn that tries to change something (README rewritten as it was: nothing changes) and
    // walks into a refusal: the failing read is refused, then asked again regardless.
    let mut turns = vec![call(write(cli, "README.md", "# demo\n\nA tiny project.\n"))];
    turns.extend(vec![call(shell(cli, FAILING)); 4]);
    turns.push(text("Read the settings."));
    let run = s.run(
        "Fix the settings file.",
        &script(turns, "Done: the settings are read."),
    );
    assert_ended_by_itself(&run);
    let blocks = run.events_where(|e| {
        e["detector"] == "progress" && e["decision"] == "block" && e["enforced"] == true
    });
    assert!(
        !blocks.is_empty(),
        "the Stop was never blocked, so nothing is proven\n{}",
        run.summary()
    );
    assert!(
        blocks.len() <= 3,
        "{} Stop blocks\n{}",
        blocks.len(),
        run.summary()
    );
    assert!(
        run.user_texts().iter().any(|t| by_loopgate(t)),
        "the block's reason reaches the model as a prompt\n{}",
        run.summary()
    );
    // 5 calls + the answer, then one request per block.
    assert!(
        run.main_requests().len() <= 6 + 3,
        "{} model requests\n{}",
        run.main_requests().len(),
        run.summary()
    );
}

/// (f) OpenCode and Kilo: loopgate's plugin fails open. With the binary it runs gone, the loop of
/// (a) runs to its end as if loopgate were not there, and the person is told why once per call
/// on stderr; nothing is thrown at the model.
fn plugin_fails_open(cli: Cli) {
    let Some(mut s) = Scenario::new(cli, "fail-open") else {
        return;
    };
    s.install(false);
    let plugin = s.hook_file();
    let text = std::fs::read_to_string(&plugin).unwrap();
    let bin = super::harness::loopgate_bin().display().to_string();
    assert!(
        text.contains(&bin),
        "the plugin names the binary setup was given"
    );
    let gone = s.scratch.join("gone").join("loopgate");
    std::fs::write(&plugin, text.replace(&bin, &gone.display().to_string())).unwrap();
    let run = untouched_loop(&s, cli);
    assert!(
        run.stderr.contains("loopgate: cannot run") && run.stderr.contains("the call goes ahead"),
        "the person is told why loopgate did nothing\n{}",
        run.summary()
    );
}

macro_rules! per_cli {
    ($scenario:ident: $($cli:ident => $test:ident),+ $(,)?) => {
        $(
            #[test]
            fn $test() {
                $scenario(Cli::$cli);
            }
        )+
    };
}

per_cli!(repeated_failure_denied:
    Codex => e2e_codex_repeated_failing_command_is_denied,
    Gemini => e2e_gemini_repeated_failing_command_is_denied,
    Qwen => e2e_qwen_repeated_failing_command_is_denied,
    Copilot => e2e_copilot_repeated_failing_command_is_denied,
    OpenCode => e2e_opencode_repeated_failing_command_is_denied,
    Kilo => e2e_kilo_repeated_failing_command_is_denied,
);

per_cli!(same_content_write_loop_stopped:
    Codex => e2e_codex_same_content_write_loop_is_stopped,
    Gemini => e2e_gemini_same_content_write_loop_is_stopped,
    Qwen => e2e_qwen_same_content_write_loop_is_stopped,
    Copilot => e2e_copilot_same_content_write_loop_is_stopped,
    OpenCode => e2e_opencode_same_content_write_loop_is_stopped,
);

per_cli!(read_only_turn_ends_freely:
    Codex => e2e_codex_read_only_turn_ends_freely,
    Gemini => e2e_gemini_read_only_turn_ends_freely,
    Qwen => e2e_qwen_read_only_turn_ends_freely,
    Copilot => e2e_copilot_read_only_turn_ends_freely,
    OpenCode => e2e_opencode_read_only_turn_ends_freely,
    Kilo => e2e_kilo_read_only_turn_ends_freely,
);

per_cli!(observe_mode_is_silent:
    Codex => e2e_codex_observe_mode_is_silent,
    Gemini => e2e_gemini_observe_mode_is_silent,
    Qwen => e2e_qwen_observe_mode_is_silent,
    Copilot => e2e_copilot_observe_mode_is_silent,
    OpenCode => e2e_opencode_observe_mode_is_silent,
);

per_cli!(stop_block_is_bounded:
    Codex => e2e_codex_stop_block_is_bounded,
    Gemini => e2e_gemini_stop_block_is_bounded,
);

per_cli!(plugin_fails_open:
    OpenCode => e2e_opencode_plugin_fails_open,
);
