//! Whole-process latency of loopgate's hooks, compared with the bare process
//! start and with the design notes' bash+jq hooks (`benches/peers/`).
//!
//! Claude Code spawns one hook process per event and waits for it, so what an
//! agent pays is spawn + exec + run + exit, not a function call. Every row is
//! therefore the wall time from spawn to reaped exit, with stdin fed from a
//! real Claude Code 2.1.330 payload (`benches/fixtures/`) and stdout/stderr
//! captured through pipes, as Claude Code does. The `/bin/sh -c` Claude Code
//! wraps every hook command in is left out: it costs every row the same.
//!
//! Run: `cargo bench --bench latency`. Environment:
//! - `LOOPGATE_BENCH_RUNS`: measured runs per row (default 200);
//! - `LOOPGATE_BENCH_CALLS`: calls recorded in the "loaded" session (default 10000).
//!
//! Rows are measured round-robin (one run of every row, then the next run), so
//! drift in CPU frequency or background load hits all rows alike and the
//! ratios to the bare start stay honest.
//!
//! Under `cargo test --benches` (no `--bench` flag) it runs a tiny smoke
//! version that only checks the plumbing and writes no report.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// The binary `cargo test --benches` built; the full bench measures the release build instead.
const LOOPGATE_TEST_BUILD: &str = env!("CARGO_BIN_EXE_loopgate");
const FLOOR_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/floor.rs");
/// Where the static release build is (`cargo build-static`, see `.cargo/config.toml`).
const STATIC_TRIPLE: &str = "x86_64-unknown-linux-gnu";
const STATIC_FLAGS: [&str; 4] = [
    "-C",
    "target-feature=+crt-static",
    "-C",
    "relocation-model=static",
];
const PEERS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peers");
const BARE: &str = "/bin/true";
/// GNU time: its `%M` is the child's `ru_maxrss` from `wait4`, see [`peak_rss_kib`].
const GNU_TIME: &str = "/usr/bin/time";
const RSS_MARK: &str = "loopgate-bench-maxrss=";

const SESSION_START_FIXTURE: &[u8] = include_bytes!("fixtures/basic-01-SessionStart.json");
const PROMPT_FIXTURE: &[u8] = include_bytes!("fixtures/basic-02-UserPromptSubmit.json");
const PRE_FIXTURE: &[u8] = include_bytes!("fixtures/basic-03-PreToolUse-Bash.json");
const POST_FIXTURE: &[u8] = include_bytes!("fixtures/basic-04-PostToolUse-Bash.json");
const STOP_FIXTURE: &[u8] = include_bytes!("fixtures/basic-18-Stop.json");

/// Tool calls per user prompt while building the loaded session: a real
/// 10,000-call session spans many turns, and per-turn state should look real.
const CALLS_PER_TURN: usize = 100;

// Issue 13's targets.
const TARGET_X_FLOOR: f64 = 1.3;
const TARGET_X_BARE: f64 = 1.8;
const TARGET_FLAT_RATIO: f64 = 1.1;
const TARGET_PROMPT_X_FLOOR: f64 = 2.0;
const TARGET_STATE_BYTES: u64 = 64 * 1024;
const TARGET_RSS_KIB: u64 = 8 * 1024;

fn main() {
    let settings = Settings::from_env();
    let ctx = Ctx::new(settings);
    let mut records = Records::new(&ctx);

    let build = build_loaded_session(&ctx);
    if let Err(e) = &build {
        for row in [Row::PreLoaded, Row::PostLoaded] {
            records.fail(row, format!("loaded session not built: {e}"));
        }
    }
    measure(&ctx, &mut records);
    let state_file = largest_state_file(&ctx.ws.loaded_state);
    let memory = measure_memory(&ctx);
    let instructions = measure_instructions(&ctx);
    let creation = creation_cost(&ctx.ws.fresh_state.join("sessions"));

    let report = Report {
        ctx: &ctx,
        records: &records,
        build: build.ok(),
        state_file,
        memory,
        instructions,
        creation,
        version: loopgate_version(&ctx),
    }
    .render();
    println!("\n{report}");
    write_report(&ctx.settings, &report);
}

/// Sizes and run counts, from the environment.
struct Settings {
    /// False under `cargo test`: shrink everything to a smoke run.
    full: bool,
    runs: usize,
    warmup: usize,
    calls: usize,
    repo_files: usize,
    repo_modified: usize,
    memory_runs: usize,
}

impl Settings {
    fn from_env() -> Self {
        // cargo passes `--bench` only under `cargo bench`; without it a test
        // run is checking that the target works, not asking for minutes of it.
        let full = std::env::args().any(|a| a == "--bench");
        let pick = |var: &str, bench: usize, smoke: usize| {
            let default = if full { bench } else { smoke };
            std::env::var(var)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let runs = pick("LOOPGATE_BENCH_RUNS", 200, 2).max(1);
        Settings {
            full,
            runs,
            warmup: if full { 5 } else { 1 },
            calls: pick("LOOPGATE_BENCH_CALLS", 10_000, 20),
            repo_files: if full { 10_000 } else { 200 },
            repo_modified: if full { 100 } else { 10 },
            // Peak RSS barely varies run to run; a few runs find the max.
            memory_runs: runs.min(20),
        }
    }
}

/// Temp dirs: a git project, a HOME, and one state dir per scenario so the
/// fresh rows never see the loaded session's files.
struct Workspace {
    _root: TempDir,
    /// Filesystem of the state dirs, for the report: fsync cost depends on it.
    fs_type: Option<String>,
    home: PathBuf,
    repo: PathBuf,
    fresh_state: PathBuf,
    loaded_state: PathBuf,
    peer_state: PathBuf,
}

impl Workspace {
    fn create(settings: &Settings) -> Self {
        // Under the target dir, not /tmp: /tmp is often tmpfs, where fsync is
        // free, while a user's real state dir (~/.local/state) is on disk.
        let target = target_dir();
        std::fs::create_dir_all(&target).expect("create target dir");
        let root = tempfile::Builder::new()
            .prefix("loopgate-bench-")
            .tempdir_in(&target)
            .expect("create temp dir");
        let dir = |name: &str| {
            let p = root.path().join(name);
            std::fs::create_dir_all(&p).expect("create workspace dir");
            p
        };
        let ws = Workspace {
            fs_type: fs_type(root.path()),
            home: dir("home"),
            repo: dir("repo"),
            fresh_state: dir("state-fresh"),
            loaded_state: dir("state-loaded"),
            peer_state: dir("state-peers"),
            _root: root,
        };
        build_repo(&ws, settings);
        ws
    }
}

/// Everything a run needs: settings, dirs, payload templates, environment.
struct Ctx {
    settings: Settings,
    ws: Workspace,
    payloads: Payloads,
    base_env: Vec<(OsString, OsString)>,
    has_jq: bool,
    has_gnu_time: bool,
    /// The loopgate binary measured, how it was built, and the minimal Rust binary beside it.
    loopgate: PathBuf,
    linking: String,
    floor: Option<PathBuf>,
    has_callgrind: bool,
}

impl Ctx {
    fn new(settings: Settings) -> Self {
        require_git();
        let ws = Workspace::create(&settings);
        let payloads = Payloads::new(&ws.repo);
        let base_env = base_env(&ws);
        let has_jq = probe("jq", &["--version"]);
        if !has_jq {
            eprintln!("jq not found: skipping the bash+jq peer rows (apt-get install -y jq)");
        }
        let has_gnu_time = probe(GNU_TIME, &["--version"]);
        if !has_gnu_time {
            eprintln!("{GNU_TIME} (GNU time) not found: skipping peak memory");
        }
        let (loopgate, linking) = loopgate_binary(&settings);
        let floor = build_floor(&settings, &linking);
        let has_callgrind = settings.full && probe("valgrind", &["--version"]);
        Ctx {
            settings,
            ws,
            payloads,
            base_env,
            has_jq,
            has_gnu_time,
            loopgate,
            linking,
            floor,
            has_callgrind,
        }
    }

