//! The failure policy under real faults (README, "Failure policy"): writers killed mid-update,
//! corrupt state, a held lock, a read-only or full disk, a clock that goes backwards. In every case
//! what a user would notice: the hook exits 0, or exits 1 (non-blocking) with exactly one
//! `loopgate: ` line on stderr; never 2; and what is on disk stays whole and parseable.

use crate::common::{Env, Out, BIN};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A tiny xorshift64* generator: reproducible fault timings without another crate.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The hook command exactly as `Env::command` builds it, as a std `Command` so a test can spawn
/// it, kill it, or run it under a wrapper (`program` first, the loopgate binary among `args`).
pub(crate) fn std_command(env: &Env, program: &str, args: &[&str]) -> Command {
    let home = env.state.parent().unwrap();
    let mut c = Command::new(program);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .env("LOOPGATE_STATE_DIR", &env.state)
        .env("CLAUDE_PROJECT_DIR", &env.project)
        .current_dir(&env.project)
        .args(env.hook_args(args));
    for (k, v) in &env.vars {
        c.env(k, v);
    }
    c
}

fn spawn_hook(env: &Env, sub: &str, payload: &Value) -> Child {
    let mut child = std_command(env, BIN, &[sub])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn loopgate");
    // A child killed before it reads its stdin makes this write fail: that is the fault we want.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes());
    child
}

fn out_of(o: std::process::Output) -> Out {
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The README's promise for every failure: exit 1, nothing on stdout, exactly one stderr line.
fn assert_fails_open(out: &Out, what: &str) {
    assert_eq!(
        out.code, 1,
        "{what}: exit 1 (non-blocking); stdout {:?} stderr {:?}",
        out.stdout, out.stderr
    );
    assert!(out.stdout.is_empty(), "{what}: no answer: {:?}", out.stdout);
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "{what}: exactly one stderr line: {:?}",
        out.stderr
    );
    assert!(
        out.stderr.starts_with("loopgate: ") && out.stderr.ends_with('\n'),
        "{what}: {:?}",
        out.stderr
    );
}

fn sessions_dir(env: &Env) -> PathBuf {
    env.state.join("sessions")
}

/// Files in the sessions dir whose name ends with `.ext` (`state`, `lock`).
fn files_with_ext(env: &Env, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(sessions_dir(env))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

fn corrupt_files(env: &Env) -> Vec<PathBuf> {
    std::fs::read_dir(sessions_dir(env))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".corrupt-"))
        .collect()
}

/// The one session's state file; it must exist and decode (a valid slot).
fn state_file(env: &Env) -> (PathBuf, Vec<u8>) {
    let files = files_with_ext(env, "state");
    assert_eq!(files.len(), 1, "one session state file: {files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    assert!(
        loopgate::store::Store::peek(&files[0]).is_some(),
        "state file does not decode: {:?}",
        &bytes[..bytes.len().min(64)]
    );
    (files[0].clone(), bytes)
}

fn calls(env: &Env) -> u64 {
    let st = env.status();
    assert_eq!(st.as_array().map(Vec::len), Some(1), "{st}");
    st[0]["totals"]["calls"].as_u64().unwrap()
}

/// Calls recorded: in the state, plus those journaled while the lock was held past its deadline
/// (capped at 5 s whatever the config says: a starved machine gets there) and not merged yet.
fn recorded(env: &Env) -> u64 {
    let journaled = files_with_ext(env, "journal")
        .iter()
        .map(|p| {
            std::fs::read(p)
                .unwrap()
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .count() as u64
        })
        .sum::<u64>();
    calls(env) + journaled
}

/// The kill storm's default seed; `LOOPGATE_FAULT_SEED` runs another.
const DEFAULT_SEED: u64 = 0x5eed_100b;

fn set_var(env: &mut Env, k: &str, v: &str) {
    env.vars.retain(|(key, _)| key != k);
    env.vars.push((k.into(), v.into()));
}

