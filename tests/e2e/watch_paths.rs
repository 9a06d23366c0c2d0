//! Issue 21, item 1: what a SessionStart `watchPaths` answer and the FileChanged event it enables
//! do in the real CLI, checked on every run (the facts `wiring`'s FileChanged handling relies on).
//! The hooks here only record their input, so the CLI is what is under test. Observed with
//! 2.1.330 (`claude -p`): a SessionStart answer holding only `hookSpecificOutput.watchPaths`
//! reaches neither the model nor the stream; FileChanged then fires for those paths (`change`
//! about 1 s after a write, `unlink` for a removal), also for a group with no matcher; its
//! `systemMessage` is shown nowhere.

use super::fake_api::{bash, Script, Turn};
use super::harness::Scenario;
use super::run::read_jsonl;
use serde_json::{json, Value};
use std::fs;

#[test]
fn e2e_session_start_watch_paths_reach_file_changed_and_not_the_model() {
    let Some(s) = Scenario::new("watch-paths") else {
        return;
    };
    let rec = s.tmp_dir().join("rec");
    fs::create_dir_all(&rec).unwrap();
    // Files outside the project that exist before the run: the hooks' binary and a config.
    let bin = s.tmp_dir().join("hookbin").join("loopgate");
    let cfg = s.tmp_dir().join("cfg").join("config.toml");
    for f in [&bin, &cfg] {
        fs::create_dir_all(f.parent().unwrap()).unwrap();
        fs::write(f, "original\n").unwrap();
    }
    let (rec, bin_s, cfg_s) = (rec.display(), bin.display(), cfg.display());
    let answer = json!({"hookSpecificOutput": {"hookEventName": "SessionStart",
        "watchPaths": [bin_s.to_string(), cfg_s.to_string()]}});
    let ss = format!("cat > '{rec}'/ss-$$.json; printf '%s' '{answer}'");
    let fc = format!(
        "cat > '{rec}'/fc-$(date +%s%N).json; printf '%s' '{{\"systemMessage\":\"FC-SYSMSG-OBSERVE\"}}'"
    );
    let settings = json!({"hooks": {
        "SessionStart": [{"hooks": [{"type": "command", "command": ss}]}],
        "FileChanged": [
            {"matcher": "loopgate|config.toml", "hooks": [{"type": "command", "command": fc}]},
            {"hooks": [{"type": "command", "command": format!("cat > '{rec}'/nomatcher-$(date +%s%N).json")}]},
        ],
    }});
    let path = s.home.join(".claude/settings.json");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, settings.to_string()).unwrap();

    let prompt = "Touch the files.";
    let turns = vec![
        Turn::call(bash(&format!("echo replaced > '{bin_s}'; sleep 3"))),
        Turn::call(bash(&format!("rm '{cfg_s}'; sleep 2"))),
        Turn::call(bash("echo WATCH-DONE")),
        Turn::text("Done."),
    ];
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );

    let calls: Vec<Value> = fs::read_dir(s.tmp_dir().join("rec"))
        .unwrap()
        .flatten()
        .flat_map(|f| read_jsonl(&f.path()))
        .collect();
    let changed: Vec<(&str, &str)> = calls
        .iter()
        .filter(|c| c["hook_event_name"] == "FileChanged")
        .map(|c| {
            (
                c["file_path"].as_str().unwrap_or(""),
                c["event"].as_str().unwrap_or(""),
            )
        })
        .collect();
    eprintln!("FileChanged seen: {changed:?}");
    let unmatched = fs::read_dir(s.tmp_dir().join("rec"))
        .unwrap()
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().starts_with("nomatcher-"))
        .count();
    eprintln!("FileChanged runs of the group without a matcher: {unmatched}");
    let all_requests: String = run.requests.iter().map(|r| r.body.to_string()).collect();
    let stream: String = run.stream.iter().map(Value::to_string).collect();
    eprintln!(
        "watchPaths in requests: {}, SessionStart hook text in requests: {}, FC-SYSMSG in requests/stream/stderr: {}/{}/{}",
        all_requests.contains("watchPaths"),
        all_requests.contains("SessionStart:startup hook"),
        all_requests.contains("FC-SYSMSG-OBSERVE"),
        stream.contains("FC-SYSMSG-OBSERVE"),
        run.stderr.contains("FC-SYSMSG-OBSERVE"),
    );
    assert!(
        changed.contains(&(&bin_s.to_string(), "change")),
        "{changed:?}\n{}",
        run.summary()
    );
    assert!(
        changed.contains(&(&cfg_s.to_string(), "unlink")),
        "{changed:?}"
    );
    assert!(
        unmatched >= 2,
        "a FileChanged group without a matcher runs for every watched path"
    );
    // Nothing of either hook reaches the model, and FileChanged's systemMessage is shown nowhere:
    // telling the person has to wait for a hook whose answer is shown.
    assert!(!all_requests.contains("watchPaths"), "{}", run.summary());
    assert!(!all_requests.contains("FC-SYSMSG-OBSERVE") && !stream.contains("FC-SYSMSG-OBSERVE"));
}

/// Writes `mode = "observe"` into the user's loopgate config: the guard sees `python3 flip.py`.
const FLIP: &str = r#"import os
p = os.path.join(os.environ["HOME"], ".config", "loop" + "gate", "config.toml")
open(p, "w").write('mode = "observe"\n')
"#;

/// loopgate installed by install.sh: its SessionStart has Claude Code watch the user's config, the
/// agent switches the config to observe mode by a route the guard does not read, and the person
/// is told — FileChanged logs it, and the session's next hook call shows it.
#[test]
fn e2e_config_switched_to_observe_mid_session_is_reported() {
    let Some(mut s) = Scenario::new("watch-config") else {
        return;
    };
    let config = s.home.join(".config/loopgate/config.toml");
    fs::create_dir_all(config.parent().unwrap()).unwrap();
    fs::write(&config, "[detectors.repeat]\n").unwrap();
    s.install(super::harness::Install::Script);
    s.write_file("flip.py", FLIP);
    let prompt = "Adjust the config.";
    let turns = vec![
        // FileChanged comes about a second after the write, while the command still runs.
        Turn::call(bash("python3 flip.py && sleep 3")),
        Turn::call(bash("echo AFTER-FLIP")),
        Turn::call(bash("echo AGAIN")),
        Turn::text("Done."),
    ];
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    let noticed = run.events_where(|e| e["event"] == "FileChanged" && e["decision"] == "notice");
    assert_eq!(noticed.len(), 1, "{}", run.summary());
    assert!(
        noticed[0]["reason"]
            .as_str()
            .unwrap()
            .contains("observe mode"),
        "{}",
        noticed[0]
    );
    let shown = run.events_where(|e| {
        e["event"] != "FileChanged"
            && e["decision"] == "notice"
            && e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("observe mode"))
    });
    assert_eq!(
        shown.len(),
        1,
        "the next call shows it, once: {}",
        run.summary()
    );
    assert!(
        !run.everything_sent("main").contains("observe mode"),
        "shown to the person, not sent to the model"
    );
}
