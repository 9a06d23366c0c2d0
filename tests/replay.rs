//! `loopgate replay` on a small `~/.claude/projects`-shaped tree (`tests/fixtures/replay/projects`):
//! a session whose subagent appears both in `agent_progress` lines and in its own transcript under
//! `<session>/subagents/`, a permission refusal with feedback, a parallel batch with one failure
//! and cancelled siblings, two turn ends; a second session whose one turn keeps failing and ends
//! with nothing changed (for the Stop gate); and a `.jsonl` file that is not a transcript.

use crate::common::BIN;
use assert_cmd::Command;
use loopgate::config::Config;
use loopgate::replay::transcript::{convert_group, Converted, ConvertedPayload};
use loopgate::replay::{
    collect, convert, format::inspect, plan, replay_group, replay_session, Cli,
};
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

/// (Stop or SubagentStop, the turn's last call) of every turn end.
fn turn_ends(c: &Converted) -> Vec<(&'static str, Option<usize>)> {
    c.payloads
        .iter()
        .filter(|p| p.event.ends_with("Stop"))
        .map(|p| (p.event, p.call_index))
        .collect()
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
    let ends = turn_ends(&c);
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
    // Every reason is printed whole: what the agent would have been told, to its last word.
    for fired in reports
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["fired"].as_array().unwrap())
    {
        let reason = fired["reason"].as_str().unwrap();
        assert!(stdout.contains(reason), "clipped: {reason}\n{stdout}");
    }
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

// Other CLIs' session files (`tests/fixtures/replay/other-clis`): small, hand-trimmed files in
// each CLI's own format, shaped after the real sessions of `../shared/corpus/other-clis` (Qwen
// Code's after its chat recorder's record shape: no public Qwen session was found).

const OTHER: &str = "tests/fixtures/replay/other-clis";
const CODEX_MAIN: &str =
    "codex/rollout-2026-06-27T00-44-24-019f0000-0000-7000-8000-000000000001.jsonl";
const CODEX_CHILD: &str =
    "codex/rollout-2026-06-27T00-46-31-019f0000-0000-7000-8000-000000000002.jsonl";
const GEMINI: &str = "gemini/session-2026-04-14T15-30-0b2a6c4e.json";
const QWEN: &str = "qwen/7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f.jsonl";
const COPILOT: &str = "copilot/events.jsonl";
const OPENCODE: &str = "opencode/ses_parent1.json";
const OPENCODE_CHILD: &str = "opencode/ses_child1.json";

fn other(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(OTHER).join(rel)).unwrap()
}

/// The session's files converted as `loopgate replay` converts them (the CLI told from the
/// first file's content).
fn other_session(files: &[&str]) -> (Cli, Converted) {
    let texts: Vec<String> = files.iter().map(|f| other(f)).collect();
    let (cli, _) = inspect(&texts[0]);
    let subs: Vec<&str> = texts[1..].iter().map(String::as_str).collect();
    (cli, convert(cli, &texts[0], &subs, files[0]))
}

/// (event, tool_name or "") of every payload.
fn tools(c: &Converted) -> Vec<(&str, String)> {
    c.payloads
        .iter()
        .map(|p| {
            let tool = p.payload["tool_name"].as_str().unwrap_or("").to_string();
            (p.event, tool)
        })
        .collect()
}

fn time(s: &str) -> std::time::SystemTime {
    humantime::parse_rfc3339(s).unwrap()
}

/// The payload of `event` for call `index`.
fn of_call<'a>(c: &'a Converted, event: &str, index: usize) -> &'a ConvertedPayload {
    c.payloads
        .iter()
        .find(|p| p.event == event && p.call_index == Some(index))
        .unwrap_or_else(|| panic!("no {event} for call {index}"))
}