fn seed(env: &Env, n: usize) {
    for i in 0..n {
        let out = env.bash(&format!("echo seed-{i}"), Ok("seed"));
        assert!(out.is_silent_allow(), "{}", out.stderr);
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Writers killed with SIGKILL at random moments.

/// One hook process of the kill storm: when it was started, when (if ever) to kill it.
struct Victim {
    child: Child,
    kill_at: Option<Duration>,
    exited: Option<(Duration, std::process::ExitStatus)>,
}

#[test]
fn writers_killed_at_random_moments_never_corrupt_or_lose_a_completed_update() {
    // A generous lock deadline: an exit 1 here can then only mean a real failure (corrupt state
    // moved aside), not a slow machine. The hook caps it at 5 s: a call starved past that is
    // journaled, and counted through the journal (`recorded`).
    kill_storm(1000, 20_000);
}

/// The same storm with a lock deadline of 1 ms: most contended calls go to the journal, and
/// kills land in appends and merges too. No completed update may be lost there either.
#[test]
fn writers_killed_while_calls_are_journaled_never_lose_a_completed_update() {
    let env = kill_storm(300, 1);
    let merges = env
        .events()
        .iter()
        .filter(|e| e["reason"].as_str().is_some_and(|r| r.contains("merged")))
        .count();
    assert!(merges > 0, "the journal was used and merged");
    eprintln!("journal merged {merges} times");
}

/// Hook processes 8 at a time, about 40% of them killed at random moments; returns the session.
fn kill_storm(updates: usize, lock_timeout_ms: u64) -> Env {
    const BATCH: usize = 8;
    let seed = std::env::var("LOOPGATE_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let mut rng = Rng::new(seed);
    let env = Env::new().config(&format!("lock_timeout_ms = {lock_timeout_ms}\n"));
    let started_at = Instant::now();
    let (mut started, mut completed, mut killed) = (0u64, 0u64, 0u64);
    // How long a hook of a batch lives, learnt as the storm goes, so the kills land anywhere in a
    // hook's life (exec, config, lock wait, engine, temp file, fsync, rename, exit) on any machine.
    let mut lifetime = Duration::from_millis(20);
    let mut before = 0u64;
    let mut n = 0usize;
    while n < updates {
        let t = Instant::now();
        let mut batch: Vec<Victim> = (0..BATCH.min(updates - n))
            .map(|_| {
                n += 1;
                let p = env.base(
                    "PreToolUse",
                    json!({"tool_name": "Bash", "tool_input": {"command": format!("echo update-{n}")},
                           "tool_use_id": format!("kill-{n}")}),
                );
                // About 40% are killed, uniformly over 0..1.2 lifetimes after their batch began.
                let span = lifetime.as_micros() as u64 * 6 / 5;
                let kill_at = (rng.below(10) < 4)
                    .then(|| Duration::from_micros(rng.below(span.max(1))));
                Victim {
                    child: spawn_hook(&env, "pre-tool-use", &p),
                    kill_at,
                    exited: None,
                }
            })
            .collect();
        while batch.iter().any(|v| v.exited.is_none()) {
            let now = t.elapsed();
            assert!(now < Duration::from_secs(60), "a hook hung");
            for v in batch.iter_mut().filter(|v| v.exited.is_none()) {
                if v.kill_at.is_some_and(|k| k <= now) {
                    // SIGKILL on Unix; a child that already exited (unreaped) is not an error.
                    v.child.kill().unwrap();
                    v.kill_at = None;
                }
                if let Some(st) = v.child.try_wait().unwrap() {
                    v.exited = Some((t.elapsed(), st));
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let batch_len = batch.len() as u64;
        let mut batch_completed = 0;
        let mut lives = Vec::new();
        for mut v in batch.drain(..) {
            started += 1;
            let (at, st) = v.exited.unwrap();
            match st.code() {
                Some(0) => {
                    batch_completed += 1;
                    lives.push(at);
                }
                None => killed += 1,
                Some(c) => {
                    let mut err = String::new();
                    let _ =
                        std::io::Read::read_to_string(v.child.stderr.as_mut().unwrap(), &mut err);
                    panic!("seed {seed}: a hook that was not killed exited {c}: {err}");
                }
            }
        }
        if let Some(longest) = lives.iter().max() {
            lifetime = (lifetime * 3 + *longest) / 4;
        }
        completed += batch_completed;
        // After every batch of kills: the state file decodes, `status --json` reads it,
        // nothing was moved aside as corrupt, and every update whose writer exited 0 is in it.
        state_file(&env);
        assert_eq!(corrupt_files(&env), Vec::<PathBuf>::new(), "seed {seed}");
        let now = recorded(&env);
        assert!(
            now >= before + batch_completed && now <= before + batch_len,
            "seed {seed}, after update {n}: calls went {before} -> {now} with {batch_completed} \
             completed of {batch_len} started"
        );
        before = now;
    }
    let total = recorded(&env);
    assert!(
        total >= completed && total <= started,
        "calls {total}, completed {completed}, started {started}"
    );
    assert!(killed > 0, "no hook was killed: the fault never happened");
    // Writes are in place (two slots), so a kill leaves no temp file behind, ever: after the
    // storm and one more completed call, the sessions dir holds exactly the state and its lock.
    let after = env.bash("echo after the storm", Ok("x"));
    assert_eq!(after.code, 0, "{}", after.stderr);
    // (A call that found the lock busy past its deadline left a journal, emptied by the merge;
    // it is no temp file and stays for the next busy call, as does the notice said about it.)
    let mut names: Vec<String> = std::fs::read_dir(sessions_dir(&env))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
            !(ext == "notice" || ext == "journal" && std::fs::metadata(p).unwrap().len() == 0)
        })
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "only the state and its lock: {names:?}");
    assert!(names
        .iter()
        .all(|n| n.ends_with(".lock") || n.ends_with(".state")));
    let leftovers = temp_leftovers(&env).len();
    eprintln!(
        "kill storm (seed {seed}): {started} updates, {killed} killed, {completed} completed, \
         {total} recorded, {leftovers} orphan temp files, hook lifetime ~{} ms, {:.1} s",
        lifetime.as_millis(),
        started_at.elapsed().as_secs_f64()
    );
    env
}

// ---------------------------------------------------------------------------------------------
// 2. Corrupt state: moved aside byte for byte, one line, a fresh start.

#[test]
fn corrupt_state_files_are_moved_aside_intact_and_the_session_starts_fresh() {
    let mut rng = Rng::new(42);
    let garbage: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    type Corrupt = fn(&[u8], &[u8]) -> Vec<u8>;
    let cases: [(&str, Corrupt); 6] = [
        // Cut inside the first slot's body, as a write torn on a fresh file would be.
        ("truncated", |real, _| real[..40].to_vec()),
        ("empty", |_, _| Vec::new()),
        ("zeroed", |real, _| vec![0u8; real.len()]),
        ("binary garbage", |_, garbage| garbage.to_vec()),
        // The previous format, JSON: never parsed as a state.
        ("JSON", |_, _| {
            br#"{"version":1,"session":"s","totals":{"calls":99}}"#.to_vec()
        }),
        // Valid JSON, even, but no state loopgate writes is near this size: it cannot be ours.
        ("50 MB", |real, _| {
            let mut v = real.to_vec();
            v.resize(real.len() + (50 << 20), b' ');
            v
        }),
    ];
    for (name, corrupt) in cases {
        let env = Env::new();
        seed(&env, 5);
        assert_eq!(calls(&env), 5);
        let (path, real) = state_file(&env);
        let bad = corrupt(&real, &garbage);
        std::fs::write(&path, &bad).unwrap();

        let t = Instant::now();
        let out = env.pre("Bash", json!({"command": "ls"}), "after-corruption");
        // The call is judged on fresh state, and the human is told where the bad file went.
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        assert!(
            notice(&out).contains("moved to"),
            "{name}: a systemMessage says so: {:?}",
            out.stdout
        );
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{name}: took {:?}",
            t.elapsed()
        );
        let aside = corrupt_files(&env);
        assert_eq!(aside.len(), 1, "{name}: one file moved aside: {aside:?}");
        let aside_name = aside[0].file_name().unwrap().to_string_lossy().into_owned();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(
            aside_name.starts_with(&stem),
            "{name}: {aside_name} is next to {stem}"
        );
        assert!(
            out.stderr.contains(&aside_name) && out.stderr.contains("moved to"),
            "{name}: the line says where the file went: {}",
            out.stderr
        );
        assert!(
            std::fs::read(&aside[0]).unwrap() == bad,
            "{name}: the corrupt bytes are preserved, not deleted or rewritten"
        );
        // The next call is judged normally, on fresh state: the five seeded calls are gone.
        let next = env.pre("Bash", json!({"command": "ls"}), "next");
        assert!(next.is_silent_allow(), "{name}: {}", next.stderr);
        state_file(&env);
        let after = calls(&env);
        assert_eq!(after, 2, "{name}: fresh state, then two calls");
        let logged = env
            .events()
            .iter()
            .filter(|e| e["detector"] == "state_store" && e["decision"] == "notice")
            .count();
        assert_eq!(logged, 1, "{name}: the notice is in the log");
        assert_eq!(corrupt_files(&env).len(), 1, "{name}: nothing else moved");
    }
}

// ---------------------------------------------------------------------------------------------
// 3. The session lock held by another process past the deadline.

/// Another holder of the std `File::lock` (flock) on a lock file, as a wedged loopgate process
/// (or an agent running `flock`) would be; it lets go only when told, long after any deadline.
pub(crate) struct LockHolder {
    release: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl LockHolder {
    pub(crate) fn hold(lock_path: PathBuf) -> LockHolder {
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&lock_path)
                .unwrap();
            f.lock().unwrap();
            held_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(Duration::from_secs(120));
            drop(f);
        });
        held_rx.recv().unwrap();
        LockHolder { release, thread }
    }

    pub(crate) fn release(self) {
        self.release.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

#[test]
fn a_lock_held_past_the_deadline_is_judged_journaled_and_said_once() {
    let env = Env::new().config("lock_timeout_ms = 300\n");
    seed(&env, 3);
    let (state_path, before) = state_file(&env);
    let holder = LockHolder::hold(files_with_ext(&env, "lock").pop().unwrap());

    let id = env.id();
    let input = json!({"command": "make"});
    let hooks: Vec<(&str, Value)> = vec![
        (
            "pre-tool-use",
            env.base(
                "PreToolUse",
                json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id}),
            ),
        ),
        (
            "post-tool-use",
            env.base(
                "PostToolUse",
                json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id,
                       "tool_response": {"stdout": "ok", "stderr": "", "interrupted": false}}),
            ),
        ),
        (
            "post-tool-use-failure",
            env.base(
                "PostToolUseFailure",
                json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id,
                       "error": "Exit code 2", "is_interrupt": false}),
            ),
        ),
        (
            "post-tool-batch",
            env.base(
                "PostToolBatch",
                json!({"tool_calls": [{"tool_name": "Bash", "tool_input": input, "tool_use_id": id,
                                       "tool_response": "ok"}]}),
            ),
        ),
        ("stop", env.base("Stop", json!({"stop_hook_active": false}))),
        (
            "subagent-stop",
            env.base(
                "SubagentStop",
                json!({"stop_hook_active": false, "agent_id": "a1"}),
            ),
        ),
        (
            "user-prompt-submit",
            env.base("UserPromptSubmit", json!({"prompt": "go on"})),
        ),
    ];
    for (i, (sub, payload)) in hooks.iter().enumerate() {
        let t = Instant::now();
        let out = env.hook(sub, payload);
        let took = t.elapsed();
        // A holder of the lock cannot switch loopgate off: the call is judged on the saved state
        // plus the journal, recorded in the journal, and the human hears why, once.
        assert_eq!(out.code, 0, "{sub}: {}", out.stderr);
        assert_eq!(
            notice(&out).contains("locked"),
            i == 0,
            "{sub}: told once: {}",
            out.stdout
        );
        assert!(out.stderr.lines().count() <= 1, "{sub}: {}", out.stderr);
        let (least, most) = if i == 0 {
            (Duration::from_millis(250), Duration::from_millis(1500))
        } else {
            // The journal mark cuts the wait once a call found the lock busy.
            (Duration::ZERO, Duration::from_millis(900))
        };
        assert!(
            took >= least && took < most,
            "{sub}: waited {took:?}, expected {least:?}..{most:?}"
        );
        assert!(
            std::fs::read(&state_path).unwrap() == before,
            "{sub}: state unchanged"
        );
    }
    // Readers never need the lock.
    assert_eq!(calls(&env), 3);
    holder.release();
    assert_eq!(corrupt_files(&env), Vec::<PathBuf>::new());
    // The next holder merges the journaled calls (the pre-tool-use among them) and says so.
    let out = env.pre("Bash", input, "after");
    assert!(notice(&out).contains("merged"), "{}", out.stdout);
    assert_eq!(calls(&env), 5);
}

