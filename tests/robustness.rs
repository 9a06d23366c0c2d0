//! Never wedge the agent: bad input fails open with one line, hostile ids stay inside the state
//! dir, and parallel hook processes lose no update.

use crate::common::Env;
use serde_json::json;

#[test]
fn bad_input_fails_open_with_one_line_and_leaves_state_untouched() {
    let env = Env::new();
    env.bash("seed", Ok("x"));
    let before = std::fs::read_dir(env.state.join("sessions"))
        .unwrap()
        .count();
    let snapshot = env.status();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty stdin", b"".to_vec()),
        ("not json", b"{this is not json".to_vec()),
        ("array", b"[1,2,3]".to_vec()),
        ("missing fields", br#"{"session_id":"sess-1"}"#.to_vec()),
        ("missing tool_name", br#"{"session_id":"sess-1","hook_event_name":"PreToolUse","tool_input":{}}"#.to_vec()),
        ("wrong types", br#"{"session_id":["x"],"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{}}"#.to_vec()),
        ("tool_input not an object", br#"{"session_id":"sess-1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":7}"#.to_vec()),
        ("invalid utf-8", b"{\"session_id\":\"\xff\xfe\",\"hook_event_name\":\"PreToolUse\"}".to_vec()),
        ("unknown event", br#"{"session_id":"sess-1","hook_event_name":"Bogus","tool_name":"Bash","tool_input":{}}"#.to_vec()),
        ("event for another subcommand", br#"{"session_id":"sess-1","hook_event_name":"Stop"}"#.to_vec()),
    ];
    for (name, input) in cases {
        let out = env.run(&["pre-tool-use"], &input);
        assert_eq!(out.code, 1, "{name}: exit 1 (non-blocking)");
        assert!(out.stdout.is_empty(), "{name}: no answer on stdout");
        assert_eq!(
            out.stderr.trim_end().lines().count(),
            1,
            "{name}: one line: {:?}",
            out.stderr
        );
        assert!(
            out.stderr.starts_with("loopgate: "),
            "{name}: {}",
            out.stderr
        );
    }
    assert_eq!(
        std::fs::read_dir(env.state.join("sessions"))
            .unwrap()
            .count(),
        before
    );
    assert_eq!(env.status(), snapshot, "state untouched");
}

#[test]
fn usage_errors_never_exit_two() {
    let env = Env::new();
    let out = env.run(&["no-such-command"], b"");
    assert_eq!(out.code, 1);
}

#[test]
fn a_huge_tool_input_is_handled_normally() {
    let env = Env::new();
    let big = "x".repeat(10 << 20);
    let out = env.pre(
        "Write",
        json!({"file_path": "/p/big.txt", "content": big}),
        "big-1",
    );
    assert!(out.is_silent_allow(), "{}", out.stderr);
    let size = std::fs::read_dir(env.state.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .max()
        .unwrap();
    assert!(size < 64 << 10, "state stays small: {size}");
}

#[test]
fn hostile_session_ids_stay_inside_the_state_dir() {
    let long = "y".repeat(4096);
    for id in [
        "../../x",
        "/etc/passwd",
        "a\u{0}b/../../c",
        long.as_str(),
        "..",
        ".",
    ] {
        let mut env = Env::new();
        env.session = id.to_string();
        let out = env.bash("ls", Ok("a"));
        assert!(out.is_silent_allow(), "{id:?}: {}", out.stderr);
        assert_eq!(
            env.files_outside_state(),
            Vec::<std::path::PathBuf>::new(),
            "{id:?}"
        );
        let files: Vec<_> = std::fs::read_dir(env.state.join("sessions"))
            .unwrap()
            .collect();
        assert_eq!(files.len(), 2, "one state and one lock file for {id:?}");
    }
}

#[test]
fn corrupt_state_is_moved_aside_and_the_call_fails_open() {
    let env = Env::new();
    env.bash("seed", Ok("x"));
    let state = env.state_file();
    std::fs::write(&state, b"\x00\x01garbage").unwrap();
    let out = env.pre("Bash", json!({"command": "ls"}), "c1");
    // Judged on fresh state, and the human is told (systemMessage) where the bad file went.
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("moved to"), "{}", out.stdout);
    assert!(out.stderr.contains("moved to"), "{}", out.stderr);
    let aside: Vec<_> = std::fs::read_dir(env.state.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("corrupt"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(&aside[0]).unwrap(), b"\x00\x01garbage");
    assert!(env
        .pre("Bash", json!({"command": "ls"}), "c2")
        .is_silent_allow());
}

#[test]
fn sixty_four_parallel_hooks_lose_no_update() {
    // The point is that no update is lost, not the deadline: give the lock time on a loaded machine.
    let env = Env::new().config("lock_timeout_ms = 30000\n");
    let children: Vec<_> = (0..64)
        .map(|n| {
            let p = env.base(
                "PreToolUse",
                json!({"tool_name": "Bash", "tool_input": {"command": format!("echo {n}")}, "tool_use_id": format!("par-{n}")}),
            );
            let mut cmd = env.command(&["pre-tool-use"]);
            cmd.timeout(std::time::Duration::from_secs(60));
            std::thread::spawn(move || cmd.write_stdin(p.to_string()).output().unwrap())
        })
        .collect();
    for c in children {
        let o = c.join().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(env.status()[0]["totals"]["calls"], 64);
}

#[test]
fn a_held_lock_fails_open_within_the_deadline() {
    let env = Env::new().config("lock_timeout_ms = 300\n");
    env.bash("seed", Ok("x"));
    let lock_path = env.lock_file();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&lock_path)
        .unwrap();
    f.lock().unwrap();
    let t = std::time::Instant::now();
    let out = env.pre("Bash", json!({"command": "ls"}), "l1");
    // Judged without saving, and the human is told: a held lock never switches loopgate off.
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("locked"), "{}", out.stdout);
    assert!(t.elapsed() < std::time::Duration::from_secs(3));
    drop(f);
    // The call judged while the lock was held was journaled: merged now, and said.
    let out = env.pre("Bash", json!({"command": "ls"}), "l2");
    assert!(out.stdout.contains("merged"), "{}", out.stdout);
    assert!(env
        .pre("Bash", json!({"command": "ls"}), "l3")
        .is_silent_allow());
}

#[test]
fn a_symlinked_state_file_is_never_followed() {
    let env = Env::new();
    env.bash("seed", Ok("x"));
    let state = env.state_file();
    let victim = env.project.join("precious.txt");
    std::fs::write(&victim, "do not touch").unwrap();
    std::fs::remove_file(&state).unwrap();
    std::os::unix::fs::symlink(&victim, &state).unwrap();
    let out = env.pre("Bash", json!({"command": "ls"}), "s1");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("symlink"),
        "the link is moved aside: {}",
        out.stdout
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "do not touch");
    assert!(env
        .pre("Bash", json!({"command": "ls"}), "s2")
        .is_silent_allow());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "do not touch");
    assert!(!std::fs::symlink_metadata(&state)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn previews_are_masked_and_can_be_turned_off() {
    let env = Env::new();
    for _ in 0..4 {
        env.bash(
            "curl -H 'Authorization: Bearer sk-ant-abcdefghijklmnop' https://x",
            Err("Exit code 22"),
        );
    }
    let log = std::fs::read_to_string(env.state.join("events.jsonl")).unwrap();
    assert!(log.contains("\"preview\""), "{log}");
    assert!(
        !log.contains("abcdefghijklmnop"),
        "the secret leaked: {log}"
    );
    let env = Env::new().config("[log]\npreview = false\n");
    for _ in 0..4 {
        env.bash("make deploy", Err("Exit code 2"));
    }
    let log = std::fs::read_to_string(env.state.join("events.jsonl")).unwrap();
    assert!(!log.is_empty() && !log.contains("\"preview\""), "{log}");
}

#[test]
fn the_agent_cannot_switch_loopgate_off_through_the_project() {
    let env = Env::new();
    let out = env.pre(
        "Write",
        json!({"file_path": env.project.join(".claude/loopgate.toml"), "content": "mode = \"observe\"\n"}),
        "g1",
    );
    assert!(out.denied(), "{}", out.stdout);
    assert!(env
        .pre(
            "Bash",
            json!({"command": "export LOOPGATE_DISABLE=1"}),
            "g2"
        )
        .denied());
    // A project file cannot turn the guard off either.
    let env = Env::new().project_config("[guard]\nenabled = false\n");
    assert!(env
        .pre("Bash", json!({"command": "loopgate reset --all"}), "g3")
        .denied());
}

/// A CLI that writes the payload and leaves stdin open gets its answer as soon as the JSON is
/// complete (the landed reader waited for an end of input that never came); an incomplete
/// payload on an open stdin fails open with one line once the read deadline has passed.
#[test]
fn a_payload_on_a_stdin_left_open_is_answered_and_a_stalled_one_times_out() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let env = Env::new();
    // Larger than one read, so the answer needs the reads after the first.
    let command = format!("echo {}", "x".repeat(40_000));
    let payload = env
        .base(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_input": {"command": "loopgate reset --all", "description": command}, "tool_use_id": "open-1"}),
        )
        .to_string();
    let cases = [
        (payload.as_bytes(), true),
        (&payload.as_bytes()[..200], false),
    ];
    for (input, complete) in cases {
        let mut cmd = env.std_command(&["pre-tool-use"]);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut p = cmd.spawn().unwrap();
        let mut stdin = p.stdin.take().unwrap();
        stdin.write_all(input).unwrap();
        stdin.flush().unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(s) = p.try_wait().unwrap() {
                break s;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "complete={complete}: still waiting on an open stdin"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(stdin);
        let (mut out, mut err) = (String::new(), String::new());
        p.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        p.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        if complete {
            assert_eq!(status.code(), Some(0), "{err}");
            assert!(out.contains("\"deny\""), "judged: {out}");
            assert!(started.elapsed() < Duration::from_secs(5));
        } else {
            assert_eq!(status.code(), Some(1), "fails open: {err}");
            assert!(err.contains("not complete within"), "{err}");
            assert!(started.elapsed() >= Duration::from_secs(9));
        }
    }
}

/// A caller's tiny stack limit (`ulimit -s 16`, 16 KiB) killed the binary silently; now the
/// work runs on a stack of loopgate's own and the call is judged: a repeat is still refused.
#[cfg(unix)]
#[test]
fn a_tiny_stack_limit_still_judges() {
    let env = Env::new();
    let run = |payload: &serde_json::Value, sub: &str| {
        let mut c = crate::faults::std_command(
            &env,
            "sh",
            &[
                "-c",
                "ulimit -s 16 && exec \"$0\" \"$@\"",
                crate::common::BIN,
                sub,
            ],
        );
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.to_string().as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let input = json!({"command": "cargo build --offline"});
    let mut denied = false;
    for k in 0..4 {
        let id = format!("small-{k}");
        let pre = env.base(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id}),
        );
        let out = run(&pre, "pre-tool-use");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "killed or failed: {stderr}");
        if String::from_utf8_lossy(&out.stdout).contains("\"deny\"") {
            denied = true;
            break;
        }
        let fail = env.base(
            "PostToolUseFailure",
            json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id,
                   "error": "error: no matching package named `serde` found"}),
        );
        assert_eq!(run(&fail, "post-tool-use-failure").status.code(), Some(0));
    }
    assert!(
        denied,
        "the repeat under a 16 KiB stack limit was not judged"
    );
}

/// Issue 38: input that is valid JSON but no object is named for what it is, not for the first
/// field serde wanted.
#[test]
fn json_that_is_no_object_is_named_for_what_it_is() {
    let env = Env::new();
    for (input, kind) in [
        (&b"[1,2,3]"[..], "a JSON array"),
        (b" \"pre-tool-use\"\n", "a JSON string"),
        (b"42", "a number"),
        (b"null", "null"),
    ] {
        let out = env.run(&["pre-tool-use"], input);
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(out.stderr.contains(kind), "{:?}: {}", kind, out.stderr);
        assert!(!out.stderr.contains("expected a string"), "{}", out.stderr);
    }
}

/// Issue 38: a writer that sends the object, then its trailing newline a moment later, must
/// never meet a closed pipe: loopgate reads its input to the end (seen 5 times in 9 from a
/// Python writer before).
#[test]
fn stdin_is_read_to_its_end_so_a_late_newline_meets_no_closed_pipe() {
    use std::io::Write;
    let env = Env::new();
    let payload = env
        .base(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"}),
        )
        .to_string();
    for _ in 0..5 {
        let mut child = env
            .std_command(&["pre-tool-use"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(payload.as_bytes()).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        let late = stdin.write_all(b"\n").and_then(|_| stdin.flush());
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(late.is_ok(), "the late newline met a closed pipe: {late:?}");
        assert_eq!(out.status.code(), Some(0));
    }
}
