//! Issue 22, "an end-to-end test per CLI that a denial storm ends the turn": the fake model makes
//! the same failing call after every refusal, for far longer than any loop should run, and each
//! real CLI with loopgate installed stops it at the ceiling (10 refused calls in a turn) through
//! the strongest channel it honours (`docs/loops.md`, "How each CLI's turn is ended"):
//! - Gemini CLI: `continue: false` before the tool ends the run;
//! - Qwen Code: the call is refused, and the block of the UserPromptSubmit it fires before the
//!   next model request ends the run;
//! - Copilot CLI: the call is let past preToolUse, and its permissionRequest hook refuses it with
//!   `interrupt: true`, which ends the run;
//! - OpenCode and Kilo CLI: loopgate's plugin aborts the session from `tool.execute.before` and
//!   throws; no model request follows, and the run exits 1 (`Error: Aborted`);
//! - Codex CLI honours no answer that ends a run mid-turn: every later call is refused with "this
//!   turn is over", and the run ends when the model gives up.
//!
//! Gemini and Qwen stop a model that repeats one call 5 times in a row themselves (and Gemini any
//! cycle of up to 5 calls repeated 5 times), which would end these runs before loopgate's ceiling
//! could be seen. There the storm alternates two failing calls in Thue–Morse order, which never
//! repeats a call, or any run of calls, three times in a row. Codex and Copilot get the one call.

use super::clis::Cli;
use super::harness::Scenario;
use super::script::{call, script, shell, text};
use serde_json::Value;

/// The first words of the ceiling's refusal, and of its standing refusal after it.
const CEILING: &str = "loopgate: 10 refused calls in this turn were made again regardless";
const OVER: &str = "loopgate: this turn is over";

/// Refused calls in a turn that end it (`src/judge/ceiling.rs`).
const TURN_BOUND: usize = 10;

/// Longer than any loop should run: without the ceiling every one of these calls is made.
const STORM: usize = 24;

/// The storm's `n`th call (from 0): one failing read of a file that is not there, which leaves a
/// line in `{{SCRATCH}}/attempts` when it really runs.
fn storm_call(cli: Cli, n: usize) -> Value {
    let own_guard = matches!(cli, Cli::Gemini | Cli::Qwen);
    let file = if own_guard && n.count_ones() % 2 == 1 {
        "config/local.yml"
    } else {
        "config/settings.yml"
    };
    shell(
        cli,
        &format!("echo tried >> {{{{SCRATCH}}}}/attempts; cat {file}"),
    )
}

fn storm(cli: Cli) -> Value {
    let mut turns: Vec<Value> = (0..STORM).map(|n| call(storm_call(cli, n))).collect();
    turns.push(text("I could not read the settings."));
    script(turns, "The settings file does not exist.")
}

/// How the turn ends on each CLI.
#[derive(PartialEq)]
enum Channel {
    /// The run ends at the ceiling: no model request after the call that reached it.
    EndsRun,
    /// Nothing ends the run: every later call is refused until the model gives up.
    Refusals,
}

fn channel(cli: Cli) -> Channel {
    match cli {
        Cli::Gemini | Cli::Qwen | Cli::Copilot | Cli::OpenCode | Cli::Kilo => Channel::EndsRun,
        Cli::Codex => Channel::Refusals,
    }
}

fn a_denial_storm_ends_the_turn(cli: Cli) {
    storm_with(cli, None);
}