// ---------------------------------------------------------------------------------------------
// 4. A read-only, unwritable or full disk.

/// A tmpfs mounted for one test and unmounted on drop (lazily, should anything still hold it).
/// Mounting needs privileges: `mount` returns `None` where it is not permitted.
pub(crate) struct Tmpfs(PathBuf);

impl Tmpfs {
    pub(crate) fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }

    fn remount_read_only(&self) {
        let st = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(st.success(), "remount read-only");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

#[cfg(unix)]
fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Whether mode bits stop this process from writing: not as root or with CAP_DAC_OVERRIDE,
/// which is how these tests run in some containers.
#[cfg(unix)]
fn mode_bits_bind(scratch: &Path) -> bool {
    let probe = scratch.join("mode-probe");
    std::fs::create_dir_all(&probe).unwrap();
    chmod(&probe, 0o500);
    let wrote = std::fs::write(probe.join("x"), b"x").is_ok();
    chmod(&probe, 0o700);
    std::fs::remove_dir_all(&probe).unwrap();
    !wrote
}

fn temp_leftovers(env: &Env) -> Vec<String> {
    std::fs::read_dir(sessions_dir(env))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp-"))
        .collect()
}

/// The call under a fault that keeps it from being recorded: still judged (exit 0, a valid
/// answer), the person told in the answer and in exactly one stderr line.
fn assert_judged_not_recorded(out: &Out, what: &str) {
    assert_eq!(out.code, 0, "{what}: judged: {:?}", out.stderr);
    assert!(
        notice(out).contains("not recorded"),
        "{what}: told: {:?}",
        out.stdout
    );
    assert_eq!(out.stderr.lines().count(), 1, "{what}: {:?}", out.stderr);
    assert!(out.stderr.starts_with("loopgate: "), "{what}");
}

/// Hook calls that must each be judged under the fault without being recorded, leaving the
/// session state byte for byte as it was, still parseable, still readable by `status`.
fn assert_fault_keeps_state(env: &Env, what: &str, run: &dyn Fn(&str, &Value) -> Out) {
    let (path, before) = state_file(env);
    let calls_before = calls(env);
    let id = env.id();
    let input = json!({"command": format!("echo {what}")});
    let hooks = [
        (
            "pre-tool-use",
            env.base(
                "PreToolUse",
                json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id}),
            ),
        ),
        (
            "post-tool-use-failure",
            env.base(
                "PostToolUseFailure",
                json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id,
                       "error": "Exit code 1", "is_interrupt": false}),
            ),
        ),
        (
            "user-prompt-submit",
            env.base("UserPromptSubmit", json!({"prompt": "again"})),
        ),
    ];
    for (sub, payload) in &hooks {
        let out = run(sub, payload);
        assert_judged_not_recorded(&out, &format!("{what}, {sub}"));
        assert!(
            std::fs::read(&path).unwrap() == before,
            "{what}, {sub}: the previous state is intact"
        );
        assert_eq!(temp_leftovers(env), Vec::<String>::new(), "{what}, {sub}");
    }
    state_file(env);
    assert_eq!(calls(env), calls_before, "{what}");
    assert_eq!(corrupt_files(env), Vec::<PathBuf>::new(), "{what}");
}