    fn loopgate(&self, sub: &str, state: &Path, session: &str, stdin: Vec<u8>) -> Invocation {
        Invocation {
            program: self.loopgate.clone(),
            // As setup writes a hook with its own state dir: a hook never takes it from its
            // environment (a settings file's `env` reaches that).
            args: vec![
                "--state-dir".into(),
                state.display().to_string(),
                sub.into(),
            ],
            env: self.hook_env(session, ("BENCH_STATE_DIR", state)),
            stdin,
        }
    }

    fn peer(&self, script: &str, session: &str, stdin: Vec<u8>) -> Invocation {
        // Through `bash` rather than the shebang, so a lost exec bit cannot
        // break the bench; the cost is the same exec of bash either way.
        Invocation {
            program: "bash".into(),
            args: vec![format!("{PEERS_DIR}/{script}")],
            env: self.hook_env(session, ("LOOP_HOOKS_STATE_DIR", &self.ws.peer_state)),
            stdin,
        }
    }

    fn floor(&self, session: &str, stdin: Vec<u8>) -> Invocation {
        Invocation {
            program: self.floor.clone().unwrap_or_else(|| BARE.into()),
            args: vec![],
            env: self.hook_env(session, ("BENCH_STATE_DIR", &self.ws.fresh_state)),
            stdin,
        }
    }

    fn git_status(&self, session: &str) -> Invocation {
        Invocation {
            program: "git".into(),
            args: vec!["status".into(), "--porcelain".into()],
            env: self.hook_env(session, ("BENCH_STATE_DIR", &self.ws.fresh_state)),
            stdin: vec![],
        }
    }

    fn bare(&self, session: &str, stdin: Vec<u8>) -> Invocation {
        Invocation {
            program: BARE.into(),
            args: vec![],
            env: self.hook_env(session, ("BENCH_STATE_DIR", &self.ws.fresh_state)),
            stdin,
        }
    }

    /// The variables Claude Code adds for a hook (see hooks-observed.md), plus
    /// where the hook keeps its state. Every row gets the same set.
    fn hook_env(&self, session: &str, state: (&str, &Path)) -> Vec<(OsString, OsString)> {
        vec![
            ("CLAUDECODE".into(), "1".into()),
            ("CLAUDE_PROJECT_DIR".into(), self.ws.repo.clone().into()),
            ("CLAUDE_CODE_SESSION_ID".into(), session.into()),
            ("CLAUDE_CODE_SESSION_ATTENDED".into(), "0".into()),
            (state.0.into(), state.1.into()),
        ]
    }
}

/// A hermetic environment: the developer's own config (a `~/.config/loopgate`
/// in observe mode, a LOOPGATE_* or CLAUDE_* variable from running inside
/// Claude Code) must not change what is measured. PATH is kept to find
/// bash, jq and git.
fn base_env(ws: &Workspace) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), ws.home.clone().into()),
        ("XDG_CONFIG_HOME".into(), ws.home.join(".config").into()),
        ("XDG_STATE_HOME".into(), ws.home.join(".local/state").into()),
        ("XDG_DATA_HOME".into(), ws.home.join(".local/share").into()),
        ("XDG_CACHE_HOME".into(), ws.home.join(".cache").into()),
    ];
    for keep in ["PATH", "TMPDIR"] {
        if let Some(v) = std::env::var_os(keep) {
            env.push((keep.into(), v));
        }
    }
    env.extend(shell_like_env());
    env
}

/// A hook inherits Claude Code's environment, which is the user's whole shell environment: every
/// row (the floors too) gets a fixed stand-in for one, 80 variables and an `LS_COLORS`, ~5 KB,
/// so a cost that grows with the environment shows here as it would in a real session.
fn shell_like_env() -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = (0..80)
        .map(|i| {
            (
                format!("BENCH_SHELL_VAR_{i:02}").into(),
                format!("value-{i:02}-{}", "x".repeat(30)).into(),
            )
        })
        .collect();
    env.push((
        "LS_COLORS".into(),
        "rs=0:di=01;34:ln=01;36:".repeat(60).into(),
    ));
    env
}

/// The binary to measure: `LOOPGATE_BENCH_BIN`, else (full runs on x86_64 Linux) the static
/// non-PIE release build `install.sh` makes, built now with `cargo build-static`, else the
/// binary cargo built for this bench target. Returns it with a word on its linking.
fn loopgate_binary(settings: &Settings) -> (PathBuf, String) {
    if let Some(p) = std::env::var_os("LOOPGATE_BENCH_BIN") {
        return (PathBuf::from(p), "LOOPGATE_BENCH_BIN".into());
    }
    let host_is_static_target = cfg!(all(
        target_os = "linux",
        target_arch = "x86_64",
        target_env = "gnu"
    ));
    if settings.full && host_is_static_target {
        eprintln!("building the static release binary (cargo build-static)...");
        let ok = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .arg("build-static")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .is_ok_and(|s| s.success());
        let built = target_dir()
            .join(STATIC_TRIPLE)
            .join("release")
            .join("loopgate");
        if ok && built.is_file() {
            return (built, "static, non-PIE (cargo build-static)".into());
        }
        eprintln!("cargo build-static failed: measuring the bench profile's binary");
    }
    (
        LOOPGATE_TEST_BUILD.into(),
        "cargo's bench-profile build (dynamic)".into(),
    )
}

/// Compiles `benches/floor.rs` with the release profile's settings and the same linking as the
/// measured binary. `None` (the floor rows then use `/bin/true`) when rustc is not at hand.
fn build_floor(settings: &Settings, linking: &str) -> Option<PathBuf> {
    let out = target_dir().join("bench-floor");
    let mut cmd = Command::new("rustc");
    cmd.args([
        "--edition",
        "2021",
        "-C",
        "opt-level=3",
        "-C",
        "codegen-units=1",
    ])
    .args(["-C", "strip=symbols", "-o"])
    .arg(&out)
    .arg(FLOOR_SRC);
    if linking.starts_with("static") {
        cmd.args(["--target", STATIC_TRIPLE]).args(STATIC_FLAGS);
    }
    let ok = cmd.status().is_ok_and(|s| s.success());
    if !ok {
        eprintln!("could not compile {FLOOR_SRC}: the floor row uses /bin/true");
    }
    let _ = settings;
    ok.then_some(out)
}

