//! `loopgate demo`: a short real loop through the real binary, in a throw-away directory.
//!
//! Each step is this executable run as the hook Claude Code would run, with the payload Claude
//! Code would send, so what is shown is exactly what an agent would see. The children get a
//! temporary HOME, state dir and empty config, and nothing of the caller's environment but PATH:
//! the demo neither reads nor writes anything of the user's.

use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const SESSION: &str = "demo-session";
const COMMAND: &str = "pytest tests/test_login.py";
const FAILURE: &str =
    "Exit code 1\nFAILED tests/test_login.py::test_login - assert 401 == 200\n1 failed in 0.12s";
/// More than any default threshold needs: the loop ends with the first denial.
const MAX_TRIES: usize = 6;

struct Sandbox {
    exe: PathBuf,
    root: tempfile::TempDir,
}

impl Sandbox {
    fn state(&self) -> PathBuf {
        self.root.path().join("state")
    }

    fn project(&self) -> PathBuf {
        self.root.path().join("project")
    }

    /// Runs this binary with `args`, `stdin` on its stdin, in the sandbox only.
    fn run(&self, args: &[&str], stdin: &str) -> Result<(bool, String, String)> {
        let home = self.root.path().join("home");
        let mut cmd = Command::new(&self.exe);
        cmd.env_clear()
            .env("HOME", &home)
            .env("USERPROFILE", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("LOOPGATE_STATE_DIR", self.state())
            .env("CLAUDE_PROJECT_DIR", self.project())
            .env("CLAUDE_CODE_SESSION_ATTENDED", "0")
            .current_dir(self.project())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        if let Some(root) = std::env::var_os("SYSTEMROOT") {
            cmd.env("SYSTEMROOT", root);
        }
        let mut child = cmd.spawn().context("cannot run loopgate for the demo")?;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(stdin.as_bytes())?;
        let out = child.wait_with_output()?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// One hook call; its JSON answer, if any.
    fn hook(&self, sub: &str, event: &str, extra: Value) -> Result<Option<Value>> {
        let mut p = json!({
            "session_id": SESSION,
            "transcript_path": self.root.path().join("transcript.jsonl"),
            "cwd": self.project(),
            "permission_mode": "default",
            "hook_event_name": event,
        });
        for (k, v) in extra.as_object().expect("an object") {
            p[k] = v.clone();
        }
        let config = self.root.path().join("config.toml");
        let config = config
            .to_str()
            .context("a temporary path that is not UTF-8")?;
        let state = self.state();
        let state = state
            .to_str()
            .context("the demo's state dir is not UTF-8")?;
        let (ok, stdout, stderr) = self.run(
            &["--state-dir", state, "--config", config, sub],
            &p.to_string(),
        )?;
        anyhow::ensure!(ok, "the {sub} hook failed: {}", stderr.trim());
        if stdout.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&stdout)
            .map(Some)
            .with_context(|| format!("the {sub} hook answered {stdout:?}"))
    }
}

/// What the agent saw, step by step.
pub struct Played {
    pub lines: Vec<String>,
    /// The same steps as data, for `--json`.
    pub steps: Vec<Value>,
    pub denied: bool,
    pub status: String,
}

/// Plays the loop in a throw-away directory that is gone when this returns.
/// `as_json`: the status afterwards as `status --json` prints it.
pub fn play(as_json: bool) -> Result<Played> {
    let root = tempfile::Builder::new()
        .prefix("loopgate-demo-")
        .tempdir()
        .context("cannot make a temporary directory for the demo")?;
    let sandbox = Sandbox {
        exe: std::env::current_exe().context("cannot find this executable")?,
        root,
    };
    std::fs::create_dir_all(sandbox.project())?;
    std::fs::write(sandbox.root.path().join("config.toml"), "")?;
    let mut lines = Vec::new();
    let mut steps = Vec::new();
    let prompt = "make the login test pass";
    sandbox.hook(
        "user-prompt-submit",
        "UserPromptSubmit",
        json!({"prompt": prompt, "prompt_id": "p1"}),
    )?;
    lines.push(format!("you: \"{prompt}\""));
    steps.push(json!({"prompt": prompt}));
    let mut denied = false;
    for n in 1..=MAX_TRIES {
        let id = format!("toolu_demo_{n}");
        let input = json!({"command": COMMAND, "description": "Run the login test"});
        let call =
            json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id, "prompt_id": "p1"});
        lines.push(format!("call {n}  Bash  {COMMAND}"));
        let pre = sandbox.hook("pre-tool-use", "PreToolUse", call.clone())?;
        let hso = pre.as_ref().map(|v| &v["hookSpecificOutput"]);
        if hso.is_some_and(|h| h["permissionDecision"] == "deny") {
            let reason = hso.and_then(|h| h["permissionDecisionReason"].as_str());
            lines
                .push("        DENIED by loopgate; instead of running it, the agent reads:".into());
            quote(&mut lines, reason.unwrap_or(""));
            steps.push(json!({"call": n, "tool": "Bash", "command": COMMAND, "denied": true, "agent_reads": reason}));
            let text = format!("PreToolUse:Bash hook error: {}", reason.unwrap_or(""));
            batch(&sandbox, &input, &id, &text)?;
            denied = true;
            break;
        }
        lines.push(format!(
            "        ran: {}",
            FAILURE.lines().nth(1).unwrap_or(FAILURE)
        ));
        let mut failed = call.clone();
        failed["error"] = json!(FAILURE);
        failed["is_interrupt"] = json!(false);
        let post = sandbox.hook("post-tool-use-failure", "PostToolUseFailure", failed)?;
        let note = post
            .as_ref()
            .and_then(|v| v["hookSpecificOutput"]["additionalContext"].as_str());
        if let Some(ctx) = note {
            lines.push("        loopgate adds a note for the agent:".into());
            quote(&mut lines, ctx);
        }
        steps.push(json!({"call": n, "tool": "Bash", "command": COMMAND, "denied": false, "failed": true, "note": note}));
        batch(&sandbox, &input, &id, FAILURE)?;
    }
    let args: &[&str] = if as_json {
        &["status", "--session", SESSION, "--json"]
    } else {
        &["status", "--session", SESSION]
    };
    let (ok, status, stderr) = sandbox.run(args, "")?;
    anyhow::ensure!(ok, "status failed: {}", stderr.trim());
    Ok(Played {
        lines,
        steps,
        denied,
        status,
    })
}

