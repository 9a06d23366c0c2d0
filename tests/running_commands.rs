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
        "gemini" => (v["decision"] == "deny").then(|| v["reason"].clone()),
        _ => (v["hookSpecificOutput"]["permissionDecision"] == "deny")
            .then(|| v["hookSpecificOutput"]["permissionDecisionReason"].clone()),
    };
    reason.map(|r| r.to_string())
}

/// Codex answers a command still running after its yield time with "Process running with
/// session ID N"; the agent polls it with `write_stdin`. Observed with Codex 0.169.0
/// (`docs/agents.md`): no hook fires for the polls, and the command's own PostToolUse comes when
/// the process exits, with its output. The same `npm test` started four times that way, each a
/// slow green run, is four runs of a slow suite: nothing is refused, nothing counted a failure.
#[test]
fn a_codex_command_still_running_is_no_failure_until_it_ends() {
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
        // The polls fire nothing; the command's Post comes when it exits, 40 s on.
        let post = s.codex(
            "PostToolUse",
            "Bash",
            npm.clone(),
            Some("Tests: 12 passed\n"),
        );
        s.feed("post-tool-use", post, 40);
    }
    let status = s.env.status();
    assert_eq!(
        status[0]["totals"]["failures"].as_u64().unwrap_or(0),
        0,
        "no run was counted as a failure: {}",
        status[0]["totals"]
    );
}