fn probe(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn require_git() {
    assert!(
        probe("git", &["--version"]),
        "the latency bench needs the git CLI (to build the 10,000-file repo)"
    );
}

/// A git repo of `repo_files` small files in nested dirs, committed, with
/// `repo_modified` of them then changed: the worktree a Stop hook diffs.
fn build_repo(ws: &Workspace, settings: &Settings) {
    let started = Instant::now();
    let repo = &ws.repo;
    git(ws, &["init", "-q"]);
    for n in 0..settings.repo_files {
        let path = repo_file(repo, n);
        std::fs::create_dir_all(path.parent().expect("file has a dir")).expect("mkdir");
        std::fs::write(&path, format!("file {n}\nline two\nline three\n")).expect("write file");
    }
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-q", "-m", "bench fixture"]);
    let step = (settings.repo_files / settings.repo_modified.max(1)).max(1);
    for n in (0..settings.repo_files)
        .step_by(step)
        .take(settings.repo_modified)
    {
        let path = repo_file(repo, n);
        let mut text = std::fs::read_to_string(&path).expect("read file");
        text.push_str("modified by the bench\n");
        std::fs::write(&path, text).expect("modify file");
    }
    // Files written in the same second as the index are "racily clean": git
    // re-reads them on every diff until the index is rewritten later. A real
    // worktree is older than its index, so wait a second and refresh it.
    std::thread::sleep(Duration::from_millis(1100));
    git(ws, &["update-index", "-q", "--refresh"]);
    eprintln!(
        "repo: {} files, {} modified, built in {:.1} s",
        settings.repo_files,
        settings.repo_modified,
        started.elapsed().as_secs_f64()
    );
}

/// `stat -f` names the filesystem (ext2/ext3, btrfs, tmpfs...); informative only.
fn fs_type(dir: &Path) -> Option<String> {
    let out = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(dir)
        .output()
        .ok()?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !name.is_empty()).then_some(name)
}

/// 10 x 10 dirs of 100 files each at full size: nesting like a source tree.
fn repo_file(repo: &Path, n: usize) -> PathBuf {
    repo.join(format!(
        "src/m{:02}/s{:02}/f{:04}.txt",
        n / 1000,
        n / 100 % 10,
        n
    ))
}

/// Hermetic like the hooks: an inherited GIT_DIR (say, the bench run from a
/// git hook) or the developer's ~/.gitconfig must not reach the fixture repo.
fn git(ws: &Workspace, args: &[&str]) {
    let status = Command::new("git")
        .env_clear()
        .envs(std::env::var_os("PATH").map(|p| ("PATH", p)))
        .env("HOME", &ws.home)
        .args([
            "-c",
            "user.name=loopgate bench",
            "-c",
            "user.email=bench@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(&ws.repo)
        .status()
        .expect("run git");
    assert!(status.success(), "git {args:?} failed: {status}");
}

/// The captured payloads, re-stamped per run with a session, prompt and call
/// so each run is a distinct, realistic event.
struct Payloads {
    session_start: Value,
    prompt: Value,
    pre: Value,
    post: Value,
    stop: Value,
    cwd: String,
}

impl Payloads {
    fn new(repo: &Path) -> Self {
        let parse = |bytes: &[u8]| serde_json::from_slice(bytes).expect("fixture is JSON");
        Payloads {
            session_start: parse(SESSION_START_FIXTURE),
            prompt: parse(PROMPT_FIXTURE),
            pre: parse(PRE_FIXTURE),
            post: parse(POST_FIXTURE),
            stop: parse(STOP_FIXTURE),
            cwd: repo.to_string_lossy().into_owned(),
        }
    }

    /// A session's start carries no prompt id.
    fn session_start(&self, session: &str) -> Vec<u8> {
        let mut v = self.stamp(&self.session_start, session, "");
        v.as_object_mut().map(|m| m.remove("prompt_id"));
        encode(&v)
    }

    /// Each prompt's text is its own: sessions that all send the same prompt and change nothing
    /// are an outer loop, which the project's session record rightly reports at every first
    /// prompt, and the prompt rows would measure that report instead of an ordinary prompt.
    fn prompt(&self, session: &str, prompt_id: &str) -> Vec<u8> {
        let mut v = self.stamp(&self.prompt, session, prompt_id);
        let text = v["prompt"].as_str().unwrap_or_default();
        v["prompt"] = Value::from(format!("{text} ({prompt_id})"));
        encode(&v)
    }

    fn pre(&self, session: &str, prompt_id: &str, call: &str) -> Vec<u8> {
        let mut v = self.stamp(&self.pre, session, prompt_id);
        stamp_call(&mut v, call);
        encode(&v)
    }

    fn pre_command(&self, session: &str, prompt_id: &str, call: &str, command: &str) -> Vec<u8> {
        let mut v = self.stamp(&self.pre, session, prompt_id);
        stamp_call(&mut v, call);
        v["tool_input"]["command"] = Value::from(command);
        encode(&v)
    }

    fn post(&self, session: &str, prompt_id: &str, call: &str) -> Vec<u8> {
        let mut v = self.stamp(&self.post, session, prompt_id);
        stamp_call(&mut v, call);
        v["tool_response"]["stdout"] = Value::from(call);
        encode(&v)
    }

    /// What Claude Code's statusLine command gets (captured from 2.1.330), for `session`.
    fn status_line(&self, session: &str) -> Vec<u8> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/statusline");
        let text = std::fs::read_to_string(dir.join("2.1.330-after-turn.json"))
            .expect("the statusline fixture");
        let mut v: Value = serde_json::from_str(&text).expect("the statusline fixture is JSON");
        v["session_id"] = session.into();
        encode(&v)
    }

    fn stop(&self, session: &str, prompt_id: &str) -> Vec<u8> {
        encode(&self.stamp(&self.stop, session, prompt_id))
    }

    fn stamp(&self, template: &Value, session: &str, prompt_id: &str) -> Value {
        let mut v = template.clone();
        // The transcript file is named after the session: keep them in step.
        if let (Some(old), Some(path)) = (
            template["session_id"].as_str().filter(|s| !s.is_empty()),
            template["transcript_path"].as_str(),
        ) {
            v["transcript_path"] = Value::from(path.replace(old, session));
        }
        v["session_id"] = Value::from(session);
        v["prompt_id"] = Value::from(prompt_id);
        v["cwd"] = Value::from(self.cwd.as_str());
        v
    }
}

/// A distinct Bash command per call: identical calls would trip dedup and
/// measure the deny path instead of the common allow path.
fn stamp_call(v: &mut Value, call: &str) {
    v["tool_input"]["command"] = Value::from(format!("echo {call}"));
    v["tool_use_id"] = Value::from(format!("toolu_bench_{call}"));
}

/// Pretty-printed like Claude Code's own payloads, so the byte count matches.
fn encode(v: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(v).expect("serialize payload")
}

/// One process to spawn: what Claude Code would run for one hook event.
struct Invocation {
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(OsString, OsString)>,
    stdin: Vec<u8>,
}

impl Invocation {
    /// The same process under GNU time, which reports its peak RSS.
    fn under_gnu_time(self) -> Invocation {
        let mut args = vec![
            "-f".to_string(),
            format!("{RSS_MARK}%M"),
            self.program.to_string_lossy().into_owned(),
        ];
        args.extend(self.args);
        Invocation {
            program: GNU_TIME.into(),
            args,
            ..self
        }
    }
}

/// Spawns, feeds stdin, waits. The clock covers spawn to reaped exit only:
/// building the Command is bench overhead, not hook cost.
fn run_raw(inv: &Invocation, ctx: &Ctx) -> Result<(Duration, Output), String> {
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.args)
        .env_clear()
        .envs(ctx.base_env.iter().cloned())
        .envs(inv.env.iter().cloned())
        .current_dir(&ctx.ws.repo)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", inv.program.display()))?;
    let fed = feed(&mut child, &inv.stdin);
    // Reap the child even when feeding failed, so no zombie outlives the run.
    let output = child.wait_with_output().map_err(|e| format!("wait: {e}"))?;
    let wall = start.elapsed();
    fed.map(|()| (wall, output))
}

