//! What fires in an Agent SDK app, re-checked on every run with hooks that only record their
//! input (no loopgate involved): the user's settings hooks (where `loopgate setup` writes) run
//! under the SDK's default options and `['user']`, not under `['project']` or `[]`; the
//! project's run under the default and `['project']`; hooks given in code
//! (callbacks) run under any `settingSources`, with the input a settings hook reads on stdin.
//! docs/agent-sdk.md records these facts.

use super::super::expect::assert_clean_exit;
use super::super::fake_api::{bash, Script, Turn};
use super::super::harness::Scenario;
use super::super::run::{read_jsonl, Run};
use super::host::{recorded_callbacks, require, run_app, App, Hooks, Sdk};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;

const PROMPT: &str = "OBSERVE-PROMPT: run the two commands.";

/// The events the recorders count (every one loopgate handles that a plain run reaches).
const EVENTS: [&str; 7] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Stop",
];

/// Hook input fields loopgate reads, present in the settings hooks' stdin and the callbacks'
/// input alike.
const BASE_FIELDS: [&str; 4] = ["session_id", "transcript_path", "cwd", "hook_event_name"];

fn script() -> Script {
    Script::default().conversation(
        "main",
        "OBSERVE-PROMPT",
        vec![
            Turn::call(bash("echo hello")),
            Turn::call(bash("echo oops >&2; exit 1")),
            Turn::text("All done."),
        ],
    )
}

/// A run whose two calls went through untouched and whose answer is the script's.
fn assert_plain_run(run: &Run) {
    assert_clean_exit(run);
    assert_eq!(run.tool_result("toolu_e2e_0_0").content, "hello");
    assert!(run.tool_result("toolu_e2e_1_0").is_error);
    assert_eq!(
        run.result().and_then(|r| r["result"].as_str()),
        Some("All done."),
        "{}",
        run.summary()
    );
}

