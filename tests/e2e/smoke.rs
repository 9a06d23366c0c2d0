//! Checks the harness itself against the real CLI with a hook that only records its input, so a
//! loopgate failure can never be mistaken for a harness failure, and the CLI facts the scenarios
//! rely on (hooks-observed.md) are re-checked on every run.

use super::expect::assert_clean_exit;
use super::fake_api::{bash, edit, Script, Turn};
use super::harness::Scenario;
use super::run::read_jsonl;
use serde_json::Value;
use std::fs;

#[test]
fn e2e_harness_drives_the_real_cli_with_a_recorder_hook() {
    let Some(s) = Scenario::new("smoke") else {
        return;
    };
    let rec = s.tmp_dir().join("hooks");
    fs::create_dir_all(&rec).unwrap();
    let rec_dir = rec.display().to_string();
    // One file per hook call: parallel hooks never interleave their lines.
    s.register_hooks(|_, _| format!("cat > '{rec_dir}'/$(date +%s%N)-$$.json"));
    let script = Script::default().conversation(
        "main",
        "SMOKE-PROMPT",
        vec![
            Turn::call(bash("echo hello")),
            Turn::call(bash("echo oops >&2; exit 1")),
            Turn::Tools(vec![bash("echo a"), bash("echo b")]),
            Turn::call(edit(&s.path("README.md"), "not in the file", "x")),
            Turn::text("All done."),
        ],
    );
    let run = s.run("SMOKE-PROMPT: do the thing", script);
    assert_clean_exit(&run);
    assert_eq!(run.requests_of("main").len(), 5, "{}", run.summary());
    assert_eq!(
        run.result().and_then(|r| r["result"].as_str()),
        Some("All done.")
    );

    // What the model got back, as hooks-observed.md describes it.
    let result = |id: &str| run.tool_result(id);
    assert_eq!(result("toolu_e2e_0_0").content, "hello");
    assert!(!result("toolu_e2e_0_0").is_error);
    assert_eq!(result("toolu_e2e_1_0").content, "Exit code 1\noops");
    assert!(result("toolu_e2e_1_0").is_error);
    assert_eq!(result("toolu_e2e_2_1").content, "b");
    assert!(result("toolu_e2e_3_0")
        .content
        .contains("String to replace not found"));

    // Which hooks saw which call: the rejected Edit reaches PostToolBatch only.
    let calls: Vec<Value> = fs::read_dir(&rec)
        .unwrap()
        .flatten()
        .flat_map(|f| read_jsonl(&f.path()))
        .collect();
    let seen = |event: &str, id: &str| {
        calls
            .iter()
            .filter(|c| c["hook_event_name"] == event && c["tool_use_id"] == id)
            .count()
    };
    for id in ["toolu_e2e_0_0", "toolu_e2e_2_0", "toolu_e2e_2_1"] {
        assert_eq!(
            (seen("PreToolUse", id), seen("PostToolUse", id)),
            (1, 1),
            "{id}"
        );
    }
    assert_eq!(seen("PostToolUseFailure", "toolu_e2e_1_0"), 1);
    assert_eq!(seen("PreToolUse", "toolu_e2e_3_0"), 0);
    let count = |event: &str| {
        calls
            .iter()
            .filter(|c| c["hook_event_name"] == event)
            .count()
    };
    assert_eq!(count("PostToolBatch"), 4);
    assert_eq!(count("SessionStart"), 1);
    assert_eq!(count("UserPromptSubmit"), 1);
    assert_eq!(count("Stop"), 1);
    let project = fs::canonicalize(&s.project).unwrap().display().to_string();
    assert!(calls.iter().all(|c| c["cwd"] == project.as_str()));
}