/// Writes the payload and closes stdin, as Claude Code does.
fn feed(child: &mut std::process::Child, bytes: &[u8]) -> Result<(), String> {
    let Some(mut stdin) = child.stdin.take() else {
        return Ok(());
    };
    match stdin.write_all(bytes) {
        // /bin/true exits without reading: a closed pipe is not an error here.
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(format!("write stdin: {e}")),
        _ => Ok(()),
    }
}

/// One timed run, with what the hook answered.
fn run(inv: &Invocation, ctx: &Ctx) -> Result<(Duration, &'static str), String> {
    let (wall, out) = run_raw(inv, ctx)?;
    match out.status.code() {
        Some(0) => Ok((wall, classify(&out.stdout))),
        // Exit 2 is the hook protocol's "blocking error", a valid answer.
        Some(2) => Ok((wall, "exit 2")),
        _ => Err(describe_failure(&out)),
    }
}

fn classify(stdout: &[u8]) -> &'static str {
    let text = String::from_utf8_lossy(stdout);
    if text.trim().is_empty() {
        "silent"
    } else if text.contains("\"deny\"") {
        "deny"
    } else if text.contains("\"block\"") {
        "block"
    } else if text.contains("additionalContext") {
        "context"
    } else {
        "other output"
    }
}

fn describe_failure(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first: String = first.chars().take(160).collect();
    format!("{}: {}", out.status, first.replace('|', "\\|"))
}

/// The table's rows, in the order one round of measurement runs them. A fresh
/// session `i` sees a realistic mini-turn: prompt, pre, post, stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Row {
    Bare,
    Floor,
    SessionStart,
    Prompt,
    PreFresh,
    PreCargo,
    PreNpm,
    PrePytest,
    PrePipeline,
    PostFresh,
    Stop,
    PromptNext,
    StopJudge,
    GitStatus,
    PromptLoaded,
    PreLoaded,
    PostLoaded,
    StatusLoaded,
    PeerPre,
    PeerPost,
    PeerStop,
}

impl Row {
    const ALL: [Row; 21] = [
        Row::Bare,
        Row::Floor,
        Row::SessionStart,
        Row::Prompt,
        Row::PreFresh,
        Row::PreCargo,
        Row::PreNpm,
        Row::PrePytest,
        Row::PrePipeline,
        Row::PostFresh,
        Row::Stop,
        Row::PromptNext,
        Row::StopJudge,
        Row::GitStatus,
        Row::PromptLoaded,
        Row::PreLoaded,
        Row::PostLoaded,
        Row::StatusLoaded,
        Row::PeerPre,
        Row::PeerPost,
        Row::PeerStop,
    ];

    /// Rows measured back to back, in this order, within a round.
    const GROUPS: [&'static [Row]; 9] = [
        &[Row::Bare],
        &[Row::Floor],
        // Claude Code starts a session before its first prompt.
        &[
            Row::SessionStart,
            Row::Prompt,
            Row::PreFresh,
            Row::PreCargo,
            Row::PreNpm,
            Row::PrePytest,
            Row::PrePipeline,
            Row::PostFresh,
            Row::Stop,
            Row::PromptNext,
        ],
        &[Row::StopJudge],
        &[Row::GitStatus],
        // Like a fresh session's call, the loaded session's follows its own prompt: "flat" then
        // compares the same sequence at two state sizes.
        &[
            Row::PromptLoaded,
            Row::PreLoaded,
            Row::PostLoaded,
            Row::StatusLoaded,
        ],
        &[Row::PeerPre],
        &[Row::PeerPost],
        &[Row::PeerStop],
    ];

    /// The Bash command of a realistic-command row: the guard judges what a command names, so
    /// `echo call-N` alone would never show what resolving its paths costs.
    fn command(self) -> Option<&'static str> {
        Some(match self {
            Row::PreCargo => "cargo test --quiet",
            Row::PreNpm => "npm run build",
            Row::PrePytest => "pytest tests/test_a.py -x",
            Row::PrePipeline => {
                "git log --oneline -n 200 -- src | grep -v Merge | awk '{print $2}' | sort | uniq -c | sort -rn | head -20 > /tmp/top-words.txt"
            }
            _ => return None,
        })
    }

    fn is_peer(self) -> bool {
        matches!(self, Row::PeerPre | Row::PeerPost | Row::PeerStop)
    }

    fn label(self, s: &Settings) -> String {
        let repo = format!(
            "{}-file repo, {} modified",
            thousands(s.repo_files),
            s.repo_modified
        );
        let loaded = format!("{}-call session", thousands(s.calls));
        match self {
            Row::Bare => "bare process start (`/bin/true`, same stdin)".into(),
            Row::Floor => {
                "minimal Rust binary (reads stdin, exits; same profile and linking)".into()
            }
            Row::SessionStart => {
                "loopgate session-start, new session (creates the session's lock and state files)".into()
            }
            Row::Prompt => format!(
                "loopgate user-prompt-submit, new session ({repo}; turn stamp; after its session-start)"
            ),
            Row::PromptNext => format!(
                "loopgate user-prompt-submit, next prompt of that session ({repo}; creates no file)"
            ),
            Row::PreFresh => "loopgate pre-tool-use, fresh session".into(),
            Row::PreCargo | Row::PreNpm | Row::PrePytest | Row::PrePipeline => format!(
                "loopgate pre-tool-use, fresh session, `{}`",
                self.command().unwrap_or_default()
            ),
            Row::PostFresh => "loopgate post-tool-use, fresh session".into(),
            Row::Stop => format!("loopgate stop, a turn judged without a walk ({repo})"),
            Row::StopJudge => {
                format!("loopgate stop that must judge: failed edits, nothing changed ({repo}; walks the tree)")
            }
            Row::GitStatus => format!("`git status --porcelain` ({repo})"),
            Row::PromptLoaded => format!("loopgate user-prompt-submit, {loaded} (a new turn)"),
            Row::PreLoaded => format!("loopgate pre-tool-use, {loaded}"),
            Row::PostLoaded => format!("loopgate post-tool-use, {loaded}"),
            Row::StatusLoaded => format!("loopgate statusline, {loaded} (Claude Code's status bar)"),
            Row::PeerPre => "peer dedup-check.sh (pre, bash+jq)".into(),
            Row::PeerPost => "peer failure-reset.sh (post, bash+jq)".into(),
            Row::PeerStop => format!("peer progress-gate.sh (stop, {repo})"),
        }
    }
}

