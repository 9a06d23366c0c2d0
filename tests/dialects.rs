//! Other agent CLIs' hook payloads, as captured from the real CLIs (`tests/fixtures/agents/`,
//! copied from `../shared/agents/*/fixtures/`), through the real binary: every one is read (with
//! `--agent` and by detection alike), and each CLI gets its loops broken in the answer shape it
//! obeys.

use crate::common::{Env, Out};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const CLIS: [&str; 4] = ["codex", "gemini", "qwen", "copilot"];

fn fixtures(cli: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(cli))
        .unwrap()
        .flat_map(|version| std::fs::read_dir(version.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .collect();
    files.sort();
    files
}

/// The hook subcommand `setup --agent` wires to a CLI's event, `None` for events loopgate does not
/// listen to.
fn subcommand(cli: &str, event: &str) -> Option<&'static str> {
    Some(match (cli, event) {
        (_, "PreToolUse" | "BeforeTool" | "preToolUse") => "pre-tool-use",
        (_, "PostToolUse" | "AfterTool" | "postToolUse") => "post-tool-use",
        (_, "PostToolUseFailure" | "postToolUseFailure") => "post-tool-use-failure",
        (_, "Stop" | "AfterAgent" | "agentStop") => "stop",
        (_, "SubagentStop" | "subagentStop") => "subagent-stop",
        (_, "UserPromptSubmit" | "BeforeAgent" | "userPromptSubmitted") => "user-prompt-submit",
        ("copilot", "permissionRequest") => "permission-request",
        _ => return None,
    })
}

/// `basic-05-PostToolUse-Bash.json` → (`basic`, `PostToolUse`).
fn run_and_event(file: &Path) -> (String, String) {
    let name = file.file_stem().unwrap().to_str().unwrap();
    let parts: Vec<&str> = name.split('-').collect();
    (parts[0].to_string(), parts[2].to_string())
}

fn feed(env: &Env, cli: Option<&str>, sub: &str, payload: &[u8]) -> Out {
    let mut args = Vec::new();
    if let Some(c) = cli {
        args.extend(["--agent", c]);
    }
    args.push(sub);
    env.run(&args, payload)
}

fn session_totals(env: &Env) -> Vec<Value> {
    let v = env.status();
    let mut sessions: Vec<Value> = v
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|s| json!({"session": s["session"], "totals": s["totals"], "turn": s["turn"]["number"]}))
        .collect();
    sessions.sort_by_key(|s| s["session"].to_string());
    sessions
}

#[test]
fn every_captured_payload_is_read_with_the_flag_and_by_detection_alike() {
    for cli in CLIS {
        let flagged = Env::new();
        let detected = Env::new();
        let mut judged = 0;
        for file in fixtures(cli) {
            let (_, event) = run_and_event(&file);
            let Some(sub) = subcommand(cli, &event) else {
                continue;
            };
            let payload = std::fs::read(&file).unwrap();
            for (env, flag) in [(&flagged, Some(cli)), (&detected, None)] {
                let out = feed(env, flag, sub, &payload);
                assert_eq!(
                    (out.code, out.stderr.as_str()),
                    (0, ""),
                    "{cli} {} ({flag:?})",
                    file.display()
                );
                assert!(
                    out.stdout.is_empty() || out.json().is_object(),
                    "{}: {}",
                    file.display(),
                    out.stdout
                );
            }
            judged += 1;
        }
        assert!(judged >= 20, "{cli}: only {judged} fixtures judged");
        let totals = session_totals(&flagged);
        assert!(!totals.is_empty(), "{cli}: no session recorded");
        assert_eq!(
            totals,
            session_totals(&detected),
            "{cli}: detection reads the payloads as the flag does"
        );
    }
}

