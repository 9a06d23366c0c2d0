//! Issue 30 part 3: the hooks' binary is checked by something it does not control. Setup pins
//! Claude Code's SessionStart handler and status line to the binary's SHA-256, checked by the
//! system's `sha256sum` under `/bin/sh -c` (as Claude Code runs hook commands, observed). A binary
//! replaced by `exit 0` — a copy over it, a hard link, `cp -r dir/.` — is told at the session's
//! start, on the status line and by `doctor`; the same binary touched or left alone runs as before.
//! Each command below is run as Claude Code runs it: `sh -c '<command>'` with the payload on stdin.

use crate::common::Env;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An install: the debug binary copied into the HOME (a copy: the test overwrites it), wired
/// with `setup --bin` (`operate::installed`).
fn installed() -> Option<(Env, PathBuf, PathBuf)> {
    if loopgate::platform::system_digest_checker().is_none() {
        eprintln!("no root-owned digest checker here: nothing is pinned (docs/security.md)");
        return None;
    }
    let env = Env::new();
    let (bin, user) = crate::operate::installed(&env);
    Some((env, bin, user))
}

fn settings(user: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(user).unwrap()).unwrap()
}

fn session_start_command(user: &Path) -> String {
    settings(user)["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Runs a settings command as Claude Code does: `/bin/sh -c`, the payload on stdin.
fn run_as_cli(env: &Env, command: &str, payload: &Value) -> String {
    let out = assert_cmd::Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .env("HOME", env.state.parent().unwrap())
        .env("LOOPGATE_STATE_DIR", &env.state)
        .current_dir(&env.project)
        .write_stdin(payload.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "the CLI's call proceeds");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn start_payload(env: &Env) -> Value {
    env.base("SessionStart", json!({"source": "startup"}))
}

const EXIT_0: &[u8] = b"#!/bin/sh\nexit 0\n";

#[test]
fn a_replaced_binary_is_told_at_session_start_on_the_status_line_and_by_doctor() {
    let Some((env, bin, user)) = installed() else {
        return;
    };
    let start = session_start_command(&user);
    let status = settings(&user)["statusLine"]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(start.contains("sha256sum") && status.contains("sha256sum"));

    // Harmless twins: the binary as installed, then touched, runs as before.
    let said = run_as_cli(&env, &start, &start_payload(&env));
    assert!(!said.contains("NOT judging"), "{said}");
    let line = run_as_cli(&env, &status, &json!({"session_id": env.session}));
    assert!(line.starts_with("loopgate ✓"), "{line}");
    Command::new("touch").arg(&bin).status().unwrap();
    assert!(!run_as_cli(&env, &start, &start_payload(&env)).contains("NOT judging"));
    let doctor = env.run(&["doctor", "--json"], b"");
    assert!(
        doctor.stdout.contains("has the SHA-256 setup recorded"),
        "{}",
        doctor.stdout
    );

    let original = std::fs::read(&bin).unwrap();
    let dir = bin.parent().unwrap();
    type Route<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let routes: Vec<Route> = vec![
        (
            "copy over it",
            Box::new(|| std::fs::write(&bin, EXIT_0).unwrap()),
        ),
        (
            "hard link",
            Box::new(|| {
                let other = dir.join("other");
                std::fs::write(&other, EXIT_0).unwrap();
                std::fs::remove_file(&bin).unwrap();
                std::fs::hard_link(&other, &bin).unwrap();
            }),
        ),
        (
            "cp -r dir/.",
            Box::new(|| {
                let src = dir.parent().unwrap().join("fake");
                std::fs::create_dir_all(&src).unwrap();
                std::fs::write(src.join("loopgate"), EXIT_0).unwrap();
                let ok = Command::new("cp")
                    .arg("-r")
                    .arg(format!("{}/.", src.display()))
                    .arg(dir)
                    .status()
                    .unwrap();
                assert!(ok.success());
            }),
        ),
        ("deleted", Box::new(|| std::fs::remove_file(&bin).unwrap())),
    ];
    for (name, replace) in routes {
        replace();
        let said = run_as_cli(&env, &start, &start_payload(&env));
        let said: Value = serde_json::from_str(&said).unwrap_or_else(|_| panic!("{name}: {said}"));
        let message = said["systemMessage"].as_str().unwrap();
        assert!(
            message.contains("NOT judging") && message.contains(bin.to_str().unwrap()),
            "{name}: {message}"
        );
        let line = run_as_cli(&env, &status, &json!({"session_id": env.session}));
        assert!(line.starts_with("loopgate ✗ OFF"), "{name}: {line}");
        let doctor = env.run(&["doctor", "--json"], b"");
        assert!(
            doctor.stdout.contains("is not the binary setup installed"),
            "{name}: {}",
            doctor.stdout
        );
        let _ = std::fs::remove_file(&bin);
        std::fs::write(&bin, &original).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// The check is part of the wiring ConfigChange judges: removed, or its checker swapped for one
/// the agent could write, it is put back; a digest left behind by an upgrade is the person's to
/// renew and is not a change.
#[test]
fn the_binary_check_removed_from_the_settings_is_put_back() {
    let Some((env, bin, user)) = installed() else {
        return;
    };
    let wrote = settings(&user);
    let start = session_start_command(&user);
    let change = |v: &Value| {
        std::fs::write(&user, serde_json::to_string_pretty(v).unwrap()).unwrap();
        let p = env.base(
            "ConfigChange",
            json!({"source": "user_settings", "file_path": user}),
        );
        // Run by the installed binary, as the hooks run it: what it puts back names itself.
        run_as_cli(&env, &format!("{} config-change", bin.display()), &p)
    };
    let fake_checker = bin.parent().unwrap().join("sha256sum");
    std::fs::write(&fake_checker, EXIT_0).unwrap();
    for (name, command) in [
        ("unpinned", format!("{} session-start", bin.display())),
        (
            "another checker",
            start.replace(
                loopgate::platform::DIGEST_CHECKERS[0]
                    .split(' ')
                    .next()
                    .unwrap(),
                fake_checker.to_str().unwrap(),
            ),
        ),
        ("notice silenced", start.replace("NOT judging", "judging")),
    ] {
        let mut v = wrote.clone();
        v["hooks"]["SessionStart"][0]["hooks"][0]["command"] = json!(command);
        let answer: Value = serde_json::from_str(&change(&v)).unwrap();
        assert_eq!(answer["decision"], "block", "{name}: {answer}");
        // (A command in any other form is not loopgate's: it stays, and loopgate's is added.)
        let now = settings(&user)["hooks"]["SessionStart"].to_string();
        assert!(
            now.contains(&serde_json::to_string(&start).unwrap()),
            "{name}: the check is put back: {now}"
        );
    }
    // A digest that is not the binary's (the binary upgraded since setup, or the first step of
    // a binary-and-digest rewrite) stays, and is told at once; the shell tells the person again
    // at the next session start.
    let digest = start[6..70].to_string();
    let mut v = wrote.clone();
    let zeroed = start.replace(&digest, &"0".repeat(64));
    v["hooks"]["SessionStart"][0]["hooks"][0]["command"] = json!(zeroed);
    let told = change(&v);
    assert!(!told.contains("\"block\""), "{told}");
    assert!(told.contains("no longer the running binary's"), "{told}");
    assert!(settings(&user)["hooks"]["SessionStart"]
        .to_string()
        .contains(&"0".repeat(64)));
}