/// The process for run `i` of `row`.
fn invocation(row: Row, i: usize, ctx: &Ctx) -> Invocation {
    let p = &ctx.payloads;
    // Fresh rows: session i gets prompt, pre, post and stop, in that order.
    let (s, call) = (format!("bench-fresh-{i:05}"), format!("call-{i:05}"));
    let prompt = format!("{s}-prompt");
    let fresh = |sub: &str, stdin| ctx.loopgate(sub, &ctx.ws.fresh_state, &s, stdin);
    let peer = |script: &str, stdin| ctx.peer(script, &s, stdin);
    // Loaded rows: a new turn of the long session, and one call in it.
    let (ls, lp, lcall) = (
        LOADED_SESSION,
        format!("{LOADED_MEASURE_PROMPT}-{i:05}"),
        format!("measure-{i:05}"),
    );
    let loaded = |sub: &str, stdin| ctx.loopgate(sub, &ctx.ws.loaded_state, ls, stdin);
    match row {
        Row::Bare => ctx.bare(&s, p.pre(&s, &prompt, &call)),
        Row::Floor => ctx.floor(&s, p.pre(&s, &prompt, &call)),
        Row::GitStatus => ctx.git_status(&s),
        Row::StopJudge => {
            let j = format!("bench-judge-{i:05}");
            ctx.loopgate(
                "stop",
                &ctx.ws.fresh_state,
                &j,
                p.stop(&j, &format!("{j}-prompt")),
            )
        }
        Row::SessionStart => fresh("session-start", p.session_start(&s)),
        Row::Prompt => fresh("user-prompt-submit", p.prompt(&s, &prompt)),
        Row::PromptNext => fresh("user-prompt-submit", p.prompt(&s, &format!("{s}-next"))),
        Row::PreFresh => fresh("pre-tool-use", p.pre(&s, &prompt, &call)),
        Row::PreCargo | Row::PreNpm | Row::PrePytest | Row::PrePipeline => {
            let command = row.command().unwrap_or_default();
            let call = format!("{call}-{row:?}");
            fresh("pre-tool-use", p.pre_command(&s, &prompt, &call, command))
        }
        Row::PostFresh => fresh("post-tool-use", p.post(&s, &prompt, &call)),
        Row::Stop => fresh("stop", p.stop(&s, &prompt)),
        Row::PromptLoaded => loaded("user-prompt-submit", p.prompt(ls, &lp)),
        Row::PreLoaded => loaded("pre-tool-use", p.pre(ls, &lp, &lcall)),
        Row::PostLoaded => loaded("post-tool-use", p.post(ls, &lp, &lcall)),
        Row::StatusLoaded => loaded("statusline", p.status_line(ls)),
        Row::PeerPre => peer("dedup-check.sh", p.pre(&s, &prompt, &call)),
        Row::PeerPost => peer("failure-reset.sh", p.post(&s, &prompt, &call)),
        Row::PeerStop => peer("progress-gate.sh", p.stop(&s, &prompt)),
    }
}

const LOADED_SESSION: &str = "bench-loaded";
const LOADED_MEASURE_PROMPT: &str = "bench-loaded-measure";

/// Feeds `calls` distinct PreToolUse + PostToolUse pairs (a UserPromptSubmit
/// every CALLS_PER_TURN calls) through the binary.
///
/// The 20,000-odd processes run against a state dir on tmpfs when there is
/// one, then the dir is copied to disk for the measured rows: the session is
/// the same, but a per-call fsync no longer multiplies the bench's runtime.
fn build_loaded_session(ctx: &Ctx) -> Result<Build, String> {
    let staging = tmpfs_staging();
    let state: &Path = staging.as_ref().map_or(&ctx.ws.loaded_state, |t| t.path());
    let p = &ctx.payloads;
    let hook = |sub: &str, stdin: Vec<u8>| {
        run(&ctx.loopgate(sub, state, LOADED_SESSION, stdin), ctx).map(|_| ())
    };
    let started = Instant::now();
    let calls = ctx.settings.calls;
    for n in 0..calls {
        let prompt = format!("bench-loaded-turn-{:04}", n / CALLS_PER_TURN);
        if n % CALLS_PER_TURN == 0 {
            hook("user-prompt-submit", p.prompt(LOADED_SESSION, &prompt))?;
        }
        let call = format!("build-{n:05}");
        hook("pre-tool-use", p.pre(LOADED_SESSION, &prompt, &call))?;
        hook("post-tool-use", p.post(LOADED_SESSION, &prompt, &call))?;
        if (n + 1) % 1000 == 0 {
            eprintln!("loaded session: {} / {calls} calls", n + 1);
        }
    }
    hook(
        "user-prompt-submit",
        p.prompt(LOADED_SESSION, LOADED_MEASURE_PROMPT),
    )?;
    let took = started.elapsed();
    if let Some(staging) = &staging {
        copy_tree(staging.path(), &ctx.ws.loaded_state)
            .map_err(|e| format!("copy the loaded state to disk: {e}"))?;
    }
    eprintln!(
        "loaded session: {calls} calls in {:.1} s{}",
        took.as_secs_f64(),
        if staging.is_some() {
            " (state on tmpfs)"
        } else {
            ""
        }
    );
    Ok(Build {
        took,
        on_tmpfs: staging.is_some(),
    })
}

/// How long feeding the loaded session took, and where its state was.
struct Build {
    took: Duration,
    on_tmpfs: bool,
}

fn tmpfs_staging() -> Option<TempDir> {
    let shm = Path::new("/dev/shm");
    if fs_type(shm).as_deref() != Some("tmpfs") {
        return None;
    }
    tempfile::Builder::new()
        .prefix("loopgate-bench-")
        .tempdir_in(shm)
        .ok()
}

/// Copies files and dirs with their permission bits (loopgate keeps its state
/// private, and may check). Symlinks are not expected in a state dir.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let meta = entry.metadata()?;
        if meta.is_dir() {
            std::fs::create_dir_all(&dst)?;
            copy_tree(&src, &dst)?;
            std::fs::set_permissions(&dst, meta.permissions())?;
        } else if meta.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Samples and answers of one row, or why it has none.
#[derive(Default)]
struct Record {
    samples: Vec<Duration>,
    answers: BTreeMap<&'static str, usize>,
    failure: Option<String>,
}

impl Record {
    fn median_ms(&self) -> Option<f64> {
        self.percentile_ms(50.0)
    }

    fn p95_ms(&self) -> Option<f64> {
        self.percentile_ms(95.0)
    }

    /// None for a failed row, whose samples (if any) are not to be trusted.
    fn percentile_ms(&self, pct: f64) -> Option<f64> {
        match self.failure {
            Some(_) => None,
            None => percentile_ms(&self.samples, pct),
        }
    }
}

struct Records(BTreeMap<Row, Record>);

impl Records {
    fn new(ctx: &Ctx) -> Self {
        let mut records = Records(Row::ALL.iter().map(|&r| (r, Record::default())).collect());
        if !ctx.has_jq {
            for row in Row::ALL.into_iter().filter(|r| r.is_peer()) {
                records.fail(row, "skipped: jq not installed".into());
            }
        }
        records
    }

    fn fail(&mut self, row: Row, why: String) {
        self.0
            .get_mut(&row)
            .expect("every row has a record")
            .failure = Some(why);
    }

    fn get(&self, row: Row) -> &Record {
        &self.0[&row]
    }
}

/// Round-robin over the rows, warm-up runs discarded. A row that fails once
/// stops being run: a stub or crash would only repeat the same error.
fn measure(ctx: &Ctx, records: &mut Records) {
    let Settings { warmup, runs, .. } = ctx.settings;
    let started = Instant::now();
    // A process runs slower right after a heavy one (a 10,000-file walk, a bash pipeline) has
    // evicted the caches, so a fixed row order charges some rows for their neighbours. Each round
    // takes the rows in a new order (seeded, so runs repeat); only a fresh session's own events
    // keep their real order.
    let mut rng = fastrand::Rng::with_seed(0x6c6f_6f70);
    let mut groups = Row::GROUPS.to_vec();
    let grouped: Vec<Row> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    assert!(
        grouped.len() == Row::ALL.len() && Row::ALL.iter().all(|r| grouped.contains(r)),
        "every row is in exactly one group"
    );
    for i in 0..warmup + runs {
        rng.shuffle(&mut groups);
        for &row in groups.iter().flat_map(|g| g.iter()) {
            let record = records.0.get_mut(&row).expect("every row has a record");
            if record.failure.is_some() {
                continue;
            }
            if row == Row::StopJudge {
                if let Err(e) = judge_setup(i, ctx) {
                    record.failure = Some(format!("setup failed: {e}"));
                    continue;
                }
            }
            match run(&invocation(row, i, ctx), ctx) {
                Ok((wall, answer)) if i >= warmup => {
                    record.samples.push(wall);
                    *record.answers.entry(answer).or_default() += 1;
                }
                Ok(_) => {}
                Err(e) => record.failure = Some(format!("failed: {e}")),
            }
        }
        if (i + 1) % 50 == 0 {
            eprintln!("measured {} / {} rounds", i + 1, warmup + runs);
        }
    }
    eprintln!("measured in {:.1} s", started.elapsed().as_secs_f64());
}