#[test]
fn each_cli_is_told_from_the_file_and_subagents_join_their_parent() {
    let found = collect(&[Path::new(env!("CARGO_MANIFEST_DIR")).join(OTHER)]).unwrap();
    let p = plan(found, |path| {
        Ok(inspect(&std::fs::read_to_string(path).unwrap()))
    });
    let groups: Vec<(Cli, &str, Vec<&str>)> = p
        .groups
        .iter()
        .map(|g| {
            let subs = g.subagents.iter().map(|f| f.label.as_str()).collect();
            (g.cli, g.label(), subs)
        })
        .collect();
    assert_eq!(
        groups,
        [
            (Cli::Codex, CODEX_MAIN, vec![CODEX_CHILD]),
            (Cli::Copilot, COPILOT, vec![]),
            (Cli::Gemini, GEMINI, vec![]),
            (Cli::OpenCode, OPENCODE, vec![OPENCODE_CHILD]),
            (Cli::Qwen, QWEN, vec![]),
        ]
    );
    // A JSON file that is no session is named, not replayed.
    assert_eq!(p.skipped.len(), 1);
    assert_eq!(p.skipped[0].0, "opencode/package.json");
}

#[test]
fn codex_rollouts_play_as_codex_hooks_fire() {
    let (cli, c) = other_session(&[CODEX_MAIN, CODEX_CHILD]);
    assert_eq!(cli, Cli::Codex);
    // The hosted web search fires no hook, nor does the `write_stdin` poll; the subagent's
    // code-mode cell is its one command.
    assert_eq!(c.calls, 8);
    let names: Vec<&str> = c.call_list.iter().map(|x| x.tool_name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Bash",
            "Bash",
            "Bash",
            "Edit",
            "Bash",
            "spawn_agent",
            "Bash",
            "Bash"
        ]
    );
    // Unified exec's header is left out, its exit code read; 0.118's shell_command likewise.
    let ok = of_call(&c, "PostToolUse", 1);
    assert_eq!(
        ok.payload["tool_response"]["stdout"],
        "origin\tgit@github.com:example/app.git (fetch)\n"
    );
    assert!(of_call(&c, "PostToolUseFailure", 2).payload["error"]
        .as_str()
        .unwrap()
        .contains("No such file or directory"));
    assert_eq!(
        of_call(&c, "PostToolUseFailure", 3).payload["error"],
        "FAIL test/deploy.test.ts\n"
    );
    // The patch is the Edit the live dialect makes of it.
    let edit = of_call(&c, "PreToolUse", 4);
    assert_eq!(
        edit.payload["tool_input"]["new_string"],
        "const retries = 3;"
    );
    // A command still running when its call returned is answered when its poll reports the
    // exit, with all its output (observed: Codex fires its PostToolUse then, none for the poll).
    let late = of_call(&c, "PostToolUse", 5);
    assert_eq!(
        late.payload["tool_response"]["stdout"],
        "run 1: failure\nrun 2: failure\nrun 3: failure\n"
    );
    assert_eq!(late.at, Some(time("2026-06-27T00:46:20Z")));
    // The times of the rollout's lines, and the turn id as prompt_id.
    let pre = of_call(&c, "PreToolUse", 3);
    assert_eq!(pre.at, Some(time("2026-06-27T00:45:20Z")));
    assert_eq!(
        of_call(&c, "PostToolUseFailure", 3).at,
        Some(time("2026-06-27T00:45:31Z"))
    );
    assert_eq!(pre.payload["prompt_id"], "turn-1");
    // Codex's hooks give a shell call's workdir as cwd; a code-mode cell's is in its call.
    assert_eq!(
        of_call(&c, "PreToolUse", 8).payload["cwd"],
        "/home/dev/project"
    );
    assert_eq!(pre.payload["tool_use_id"], "call_test");
    // The subagent's call: its own agent, the parent's session; its turn ends with SubagentStop.
    let sub = of_call(&c, "PreToolUse", 7);
    assert_eq!(
        sub.payload["agent_id"],
        "019f0000-0000-7000-8000-000000000002"
    );
    assert_eq!(
        sub.payload["session_id"],
        "019f0000-0000-7000-8000-000000000001"
    );
    assert_eq!(sub.payload["tool_input"]["command"], "rg -n retries test");
    let ends = turn_ends(&c);
    // The second turn was interrupted: no Stop.
    assert_eq!(ends, [("SubagentStop", Some(7)), ("Stop", Some(6))]);
    assert_eq!(
        tools(&c)
            .iter()
            .filter(|(e, _)| *e == "UserPromptSubmit")
            .count(),
        2
    );
}