#[cfg(unix)]
#[test]
fn a_read_only_state_dir_fails_open_and_keeps_the_state() {
    let env = Env::new();
    let plain = |sub: &str, p: &Value| env.hook(sub, p);
    if mode_bits_bind(env.project.parent().unwrap()) {
        seed(&env, 3);
        // In-place writes need no directory write permission: make the state file read-only too.
        let (path, _) = state_file(&env);
        chmod(&sessions_dir(&env), 0o500);
        chmod(&path, 0o400);
        assert_fault_keeps_state(&env, "sessions dir chmod 0500", &plain);
        chmod(&sessions_dir(&env), 0o700);
        chmod(&path, 0o600);
    } else {
        // Running as root: mode bits stop no write, so make the disk really read-only, a tmpfs
        // remounted `ro` under the state dir (EROFS stops root too).
        let Some(fs) = Tmpfs::mount(&env.state, "1m") else {
            eprintln!(
                "SKIPPED read-only state dir: running with CAP_DAC_OVERRIDE (root), where \
                 chmod 0500 stops nothing, and `mount -t tmpfs` is not permitted here"
            );
            return;
        };
        seed(&env, 3);
        fs.remount_read_only();
        assert_fault_keeps_state(&env, "read-only tmpfs", &plain);
    }
    assert!(env.bash("echo writable again", Ok("x")).is_silent_allow());
}

