//! No input can make a hook hang or balloon: a 63 MB tool result, a 63 MB batch, and import
//! targets that are a FIFO, a symlink to /dev/zero or a 1 GB file. Each hook runs as a child
//! limited to 64 MiB of address space (`ulimit -v`), under a watchdog. The bounds are generous on
//! purpose — a hang or a balloon breaks them, ordinary speed never does (speed is the benchmark's
//! business).

use crate::common::{Env, BIN};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address space a hook may use, in KiB.
const LIMIT_KIB: u64 = 64 << 10;
/// A hook that has not finished by then is hung.
const WATCHDOG: Duration = Duration::from_secs(20);

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs one hook as `env` would, under the memory limit and the watchdog.
fn limited(env: &Env, sub: &str, stdin: Vec<u8>) -> Ran {
    let std_cmd = env.command(&[sub]);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {LIMIT_KIB} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(env.hook_args(&[sub]))
        .env_clear();
    for (k, v) in std_cmd.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.current_dir(&env.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // The hook may stop reading early (too large): a broken pipe is fine.
        let _ = input.write_all(&stdin);
    });
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`loopgate {sub}` still running after {WATCHDOG:?}: hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn payload(env: &Env, event: &str, extra: Value) -> Vec<u8> {
    env.base(event, extra).to_string().into_bytes()
}

const MB63: usize = 63_000_000;

