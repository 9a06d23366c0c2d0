//! A newcomer's first hour, through the binary: mistakes on the command line say what to do.

use crate::common::{Env, Out};
use std::path::Path;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn refused(env: &Env, args: &[&str]) -> Out {
    let out = env.run(args, b"");
    assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
    assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    out
}

#[test]
fn usage_errors_keep_what_to_do() {
    let env = Env::new();
    for (args, wants) in [
        (
            &["reset"][..],
            &["--session <SESSION>", "--all", "'loopgate reset --help'"][..],
        ),
        (
            &["replay"],
            &[
                "<PATHS>",
                "Usage: loopgate replay",
                "'loopgate replay --help'",
            ],
        ),
        (
            &["completions"],
            &["<SHELL>", "'loopgate completions --help'"],
        ),
        (
            &["stauts"],
            &["similar subcommand", "'status'", "'loopgate --help'"],
        ),
        (
            &["status", "--jsn"],
            &["'--json'", "'loopgate status --help'"],
        ),
        (&["completions", "tcsh"], &["possible values: bash", "zsh"]),
    ] {
        let out = refused(&env, args);
        for want in wants {
            assert!(
                out.stderr.contains(want),
                "{args:?} lacks {want}:\n{}",
                out.stderr
            );
        }
        assert!(out.stderr.starts_with("loopgate: "), "{}", out.stderr);
    }
}

#[test]
fn bare_loopgate_and_help_help_show_help() {
    let env = Env::new();
    for args in [&[][..], &["help", "--help"]] {
        let out = env.run(args, b"");
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(
            out.stdout.contains("Usage: loopgate"),
            "{args:?}: {}",
            out.stdout
        );
        assert!(out.stdout.contains("loopgate demo"), "{}", out.stdout);
    }
    let bare = env.run(&[], b"").stdout;
    assert!(bare.lines().count() < 20, "short: {bare}");
    assert!(bare.contains("loopgate --help"), "{bare}");
}

#[test]
fn config_and_payload_errors_are_in_words() {
    let env = Env::new();
    let file = env.state.parent().unwrap().join("xdg/loopgate/config.toml");
    write(&file, "[detectors.repeat]\nsuccess = 3.5\n");
    let out = env.run(&["config"], b"");
    assert!(
        out.stderr.contains("expected a whole number"),
        "{}",
        out.stderr
    );
    let out = env.run(&["pre-tool-use"], b"0");
    assert_eq!(out.code, 1);
    for rust in ["u32", "struct", "Payload", "floating point"] {
        assert!(!out.stderr.contains(rust), "{}", out.stderr);
    }
    assert!(out.stderr.contains("expected an object"), "{}", out.stderr);
}

#[test]
fn config_shows_what_is_in_effect_and_says_why() {
    let env = Env::new().config(
        "lock_timeout_ms = 99999\n[detectors.stagnation]\nwarn_at = 9\ndeny_at = 8\n[detectors.repeat]\nsuccess = 99999999999\n",
    );
    let out = env.run(&["config"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("lock_timeout_ms = 5000")),
        "the capped value is the one shown: {}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("lock_timeout_ms = 99999: a hook waits at most 5000 ms"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("warn_at = 9 is not below deny_at = 8: the refusal comes first"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("the number `99999999999`, expected a whole number from 0 to 4294967295"),
        "a number too large is told its range: {}",
        out.stderr
    );
    let facts = env.run(&["config", "--json"], b"").json();
    let lock = facts["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "lock_timeout_ms")
        .unwrap()
        .clone();
    assert_eq!(lock["value"], 5000);
}

#[test]
fn counts_of_one_are_singular() {
    let mut env = Env::new();
    env.new_prompt("p1");
    env.bash("ls", Ok("a"));
    let out = env.run(&["report"], b"");
    assert!(out.stdout.contains("1 session, 1 call,"), "{}", out.stdout);
    assert!(!out.stdout.contains(" 1 calls"), "{}", out.stdout);
}

/// Every file and directory under `dir`, with its bytes and modification time.
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>, Option<std::time::SystemTime>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let bytes = if meta.is_dir() {
                stack.push(p.clone());
                Vec::new()
            } else {
                std::fs::read(&p).unwrap()
            };
            out.push((p, bytes, meta.modified().ok()));
        }
    }
    out.sort();
    out
}