#[test]
fn gemini_chats_play_as_gemini_hooks_fire() {
    let (cli, c) = other_session(&[GEMINI]);
    assert_eq!(cli, Cli::Gemini);
    assert_eq!(c.calls, 6);
    assert_eq!(
        tools(&c),
        [
            ("UserPromptSubmit", "".into()),
            ("PreToolUse", "Read".into()),
            ("PreToolUse", "Read".into()),
            ("PostToolUse", "Read".into()),
            ("PostToolUseFailure", "Read".into()),
            ("PreToolUse", "Bash".into()),
            ("PostToolUseFailure", "Bash".into()),
            ("PreToolUse", "Edit".into()),
            ("PostToolUse", "Edit".into()),
            // Refused by the person: the hook before it fired, none after; the turn was
            // cancelled, so no Stop.
            ("PreToolUse", "Bash".into()),
            ("UserPromptSubmit", "".into()),
            ("PreToolUse", "LS".into()),
            ("PostToolUse", "LS".into()),
            ("Stop", "".into()),
        ]
    );
    // The shell's exit code, read where the live hook reads it; its PGID left out.
    let failed = of_call(&c, "PostToolUseFailure", 3);
    assert_eq!(
        failed.payload["error"],
        "Output: Error: unable to read media/logo.svg\nExit Code: 13"
    );
    // Started with its message, done at the call's own time.
    assert_eq!(
        of_call(&c, "PreToolUse", 3).at,
        Some(time("2026-04-14T15:31:40Z"))
    );
    assert_eq!(failed.at, Some(time("2026-04-14T15:31:48.250Z")));
    // Gemini's `replace` as Claude Code's Edit, its free-text instruction left out.
    let edit = &of_call(&c, "PreToolUse", 4).payload["tool_input"];
    assert_eq!(edit["file_path"], "package.json");
    assert!(edit.get("instruction").is_none());
    // Gemini's hooks carry no call id.
    assert!(c
        .payloads
        .iter()
        .all(|p| p.payload.get("tool_use_id").is_none()));
}

#[test]
fn qwen_records_play_as_qwen_hooks_fire() {
    let (cli, c) = other_session(&[QWEN]);
    assert_eq!(cli, Cli::Qwen);
    assert_eq!(c.calls, 4);
    let events: Vec<&str> = c.payloads.iter().map(|p| p.event).collect();
    assert_eq!(
        events,
        [
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUseFailure",
            // Qwen's empty-prompt UserPromptSubmit before the next model request, read as the
            // model turn's end.
            "PostToolBatch",
            "PreToolUse",
            "PreToolUse",
            "PostToolUse",
            "PostToolUseFailure",
            "PostToolBatch",
            "PreToolUse",
            "PostToolUse",
            "PostToolBatch",
            "Stop",
            "UserPromptSubmit",
            "Stop"
        ]
    );
    let names: Vec<&str> = c.call_list.iter().map(|x| x.tool_name.as_str()).collect();
    assert_eq!(names, ["Bash", "Read", "Edit", "Bash"]);
    assert_eq!(
        c.payloads[1].payload["prompt_id"],
        "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f########0"
    );
    assert_eq!(c.payloads[1].payload["tool_use_id"], "call_0_0");
    assert_eq!(c.payloads[2].at, Some(time("2026-05-02T10:00:20Z")));
    assert!(c.payloads[7].payload["error"]
        .as_str()
        .unwrap()
        .contains("has not been read"));
}

