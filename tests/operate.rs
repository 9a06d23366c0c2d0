//! Operability on the real binary: configuration that tells the truth, `config`, `doctor`,
//! `explain`, `gc`, `status` ordering and broken pipes, completions and the man page, and config
//! files that cannot hang or balloon a hook.

use crate::common::{Env, Out, BIN};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn home(env: &Env) -> PathBuf {
    env.state.parent().unwrap().to_path_buf()
}

fn user_config(env: &Env) -> PathBuf {
    home(env).join("xdg/loopgate/config.toml")
}

fn project_config(env: &Env) -> PathBuf {
    env.project.join(".claude/loopgate.toml")
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The files in the state dir's `sessions/`, sorted (none when it does not exist yet).
fn session_files(env: &Env) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(env.state.join("sessions"))
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn session_names(env: &Env) -> Vec<String> {
    session_files(env)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn system_message(out: &Out) -> Option<String> {
    if out.stdout.is_empty() {
        return None;
    }
    out.json()["systemMessage"].as_str().map(String::from)
}

#[test]
fn a_typo_reaches_the_human_once_per_session_with_file_line_and_nearest_key() {
    let env = Env::new().config("[detectors.repeat]\nsucces = 5\n");
    let expected = format!(
        "{}:2: unknown key `detectors.repeat.succes` (did you mean `detectors.repeat.success`?); ignored",
        user_config(&env).display()
    );
    let first = env.pre("Bash", json!({"command": "ls"}), "a1");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let msg = system_message(&first).expect("a systemMessage");
    assert_eq!(
        msg,
        format!(
            "loopgate: configuration problem: {expected} (run `loopgate doctor`; shown once per session)"
        )
    );
    assert!(
        first.json().get("hookSpecificOutput").is_none(),
        "nothing for the model"
    );
    assert!(
        env.pre("Bash", json!({"command": "pwd"}), "a2")
            .is_silent_allow(),
        "not on every call"
    );
    let config = env.run(&["config"], b"");
    assert_eq!(config.code, 0);
    assert_eq!(config.stderr.trim(), format!("loopgate: {expected}"));
}

#[test]
fn a_wrong_type_in_the_project_file_costs_only_that_setting() {
    let env = Env::new()
        .config("mode = \"observe\"\n")
        .project_config("[failures]\nwarn_after = \"five\"\n[detectors.repeat]\nsuccess = 2\n");
    let out = env.run(&["config", "--json"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = out.json();
    assert_eq!(
        doc["problems"],
        json!([format!(
            "{}:2: `failures.warn_after = \"five\"`: the text \"five\", expected a whole number from 0 to 4294967295; ignored",
            project_config(&env).display()
        )])
    );
    let setting = |key: &str| {
        doc["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .unwrap()
            .clone()
    };
    assert_eq!(
        setting("mode")["value"],
        "observe",
        "the user file is honoured"
    );
    assert_eq!(setting("mode")["source"]["source"], "user_file");
    assert_eq!(setting("detectors.repeat.success")["value"], 2);
    assert_eq!(
        setting("detectors.repeat.success")["source"]["source"],
        "project_file"
    );
    assert_eq!(setting("failures.warn_after")["value"], 5);
    // Observe mode from the user file is in force in the hook too.
    for _ in 0..3 {
        env.bash(
            "make deploy",
            Err("Exit code 2\nmake: *** No rule to make target"),
        );
    }
    let out = env.pre(
        "Bash",
        json!({"command": "make deploy", "description": "run"}),
        "w9",
    );
    assert!(!out.denied(), "observe mode never denies: {}", out.stdout);
}

#[test]
fn config_shows_every_source() {
    let env = Env::new()
        .config("\n[detectors.repeat]\nsuccess = 5\n")
        .project_config("[failures]\nwarn_after = 4\n")
        .var("LOOPGATE_LOCK_TIMEOUT_MS", "1500");
    let out = env.run(&["--observe", "config"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = |key: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{key} in {}", out.stdout))
            .to_string()
    };
    assert!(line("mode = \"observe\"").ends_with("# flag --observe"));
    assert!(line("lock_timeout_ms = 1500").ends_with("# env LOOPGATE_LOCK_TIMEOUT_MS"));
    assert!(
        line("success = 5").ends_with(&format!("# user file {}:3", user_config(&env).display()))
    );
    assert!(line("warn_after = 4").ends_with(&format!(
        "# project file {}:2",
        project_config(&env).display()
    )));
    assert!(line("max_blocks = 2").ends_with("# default"));
    assert!(out.stdout.contains("\n[detectors.repeat]\n"));
    // What it prints is a config file loopgate itself reads back without a problem.
    let copy = home(&env).join("copy.toml");
    std::fs::write(&copy, &out.stdout).unwrap();
    let again = env.run(&["config", "--config", copy.to_str().unwrap()], b"");
    assert_eq!(again.code, 0);
    assert!(again.stderr.is_empty(), "{}", again.stderr);
}

#[test]
fn a_missing_explicit_config_is_an_error() {
    let env = Env::new();
    let out = env.run(&["config", "--config", "/nonexistent/loopgate.toml"], b"");
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim(),
        "loopgate: config file /nonexistent/loopgate.toml does not exist"
    );
    let p = env.base(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "m1"}),
    );
    let out = env.run(
        &["--config", "/nonexistent/lg.toml", "pre-tool-use"],
        p.to_string().as_bytes(),
    );
    assert_eq!(out.code, 0);
    assert_eq!(
        system_message(&out).unwrap(),
        "loopgate: configuration problem: config file /nonexistent/lg.toml (from --config) does not exist; the user and project files are not read while --config is set, so defaults apply (run `loopgate doctor`; shown once per session)"
    );
    // In a hook, `LOOPGATE_CONFIG` is not read (a settings file's `env` can set it): told.
    let env = Env::new().var("LOOPGATE_CONFIG", "/nonexistent/lg.toml");
    let out = env.pre("Bash", json!({"command": "ls"}), "m2");
    let told = system_message(&out).unwrap();
    assert!(
        told.contains("LOOPGATE_CONFIG=/nonexistent/lg.toml") && told.contains("ignored"),
        "{told}"
    );
}

#[test]
fn loopgate_disable_accepts_the_usual_booleans() {
    for value in ["1", "true", "yes", "on", "TRUE"] {
        let env = Env::new().var("LOOPGATE_DISABLE", value);
        for i in 0..6 {
            let out = env.bash("make deploy", Err("Exit code 2\nmake: *** No rule"));
            assert!(!out.denied(), "{value} call {i}: {}", out.stdout);
            // Switched off, and the session told so once, at its first call.
            let told = system_message(&out).unwrap_or_default();
            assert_eq!(
                i == 0,
                told.contains("LOOPGATE_DISABLE is set"),
                "{value} call {i}: {told}"
            );
        }
        let states = std::fs::read_dir(env.state.join("sessions"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "state"))
            .count();
        assert_eq!(states, 0, "{value}: no call recorded");
    }
    let env = Env::new().var("LOOPGATE_DISABLE", "maybe");
    let out = env.pre("Bash", json!({"command": "ls"}), "d1");
    assert_eq!(
        system_message(&out).unwrap(),
        "loopgate: configuration problem: LOOPGATE_DISABLE=\"maybe\" is not a boolean (use 1/true/yes/on or 0/false/no/off); loopgate stays on (run `loopgate doctor`; shown once per session)"
    );
}

/// Runs a hook with the config at `path` made hostile. Generous bounds that a hang or a balloon
/// would break, not speed targets: at most 512 MiB of address space (reading a 1 GB file or
/// /dev/zero would not fit) and a 20 s watchdog (a FIFO read would never end).
fn hostile_config(make: impl Fn(&Path), project: bool) {
    let env = Env::new();
    let path = if project {
        project_config(&env)
    } else {
        user_config(&env)
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    make(&path);
    let payload = env.base(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "h1"}),
    );
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -v 524288 && exec \"$0\" pre-tool-use", BIN])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home(&env))
        .env("XDG_CONFIG_HOME", home(&env).join("xdg"))
        .env("LOOPGATE_STATE_DIR", &env.state)
        .env("CLAUDE_PROJECT_DIR", &env.project)
        .current_dir(&env.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(payload.to_string().as_bytes()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the hook hung on a hostile config at {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let msg = v["systemMessage"].as_str().unwrap();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("refused"), "{msg}");
}

#[cfg(unix)]
#[test]
fn a_fifo_dev_zero_or_huge_config_costs_one_line_not_the_hook() {
    for project in [true, false] {
        hostile_config(
            |p| {
                let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
                assert!(ok, "mkfifo");
            },
            project,
        );
        hostile_config(
            |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
            project,
        );
        hostile_config(
            |p| {
                let f = std::fs::File::create(p).unwrap();
                f.set_len(1 << 30).unwrap(); // sparse: 1 GB that takes no disk
            },
            project,
        );
    }
}

#[cfg(unix)]
#[test]
fn a_project_config_symlinked_out_of_the_project_is_refused() {
    let env = Env::new().config("");
    let outside = home(&env).join("elsewhere.toml");
    std::fs::write(&outside, "[detectors.repeat]\nsuccess = 2\n").unwrap();
    std::fs::create_dir_all(env.project.join(".claude")).unwrap();
    std::os::unix::fs::symlink(&outside, project_config(&env)).unwrap();
    let out = env.run(&["config"], b"");
    assert!(
        out.stderr.contains("is a symlink out of the project"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("\nsuccess = 3 "), "{}", out.stdout);
}

/// A settings file with loopgate wired by `loopgate setup`, for `doctor`.
pub(crate) fn installed(env: &Env) -> (PathBuf, PathBuf) {
    let bin_dir = home(env).join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("loopgate");
    std::fs::copy(BIN, &bin).unwrap();
    let settings = home(env).join(".claude/settings.json");
    let out = env.run(
        &[
            "setup",
            "--settings",
            settings.to_str().unwrap(),
            "--bin",
            bin.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    (bin, settings)
}

fn doctor(env: &Env, bin_dir: &Path) -> Out {
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = env.command(&["doctor"]).env("PATH", path).output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn failed_line<'a>(out: &'a Out, name: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| l.starts_with(&format!("✗ {name}:")))
        .unwrap_or_else(|| panic!("no failed {name} check in:\n{}", out.stdout))
}

#[test]
fn doctor_passes_a_good_install_and_names_the_fix_for_each_break() {
    let env = Env::new();
    let (bin, settings) = installed(&env);
    let bin_dir = bin.parent().unwrap().to_path_buf();
    let good = doctor(&env, &bin_dir);
    assert_eq!(good.code, 0, "{}{}", good.stdout, good.stderr);
    assert!(
        good.stdout.contains("✓ hooks wired once: all 11 events"),
        "{}",
        good.stdout
    );
    assert!(
        good.stdout.ends_with("all checks passed\n"),
        "{}",
        good.stdout
    );

    // Wired twice: the settings and the plugin.
    let mut s: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    s["enabledPlugins"] = json!({"loopgate@loopgate": true});
    std::fs::write(&settings, s.to_string()).unwrap();
    let twice = doctor(&env, &bin_dir);
    assert_eq!(twice.code, 1);
    let line = failed_line(&twice, "hooks wired once");
    assert!(
        line.contains("wired more than once, so every call counts double"),
        "{line}"
    );
    assert!(line.contains("fix: keep one"), "{line}");
    s.as_object_mut().unwrap().remove("enabledPlugins");
    std::fs::write(&settings, s.to_string()).unwrap();

    // The binary the hooks call is gone.
    std::fs::remove_file(&bin).unwrap();
    let missing = doctor(&env, &bin_dir);
    assert_eq!(missing.code, 1);
    let line = failed_line(&missing, "binary the hooks call");
    assert!(
        line.contains("does not exist") && line.contains("fix: run ./install.sh again"),
        "{line}"
    );
    std::fs::copy(BIN, &bin).unwrap();

    // A broken config.
    write(&user_config(&env), "[detectors.repeat]\nsucces = 5\n");
    let broken = doctor(&env, &bin_dir);
    assert_eq!(broken.code, 1);
    let line = failed_line(&broken, "config");
    assert!(
        line.contains("did you mean `detectors.repeat.success`") && line.contains("fix: edit"),
        "{line}"
    );
    std::fs::remove_file(user_config(&env)).unwrap();

    // A state dir that cannot be written (a file where the directory should be).
    let not_a_dir = home(&env).join("not-a-dir");
    std::fs::write(&not_a_dir, "x").unwrap();
    let env2 = env.var("LOOPGATE_STATE_DIR", not_a_dir.to_str().unwrap());
    let unwritable = doctor(&env2, &bin_dir);
    assert_eq!(unwritable.code, 1);
    let line = failed_line(&unwritable, "state dir");
    assert!(
        line.contains("fix: make") && line.contains("--state-dir"),
        "{line}"
    );

    let json = env2.command(&["doctor", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["status"] == "fail" && c["name"] == "state dir"));
}

/// The Agent SDK check: which apps the settings hooks reach, the binary the helpers would run,
/// and a failure only for a LOOPGATE_BIN that does not run (docs/agent-sdk.md).
#[test]
fn doctor_says_which_agent_sdk_apps_run_loopgate() {
    let env = Env::new();
    let (bin, settings) = installed(&env);
    let bin_dir = bin.parent().unwrap().to_path_buf();
    let sdk_line = |out: &Out| -> String {
        out.stdout
            .lines()
            .find(|l| l.contains(" Agent SDK apps: "))
            .unwrap_or_else(|| panic!("no Agent SDK check in:\n{}", out.stdout))
            .to_string()
    };
    let good = doctor(&env, &bin_dir);
    assert_eq!(good.code, 0, "{}", good.stdout);
    let line = sdk_line(&good);
    assert!(line.starts_with("✓ "), "{line}");
    assert!(line.contains("settingSources include 'user'"), "{line}");
    assert!(
        line.contains("settingSources: []) need loopgate/agent-sdk"),
        "{line}"
    );
    assert!(
        line.contains(&format!("would run {} (loopgate ", bin.display())),
        "{line}"
    );

    // Hooks only in the project's settings: the apps that load 'project'.
    let project_settings = env.project.join(".claude/settings.json");
    std::fs::create_dir_all(project_settings.parent().unwrap()).unwrap();
    std::fs::rename(&settings, &project_settings).unwrap();
    let moved = doctor(&env, &bin_dir);
    let line = sdk_line(&moved);
    assert!(
        line.contains("settingSources include 'project'") && !line.contains("'user'"),
        "{line}"
    );

    let env2 = env.var("LOOPGATE_BIN", "/nonexistent/loopgate");
    let broken = doctor(&env2, &bin_dir);
    assert_eq!(broken.code, 1, "{}", broken.stdout);
    let line = failed_line(&broken, "Agent SDK apps");
    assert!(
        line.contains("LOOPGATE_BIN is /nonexistent/loopgate, which does not run")
            && line.contains("fix: point LOOPGATE_BIN at the loopgate binary"),
        "{line}"
    );
    // Set, it is loopgate's own variable: no hook call warns of it.
    let out = env2.run(&["pre-tool-use"], br#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"cwd":"/"}"#);
    assert!(!out.stderr.contains("LOOPGATE_BIN"), "{}", out.stderr);
}

#[test]
fn explain_a_denial_and_an_allowed_call() {
    let env = Env::new();
    let cmd = "frobnicate --all";
    let err = "Exit code 127\nbash: frobnicate: command not found";
    let mut denied = None;
    for _ in 0..4 {
        let out = env.bash(cmd, Err(err));
        if out.denied() {
            denied = Some(out);
            break;
        }
    }
    assert!(denied.is_some(), "the repeated failure is denied");
    let out = env.run(&["explain"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = &out.stdout;
    assert!(text.starts_with("deny (enforced) at "), "{text}");
    assert!(text.contains("  detector: repeat"), "{text}");
    assert!(text.contains("  evidence: {"), "{text}");
    assert!(
        text.contains(
            "  thresholds when it fired: enabled = true, transient = 3, deterministic = 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("to change it, set these under [detectors.repeat]"),
        "{text}"
    );
    assert!(
        text.contains("    deterministic = 1    # default"),
        "{text}"
    );
    assert!(text.contains("loopgate reset --session sess-1"), "{text}");

    let json = env.run(&["explain", "--json", "frobnicate"], b"").json();
    assert_eq!(json["found"], true);
    assert_eq!(json["decision"]["detector"], "repeat");
    assert_eq!(json["decision"]["thresholds"]["deterministic"], 1);
    assert_eq!(json["config_table"], "detectors.repeat");

    env.bash("cargo build", Ok("Finished"));
    let allowed = env.run(&["explain", "cargo build"], b"");
    assert_eq!(allowed.code, 0);
    let text = &allowed.stdout;
    assert!(text.starts_with("nothing fired on a call matching \"cargo build\": every detector that looked let it pass"), "{text}");
    assert!(
        text.contains("  on  [detectors.repeat]") && text.contains("success = 3"),
        "{text}"
    );
    assert!(text.contains("(stagnation)"), "{text}");
}

#[test]
fn gc_removes_old_files_and_keeps_recent_ones() {
    let env = Env::new();
    env.bash("echo hi", Ok("hi"));
    let sessions = env.state.join("sessions");
    let old = sessions.join("0123456789abcdef0123456789abcdef.json");
    std::fs::write(&old, "{}").unwrap();
    let t = std::time::SystemTime::now() - Duration::from_secs(8 * 86_400);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&old)
        .unwrap()
        .set_modified(t)
        .unwrap();
    let dry = env.run(&["gc", "--dry-run"], b"");
    assert!(
        dry.stdout
            .starts_with("loopgate gc: would remove 1 session"),
        "{}",
        dry.stdout
    );
    assert!(old.exists());
    let out = env.run(&["gc", "--json"], b"").json();
    assert_eq!(out["sessions"], 1);
    assert!(!old.exists());
    assert!(env.state_file().exists(), "the recent session stays");
}

#[test]
fn status_is_newest_first_limited_and_survives_a_closed_pipe() {
    let mut env = Env::new();
    for s in ["first", "second", "third"] {
        env.session = s.into();
        env.bash("echo hi", Ok("hi"));
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = env.run(&["status", "--limit", "2", "--json"], b"").json();
    let ids: Vec<&str> = out
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["third", "second"]);
    assert_eq!(
        env.run(&["status", "--since", "1h", "--json"], b"")
            .json()
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // Enough sessions to fill the pipe after `head` has gone.
    let one = std::fs::read(env.state_file()).unwrap();
    for i in 0..1500 {
        std::fs::write(
            env.state.join("sessions").join(format!("{i:032x}.json")),
            &one,
        )
        .unwrap();
    }
    let o = Command::new("bash")
        .args(["-c", "set -o pipefail; \"$0\" status | head -1", BIN])
        .env("LOOPGATE_STATE_DIR", &env.state)
        .env("HOME", home(&env))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("session "));
}

#[test]
fn completions_and_the_man_page_generate() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = env.run(&["completions", shell], b"");
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        assert!(out.stdout.contains("doctor"), "{shell}");
    }
    let man = env.run(&["man"], b"");
    assert_eq!(man.code, 0);
    assert!(
        man.stdout.contains(".TH loopgate"),
        "{}",
        &man.stdout[..200.min(man.stdout.len())]
    );
}

#[test]
fn home_unset_is_refused_clearly() {
    let o = Command::new(BIN)
        .args(["status"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!("loopgate: {}", loopgate::config::paths::NO_HOME)
    );
    let o = Command::new(BIN)
        .args(["setup"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("HOME is not set"));
}

#[test]
fn a_project_file_cannot_loosen_loopgate() {
    let env = Env::new().project_config(
        "mode = \"observe\"\nlock_timeout_ms = 60000\n[detectors.repeat]\nenabled = false\ndeterministic = 9\n[guard]\nenabled = false\n",
    );
    let input = json!({"command": "frobnicate --all", "description": "run"});
    let err = "Exit code 127\nbash: frobnicate: command not found";
    let first = env.pre("Bash", input.clone(), "p1");
    let msg = system_message(&first).expect("the refusals are told to the human");
    for key in [
        "`mode = \"observe\"` ignored",
        "`lock_timeout_ms = 60000` ignored",
        "`detectors.repeat.enabled = false` ignored",
        "`detectors.repeat.deterministic = 9` ignored",
        "`guard.enabled = false` ignored",
    ] {
        assert!(msg.contains(key), "{key} in {msg}");
    }
    assert!(
        msg.contains("a project file may only tighten loopgate"),
        "{msg}"
    );
    env.fail("Bash", input.clone(), "p1", err);
    let mut denied = false;
    for i in 2..6 {
        let id = format!("p{i}");
        if env.pre("Bash", input.clone(), &id).denied() {
            denied = true;
            break;
        }
        env.fail("Bash", input.clone(), &id, err);
    }
    assert!(denied, "enforce mode and the repeat rule stay in force");
}

/// Housekeeping needs no manual `loopgate gc`: the first hook call of a new session removes
/// sessions left untouched past `max_age_days`, once a day at most. Calls of a session already
/// under way skip it (files pile up only as sessions start).
#[test]
fn a_new_sessions_first_call_sweeps_old_sessions() {
    let mut env = Env::new();
    let age = |path: &Path, days: u64| {
        let when = std::time::SystemTime::now() - Duration::from_secs(days * 24 * 3600);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    };
    env.session = "abandoned-a-month-ago".into();
    assert!(env.new_prompt("p-old").is_silent_allow());
    let old = session_files(&env);
    assert_eq!(old.len(), 2, "a lock and a state: {old:?}");
    env.session = "under-way".into();
    assert!(env.new_prompt("p-1").is_silent_allow());
    let stamp = env.state.join("gc.stamp");
    assert!(
        stamp.is_file(),
        "the first call of a session stamps its sweep"
    );
    old.iter().for_each(|p| age(p, 30));
    age(&stamp, 2);

    assert!(env.bash("ls", Ok("README.md")).is_silent_allow());
    assert!(
        old.iter().all(|p| p.exists()),
        "a session under way does not sweep"
    );

    env.session = "new".into();
    assert!(env.new_prompt("p-new").is_silent_allow());
    let left = session_files(&env);
    assert!(
        old.iter().all(|p| !p.exists()),
        "old session swept: {left:?}"
    );
    assert_eq!(left.len(), 4, "the two live sessions stay: {left:?}");
    let stamped = std::fs::metadata(&stamp).unwrap().modified().unwrap();
    assert!(stamped.elapsed().unwrap() < Duration::from_secs(3600));
}

/// SessionStart, which Claude Code fires before the first prompt, makes a new session's lock and
/// state files and answers only the paths to watch (plain stdout would reach the model; a
/// `watchPaths` answer does not, observed): the first prompt then creates no file. A resumed
/// session's start changes nothing.
#[test]
fn session_start_makes_a_new_sessions_files_and_says_nothing() {
    let mut env = Env::new().git();
    let start = |env: &Env, source: &str| {
        let mut p = env.base("SessionStart", json!({ "source": source }));
        p.as_object_mut().unwrap().remove("prompt_id");
        p.as_object_mut().unwrap().remove("permission_mode");
        env.hook("session-start", &p)
    };

    let only_watch_paths = |out: &Out| {
        out.code == 0
            && out
                .json()
                .as_object()
                .unwrap()
                .keys()
                .eq(["hookSpecificOutput"])
            && out.json()["hookSpecificOutput"]
                .as_object()
                .unwrap()
                .keys()
                .eq(["hookEventName", "watchPaths"])
    };
    let out = start(&env, "startup");
    assert!(only_watch_paths(&out), "{:?} {:?}", out.stdout, out.stderr);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let made = session_names(&env);
    assert_eq!(made.len(), 2, "the session's lock and state: {made:?}");
    assert!(
        made.iter().any(|f| f.ends_with(".lock")) && made.iter().any(|f| f.ends_with(".state"))
    );

    assert!(env.new_prompt("p-1").is_silent_allow());
    assert!(env.bash("ls", Ok("README.md")).is_silent_allow());
    assert_eq!(
        session_names(&env),
        made,
        "the first prompt and call create no file"
    );
    let status = env.status();
    assert_eq!(status[0]["totals"]["calls"], 1, "{status:#}");
    assert!(
        made.iter().any(|f| status[0]["state_file"] == f.as_str()),
        "status names the state file: {}",
        status[0]["state_file"]
    );

    let state = std::fs::read(env.state_file()).unwrap();
    let out = start(&env, "resume");
    assert!(only_watch_paths(&out) && out.stderr.is_empty());
    assert_eq!(
        std::fs::read(env.state_file()).unwrap(),
        state,
        "a resume changes nothing"
    );
    assert!(
        env.events().iter().all(|e| e["event"] != "SessionStart"),
        "nothing is logged for a session's start"
    );
}

/// Issue 22: `status` shows where a session stands against the ceiling, a new prompt never
/// lowers the session's count, and only the person's `loopgate reset` does.
#[test]
fn status_shows_the_ceiling_and_only_reset_lowers_it() {
    let mut env = Env::new();
    env.new_prompt("p-1");
    let fail = Err("Exit code 1\ncat: config/settings.yml: No such file or directory");
    for _ in 0..2 {
        assert!(!env.bash("cat config/settings.yml", fail).denied());
    }
    for n in 0..10 {
        let out = env.bash("cat config/settings.yml", fail);
        assert!(out.denied(), "refusal {}: {}", n + 1, out.stdout);
    }
    let ceiling = |env: &Env| env.status()[0]["ceiling"].clone();
    let c = ceiling(&env);
    assert_eq!(c["refused_in_turn"], 10, "{c:#}");
    assert_eq!(c["turn_ended"], true, "{c:#}");
    assert_eq!(c["ended_turns"], 1, "{c:#}");
    // Any call of the ended turn is refused, however new.
    assert!(env.bash("ls", Ok("README.md")).denied());
    let text = String::from_utf8(env.command(&["status"]).output().unwrap().stdout).unwrap();
    assert!(
        text.contains("ceiling: 10 of 10 refused calls in this turn (turn ended); 1 of 3 turns"),
        "{text}"
    );
    // What the count is made of: the one refused call, walked into again and again.
    assert!(
        text.contains("walked into: Bash `cat config/settings.yml` (repeat) 10 times"),
        "{text}"
    );
    assert_eq!(c["walked_into"].as_array().map(Vec::len), Some(10), "{c:#}");
    // Refused calls after the turn's end are the end itself, not more of what was walked into.
    assert!(env.bash("cat config/settings.yml", fail).denied());
    let c = ceiling(&env);
    assert_eq!(c["walked_into"].as_array().map(Vec::len), Some(10), "{c:#}");

    env.new_prompt("p-2");
    let c = ceiling(&env);
    assert_eq!(
        (c["refused_in_turn"].clone(), c["ended_turns"].clone()),
        (json!(0), json!(1))
    );
    let out = env.run(&["reset", "--session", "sess-1"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(ceiling(&env)["ended_turns"], 0);
}

/// SessionStart asks Claude Code to watch the hooks' binary and loopgate's config; FileChanged
/// for them is shown to the person by the session's next hook call (its own answer is shown
/// nowhere, observed in tests/e2e/watch_paths.rs), logged, and said on stderr — once.
#[test]
fn a_watched_binary_or_config_that_changes_mid_session_is_reported_once() {
    let env = Env::new().config("[detectors.repeat]\n");
    let start = env.hook(
        "session-start",
        &env.base("SessionStart", json!({"source": "startup"})),
    );
    assert_eq!(start.code, 0, "{}", start.stderr);
    let answer = start.json();
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"],
        "SessionStart"
    );
    let watched: Vec<&str> = answer["hookSpecificOutput"]["watchPaths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let config = user_config(&env);
    assert!(watched.contains(&BIN), "{watched:?}");
    assert!(watched.contains(&config.to_str().unwrap()), "{watched:?}");
    assert_eq!(
        answer.as_object().unwrap().len(),
        1,
        "nothing else: {answer}"
    );

    let changed = |file: &str, what: &str| {
        env.hook(
            "file-changed",
            &env.base("FileChanged", json!({"file_path": file, "event": what})),
        )
    };
    let shown = |out: &Out| match out.stdout.is_empty() {
        true => String::new(),
        false => out.json()["systemMessage"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    };
    // An edit that leaves loopgate enforcing, and a file nobody watches: nothing to say.
    assert!(changed(config.to_str().unwrap(), "change")
        .stderr
        .is_empty());
    assert!(changed("/tmp/elsewhere.txt", "change").stderr.is_empty());
    assert!(env.bash("echo 1", Ok("1")).is_silent_allow());

    // The config now switches loopgate to observe mode.
    std::fs::write(&config, "mode = \"observe\"\n").unwrap();
    let out = changed(config.to_str().unwrap(), "change");
    assert_eq!(out.code, 0);
    assert!(
        out.stdout.is_empty(),
        "FileChanged answers nothing: {}",
        out.stdout
    );
    assert!(out.stderr.contains("observe mode"), "{}", out.stderr);
    // The binary deleted.
    assert!(changed(BIN, "unlink").stderr.contains("was deleted"));
    let log = std::fs::read_to_string(env.state.join("events.jsonl")).unwrap();
    let notes: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "FileChanged")
        .collect();
    assert_eq!(notes.len(), 2, "{log}");
    assert_eq!(notes[1]["evidence"]["change"], "unlink");

    // The next call shows both to the person; the one after says nothing more.
    let next = env.pre("Bash", json!({"command": "echo 2"}), &env.id());
    let message = shown(&next);
    assert!(
        message.contains("observe mode") && message.contains("was deleted"),
        "{}",
        next.stdout
    );
    let after = env.pre("Bash", json!({"command": "echo 3"}), &env.id());
    assert!(after.is_silent_allow(), "told once: {}", after.stdout);
}