#[test]
fn demo_denies_a_real_loop_in_under_a_second_and_touches_nothing_of_the_users() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    // The user's own config says observe, their state dir has a session: the demo ignores both.
    write(
        &home.join("xdg/loopgate/config.toml"),
        "mode = \"observe\"\n",
    );
    let mut user = Env::new();
    user.state = env.state.clone();
    user.new_prompt("p1");
    user.bash("ls", Ok("a"));
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let before = snapshot(&home);

    let started = std::time::Instant::now();
    let o = env.command(&["demo"]).env("TMPDIR", tmp).output().unwrap();
    let took = started.elapsed();
    let (code, stdout) = (o.status.code(), String::from_utf8_lossy(&o.stdout));
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("call 1  Bash  pytest"), "{stdout}");
    assert!(stdout.contains("DENIED by loopgate"), "{stdout}");
    assert!(stdout.contains("LOOP_DETECTED"), "{stdout}");
    assert!(stdout.contains("session demo-session"), "{stdout}");
    assert!(stdout.contains("denials 1"), "{stdout}");
    // A debug build on a loaded machine; a release build takes a fraction of this.
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    let after = snapshot(&home);
    let changed: Vec<_> = after
        .iter()
        .filter(|f| !before.contains(f))
        .chain(before.iter().filter(|f| !after.contains(f)))
        .map(|f| &f.0)
        .collect();
    assert!(changed.is_empty(), "the demo changed {changed:?}");
    assert_eq!(snapshot(tmp), [], "the demo left its throw-away directory");
}

#[test]
fn demo_json_gives_each_step_and_the_status_after() {
    let env = Env::new();
    let doc = env.run(&["demo", "--json"], b"").json();
    assert_eq!(doc["denied"], true, "{doc}");
    let steps = doc["steps"].as_array().unwrap();
    let last = steps.last().unwrap();
    assert_eq!(last["denied"], true, "{doc}");
    assert!(
        last["agent_reads"]
            .as_str()
            .unwrap()
            .contains("LOOP_DETECTED"),
        "{doc}"
    );
    assert!(steps.iter().any(|s| s["failed"] == true), "{doc}");
    assert_eq!(doc["status"][0]["session"], "demo-session", "{doc}");
}

/// A copy of the binary at `dir/loopgate`, as an install would leave it.
fn installed_copy(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let bin = dir.join("loopgate");
    std::fs::copy(crate::common::BIN, &bin).unwrap();
    bin
}

#[test]
fn restore_refuses_hooks_that_call_a_deleted_binary() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    let settings = home.join(".claude/settings.json");
    write(&settings, "{\"model\": \"opus\"}\n");
    let bin = installed_copy(&home.join("bin"));
    let s = settings.to_str().unwrap();
    let out = env.run(
        &["setup", "--settings", s, "--bin", bin.to_str().unwrap()],
        b"",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = env.run(&["setup", "--settings", s, "--show-bin"], b"");
    assert_eq!(out.stdout.trim(), bin.to_str().unwrap());
    let out = env.run(&["setup", "--settings", s, "--uninstall"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    std::fs::remove_file(&bin).unwrap();
    let before = std::fs::read_to_string(&settings).unwrap();

    let out = env.run(&["setup", "--settings", s, "--restore"], b"");
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stderr.contains(bin.to_str().unwrap()), "{}", out.stderr);
    assert!(out.stderr.contains("no longer exists"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), before);
}

#[test]
fn restore_after_a_first_setup_returns_to_no_file() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    for (args, file) in [
        (&["setup"][..], home.join(".claude/settings.json")),
        (
            &["setup", "--agent", "copilot"],
            home.join(".copilot/hooks/loopgate.json"),
        ),
    ] {
        let out = env.run(args, b"");
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(file.is_file(), "{args:?}: {}", out.stdout);
        let restore: Vec<&str> = args.iter().copied().chain(["--restore"]).collect();
        let out = env.run(&restore, b"");
        assert_eq!(out.code, 0, "{restore:?}: {}", out.stderr);
        assert!(!file.exists(), "{restore:?}: {}", out.stdout);
        // Restoring again undoes the restore.
        let out = env.run(&restore, b"");
        assert_eq!(out.code, 0, "{restore:?}: {}", out.stderr);
        assert!(file.is_file(), "{restore:?}: {}", out.stdout);
    }
}

#[test]
fn uninstall_leaves_no_backup_and_says_the_file_is_as_before() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    let file = home.join(".claude/settings.json");
    write(&file, "{\"model\": \"opus\"}\n");
    assert_eq!(env.run(&["setup"], b"").code, 0);
    let out = env.run(&["setup", "--uninstall"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let left: Vec<String> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["settings.json"], "{}", out.stdout);
    assert!(
        out.stdout.contains("it is as it was before setup"),
        "{}",
        out.stdout
    );
}