#[test]
fn copilot_events_play_as_copilot_hooks_fire() {
    let (cli, c) = other_session(&[COPILOT]);
    assert_eq!(cli, Cli::Copilot);
    assert_eq!(c.calls, 5);
    let names: Vec<&str> = c.call_list.iter().map(|x| x.tool_name.as_str()).collect();
    assert_eq!(names, ["Read", "Bash", "Task", "Grep", "Edit"]);
    // Only the person's prompt: the CLI's injected instructions are not one.
    let prompts = c
        .payloads
        .iter()
        .filter(|p| p.event == "UserPromptSubmit")
        .count();
    assert_eq!(prompts, 1);
    // `success: false`, and a shell's exit code in its text.
    assert_eq!(
        of_call(&c, "PostToolUseFailure", 1).payload["error"],
        "Path does not exist"
    );
    let go = of_call(&c, "PostToolUseFailure", 2);
    assert_eq!(
        go.payload["error"],
        "--- FAIL: TestRemove (0.01s)\nFAIL\nExit code 1"
    );
    assert_eq!(go.at, Some(time("2026-07-19T23:13:20Z")));
    assert_eq!(
        of_call(&c, "PreToolUse", 2).at,
        Some(time("2026-07-19T23:13:05Z"))
    );
    // Copilot's edit keys as Claude Code's.
    let edit = &of_call(&c, "PreToolUse", 5).payload["tool_input"];
    assert_eq!(edit["file_path"], "/home/dev/project/pkg/tool/manager.go");
    assert_eq!(edit["old_string"], "retries := 0");
    // The subagent's call and its end; the turn ends at the agentStop hook.
    assert_eq!(of_call(&c, "PreToolUse", 4).payload["agent_id"], "tc_task");
    let ends = turn_ends(&c);
    assert_eq!(ends, [("SubagentStop", Some(4)), ("Stop", Some(5))]);
    assert_eq!(
        c.payloads.last().unwrap().at,
        Some(time("2026-07-19T23:14:01Z"))
    );
}

#[test]
fn opencode_exports_play_with_their_child_sessions() {
    let (cli, c) = other_session(&[OPENCODE, OPENCODE_CHILD]);
    assert_eq!(cli, Cli::OpenCode);
    assert_eq!(c.calls, 6);
    let names: Vec<&str> = c.call_list.iter().map(|x| x.tool_name.as_str()).collect();
    assert_eq!(names, ["Bash", "Read", "Edit", "Bash", "Glob", "Bash"]);
    // `metadata.exit` 1, an error status, and a command the person stopped.
    assert_eq!(
        of_call(&c, "PostToolUseFailure", 1).payload["error"],
        "1 failing"
    );
    assert!(of_call(&c, "PostToolUseFailure", 2).payload["error"]
        .as_str()
        .unwrap()
        .starts_with("File not found"));
    let stopped = of_call(&c, "PostToolUseFailure", 6);
    assert_eq!(stopped.payload["is_interrupt"], true);
    // `state.time` start and end (epoch ms).
    assert_eq!(
        of_call(&c, "PreToolUse", 1).at,
        Some(native_ms(1_777_582_002_000))
    );
    assert_eq!(
        of_call(&c, "PostToolUseFailure", 1).at,
        Some(native_ms(1_777_582_010_000))
    );
    // OpenCode's keys as Claude Code's.
    let edit = &of_call(&c, "PreToolUse", 3).payload["tool_input"];
    assert_eq!(edit["file_path"], "/home/dev/project/src/sum.ts");
    assert_eq!(edit["old_string"], "a - b");
    // The CLI's own "Continue…" is no prompt; the child session is a subagent of the parent's.
    let prompts = c
        .payloads
        .iter()
        .filter(|p| p.event == "UserPromptSubmit")
        .count();
    assert_eq!(prompts, 2);
    let glob = of_call(&c, "PreToolUse", 5);
    assert_eq!(glob.payload["agent_id"], "ses_child1");
    assert_eq!(glob.payload["session_id"], "ses_parent1");
    // The first turn ends (Stop); the aborted one does not.
    let ends = turn_ends(&c);
    assert_eq!(ends, [("Stop", Some(4)), ("SubagentStop", Some(5))]);
}

fn native_ms(ms: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)
}

