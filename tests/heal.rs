//! A state the agent broke heals itself (issue 21, "the state heals"): a lock file, a sessions
//! dir, a state dir or a fallback dir made unusable by one allowed command is moved aside or put
//! back, the person is told once, and every call is still judged — the 4th identical failing call
//! is denied, a write to loopgate's own files is refused. A full disk or no usable store at all
//! still judges on the in-memory state; a lock held by someone else does not freeze detection.

#![cfg(unix)]

use crate::common::{Env, Out};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const FAIL: Result<&str, &str> = Err("Exit code 1\nerror: test failed, 3 failures");

/// The `systemMessage` of an answer ("" when there is none).
fn notice(out: &Out) -> String {
    serde_json::from_str::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["systemMessage"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The call was judged (exit 0, a valid answer or none), and at most one stderr line was said.
fn judged(out: &Out, what: &str) {
    assert_eq!(out.code, 0, "{what}: judged, exit 0: {}", out.stderr);
    assert!(
        out.stderr.lines().count() <= 1,
        "{what}: one line at most: {:?}",
        out.stderr
    );
    if !out.stdout.is_empty() {
        out.json();
    }
}

/// Three identical failing calls and a fourth: denied. Returns the notices said on the way.
fn loop_is_denied(env: &Env, what: &str) -> Vec<String> {
    let mut said = Vec::new();
    for i in 0..4 {
        let out = env.bash("cargo test", FAIL);
        judged(&out, what);
        assert_eq!(out.denied(), i == 3, "{what}, call {i}: {}", out.stdout);
        said.push(notice(&out));
    }
    said
}

/// Told once: the first call says it, the calls after say nothing.
fn told_once(said: &[String], word: &str, what: &str) {
    assert!(said[0].contains(word), "{what}: told {word:?}: {said:?}");
    assert!(
        said[1..].iter().all(String::is_empty),
        "{what}: told once: {said:?}"
    );
}

/// A write to loopgate's own state is refused by the guard: the guard runs.
fn guard_refuses(env: &Env, state_dir: &Path, what: &str) {
    let cmd = format!("rm -rf {}", state_dir.join("sessions").display());
    let out = env.pre("Bash", json!({"command": cmd}), &env.id());
    judged(&out, what);
    assert!(out.denied(), "{what}: the guard refuses: {}", out.stdout);
}

fn sessions(env: &Env) -> PathBuf {
    env.state.join("sessions")
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown_nobody(p: &Path) -> bool {
    std::os::unix::fs::lchown(p, Some(65534), Some(65534)).is_ok()
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

fn calls(env: &Env) -> u64 {
    env.status()[0]["totals"]["calls"].as_u64().unwrap()
}

#[test]
fn a_lock_file_that_is_not_a_regular_file_of_ours_is_moved_aside_and_the_call_judged() {
    type Attack = fn(&Path, &Path);
    let attacks: [(&str, Attack); 4] = [
        ("a directory", |lock, _| {
            std::fs::create_dir(lock).unwrap();
            std::fs::write(lock.join("keep"), "k").unwrap();
        }),
        ("a FIFO", |lock, _| mkfifo(lock)),
        ("a link", |lock, outside| {
            std::os::unix::fs::symlink(outside, lock).unwrap()
        }),
        ("owned by uid 65534", |lock, _| {
            std::fs::write(lock, "1").unwrap();
            assert!(chown_nobody(lock));
        }),
    ];
    for (what, attack) in attacks {
        let env = Env::new();
        let outside = env.project.parent().unwrap().join("outside");
        std::fs::write(&outside, "precious").unwrap();
        for _ in 0..3 {
            assert!(env.bash("cargo test", FAIL).is_silent_allow(), "{what}");
        }
        let lock = env.lock_file();
        std::fs::remove_file(&lock).unwrap();
        attack(&lock, &outside);
        // The 4th identical failure: still denied (the state was kept), and said.
        let out = env.bash("cargo test", FAIL);
        judged(&out, what);
        assert!(out.denied(), "{what}: {}", out.stdout);
        assert!(
            notice(&out).contains("lock file was") && notice(&out).contains("moved"),
            "{what}: {}",
            out.stdout
        );
        // Healed: a fresh regular lock file, the bad one kept aside, nothing outside touched.
        let meta = std::fs::symlink_metadata(&lock).unwrap();
        assert!(meta.is_file(), "{what}");
        let aside: Vec<String> = names_in(&sessions(&env))
            .into_iter()
            .filter(|n| n.contains(".lock.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "{what}: moved aside, not deleted");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
        // Told once: the next call says nothing about it, and is still judged.
        let next = env.bash("cargo test", FAIL);
        assert!(
            next.denied() && notice(&next).is_empty(),
            "{what}: {}",
            next.stdout
        );
        assert_eq!(calls(&env), 5, "{what}: every call recorded");
    }
}

#[test]
fn a_broken_sessions_or_state_dir_is_repaired_and_every_call_judged() {
    type Attack = fn(&Env) -> bool;
    let attacks: [(&str, &str, bool, Attack); 7] = [
        // (what, word told, counts kept, attack)
        ("sessions chmod 000", "owner-only", true, |env| {
            chmod(&sessions(env), 0o000);
            true
        }),
        ("sessions chmod 777", "owner-only", true, |env| {
            chmod(&sessions(env), 0o777);
            true
        }),
        ("state dir chmod 000", "owner-only", true, |env| {
            chmod(&env.state, 0o000);
            true
        }),
        ("sessions replaced by a file", "moved", false, |env| {
            std::fs::remove_dir_all(sessions(env)).unwrap();
            std::fs::write(sessions(env), "gone").unwrap();
            true
        }),
        ("sessions replaced by a link", "moved", false, |env| {
            let elsewhere = env.project.parent().unwrap().join("elsewhere");
            std::fs::create_dir(&elsewhere).unwrap();
            std::fs::remove_dir_all(sessions(env)).unwrap();
            std::os::unix::fs::symlink(&elsewhere, sessions(env)).unwrap();
            true
        }),
        ("sessions owned by uid 65534", "moved", false, |env| {
            chown_nobody(&sessions(env))
        }),
        ("state dir replaced by a file", "moved", false, |env| {
            std::fs::remove_dir_all(&env.state).unwrap();
            std::fs::write(&env.state, "gone").unwrap();
            true
        }),
    ];
    for (what, word, kept, attack) in attacks {
        let run = tempfile::tempdir().unwrap();
        let env = Env::new().var("XDG_RUNTIME_DIR", run.path().to_str().unwrap());
        for i in 0..2 {
            assert!(env.bash(&format!("echo {i}"), Ok("x")).is_silent_allow());
        }
        if !attack(&env) {
            eprintln!("SKIPPED {what}: cannot chown here");
            continue;
        }
        let said = loop_is_denied(&env, what);
        told_once(&said, word, what);
        assert!(
            said[0].contains("repaired"),
            "{what}: the state dir was repaired, not abandoned: {said:?}"
        );
        assert_eq!(mode(&env.state) & 0o077, 0, "{what}");
        assert_eq!(mode(&sessions(&env)), 0o700, "{what}");
        assert!(
            !run.path().join("loopgate").exists(),
            "{what}: healed in place, no fallback"
        );
        // `status` reads the healed dir: the earlier calls kept when only a mode was changed.
        assert_eq!(calls(&env), if kept { 2 + 4 } else { 4 }, "{what}");
        guard_refuses(&env, &env.state, what);
        // What was moved aside is kept, byte for byte.
        if what.ends_with("by a file") {
            let parent = if what.starts_with("state") {
                env.state.parent().unwrap().to_path_buf()
            } else {
                env.state.clone()
            };
            let aside = names_in(&parent)
                .into_iter()
                .find(|n| n.contains(".corrupt-"))
                .unwrap_or_else(|| panic!("{what}: moved aside"));
            assert_eq!(std::fs::read(parent.join(aside)).unwrap(), b"gone");
        }
    }
}

#[test]
fn a_poisoned_fallback_gives_way_to_a_fresh_private_place_and_every_call_is_judged() {
    type Attack = fn(&Path) -> bool;
    let attacks: [(&str, Attack); 5] = [
        ("a file", |fb| std::fs::write(fb, "x").is_ok()),
        ("a link to elsewhere", |fb| {
            let elsewhere = fb.with_file_name("elsewhere");
            std::fs::create_dir(&elsewhere).unwrap();
            std::os::unix::fs::symlink(&elsewhere, fb).is_ok()
        }),
        ("a world-writable dir", |fb| {
            std::fs::create_dir_all(fb.join("sessions")).unwrap();
            chmod(fb, 0o777);
            chmod(&fb.join("sessions"), 0o777);
            true
        }),
        ("another user's dir", |fb| {
            std::fs::create_dir_all(fb).unwrap();
            chown_nobody(fb)
        }),
        (
            "another user's dir, and its next alternative a file",
            |fb| {
                std::fs::create_dir_all(fb).unwrap();
                std::fs::write(fb.with_file_name("loopgate.2"), "x").unwrap();
                assert!(chown_nobody(&fb.with_file_name("loopgate.2")));
                chown_nobody(fb)
            },
        ),
    ];
    for (what, attack) in attacks {
        let env = Env::new();
        let run = env.project.parent().unwrap().join("run");
        std::fs::create_dir(&run).unwrap();
        // The configured state dir runs through a file: it cannot be healed, the fallback is used.
        let file = env.project.parent().unwrap().join("a-file");
        std::fs::write(&file, "not a dir").unwrap();
        let env = env
            .var("LOOPGATE_STATE_DIR", file.join("state").to_str().unwrap())
            .var("XDG_RUNTIME_DIR", run.to_str().unwrap());
        let fallback = run.join("loopgate");
        if !attack(&fallback) {
            eprintln!("SKIPPED {what}: cannot chown here");
            continue;
        }
        let said = loop_is_denied(&env, what);
        assert!(
            said.iter().all(|s| s.contains("fallback")),
            "{what}: {said:?}"
        );
        guard_refuses(&env, &file.join("state"), what);
        // Some private place of ours holds the session.
        let used = ["loopgate", "loopgate.2", "loopgate.3"]
            .iter()
            .map(|n| run.join(n))
            .find(|d| {
                names_in(&d.join("sessions"))
                    .iter()
                    .any(|n| n.ends_with(".state"))
            })
            .unwrap_or_else(|| panic!("{what}: a fallback holds the state"));
        assert_eq!(mode(&used), 0o700, "{what}");
        assert_eq!(std::fs::read(&file).unwrap(), b"not a dir");
    }
}

#[test]
fn with_no_usable_store_at_all_the_guard_and_detection_still_answer() {
    let env = Env::new();
    let file = env.project.parent().unwrap().join("a-file");
    std::fs::write(&file, "not a dir").unwrap();
    let env = env
        .var("LOOPGATE_STATE_DIR", file.join("state").to_str().unwrap())
        .var("XDG_RUNTIME_DIR", file.join("run").to_str().unwrap());
    let out = env.bash("echo hi", Ok("hi"));
    judged(&out, "no store");
    assert!(notice(&out).contains("in-memory"), "{}", out.stdout);
    guard_refuses(&env, &file.join("state"), "no store");
    // A loop inside one call is still seen: the same failing call in a batch... at least the
    // call itself answers; nothing was written anywhere.
    assert_eq!(std::fs::read(&file).unwrap(), b"not a dir");
}

#[test]
fn on_a_full_disk_the_call_is_judged_on_the_state_in_memory_and_nothing_is_lost() {
    let env = Env::new();
    for _ in 0..3 {
        assert!(env.bash("cargo test", FAIL).is_silent_allow());
    }
    let state = env.state_file();
    let before = std::fs::read(&state).unwrap();
    let input = json!({"command": "cargo test", "description": "run"});
    let p = env.base(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": env.id()}),
    );
    let out = crate::faults::with_writes_failing(&env, "pre-tool-use", &p);
    judged(&out, "writes failing");
    assert!(
        out.denied(),
        "the 4th failure is still denied: {}",
        out.stdout
    );
    assert!(notice(&out).contains("not recorded"), "{}", out.stdout);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert_eq!(
        std::fs::read(&state).unwrap(),
        before,
        "nothing on disk lost"
    );
    // The guard answers too.
    let cmd = format!("rm -rf {}", sessions(&env).display());
    let p = env.base(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": cmd}, "tool_use_id": env.id()}),
    );
    assert!(crate::faults::with_writes_failing(&env, "pre-tool-use", &p).denied());
    assert_eq!(std::fs::read(&state).unwrap(), before);
}

/// Another process holds the session lock (`flock`) and never lets go: every call is still
/// judged on the saved state plus the calls since, recorded in the journal, and the wait per
/// call drops after the first; the person is told once, and the journal is merged when the lock
/// frees.
#[test]
fn a_lock_held_for_ever_does_not_freeze_detection() {
    let env = Env::new().config("lock_timeout_ms = 1500\n");
    assert!(env.bash("echo seed", Ok("x")).is_silent_allow());
    let holder = crate::faults::LockHolder::hold(env.lock_file());
    let t = Instant::now();
    let first = env.bash("echo first", Ok("x"));
    let first_took = t.elapsed();
    judged(&first, "held");
    assert!(notice(&first).contains("locked"), "{}", first.stdout);
    assert!(first_took >= Duration::from_millis(1400), "{first_took:?}");
    // Three calls per `bash` (Pre, Post, batch): all judged quickly now.
    let t = Instant::now();
    let said = loop_is_denied(&env, "lock held");
    let each = t.elapsed() / 11;
    assert!(
        each < Duration::from_millis(700),
        "later calls wait briefly, not the full deadline: {each:?} per call"
    );
    assert!(said.iter().all(String::is_empty), "told once: {said:?}");
    let journal: Vec<String> = names_in(&sessions(&env))
        .into_iter()
        .filter(|n| n.ends_with(".journal"))
        .collect();
    assert_eq!(journal.len(), 1, "the calls are in the journal");
    assert_eq!(calls(&env), 1, "the saved state waits for the lock");
    holder.release();
    // The next call holds the lock: merges the journal (and says so), and counts on.
    let out = env.bash("cargo test", FAIL);
    assert!(out.denied(), "still denied after the merge: {}", out.stdout);
    assert!(notice(&out).contains("merged"), "{}", out.stdout);
    // echo seed + echo first + 4 looping calls (the 4th denied: no Post) + this one.
    let n = calls(&env);
    assert!(n >= 7, "every journaled call counted: {n}");
    let journal = sessions(&env).join(&journal[0]);
    assert_eq!(std::fs::metadata(&journal).map(|m| m.len()).unwrap_or(0), 0);
    let calm = env.bash("echo calm", Ok("x"));
    assert!(calm.is_silent_allow(), "{}", calm.stdout);
}

/// A really full filesystem (a 64 KiB tmpfs filled to the last page; mounting needs root): a new
/// session can save nothing, yet its calls are judged — the guard refuses a write to loopgate's
/// state — and the person is told; the session saved before the disk filled keeps its state.
#[test]
fn a_new_session_on_a_really_full_disk_is_still_judged() {
    let env = Env::new();
    let Some(_fs) = crate::faults::Tmpfs::mount(&env.state, "64k") else {
        eprintln!("SKIPPED full tmpfs: `mount -t tmpfs` is not permitted here");
        return;
    };
    for _ in 0..3 {
        assert!(env.bash("cargo test", FAIL).is_silent_allow());
    }
    let saved = env.state_file();
    let before = std::fs::read(&saved).unwrap();
    let filler = env.state.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    while std::io::Write::write_all(&mut f, &[0u8; 4096])
        .and_then(|_| f.sync_all())
        .is_ok()
    {}
    drop(f);
    let mut fresh = Env::new();
    fresh.state = env.state.clone();
    fresh.session = "sess-new".into();
    let cmd = format!("rm -rf {}", sessions(&env).display());
    let out = fresh.pre("Bash", json!({"command": cmd}), "full-1");
    judged(&out, "full disk, new session");
    assert!(out.denied(), "the guard answers: {}", out.stdout);
    assert!(notice(&out).contains("not recorded"), "{}", out.stdout);
    let out = fresh.bash("echo hi", Ok("hi"));
    judged(&out, "full disk, new session");
    assert_eq!(
        std::fs::read(&saved).unwrap(),
        before,
        "nothing on disk lost"
    );
    std::fs::remove_file(&filler).unwrap();
    assert!(
        env.bash("cargo test", FAIL).denied(),
        "the old session kept its counts"
    );
}

/// An earlier copy of the session's state put back over it (which lowers every loop count) is
/// told to the person once, and the loop is caught again from there; a session that only sat
/// idle as long is told nothing (issue 30, a state rolled back).
#[test]
fn a_state_put_back_from_an_earlier_copy_is_told_once() {
    let rolled_back = Env::new();
    let idle = Env::new();
    for env in [&rolled_back, &idle] {
        judged(&env.bash("cargo test", FAIL), "first failure");
    }
    let copy = std::fs::read(rolled_back.state_file()).unwrap();
    for env in [&rolled_back, &idle] {
        for _ in 0..2 {
            judged(&env.bash("cargo test", FAIL), "later failures");
        }
    }
    // Past the file system's drift from the clock: the copy goes back well after loopgate wrote.
    std::thread::sleep(std::time::Duration::from_secs(6));
    std::fs::write(rolled_back.state_file(), &copy).unwrap();
    // The copy knew one failure: two more go through (the rollback worked), and it is told.
    let outs: Vec<Out> = (0..3)
        .map(|_| rolled_back.bash("cargo test", FAIL))
        .collect();
    outs.iter()
        .for_each(|o| judged(o, "after the copy was put back"));
    let said: Vec<String> = outs.iter().map(notice).collect();
    told_once(&said, "put back from an earlier copy", "a state put back");
    assert!(!outs[1].denied() && outs[2].denied(), "{}", outs[2].stdout);
    let idle_out = idle.bash("cargo test", FAIL);
    assert!(
        idle_out.denied(),
        "the idle session's loop: {}",
        idle_out.stdout
    );
    assert!(
        !notice(&idle_out).contains("earlier copy"),
        "idle is not a rollback: {}",
        idle_out.stdout
    );
}

/// Issue 37 point 4: a copy put back however soon after it was taken (a `make check` recipe that
/// copies the state before its failing run and puts it back 0.4 s later, well inside the 5 s the
/// change-time check allows) is told, once, by the generation the lock file keeps; whatever way
/// the copy goes back (written over, renamed over). Harmless twin: a session of many ordinary
/// calls, passing and failing, fast and slow, a held lock's journal merged among them, is never
/// told anything.
#[test]
fn a_state_put_back_at_once_is_told_however_soon() {
    type PutBack = fn(&Path, &[u8]);
    let routes: [(&str, PutBack); 2] = [
        ("written over", |p, b| std::fs::write(p, b).unwrap()),
        ("renamed over", |p, b| {
            let tmp = p.with_extension("tmp-copy");
            std::fs::write(&tmp, b).unwrap();
            std::fs::rename(&tmp, p).unwrap();
        }),
    ];
    for (how, put) in routes {
        let env = Env::new();
        judged(&env.bash("cargo test", FAIL), how);
        let copy = std::fs::read(env.state_file()).unwrap();
        judged(&env.bash("cargo test", FAIL), how);
        std::thread::sleep(Duration::from_millis(400));
        put(&env.state_file(), &copy);
        let said: Vec<String> = (0..3)
            .map(|_| {
                let out = env.bash("ls", Ok("a"));
                judged(&out, how);
                notice(&out)
            })
            .collect();
        told_once(&said, "put back from an earlier copy", how);
        assert!(said[0].contains("update"), "{how}: {said:?}");
    }

    let env = Env::new();
    let mut said = Vec::new();
    for i in 0..60 {
        let out = match i % 4 {
            0 => env.bash(&format!("cargo test t{i}"), FAIL),
            1 => env.bash(&format!("ls d{i}"), Ok("a")),
            2 => env.pre(
                "Read",
                json!({"file_path": format!("/tmp/f{i}")}),
                &env.id(),
            ),
            _ => env.bash(&format!("echo {i}"), Ok("x")),
        };
        judged(&out, "ordinary call");
        said.push(notice(&out));
        if i == 30 {
            // A lock held past the deadline: the next calls go to the journal, then are merged.
            let lock = std::fs::File::options()
                .read(true)
                .write(true)
                .open(env.lock_file())
                .unwrap();
            lock.lock().unwrap();
            for j in 0..2 {
                judged(&env.bash(&format!("echo held{j}"), Ok("x")), "held");
            }
            drop(lock);
        }
        if i % 10 == 0 {
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    assert!(
        said.iter().all(|s| !s.contains("earlier copy")),
        "an ordinary session is never told of a put-back: {said:?}"
    );
    assert!(calls(&env) >= 60, "every call counted");
}

/// Issue 30 part 3: a state deleted together with its lock file looks like a new session to the
/// lock. The state dir's record of sessions seen tells it, once; when that went too, the CLI's
/// transcript (earlier finished calls) does. Harmless twins: a new session, a session start with
/// a long transcript (a fork or resume), and a session `gc` removed, say nothing.
#[test]
fn a_state_deleted_with_its_lock_is_told_once() {
    let env = Env::new();
    // Claude Code's session start makes the session's files (and its record as seen).
    let start = env.base("SessionStart", json!({"source": "startup"}));
    assert!(env
        .hook("session-start", &start)
        .stdout
        .contains("watchPaths"));
    for _ in 0..2 {
        judged(&env.bash("cargo test", FAIL), "before");
    }
    let (state, lock) = (env.state_file(), env.lock_file());
    std::fs::remove_file(state).unwrap();
    std::fs::remove_file(lock).unwrap();
    let said: Vec<String> = (0..3)
        .map(|_| {
            let out = env.bash("cargo test", FAIL);
            judged(&out, "after the deletion");
            notice(&out)
        })
        .collect();
    told_once(
        &said,
        "state and lock file were deleted",
        "state and lock deleted",
    );
    // A resumed session whose files were deleted: told at its start, shown at launch.
    let (state, lock) = (env.state_file(), env.lock_file());
    std::fs::remove_file(state).unwrap();
    std::fs::remove_file(lock).unwrap();
    let resumed = env.base("SessionStart", json!({"source": "resume"}));
    let out = env.hook("session-start", &resumed);
    assert!(
        notice(&out).contains("state and lock file were deleted"),
        "{}",
        out.stdout
    );
    assert!(out.json()["hookSpecificOutput"]["watchPaths"].is_array());
    assert_eq!(notice(&env.bash("ls", Ok("a"))), "", "told once");

    // The whole state dir gone, the transcript still shows the calls.
    let mut wiped = Env::new();
    let transcript = wiped.project.join("transcript.jsonl");
    let result =
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"x"}]}}"#;
    std::fs::write(&transcript, format!("{result}\n{result}\n{result}\n")).unwrap();
    wiped.transcript = transcript.display().to_string();
    let start = wiped.base("SessionStart", json!({"source": "resume"}));
    assert_eq!(
        notice(&wiped.hook("session-start", &start)),
        "",
        "a resumed or forked session's start: its transcript holds calls from before"
    );
    judged(&wiped.bash("ls", Ok("a")), "first call");
    std::fs::remove_dir_all(&wiped.state).unwrap();
    let said: Vec<String> = (0..2).map(|_| notice(&wiped.bash("ls", Ok("a")))).collect();
    told_once(
        &said,
        "transcript shows 3 finished tool calls",
        "state dir wiped",
    );

    // A new session whose transcript holds only the call being judged: nothing to say.
    let mut fresh = Env::new();
    let one = fresh.project.join("one.jsonl");
    std::fs::write(&one, format!("{result}\n")).unwrap();
    fresh.transcript = one.display().to_string();
    assert_eq!(notice(&fresh.bash("ls", Ok("a"))), "");

    // A session gc removed for its age is new again when it comes back, not deleted.
    let old = Env::new();
    judged(&old.bash("ls", Ok("a")), "old session");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let gc = old.run(&["gc", "--older-than", "1s"], b"");
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    assert!(
        gc.stdout.contains("1 session"),
        "gc removed it: {}",
        gc.stdout
    );
    assert_eq!(notice(&old.bash("ls", Ok("a"))), "");
}

/// Issue 37 point 4: the state dir deleted while the transcript, the record that tells it, is
/// padded past what was read, linked to `/dev/null` or replaced by a FIFO: still told. Harmless
/// twins: a new session with a large transcript holding only the call being judged, one whose
/// transcript is not written yet, and (every other test here) one whose payload names
/// `/dev/null` itself, are told nothing.
#[test]
fn a_state_dir_deleted_is_told_whatever_became_of_the_transcript() {
    let result =
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"x"}]}}"#;
    let pad = " ".repeat(6 << 20);
    type Doctor = fn(&Path, &str, &str);
    let routes: [(&str, Doctor, &str); 4] = [
        (
            "padded before its calls",
            |t, r, pad| std::fs::write(t, format!("{pad}\n{r}\n{r}\n{r}\n")).unwrap(),
            "transcript shows 3 finished tool calls",
        ),
        (
            "padded after its calls",
            |t, r, pad| std::fs::write(t, format!("{r}\n{r}\n{pad}{pad}\n{r}\n")).unwrap(),
            "transcript shows 3 finished tool calls",
        ),
        (
            "linked to /dev/null",
            |t, _, _| {
                let _ = std::fs::remove_file(t);
                std::os::unix::fs::symlink("/dev/null", t).unwrap();
            },
            "transcript.jsonl is a device",
        ),
        (
            "replaced by a FIFO",
            |t, _, _| {
                std::fs::remove_file(t).unwrap();
                mkfifo(t);
            },
            "transcript.jsonl is a FIFO",
        ),
    ];
    for (how, doctor, told) in routes {
        let mut env = Env::new();
        let transcript = env.project.join("transcript.jsonl");
        std::fs::write(&transcript, format!("{result}\n")).unwrap();
        env.transcript = transcript.display().to_string();
        judged(&env.bash("ls", Ok("a")), how);
        doctor(&transcript, result, &pad);
        std::fs::remove_dir_all(&env.state).unwrap();
        let said: Vec<String> = (0..2).map(|_| notice(&env.bash("ls", Ok("a")))).collect();
        told_once(&said, told, how);
    }

    let mut big = Env::new();
    let transcript = big.project.join("big.jsonl");
    std::fs::write(&transcript, format!("{pad}\n{pad}\n{result}\n")).unwrap();
    big.transcript = transcript.display().to_string();
    assert_eq!(notice(&big.bash("ls", Ok("a"))), "", "a new session");
    let mut unwritten = Env::new();
    unwritten.transcript = unwritten.project.join("none.jsonl").display().to_string();
    assert_eq!(
        notice(&unwritten.bash("ls", Ok("a"))),
        "",
        "no transcript yet"
    );
}