#[cfg(unix)]
#[test]
fn install_sh_uninstall_removes_the_binary_the_hooks_call() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    let bin = installed_copy(&home.join("old-bin"));
    let out = env.run(&["setup", "--bin", bin.to_str().unwrap()], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Where an install would put the binary today is elsewhere.
    let now = home.join("new-bin");
    let o = std::process::Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .arg("--uninstall")
        .env_clear()
        .env("HOME", &home)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", bin.parent().unwrap().display()),
        )
        .env("LOOPGATE_BIN_DIR", &now)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!bin.exists(), "{stdout}");
    assert!(
        stdout.contains(&format!("removed {}", bin.display())),
        "{stdout}"
    );
}

/// Runs `cmd` repeatedly until loopgate denies it; the deny answer.
fn loop_until_denied(env: &Env, cmd: &str) -> Out {
    for _ in 0..6 {
        let out = env.bash(
            cmd,
            Err("Exit code 127\nbash: frobnicate: command not found"),
        );
        if out.denied() {
            return out;
        }
    }
    panic!("{cmd} was never denied");
}

#[test]
fn report_counts_refused_calls_apart_from_successes() {
    let mut env = Env::new();
    env.new_prompt("p1");
    env.bash("ls", Ok("README.md"));
    loop_until_denied(&env, "frobnicate --all");
    assert!(env.bash("frobnicate --all", Err("unused")).denied());
    let report = env.run(&["report", "--json"], b"").json();
    let st = &report["statistics"];
    assert_eq!(st["refused"], 2, "{report}");
    assert_eq!(st["ran"], 3, "ls and two failures ran: {report}");
    let rate = st["success_rate"].as_f64().unwrap();
    assert!(
        (rate - 1.0 / 3.0).abs() < 1e-9,
        "one of three calls that ran succeeded: {report}"
    );
    let text = env.run(&["report"], b"").stdout;
    assert!(
        text.contains("5 calls (2 refused), 2 failures (success rate 33.3% of the calls that ran)"),
        "{text}"
    );
}

