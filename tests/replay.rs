//! `loopgate replay` on a small `~/.claude/projects`-shaped tree (`tests/fixtures/replay/projects`):
//! a session whose subagent appears both in `agent_progress` lines and in its own transcript under
//! `<session>/subagents/`, a permission refusal with feedback, a parallel batch with one failure
//! and cancelled siblings, two turn ends; a second session whose one turn keeps failing and ends
//! with nothing changed (for the Stop gate); and a `.jsonl` file that is not a transcript.

use crate::common::BIN;
use assert_cmd::Command;
use loopgate::config::Config;
use loopgate::replay::transcript::{convert_group, Converted};
use loopgate::replay::{collect, format::inspect, plan, replay_group, Cli};
use serde_json::Value;
use std::path::{Path, PathBuf};

const ROOT: &str = "tests/fixtures/replay/projects";
const SESSION: &str = "-home-dev-project/11111111-aaaa-4000-8000-000000000001.jsonl";
const SUBAGENT: &str =
    "-home-dev-project/11111111-aaaa-4000-8000-000000000001/subagents/agent-a1b2c3d.jsonl";
const FAILING: &str = "-home-dev-other/22222222-bbbb-4000-8000-000000000002.jsonl";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(ROOT)
}

fn text(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap()
}

fn session() -> Converted {
    convert_group(&text(SESSION), &[&text(SUBAGENT)], "fb")
}

/// (event, tool_use_id or "") of every payload.
fn trace(c: &Converted) -> Vec<(&str, String)> {
    c.payloads
        .iter()
        .map(|p| {
            let id = p.payload["tool_use_id"].as_str().unwrap_or("").to_string();
            (p.event, id)
        })
        .collect()
}

#[test]
fn nested_folders_sessions_and_non_transcripts() {
    let found = collect(&[root()]).unwrap();
    let labels: Vec<&str> = found.iter().map(|f| f.label.as_str()).collect();
    // Each directory's files in name order, then its subdirectories.
    assert_eq!(
        labels,
        [FAILING, SESSION, "-home-dev-project/todos.jsonl", SUBAGENT]
    );
    let p = plan(found, |path| {
        Ok(inspect(&std::fs::read_to_string(path).unwrap()))
    });
    assert!(p.groups.iter().all(|g| g.cli == Cli::Claude));
    assert_eq!(p.groups.len(), 2);
    assert_eq!(p.groups[1].label(), SESSION);
    assert_eq!(p.groups[1].subagents.len(), 1);
    assert_eq!(p.groups[1].subagents[0].label, SUBAGENT);
    assert_eq!(p.skipped.len(), 1);
    assert_eq!(p.skipped[0].0, "-home-dev-project/todos.jsonl");
}

#[test]
fn subagent_calls_are_replayed_once_with_their_agent() {
    let c = session();
    assert_eq!(c.calls, 10);
    let sub: Vec<&str> = c
        .call_list
        .iter()
        .filter(|call| call.agent_id.as_deref() == Some("a1b2c3d"))
        .map(|call| call.tool_name.as_str())
        .collect();
    assert_eq!(sub, ["Grep", "Read"]);
    let grep = c
        .payloads
        .iter()
        .find(|p| p.event == "PreToolUse" && p.payload["tool_name"] == "Grep")
        .unwrap();
    assert_eq!(grep.payload["agent_id"], "a1b2c3d");
    // The Task's subagent_type, as Claude Code's hooks name it.
    assert_eq!(grep.payload["agent_type"], "Explore");
    assert_eq!(
        grep.payload["session_id"],
        "11111111-aaaa-4000-8000-000000000001"
    );
    // The subagent's turn ends before its Task result reaches the main agent.
    let t = trace(&c);
    let sub_stop = t.iter().position(|(e, _)| *e == "SubagentStop").unwrap();
    let task_post = t
        .iter()
        .position(|(e, id)| *e == "PostToolUse" && id == "toolu_task1")
        .unwrap();
    assert!(sub_stop < task_post);
    // The progress lines alone give the same calls.
    let alone = convert_group(&text(SESSION), &[], "fb");
    assert_eq!(trace(&alone), t);
}

