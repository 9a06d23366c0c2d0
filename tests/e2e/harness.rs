//! One scenario = a temp HOME, a temp git project, loopgate installed into them, and one bounded
//! `claude -p` run against the fake API. Everything a run leaves behind is gathered into a
//! [`Run`] and copied to `target/e2e-out/<scenario>/` for post-mortems.

use super::claude_cli;
use super::fake_api::{FakeApi, Script};
use super::run::Run;
use serde_json::{json, Value};
use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A run normally takes 1–3 s; a minute means something hangs (usually a hook waiting on stdin
/// or the fake API not answering), and the child is killed so the suite still finishes.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Hook events loopgate handles, with its subcommand for each.
pub const HOOKS: [(&str, &str); 8] = [
    ("SessionStart", "session-start"),
    ("PreToolUse", "pre-tool-use"),
    ("PostToolUse", "post-tool-use"),
    ("PostToolUseFailure", "post-tool-use-failure"),
    ("PostToolBatch", "post-tool-batch"),
    ("Stop", "stop"),
    ("SubagentStop", "subagent-stop"),
    ("UserPromptSubmit", "user-prompt-submit"),
];

/// How loopgate gets into Claude Code.
#[derive(Clone, Copy, Debug)]
pub enum Install {
    /// `./install.sh`: `~/.local/bin/loopgate` plus entries in `~/.claude/settings.json`.
    Script,
    /// `./install.sh --observe`: the same, with hooks that only log.
    ScriptObserve,
    /// `claude --plugin-dir <repo>`.
    Plugin,
}

pub struct Scenario {
    pub name: String,
    pub home: PathBuf,
    pub project: PathBuf,
    pub state_dir: PathBuf,
    tmp_dir: PathBuf,
    claude: PathBuf,
    args: Vec<String>,
    /// Set after the base environment, replacing a variable of the same name.
    env: Vec<(String, String)>,
    /// Kept last so the directories outlive everything that points into them.
    root: TempDir,
}

impl Scenario {
    /// `None` when the CLI is unavailable and the test should be skipped (see
    /// [`claude_cli::require`]).
    pub fn new(name: &str) -> Option<Scenario> {
        Some(Scenario::with_cli(name, claude_cli::require()?))
    }

    /// A scenario whose host is not the pinned Claude Code CLI but a program run with
    /// [`Scenario::run_host`] (an Agent SDK app, which brings its own CLI).
    pub fn without_cli(name: &str) -> Scenario {
        Scenario::with_cli(name, PathBuf::new())
    }

    fn with_cli(name: &str, claude: PathBuf) -> Scenario {
        let root = tempfile::Builder::new()
            .prefix(&format!("lg-e2e-{name}-"))
            .tempdir()
            .expect("scenario temp dir");
        let sub = |d: &str| {
            let p = root.path().join(d);
            fs::create_dir_all(&p).unwrap();
            p
        };
        let scenario = Scenario {
            name: name.to_string(),
            home: sub("home"),
            project: sub("proj"),
            // Where the hooks keep it: their default under this HOME (a hook never takes
            // `LOOPGATE_STATE_DIR` from its environment, which a settings file can set).
            state_dir: root.path().join("home/.local/state/loopgate"),
            tmp_dir: sub("tmp"),
            claude,
            args: Vec::new(),
            env: Vec::new(),
            root,
        };
        scenario.init_project();
        scenario
    }

    /// Absolute path of a project file, as the model would write it in a tool call.
    pub fn path(&self, rel: &str) -> String {
        self.project.join(rel).display().to_string()
    }

    /// A small committed project: a README to (fail to) edit and a test script that fails.
    fn init_project(&self) {
        fs::write(
            self.project.join("README.md"),
            "# demo\n\nA tiny project.\n",
        )
        .unwrap();
        fs::write(
            self.project.join("run_tests.sh"),
            "#!/bin/sh\necho 'test_parse ... FAILED'\necho '1 failed, 3 passed' >&2\nexit 1\n",
        )
        .unwrap();
        self.git(&["init", "-q"]);
        self.git(&["add", "."]);
        self.git(&["commit", "-q", "-m", "initial"]);
    }

    /// Writes a file under the project (creating directories).
    pub fn write_file(&self, rel: &str, content: &str) {
        let path = self.project.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    /// A separate, committed git repository at `rel` inside the project.
    pub fn nested_repo(&self, rel: &str) {
        self.write_file(&format!("{rel}/notes.txt"), "nested repository\n");
        let dir = self.project.join(rel);
        for args in [
            &["init", "-q"][..],
            &["add", "."],
            &["commit", "-q", "-m", "nested"],
        ] {
            self.git_in(&dir, args);
        }
    }

    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.project, args)
    }

    fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        git(&self.home, dir, args)
    }

    /// Installs loopgate by one of the routes a user has.
    pub fn install(&mut self, route: Install) {
        match route {
            Install::Script => self.install_with_script(&[]),
            Install::ScriptObserve => self.install_with_script(&["--observe"]),
            Install::Plugin => self.install_as_plugin(),
        }
    }

    /// The settings route: the repo's `install.sh` with this HOME, which builds the release
    /// binary, copies it to `~/.local/bin` and merges hooks into `~/.claude/settings.json`.
    fn install_with_script(&self, args: &[&str]) {
        let root = claude_cli::repo_root();
        let bin_dir = self.home.join(".local").join("bin");
        let out = Command::new(root.join("install.sh"))
            .args(args)
            .current_dir(&root)
            // Only what a user's shell would have. `~/.local/bin` is on PATH as on most desktops;
            // without it install.sh would pick `$CARGO_HOME/bin` and write outside the temp HOME.
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", prepend_path(&bin_dir))
            .envs(toolchain_env())
            .output()
            .expect("run install.sh");
        assert!(
            out.status.success(),
            "install.sh failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = bin_dir.join("loopgate");
        assert!(
            bin.is_file(),
            "install.sh did not install {}",
            bin.display()
        );
        let settings = self.read_settings();
        for (event, sub) in HOOKS {
            let command = settings["hooks"][event][0]["hooks"][0]["command"]
                .as_str()
                .unwrap_or_default();
            assert!(
                command.contains(&*bin.to_string_lossy())
                    // SessionStart's runs behind the binary's check (src/setup/pin.rs).
                    && (command.ends_with(sub) || command.contains(&format!(" {sub}; echo '"))),
                "install.sh did not register `{} {sub}` for {event}: {settings:#}",
                bin.display()
            );
        }
    }

    /// The plugin route: `claude --plugin-dir <repo root>`, whose hooks run
    /// `hooks/loopgate-hook`. The binary `cargo build --release` leaves in the repo is put where
    /// the wrapper looks first, the plugin's data dir (as its one-time install would), so no
    /// other loopgate on PATH can stand in for it.
    fn install_as_plugin(&mut self) {
        let root = claude_cli::repo_root();
        assert!(
            root.join(".claude-plugin/plugin.json").is_file()
                && root.join("hooks/hooks.json").is_file(),
            "plugin manifest or hooks/hooks.json missing at the repo root"
        );
        build_release_once();
        let built = root.join("target").join("release").join("loopgate");
        assert!(
            built.is_file(),
            "{} missing (CARGO_TARGET_DIR elsewhere?): the plugin would not run this build",
            built.display()
        );
        let bin_dir = self.plugin_data().join("bin");
        fs::create_dir_all(&bin_dir).unwrap();
        std::os::unix::fs::symlink(&built, bin_dir.join("loopgate")).unwrap();
        self.plugin_dir(&root);
    }

    /// `--plugin-dir <dir>` for the run.
    pub fn plugin_dir(&mut self, dir: &Path) {
        self.args.push("--plugin-dir".into());
        self.args.push(dir.display().to_string());
    }

    /// `CLAUDE_PLUGIN_DATA` of the loopgate plugin given by `--plugin-dir` (hooks-observed.md 3e).
    pub fn plugin_data(&self) -> PathBuf {
        self.home.join(".claude/plugins/data/loopgate-inline")
    }

    /// Sets an environment variable of the runs, replacing the base environment's value.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
    }

    /// Registers `<bin> <subcommand>` for every loopgate event in `~/.claude/settings.json`,
    /// bypassing install.sh. Used to check the harness itself and to inject broken hooks.
    pub fn register_hooks(&self, command_for: impl Fn(&str, &str) -> String) {
        let mut hooks = serde_json::Map::new();
        for (event, sub) in HOOKS {
            let entry = json!({"type": "command", "command": command_for(event, sub)});
            let group = if event.contains("ToolUse") || event == "PostToolBatch" {
                json!({"matcher": "*", "hooks": [entry]})
            } else {
                json!({"hooks": [entry]})
            };
            hooks.insert(event.into(), json!([group]));
        }
        self.write_settings(&json!({ "hooks": hooks }));
    }

    /// Adds another hook on `event` to `~/.claude/settings.json`, after loopgate's.
    pub fn add_other_hook(&self, event: &str, command: &str) {
        let mut settings = self.read_settings();
        let group = json!({"hooks": [{"type": "command", "command": command}]});
        match settings["hooks"][event].as_array_mut() {
            Some(groups) => groups.push(group),
            None => settings["hooks"][event] = json!([group]),
        }
        self.write_settings(&settings);
    }

    /// Like [`Scenario::add_other_hook`], but ahead of loopgate's in the settings.
    pub fn add_other_hook_first(&self, event: &str, command: &str) {
        let mut settings = self.read_settings();
        let group = json!({"hooks": [{"type": "command", "command": command}]});
        match settings["hooks"][event].as_array_mut() {
            Some(groups) => groups.insert(0, group),
            None => settings["hooks"][event] = json!([group]),
        }
        self.write_settings(&settings);
    }

    fn settings_path(&self) -> PathBuf {
        self.home.join(".claude").join("settings.json")
    }

    fn write_settings(&self, settings: &Value) {
        let path = self.settings_path();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, serde_json::to_string_pretty(settings).unwrap()).unwrap();
    }

    pub fn read_settings(&self) -> Value {
        let text = fs::read_to_string(self.settings_path()).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// Runs `claude -p <prompt>` against a fresh fake API playing `script`.
    pub fn run(&self, prompt: &str, script: Script) -> Run {
        let api = FakeApi::start(script);
        let out_dir = self.root.path().join("out");
        fs::create_dir_all(&out_dir).unwrap();
        let started = Instant::now();
        let mut child = self.spawn_claude(prompt, &api, &out_dir);
        let (status, timed_out) = wait_bounded(&mut child, RUN_TIMEOUT);
        kill_group(&child);
        self.collect(&api, &out_dir, status, timed_out, started)
    }

    /// One session fed several prompts: `claude -p --input-format stream-json`, each prompt a
    /// user message on stdin, written once the previous one has its `result` event (a message
    /// written while a turn runs would be queued into that turn). stdin is closed after the last
    /// result, which ends the session.
    pub fn run_prompts(&self, prompts: &[&str], script: Script) -> Run {
        let api = FakeApi::start(script);
        let out_dir = self.root.path().join("out");
        fs::create_dir_all(&out_dir).unwrap();
        let started = Instant::now();
        let deadline = started + RUN_TIMEOUT;
        let head = [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ];
        let mut child = self.spawn_claude_with(&head, Stdio::piped(), &api, &out_dir);
        let mut stdin = child.stdin.take().expect("claude stdin");
        for (n, prompt) in prompts.iter().enumerate() {
            let line = json!({"type": "user", "message": {"role": "user", "content": prompt}});
            if writeln!(stdin, "{line}")
                .and_then(|()| stdin.flush())
                .is_err()
            {
                break; // claude is gone; the run's results say why.
            }
            let stdout = out_dir.join("stdout.jsonl");
            let answered = || count_results(&stdout) > n;
            while !answered() && Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        drop(stdin);
        let left = deadline.saturating_duration_since(Instant::now());
        let (status, timed_out) = wait_bounded(&mut child, left);
        kill_group(&child);
        self.collect(&api, &out_dir, status, timed_out, started)
    }

    /// Runs `program args` (with `env` on top of the base environment) in the project against
    /// a fresh fake API playing `script`, as [`Scenario::run`] runs `claude -p`: its stdout is
    /// read as the stream-json output.
    pub fn run_host(
        &self,
        program: &Path,
        args: &[&str],
        env: &[(&str, String)],
        script: Script,
    ) -> Run {
        let api = FakeApi::start(script);
        let out_dir = self.root.path().join("out");
        fs::create_dir_all(&out_dir).unwrap();
        let started = Instant::now();
        let stdout = File::create(out_dir.join("stdout.jsonl")).unwrap();
        let stderr = File::create(out_dir.join("stderr.txt")).unwrap();
        let mut child = Command::new(program)
            .args(args)
            .current_dir(&self.project)
            .env_clear()
            .envs(self.base_env(&api))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
        let (status, timed_out) = wait_bounded(&mut child, RUN_TIMEOUT);
        kill_group(&child);
        self.collect(&api, &out_dir, status, timed_out, started)
    }

    /// Gathers what a finished run left: requests, stream, transcript, events; saved and published.
    fn collect(
        &self,
        api: &FakeApi,
        out_dir: &Path,
        status: Option<std::process::ExitStatus>,
        timed_out: bool,
        started: Instant,
    ) -> Run {
        let run = Run::collect(self, api, out_dir, status, timed_out, started.elapsed());
        run.save(out_dir);
        let _ = fs::copy(self.settings_path(), out_dir.join("settings.json"));
        self.publish_artifacts(out_dir);
        run
    }

    /// Copies the run's files to `target/e2e-out/<scenario>/`, which outlives the temp dirs. The
    /// run itself writes only inside its temp dir: two `cargo test` processes running the same
    /// scenario at once must not clobber each other's live output.
    fn publish_artifacts(&self, out_dir: &Path) {
        let dest = claude_cli::repo_root()
            .join("target")
            .join("e2e-out")
            .join(&self.name);
        let _ = fs::remove_dir_all(&dest);
        if fs::create_dir_all(&dest).is_err() {
            return;
        }
        for entry in fs::read_dir(out_dir).into_iter().flatten().flatten() {
            let _ = fs::copy(entry.path(), dest.join(entry.file_name()));
        }
    }

    fn spawn_claude(&self, prompt: &str, api: &FakeApi, out_dir: &Path) -> Child {
        self.spawn_claude_with(
            &["-p", prompt, "--output-format", "stream-json", "--verbose"],
            Stdio::null(),
            api,
            out_dir,
        )
    }

    fn spawn_claude_with(
        &self,
        head: &[&str],
        stdin: Stdio,
        api: &FakeApi,
        out_dir: &Path,
    ) -> Child {
        let stdout = File::create(out_dir.join("stdout.jsonl")).unwrap();
        let stderr = File::create(out_dir.join("stderr.txt")).unwrap();
        let mut cmd = Command::new(&self.claude);
        cmd.args(head)
            .arg("--dangerously-skip-permissions")
            .args(&self.args)
            .current_dir(&self.project)
            // A clean environment: the developer's own Claude Code session (CLAUDECODE,
            // CLAUDE_PROJECT_DIR…), LOOPGATE_* or XDG settings must not leak into the run.
            .env_clear()
            .envs(self.base_env(api))
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr)
            // Its own process group, so a timeout also kills hooks and tool commands.
            .process_group(0);
        cmd.spawn().expect("spawn claude")
    }

    fn base_env(&self, api: &FakeApi) -> Vec<(String, String)> {
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
        let shell = std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into());
        let s = |p: &Path| p.display().to_string();
        [
            ("PATH", path),
            ("SHELL", shell),
            ("HOME", s(&self.home)),
            ("TMPDIR", s(&self.tmp_dir)),
            ("LANG", "C.UTF-8".into()),
            ("ANTHROPIC_API_KEY", "sk-ant-test".into()),
            ("ANTHROPIC_BASE_URL", api.base_url()),
            // --dangerously-skip-permissions refuses to run as root unless this is exactly 1.
            ("IS_SANDBOX", "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("DISABLE_TELEMETRY", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .filter(|(k, _)| !self.env.iter().any(|(set, _)| set == k))
        .chain(self.env.iter().cloned())
        .collect()
    }

    /// `loopgate --state-dir <this scenario's state> <args>` with the debug binary.
    pub fn loopgate(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_loopgate"))
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(args)
            .env_clear()
            .env("HOME", &self.home)
            .current_dir(&self.project)
            .output()
            .expect("run loopgate")
    }

    /// The one session of this scenario, from `loopgate status --json`.
    pub fn status_json(&self) -> serde_json::Value {
        let out = self.loopgate(&["status", "--json"]);
        assert!(
            out.status.success(),
            "status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sessions: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("status --json is JSON");
        assert_eq!(sessions.as_array().map(Vec::len), Some(1), "{sessions:#}");
        sessions[0].clone()
    }

    pub fn tmp_dir(&self) -> &Path {
        &self.tmp_dir
    }

    /// A script that starts the interactive `claude` of this scenario against `api`, with the
    /// same clean environment as [`Scenario::run`] plus a terminal; for [`super::interactive`].
    /// The first-run screens (onboarding, the API key, trusting the folder, the warning of
    /// `--dangerously-skip-permissions`) are answered in `~/.claude.json` and the settings, as a
    /// person who used Claude Code before has them.
    pub fn interactive_script(&self, api: &FakeApi) -> PathBuf {
        let seen = json!({
            "hasCompletedOnboarding": true,
            "lastOnboardingVersion": claude_cli::VERSION,
            "hasSeenAutoDefaultNotice": true,
            "customApiKeyResponses": {"approved": ["sk-ant-test"], "rejected": []},
            "projects": {self.project.display().to_string(): {"hasTrustDialogAccepted": true}},
        });
        fs::write(self.home.join(".claude.json"), seen.to_string()).unwrap();
        let mut settings = self.read_settings();
        if settings.is_null() {
            settings = json!({});
        }
        settings["skipDangerousModePermissionPrompt"] = json!(true);
        self.write_settings(&settings);
        let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let mut env: Vec<String> = self
            .base_env(api)
            .into_iter()
            .map(|(k, v)| format!("{k}={}", quote(&v)))
            .collect();
        env.push("TERM=xterm-256color".into());
        let script = format!(
            "#!/bin/sh\ncd {} && exec env -i {} {} --dangerously-skip-permissions {}\n",
            quote(&self.project.display().to_string()),
            env.join(" "),
            quote(&self.claude.display().to_string()),
            self.args
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let path = self.root.path().join("interactive.sh");
        fs::write(&path, script).unwrap();
        let _ = Command::new("chmod").arg("+x").arg(&path).status();
        path
    }

    /// Where a run's files are gathered (see [`Scenario::run`]).
    pub fn out_dir(&self) -> PathBuf {
        let out = self.root.path().join("out");
        fs::create_dir_all(&out).unwrap();
        out
    }

    /// Copies what an interactive session left to `target/e2e-out/<scenario>/`.
    pub fn publish(&self, out_dir: &Path) {
        let _ = fs::copy(self.settings_path(), out_dir.join("settings.json"));
        let _ = fs::copy(
            self.state_dir.join("events.jsonl"),
            out_dir.join("events.jsonl"),
        );
        self.publish_artifacts(out_dir);
    }
}

/// What a plugin user does once after cloning: `cargo build --release`. Done once per test
/// process; cargo's own lock serialises it with install.sh builds.
fn build_release_once() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--release", "--locked", "--quiet"])
            .current_dir(claude_cli::repo_root())
            .status()
            .expect("run cargo build --release");
        assert!(status.success(), "cargo build --release failed");
    });
}