/// Untimed: a turn that tried to edit and failed, so its Stop must judge whether anything changed.
fn judge_setup(i: usize, ctx: &Ctx) -> Result<(), String> {
    let j = format!("bench-judge-{i:05}");
    let prompt = format!("{j}-prompt");
    let p = &ctx.payloads;
    let state = &ctx.ws.fresh_state;
    run(
        &ctx.loopgate("user-prompt-submit", state, &j, p.prompt(&j, &prompt)),
        ctx,
    )?;
    let mut fail = p.stamp(&p.pre, &j, &prompt);
    fail["hook_event_name"] = Value::from("PostToolUseFailure");
    fail["tool_name"] = Value::from("Edit");
    fail["tool_input"] = serde_json::json!({
        "file_path": ctx.ws.repo.join("README.md"), "old_string": "absent", "new_string": "x"
    });
    fail["tool_use_id"] = Value::from(format!("toolu_judge_{i}"));
    fail["error"] =
        Value::from("<tool_use_error>String to replace not found in file.</tool_use_error>");
    run(
        &ctx.loopgate("post-tool-use-failure", state, &j, encode(&fail)),
        ctx,
    )?;
    // The walk compares ctimes with the stamp at kernel-tick resolution: a real turn is long.
    std::thread::sleep(Duration::from_millis(10));
    Ok(())
}

/// Instructions per call under `valgrind --tool=callgrind`: noise-free, so a regression shows.
fn instructions(inv: &Invocation, ctx: &Ctx) -> Result<u64, String> {
    let mut args = vec![
        "--tool=callgrind".to_string(),
        "--callgrind-out-file=/dev/null".to_string(),
        inv.program.to_string_lossy().into_owned(),
    ];
    args.extend(inv.args.iter().cloned());
    let wrapped = Invocation {
        program: "valgrind".into(),
        args,
        env: inv.env.clone(),
        stdin: inv.stdin.clone(),
    };
    let (_, out) = run_raw(&wrapped, ctx)?;
    // A call that died (a signal under valgrind) or failed open ran only part of its path: its
    // count would pass for a real one.
    if !out.status.success() {
        return Err(describe_failure(&out));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr
        .lines()
        .find_map(|l| l.split("Collected : ").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| describe_failure(&out))
}

fn measure_instructions(ctx: &Ctx) -> Vec<(Row, Result<u64, String>)> {
    if !ctx.has_callgrind {
        return Vec::new();
    }
    let i = ctx.settings.warmup + ctx.settings.runs + ctx.settings.memory_runs + 1;
    [
        Row::Floor,
        Row::SessionStart,
        Row::Prompt,
        Row::PromptNext,
        Row::PreFresh,
        Row::PreCargo,
        Row::PreNpm,
        Row::PrePytest,
        Row::PrePipeline,
        Row::PostFresh,
        Row::PromptLoaded,
        Row::PreLoaded,
        Row::PostLoaded,
        Row::StatusLoaded,
    ]
    .into_iter()
    .map(|row| (row, instructions(&invocation(row, i, ctx), ctx)))
    .collect()
}

/// What creating a file costs in a directory, measured apart from any hook.
struct Creation {
    median_ms: f64,
    max_ms: f64,
    files: usize,
    /// Whether the directory's ext4 filesystem has a journal (None: not ext4, or unknown).
    journal: Option<bool>,
}

/// Times `O_CREAT` of empty files in `dir` (the fresh rows' sessions dir): on a filesystem whose
/// inode allocation is slow, a new session's two files are most of its first call.
fn creation_cost(dir: &Path) -> Option<Creation> {
    const FILES: usize = 50;
    let mut samples = Vec::with_capacity(FILES);
    for n in 0..FILES {
        let path = dir.join(format!("bench-create-probe-{n}"));
        let t = Instant::now();
        std::fs::File::create(&path).ok()?;
        samples.push(t.elapsed());
    }
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    Some(Creation {
        median_ms: percentile_ms(&samples, 50.0)?,
        max_ms: samples.iter().map(ms).fold(0.0, f64::max),
        files: FILES,
        journal: ext4_journal(dir),
    })
}

/// Whether the ext4 filesystem holding `dir` has a journal: a journalled ext4 has an entry
/// `<device>-<inode>` under `/proc/fs/jbd2`, beside its `/proc/fs/ext4/<device>`.
fn ext4_journal(dir: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (
        ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
        (dev & 0xff) | ((dev >> 12) & !0xff),
    );
    let name = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let name = name.file_name()?.to_str()?.to_string();
    if !Path::new("/proc/fs/ext4").join(&name).exists() {
        return None;
    }
    let prefix = format!("{name}-");
    let journals = std::fs::read_dir("/proc/fs/jbd2").ok();
    Some(journals.is_some_and(|rd| {
        rd.filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
    }))
}

/// Nearest-rank percentile; the median averages the two middle samples.
fn percentile_ms(samples: &[Duration], pct: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let n = ms.len();
    if pct == 50.0 {
        return Some((ms[(n - 1) / 2] + ms[n / 2]) / 2.0);
    }
    let rank = ((pct / 100.0) * n as f64).ceil() as usize;
    Some(ms[rank.clamp(1, n) - 1])
}

/// The largest file under the loaded session's state dir, skipping the
/// append-only `events.jsonl` log (and its rotations): the per-session state
/// a hook re-reads on every call.
fn largest_state_file(dir: &Path) -> Option<(u64, String)> {
    let mut best: Option<(u64, String)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
            } else if !entry
                .file_name()
                .to_string_lossy()
                .starts_with("events.jsonl")
            {
                let size = encoded_state_size(&path).unwrap_or(meta.len());
                if best.as_ref().is_none_or(|(b, _)| size > *b) {
                    let name = path.strip_prefix(dir).unwrap_or(&path);
                    best = Some((size, name.display().to_string()));
                }
            }
        }
    }
    best
}

/// A `.state` file holds two slots (`src/store/mod.rs`), the second at a fixed offset, so its length says
/// little: the state's size is the larger slot's header plus body.
fn encoded_state_size(path: &Path) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    if path.extension()? != "state" {
        return None;
    }
    let f = std::fs::File::open(path).ok()?;
    [0, loopgate::store::SLOT]
        .into_iter()
        .filter_map(|at| {
            let mut h = [0u8; loopgate::store::codec::HEADER];
            f.read_exact_at(&mut h, at).ok()?;
            let (_, len) = loopgate::store::codec::peek_header(&h).ok()?;
            Some((len + loopgate::store::codec::HEADER) as u64)
        })
        .max()
}

/// Peak RSS per process, max over the memory runs.
struct Memory(Vec<(Row, Result<u64, String>)>);

