//! A small builder over a temp dir: a state dir, a project dir (optionally a git repo), and helpers
//! that drive the real binary with hook payloads the way Claude Code does.

#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_loopgate");

/// The keys every events.jsonl line promises.
pub const EVENT_KEYS: [&str; 12] = [
    "ts",
    "session",
    "agent",
    "prompt_id",
    "event",
    "tool",
    "detector",
    "decision",
    "enforced",
    "severity",
    "reason",
    "evidence",
];

pub struct Env {
    _dir: TempDir,
    pub state: PathBuf,
    pub project: PathBuf,
    pub session: String,
    pub prompt: String,
    pub vars: Vec<(String, String)>,
    /// The `transcript_path` every payload names.
    pub transcript: String,
    /// Options before every hook subcommand (`--plugin ROOT`, as the plugin's wrapper passes).
    pub hook_options: Vec<String>,
    next_id: std::cell::Cell<u32>,
}

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", self.stdout))
    }

    pub fn is_silent_allow(&self) -> bool {
        self.code == 0 && self.stdout.is_empty()
    }

    pub fn denied(&self) -> bool {
        self.code == 0
            && !self.stdout.is_empty()
            && self.json()["hookSpecificOutput"]["permissionDecision"] == "deny"
    }

    pub fn context(&self) -> Option<String> {
        if self.stdout.is_empty() {
            return None;
        }
        self.json()["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .map(String::from)
    }

    pub fn stop_blocked(&self) -> bool {
        self.code == 0 && !self.stdout.is_empty() && self.json()["decision"] == "block"
    }
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        Env {
            state,
            project,
            _dir: dir,
            session: "sess-1".into(),
            prompt: "prompt-1".into(),
            vars: vec![("CLAUDE_CODE_SESSION_ATTENDED".into(), "0".into())],
            transcript: "/dev/null".into(),
            hook_options: Vec::new(),
            next_id: std::cell::Cell::new(0),
        }
    }

    /// Makes the project a git repo with one commit.
    pub fn git(self) -> Env {
        let repo = git2::Repository::init(&self.project).unwrap();
        std::fs::write(self.project.join("README.md"), "hello\n").unwrap();
        commit_all(&repo, "init");
        self
    }

    pub fn var(mut self, k: &str, v: &str) -> Env {
        self.vars.retain(|(key, _)| key != k);
        self.vars.push((k.into(), v.into()));
        self
    }

    /// Writes the user config file (a project file may only tighten: see `project_config`).
    pub fn config(self, toml: &str) -> Env {
        let dir = self.state.parent().unwrap().join("xdg").join("loopgate");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), toml).unwrap();
        self
    }

    /// Writes the project's `.claude/loopgate.toml`.
    pub fn project_config(self, toml: &str) -> Env {
        let dir = self.project.join(".claude");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("loopgate.toml"), toml).unwrap();
        self
    }

    pub fn new_prompt(&mut self, id: &str) -> Out {
        self.prompt_with(id, "do the task")
    }

    /// A new user prompt with its text (outer loops send the same text turn after turn).
    pub fn prompt_with(&mut self, id: &str, text: &str) -> Out {
        self.prompt = id.into();
        let p = self.base("UserPromptSubmit", json!({ "prompt": text }));
        self.hook("user-prompt-submit", &p)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        Command::from_std(self.std_command(args))
    }

    /// [`Env::command`] as a plain `std` command (for a test that holds stdin open).
    /// `args` with `--state-dir` added where a hook or the status line needs it: they take the
    /// state dir from their command line only, never from `LOOPGATE_STATE_DIR` (a settings file's
    /// `env` reaches them), so the dir goes where setup's hook command would put it.
    pub fn hook_args(&self, args: &[&str]) -> Vec<String> {
        let state = self
            .vars
            .iter()
            .find(|(k, _)| k == "LOOPGATE_STATE_DIR")
            .map_or_else(|| self.state.display().to_string(), |(_, v)| v.clone());
        let mut out: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if args.iter().any(|a| a.starts_with("--state-dir")) {
            return out;
        }
        if let Some(i) = args.iter().position(|a| is_hook(a)) {
            out.splice(i..i, ["--state-dir".to_string(), state]);
        } else if args.contains(&"statusline") {
            out.extend(["--state-dir".to_string(), state]);
        }
        out
    }

    pub fn std_command(&self, args: &[&str]) -> std::process::Command {
        let args = self.hook_args(args);
        let mut c = std::process::Command::new(BIN);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.state.parent().unwrap())
            .env("XDG_CONFIG_HOME", self.state.parent().unwrap().join("xdg"))
            .env("LOOPGATE_STATE_DIR", &self.state)
            .env("CLAUDE_PROJECT_DIR", &self.project)
            .current_dir(&self.project)
            .args(&args);
        for (k, v) in &self.vars {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str], stdin: &[u8]) -> Out {
        let o = self
            .command(args)
            .write_stdin(stdin.to_vec())
            .output()
            .unwrap();
        let out = Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        assert_ne!(out.code, 2, "loopgate must never exit 2: {}", out.stderr);
        out
    }

    pub fn hook(&self, sub: &str, payload: &Value) -> Out {
        let mut args: Vec<&str> = self.hook_options.iter().map(String::as_str).collect();
        args.push(sub);
        self.run(&args, payload.to_string().as_bytes())
    }

    /// Hooks run in observe mode, as setup's `--observe` writes them.
    pub fn observe(mut self) -> Env {
        self.hook_options.push("--observe".into());
        self
    }

    /// Hooks run as Claude Code's plugin installed at `root`: the wrapper's `--plugin ROOT`.
    pub fn plugin(mut self, root: &Path) -> Env {
        self.hook_options = vec!["--plugin".into(), root.display().to_string()];
        self
    }

    pub fn base(&self, event: &str, extra: Value) -> Value {
        let mut p = json!({
            "session_id": self.session,
            "transcript_path": self.transcript,
            "cwd": self.project,
            "prompt_id": self.prompt,
            "permission_mode": "bypassPermissions",
            "hook_event_name": event,
        });
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    }

    pub fn id(&self) -> String {
        let n = self.next_id.get() + 1;
        self.next_id.set(n);
        format!("toolu_t_{n}")
    }

    pub fn pre(&self, tool: &str, input: Value, id: &str) -> Out {
        let p = self.base(
            "PreToolUse",
            json!({"tool_name": tool, "tool_input": input, "tool_use_id": id}),
        );
        self.hook("pre-tool-use", &p)
    }

    pub fn post(&self, tool: &str, input: Value, id: &str, response: Value) -> Out {
        let p = self.base(
            "PostToolUse",
            json!({"tool_name": tool, "tool_input": input, "tool_use_id": id, "tool_response": response}),
        );
        self.hook("post-tool-use", &p)
    }

    pub fn fail(&self, tool: &str, input: Value, id: &str, error: &str) -> Out {
        let p = self.base(
            "PostToolUseFailure",
            json!({"tool_name": tool, "tool_input": input, "tool_use_id": id, "error": error, "is_interrupt": false}),
        );
        self.hook("post-tool-use-failure", &p)
    }

    /// One Bash call end to end, as its own model turn: Pre, then (unless denied) its Post, then
    /// the PostToolBatch. Returns the Pre answer.
    pub fn bash(&self, command: &str, result: Result<&str, &str>) -> Out {
        let id = self.id();
        let input = json!({"command": command, "description": "run"});
        let pre = self.pre("Bash", input.clone(), &id);
        if pre.denied() {
            self.batch_of("Bash", &input, &id, &denial_text("Bash", &pre));
            return pre;
        }
        let post = match result {
            Ok(out) => self.post(
                "Bash",
                input.clone(),
                &id,
                json!({"stdout": out, "stderr": "", "interrupted": false, "isImage": false}),
            ),
            Err(err) => self.fail("Bash", input.clone(), &id, err),
        };
        assert_eq!(post.code, 0, "{}", post.stderr);
        self.batch_of("Bash", &input, &id, result.unwrap_or_else(|e| e));
        pre
    }

    /// The PostToolBatch that closes a model turn of one call; `text` is what the model saw.
    pub fn batch_of(&self, tool: &str, input: &Value, id: &str, text: &str) -> Out {
        let p = self.base(
            "PostToolBatch",
            json!({"tool_calls": [{"tool_name": tool, "tool_input": input, "tool_use_id": id, "tool_response": text}]}),
        );
        let out = self.hook("post-tool-batch", &p);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out
    }

    /// A successful Edit of a file in the project (written to disk, as the real tool does).
    pub fn edit(&self, file: &str, content: &str) -> Out {
        self.edit_from(file, "a", content)
    }

    /// A successful Edit replacing `old` with `new`; the file on disk holds `new` afterwards.
    pub fn edit_from(&self, file: &str, old: &str, content: &str) -> Out {
        let path = self.project.join(file);
        let input = json!({"file_path": path, "old_string": old, "new_string": content, "replace_all": false});
        let id = self.id();
        let pre = self.pre("Edit", input.clone(), &id);
        if pre.denied() {
            return pre;
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        self.post(
            "Edit",
            input,
            &id,
            json!({"filePath": path, "oldString": old, "newString": content}),
        )
    }

    /// An Edit Claude Code rejected before running (old_string not found): only the batch sees it.
    pub fn rejected_edit(&self, file: &str, old: &str) -> Out {
        let input = json!({"replace_all": false, "file_path": self.project.join(file), "old_string": old, "new_string": "x"});
        let p = self.base(
            "PostToolBatch",
            json!({"tool_calls": [{"tool_name": "Edit", "tool_input": input, "tool_use_id": self.id(),
                "tool_response": format!("<tool_use_error>String to replace not found in file.\nString: {old}</tool_use_error>")}]}),
        );
        self.hook("post-tool-batch", &p)
    }

    pub fn stop(&self, active: bool) -> Out {
        let p = self.base(
            "Stop",
            json!({"stop_hook_active": active, "last_assistant_message": "Done.", "background_tasks": []}),
        );
        self.hook("stop", &p)
    }

    pub fn status(&self) -> Value {
        let out = self.run(&["status", "--json"], b"");
        assert_eq!(out.code, 0, "{}", out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// The session's state file (there is one session per `Env`).
    pub fn state_file(&self) -> PathBuf {
        self.session_file("state")
    }

    pub fn lock_file(&self) -> PathBuf {
        self.session_file("lock")
    }

    fn session_file(&self, ext: &str) -> PathBuf {
        std::fs::read_dir(self.state.join("sessions"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == ext))
            .unwrap_or_else(|| panic!("no .{ext} file in the state dir"))
    }

    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.state.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Every file under the temp dir, to prove nothing was written outside the state dir.
    pub fn files_outside_state(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        walk(self.state.parent().unwrap(), &mut out);
        out.into_iter()
            .filter(|p| !p.starts_with(&self.state) && !p.starts_with(&self.project))
            .collect()
    }
}

/// The tool_result text Claude Code gives the model for a hook denial.
pub fn denial_text(tool: &str, pre: &Out) -> String {
    let reason = pre.json()["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    format!("PreToolUse:{tool} hook error: {reason}")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

pub fn commit_all(repo: &git2::Repository, msg: &str) {
    let mut idx = repo.index().unwrap();
    idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    idx.write().unwrap();
    let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &parents)
        .unwrap();
}

pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A hook subcommand (its state dir comes from its command line), as the binary reads one.
fn is_hook(word: &str) -> bool {
    loopgate::hook_cli(std::iter::once(std::ffi::OsString::from(word))).is_some()
}