#[test]
fn the_command_names_each_sessions_cli() {
    let (stdout, stderr) = replay_cmd(&["--json", OTHER]);
    let reports: Value = serde_json::from_str(&stdout).unwrap();
    let clis: Vec<(&str, &str)> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["cli"].as_str().unwrap(), r["file"].as_str().unwrap()))
        .collect();
    assert_eq!(
        clis,
        [
            ("codex", CODEX_MAIN),
            ("copilot", COPILOT),
            ("gemini", GEMINI),
            ("opencode", OPENCODE),
            ("qwen", QWEN),
        ]
    );
    assert!(
        stderr.contains("skipped opencode/package.json: not a session file"),
        "{stderr}"
    );
    let (stdout, _) = replay_cmd(&[OTHER]);
    let by_cli = stdout
        .lines()
        .find(|l| l.starts_with("by CLI: "))
        .unwrap_or_else(|| panic!("no CLI line in {stdout}"));
    assert!(by_cli.contains("codex 1 session, 8 calls"), "{by_cli}");
    assert!(by_cli.contains("qwen 1 session, 4 calls"), "{by_cli}");
}

// Chats the real CLIs wrote (`tests/fixtures/replay/recorded`, see its README.md): Gemini CLI
// 0.61.0's JSONL chat records and Qwen Code 0.24.4's JSONL records, each replayed as the hook
// events the same run recorded.

const RECORDED: &str = "tests/fixtures/replay/recorded";
const GEMINI_BASIC: &str = "gemini-0.61.0/session-2026-11-28T15-32-2ea9dfd1-basic.jsonl";
const GEMINI_EDGE: &str = "gemini-0.61.0/session-2026-11-28T15-33-4ebe0cbb-edge_calls.jsonl";
const QWEN_BASIC: &str = "qwen-0.24.4/6e2ef2da-6aaa-427a-b7a3-2fd8ec3ebda3-basic.jsonl";
const QWEN_EDGE: &str = "qwen-0.24.4/86ad468a-7d2d-4cf0-88db-5c0cd1a3d0b2-edge_calls.jsonl";

fn recorded(rel: &str) -> (Cli, loopgate::replay::transcript::Kind, Converted) {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(RECORDED)
            .join(rel),
    )
    .unwrap();
    let (cli, kind) = inspect(&text);
    let c = convert(cli, &text, &[], rel);
    (cli, kind, c)
}

/// (event, tool) of every payload, the tool as loopgate's dialect names it.
fn events(c: &Converted) -> Vec<(&str, &str)> {
    c.payloads
        .iter()
        .map(|p| (p.event, p.payload["tool_name"].as_str().unwrap_or("")))
        .collect()
}

fn prompts(c: &Converted) -> Vec<&str> {
    c.payloads
        .iter()
        .filter(|p| p.event == "UserPromptSubmit")
        .map(|p| p.payload["prompt"].as_str().unwrap())
        .collect()
}

#[test]
fn gemini_jsonl_chats_play_as_the_runs_hooks_fired() {
    use loopgate::replay::transcript::Kind;
    let (cli, kind, c) = recorded(GEMINI_BASIC);
    assert_eq!(cli, Cli::Gemini);
    assert_eq!(
        kind,
        Kind::Session {
            session_id: Some("2ea9dfd1-d9da-498b-b0c4-8998200dd65d".into())
        }
    );
    assert_eq!(c.sessions_id, "2ea9dfd1-d9da-498b-b0c4-8998200dd65d");
    // The hooks of that run: BeforeAgent once (the session context and the tools' answers,
    // which the file records as user messages, are no prompt), BeforeTool and AfterTool per call
    // (a shell exit 1 is a failure only through the `Exit Code` in its text), AfterAgent.
    assert_eq!(prompts(&c), ["Please do the task."]);
    assert_eq!(
        events(&c),
        [
            ("UserPromptSubmit", ""),
            ("PreToolUse", "Bash"),
            ("PostToolUse", "Bash"),
            ("PreToolUse", "Bash"),
            ("PostToolUseFailure", "Bash"),
            ("PreToolUse", "Bash"),
            ("PostToolUseFailure", "Bash"),
            ("PreToolUse", "Write"),
            ("PostToolUse", "Write"),
            ("PreToolUse", "Edit"),
            ("PostToolUse", "Edit"),
            ("PreToolUse", "Read"),
            ("PostToolUse", "Read"),
            ("Stop", ""),
        ]
    );
    assert_eq!(c.skipped_lines, 0);
    // A message written again with its calls is one message: each call once.
    assert_eq!(c.calls, 6);
    let echo = of_call(&c, "PreToolUse", 1);
    assert_eq!(
        echo.payload["tool_input"]["command"],
        "echo hello-from-shell"
    );
    assert_eq!(echo.at, Some(time("2026-11-28T15:32:51.698Z")));
    assert_eq!(
        of_call(&c, "PostToolUse", 1).at,
        Some(time("2026-11-28T15:32:53.144Z"))
    );
    assert!(of_call(&c, "PostToolUseFailure", 2).payload["error"]
        .as_str()
        .unwrap()
        .contains("Exit Code: 1"));
    let stop = c.payloads.last().unwrap();
    assert_eq!(stop.payload["last_assistant_message"], "All done.");

    // The calls Gemini refuses before its hooks (bad arguments, an unknown tool, a path outside
    // the workspace) fired none: replay plays none of them.
    let (_, _, c) = recorded(GEMINI_EDGE);
    assert_eq!(
        events(&c),
        [
            ("UserPromptSubmit", ""),
            ("PreToolUse", "Edit"),
            ("PostToolUseFailure", "Edit"),
            ("PreToolUse", "Read"),
            ("PostToolUseFailure", "Read"),
            ("PreToolUse", "Bash"),
            ("PostToolUse", "Bash"),
            ("PreToolUse", "Bash"),
            ("PostToolUse", "Bash"),
            ("Stop", ""),
        ]
    );
    assert!(of_call(&c, "PostToolUseFailure", 2).payload["error"]
        .as_str()
        .unwrap()
        .starts_with("File not found"));
}

