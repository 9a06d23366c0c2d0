//! Issue 36 on the CLIs other than Claude Code, through the binary with each CLI's own payloads
//! and the clock moved as a real session's was: a command still running has not failed, a poll
//! that waits is waiting, and a person's words are never refused.

use crate::common::{Env, Out};
use serde_json::{json, Value};

struct Session {
    env: Env,
    clock: u64,
    cli: &'static str,
    n: u32,
}

impl Session {
    fn new(cli: &'static str) -> Session {
        Session {
            env: Env::new(),
            clock: 1_790_000_000_000,
            cli,
            n: 0,
        }
    }

    fn feed(&mut self, sub: &str, payload: Value, after_s: u64) -> Out {
        self.clock += after_s * 1000;
        self.env.vars.retain(|(k, _)| k != "LOOPGATE_CLOCK_MS");
        self.env
            .vars
            .push(("LOOPGATE_CLOCK_MS".into(), self.clock.to_string()));
        self.env
            .run(&["--agent", self.cli, sub], payload.to_string().as_bytes())
    }

    /// A Codex tool event (`Bash` is unified exec's `exec_command`, as its hooks name it).
    fn codex(&mut self, event: &str, tool: &str, input: Value, response: Option<&str>) -> Value {
        self.n += usize::from(event == "PreToolUse") as u32;
        let mut p = json!({
            "session_id": "codex-run", "turn_id": "turn-1", "cwd": self.env.project,
            "transcript_path": "/dev/null", "hook_event_name": event, "model": "gpt-5.5",
            "permission_mode": "bypassPermissions", "tool_name": tool, "tool_input": input,
            "tool_use_id": format!("call_{}", self.n),
        });
        if let Some(r) = response {
            p["tool_response"] = json!(r);
        }
        p
    }
}

fn refused(cli: &str, out: &Out) -> Option<String> {
    if out.stdout.is_empty() {
        return None;
    }
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    let reason = match cli {
        "copilot" => {
            (v["permissionDecision"] == "deny").then(|| v["permissionDecisionReason"].clone())
        }
        _ => (v["hookSpecificOutput"]["permissionDecision"] == "deny")
            .then(|| v["hookSpecificOutput"]["permissionDecisionReason"].clone()),
    };
    reason.map(|r| r.to_string())
}

/// Codex answers a command still running after its yield time with no PostToolUse at all
/// (observed: "Process running with session ID N"); the agent polls it with `write_stdin`. The
/// same `npm test` started four times that way, each run polled until it ends, is four runs of a
/// slow suite, not a failing command retried: nothing is refused.
#[test]
fn a_codex_command_still_running_is_no_failure_and_its_polls_are_waits() {
    let mut s = Session::new("codex");
    let npm = json!({"command": "npm test"});
    for run in 0..4u32 {
        let pre = s.codex("PreToolUse", "Bash", npm.clone(), None);
        let out = s.feed("pre-tool-use", pre, 30);
        assert_eq!(
            refused("codex", &out),
            None,
            "run {run} of npm test refused"
        );
        // No PostToolUse: Codex fires none for a command still running.
        for poll in 0..3u32 {
            let input = json!({"session_id": 10101 + run, "chars": "", "yield_time_ms": 1000});
            let pre = s.codex("PreToolUse", "write_stdin", input.clone(), None);
            let out = s.feed("pre-tool-use", pre, 3);
            assert_eq!(
                refused("codex", &out),
                None,
                "poll {poll} of run {run} refused"
            );
            let body = if poll == 2 { "Tests: 12 passed\n" } else { "" };
            let post = s.codex("PostToolUse", "write_stdin", input, Some(body));
            s.feed("post-tool-use", post, 1);
        }
    }
    let status = s.env.status();
    assert_eq!(
        status[0]["totals"]["failures"].as_u64().unwrap_or(0),
        0,
        "no run was counted as a failure: {}",
        status[0]["totals"]
    );
}