/// Its twin: the same long `npm test` failing the same way each run (its late Post saying so)
/// is the same failure retried, caught as a quick command's would be.
#[test]
fn a_codex_long_command_failing_the_same_way_each_run_is_caught() {
    let mut s = Session::new("codex");
    let npm = json!({"command": "npm test"});
    let failed = "FAIL src/app.test.js\n  ● renders\nnpm error code 1\nnpm error command failed\n";
    let refused_at = (1..=6).find(|_| {
        let pre = s.codex("PreToolUse", "Bash", npm.clone(), None);
        if refused("codex", &s.feed("pre-tool-use", pre, 30)).is_some() {
            return true;
        }
        let post = s.codex("PostToolUse", "Bash", npm.clone(), Some(failed));
        s.feed("post-tool-use", post, 40);
        false
    });
    assert!(
        matches!(refused_at, Some(3..=4)),
        "the same long failing run was refused at run {refused_at:?}"
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

impl Session {
    /// One Claude Code tool call, answered: `Ok(response)` through PostToolUse. Returns whether
    /// its PreToolUse was refused (then it never ran).
    fn claude_call(&mut self, tool: &str, input: Value, response: Value, after_s: u64) -> bool {
        self.n += 1;
        let id = format!("toolu_{}", self.n);
        let base = json!({"session_id": "claude-run", "transcript_path": "/dev/null",
            "cwd": self.env.project, "prompt_id": "p1", "permission_mode": "bypassPermissions",
            "tool_name": tool, "tool_input": input, "tool_use_id": id});
        let mut pre = base.clone();
        pre["hook_event_name"] = json!("PreToolUse");
        if refused("claude", &self.feed("pre-tool-use", pre, after_s)).is_some() {
            return true;
        }
        let mut post = base;
        post["hook_event_name"] = json!("PostToolUse");
        post["tool_response"] = response;
        self.feed("post-tool-use", post, 1);
        false
    }

    /// `npm test` run in the background and polled with `TaskOutput` until it ends with
    /// `output`; returns whether the start was refused.
    fn background_run(&mut self, run: u32, output: &str) -> bool {
        let task = format!("b{run}");
        let start = json!({"command": "npm test", "run_in_background": true});
        let started = json!({"stdout": "", "stderr": "", "interrupted": false,
            "isImage": false, "backgroundTaskId": task});
        if self.claude_call("Bash", start, started, 10) {
            return true;
        }
        let poll = json!({"task_id": task, "block": true, "timeout": 30000});
        let running = json!({"retrieval_status": "timeout",
            "task": {"task_id": task, "task_type": "local_bash", "status": "running",
                "output": "> jest\n"}});
        let ended = json!({"retrieval_status": "success",
            "task": {"task_id": task, "task_type": "local_bash", "status": "failed",
                "output": output, "exitCode": 1}});
        assert!(!self.claude_call("TaskOutput", poll.clone(), running, 30));
        assert!(!self.claude_call("TaskOutput", poll, ended, 20));
        false
    }
}

/// A long command's outcome is the one its poll finally reports: `npm test` run in the
/// background, each run failing the same way, is the same failure retried, caught as it is when
/// run in the foreground; its twin, each run failing differently (the agent fixing one test
/// after another), is work and is never refused.
#[test]
fn a_background_command_failing_the_same_way_each_run_is_a_repeated_failure() {
    let same = "FAIL src/app.test.js\n  ● renders the header\n    expect(received).toBe(expected)";
    let mut s = Session::new("claude");
    let refused_at = (1..=6).find(|&run| s.background_run(run, same));
    assert!(
        matches!(refused_at, Some(3..=4)),
        "the same failing background run was refused at run {refused_at:?}"
    );

    let mut s = Session::new("claude");
    let tests = [
        "header",
        "footer",
        "sidebar",
        "menu",
        "login form",
        "search box",
    ];
    for (run, name) in (1..).zip(tests) {
        let differs = format!("FAIL src/app.test.js\n  ● renders the {name}\n    missing {name}");
        assert!(!s.background_run(run, &differs), "run {run} refused");
    }
}

/// Gemini (or any CLI) polling a CI run with no sleep of its own, about 6 s apart: while the run
/// says it is queued or in progress, asking again is waiting, judged by time, and never refused
/// in the few minutes a CI run takes. Once the answer is final, asking again and again is a repeat.
#[test]
fn a_ci_run_polled_while_in_progress_is_waiting_and_its_final_answer_is_not() {
    let gemini = |s: &Session, event: &str, answer: Option<&str>| {
        let mut p = json!({"session_id": "gemini-run", "transcript_path": "/dev/null",
            "cwd": s.env.project, "hook_event_name": event, "timestamp": "2026-11-28T00:00:00Z",
            "tool_name": "run_shell_command",
            "tool_input": {"command": "gh run list --limit 1", "description": "check CI"}});
        if let Some(a) = answer {
            p["tool_response"] = json!({"llmContent": format!("Output: {a}\nProcess Group PGID: 4242"),
                "returnDisplay": a});
        }
        p
    };
    let mut s = Session::new("gemini");
    let moving = "in_progress\t\tfix build\tCI\tmain\tpush\t1234567\t2m\t2026-11-28T00:00:00Z";
    for poll in 0..15 {
        let pre = gemini(&s, "BeforeTool", None);
        let out = s.feed("pre-tool-use", pre, 6);
        assert_eq!(
            refused("gemini", &out),
            None,
            "poll {poll} of a CI run in progress refused"
        );
        let post = gemini(&s, "AfterTool", Some(moving));
        s.feed("post-tool-use", post, 1);
    }
    let done = "completed\tsuccess\tfix build\tCI\tmain\tpush\t1234567\t4m\t2026-11-28T00:00:00Z";
    let mut refused_at = None;
    for poll in 0..8 {
        let pre = gemini(&s, "BeforeTool", None);
        if refused("gemini", &s.feed("pre-tool-use", pre, 6)).is_some() {
            refused_at = Some(poll);
            break;
        }
        let post = gemini(&s, "AfterTool", Some(done));
        s.feed("post-tool-use", post, 1);
    }
    assert!(
        refused_at.is_some_and(|n| n >= 3),
        "a finished CI run asked again and again was refused at {refused_at:?}"
    );
}

impl Session {
    /// A Bash call by subagent `agent` (`None`: the main agent) that fails with `error`;
    /// returns whether it was refused.
    fn subagent_fails(&mut self, agent: Option<&str>, command: &str, error: &str) -> bool {
        self.n += 1;
        let mut p = json!({"session_id": "claude-run", "transcript_path": "/dev/null",
            "cwd": self.env.project, "prompt_id": "p1", "permission_mode": "bypassPermissions",
            "tool_name": "Bash", "tool_input": {"command": command},
            "tool_use_id": format!("toolu_{}", self.n)});
        if let Some(a) = agent {
            p["agent_id"] = json!(a);
            p["agent_type"] = json!("general-purpose");
        }
        let mut pre = p.clone();
        pre["hook_event_name"] = json!("PreToolUse");
        if refused("claude", &self.feed("pre-tool-use", pre, 8)).is_some() {
            return true;
        }
        p["hook_event_name"] = json!("PostToolUseFailure");
        p["error"] = json!(error);
        self.feed("post-tool-use-failure", p, 1);
        false
    }
}

/// The same command failing the same way is one loop whichever agent retries it: a flaky push
/// retried by one subagent after another (each within its own retry budget) is stopped across
/// them. Its twin, the work changed between the subagents' tries, is never refused.
#[test]
fn a_failure_retried_across_subagents_is_counted_across_them() {
    let push = "git push origin main";
    let error = "Exit code 128\nfatal: unable to access 'https://example.com/repo.git/': \
                 Could not resolve host: example.com";
    let mut s = Session::new("claude");
    let mut refused_at = None;
    'agents: for agent in ["a1", "a2", "a3", "a4", "a5", "a6"] {
        for attempt in 0..2 {
            if s.subagent_fails(Some(agent), push, error) {
                refused_at = Some((agent, attempt));
                break 'agents;
            }
        }
    }
    assert!(
        matches!(refused_at, Some(("a2", _))),
        "the same failure retried by one subagent after another was refused at {refused_at:?}"
    );
    // The main agent keeps its own count: checking what the subagents reported, and retrying
    // it once, is not their loop.
    for attempt in 0..2 {
        assert!(
            !s.subagent_fails(None, push, error),
            "main agent's try {attempt} refused"
        );
    }

    let mut s = Session::new("claude");
    for (n, agent) in ["a1", "a2", "a3", "a4", "a5", "a6"].into_iter().enumerate() {
        assert!(
            !s.subagent_fails(Some(agent), push, error),
            "{agent} refused"
        );
        // The work moves on between the subagents: a new file written by the main agent.
        let write = json!({"session_id": "claude-run", "transcript_path": "/dev/null",
            "cwd": s.env.project, "prompt_id": "p1", "permission_mode": "bypassPermissions",
            "hook_event_name": "PostToolUse", "tool_name": "Write",
            "tool_input": {"file_path": format!("{}/notes-{n}.md", s.env.project.display()),
                "content": format!("note {n}")},
            "tool_response": {"type": "create", "filePath": format!("{}/notes-{n}.md", s.env.project.display())},
            "tool_use_id": format!("toolu_w{n}")});
        s.feed("post-tool-use", write, 2);
    }
}