/// Issue 30 part 3: the project's outer-loop record (a fresh session per try) deleted, or an
/// earlier copy put back, is told at the next session's first prompt; written by loopgate, or in
/// a project that never had one, nothing is said.
#[test]
fn an_outer_loop_record_deleted_or_put_back_is_told() {
    let mut env = Env::new();
    assert!(!notice(&env.new_prompt("p1")).contains("outer-loop"));
    env.stop(false);
    let record: PathBuf = std::fs::read_dir(&env.state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "project"))
        .expect("the project's record");
    let next = |env: &mut Env, name: &str| -> String {
        env.session = name.into();
        let said = notice(&env.new_prompt(&format!("{name}-prompt")));
        env.stop(false);
        said
    };
    assert!(
        !next(&mut env, "s2").contains("outer-loop"),
        "as loopgate wrote it"
    );

    std::fs::remove_file(&record).unwrap();
    let said = next(&mut env, "s3");
    assert!(
        said.contains("outer-loop record") && said.contains("was deleted"),
        "{said}"
    );
    assert!(
        !next(&mut env, "s4").contains("outer-loop"),
        "told once: written again since"
    );

    // An earlier copy put back: its own time of writing is ten minutes old.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    v["written_ms"] = json!(now - 600_000);
    std::fs::write(&record, v.to_string()).unwrap();
    let said = next(&mut env, "s5");
    assert!(said.contains("something other than loopgate"), "{said}");
}
