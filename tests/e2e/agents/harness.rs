//! One scenario = a temp HOME with the CLI's offline config, a temp git project, loopgate's hooks
//! installed into that HOME, and one bounded headless run against `fake_llm.py`. The setup per CLI
//! is what `../shared/agents/harness/run_agent.py` does (the recipe every observation was made
//! with). Everything a run leaves is copied to `target/e2e-out/agents-<cli>-<scenario>/`.

use super::super::claude_cli::repo_root;
use super::super::harness::{git, kill_group, wait_bounded};
use super::super::run::read_jsonl;
use super::clis::{self, Cli};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A run takes 2–20 s (Qwen and Gemini start slowest; Qwen took 36 s at a load average of 15);
/// two minutes means something hangs, and the run is killed so the suite still ends.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Scenario {
    pub cli: Cli,
    pub name: String,
    pub home: PathBuf,
    pub project: PathBuf,
    pub state_dir: PathBuf,
    /// Outside the project: what scripted commands leave for the test to count.
    pub scratch: PathBuf,
    bin: PathBuf,
    env: Vec<(String, String)>,
    /// Whether the Codex hooks were trusted by `loopgate setup` (else the run passes Codex's
    /// trust bypass flag).
    codex_trusted: bool,
    /// Copilot's permission flags (`--allow-all` unless a test asks for less).
    copilot_allow: &'static [&'static str],
    /// Runs made so far (the first publishes to `target/e2e-out/<name>/`, later ones below it).
    runs: Cell<usize>,
    /// The session the last run left, as its output names it (Codex resumes it by id).
    last_session: RefCell<Option<String>>,
    root: TempDir,
}

/// What one run left behind, phrased as what the model saw.
pub struct Run {
    pub cli: Cli,
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub elapsed: Duration,
    pub stdout: String,
    pub stderr: String,
    /// Every request the fake model got (`fake_llm.py`'s log lines).
    pub requests: Vec<Value>,
    /// loopgate's `events.jsonl` (every run of the scenario so far).
    pub events: Vec<Value>,
    /// Where this run's own events start in `events`.
    pub first_event: usize,
}

impl Scenario {
    /// `None` when the CLI is unavailable and the test should be skipped.
    pub fn new(cli: Cli, name: &str) -> Option<Scenario> {
        let bin = clis::require(cli)?;
        // Under the system temp dir: Codex only warns there ("could not create PATH aliases"),
        // which changes nothing that is asserted here.
        let root = tempfile::Builder::new()
            .prefix(&format!("lg-e2e-{}-{name}-", cli.name()))
            .tempdir()
            .expect("scenario temp dir");
        let sub = |d: &str| {
            let p = root.path().join(d);
            fs::create_dir_all(&p).unwrap();
            p
        };
        let s = Scenario {
            cli,
            name: format!("agents-{}-{name}", cli.name()),
            home: sub("home"),
            project: sub("proj"),
            // Where the hooks keep it: their default under this HOME (a hook never takes
            // `LOOPGATE_STATE_DIR` from its environment, which a settings file can set).
            state_dir: root.path().join("home/.local/state/loopgate"),
            scratch: sub("scratch"),
            bin,
            env: Vec::new(),
            codex_trusted: false,
            copilot_allow: &["--allow-all"],
            runs: Cell::new(0),
            last_session: RefCell::new(None),
            root,
        };
        s.init_project();
        s.write_cli_config();
        Some(s)
    }