#[test]
fn status_after_a_reset_says_so_and_report_keeps_the_history() {
    let mut env = Env::new();
    env.new_prompt("p1");
    loop_until_denied(&env, "frobnicate --all");
    let before = env.run(&["status"], b"").stdout;
    assert!(before.contains("denials 1"), "{before}");
    let out = env.run(&["reset", "--all"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let after = env.run(&["status"], b"").stdout;
    assert!(after.contains("reset at "), "{after}");
    assert!(after.contains("calls 0  failures 0  denials 0"), "{after}");
    assert!(!after.contains("PreToolUse Bash deny"), "{after}");
    let explain = env.run(&["explain"], b"").stdout;
    assert!(
        explain.contains("detector: repeat"),
        "a reset is no decision: {explain}"
    );
    let report = env.run(&["report", "--json"], b"").json();
    assert_eq!(report["statistics"]["interventions"], 1, "{report}");
    assert!(
        report["statistics"]["calls"].as_u64().unwrap() >= 2,
        "{report}"
    );
}

#[test]
fn observe_mode_shows_in_doctor_config_and_status() {
    let env = Env::new().observe();
    let home = env.state.parent().unwrap().to_path_buf();
    let out = env.run(&["setup", "--observe"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let vars = [("LOOPGATE_MODE", "")];
    let plain = |args: &[&str]| {
        let o = env.command(args).env_remove(vars[0].0).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let doctor = plain(&["doctor"]);
    assert!(
        doctor.contains("mode: observe for Claude Code (the hooks run with --observe"),
        "{doctor}"
    );
    let config = plain(&["config"]);
    assert!(config.contains("run with --observe"), "{config}");
    assert!(config.contains(&home.join(".claude/settings.json").display().to_string()));
    // The hooks themselves, observing: what they would have done is not called a denial.
    for _ in 0..4 {
        env.bash(
            "frobnicate --all",
            Err("Exit code 127\nbash: frobnicate: command not found"),
        );
    }
    let status = env.run(&["status"], b"").stdout;
    assert!(status.contains("would deny 2"), "{status}");
    assert!(status.contains("would deny [repeat"), "{status}");
    assert!(!status.contains("denials"), "{status}");
}

#[test]
fn read_only_commands_create_nothing() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    let elsewhere = home.join("X");
    for args in [
        &["status"][..],
        &["report"],
        &["reset", "--all"],
        &["--state-dir", elsewhere.to_str().unwrap(), "status"],
        &["doctor"],
    ] {
        let out = env.run(args, b"");
        assert_ne!(out.code, 2);
        assert!(
            !env.state.exists(),
            "{args:?} created {}",
            env.state.display()
        );
        assert!(
            !elsewhere.exists(),
            "{args:?} created {}",
            elsewhere.display()
        );
    }
    let out = env.run(&["status"], b"");
    assert!(out.stdout.starts_with("no sessions in "), "{}", out.stdout);
}

#[test]
fn replay_names_bad_paths_and_fails_on_no_transcripts() {
    let env = Env::new();
    let missing = env.project.join("nope");
    let out = refused_run(&env, &["replay", missing.to_str().unwrap()]);
    assert!(
        out.stderr
            .contains(&format!("{}: no such file", missing.display())),
        "{}",
        out.stderr
    );
    let out = refused_run(&env, &["replay", env.project.to_str().unwrap()]);
    assert!(
        out.stderr.contains("no transcripts found"),
        "{}",
        out.stderr
    );
}

fn refused_run(env: &Env, args: &[&str]) -> Out {
    let out = env.run(args, b"");
    assert_eq!(out.code, 1, "{args:?}: {}", out.stdout);
    out
}

#[test]
fn the_man_page_covers_every_subcommand_and_names_no_missing_page() {
    let env = Env::new();
    let page = env.run(&["man"], b"").stdout;
    assert!(
        !page.contains("(1)"),
        "the man page refers to pages nothing installs"
    );
    for sub in ["status", "reset", "demo", "setup", "replay"] {
        assert!(page.contains(&format!(".SS \"loopgate {sub}\"")), "{sub}");
    }
}

/// A transcript of `calls` responses, each one Bash call `toolu_t_<n>` running `cmd`, on Sonnet 4.5.
fn transcript(calls: u32, cmd: &str) -> String {
    let mut lines = vec![
        serde_json::json!({"type": "user", "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": "make the test pass"}}),
    ];
    for n in 1..=calls {
        let at = format!("2026-01-01T00:00:{n:02}Z");
        lines.push(serde_json::json!({"type": "assistant", "timestamp": at, "sessionId": "sess-1",
            "message": {"id": format!("msg_{n}"), "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "usage": {"input_tokens": 100, "cache_read_input_tokens": 9000, "output_tokens": 900},
            "content": [{"type": "tool_use", "id": format!("toolu_t_{n}"), "name": "Bash",
                "input": {"command": cmd, "description": "run"}}]}}));
        lines.push(serde_json::json!({"type": "user", "timestamp": at, "sessionId": "sess-1",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_t_{n}"),
                "content": "bash: frobnicate: command not found", "is_error": true}]}}));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn report_and_status_show_what_a_loop_cost() {
    let mut env = Env::new();
    let file = env.project.join("transcript.jsonl");
    env.transcript = file.display().to_string();
    env.new_prompt("p1");
    loop_until_denied(&env, "frobnicate --all");
    let denied_at = env
        .events()
        .iter()
        .find_map(|e| e["tool_use_id"].as_str().map(String::from))
        .unwrap();
    let n: u32 = denied_at.trim_start_matches("toolu_t_").parse().unwrap();
    // The session's transcript as Claude Code would have written it (no hook read it).
    std::fs::write(&file, transcript(n, "frobnicate --all")).unwrap();
    assert!(env
        .events()
        .iter()
        .all(|e| e["transcript_path"] == env.transcript));

    let report = env.run(&["report"], b"").stdout;
    // From the first repeat (call 2) to the denied call n: n - 1 responses of 10,000 tokens.
    let want = format!(
        "repeat loop 2026-01-01 00:00:02 → 2026-01-01 00:00:{n:02}: {} calls, {} tokens",
        n - 1,
        (n - 1) * 10
    );
    assert!(
        report.contains(&want.replace(" tokens", ",000 tokens")),
        "{want}\n{report}"
    );
    assert!(
        report.contains("at claude-sonnet-4-5-20250929 list price"),
        "{report}"
    );
    assert!(report.contains("spent inside 1 loop:"), "{report}");
    let status = env.run(&["status", "--session", "sess-1"], b"").stdout;
    assert!(status.contains("spent inside 1 loop:"), "{status}");
    let json = env.run(&["report", "--json"], b"").json();
    assert_eq!(
        json["loop_cost"]["tokens"],
        (n - 1) as u64 * 10_000,
        "{json}"
    );

    let replay = env.run(&["replay", file.to_str().unwrap()], b"").stdout;
    assert!(replay.contains("spent inside 1 loop"), "{replay}");
}

#[test]
fn the_failures_warning_names_a_call_once_with_its_count() {
    let env = Env::new();
    let mut warning = None;
    for n in 0..5 {
        let input = serde_json::json!({"command": "make deploy"});
        let id = env.id();
        env.pre("Bash", input.clone(), &id);
        let err = format!("Exit code 2\nmake: *** [deploy] Error {n}");
        warning = env.fail("Bash", input, &id, &err).context().or(warning);
    }
    let ctx = warning.expect("a warning at the 5th failure");
    assert!(ctx.contains("Bash `make deploy` (5×)"), "{ctx}");
    assert_eq!(ctx.matches("make deploy").count(), 1, "{ctx}");
}

/// A stand-in for cargo that "builds" by copying the test's loopgate binary: enough for
/// install.sh's build step, without a release build.
#[cfg(unix)]
fn fake_cargo(dir: &Path, target: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\n  -vV) echo 'host: test-host' ;;\n  metadata) echo '{{\"target_directory\":\"{t}\"}}' ;;\n  build) mkdir -p '{t}/release' && cp '{bin}' '{t}/release/loopgate' ;;\nesac\n",
        t = target.display(),
        bin = crate::common::BIN
    );
    let path = dir.join("cargo");
    write(&path, &script);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[cfg(unix)]
