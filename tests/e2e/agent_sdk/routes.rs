//! loopgate in Agent SDK apps, by both routes, in both SDKs: the settings route (`loopgate setup`
//! wrote `~/.claude/settings.json`; the app passes the SDK's default options, which load it) and
//! the helper route (the app loads no settings, `settingSources: []`, and passes the hooks of
//! `loopgate/agent-sdk` or `loopgate_agent_sdk`). In each, issue 22's denial storm is refused
//! and its run ends at the ceiling, and an ordinary run goes through untouched.

use super::super::ceiling::{assert_storm_ended, storm_script, STORM_PROMPT};
use super::super::expect::{
    assert_clean_exit, assert_ran, assert_silent, stop_blocks, STOP_FEEDBACK,
};
use super::super::fake_api::{bash, edit, read, write, Script, Turn};
use super::super::harness::Scenario;
use super::super::run::Run;
use super::super::stop_gate::{edits_missed, EDITS_MISSED};
use super::host::{require, run_app, App, Hooks, Sdk};

#[derive(Clone, Copy, PartialEq)]
enum Route {
    Settings,
    Helper,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Settings => "settings",
            Route::Helper => "helper",
        }
    }
}

/// A scenario with loopgate put in by `route`, and the app's options for it.
fn setup<'a>(sdk: Sdk, route: Route, what: &str, prompt: &'a str) -> (Scenario, App<'a>) {
    let s = Scenario::without_cli(&format!("agent-sdk-{}-{}-{what}", sdk.name(), route.name()));
    let mut app = App::new(prompt);
    match route {
        Route::Settings => {
            // What a user runs: `loopgate setup`, here with this build's binary.
            let bin = env!("CARGO_BIN_EXE_loopgate");
            let out = std::process::Command::new(bin)
                .args(["setup", "--bin", bin])
                .env_clear()
                .env("HOME", &s.home)
                .current_dir(&s.project)
                .output()
                .expect("run loopgate setup");
            assert!(
                out.status.success(),
                "loopgate setup: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Route::Helper => {
            app.setting_sources = Some(&[]);
            app.hooks = Hooks::Loopgate;
        }
    }
    (s, app)
}

const ORDINARY: &str = "Fix the typo in the README and check the tests.";

/// Reads, a failing test run, an edit, the same test run again (a retry after a change), a new
/// file, a last look: the work of an ordinary turn.
fn ordinary_script(s: &Scenario) -> Script {
    let readme = s.path("README.md");
    Script::default().conversation(
        "main",
        ORDINARY,
        vec![
            Turn::call(read(&readme)),
            Turn::call(bash("sh run_tests.sh")),
            Turn::call(edit(&readme, "A tiny project.", "A tiny project, fixed.")),
            Turn::call(bash("sh run_tests.sh")),
            Turn::call(write(&s.path("NOTES.md"), "tests still fail: test_parse\n")),
            Turn::call(bash("git status --short")),
            Turn::text("README fixed; test_parse still fails."),
        ],
    )
}

fn route(sdk: Sdk, route: Route) {
    let Some(dir) = require(sdk) else { return };

    let (s, app) = setup(sdk, route, "storm", STORM_PROMPT);
    let run = run_app(&s, sdk, &dir, &app, storm_script());
    assert_storm_ended(&run);

    let (s, app) = setup(sdk, route, "ordinary", ORDINARY);
    let run = run_app(&s, sdk, &dir, &app, ordinary_script(&s));
    assert_clean_exit(&run);
    let results = run.tool_results("main");
    assert_eq!(results.len(), 6, "{}", run.summary());
    results.iter().for_each(|r| assert_ran(&run, r));
    assert!(
        results[1].content.contains("1 failed, 3 passed"),
        "{}",
        run.summary()
    );
    assert_silent(&run, "main");
    assert_eq!(
        run.result().and_then(|r| r["result"].as_str()),
        Some("README fixed; test_parse still fails."),
        "{}",
        run.summary()
    );
    assert!(
        std::fs::read_to_string(s.project.join("README.md"))
            .unwrap()
            .contains("fixed."),
        "the edit went through"
    );
    // loopgate saw every call: the route under test ran, this is not a run without it.
    let status = s.status_json();
    assert_eq!(status["totals"]["calls"], 6, "calls: {status:#}");
}

#[test]
fn e2e_agent_sdk_ts_settings_route() {
    route(Sdk::TypeScript, Route::Settings);
}

#[test]
fn e2e_agent_sdk_ts_helper_route() {
    route(Sdk::TypeScript, Route::Helper);
}

#[test]
fn e2e_agent_sdk_py_settings_route() {
    route(Sdk::Python, Route::Settings);
}

#[test]
fn e2e_agent_sdk_py_helper_route() {
    route(Sdk::Python, Route::Helper);
}

/// The reasons of the Stop blocks the model was sent. The Claude Code the SDKs bundle (2.1.332)
/// wraps the feedback the pinned CLI sends as it is (`Stop hook feedback:\n<reason>`) in a
/// `<system-reminder>` with a preamble, by either route.
fn stop_feedback(run: &Run) -> Vec<String> {
    run.user_texts("main")
        .iter()
        .filter_map(|t| {
            let (_, reason) = t.split_once(STOP_FEEDBACK)?;
            Some(
                reason
                    .trim_end()
                    .trim_end_matches("</system-reminder>")
                    .trim_end()
                    .to_string(),
            )
        })
        .collect()
}

/// SDK sessions run unattended (Claude Code sets `CLAUDE_CODE_SESSION_ATTENDED=0` for their
/// settings hooks, and the helpers do the same), so the progress gate holds a turn whose edits
/// all missed at its Stop: the model reads loopgate's reason, goes on, and is let stop within
/// loopgate's budget of two blocks.
fn holds_a_fruitless_turn_at_stop(sdk: Sdk, route: Route) {
    let Some(dir) = require(sdk) else { return };
    let (s, app) = setup(sdk, route, "stop", EDITS_MISSED);
    let script = edits_missed(&s);
    let run = run_app(&s, sdk, &dir, &app, script);
    assert_clean_exit(&run);
    let feedback = stop_feedback(&run);
    let logged = stop_blocks(&run);
    assert!(
        (1..=2).contains(&feedback.len()) && feedback.len() == logged.len(),
        "blocks seen {} vs logged {}\n{}",
        feedback.len(),
        logged.len(),
        run.summary()
    );
    assert_eq!(Some(feedback[0].as_str()), logged[0]["reason"].as_str());
    assert!(
        run.requests_of("main").iter().any(|r| r.turn == 3),
        "the agent went on after the block\n{}",
        run.summary()
    );
}

#[test]
fn e2e_agent_sdk_ts_holds_a_fruitless_turn_at_stop() {
    holds_a_fruitless_turn_at_stop(Sdk::TypeScript, Route::Settings);
    holds_a_fruitless_turn_at_stop(Sdk::TypeScript, Route::Helper);
}

#[test]
fn e2e_agent_sdk_py_holds_a_fruitless_turn_at_stop() {
    holds_a_fruitless_turn_at_stop(Sdk::Python, Route::Settings);
    holds_a_fruitless_turn_at_stop(Sdk::Python, Route::Helper);
}