/// The captured failing shell call of each CLI, (PreToolUse, answer event, subcommand, answer).
fn failing_shell(cli: &str) -> (Value, Value, &'static str) {
    let read = |name: &str| -> Value {
        let file = fixtures(cli)
            .into_iter()
            .find(|f| f.file_name().unwrap().to_str().unwrap() == name)
            .unwrap_or_else(|| panic!("{cli}: no fixture {name}"));
        serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap()
    };
    match cli {
        // Codex reports no exit code; a command the shell cannot find is unambiguous text.
        "codex" => {
            let mut pre = read("basic-05-PreToolUse-Bash.json");
            let mut post = read("basic-06-PostToolUse-Bash.json");
            pre["tool_input"]["command"] = json!("nosuchtool --check");
            post["tool_input"]["command"] = json!("nosuchtool --check");
            post["tool_response"] = json!("bash: line 1: nosuchtool: command not found\n");
            (pre, post, "post-tool-use")
        }
        "gemini" => (
            read("basic-07-BeforeTool-run_shell_command.json"),
            read("basic-08-AfterTool-run_shell_command.json"),
            "post-tool-use",
        ),
        "qwen" => (
            read("basic-07-PreToolUse-run_shell_command.json"),
            read("basic-08-PostToolUseFailure-run_shell_command.json"),
            "post-tool-use-failure",
        ),
        "copilot" => (
            read("basic-06-preToolUse-bash.json"),
            read("basic-08-postToolUse-bash.json"),
            "post-tool-use",
        ),
        _ => unreachable!(),
    }
}

/// The reason a CLI's denial carries, from the shape that CLI obeys (hooks-observed.md §4).
fn denial_reason(cli: &str, out: &Out) -> Option<String> {
    if out.stdout.is_empty() {
        return None;
    }
    let v = out.json();
    let reason = match cli {
        "gemini" => {
            assert!(v.get("hookSpecificOutput").is_none(), "{v}");
            (v["decision"] == "deny").then(|| v["reason"].clone())
        }
        "copilot" => {
            assert!(v.get("hookSpecificOutput").is_none(), "{v}");
            (v["permissionDecision"] == "deny").then(|| v["permissionDecisionReason"].clone())
        }
        _ => (v["hookSpecificOutput"]["permissionDecision"] == "deny")
            .then(|| v["hookSpecificOutput"]["permissionDecisionReason"].clone()),
    };
    reason.map(|r| r.as_str().unwrap().to_string())
}

#[test]
fn a_repeated_failing_shell_call_is_denied_in_each_clis_shape_before_its_own_guard() {
    for cli in CLIS {
        let env = Env::new();
        let (pre, post, post_sub) = failing_shell(cli);
        let pre = pre.to_string();
        let post = post.to_string();
        let mut denied_at = None;
        // Gemini and Qwen intercept the 5th identical call themselves: loopgate must act first.
        for call in 1..=4 {
            let out = feed(&env, Some(cli), "pre-tool-use", pre.as_bytes());
            assert_eq!(out.code, 0, "{cli}: {}", out.stderr);
            if let Some(reason) = denial_reason(cli, &out) {
                assert!(reason.contains("loopgate"), "{cli}: {reason}");
                // The shell tool by the name that CLI's model knows.
                let shell = match cli {
                    "gemini" | "qwen" => "run_shell_command `",
                    "copilot" => "bash `",
                    _ => "Bash `",
                };
                assert!(reason.contains(shell), "{cli}: {reason}");
                denied_at = Some(call);
                break;
            }
            let out = feed(&env, Some(cli), post_sub, post.as_bytes());
            assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{cli}");
        }
        let at = denied_at.unwrap_or_else(|| panic!("{cli}: never denied in 4 calls"));
        assert!(at >= 2, "{cli}: denied at call {at}");
    }
}

#[test]
fn a_read_only_session_is_never_answered() {
    for cli in CLIS {
        let env = Env::new();
        for file in fixtures(cli) {
            let (run, event) = run_and_event(&file);
            if run != "par_shell" {
                continue;
            }
            let Some(sub) = subcommand(cli, &event) else {
                continue;
            };
            let out = feed(&env, Some(cli), sub, &std::fs::read(&file).unwrap());
            assert!(
                out.is_silent_allow(),
                "{cli} {}: {}",
                file.display(),
                out.stdout
            );
        }
    }
}

