//! loopgate's OpenCode/Kilo plugin under Node, without OpenCode: the file `loopgate setup --agent
//! opencode` writes, loaded as OpenCode loads it (its exported function called with a `client`),
//! running a stand-in for the binary that answers each way the real one can, or fails. The real
//! CLIs are in `e2e::agents`; this covers the answers and faults a scripted model cannot provoke.
//! Skipped (with a line on stderr) where `node` is not on PATH.

use std::fs;
use std::path::Path;
use std::process::Command;

/// Calls the plugin's `tool.execute.before` and `tool.execute.after` once, as OpenCode does, and
/// prints what came of it: the thrown message, the sessions aborted, the tool output after it.
const HARNESS: &str = r#"
const { LoopgatePlugin } = await import(process.argv[2])
const aborted = []
const client = { session: { abort: async ({ path }) => { aborted.push(path.id); return { data: true } } } }
const hooks = await LoopgatePlugin({ client, directory: process.cwd() })
const call = { tool: "bash", sessionID: "ses_1", callID: "call_1" }
let thrown = null
try {
  await hooks["tool.execute.before"](call, { args: { command: "npm test" } })
} catch (e) {
  thrown = e.message
}
const after = { title: "npm test", output: "1 failing", metadata: { exit: 1 } }
if (thrown === null) await hooks["tool.execute.after"]({ ...call, args: { command: "npm test" } }, after)
console.log(JSON.stringify({ thrown, aborted, output: after.output }))
"#;

/// The stand-in binary: answers on `pre-tool-use` or `post-tool-use` as `$MODE` says.
const STAND_IN: &str = r#"#!/bin/sh
cat > /dev/null
for sub; do :; done
case "$MODE:$sub" in
  deny:pre-tool-use) echo '{"decision":"deny","reason":"loopgate: not again"}' ;;
  halt:pre-tool-use) echo '{"decision":"halt","reason":"loopgate: the turn is over","message":"loopgate ended this run"}' ;;
  context:post-tool-use) echo '{"context":"loopgate: the same failure again"}' ;;
  crash:pre-tool-use) echo 'thread main panicked' >&2; exit 101 ;;
  garbage:pre-tool-use) echo 'not json' ;;
esac
exit 0
"#;

struct Outcome {
    thrown: Option<String>,
    aborted: Vec<String>,
    output: String,
    stderr: String,
}

fn run(plugin: &Path, dir: &Path, mode: &str) -> Outcome {
    let harness = dir.join("harness.mjs");
    fs::write(&harness, HARNESS).unwrap();
    let out = Command::new("node")
        .arg(&harness)
        .arg(plugin)
        .env("MODE", mode)
        .current_dir(dir)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{mode}: node failed\n{stdout}\n{stderr}"
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{mode}: {e}: {stdout}\n{stderr}"));
    Outcome {
        thrown: v["thrown"].as_str().map(str::to_string),
        aborted: serde_json::from_value(v["aborted"].clone()).unwrap(),
        output: v["output"].as_str().unwrap_or_default().to_string(),
        stderr,
    }
}

#[test]
fn the_plugin_carries_out_each_answer_and_fails_open() {
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("SKIP opencode_plugin: node is not on PATH");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let bin = home.join("stand-in");
    fs::write(&bin, STAND_IN).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let setup = Command::new(env!("CARGO_BIN_EXE_loopgate"))
        .args(["setup", "--agent", "opencode", "--bin"])
        .arg(&bin)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .output()
        .unwrap();
    assert!(setup.status.success(), "{setup:?}");
    // Node reads it as a module by its extension.
    let plugin = home.join("loopgate.mjs");
    fs::copy(home.join("xdg/opencode/plugins/loopgate.js"), &plugin).unwrap();

    // A refusal is thrown with loopgate's reason, which the model reads; nothing is aborted.
    let o = run(&plugin, home, "deny");
    assert_eq!(o.thrown.as_deref(), Some("loopgate: not again"));
    assert!(o.aborted.is_empty());

    // The ceiling: the session is aborted, the person told, and the call refused.
    let o = run(&plugin, home, "halt");
    assert_eq!(o.thrown.as_deref(), Some("loopgate: the turn is over"));
    assert_eq!(o.aborted, ["ses_1"]);
    assert!(o.stderr.contains("loopgate ended this run"), "{}", o.stderr);

    // Guidance is appended to the tool's output.
    let o = run(&plugin, home, "context");
    assert_eq!(o.thrown, None);
    assert_eq!(o.output, "1 failing\n\nloopgate: the same failure again");

    // Nothing to say: the call and its output are untouched.
    let o = run(&plugin, home, "quiet");
    assert_eq!((o.thrown, o.output.as_str()), (None, "1 failing"));

    // Our own faults fail open, with the reason on stderr.
    let o = run(&plugin, home, "crash");
    assert_eq!(o.thrown, None, "a crash lets the call go ahead");
    assert!(o.stderr.contains("panicked"), "{}", o.stderr);
    let o = run(&plugin, home, "garbage");
    assert_eq!(
        o.thrown, None,
        "an answer that is not JSON lets the call go ahead"
    );
    assert!(
        o.stderr.contains("answered no JSON") && o.stderr.contains("the call goes ahead"),
        "{}",
        o.stderr
    );
}