/// The storm, with Copilot's permission flags given (`--allow-all` when `None`).
fn storm_with(cli: Cli, copilot_allow: Option<&'static [&'static str]>) {
    let Some(mut s) = Scenario::new(cli, "ceiling") else {
        return;
    };
    if let Some(flags) = copilot_allow {
        s.copilot_allow(flags);
    }
    s.install(false);
    let run = s.run("Read the settings file.", &storm(cli));
    // An aborted OpenCode session exits 1 (observed); the other CLIs end theirs as a success.
    let code = if cli.is_plugin() { 1 } else { 0 };
    assert!(
        !run.timed_out && run.code() == Some(code),
        "the run should end by itself with exit {code}\n{}",
        run.summary()
    );

    let ceiling = |decision: &str, event: &str| {
        run.events_where(|e| {
            e["detector"] == "ceiling"
                && e["decision"] == decision
                && e["event"] == event
                && e["enforced"] == true
        })
        .len()
    };
    // The storm's calls that ran: the first of each before loopgate saw them repeat.
    let ran = s.scratch_lines("attempts");
    assert!(
        ran <= 4,
        "{ran} storm calls ran; refused calls must not run\n{}",
        run.summary()
    );
    // Each model request but the last answer made one call; the 10th refused one reaches the
    // ceiling, after the few that ran.
    let bounded = TURN_BOUND + 1..=TURN_BOUND + 4;
    let requests = run.main_requests().len();
    match channel(cli) {
        Channel::EndsRun => {
            // The call that reached the ceiling was the model's last: no request after it, so
            // the calls the model got to make are bounded by the ceiling.
            assert!(
                bounded.contains(&requests),
                "{requests} model requests\n{}",
                run.summary()
            );
            assert_eq!(
                run.tool_outputs().len(),
                requests - 1,
                "every call but the last was answered, and no request came after the last\n{}",
                run.summary()
            );
            let (end_event, end_decision) = if cli == Cli::Gemini || cli.is_plugin() {
                ("PreToolUse", "halt")
            } else if cli == Cli::Copilot {
                // The call is let past preToolUse, and the permission hook ends the run.
                assert_eq!(ceiling("halt", "PreToolUse"), 1, "{}", run.summary());
                ("PermissionRequest", "halt")
            } else {
                // Qwen: the call is denied, then the hook before the next request blocks.
                assert_eq!(ceiling("deny", "PreToolUse"), 1, "{}", run.summary());
                ("PostToolBatch", "block")
            };
            assert_eq!(
                ceiling(end_decision, end_event),
                1,
                "the turn was ended once\n{}",
                run.summary()
            );
        }
        Channel::Refusals => {
            // Nothing ends the run, so every later call is refused as "over" and does nothing
            // until the model gives up.
            assert_eq!(requests, STORM + 1, "{}", run.summary());
            let outputs = run.tool_outputs();
            assert_eq!(outputs.len(), STORM, "{}", run.summary());
            let reached = outputs
                .iter()
                .position(|o| o.contains(CEILING))
                .unwrap_or_else(|| panic!("the ceiling was never reached\n{}", run.summary()));
            assert!(
                bounded.contains(&(reached + 1)),
                "the ceiling was reached at call #{}\n{}",
                reached + 1,
                run.summary()
            );
            assert!(
                outputs[reached + 1..].iter().all(|o| o.contains(OVER)),
                "every call after the ceiling is refused as over\n{}",
                run.summary()
            );
            assert_eq!(
                ceiling("deny", "PreToolUse"),
                STORM - reached,
                "{}",
                run.summary()
            );
        }
    }
    // The person sees why the run stopped: Gemini prints a hook's stop reason, Copilot the
    // permission hook's message.
    let told = match cli {
        Cli::Gemini => Some(CEILING),
        Cli::Copilot => {
            Some("loopgate ended this run: 10 refused calls in this turn were made again")
        }
        // The plugin prints the ceiling's line for the person before it aborts the session.
        Cli::OpenCode | Cli::Kilo => {
            Some("10 refused calls in this turn were made again regardless")
        }
        _ => None,
    };
    if let Some(told) = told {
        assert!(
            run.stderr.contains(told) || run.stdout.contains(told),
            "no message for the person\n{}",
            run.summary()
        );
    }
}

macro_rules! per_cli {
    ($($cli:ident => $test:ident),+ $(,)?) => {
        $(
            #[test]
            fn $test() {
                a_denial_storm_ends_the_turn(Cli::$cli);
            }
        )+
    };
}

per_cli!(
    Codex => e2e_codex_a_denial_storm_ends_the_turn,
    Gemini => e2e_gemini_a_denial_storm_ends_the_turn,
    Qwen => e2e_qwen_a_denial_storm_ends_the_turn,
    Copilot => e2e_copilot_a_denial_storm_ends_the_turn,
    OpenCode => e2e_opencode_a_denial_storm_ends_the_turn,
    Kilo => e2e_kilo_a_denial_storm_ends_the_turn,
);

/// Unattended Copilot runs are often started with `--allow-all-tools` alone, which asks no
/// permission for tools: its permission hook still fires (observed), so the run still ends there.
#[test]
fn e2e_copilot_a_denial_storm_ends_the_turn_under_allow_all_tools() {
    storm_with(Cli::Copilot, Some(&["--allow-all-tools"]));
}