#[test]
fn qwen_jsonl_records_play_as_the_runs_hooks_fired() {
    let (cli, _, c) = recorded(QWEN_BASIC);
    assert_eq!(cli, Cli::Qwen);
    assert_eq!(c.sessions_id, "6e2ef2da-6aaa-427a-b7a3-2fd8ec3ebda3");
    // The hooks of that run: Qwen's own failure event for the shell's exit 1, and its
    // empty-prompt UserPromptSubmit before each model request after a tool round (read by the
    // dialect as the model turn's end).
    assert_eq!(prompts(&c), ["Please do the task."]);
    let mut expected = Vec::new();
    for (tool, post) in [
        ("Bash", "PostToolUse"),
        ("Bash", "PostToolUseFailure"),
        ("Bash", "PostToolUseFailure"),
        ("Write", "PostToolUse"),
        ("Edit", "PostToolUse"),
        ("Read", "PostToolUse"),
    ] {
        expected.extend([("PreToolUse", tool), (post, tool), ("PostToolBatch", "")]);
    }
    expected.insert(0, ("UserPromptSubmit", ""));
    expected.push(("Stop", ""));
    assert_eq!(events(&c), expected);
    assert_eq!(c.skipped_lines, 0);
    let pre = of_call(&c, "PreToolUse", 2);
    assert_eq!(pre.payload["tool_use_id"], "call_1_0");
    assert_eq!(
        pre.payload["prompt_id"],
        "6e2ef2da-6aaa-427a-b7a3-2fd8ec3ebda3########0"
    );
    assert_eq!(pre.payload["cwd"], "/home/dev/project");
    assert!(of_call(&c, "PostToolUseFailure", 2).payload["error"]
        .as_str()
        .unwrap()
        .contains("Exit Code: 1"));

    // Calls Qwen never started (`executionStatus: "not_started"`: bad arguments, an unknown
    // tool) fired no hook; the write outside the project ran.
    let (_, _, c) = recorded(QWEN_EDGE);
    let names: Vec<&str> = c.call_list.iter().map(|x| x.tool_name.as_str()).collect();
    assert_eq!(names, ["Read", "Edit", "Read", "Bash", "Bash", "Write"]);
    let failed: Vec<usize> = c
        .payloads
        .iter()
        .filter(|p| p.event == "PostToolUseFailure")
        .filter_map(|p| p.call_index)
        .collect();
    assert_eq!(failed, [2, 3]);
    assert_eq!(c.payloads.iter().filter(|p| p.event == "Stop").count(), 1);
}

