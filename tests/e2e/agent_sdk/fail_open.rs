//! The helpers fail open on loopgate's own faults: no binary, a crash, output that is not JSON,
//! a hang past the timeout (killed with what it started) each answer `{}`, letting the call go
//! ahead, with one line on stderr and nothing thrown or raised; a JSON answer is passed on as
//! it is. Each helper's PreToolUse callback is called directly, without an SDK session.

use super::super::claude_cli::repo_root;
use super::host::{require, Sdk};
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Fake binaries, by what they do, in a temp dir; the missing one is not there at all.
fn fakes(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let script = |name: &str, body: &str| {
        let p = dir.join(name);
        fs::write(&p, format!("#!/bin/sh\ncat >/dev/null\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    vec![
        ("missing", dir.join("no-such-loopgate")),
        ("crash", script("crash", "echo boom >&2; exit 3")),
        ("garbage", script("garbage", "echo 'not json'")),
        ("hang", script("hang", "sleep 30 & sleep 30")),
        (
            "deny",
            script(
                "deny",
                r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"loopgate: no"}}'"#,
            ),
        ),
    ]
}

const TS: &str = r#"
const { loopgateHooks } = require(process.env.HELPER);
const hooks = loopgateHooks({ bin: process.env.FAKE, timeout: 1 });
const input = { session_id: "s1", transcript_path: "/dev/null", cwd: process.cwd(),
  hook_event_name: "PreToolUse", tool_name: "Bash", tool_input: { command: "true" } };
hooks.PreToolUse[0].hooks[0](input, "toolu_1", { signal: new AbortController().signal })
  .then((a) => console.log(JSON.stringify(a)), (e) => console.log("THREW " + e));
"#;

const PY: &str = r#"
import asyncio, json, os
from loopgate_agent_sdk import loopgate_hooks
hooks = loopgate_hooks(bin=os.environ["FAKE"], timeout=1)
data = {"session_id": "s1", "transcript_path": "/dev/null", "cwd": os.getcwd(),
        "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "true"}}
print(json.dumps(asyncio.run(hooks["PreToolUse"][0].hooks[0](data, "toolu_1", None))))
"#;

fn check(sdk: Sdk, program: &Path, args: &[&str], env: &[(&str, String)]) {
    let tmp = tempfile::tempdir().unwrap();
    for (what, fake) in fakes(tmp.path()) {
        let started = Instant::now();
        let out = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("FAKE", &fake)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(tmp.path())
            .stdin(Stdio::null())
            .output()
            .expect("run the helper");
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let ctx = format!("{sdk:?} {what}: stdout {stdout:?} stderr {stderr:?}");
        assert!(out.status.success(), "{ctx}");
        let answer: Value = serde_json::from_str(stdout.trim()).expect(&ctx);
        if what == "deny" {
            assert_eq!(
                answer["hookSpecificOutput"]["permissionDecision"], "deny",
                "{ctx}"
            );
            assert!(!stderr.contains("goes ahead unchecked"), "{ctx}");
        } else {
            assert_eq!(answer, json!({}), "{ctx}");
            let warned: Vec<&str> = stderr
                .lines()
                .filter(|l| l.starts_with("loopgate: ") && l.ends_with("goes ahead unchecked"))
                .collect();
            assert_eq!(warned.len(), 1, "one line on stderr; {ctx}");
        }
        assert!(took < Duration::from_secs(10), "{ctx}: took {took:?}");
    }
}

#[test]
fn e2e_agent_sdk_ts_helper_fails_open() {
    // Needs node only; the SDK's install is the skip policy's proxy for it.
    if require(Sdk::TypeScript).is_none() {
        return;
    }
    let helper = repo_root().join("npm/loopgate/agent-sdk.js");
    let env = [("HELPER", helper.display().to_string())];
    check(Sdk::TypeScript, Path::new("node"), &["-e", TS], &env);
}

#[test]
fn e2e_agent_sdk_py_helper_fails_open() {
    let Some(dir) = require(Sdk::Python) else {
        return;
    };
    let env = [(
        "PYTHONPATH",
        repo_root().join("python").display().to_string(),
    )];
    check(Sdk::Python, &dir.join("bin/python"), &["-c", PY], &env);
}
