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

/// Issue 30 part 3 with the real CLI: the binary the hooks run replaced by `exit 0` reports
/// nothing about itself; the session's start, checked by the system's shell and `sha256sum`
/// (src/setup/pin.rs), tells the person (a `systemMessage`, kept in the transcript as the
/// attachment the screen shows at launch), and the model is sent nothing of it.
#[test]
fn e2e_a_replaced_binary_is_told_at_the_session_start() {
    let Some(mut s) = Scenario::new("tamper-binary") else {
        return;
    };
    s.install(Install::Script);
    let bin = s.home.join(".local/bin/loopgate");
    std::fs::remove_file(&bin).unwrap();
    std::fs::write(&bin, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let prompt = "List the files.";
    let run = s.run(
        prompt,
        Script::default().conversation(
            "main",
            prompt,
            vec![Turn::call(bash("ls")), Turn::text("done")],
        ),
    );
    // The transcript's `hook_system_message` attachment: what the interactive screen shows at
    // launch as `SessionStart:startup says: …` (hooks-interactive-observed.md §6).
    let told = run.transcript.iter().any(|l| {
        let l = l.to_string();
        l.contains("\"hook_system_message\"") && l.contains("loopgate is NOT judging this session")
    });
    assert!(told, "{}", run.summary());
    assert!(
        !run.everything_sent("main").contains("NOT judging"),
        "the model is sent nothing of it"
    );
}