#[test]
fn copilot_fails_open_with_exit_zero_because_exit_one_denies_there() {
    let env = Env::new();
    for args in [
        &["--agent", "copilot", "pre-tool-use"][..],
        &["--agent", "codex", "pre-tool-use"][..],
    ] {
        let out = env.run(args, b"{not json");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stdout.is_empty());
        let want = if args[1] == "copilot" { 0 } else { 1 };
        assert_eq!(out.code, want, "{args:?}");
    }
}

#[test]
fn a_stop_block_re_fired_as_a_prompt_is_no_new_turn() {
    // Gemini, Qwen and Copilot send loopgate's own Stop reason back as the next prompt; a new turn
    // there would reset the Stop budget and let the block repeat without end on Gemini.
    let env = Env::new();
    assert!(gemini_prompt(&env, "fix it"));
    let turns = |env: &Env| env.status()[0]["turn"]["number"].clone();
    let before = turns(&env);
    assert!(gemini_prompt(
        &env,
        "loopgate: nothing under the project has changed since this task began"
    ));
    assert_eq!(turns(&env), before);
}

/// `base` with the fields of `extra` set, as stdin text.
fn with(mut base: Value, extra: Value) -> String {
    for (k, x) in extra.as_object().unwrap() {
        base[k] = x.clone();
    }
    base.to_string()
}

/// A Gemini payload for this test's session.
fn gemini(env: &Env, event: &str, extra: Value) -> String {
    let base = json!({"session_id": "g2", "cwd": env.project, "hook_event_name": event,
                      "timestamp": "2026-11-23T00:35:42.831Z"});
    with(base, extra)
}

/// The user's prompt on Gemini, which loopgate answers with nothing.
fn gemini_prompt(env: &Env, prompt: &str) -> bool {
    let p = gemini(env, "BeforeAgent", json!({ "prompt": prompt }));
    feed(env, Some("gemini"), "user-prompt-submit", p.as_bytes()).is_silent_allow()
}

#[test]
fn gemini_stop_blocks_are_bounded_by_loopgate_because_gemini_has_no_cap() {
    let env = Env::new().git().var("LOOPGATE_PROGRESS__WHEN", "always");
    let g = |event: &str, extra: Value| gemini(&env, event, extra);
    assert!(gemini_prompt(&env, "fix the readme"));
    let input = json!({"file_path": env.project.join("README.md"), "instruction": "x",
                       "old_string": "this text is not there", "new_string": "x"});
    let before = g(
        "BeforeTool",
        json!({"tool_name": "replace", "tool_input": input}),
    );
    let after = g(
        "AfterTool",
        json!({"tool_name": "replace", "tool_input": input, "tool_response": {
            "llmContent": "Could not find an exact match for 'old_string'",
            "error": {"message": "Could not find an exact match for 'old_string'", "type": "edit_no_occurrence_found"}}}),
    );
    feed(&env, Some("gemini"), "pre-tool-use", before.as_bytes());
    feed(&env, Some("gemini"), "post-tool-use", after.as_bytes());
    // Gemini continues after every block with the reason as a new prompt (observed), for ever.
    let mut blocks = 0;
    for round in 0..6 {
        let stop = g(
            "AfterAgent",
            json!({"prompt": "fix the readme", "prompt_response": "Done.", "stop_hook_active": round > 0}),
        );
        let out = feed(&env, Some("gemini"), "stop", stop.as_bytes());
        assert_eq!((out.code, out.stderr.as_str()), (0, ""));
        if out.stdout.is_empty() {
            break;
        }
        let v = out.json();
        assert_eq!(v["decision"], "block", "{v}");
        let reason = v["reason"].as_str().unwrap().to_string();
        assert!(reason.starts_with("loopgate:"), "{reason}");
        blocks += 1;
        assert!(gemini_prompt(&env, &reason));
    }
    assert!(
        (1..=2).contains(&blocks),
        "{blocks} Stop blocks; {}",
        env.status()[0]["turn"]
    );
}