#[test]
fn the_command_reads_the_recorded_chats() {
    let (stdout, stderr) = replay_cmd(&[RECORDED]);
    assert!(!stderr.contains("skipped"), "{stderr}");
    let summary = stdout.lines().find(|l| l.starts_with("sessions ")).unwrap();
    assert!(summary.starts_with("sessions 4  calls 22 "), "{summary}");
    assert!(
        summary.ends_with("would-be blocks 0  files skipped 0"),
        "{summary}"
    );
    let by_cli = stdout.lines().find(|l| l.starts_with("by CLI: ")).unwrap();
    assert_eq!(
        by_cli,
        "by CLI: gemini 2 sessions, 10 calls, 0 would-be blocks; qwen 2 sessions, 12 calls, 0 would-be blocks"
    );
}

#[test]
fn every_file_that_cannot_be_read_is_named_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(RECORDED)
            .join(QWEN_BASIC),
        d.join("session.jsonl"),
    )
    .unwrap();
    std::fs::write(d.join("empty.jsonl"), "").unwrap();
    std::fs::write(
        d.join("broken.json"),
        "{\n  \"sessionId\": \"s\",\n  \"messages\": [\n",
    )
    .unwrap();
    std::fs::write(d.join("log.jsonl"), "started\n").unwrap();
    std::fs::write(d.join("image.json"), b"\x89PNG\r\n\x1a\n\0\0").unwrap();
    std::fs::write(d.join("notes.txt"), "not looked at").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(d.join("gone.jsonl"), d.join("link.jsonl")).unwrap();
    let (stdout, stderr) = replay_cmd(&[d.to_str().unwrap()]);
    let mut skipped: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("loopgate replay: skipped "))
        .collect();
    skipped.sort();
    let mut expected = vec![
        "broken.json: broken JSON at line 4, column 0: EOF while parsing a list",
        "empty.jsonl: empty file",
        "image.json: not a text file (binary or not UTF-8)",
        "log.jsonl: not JSON (line 1: `started`)",
    ];
    if cfg!(unix) {
        expected.push("link.jsonl: a symbolic link to nothing");
    }
    expected.sort();
    assert_eq!(skipped, expected, "{stderr}");
    let summary = stdout.lines().find(|l| l.starts_with("sessions ")).unwrap();
    assert!(summary.starts_with("sessions 1  calls 6 "), "{summary}");
    assert!(
        summary.ends_with(&format!("files skipped {}", expected.len())),
        "{summary}"
    );
}

// The shared corpora of real sessions, all three: `../shared/corpus/transcripts` (Claude Code),
// `other-clis` and `other-clis-2` (Codex, Gemini CLI, Copilot CLI, OpenCode; see
// `other-clis/SOURCES.md`). Ordinary work: every file must be read, and none of it may be blocked.

const CORPORA: [&str; 3] = [
    "../shared/corpus/transcripts",
    "../shared/corpus/other-clis",
    "../shared/corpus/other-clis-2",
];

/// A corpus's directory, or `None` (and a note) where this checkout has none; CI must have it.
fn corpus_dir(rel: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{rel} is missing"
    );
    println!("skipped: no {rel}");
    None
}

/// A corpus planned as `loopgate replay` plans it: every file read and told, none skipped.
fn corpus_plan(dir: &Path) -> loopgate::replay::Plan {
    let found = collect(&[dir.to_path_buf()]).unwrap();
    plan(found, |path| {
        std::fs::read_to_string(path)
            .map(|t| inspect(&t))
            .map_err(|e| e.to_string())
    })
}

fn group_texts(g: &loopgate::replay::Group) -> (String, Vec<String>) {
    let read = |f: &loopgate::replay::Found| std::fs::read_to_string(&f.path).unwrap();
    let main = g.main.as_ref().map(read).unwrap_or_default();
    (main, g.subagents.iter().map(read).collect())
}