/// Faults that need no privilege: the state dir's path runs through a regular file, or is under
/// /proc (the private fallback dir is used, and the human is told).
#[test]
fn an_unusable_state_path_falls_back_with_one_line() {
    let env = Env::new();
    let file = env.project.parent().unwrap().join("a-file");
    std::fs::write(&file, b"not a dir").unwrap();
    let mut dirs = vec![file.join("state")];
    if cfg!(target_os = "linux") {
        dirs.push(PathBuf::from("/proc/loopgate-cannot-be-here/state"));
    }
    for (i, dir) in dirs.iter().enumerate() {
        let run = env.project.parent().unwrap().join(format!("run-{i}"));
        let env = Env::new()
            .var("LOOPGATE_STATE_DIR", dir.to_str().unwrap())
            .var("XDG_RUNTIME_DIR", run.to_str().unwrap());
        let out = env.pre("Bash", json!({"command": "ls"}), "x");
        assert_eq!(out.code, 0, "{}: {}", dir.display(), out.stderr);
        assert!(notice(&out).contains("fallback"), "{}", out.stdout);
        assert!(!dir.exists());
        let states = std::fs::read_dir(run.join("loopgate/sessions"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "state")
            })
            .count();
        assert_eq!(states, 1, "the call was recorded in the fallback dir");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a dir");
    // A directory, FIFO or link as the lock file is healed: see `heal.rs`.
}

/// Runs one hook with every write failing, unprivileged: a file-size limit of 0 with SIGXFSZ
/// ignored (the disposition survives exec) makes write(2) fail with EFBIG, as a full disk fails
/// with ENOSPC.
#[cfg(unix)]
pub(crate) fn with_writes_failing(env: &Env, sub: &str, p: &Value) -> Out {
    under_sh(
        env,
        "trap '' XFSZ; ulimit -f 0 && exec \"$0\" \"$@\"",
        sub,
        p,
    )
}

/// One hook run by `sh -c script` (which ends by exec'ing the hook), `p` on its stdin.
#[cfg(unix)]
fn under_sh(env: &Env, script: &str, sub: &str, p: &Value) -> Out {
    let mut child = std_command(env, "sh", &["-c", script, BIN, sub])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(p.to_string().as_bytes())
        .unwrap();
    out_of(child.wait_with_output().unwrap())
}

#[cfg(unix)]
#[test]
fn a_full_disk_is_judged_and_keeps_the_state() {
    // Every write fails, unprivileged: a file-size limit of 0 with SIGXFSZ ignored (the
    // disposition survives exec) makes write(2) fail with EFBIG, as a full disk fails with ENOSPC.
    let env = Env::new();
    seed(&env, 3);
    let limited = |sub: &str, p: &Value| with_writes_failing(&env, sub, p);
    assert_fault_keeps_state(&env, "file size limit 0", &limited);
    assert!(env.bash("echo room again", Ok("x")).is_silent_allow());

    // A really full filesystem: a 64 KiB tmpfs under the state dir, filled to the last page.
    let env = Env::new();
    let Some(_fs) = Tmpfs::mount(&env.state, "64k") else {
        eprintln!(
            "SKIPPED full tmpfs: `mount -t tmpfs` is not permitted here (the file-size-limit \
             case above covered the failing writes)"
        );
        return;
    };
    seed(&env, 3);
    let filler = env.state.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 4096];
    let mut written = 0usize;
    while f.write_all(&chunk).and_then(|_| f.sync_all()).is_ok() {
        written += chunk.len();
        assert!(written < 1 << 20, "a 64 KiB tmpfs never fills");
    }
    drop(f);
    // In-place writes into blocks the state already has may still succeed on a full disk; what
    // must hold is that every call exits 0 or fails open with one line, and the state decodes.
    let before = calls(&env);
    for i in 0..6 {
        let out = env.bash(&format!("echo full {i}"), Ok("x"));
        if !out.stderr.is_empty() {
            assert_judged_not_recorded(&out, "full tmpfs");
        }
        state_file(&env);
    }
    assert!(calls(&env) >= before);
    assert_eq!(corrupt_files(&env), Vec::<PathBuf>::new());
    std::fs::remove_file(&filler).unwrap();
    assert!(env.bash("echo room again", Ok("x")).is_silent_allow());
}