    /// Copilot runs with these permission flags instead of `--allow-all`.
    pub fn copilot_allow(&mut self, flags: &'static [&'static str]) {
        self.copilot_allow = flags;
    }

    /// An extra variable for the CLI and, through it, for the hooks.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.push((key.into(), value.into()));
    }

    fn init_project(&self) {
        fs::write(
            self.project.join("README.md"),
            "# demo\n\nA tiny project.\n",
        )
        .unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "."],
            &["commit", "-q", "-m", "initial"],
        ] {
            self.git(args);
        }
    }

    pub fn git(&self, args: &[&str]) -> String {
        git(&self.home, &self.project, args)
    }

    fn codex_home(&self) -> PathBuf {
        self.home.join(".codex")
    }

    fn copilot_home(&self) -> PathBuf {
        self.home.join(".copilot")
    }

    /// The file loopgate's hooks go into for this CLI (agents.md's table).
    pub fn hook_file(&self) -> PathBuf {
        match self.cli {
            Cli::Codex => self.codex_home().join("hooks.json"),
            Cli::Gemini => self.home.join(".gemini").join("settings.json"),
            Cli::Qwen => self.home.join(".qwen").join("settings.json"),
            Cli::Copilot => self.copilot_home().join("hooks").join("loopgate.json"),
            // Not a hook file: loopgate's plugin, which OpenCode's core loads from here.
            Cli::OpenCode | Cli::Kilo => self.plugin_config_dir().join("plugins/loopgate.js"),
        }
    }

    /// OpenCode's (or Kilo's) global config folder under this HOME.
    fn plugin_config_dir(&self) -> PathBuf {
        self.home.join(".config").join(self.cli.name())
    }

    /// The CLI's own offline configuration, written before loopgate is installed, so that the
    /// install has to merge into it as it would on a user's machine. The fake model's port is
    /// passed at run time (env, or `-c` for Codex).
    fn write_cli_config(&self) {
        match self.cli {
            Cli::Codex => {
                let cfg = "model = \"gpt-5.5\"\nmodel_provider = \"mock\"\n\n\
                           [model_providers.mock]\nname = \"mock\"\n\
                           base_url = \"http://127.0.0.1:9/v1\"\n\
                           env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n";
                fs::create_dir_all(self.codex_home()).unwrap();
                fs::write(self.codex_home().join("config.toml"), cfg).unwrap();
            }
            Cli::Gemini => write_json(
                &self.hook_file(),
                &json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": false},
                    "general": {"disableAutoUpdate": true, "disableUpdateNag": true}
                }),
            ),
            Cli::Qwen => write_json(
                &self.hook_file(),
                &json!({
                    "security": {"auth": {"selectedType": "openai"}},
                    "privacy": {"usageStatisticsEnabled": false},
                    "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                    "telemetry": {"enabled": false},
                    // Background memory extraction would send its own tool-bearing requests to
                    // the fake model and eat scripted turns.
                    "memory": {"enableManagedAutoMemory": false, "enableManagedAutoDream": false}
                }),
            ),
            Cli::Copilot => fs::create_dir_all(self.copilot_home()).unwrap(),
            // The fake model as an OpenAI-compatible provider (`@ai-sdk/openai-compatible` is
            // bundled in both CLIs: nothing is installed at run time, observed offline); the
            // port is put in at run time.
            Cli::OpenCode | Cli::Kilo => write_json(
                &self.plugin_config_dir().join("opencode.json"),
                &json!({
                    "$schema": "https://opencode.ai/config.json",
                    "autoupdate": false,
                    "share": "disabled",
                    "provider": {"mock": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "mock",
                        "options": {"baseURL": MOCK_BASE_URL, "apiKey": "sk-test"},
                        "models": {"mock-model": {"name": "mock", "tool_call": true}}
                    }},
                    "model": "mock/mock-model"
                }),
            ),
        }
    }

    /// Installs loopgate's hooks for this CLI, as a user would: `loopgate setup --agent <cli>`
    /// (with `--observe` for observe mode), into this HOME, beside the CLI's own configuration.
    pub fn install(&mut self, observe: bool) {
        let mut cmd = Command::new(loopgate_bin());
        cmd.args(["setup", "--agent", self.cli.name(), "--bin"])
            .arg(loopgate_bin());
        if observe {
            cmd.arg("--observe");
        }
        let out = cmd
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CODEX_HOME", self.codex_home())
            .env("COPILOT_HOME", self.copilot_home())
            .current_dir(&self.project)
            .output()
            .expect("run loopgate setup");
        assert!(
            out.status.success(),
            "loopgate setup --agent {} failed ({}):\n{}\n{}",
            self.cli.name(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            fs::read_to_string(self.hook_file()).is_ok_and(|t| t.contains("--agent")),
            "no loopgate hooks in {}",
            self.hook_file().display()
        );
        // Codex runs untrusted hooks only with a bypass flag; loopgate's runs go without it, so
        // Codex itself checks the trust `setup` wrote (hooks it does not trust are skipped
        // silently, and the scenarios then fail).
        self.codex_trusted = self.cli == Cli::Codex;
        if self.codex_trusted {
            let config =
                fs::read_to_string(self.codex_home().join("config.toml")).unwrap_or_default();
            assert!(
                config.contains("trusted_hash") && config.contains("[model_providers.mock]"),
                "setup --agent codex must trust its hooks and keep the rest of config.toml:\n{config}"
            );
        }
    }

    /// A recorder instead of loopgate on every hook loopgate handles: each call appends its
    /// stdin to `<scratch>/hooks.jsonl` and answers nothing. Checks the harness itself (Codex
    /// then runs with its hook-trust bypass).
    pub fn install_recorder(&self) {
        let log = self.scratch.join("hooks.jsonl");
        self.write_hooks(|sub| {
            format!(
                "cat >> '{}'; echo >> '{}' # {sub}",
                log.display(),
                log.display()
            )
        });
    }

    /// Adds another hook on `event` beside loopgate's (Claude's shape: Codex), running
    /// `command`; Codex then runs with its hook-trust bypass, the added hook being untrusted.
    pub fn add_other_hook(&mut self, event: &str, command: &str) {
        self.add_hook_at(event, command, usize::MAX);
    }

    /// Like [`Scenario::add_other_hook`], but ahead of loopgate's in the file.
    pub fn add_other_hook_first(&mut self, event: &str, command: &str) {
        self.add_hook_at(event, command, 0);
    }

    fn add_hook_at(&mut self, event: &str, command: &str, at: usize) {
        let mut v = read_json(&self.hook_file());
        // Gemini counts a hook's timeout in milliseconds, the others in seconds.
        let timeout = if self.cli == Cli::Gemini { 10_000 } else { 10 };
        let group = json!({"hooks": [{"type": "command", "command": command, "timeout": timeout}]});
        match v["hooks"][event].as_array_mut() {
            Some(groups) => groups.insert(at.min(groups.len()), group),
            None => v["hooks"][event] = json!([group]),
        }
        write_json(&self.hook_file(), &v);
        self.codex_trusted = false;
    }

    /// Hook stdins the recorder saw.
    pub fn recorded_hooks(&self) -> Vec<Value> {
        read_jsonl(&self.scratch.join("hooks.jsonl"))
    }

    /// Writes the CLI's hook file with `command(subcommand)` on each event loopgate handles, in
    /// the shape `setup --agent` writes.
    fn write_hooks(&self, command: impl Fn(&str) -> String) {
        let claude_shape = |events: &[(&str, &str)], timeout: u64| {
            let mut hooks = serde_json::Map::new();
            for (event, sub) in events {
                let handler =
                    json!({"type": "command", "command": command(sub), "timeout": timeout});
                let group = if event.contains("Tool") {
                    json!({"matcher": "*", "hooks": [handler]})
                } else {
                    json!({"hooks": [handler]})
                };
                hooks.insert(event.to_string(), json!([group]));
            }
            Value::Object(hooks)
        };
        match self.cli {
            Cli::Codex => {
                let events = [
                    ("PreToolUse", "pre-tool-use"),
                    ("PostToolUse", "post-tool-use"),
                    ("Stop", "stop"),
                    ("UserPromptSubmit", "user-prompt-submit"),
                    ("SubagentStop", "subagent-stop"),
                ];
                write_json(
                    &self.hook_file(),
                    &json!({"hooks": claude_shape(&events, 10)}),
                );
            }
            Cli::Gemini | Cli::Qwen => {
                let (events, timeout): (&[(&str, &str)], u64) = if self.cli == Cli::Gemini {
                    (
                        &[
                            ("BeforeTool", "pre-tool-use"),
                            ("AfterTool", "post-tool-use"),
                            ("AfterAgent", "stop"),
                            ("BeforeAgent", "user-prompt-submit"),
                        ],
                        10_000,
                    )
                } else {
                    (
                        &[
                            ("PreToolUse", "pre-tool-use"),
                            ("PostToolUse", "post-tool-use"),
                            ("PostToolUseFailure", "post-tool-use-failure"),
                            ("Stop", "stop"),
                            ("SubagentStop", "subagent-stop"),
                            ("UserPromptSubmit", "user-prompt-submit"),
                        ],
                        10,
                    )
                };
                let mut settings = read_json(&self.hook_file());
                settings["hooks"] = claude_shape(events, timeout);
                write_json(&self.hook_file(), &settings);
            }
            Cli::OpenCode | Cli::Kilo => {
                panic!(
                    "{} runs no hook commands: loopgate is its plugin",
                    self.cli.name()
                )
            }
            Cli::Copilot => {
                let mut hooks = serde_json::Map::new();
                for (event, sub) in [
                    ("preToolUse", "pre-tool-use"),
                    ("postToolUse", "post-tool-use"),
                    ("postToolUseFailure", "post-tool-use-failure"),
                    ("agentStop", "stop"),
                    ("subagentStop", "subagent-stop"),
                    ("userPromptSubmitted", "user-prompt-submit"),
                    ("permissionRequest", "permission-request"),
                ] {
                    hooks.insert(
                        event.into(),
                        json!([{"type": "command", "bash": command(sub), "timeoutSec": 10}]),
                    );
                }
                write_json(&self.hook_file(), &json!({"version": 1, "hooks": hooks}));
            }
        }
    }

    /// Runs the CLI headless on `prompt` against a fresh fake model playing `script`
    /// (`fake_llm.py`'s format; `{{PROJECT}}` and `{{SCRATCH}}` are substituted).
    pub fn run(&self, prompt: &str, script: &Value) -> Run {
        self.run_with(prompt, script, false)
    }

    /// Like [`Scenario::run`], but the CLI continues the session the last run left, the way a
    /// person continues one headless: `codex exec resume <id>`, `gemini --resume latest`,
    /// `qwen --continue`, `copilot --continue`. Each call is one more prompt of that session.
    pub fn run_next(&self, prompt: &str, script: &Value) -> Run {
        assert!(
            self.runs.get() > 0,
            "run_next continues a session: run first"
        );
        self.run_with(prompt, script, true)
    }

    fn run_with(&self, prompt: &str, script: &Value, resume: bool) -> Run {
        let first_event = read_jsonl(&self.state_dir.join("events.jsonl")).len();
        let out = self.root.path().join("out");
        let _ = fs::remove_dir_all(&out);
        fs::create_dir_all(&out).unwrap();
        // A continued session carries the earlier runs' call ids: each run gets ids of its own.
        let mut script = script.clone();
        if self.runs.get() > 0 {
            script["id_prefix"] = json!(format!("r{}_", self.runs.get() + 1));
        }
        let text = serde_json::to_string_pretty(&script)
            .unwrap()
            .replace("{{PROJECT}}", &self.project.display().to_string())
            .replace("{{SCRATCH}}", &self.scratch.display().to_string());
        fs::write(out.join("script.json"), &text).unwrap();
        let fake = FakeModel::start(self.cli, &out);
        let started = Instant::now();
        let mut child = self.spawn(prompt, fake.port, &out, resume);
        let (status, timed_out) = wait_bounded(&mut child, RUN_TIMEOUT);
        kill_group(&child);
        let elapsed = started.elapsed();
        // Hooks of the last event may still be appending (Gemini runs SessionEnd hooks late).
        std::thread::sleep(Duration::from_millis(200));
        drop(fake);
        let run = Run {
            cli: self.cli,
            status,
            timed_out,
            elapsed,
            stdout: fs::read_to_string(out.join("cli.stdout")).unwrap_or_default(),
            stderr: fs::read_to_string(out.join("cli.stderr")).unwrap_or_default(),
            requests: read_jsonl(&out.join("requests.jsonl")),
            events: read_jsonl(&self.state_dir.join("events.jsonl")),
            first_event,
        };
        if let Some(id) = session_of(self.cli, &run.stdout) {
            self.last_session.replace(Some(id));
        }
        let _ = fs::copy(self.hook_file(), out.join("hook-file.json"));
        let _ = fs::copy(
            self.state_dir.join("events.jsonl"),
            out.join("events.jsonl"),
        );
        self.publish(&out);
        run
    }

    fn spawn(&self, prompt: &str, port: u16, out: &Path, resume: bool) -> Child {
        let mut cmd = Command::new(&self.bin);
        let s = |p: &Path| p.display().to_string();
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), s(&self.home)),
            ("XDG_CONFIG_HOME".into(), s(&self.home.join(".config"))),
            ("XDG_CACHE_HOME".into(), s(&self.home.join(".cache"))),
            ("XDG_DATA_HOME".into(), s(&self.home.join(".local/share"))),
            ("XDG_STATE_HOME".into(), s(&self.home.join(".local/state"))),
            ("TMPDIR".into(), s(&self.scratch)),
            ("LANG".into(), "C.UTF-8".into()),
            ("NO_COLOR".into(), "1".into()),
        ];
        let base = format!("http://127.0.0.1:{port}");
        match self.cli {
            Cli::Codex => {
                env.push(("CODEX_HOME".into(), s(&self.codex_home())));
                env.push(("OPENAI_API_KEY".into(), "sk-test".into()));
                cmd.arg("exec");
                if resume {
                    let id = self.last_session.borrow().clone().unwrap_or_else(|| {
                        panic!("the last codex run printed no thread id to resume")
                    });
                    cmd.args(["resume", &id]);
                }
                cmd.args(["--json", "--skip-git-repo-check"])
                    .arg("-c")
                    .arg(format!("model_providers.mock.base_url=\"{base}/v1\""))
                    .arg("--dangerously-bypass-approvals-and-sandbox");
                if !self.codex_trusted {
                    cmd.arg("--dangerously-bypass-hook-trust");
                }
                cmd.arg(prompt);
            }
            Cli::Gemini => {
                env.push(("GEMINI_API_KEY".into(), "test-key".into()));
                env.push(("GOOGLE_GEMINI_BASE_URL".into(), base));
                env.push(("GEMINI_CLI_NO_RELAUNCH".into(), "true".into()));
                if resume {
                    cmd.args(["--resume", "latest"]);
                }
                cmd.args(["-p", prompt, "--output-format", "json"]).args([
                    "--approval-mode",
                    "yolo",
                    "--skip-trust",
                ]);
            }
            Cli::Qwen => {
                env.push(("OPENAI_API_KEY".into(), "sk-test".into()));
                env.push(("OPENAI_BASE_URL".into(), format!("{base}/v1")));
                env.push(("OPENAI_MODEL".into(), "mock-model".into()));
                if resume {
                    cmd.arg("--continue");
                }
                cmd.args([prompt, "--output-format", "json", "--yolo"]);
            }
            Cli::OpenCode | Cli::Kilo => {
                assert!(!resume, "no session is continued on {}", self.cli.name());
                let config = self.plugin_config_dir().join("opencode.json");
                let text = fs::read_to_string(&config).unwrap();
                fs::write(&config, text.replace(MOCK_BASE_URL, &format!("{base}/v1"))).unwrap();
                // No update check, no models.dev fetch (both reach the network, observed), no
                // telemetry (Kilo waits for PostHog at exit).
                for (k, v) in [
                    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
                    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
                    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
                    ("KILO_DISABLE_AUTOUPDATE", "1"),
                    ("KILO_DISABLE_MODELS_FETCH", "1"),
                    ("KILO_DISABLE_LSP_DOWNLOAD", "1"),
                    ("KILO_TELEMETRY_LEVEL", "off"),
                ] {
                    env.push((k.into(), v.into()));
                }
                cmd.args(["run", prompt]);
            }
            Cli::Copilot => {
                env.extend(
                    [
                        ("COPILOT_OFFLINE", "true".to_string()),
                        ("COPILOT_PROVIDER_TYPE", "anthropic".into()),
                        ("COPILOT_PROVIDER_BASE_URL", base),
                        ("COPILOT_PROVIDER_API_KEY", "sk-ant-test".into()),
                        ("COPILOT_MODEL", "claude-sonnet-4.5".into()),
                        ("COPILOT_AUTO_UPDATE", "false".into()),
                        ("COPILOT_HOME", s(&self.copilot_home())),
                    ]
                    .map(|(k, v)| (k.to_string(), v)),
                );
                cmd.args([
                    "-p",
                    prompt,
                    "--no-auto-update",
                    "--disable-client-telemetry",
                ])
                .args(["--output-format", "json"])
                .args(self.copilot_allow);
                // 1.0.102 refuses `--continue` (and `--resume`) with `--trust-folder`: "error:
                // the argument '--continue' cannot be used with '--trust-folder'". User hooks
                // run without folder trust (hooks-observed.md §1).
                if resume {
                    cmd.arg("--continue");
                } else {
                    cmd.arg("--trust-folder");
                }
            }
        }
        env.extend(self.env.iter().cloned());
        let _ = fs::write(
            out.join("cli.cmd"),
            format!(
                "{:?} {:?}\n",
                cmd.get_program(),
                cmd.get_args().collect::<Vec<_>>()
            ),
        );
        cmd.current_dir(&self.project)
            // Only what the run needs: the developer's own agent sessions, API keys or
            // LOOPGATE_* settings must not leak into it.
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(File::create(out.join("cli.stdout")).unwrap())
            .stderr(File::create(out.join("cli.stderr")).unwrap())
            // Its own process group, so a timeout also kills hooks and tool commands.
            .process_group(0);
        cmd.spawn().expect("spawn the agent CLI")
    }

    /// Copies the run's files to `target/e2e-out/<name>/`, which outlives the temp dir.
    /// The first run replaces the folder; run n > 1 goes to `run-<n>/` inside it.
    fn publish(&self, out: &Path) {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let mut dest = repo_root().join("target").join("e2e-out").join(&self.name);
        if n == 1 {
            let _ = fs::remove_dir_all(&dest);
        } else {
            dest = dest.join(format!("run-{n}"));
        }
        if fs::create_dir_all(&dest).is_err() {
            return;
        }
        for entry in fs::read_dir(out).into_iter().flatten().flatten() {
            let _ = fs::copy(entry.path(), dest.join(entry.file_name()));
        }
    }

    /// Lines a scripted command appended to `{{SCRATCH}}/<name>` (0 when it never ran).
    pub fn scratch_lines(&self, name: &str) -> usize {
        fs::read_to_string(self.scratch.join(name))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

/// The session id a run's output names: Codex's `thread.started` event, the `session_id` of
/// Gemini's and Qwen's JSON, Copilot's `sessionId`.
fn session_of(cli: Cli, stdout: &str) -> Option<String> {
    let key = match cli {
        Cli::Codex => "\"thread_id\":\"",
        Cli::Gemini | Cli::Qwen => "\"session_id\":\"",
        Cli::Copilot => "\"sessionId\":\"",
        Cli::OpenCode | Cli::Kilo => return None,
    };
    let compact: String = stdout.split_whitespace().collect();
    let at = compact.find(key)? + key.len();
    let id: String = compact[at..].chars().take_while(|c| *c != '"').collect();
    (!id.is_empty()).then_some(id)
}

/// The fake model's address in OpenCode's config until a run puts the real port in.
const MOCK_BASE_URL: &str = "http://127.0.0.1:9/v1";

/// The binary this `cargo test` built: the code under test, with no second (release) build.
pub fn loopgate_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loopgate"))
}

/// `fake_llm.py` on a free port, logging to `<out>/requests.jsonl`; killed on drop.
struct FakeModel {
    child: Child,
    port: u16,
}

impl FakeModel {
    fn start(cli: Cli, out: &Path) -> FakeModel {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/agents/fake_llm.py");
        let port_file = out.join("fake.port");
        let child = Command::new("python3")
            .arg(script)
            .args(["--api", cli.api(), "--script"])
            .arg(out.join("script.json"))
            .arg("--log")
            .arg(out.join("requests.jsonl"))
            .arg("--port-file")
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(out.join("fake.stderr")).unwrap())
            .spawn()
            .expect("python3 runs the fake model (tests/e2e/agents/fake_llm.py)");
        let mut fake = FakeModel { child, port: 0 };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(port) = fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                fake.port = port;
                return fake;
            }
            if let Ok(Some(status)) = fake.child.try_wait() {
                panic!(
                    "fake model exited ({status}): {}",
                    fs::read_to_string(out.join("fake.stderr")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("fake model did not start within 20 s");
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_json(path: &Path) -> Value {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}))
}

fn write_json(path: &Path, value: &Value) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, serde_json::to_string_pretty(value).unwrap() + "\n").unwrap();
}