/// Every would-be block of a corpus, one line each, and its calls.
fn corpus_blocks(dir: &Path) -> (Vec<String>, usize) {
    let config = Config::default();
    let mut blocks = Vec::new();
    let mut calls = 0;
    for g in &corpus_plan(dir).groups {
        let (main, subs) = group_texts(g);
        let subs: Vec<&str> = subs.iter().map(String::as_str).collect();
        let r = replay_session(g.cli, &main, &subs, g.label(), &config);
        calls += r.calls;
        for f in r.fired.iter().filter(|f| f.is_block()) {
            blocks.push(format!(
                "{} call {:?} {} {}: {}",
                r.file, f.call, f.detector, f.tool, f.reason
            ));
        }
    }
    (blocks, calls)
}

/// What a corpus holds: the files of each CLI, sessions once subagents join theirs, calls,
/// unreadable lines.
type Holds = (&'static [(Cli, usize)], usize, usize, usize);

#[test]
fn every_file_of_the_corpora_is_read() {
    let expected: [Holds; 3] = [
        // Two files are `//` comment lines before the transcript, two lines each.
        (&[(Cli::Claude, 78)], 70, 7_766, 4),
        (
            &[
                (Cli::Codex, 33),
                (Cli::Gemini, 4),
                (Cli::Copilot, 3),
                (Cli::OpenCode, 35),
            ],
            70,
            4_366,
            0,
        ),
        // 51 sessions by the corpus README; two Codex subagent rollouts of one parent thread
        // (not in the corpus, `019c85f8-…`) are one session, as their hooks carry its id.
        (
            &[(Cli::Codex, 37), (Cli::Gemini, 3), (Cli::Copilot, 11)],
            50,
            3_007,
            0,
        ),
    ];
    for (rel, (files, sessions, calls, bad_lines)) in CORPORA.iter().zip(expected) {
        let Some(dir) = corpus_dir(rel) else {
            continue;
        };
        let p = corpus_plan(&dir);
        assert!(p.skipped.is_empty(), "{rel}: {:?}", p.skipped);
        let mut per_cli: Vec<(Cli, usize)> = Vec::new();
        let (mut n_calls, mut n_bad) = (0, 0);
        for g in &p.groups {
            let n = usize::from(g.main.is_some()) + g.subagents.len();
            match per_cli.iter_mut().find(|(c, _)| *c == g.cli) {
                Some((_, k)) => *k += n,
                None => per_cli.push((g.cli, n)),
            }
            let (main, subs) = group_texts(g);
            let subs: Vec<&str> = subs.iter().map(String::as_str).collect();
            let c = convert(g.cli, &main, &subs, g.label());
            n_calls += c.calls;
            n_bad += c.skipped_lines;
        }
        per_cli.sort_by_key(|(c, _)| files.iter().position(|(f, _)| f == c));
        assert_eq!(per_cli, files, "{rel}");
        assert_eq!(
            (p.groups.len(), n_calls, n_bad),
            (sessions, calls, bad_lines),
            "{rel}: sessions, calls, unreadable lines"
        );
    }
}

/// `../shared/corpus/other-clis`: public sessions of Codex, Gemini CLI, Copilot CLI and OpenCode
/// in their own formats (see its SOURCES.md). Ordinary work: none of it may be blocked.
#[test]
fn the_other_clis_corpus_replays_without_a_block() {
    let Some(dir) = corpus_dir(CORPORA[1]) else {
        return;
    };
    let (blocks, calls) = corpus_blocks(&dir);
    assert!(calls > 4_000, "{calls} calls");
    assert!(blocks.is_empty(), "{}", blocks.join("\n"));
}

/// All three corpora: none of their ordinary work may be blocked. `other-clis-2` still meets
/// would-be blocks that the detector fixes of issue 36 remove (the circuit breaker opening on
/// conversational Codex turns, …); un-ignore once they land.
#[test]
fn no_session_of_the_corpora_would_be_blocked() {
    let mut all = Vec::new();
    for rel in CORPORA {
        let Some(dir) = corpus_dir(rel) else {
            continue;
        };
        let (blocks, _) = corpus_blocks(&dir);
        all.extend(blocks.into_iter().map(|b| format!("{rel}: {b}")));
    }
    assert!(
        all.is_empty(),
        "{} would-be blocks:\n{}",
        all.len(),
        all.join("\n")
    );
}