/// A payload with `big` spliced in raw where `"@BIG@"` stands: built by hand, since serialising
/// 63 MB through serde_json in a debug test binary takes seconds.
fn with_big(env: &Env, event: &str, extra: Value, big: &[u8]) -> Vec<u8> {
    let text = env.base(event, extra).to_string();
    let (head, tail) = text.split_once("\"@BIG@\"").expect("placeholder");
    let mut out = Vec::with_capacity(head.len() + big.len() + tail.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(big);
    out.extend_from_slice(tail.as_bytes());
    out
}

#[test]
fn a_63_mb_tool_result_is_judged_in_bounded_memory() {
    let env = Env::new();
    let input = json!({"query": "everything"});
    let response = format!("\"{}\"", "row 42: the same answer. ".repeat(MB63 / 25)).into_bytes();
    let mut denied = false;
    for n in 0..8 {
        let id = format!("big-{n}");
        let pre = limited(
            &env,
            "pre-tool-use",
            payload(
                &env,
                "PreToolUse",
                json!({"tool_name": "mcp__db__dump", "tool_input": input, "tool_use_id": id}),
            ),
        );
        assert_eq!(pre.code, Some(0), "{}", pre.stderr);
        if pre.stdout.contains("\"deny\"") {
            denied = true;
            break;
        }
        let post = limited(
            &env,
            "post-tool-use",
            with_big(
                &env,
                "PostToolUse",
                json!({"tool_name": "mcp__db__dump", "tool_input": input, "tool_use_id": id, "tool_response": "@BIG@"}),
                &response,
            ),
        );
        assert!(
            post.code == Some(0) && post.stderr.is_empty(),
            "post {n}: {}",
            post.stderr
        );
    }
    // The same 63 MB answer again and again with nothing changed: the call is denied, so the big
    // results were still told apart and compared, not skipped.
    assert!(denied, "the repeated 63 MB answer was never recognised");
}

#[test]
fn a_63_mb_batch_is_judged_in_bounded_memory_and_the_log_stays_bounded() {
    let env = Env::new().config("[log]\nmax_bytes = 65536\n");
    // 60 large results of calls no tool hook saw, then a thousand calls Claude Code rejected
    // before they ran: every one of those is judged, and the warnings they cause are logged.
    let big = "y".repeat(1_000_000);
    let mut calls = Vec::with_capacity(MB63 + (1 << 20));
    calls.push(b'[');
    let mut i = 0;
    while calls.len() < MB63 {
        if i > 0 {
            calls.push(b',');
        }
        let path = Value::from(env.project.join(format!("f{}.py", i % 7)).to_str().unwrap());
        let response = if i < 60 {
            big.as_str()
        } else {
            "<tool_use_error>String to replace not found in file.</tool_use_error>"
        };
        let call = format!(
            r#"{{"tool_name":"Edit","tool_input":{{"file_path":{path},"old_string":"x{i}","new_string":"y"}},"tool_use_id":"c-{i}","tool_response":"{response}"}}"#
        );
        calls.extend_from_slice(call.as_bytes());
        i += 1;
        if i == 60 {
            // Pad the rest of the 63 MB with rejected calls.
            while calls.len() < MB63 - 2_000_000 {
                calls.extend_from_slice(format!(r#",{{"tool_name":"Bash","tool_input":{{"command":"true"}},"tool_use_id":"pad-{}","tool_response":"{}"}}"#, calls.len(), &big[..900_000]).as_bytes());
            }
        }
        if i > 1100 {
            break;
        }
    }
    calls.push(b']');
    let bytes = with_big(
        &env,
        "PostToolBatch",
        json!({ "tool_calls": "@BIG@" }),
        &calls,
    );
    assert!(bytes.len() > 60_000_000, "{}", bytes.len());
    for _ in 0..2 {
        let out = limited(&env, "post-tool-batch", bytes.clone());
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let events = std::fs::read_to_string(env.state.join("events.jsonl")).unwrap();
    assert!(
        events.contains("\"event\":\"PostToolBatch\""),
        "the batch was not judged: {events}"
    );
    let log = events.len();
    assert!(log <= 65536, "events.jsonl is {log} bytes");
    if let Ok(m) = std::fs::metadata(env.state.join("events.jsonl.1")) {
        assert!(m.len() <= 65536, "events.jsonl.1 is {} bytes", m.len());
    }
}

#[cfg(unix)]
#[test]
fn hostile_import_targets_neither_hang_nor_balloon() {
    let env = Env::new();
    let p = &env.project;
    std::fs::write(
        p.join("a.py"),
        "import zero\nimport fifo\nimport big\nimport pagemap\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/dev/zero", p.join("zero.py")).unwrap();
    std::os::unix::fs::symlink("/proc/self/pagemap", p.join("pagemap.py")).unwrap();
    assert!(Command::new("mkfifo")
        .arg(p.join("fifo.py"))
        .status()
        .unwrap()
        .success());
    std::fs::File::create(p.join("big.py"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let input =
        json!({"file_path": p.join("a.py"), "old_string": "import", "new_string": "import"});
    let out = limited(
        &env,
        "post-tool-use",
        payload(
            &env,
            "PostToolUse",
            json!({"tool_name": "Edit", "tool_input": input, "tool_use_id": "e1", "tool_response": {"filePath": p.join("a.py")}}),
        ),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    // The big file is an import target that exists as a regular file: imported by name, never
    // read whole.
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

/// An MCP input nested far past the JSON parser's own limit (128) is still judged: the deep part
/// is kept as a digest, so the same deep call repeated is refused like any other repeat, and a
/// deep call that differs only far down is a different call.
#[test]
fn deeply_nested_inputs_are_judged() {
    let env = Env::new();
    let deep = |leaf: u32| {
        let mut v = json!(leaf);
        for _ in 0..300 {
            v = json!({ "n": v });
        }
        json!({ "query": v })
    };
    let mut denied = false;
    for k in 0..8 {
        let id = format!("deep-{k}");
        let out = env.pre("mcp__db__query", deep(1), &id);
        assert_eq!(out.code, 0, "{}", out.stderr);
        if out.denied() {
            denied = true;
            break;
        }
        env.fail("mcp__db__query", deep(1), &id, "Error: connection refused");
    }
    assert!(denied, "the repeated deep call was never refused");
    let other = env.pre("mcp__db__query", deep(2), "deep-other");
    assert!(!other.denied(), "{}", other.stdout);
}
