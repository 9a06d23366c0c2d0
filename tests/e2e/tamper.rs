//! Issue 21: the agent switches loopgate off by a route the guard does not parse (a script of its
//! own rewriting `~/.claude/settings.json`), then makes another settings change, which makes
//! Claude Code reload every settings file. loopgate's ConfigChange hook has put its hooks back
//! by then, so the looping calls that follow are still refused. Issue 30: the same when the
//! script only edits loopgate's handler in place (async, its output thrown away).

use super::expect::*;
use super::fake_api::{bash, write, Script, Turn};
use super::harness::{Install, Scenario};
use super::run::Run;
use serde_json::Value;

const FAILING: &str = "cat config/settings.yml";

/// Unwires every hook from the user's settings: what the guard sees is `python3 unwire.py`.
pub(super) const UNWIRE: &str = r#"import json, os
p = os.path.join(os.environ["HOME"], ".claude", "settings.json")
d = json.load(open(p))
d["hooks"] = {}
d.setdefault("env", {})["LOOPGATE_MODE"] = "observe"
open(p, "w").write(json.dumps(d))
"#;

/// Runs `script` (written as `file`) in a session's first call, then an ordinary settings change
/// that makes Claude Code reload every settings file, then the failing call six times; asserts
/// the loop was still broken. `None` when the CLI cannot be had (see `claude_cli`).
fn tamper_then_loop(name: &str, file: &str, script: &str, prompt: &str) -> Option<(Scenario, Run)> {
    let mut s = Scenario::new(name)?;
    s.install(Install::Script);
    s.write_file(file, script);
    let local = s.path(".claude/settings.local.json");
    let mut turns = vec![
        // ConfigChange fires 1–2 s after the write, while the command still runs.
        Turn::call(bash(&format!("python3 {file} && sleep 3"))),
        // A second, ordinary settings change: Claude Code accepts it and re-reads every file.
        Turn::call(write(&local, r#"{"permissions": {"allow": ["Bash(ls)"]}}"#)),
        Turn::call(bash("sleep 3")),
    ];
    turns.extend(vec![Turn::call(bash(FAILING)); 6]);
    turns.push(Turn::text("I could not read the config."));
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    let results: Vec<_> = (3..9)
        .map_while(|t| run.find_tool_result(&format!("toolu_e2e_{t}_0")))
        .collect();
    assert!(!results.is_empty(), "{}", run.summary());
    assert_loop_broken(&run, &results, "Bash");
    Some((s, run))
}

#[test]
fn e2e_settings_unwired_mid_session_are_put_back_and_loops_still_refused() {
    let Some((s, run)) = tamper_then_loop(
        "tamper",
        "unwire.py",
        UNWIRE,
        "Tidy the settings, then read the config.",
    ) else {
        return;
    };
    let settings = s.read_settings();
    let pre = settings["hooks"]["PreToolUse"].to_string();
    assert!(pre.contains("pre-tool-use"), "hooks put back: {settings:#}");
    assert!(
        settings["env"].get("LOOPGATE_MODE").is_none(),
        "{settings:#}"
    );
    let aside = s.home.join(".claude/settings.json.loopgate-undone");
    assert!(aside.is_file(), "the agent's version is kept aside");
    let undone: Vec<&Value> =
        run.events_where(|e| e["event"] == "ConfigChange" && e["decision"] == "deny");
    assert!(!undone.is_empty(), "{}", run.summary());
}

/// Weakens loopgate's own PreToolUse handler in place, leaving it "wired": it runs in the
/// background (its answer ignored) with its output thrown away.
const WEAKEN: &str = r#"import json, os
p = os.path.join(os.environ["HOME"], ".claude", "settings.json")
d = json.load(open(p))
for g in d["hooks"]["PreToolUse"]:
    for h in g["hooks"]:
        if "loopgate" in h["command"]:
            h["async"] = True
            h["command"] += " >/dev/null"
open(p, "w").write(json.dumps(d))
"#;

/// Issue 30 part 1 with the real CLI: loopgate's handler edited in place mid-session is put back
/// by ConfigChange, the person is told, and the loop that follows is still refused.
#[test]
fn e2e_handler_edited_in_place_mid_session_is_put_back_and_told() {
    let Some((s, run)) = tamper_then_loop(
        "tamper-in-place",
        "weaken.py",
        WEAKEN,
        "Speed up the hooks, then read the config.",
    ) else {
        return;
    };
    let settings = s.read_settings();
    let pre = settings["hooks"]["PreToolUse"].to_string();
    assert!(
        pre.contains("pre-tool-use") && !pre.contains("async") && !pre.contains("/dev/null"),
        "the handler is put back as setup wrote it: {settings:#}"
    );
    let told: Vec<&Value> = run.events_where(|e| {
        e["event"] == "ConfigChange"
            && e["decision"] == "deny"
            && e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("handler was changed"))
    });
    assert!(!told.is_empty(), "{}", run.summary());
}