// ---------------------------------------------------------------------------------------------
// 5. The clock going backwards between calls.

#[test]
fn a_clock_going_backwards_neither_panics_nor_wedges_a_window() {
    const HOUR: u64 = 3_600_000;
    let t0: u64 = 1_800_000_000_000;
    let mut env = Env::new();
    let at = |env: &mut Env, ms: u64| set_var(env, "LOOPGATE_CLOCK_MS", &ms.to_string());
    at(&mut env, t0);
    assert!(env.new_prompt("p1").is_silent_allow());

    // A real loop, each call three hours before the previous one: still caught on the 4th.
    let fail: Result<&str, &str> = Err("Exit code 1\nerror: test failed, 3 failures");
    for i in 0..4u64 {
        at(&mut env, t0 - i * 3 * HOUR);
        let out = env.bash("cargo test", fail);
        assert_eq!(out.code, 0, "call {i}: {}", out.stderr);
        assert_eq!(out.denied(), i == 3, "call {i}: {}", out.stdout);
    }
    env.status();

    // Time moving forward again is not wedged by the jump back: once the cooldown has passed
    // since the latest answer, one more try is let through.
    at(&mut env, t0 + 11 * 60_000);
    let out = env.bash("cargo test", fail);
    assert!(!out.denied(), "after the cooldown: {}", out.stdout);

    // Every other event with the clock far back, to the epoch itself.
    for ms in [t0 - 1000 * HOUR, 1, 0] {
        at(&mut env, ms);
        for out in [
            env.stop(false),
            env.hook(
                "subagent-stop",
                &env.base(
                    "SubagentStop",
                    json!({"stop_hook_active": false, "agent_id": "a1"}),
                ),
            ),
            env.new_prompt(&format!("p-{ms}")),
            env.bash("ls", Ok("a")),
        ] {
            assert_eq!(out.code, 0, "at {ms}: {}", out.stderr);
        }
        state_file(&env);
        let st = env.status();
        assert!(st[0]["totals"]["calls"].as_u64().unwrap() > 5, "{st}");
    }
}

// ---------------------------------------------------------------------------------------------
// The event log's lock, held by a peer.

#[test]
fn a_held_event_log_lock_fails_open_within_the_deadline() {
    let env = Env::new().config("lock_timeout_ms = 300\n");
    let fail: Result<&str, &str> = Err("Exit code 1\nerror: test failed, 3 failures");
    for _ in 0..3 {
        assert!(env.bash("cargo test", fail).is_silent_allow());
    }
    // Another process's lock on the event log, as a loopgate process wedged mid-append holds it.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(env.state.join("events.lock"))
        .unwrap();
    f.lock().unwrap();
    // The 4th identical failing call is denied, and the denial is logged: under the lock.
    let p = env.base(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "cargo test", "description": "run"},
               "tool_use_id": "held-log"}),
    );
    let mut child = spawn_hook(&env, "pre-tool-use", &p);
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if t.elapsed() > Duration::from_secs(5) {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(f);
    let took = t.elapsed();
    assert!(
        status.is_some() && took < Duration::from_millis(2000),
        "the hook must give up on the event-log lock like on the session lock (300 ms), \
         not wait forever: still running after {took:?}"
    );
    let code = status.unwrap().code();
    assert!(matches!(code, Some(0 | 1)), "{code:?}");
    state_file(&env);
    // The denial is still in the log: appended without the lock, not dropped.
    let log = std::fs::read_to_string(env.state.join("events.jsonl")).unwrap_or_default();
    assert!(
        log.lines().any(|l| l.contains("\"decision\":\"deny\"")),
        "the denial made while the log's lock was held is not in the log:\n{log}"
    );
}

/// The `systemMessage` of an answer ("" when there is none).
fn notice(out: &Out) -> String {
    serde_json::from_str::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["systemMessage"].as_str().map(str::to_string))
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// 6. Tamper is visible: a state that vanished, was replaced, or a state dir made unusable.

