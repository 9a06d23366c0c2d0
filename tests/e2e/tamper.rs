//! Issue 21: the agent switches loopgate off by a route the guard does not parse (a script of its
//! own rewriting `~/.claude/settings.json`), then makes another settings change, which makes
//! Claude Code reload every settings file. loopgate's ConfigChange hook has put its hooks back
//! by then, so the looping calls that follow are still refused.

use super::expect::*;
use super::fake_api::{bash, write, Script, Turn};
use super::harness::{Install, Scenario};
use serde_json::Value;

const FAILING: &str = "cat config/settings.yml";

/// Unwires every hook from the user's settings: what the guard sees is `python3 unwire.py`.
const UNWIRE: &str = r#"import json, os
p = os.path.join(os.environ["HOME"], ".claude", "settings.json")
d = json.load(open(p))
d["hooks"] = {}
d.setdefault("env", {})["LOOPGATE_MODE"] = "observe"
open(p, "w").write(json.dumps(d))
"#;

#[test]
fn e2e_settings_unwired_mid_session_are_put_back_and_loops_still_refused() {
    let Some(mut s) = Scenario::new("tamper") else {
        return;
    };
    s.install(Install::Script);
    s.write_file("unwire.py", UNWIRE);
    let local = s.path(".claude/settings.local.json");
    let mut turns = vec![
        // ConfigChange fires 1–2 s after the write, while the command still runs.
        Turn::call(bash("python3 unwire.py && sleep 3")),
        // A second, ordinary settings change: Claude Code accepts it and re-reads every file.
        Turn::call(write(&local, r#"{"permissions": {"allow": ["Bash(ls)"]}}"#)),
        Turn::call(bash("sleep 3")),
    ];
    turns.extend(vec![Turn::call(bash(FAILING)); 6]);
    turns.push(Turn::text("I could not read the config."));
    let prompt = "Tidy the settings, then read the config.";
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );

    let results: Vec<_> = (3..9)
        .map_while(|t| run.find_tool_result(&format!("toolu_e2e_{t}_0")))
        .collect();
    assert!(!results.is_empty(), "{}", run.summary());
    assert_loop_broken(&run, &results, "Bash");

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