#[test]
fn refusals_and_cancellations_are_delivered_as_claude_code_does() {
    let c = session();
    let t = trace(&c);
    let has = |event: &str, id: &str| t.iter().any(|(e, i)| *e == event && i == id);
    // The refused Edit: PreToolUse ran before the dialog; no Post event; the batch has the text.
    assert!(has("PreToolUse", "toolu_e1"));
    assert!(!has("PostToolUse", "toolu_e1") && !has("PostToolUseFailure", "toolu_e1"));
    // The failing build fails; its siblings were cancelled: no Post event for them, and the Read
    // streamed in after the failure never started (no PreToolUse).
    assert!(has("PostToolUseFailure", "toolu_b1"));
    assert!(has("PreToolUse", "toolu_b2"));
    assert!(!has("PreToolUse", "toolu_r2"));
    for id in ["toolu_b2", "toolu_r2"] {
        assert!(!has("PostToolUse", id) && !has("PostToolUseFailure", id));
    }
    let batches: Vec<&Value> = c
        .payloads
        .iter()
        .filter(|p| p.event == "PostToolBatch")
        .map(|p| &p.payload["tool_calls"])
        .collect();
    let entry = |id: &str| {
        batches
            .iter()
            .flat_map(|b| b.as_array().unwrap())
            .find(|e| e["tool_use_id"] == id)
            .unwrap_or_else(|| panic!("{id} in no batch"))
    };
    assert!(entry("toolu_e1")["tool_response"]
        .as_str()
        .unwrap()
        .starts_with("The user doesn't want to proceed"));
    for id in ["toolu_b2", "toolu_r2"] {
        assert_eq!(
            entry(id)["tool_response"],
            "<tool_use_error>Sibling tool call errored</tool_use_error>"
        );
    }
    // One batch of three for the parallel turn.
    assert!(batches.iter().any(|b| b.as_array().unwrap().len() == 3));
    // The permission mode the transcript recorded.
    assert_eq!(c.payloads[0].payload["permission_mode"], "default");
}

#[test]
fn every_turn_end_is_judged_at_the_transcript_time() {
    let c = session();
    let ends: Vec<(&str, Option<usize>)> = c
        .payloads
        .iter()
        .filter(|p| p.event.ends_with("Stop"))
        .map(|p| (p.event, p.call_index))
        .collect();
    // The subagent's turn (after its 3rd call overall), then the two main turns.
    assert_eq!(
        ends,
        [
            ("SubagentStop", Some(3)),
            ("Stop", Some(7)),
            ("Stop", Some(10))
        ]
    );
    let times: Vec<_> = c.payloads.iter().map(|p| p.at.unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "out of order");

    let config = Config::default();
    // The main turns changed files: the Stop gate lets them end.
    let r = replay_group(&text(SESSION), &[&text(SUBAGENT)], SESSION, &config);
    assert!(!r.fired.iter().any(|f| f.is_turn_end()), "{:?}", r.fired);
    assert_eq!(r.stops, 3);
    assert_eq!((r.calls, r.subagent_calls), (10, 2));
    // A turn that kept failing and changed nothing (judged from the ledger: replay reads no
    // worktree): its Stop would be blocked, and the Stop Claude Code would fire next, with
    // stop_hook_active, is judged too.
    let r = replay_group(&text(FAILING), &[], FAILING, &config);
    let ends: Vec<(&str, bool, Option<usize>)> = r
        .fired
        .iter()
        .filter(|f| f.is_turn_end())
        .map(|f| (f.decision, f.continuation, f.call))
        .collect();
    assert_eq!(ends, [("block", false, Some(6)), ("block", true, Some(6))]);
    assert!(r
        .fired
        .iter()
        .all(|f| f.detector != "progress" || f.is_turn_end()));
    assert_eq!(r.stops, 2);
    assert_eq!(r.calls, 6);
}

fn replay_cmd(args: &[&str]) -> (String, String) {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .arg("replay")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("LOOPGATE_STATE_DIR", home.path().join("state"))
        .env_remove("LOOPGATE_CONFIG")
        .env_remove("LOOPGATE_MODE")
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_command_reports_sessions_totals_and_skipped_files() {
    let (stdout, stderr) = replay_cmd(&[ROOT]);
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.contains("skipped")).collect();
    assert_eq!(
        skipped,
        ["loopgate replay: skipped -home-dev-project/todos.jsonl: not a session file of Claude Code, Codex, Gemini CLI, Qwen Code, Copilot CLI or OpenCode"]
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("sessions "))
        .unwrap_or_else(|| panic!("no summary in {stdout}"));
    assert!(
        summary.starts_with("sessions 2  calls 16 (2 in subagents)  turn ends judged 5  "),
        "{summary}"
    );
    assert!(
        summary.ends_with("would-be blocks 2  files skipped 1"),
        "{summary}"
    );
    assert!(
        stdout.contains("(the Stop after a block, stop_hook_active)"),
        "{stdout}"
    );

    let (json, _) = replay_cmd(&["--json", ROOT]);
    let reports: Value = serde_json::from_str(&json).unwrap();
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[1]["file"], SESSION);
    assert_eq!(reports[1]["subagent_files"][0], SUBAGENT);
    assert_eq!(reports[1]["calls"], 10);
    // A file named directly is replayed alone and named as given.
    let (json, _) = replay_cmd(&["--json", &format!("{ROOT}/{FAILING}")]);
    let reports: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(reports[0]["file"], format!("{ROOT}/{FAILING}"));
    assert_eq!(reports[0]["calls"], 6);
}