#[test]
fn a_state_that_vanishes_or_is_replaced_mid_session_is_said_and_logged() {
    let env = Env::new();
    seed(&env, 3);
    let (path, _) = state_file(&env);
    std::fs::remove_file(&path).unwrap();
    let out = env.bash("echo after delete", Ok("x"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(notice(&out).contains("vanished"), "{}", out.stdout);
    assert_eq!(calls(&env), 1, "a fresh state");

    // Another session's (valid) state copied over this one's.
    let other = loopgate::judge::state::SessionState::new("someone-else", 1);
    std::fs::write(&path, loopgate::store::codec::encode(&other, 1).unwrap()).unwrap();
    let out = env.bash("echo after swap", Ok("x"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(notice(&out).contains("replaced"), "{}", out.stdout);
    let logged: Vec<String> = env
        .events()
        .iter()
        .filter(|e| e["detector"] == "state_store")
        .map(|e| e["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(logged.len(), 2, "{logged:?}");
    // An ordinary call after that says nothing.
    assert!(env.bash("echo calm", Ok("y")).is_silent_allow());
}

#[test]
fn a_state_dir_replaced_by_a_file_or_opened_to_others_is_repaired_and_says_so() {
    let run = tempfile::tempdir().unwrap();
    let env = Env::new().var("XDG_RUNTIME_DIR", run.path().to_str().unwrap());
    seed(&env, 2);
    // World-writable: anyone could swap the state; it is made owner-only again, counts kept.
    chmod(&env.state, 0o777);
    let out = env.bash("echo open", Ok("x"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(notice(&out).contains("mode 777"), "{}", out.stdout);
    assert_eq!(calls(&env), 3);
    // Replaced by a file: moved aside (kept), made again, said once; every call judged.
    std::fs::remove_dir_all(&env.state).unwrap();
    std::fs::write(&env.state, "gone").unwrap();
    let out = env.bash("echo gone 0", Ok("x"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(notice(&out).contains("moved"), "{}", out.stdout);
    assert!(env.bash("echo gone 1", Ok("x")).is_silent_allow());
    assert!(env.state.join("sessions").is_dir());
    assert!(!run.path().join("loopgate").exists(), "no fallback needed");
}

// ---------------------------------------------------------------------------------------------
// 7. Exit 1 and exactly one line in every failure mode.

#[cfg(unix)]
#[test]
fn a_file_size_limit_without_trap_is_one_line_not_a_signal_death() {
    let env = Env::new();
    seed(&env, 2);
    let p = env.base(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "xfsz"}),
    );
    // No `trap '' XFSZ`: the default disposition would kill the process with no line at all.
    let out = under_sh(
        &env,
        "ulimit -f 0 && exec \"$0\" \"$@\"",
        "pre-tool-use",
        &p,
    );
    assert_judged_not_recorded(&out, "ulimit -f 0");
    state_file(&env);
}

#[cfg(unix)]
#[test]
fn stderr_on_dev_full_and_a_closed_stdout_still_exit_1() {
    let env = Env::new();
    // A failure whose one line cannot be written: exit 1 all the same, no panic (134).
    let o = std_command(&env, BIN, &["pre-tool-use"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"not json")?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    // A denial whose answer cannot be written (stdout closed): exit 1, one line.
    let fail: Result<&str, &str> = Err("Exit code 1\nerror: test failed, 3 failures");
    for _ in 0..3 {
        assert!(env.bash("cargo test", fail).is_silent_allow());
    }
    let p = env.base(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "cargo test", "description": "run"},
               "tool_use_id": "closed-stdout"}),
    );
    // A pipe whose reader is gone (EPIPE); a closed fd 1 would be reopened on /dev/null by std.
    let mut child = std_command(&env, BIN, &["pre-tool-use"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(p.to_string().as_bytes())
        .unwrap();
    let out = out_of(child.wait_with_output().unwrap());
    assert_fails_open(&out, "stdout closed");
    assert!(out.stderr.contains("stdout"), "{}", out.stderr);
}

#[test]
fn usage_errors_exit_1_and_a_hook_commands_is_one_line() {
    let env = Env::new();
    for args in [&["pre-tool-use", "--bogus"][..], &["stop", "extra"]] {
        let out = env.run(args, b"");
        assert_fails_open(&out, &format!("{args:?}"));
    }
    // A person's typo gets clap's whole message (see first_hour.rs): still exit 1, never 2.
    for args in [&["frobnicate"][..], &["reset"], &["status", "--session"]] {
        let out = env.run(args, b"");
        assert_eq!(out.code, 1, "{args:?}");
        assert!(
            out.stdout.is_empty() && out.stderr.starts_with("loopgate: "),
            "{args:?}"
        );
    }
    let help = env.run(&["--help"], b"");
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("pre-tool-use"));
}

#[test]
fn symlinked_event_log_lock_and_state_write_nothing_outside() {
    let env = Env::new();
    let outside = env.project.parent().unwrap().join("outside");
    std::fs::write(&outside, "precious").unwrap();
    let fail: Result<&str, &str> = Err("Exit code 1\nerror: test failed, 3 failures");
    for _ in 0..3 {
        assert!(env.bash("cargo test", fail).is_silent_allow());
    }
    for name in ["events.jsonl", "events.lock"] {
        let link = env.state.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        // The 4th identical failure is denied and would be logged: through no symlink.
        let out = env.pre(
            "Bash",
            json!({"command": "cargo test", "description": "run"}),
            name,
        );
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        assert!(out.denied(), "{name}: still judged: {}", out.stdout);
        assert_eq!(
            out.stderr.lines().count(),
            1,
            "{name}: the log problem in one line"
        );
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "precious",
            "{name}"
        );
        std::fs::remove_file(&link).unwrap();
    }
}

/// A FIFO or a link to `/dev/zero` in place of a project's outer-loop record: each new session's
/// first prompt answered at once (it hung 10 s on the FIFO, read 2 GB from the device), and the
/// next record written replaces the bad file.
#[cfg(unix)]
#[test]
fn an_outer_loop_record_of_another_kind_costs_nothing() {
    for bad in ["fifo", "zero"] {
        let mut env = Env::new();
        env.new_prompt("p1");
        env.stop(false);
        let records: Vec<PathBuf> = std::fs::read_dir(&env.state)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "project"))
            .collect();
        assert_eq!(records.len(), 1, "{bad}: one record per project");
        let record = &records[0];
        std::fs::remove_file(record).unwrap();
        if bad == "fifo" {
            let ok = Command::new("mkfifo").arg(record).status().unwrap();
            assert!(ok.success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", record).unwrap();
        }
        env.session = format!("second-{bad}");
        let t = Instant::now();
        let out = env.new_prompt("p2");
        assert_eq!(out.code, 0, "{bad}: {}", out.stderr);
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{bad}: {:?}",
            t.elapsed()
        );
        env.stop(false);
        assert!(
            std::fs::symlink_metadata(record).unwrap().is_file(),
            "{bad}: the record is a regular file again"
        );
    }
}

/// The lock held for good and the journal full (it took every call until then): the loop
/// made under the held lock is still counted and refused, not let through uncounted; and once
/// the lock is free the journal is merged and counting goes on.
#[test]
fn a_held_lock_and_a_full_journal_still_count_the_loop() {
    let env = Env::new().config("lock_timeout_ms = 100\n");
    seed(&env, 2);
    let holder = LockHolder::hold(files_with_ext(&env, "lock").pop().unwrap());
    env.bash("echo first-journaled", Ok("ok"));
    let journal = files_with_ext(&env, "journal").pop().expect("a journal");
    // What a long hold leaves: the journal at its size limit (lines that are no record are
    // skipped when read).
    let filler = "#".repeat(1023) + "\n";
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap();
    let have = f.metadata().unwrap().len() as usize;
    f.write_all(filler.repeat(((1 << 20) - have) / 1024).as_bytes())
        .unwrap();
    drop(f);
    let input = json!({"command": "cargo build --offline"});
    let err = "error: no matching package named `serde` found";
    let mut denied = false;
    for k in 0..4 {
        let id = format!("held-{k}");
        let out = env.pre("Bash", input.clone(), &id);
        assert_eq!(out.code, 0, "{}", out.stderr);
        if out.denied() {
            denied = true;
            break;
        }
        env.fail("Bash", input.clone(), &id, err);
    }
    assert!(
        denied,
        "the loop under a held lock and a full journal was not counted"
    );
    assert!(std::fs::metadata(&journal).unwrap().len() <= 1 << 20);
    holder.release();
    let after = env.pre("Bash", input.clone(), "after-release");
    assert!(
        after.denied(),
        "counting lost when the lock came free: {}",
        after.stdout
    );
}

/// A crash (here a SIGSEGV sent while the hook waits for its input; a stack overflow takes the
/// same path, on a stack of its own) leaves one `loopgate:` line and the fail-open exit, so the
/// call proceeds and the person hears why.
#[cfg(unix)]
#[test]
fn a_crash_says_one_line_and_fails_open() {
    let env = Env::new();
    let child = env
        .std_command(&["pre-tool-use"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stdin stays open and empty: the hook waits up to 10 s for its payload.
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill")
        .args(["-SEGV", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = out_of(child.wait_with_output().unwrap());
    assert_eq!(out.code, 1, "exit: {} stderr: {:?}", out.code, out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{:?}", out.stderr);
    assert!(
        out.stderr
            .starts_with("loopgate: internal error: it crashed"),
        "{:?}",
        out.stderr
    );
    assert!(out.stdout.is_empty());
}

/// A real stack overflow (`examples/crash_line.rs` recurses under loopgate's crash handler until
/// the stack's guard page) leaves the same one line and the fail-open exit. cross.sh runs the
/// Windows build of it under wine.
#[test]
fn a_real_stack_overflow_says_one_line_and_fails_open() {
    let dir = Path::new(env!("CARGO_BIN_EXE_loopgate")).parent().unwrap();
    let example = dir
        .join("examples")
        .join(format!("crash_line{}", std::env::consts::EXE_SUFFIX));
    if !example.is_file() {
        // `cargo test` builds the examples; `cargo test --test integration` alone does not.
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--example", "crash_line"]);
        if cfg!(feature = "portable") {
            build.args(["--features", "portable"]);
        }
        assert!(build.status().unwrap().success());
    }
    let out = Command::new(&example).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        said.lines().collect::<Vec<_>>(),
        ["loopgate: internal error: it crashed (a stack overflow or a bad memory access); the call proceeds unjudged"],
        "{:?}",
        out.status
    );
    assert_eq!(out.status.code(), Some(1), "the fail-open exit");
}