/// `text` as indented quoted lines of at most about 80 columns.
fn quote(lines: &mut Vec<String>, text: &str) {
    for para in text.lines() {
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && line.len() + word.len() > 72 {
                lines.push(format!("        | {}", std::mem::take(&mut line)));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(format!("        | {line}"));
    }
}

fn batch(sandbox: &Sandbox, input: &Value, id: &str, text: &str) -> Result<()> {
    sandbox.hook(
        "post-tool-batch",
        "PostToolBatch",
        json!({"prompt_id": "p1", "tool_calls": [{"tool_name": "Bash", "tool_input": input, "tool_use_id": id, "tool_response": text}]}),
    )?;
    Ok(())
}

/// `loopgate demo`.
pub fn run(as_json: bool) -> Result<bool> {
    let start = std::time::Instant::now();
    let played = play(as_json)?;
    if as_json {
        let status: Value = serde_json::from_str(&played.status).unwrap_or(Value::Null);
        let doc = json!({
            "steps": played.steps,
            "denied": played.denied,
            "status": status,
            "took_ms": start.elapsed().as_millis() as u64,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(played.denied);
    }
    println!("loopgate demo: an agent runs the same failing test again and again.");
    println!("Each step below is this binary run as the Claude Code hook, in a throw-away");
    println!("directory; nothing of yours is read or written.\n");
    for l in &played.lines {
        println!("  {l}");
    }
    println!("\n`loopgate status` afterwards:\n");
    for l in played.status.lines() {
        println!("  {l}");
    }
    println!(
        "\nThe demo took {} ms. To wire loopgate into Claude Code: `loopgate setup`, then `loopgate doctor`.",
        start.elapsed().as_millis()
    );
    if !played.denied {
        eprintln!(
            "loopgate: the demo's loop was not denied; is a config making loopgate observe only?"
        );
    }
    Ok(played.denied)
}