/// Peak memory of the hook processes. GNU time's `%M` is `ru_maxrss` from
/// `wait4` on exactly that child: the kernel's own high-water mark, exact
/// after exit. The alternatives fail: getrusage(RUSAGE_CHILDREN) is a running
/// max over every child this bench ever reaped (git and bash would mask
/// loopgate) and needs unsafe libc, which the crate forbids; /proc/<pid>/status
/// VmHWM is gone at exit, and polling it races a 1 ms process.
fn measure_memory(ctx: &Ctx) -> Option<Memory> {
    if !ctx.has_gnu_time {
        return None;
    }
    // Prompt runs first so Stop has its turn baseline; it is reported too.
    let rows = [
        Row::Bare,
        Row::Prompt,
        Row::PreLoaded,
        Row::PostLoaded,
        Row::Stop,
    ];
    let first = ctx.settings.warmup + ctx.settings.runs;
    let mut peaks: Vec<(Row, Result<u64, String>)> = rows.iter().map(|&r| (r, Ok(0))).collect();
    for i in first..first + ctx.settings.memory_runs {
        for (row, peak) in peaks.iter_mut() {
            if let Ok(max) = *peak {
                let inv = invocation(*row, i, ctx).under_gnu_time();
                *peak = peak_rss_kib(&inv, ctx).map(|kib| kib.max(max));
            }
        }
    }
    Some(Memory(peaks))
}

fn peak_rss_kib(inv: &Invocation, ctx: &Ctx) -> Result<u64, String> {
    let (_, out) = run_raw(inv, ctx)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr
        .lines()
        .find_map(|l| l.strip_prefix(RSS_MARK))
        .and_then(|kib| kib.trim().parse().ok())
        .ok_or_else(|| describe_failure(&out))
}

fn loopgate_version(ctx: &Ctx) -> String {
    let inv = Invocation {
        program: ctx.loopgate.clone(),
        args: vec!["--version".into()],
        env: vec![],
        stdin: vec![],
    };
    match run_raw(&inv, ctx) {
        Ok((_, out)) if out.status.success() => {
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
        _ => "loopgate (version unknown)".into(),
    }
}

/// Everything measured, ready to render as Markdown.
struct Report<'a> {
    ctx: &'a Ctx,
    records: &'a Records,
    build: Option<Build>,
    state_file: Option<(u64, String)>,
    memory: Option<Memory>,
    instructions: Vec<(Row, Result<u64, String>)>,
    creation: Option<Creation>,
    version: String,
}