#[test]
fn a_codex_patch_that_never_applies_is_a_repeated_failure_though_codex_reports_nothing() {
    // Codex fires only PreToolUse for a patch whose context does not match (observed).
    let env = Env::new();
    let pre = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/agents/codex/0.169.0/edge_calls-03-PreToolUse-apply_patch.json"),
    )
    .unwrap();
    let mut denied = None;
    for call in 1..=5 {
        let out = feed(&env, Some("codex"), "pre-tool-use", pre.as_bytes());
        if let Some(reason) = denial_reason("codex", &out) {
            denied = Some((call, reason));
            break;
        }
    }
    let (call, reason) = denied.expect("a patch retried unchanged five times was never denied");
    assert!((3..=4).contains(&call), "denied at call {call}");
    assert!(reason.contains("loopgate"), "{reason}");
    assert!(env.status()[0]["totals"]["failures"].as_u64().unwrap() >= 2);
}

#[test]
fn where_no_cli_can_halt_the_ladder_ends_in_a_standing_denial_said_once() {
    // Codex has no way to end a run mid-turn (observed): after the last stage every call of the
    // turn is refused, a new one too, and the full reason is given once.
    let env = Env::new();
    let call = |event: &str, cmd: &str, id: &str, extra: Value| {
        let base = json!({"session_id": "c1", "turn_id": "t1", "cwd": env.project,
                          "hook_event_name": event, "tool_name": "Bash",
                          "tool_input": {"command": cmd}, "tool_use_id": id});
        with(base, extra)
    };
    let mut reasons = Vec::new();
    for round in 0..6 {
        for cmd in ["aaa", "bbb"] {
            let id = format!("{cmd}{round}");
            let out = feed(
                &env,
                Some("codex"),
                "pre-tool-use",
                call("PreToolUse", cmd, &id, json!({})).as_bytes(),
            );
            match denial_reason("codex", &out) {
                Some(r) => reasons.push(r),
                None => {
                    let answer =
                        json!({"tool_response": format!("bash: {cmd}: command not found\n")});
                    feed(
                        &env,
                        Some("codex"),
                        "post-tool-use",
                        call("PostToolUse", cmd, &id, answer).as_bytes(),
                    );
                }
            }
        }
    }
    let fresh = feed(
        &env,
        Some("codex"),
        "pre-tool-use",
        call("PreToolUse", "ls", "new", json!({})).as_bytes(),
    );
    let last = denial_reason("codex", &fresh).expect("a new call after the last stage is refused");
    assert!(
        last.contains("stay paused for the rest of this turn"),
        "{last}"
    );
    let escalations: Vec<_> = reasons
        .iter()
        .filter(|r| r.contains("interventions in this turn"))
        .collect();
    assert_eq!(escalations.len(), 1, "{reasons:#?}");
    // A new prompt is a new turn: the standing denial is over.
    let prompt = json!({"session_id": "c1", "turn_id": "t2", "cwd": env.project,
                        "hook_event_name": "UserPromptSubmit", "prompt": "try another way"});
    feed(
        &env,
        Some("codex"),
        "user-prompt-submit",
        prompt.to_string().as_bytes(),
    );
    let mut next = call("PreToolUse", "ls", "new2", json!({}));
    next = next.replace("\"t1\"", "\"t2\"");
    assert!(feed(&env, Some("codex"), "pre-tool-use", next.as_bytes()).is_silent_allow());
}