#[test]
fn install_sh_uninstall_then_restore_leaves_hooks_that_run() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    let tools = home.join("tools");
    fake_cargo(&tools, &home.join("target"));
    let bin_dir = home.join("bin");
    let install = |arg: &str| {
        let o =
            std::process::Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
                .args([arg].into_iter().filter(|a| !a.is_empty()))
                .env_clear()
                .env("HOME", &home)
                .env("PATH", format!("{}:/usr/bin:/bin", tools.display()))
                .env("LOOPGATE_BIN_DIR", &bin_dir)
                .output()
                .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "install.sh {arg}: {text}");
        text
    };
    install("");
    let bin = bin_dir.join("loopgate");
    assert!(bin.is_file());
    install("--uninstall");
    assert!(!bin.exists(), "uninstall removes the binary");
    assert!(!bin_dir.exists(), "and the folder the install made for it");
    assert!(!home.join(".claude").exists(), "and what setup wrote");
    let out = install("--restore");
    assert!(
        bin.is_file(),
        "restore installs the binary again first: {out}"
    );
    let settings = std::fs::read_to_string(home.join(".claude/settings.json")).unwrap();
    assert!(settings.contains(&bin.display().to_string()), "{settings}");
    assert!(
        home.join(".claude/commands/loopgate.md").is_file(),
        "/loopgate is back with the hooks: {out}"
    );
    // The restored hooks run.
    let o = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .unwrap();
    assert!(o.status.success());
}

#[test]
fn a_bad_duration_says_what_to_write() {
    let mut env = Env::new();
    env.new_prompt("p1");
    for args in [
        &["gc", "--older-than", "x"][..],
        &["status", "--since", "5q"],
        &["report", "--since", "x"],
    ] {
        let out = refused_run(&env, args);
        assert!(
            out.stderr
                .contains("is not a duration: write a number and a unit"),
            "{}",
            out.stderr
        );
        assert!(!out.stderr.contains("expected number at"), "{}", out.stderr);
    }
}

#[test]
fn report_says_why_a_loops_cost_is_not_shown() {
    let mut env = Env::new();
    let gone = env.project.join("gone.jsonl");
    env.transcript = gone.display().to_string();
    env.new_prompt("p1");
    loop_until_denied(&env, "frobnicate --all");
    let text = env.run(&["report"], b"").stdout;
    assert!(
        text.contains(&format!(
            "what the loops cost is not known for 1 session (the transcript is gone or unreadable: {})",
            gone.display()
        )),
        "{text}"
    );
}

#[test]
fn deny_at_0_is_refused_in_one_line_and_the_default_stays() {
    let env = Env::new().config("[detectors.stagnation]\nwarn_at = 0\ndeny_at = 0\n");
    let out = env.run(&["config"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    for (key, default) in [("warn_at", 5), ("deny_at", 8)] {
        let said: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains(&format!("detectors.stagnation.{key} = 0:")))
            .collect();
        assert_eq!(said.len(), 1, "{}", out.stderr);
        assert!(
            said[0].contains("set detectors.stagnation.enabled = false")
                && said[0].ends_with(&format!("{default} is in effect")),
            "{}",
            said[0]
        );
        assert!(
            out.stdout
                .lines()
                .any(|l| l.starts_with(&format!("{key} = {default} "))),
            "{}",
            out.stdout
        );
    }
    assert!(!out.stderr.contains("is not below"), "{}", out.stderr);
}