fn counts(inputs: &[Value]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for i in inputs {
        *out.entry(i["hook_event_name"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    out
}

fn expected_counts() -> BTreeMap<String, usize> {
    [
        ("SessionStart", 1),
        ("UserPromptSubmit", 1),
        ("PreToolUse", 2),
        ("PostToolUse", 1),
        ("PostToolUseFailure", 1),
        ("PostToolBatch", 2),
        ("Stop", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Settings hooks in `~/.claude/settings.json` (where `loopgate setup` writes) that record their
/// stdin; returns the folder they write to.
fn record_settings_hooks(s: &Scenario) -> std::path::PathBuf {
    let rec = s.tmp_dir().join("settings-hooks");
    fs::create_dir_all(&rec).unwrap();
    let dir = rec.display().to_string();
    s.register_hooks(|_, _| format!("cat > '{dir}'/$(date +%s%N)-$$.json"));
    rec
}

fn settings_inputs(rec: &std::path::Path) -> Vec<Value> {
    let mut files: Vec<_> = fs::read_dir(rec)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files.iter().flat_map(|f| read_jsonl(f)).collect()
}

/// Recorder hooks in the project's `.claude/settings.json` too (the same hooks as the user's,
/// writing elsewhere); returns the folder they write to.
fn record_project_hooks(s: &Scenario, user_rec: &std::path::Path) -> std::path::PathBuf {
    let rec = s.tmp_dir().join("project-hooks");
    fs::create_dir_all(&rec).unwrap();
    let user = fs::read_to_string(s.home.join(".claude/settings.json")).unwrap();
    let project = user.replace(&user_rec.display().to_string(), &rec.display().to_string());
    s.write_file(".claude/settings.json", &project);
    rec
}

/// The settings route: the user's and the project's settings hooks under the default options,
/// `['project']`, `['user']` and `[]`.
fn settings_sources(sdk: Sdk) {
    let Some(dir) = require(sdk) else { return };
    for (label, sources, user_fires, project_fires) in [
        ("default", None, true, true),
        ("project", Some(&["project"][..]), false, true),
        ("user", Some(&["user"][..]), true, false),
        ("none", Some(&[][..]), false, false),
    ] {
        let s = Scenario::without_cli(&format!("agent-sdk-{}-observe-{label}", sdk.name()));
        let user_rec = record_settings_hooks(&s);
        let project_rec = record_project_hooks(&s, &user_rec);
        let mut app = App::new(PROMPT);
        app.setting_sources = sources;
        let run = run_app(&s, sdk, &dir, &app, script());
        assert_plain_run(&run);
        for (layer, rec, fires) in [
            ("user", &user_rec, user_fires),
            ("project", &project_rec, project_fires),
        ] {
            let inputs = settings_inputs(rec);
            let want = if fires {
                expected_counts()
            } else {
                BTreeMap::new()
            };
            assert_eq!(
                counts(&inputs),
                want,
                "{layer} hooks, settingSources {label}"
            );
            for i in &inputs {
                for f in BASE_FIELDS {
                    assert!(i.get(f).is_some(), "settings hook stdin without {f}: {i}");
                }
            }
        }
    }
}

/// The callback route: hooks in code, with the settings loaded by default and with none.
fn callbacks(sdk: Sdk) {
    let Some(dir) = require(sdk) else { return };
    for (label, sources) in [("default", None), ("none", Some(&[][..]))] {
        let s = Scenario::without_cli(&format!("agent-sdk-{}-callbacks-{label}", sdk.name()));
        let mut app = App::new(PROMPT);
        app.setting_sources = sources;
        app.hooks = Hooks::Record;
        app.record_events = &EVENTS;
        // Settings recorders too: under the default options both kinds run, side by side.
        let rec = record_settings_hooks(&s);
        let run = run_app(&s, sdk, &dir, &app, script());
        assert_plain_run(&run);
        let calls = recorded_callbacks(&s);
        if sources.is_none() {
            let settings = settings_inputs(&rec);
            assert_eq!(counts(&settings), expected_counts());
            for event in &EVENTS[1..] {
                let keys = |inputs: Vec<&Value>| -> Vec<Vec<String>> {
                    inputs
                        .into_iter()
                        .filter(|i| i["hook_event_name"] == *event)
                        .map(|i| i.as_object().unwrap().keys().cloned().collect())
                        .map(|mut k: Vec<String>| {
                            k.sort();
                            k
                        })
                        .collect()
                };
                assert_eq!(
                    keys(calls.iter().map(|c| &c["input"]).collect()),
                    keys(settings.iter().collect()),
                    "{event}: the callback's input and the settings hook's stdin differ"
                );
            }
        }
        // A SessionStart callback never fires: the session starts before the SDK has registered
        // its callbacks (a SessionStart settings hook does fire).
        let mut want = expected_counts();
        want.remove("SessionStart");
        assert_eq!(
            counts(&calls.iter().map(|c| c["input"].clone()).collect::<Vec<_>>()),
            want,
            "callbacks, settingSources {label}"
        );
        let project = fs::canonicalize(&s.project).unwrap().display().to_string();
        for c in &calls {
            let input = &c["input"];
            for f in BASE_FIELDS {
                assert!(input.get(f).is_some(), "callback input without {f}: {c}");
            }
            assert_eq!(input["cwd"], project.as_str(), "{c}");
            if input["hook_event_name"] == "PreToolUse" {
                assert_eq!(input["tool_name"], "Bash", "{c}");
                assert!(input["tool_input"]["command"].is_string(), "{c}");
                assert_eq!(input["tool_use_id"], c["toolUseId"], "{c}");
            }
            if input["hook_event_name"] == "PostToolUse" {
                assert!(input.get("tool_response").is_some(), "{c}");
            }
        }
    }
}

#[test]
fn e2e_agent_sdk_ts_settings_hooks_follow_setting_sources() {
    settings_sources(Sdk::TypeScript);
}

#[test]
fn e2e_agent_sdk_py_settings_hooks_follow_setting_sources() {
    settings_sources(Sdk::Python);
}

#[test]
fn e2e_agent_sdk_ts_callbacks_fire_with_the_settings_hook_input() {
    callbacks(Sdk::TypeScript);
}

#[test]
fn e2e_agent_sdk_py_callbacks_fire_with_the_settings_hook_input() {
    callbacks(Sdk::Python);
}