impl Report<'_> {
    fn render(&self) -> String {
        let mut md = String::new();
        self.header(&mut md);
        self.latency_table(&mut md);
        self.state_and_memory(&mut md);
        self.targets(&mut md);
        md
    }

    fn header(&self, md: &mut String) {
        let s = &self.ctx.settings;
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let _ = writeln!(md, "# loopgate hook latency\n");
        let _ = writeln!(
            md,
            "{} ({}); whole-process wall time (spawn to exit, stdin piped), {} runs per row \
             after {} warm-up, rows interleaved in a new order each round; {} cores; state dirs on {}.{}\n",
            self.version,
            self.ctx.linking,
            s.runs,
            s.warmup,
            cores,
            self.ctx
                .ws
                .fs_type
                .as_deref()
                .unwrap_or("an unknown filesystem"),
            if s.full {
                ""
            } else {
                " SMOKE RUN (cargo test): sizes shrunk."
            }
        );
    }

    fn latency_table(&self, md: &mut String) {
        let bare = self.median(Row::Bare);
        let floor = self.median(Row::Floor);
        let _ = writeln!(
            md,
            "| row | median ms | p95 ms | × minimal Rust | × `/bin/true` | answers |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---|");
        for row in Row::ALL {
            let label = row.label(&self.ctx.settings);
            let record = self.records.get(row);
            if let Some(why) = &record.failure {
                let _ = writeln!(md, "| {label} | – | – | – | – | {why} |");
                continue;
            }
            let median = record.median_ms().unwrap_or(f64::NAN);
            let ratio = bare.map_or(f64::NAN, |b| median / b);
            let to_floor = floor.map_or(f64::NAN, |f| median / f);
            let _ = writeln!(
                md,
                "| {label} | {median:.2} | {:.2} | {to_floor:.2}× | {ratio:.2}× | {} |",
                record.p95_ms().unwrap_or(f64::NAN),
                answers(&record.answers)
            );
        }
        md.push('\n');
    }

    fn state_and_memory(&self, md: &mut String) {
        let s = &self.ctx.settings;
        if let Some(c) = &self.creation {
            let _ = writeln!(
                md,
                "Creating one empty file in the fresh rows' `sessions/` dir (a new session's start \
                 creates two), timed alone after the rows: median {:.3} ms, max {:.3} ms over {} files; \
                 the filesystem {}.\n",
                c.median_ms,
                c.max_ms,
                c.files,
                match c.journal {
                    Some(true) => "is ext4 with a journal",
                    Some(false) => {
                        "is ext4 without a journal (whose inode allocator skips every recently \
                         freed inode, one cache lookup each: the cost grows with deletions nearby \
                         in the last minutes)"
                    }
                    None => "is not ext4, or its journal is unknown",
                }
            );
        }
        if let Some(build) = &self.build {
            let secs = build.took.as_secs_f64();
            let per_call = secs * 1e3 / s.calls.max(1) as f64;
            let _ = writeln!(
                md,
                "Building the {}-call session took {secs:.1} s ({per_call:.2} ms per pre+post pair{}).\n",
                thousands(s.calls),
                if build.on_tmpfs { ", state on tmpfs" } else { "" }
            );
        }
        match &self.state_file {
            Some((size, name)) => {
                let _ = writeln!(
                    md,
                    "Largest state file after {} calls (excluding events.jsonl): `{name}`, {}.\n",
                    thousands(s.calls),
                    kib(*size)
                );
            }
            None => md.push_str("No state file found in the loaded session's state dir.\n\n"),
        }
        let Some(Memory(peaks)) = &self.memory else {
            md.push_str("Peak memory: skipped (GNU time not at /usr/bin/time).\n\n");
            return;
        };
        let _ = writeln!(
            md,
            "| process (peak RSS, max of {} runs) | MiB |",
            s.memory_runs
        );
        md.push_str("|---|---:|\n");
        for (row, peak) in peaks {
            let value = match peak {
                Ok(k) => format!("{:.1}", *k as f64 / 1024.0),
                Err(e) => format!("failed: {e}"),
            };
            let _ = writeln!(md, "| {} | {value} |", row.label(s));
        }
        md.push('\n');
        if self.instructions.is_empty() {
            md.push_str("Instructions per call: skipped (no valgrind).\n\n");
            return;
        }
        md.push_str(
            "| process (`valgrind --tool=callgrind`, one call) | instructions |\n|---|---:|\n",
        );
        for (row, n) in &self.instructions {
            let value = match n {
                Ok(n) => thousands(*n as usize),
                Err(e) => format!("failed: {e}"),
            };
            let _ = writeln!(md, "| {} | {value} |", row.label(s));
        }
        md.push('\n');
    }

    fn targets(&self, md: &mut String) {
        md.push_str("## Targets\n\n");
        for t in self.target_list() {
            let _ = writeln!(md, "- **{}** {} — {}", t.verdict, t.goal, t.measured);
        }
    }

    fn target_list(&self) -> Vec<Target> {
        vec![
            self.pre_post_vs(Row::Floor, "the minimal Rust binary", TARGET_X_FLOOR),
            self.pre_post_vs(Row::Bare, "`/bin/true`", TARGET_X_BARE),
            self.flatness(),
            self.status_line(),
            self.realistic_commands(),
            self.prompt_vs_floor(),
            self.stop_vs_git_status(),
            self.peak_memory(),
            self.state_size(),
        ]
    }

    fn median(&self, row: Row) -> Option<f64> {
        self.records.get(row).median_ms()
    }

    fn pre_post_vs(&self, base: Row, name: &str, max: f64) -> Target {
        let goal = format!(
            "pre-tool-use and post-tool-use medians ≤ {max}× {name}, fresh and at {} calls",
            thousands(self.ctx.settings.calls)
        );
        let rows = [
            Row::PreFresh,
            Row::PostFresh,
            Row::PreLoaded,
            Row::PostLoaded,
        ];
        let (Some(b), Some(worst)) = (self.median(base), self.worst_median(&rows)) else {
            return Target::skip(goal);
        };
        let ratio = worst.1 / b;
        Target::check(
            goal,
            ratio <= max,
            format!(
                "worst {ratio:.2}× ({} {:.2} ms vs {b:.2} ms)",
                worst.0.label(&self.ctx.settings),
                worst.1
            ),
        )
    }

    /// The slowest of `rows`; None if any of them has no median.
    fn worst_median(&self, rows: &[Row]) -> Option<(Row, f64)> {
        let medians: Option<Vec<(Row, f64)>> = rows
            .iter()
            .map(|&r| self.median(r).map(|m| (r, m)))
            .collect();
        medians?.into_iter().max_by(|a, b| a.1.total_cmp(&b.1))
    }

    fn prompt_vs_floor(&self) -> Target {
        let goal = format!(
            "user-prompt-submit ≤ {TARGET_PROMPT_X_FLOOR}× the minimal Rust binary on the {}-file repo",
            thousands(self.ctx.settings.repo_files)
        );
        let (Some(p), Some(f)) = (self.median(Row::Prompt), self.median(Row::Floor)) else {
            return Target::skip(goal);
        };
        // Judged on a new session's first prompt, which follows its session-start as in Claude
        // Code (the session-start that creates the two files has its own row); a later prompt of
        // the same session is shown beside it.
        let next = self.median(Row::PromptNext).map_or(String::new(), |n| {
            format!("; next prompt of a session {:.2}×", n / f)
        });
        Target::check(
            goal,
            p / f <= TARGET_PROMPT_X_FLOOR,
            format!("new session {:.2}× ({p:.2} ms vs {f:.2} ms){next}", p / f),
        )
    }

    fn stop_vs_git_status(&self) -> Target {
        let goal = "a Stop that must judge ≤ `git status --porcelain` on the same repo".to_string();
        let (Some(stop), Some(git)) = (self.median(Row::StopJudge), self.median(Row::GitStatus))
        else {
            return Target::skip(goal);
        };
        Target::check(
            goal,
            stop <= git,
            format!("{stop:.2} ms vs {git:.2} ms ({:.2}×)", stop / git),
        )
    }

    fn state_size(&self) -> Target {
        let goal = format!(
            "state ≤ {} after {} calls of ordinary work",
            kib(TARGET_STATE_BYTES),
            thousands(self.ctx.settings.calls)
        );
        match &self.state_file {
            Some((size, name)) if self.build.is_some() => Target::check(
                goal,
                *size <= TARGET_STATE_BYTES,
                format!("{} (`{name}`)", kib(*size)),
            ),
            _ => Target::skip(goal),
        }
    }

    fn flatness(&self) -> Target {
        let calls = thousands(self.ctx.settings.calls);
        let goal =
            format!("latency flat at {calls} calls (median ≤ {TARGET_FLAT_RATIO}× fresh session)");
        let ratio = |loaded, fresh| Some(self.median(loaded)? / self.median(fresh)?);
        let (Some(pre), Some(post)) = (
            ratio(Row::PreLoaded, Row::PreFresh),
            ratio(Row::PostLoaded, Row::PostFresh),
        ) else {
            return Target::skip(goal);
        };
        Target::check(
            goal,
            pre.max(post) <= TARGET_FLAT_RATIO,
            format!("pre {pre:.2}×, post {post:.2}×"),
        )
    }

    /// Issue 28: the status line runs on every screen update, so it must cost less than the hook
    /// call it reports on, read from the longest session.
    fn status_line(&self) -> Target {
        let calls = thousands(self.ctx.settings.calls);
        let goal = format!("statusline at {calls} calls median ≤ pre-tool-use of a fresh session");
        let (Some(line), Some(pre)) = (self.median(Row::StatusLoaded), self.median(Row::PreFresh))
        else {
            return Target::skip(goal);
        };
        Target::check(
            goal,
            line <= pre,
            format!("{line:.2} ms vs {pre:.2} ms ({:.2}×)", line / pre),
        )
    }

    /// Issue 21: a call whose command names paths (`cargo test`, a pipeline) costs what an
    /// `echo` call costs, within the flatness margin.
    fn realistic_commands(&self) -> Target {
        let goal = format!(
            "pre-tool-use of realistic commands (cargo, npm, pytest, a pipeline) median ≤ {TARGET_FLAT_RATIO}× the echo call's"
        );
        let rows = [Row::PreCargo, Row::PreNpm, Row::PrePytest, Row::PrePipeline];
        let (Some(echo), Some((row, worst))) =
            (self.median(Row::PreFresh), self.worst_median(&rows))
        else {
            return Target::skip(goal);
        };
        let ratio = worst / echo;
        Target::check(
            goal,
            ratio <= TARGET_FLAT_RATIO,
            format!(
                "worst {ratio:.2}× (`{}` {worst:.2} ms vs {echo:.2} ms)",
                row.command().unwrap_or_default()
            ),
        )
    }

    fn peak_memory(&self) -> Target {
        let goal = format!(
            "peak memory of pre-tool-use ≤ {} MiB",
            TARGET_RSS_KIB / 1024
        );
        let peak = self.memory.as_ref().and_then(|Memory(peaks)| {
            peaks
                .iter()
                .find(|(row, _)| *row == Row::PreLoaded)
                .and_then(|(_, peak)| peak.as_ref().ok().copied())
        });
        match peak {
            Some(kib) if self.build.is_some() => Target::check(
                goal,
                kib <= TARGET_RSS_KIB,
                format!(
                    "{:.1} MiB ({}-call session)",
                    kib as f64 / 1024.0,
                    thousands(self.ctx.settings.calls)
                ),
            ),
            _ => Target::skip(goal),
        }
    }
}

struct Target {
    verdict: &'static str,
    goal: String,
    measured: String,
}

impl Target {
    fn check(goal: String, ok: bool, measured: String) -> Self {
        let verdict = if ok { "PASS" } else { "MISS" };
        Target {
            verdict,
            goal,
            measured,
        }
    }

    fn skip(goal: String) -> Self {
        Target {
            verdict: "SKIP",
            goal,
            measured: "not measured (see the rows above)".into(),
        }
    }
}

fn answers(answers: &BTreeMap<&'static str, usize>) -> String {
    let parts: Vec<String> = answers.iter().map(|(a, n)| format!("{a} ×{n}")).collect();
    parts.join(", ")
}

fn kib(bytes: u64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// 10000 -> "10,000", to match how the targets are worded.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `target/bench-latency.md` (or under CARGO_TARGET_DIR). Smoke runs leave a
/// real report in place.
fn write_report(settings: &Settings, report: &str) {
    if !settings.full {
        return;
    }
    let path = target_dir().join("bench-latency.md");
    match std::fs::write(&path, report) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}
