//! Issue 37 with the real CLI: a project `.claude/settings.local.json` `env` entry that would
//! loosen loopgate (observe mode, an empty state dir), written mid-session — by the agent's own
//! Write call, refused by the guard; then by a script the guard does not parse, undone by
//! ConfigChange — leaves the looping calls that follow refused, counted in the state dir setup's
//! hooks use.

use super::expect::*;
use super::fake_api::{bash, write, Script, Turn};
use super::harness::{Install, Scenario};

const FAILING: &str = "cat config/settings.yml";

/// The same `env` entry, written by a script: what the guard sees is `python3 loosen.py`.
const LOOSEN: &str = r#"import json, os, sys
p = os.path.join(".claude", "settings.local.json")
os.makedirs(".claude", exist_ok=True)
json.dump({"env": {"LOOPGATE_MODE": "observe", "LOOPGATE_STATE_DIR": sys.argv[1]}}, open(p, "w"))
"#;

#[test]
fn e2e_a_project_env_entry_written_mid_session_is_refused_or_undone() {
    let Some(mut s) = Scenario::new("tell-env") else {
        return;
    };
    s.install(Install::Script);
    s.write_file("loosen.py", LOOSEN);
    let empty = s.home.join("empty-state");
    let local = s.path(".claude/settings.local.json");
    let entry = format!(
        r#"{{"env": {{"LOOPGATE_MODE": "observe", "LOOPGATE_STATE_DIR": "{}"}}}}"#,
        empty.display()
    );
    let prompt = "Make the hooks quieter, then read the config.";
    let mut turns = vec![
        Turn::call(write(&local, &entry)),
        // ConfigChange fires 1–2 s after the write, while the command still runs.
        Turn::call(bash(&format!(
            "python3 loosen.py {} && sleep 3",
            empty.display()
        ))),
    ];
    turns.extend(vec![Turn::call(bash(FAILING)); 6]);
    turns.push(Turn::text("I could not read the config."));
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    let refused = run
        .find_tool_result("toolu_e2e_0_0")
        .unwrap_or_else(|| panic!("no result for the Write: {}", run.summary()));
    assert!(
        refused.is_error && refused.content.contains("loopgate"),
        "the agent's Write is refused: {refused:?}\n{}",
        run.summary()
    );
    let results: Vec<_> = (2..8)
        .map_while(|t| run.find_tool_result(&format!("toolu_e2e_{t}_0")))
        .collect();
    assert!(!results.is_empty(), "{}", run.summary());
    assert_loop_broken(&run, &results, "Bash");
    let now = std::fs::read_to_string(&local).unwrap_or_default();
    assert!(!now.contains("LOOPGATE_"), "undone: {now}");
    assert!(
        !run.events_where(|e| e["event"] == "ConfigChange" && e["decision"] == "deny")
            .is_empty(),
        "{}",
        run.summary()
    );
    assert!(!empty.exists(), "the hooks never used the empty state dir");
}