/// install.sh runs cargo with the temp HOME; cargo and rustup must still find the real
/// toolchain and registry cache (and the same toolchain and target dir as this test run) rather
/// than start from nothing in the empty HOME.
fn toolchain_env() -> Vec<(String, PathBuf)> {
    let real_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut env = vec![
        ("CARGO_HOME", real_home.join(".cargo")),
        ("RUSTUP_HOME", real_home.join(".rustup")),
    ];
    for (key, value) in &mut env {
        if let Some(set) = std::env::var_os(key) {
            *value = PathBuf::from(set);
        }
    }
    let passed = ["RUSTUP_TOOLCHAIN", "CARGO_TARGET_DIR"]
        .into_iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (k, PathBuf::from(v))));
    env.into_iter()
        .chain(passed)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// `result` events written so far to a stream-json output file (a line still being written
/// does not parse, and is not counted).
fn count_results(stdout: &Path) -> usize {
    super::run::read_jsonl(stdout)
        .iter()
        .filter(|l| l["type"] == "result")
        .count()
}

fn prepend_path(dir: &Path) -> String {
    let rest = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    format!("{}:{rest}", dir.display())
}

pub fn wait_bounded(child: &mut Child, limit: Duration) -> (Option<ExitStatus>, bool) {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return (Some(status), false);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            return (child.wait().ok(), true);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills whatever is left in the run's process group (a background subagent's shell, a hook
/// still running); the group id is the claude child's pid, set at spawn.
pub fn kill_group(child: &Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
}

/// `git <args>` in `dir` with a throwaway identity, HOME and no system config; panics on failure.
pub fn git(home: &Path, dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=e2e",
            "-c",
            "user.email=e2e@example.invalid",
        ])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