/// The twin that must still be caught: a patch Codex never applies also gets no PostToolUse,
/// and retried unchanged it is a repeated failure (`tests/dialects.rs` has the captured one; here
/// beside the running command, so the two cannot be confused).
#[test]
fn a_codex_patch_that_never_applies_is_still_a_failure_beside_running_commands() {
    let mut s = Session::new("codex");
    let pre = s.codex("PreToolUse", "Bash", json!({"command": "npm test"}), None);
    s.feed("pre-tool-use", pre, 1);
    let patch = json!({"command": "*** Begin Patch\n*** Update File: a.txt\n@@\n-not there\n+x\n*** End Patch\n"});
    let mut denied_at = None;
    for call in 1..=5 {
        let pre = s.codex("PreToolUse", "apply_patch", patch.clone(), None);
        if refused("codex", &s.feed("pre-tool-use", pre, 5)).is_some() {
            denied_at = Some(call);
            break;
        }
    }
    assert!(
        matches!(denied_at, Some(3..=4)),
        "a patch retried unchanged was denied at {denied_at:?}"
    );
}

/// Copilot CLI on Windows waits on a detached PowerShell with `read_powershell` and a `delay`
/// (seen in a real session: two minutes at a time for a full `cargo test`). The same answer
/// ("still running") at each read is no news yet, not a repeat.
#[test]
fn a_copilot_read_powershell_with_a_delay_is_waiting_not_repeating() {
    let mut s = Session::new("copilot");
    let input = json!({"shellId": "1", "delay": 120});
    for read in 0..8 {
        let pre = json!({"sessionId": "copilot-run", "timestamp": s.clock, "cwd": s.env.project,
            "toolName": "read_powershell", "toolArgs": input});
        let out = s.feed("pre-tool-use", pre, 1);
        assert_eq!(refused("copilot", &out), None, "read {read} refused");
        let post = json!({"sessionId": "copilot-run", "timestamp": s.clock, "cwd": s.env.project,
            "toolName": "read_powershell", "toolArgs": input,
            "toolResult": {"resultType": "success",
                "textResultForLlm": "   Compiling loopgate v0.1.0\n<shellId: 1 still running>"}});
        s.feed("post-tool-use", post, 120);
    }
}

/// A person on Codex (which never says whether anyone attends) answers "please" again and again
/// while the agent's turns fail the same way (seen in a real session: `git switch main` refused
/// for local changes, four times). The same words again may be a person's: they go ahead, told,
/// and so does a new instruction after them; tool calls of those turns run.
#[test]
fn a_codex_person_repeating_please_after_failed_turns_is_never_refused() {
    let mut s = Session::new("codex");
    let prompt = |s: &Session, turn: u32, text: &str| {
        json!({"session_id": "codex-run", "turn_id": format!("turn-{turn}"), "cwd": s.env.project,
            "transcript_path": "/dev/null", "hook_event_name": "UserPromptSubmit",
            "model": "gpt-5.5", "permission_mode": "bypassPermissions", "prompt": text})
    };
    let patch = json!({"command": "*** Begin Patch\n*** Update File: a.txt\n@@\n-not there\n+x\n*** End Patch\n"});
    for turn in 1..=5u32 {
        let p = prompt(&s, turn, "お願いします");
        let out = s.feed("user-prompt-submit", p, 20);
        assert!(
            !out.stdout.contains("\"block\""),
            "turn {turn}: the person's prompt was refused: {}",
            out.stdout
        );
        // A patch that never applies (no PostToolUse), tried twice: a turn that tried and failed.
        for _ in 0..2 {
            let mut pre = s.codex("PreToolUse", "apply_patch", patch.clone(), None);
            pre["turn_id"] = json!(format!("turn-{turn}"));
            s.feed("pre-tool-use", pre, 5);
        }
        let stop = json!({"session_id": "codex-run", "turn_id": format!("turn-{turn}"),
            "cwd": s.env.project, "transcript_path": "/dev/null", "hook_event_name": "Stop",
            "model": "gpt-5.5", "permission_mode": "bypassPermissions",
            "stop_hook_active": false, "last_assistant_message": "It still fails."});
        s.feed("stop", stop, 5);
    }
    let breaker = &s.env.status()[0]["breaker"];
    assert_ne!(
        breaker["state"], "CLOSED",
        "the turns were counted: {breaker}"
    );
    let out = s.feed(
        "user-prompt-submit",
        prompt(&s, 6, "Stash the local changes first."),
        20,
    );
    assert!(!out.stdout.contains("\"block\""), "{}", out.stdout);
    let mut pre = s.codex("PreToolUse", "Bash", json!({"command": "git stash"}), None);
    pre["turn_id"] = json!("turn-6");
    let out = s.feed("pre-tool-use", pre, 5);
    assert_eq!(
        refused("codex", &out),
        None,
        "the new turn's call was refused"
    );
}