/// Issue 22: a denial storm ends the turn in each CLI's strongest way. The same failing call is
/// retried after every denial; at the 10th refused call Gemini is told `continue: false` (its run
/// ends before the tool), and Codex, Qwen and Copilot keep getting denials for every later call of
/// the turn; Qwen's UserPromptSubmit before the next model request is blocked, which ends its run.
#[test]
fn a_denial_storm_ends_the_turn_in_each_clis_strongest_way() {
    for cli in CLIS {
        let env = Env::new();
        let (pre, post, post_sub) = failing_shell(cli);
        let (pre, post) = (pre.to_string(), post.to_string());
        let mut refused = 0;
        let mut last = None;
        for _ in 0..20 {
            let out = feed(&env, Some(cli), "pre-tool-use", pre.as_bytes());
            assert_eq!(out.code, 0, "{cli}: {}", out.stderr);
            let halted = !out.stdout.is_empty() && out.json()["continue"] == false;
            if halted || denial_reason(cli, &out).is_some() {
                refused += 1;
                if refused == 10 {
                    last = Some(out);
                    break;
                }
                continue;
            }
            feed(&env, Some(cli), post_sub, post.as_bytes());
        }
        let last = last.unwrap_or_else(|| panic!("{cli}: fewer than 10 refusals in 20 calls"));
        let v = last.json();
        if cli == "gemini" {
            assert_eq!(v["continue"], false, "{cli}: {v}");
            assert!(v["stopReason"]
                .as_str()
                .unwrap()
                .contains("the turn ends here"));
        } else {
            let reason = denial_reason(cli, &last).unwrap_or_default();
            assert!(reason.contains("the turn ends here"), "{cli}: {reason}");
            // Any later call of the turn, however new, is refused at once.
            let other = pre.replace("config/settings.yml", "README.md");
            let out = feed(&env, Some(cli), "pre-tool-use", other.as_bytes());
            let reason = denial_reason(cli, &out).unwrap_or_default();
            assert!(
                reason.contains("this turn is over"),
                "{cli}: {}",
                out.stdout
            );
        }
        if cli == "qwen" {
            // Qwen's UserPromptSubmit before the next model request is blocked: the run ends.
            let p: Value = serde_json::from_str(&pre).unwrap();
            let before_request = json!({"session_id": p["session_id"], "prompt": "",
                                        "hook_event_name": "UserPromptSubmit",
                                        "prompt_id": p["prompt_id"]});
            let out = feed(
                &env,
                Some(cli),
                "user-prompt-submit",
                before_request.to_string().as_bytes(),
            );
            let v = out.json();
            assert_eq!(v["decision"], "block", "{}", out.stdout);
            assert!(v["reason"].as_str().unwrap().contains("this turn is over"));
        }
    }
}

/// Before the ceiling, Qwen's UserPromptSubmit before each model request gets no answer at all.
#[test]
fn qwens_hook_before_each_model_request_is_silent_below_the_ceiling() {
    let env = Env::new();
    let (pre, post, post_sub) = failing_shell("qwen");
    feed(
        &env,
        Some("qwen"),
        "pre-tool-use",
        pre.to_string().as_bytes(),
    );
    feed(&env, Some("qwen"), post_sub, post.to_string().as_bytes());
    let before_request = json!({"session_id": pre["session_id"], "prompt": "",
                                "hook_event_name": "UserPromptSubmit",
                                "prompt_id": pre["prompt_id"]});
    let out = feed(
        &env,
        Some("qwen"),
        "user-prompt-submit",
        before_request.to_string().as_bytes(),
    );
    assert!(out.is_silent_allow(), "{} {}", out.stdout, out.stderr);
}

/// Copilot's strongest channel: once its permissionRequest hook has been seen firing, the call
/// that reaches the ceiling is let past preToolUse (no answer), and the permission hook refuses
/// it with `interrupt: true`, which ends the run (observed). The answer is exactly the shape
/// Copilot reads; a call whose result comes without a permission call in between shows the hook
/// stopped firing, and from then on calls are refused again.
#[test]
fn copilots_permission_hook_ends_the_turn_at_the_ceiling() {
    let env = Env::new();
    let (pre, post, post_sub) = failing_shell("copilot");
    let permission: Value = serde_json::from_slice(
        &std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/agents/copilot/1.0.102/basic-07-permissionRequest-bash.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let (pre, post, permission) = (pre.to_string(), post.to_string(), permission.to_string());
    let mut refused = 0;
    let mut let_through = None;
    for n in 0..20 {
        let out = feed(&env, Some("copilot"), "pre-tool-use", pre.as_bytes());
        assert_eq!(out.code, 0, "{}", out.stderr);
        if denial_reason("copilot", &out).is_some() {
            refused += 1;
            continue;
        }
        if refused == 9 {
            let_through = Some(n);
            break;
        }
        // Below the ceiling the permission hook says nothing: Copilot's own rules go on.
        let asked = feed(
            &env,
            Some("copilot"),
            "permission-request",
            permission.as_bytes(),
        );
        assert!(asked.is_silent_allow(), "{}", asked.stdout);
        feed(&env, Some("copilot"), post_sub, post.as_bytes());
    }
    assert!(
        let_through.is_some(),
        "the 10th refused call is let through to the permission hook ({refused} refused)"
    );
    let out = feed(
        &env,
        Some("copilot"),
        "permission-request",
        permission.as_bytes(),
    );
    let v = out.json();
    assert_eq!(v["behavior"], "deny", "{v}");
    assert_eq!(v["interrupt"], true, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("loopgate ended this run: 10 refused calls in this turn were made again"),
        "{v}"
    );
    assert_eq!(
        v.as_object().unwrap().len(),
        3,
        "nothing Copilot does not read: {v}"
    );

    // The same turn again, with the hook gone: the call let through runs (its result comes with
    // no permission call), and every later call is refused as before.
    let out = feed(&env, Some("copilot"), "pre-tool-use", pre.as_bytes());
    assert!(out.is_silent_allow(), "let through again: {}", out.stdout);
    feed(&env, Some("copilot"), post_sub, post.as_bytes());
    let out = feed(&env, Some("copilot"), "pre-tool-use", pre.as_bytes());
    let reason = denial_reason("copilot", &out).unwrap_or_default();
    assert!(reason.contains("this turn is over"), "{}", out.stdout);
}

/// Issue 36: a failed edit reaches loopgate from Gemini's AfterTool (`tool_response.error`), Qwen's
/// and Copilot's PostToolUseFailure, and is recorded as a failed edit: it counts as a failure and
/// arms the Stop gate (`turn.edit_failures`), as Claude Code's rejected Edit does.
#[test]
fn a_failed_edit_or_write_is_a_failed_edit_in_every_clis_words() {
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "gemini",
            "post-tool-use",
            json!({"session_id": "e1", "hook_event_name": "AfterTool", "tool_name": "replace",
                   "tool_input": {"file_path": "/p/README.md", "instruction": "x", "old_string": "gone", "new_string": "x"},
                   "tool_response": {"llmContent": "Failed to edit, 0 occurrences found for old_string in /p/README.md. No edits made.",
                                     "error": {"message": "Failed to edit, 0 occurrences found for old_string in /p/README.md. No edits made.",
                                               "type": "edit_no_occurrence_found"}}}),
        ),
        (
            "gemini",
            "post-tool-use",
            json!({"session_id": "e1", "hook_event_name": "AfterTool", "tool_name": "write_file",
                   "tool_input": {"file_path": "/p/out.txt", "content": "x"},
                   "tool_response": {"llmContent": "Error writing to file: EACCES: permission denied",
                                     "error": {"message": "Error writing to file: EACCES: permission denied", "type": "file_write_failure"}}}),
        ),
        (
            "qwen",
            "post-tool-use-failure",
            json!({"session_id": "e1", "hook_event_name": "PostToolUseFailure", "tool_name": "edit",
                   "tool_use_id": "toolu_1", "tool_input": {"file_path": "/p/README.md", "old_string": "gone", "new_string": "x"},
                   "error": "Failed to edit, could not find the string to replace."}),
        ),
        (
            "qwen",
            "post-tool-use-failure",
            json!({"session_id": "e1", "hook_event_name": "PostToolUseFailure", "tool_name": "write_file",
                   "tool_use_id": "toolu_2", "tool_input": {"file_path": "/p/out.txt", "content": "x"},
                   "error": "Error writing to file: EACCES: permission denied"}),
        ),
        (
            "copilot",
            "post-tool-use-failure",
            json!({"sessionId": "e1", "toolName": "edit",
                   "toolArgs": {"path": "/p/README.md", "old_str": "gone", "new_str": "x"},
                   "error": "No match found"}),
        ),
    ];
    for (cli, sub, payload) in cases {
        let env = Env::new();
        let out = feed(&env, Some(cli), sub, payload.to_string().as_bytes());
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{cli} {payload}");
        let s = &env.status()[0];
        assert_eq!(s["totals"]["failures"], 1, "{cli} {payload}: {s}");
        assert_eq!(s["turn"]["edit_failures"], 1, "{cli} {payload}: {s}");
    }
}

/// Gemini's next-speaker check sends `Please continue.` by itself (BeforeAgent fires): that is no
/// person's new request, so a deploy failing the same way across such turns is still a repeat.
#[test]
fn an_automatic_continue_is_no_new_turn_and_the_same_failure_is_still_a_repeat() {
    let run = |continues: bool| -> Option<usize> {
        let env = Env::new();
        assert!(gemini_prompt(&env, "deploy the app"));
        let input = json!({"command": "npm run deploy", "description": "deploy"});
        for call in 1..=5 {
            let before = gemini(
                &env,
                "BeforeTool",
                json!({"tool_name": "run_shell_command", "tool_input": input}),
            );
            let out = feed(&env, Some("gemini"), "pre-tool-use", before.as_bytes());
            if denial_reason("gemini", &out).is_some() {
                return Some(call);
            }
            let after = gemini(
                &env,
                "AfterTool",
                json!({"tool_name": "run_shell_command", "tool_input": input, "tool_response": {
                    "llmContent": "Output: Error: deploy target prod rejected the release: quota exhausted for project 4411\nExit Code: 1"}}),
            );
            feed(&env, Some("gemini"), "post-tool-use", after.as_bytes());
            if continues {
                assert!(gemini_prompt(&env, "Please continue."));
            }
        }
        None
    };
    assert!(
        run(true).is_some(),
        "the same failure across automatic continue turns is never refused"
    );
    assert_eq!(
        run(true),
        run(false),
        "an automatic continue changes nothing"
    );
}

/// A person's new prompt is a new turn: the same command may fail again after it.
#[test]
fn a_persons_new_prompt_still_starts_a_turn_on_gemini() {
    let env = Env::new();
    assert!(gemini_prompt(&env, "deploy the app"));
    let turn = |env: &Env| env.status()[0]["turn"]["number"].clone();
    let before = turn(&env);
    assert!(gemini_prompt(&env, "Please continue."));
    assert_eq!(turn(&env), before);
    assert!(gemini_prompt(&env, "now deploy to staging instead"));
    assert_ne!(turn(&env), before);
}

/// Copilot's `powershell` tool is a shell: without `pwsh` every call of it fails the same way,
/// and going back to it again and again is refused, whatever the commands.
#[test]
fn copilots_powershell_without_pwsh_is_an_environment_loop() {
    let env = Env::new();
    let call = |cmd: &str| json!({"sessionId": "c9", "toolName": "powershell", "toolArgs": {"command": cmd, "description": "run"}});
    let mut denied = None;
    for (n, cmd) in [
        "Get-ChildItem",
        "Get-Content README.md",
        "Test-Path src",
        "Get-ChildItem src",
    ]
    .iter()
    .enumerate()
    {
        let out = feed(
            &env,
            Some("copilot"),
            "pre-tool-use",
            call(cmd).to_string().as_bytes(),
        );
        if let Some(reason) = denial_reason("copilot", &out) {
            denied = Some((n + 1, reason));
            break;
        }
        let mut failed = call(cmd);
        failed["error"] = json!("<exited with error: pwsh not available>");
        feed(
            &env,
            Some("copilot"),
            "post-tool-use-failure",
            failed.to_string().as_bytes(),
        );
    }
    let (n, reason) = denied.expect("never refused");
    assert_eq!(n, 4, "{reason}");
    assert!(reason.contains("pwsh"), "{reason}");
}
