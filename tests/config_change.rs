//! Defence by effect: whatever changed Claude Code's settings (here, writes the guard never saw),
//! the ConfigChange hook that follows refuses a change that switches loopgate off, puts the
//! files right (keeping the changed version aside) and tells the person; ordinary changes pass.
//! The person keeps an undone change with `/loopgate allow <id>` (tests/sanction.rs).

use crate::common::Env;
use serde_json::{json, Value};
use std::path::Path;

fn change(env: &Env, file: &Path, source: &str) -> crate::common::Out {
    let p = env.base("ConfigChange", json!({"source": source, "file_path": file}));
    env.hook("config-change", &p)
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A session whose user settings setup wired, and the project's local settings file (its
/// directory made): `(env, user, local)`.
fn wired_user_and_local() -> (Env, std::path::PathBuf, std::path::PathBuf) {
    let env = Env::new();
    let user = env.state.parent().unwrap().join(".claude/settings.json");
    let setup = env.run(&["setup", "--settings", user.to_str().unwrap()], b"");
    assert_eq!(setup.code, 0, "{}", setup.stderr);
    let local = env.project.join(".claude/settings.local.json");
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    (env, user, local)
}

fn wired(v: &Value) -> bool {
    v["hooks"]["PreToolUse"]
        .to_string()
        .contains("pre-tool-use")
}

#[test]
fn a_change_that_switches_loopgate_off_is_refused_and_undone() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    let user = home.join(".claude/settings.json");
    let setup = env.run(&["setup", "--settings", user.to_str().unwrap()], b"");
    assert_eq!(setup.code, 0, "{}", setup.stderr);
    assert!(wired(&read(&user)));
    // The person's own setup is not undone.
    assert!(change(&env, &user, "user_settings").is_silent_allow());

    // An ordinary change (a permission added by any tool): nothing to say.
    let mut v = read(&user);
    v["permissions"] = json!({"allow": ["Bash(npm test)"]});
    std::fs::write(&user, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    assert!(change(&env, &user, "user_settings").is_silent_allow());
    assert_eq!(read(&user), v, "an ordinary change is left as it is");

    // Unwired by a route the guard does not parse: refused, the hooks put back, the rest kept.
    let unwired =
        json!({"permissions": {"allow": ["Bash(npm test)"]}, "env": {"LOOPGATE_MODE": "observe"}});
    std::fs::write(&user, unwired.to_string()).unwrap();
    let out = change(&env, &user, "user_settings");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let answer = out.json();
    assert_eq!(answer["decision"], "block", "{answer}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(
        reason.contains("hooks are gone") && reason.contains("LOOPGATE_MODE"),
        "{reason}"
    );
    assert_eq!(answer["systemMessage"], answer["reason"]);
    let now = read(&user);
    assert!(wired(&now), "{now}");
    assert_eq!(now["permissions"]["allow"][0], "Bash(npm test)");
    assert!(now["env"].get("LOOPGATE_MODE").is_none(), "{now}");
    let aside = home.join(".claude/settings.json.loopgate-undone");
    assert_eq!(read(&aside), unwired, "the changed version is kept aside");
    let log = std::fs::read_to_string(env.state.join("events.jsonl")).unwrap();
    assert!(
        log.contains("ConfigChange") && log.contains("hooks are gone"),
        "{log}"
    );

    // Hooks switched off in the project's local file, spelt with a JSON escape.
    let local = env.project.join(".claude/settings.local.json");
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    std::fs::write(&local, r#"{"disable\u0041llHooks": true}"#).unwrap();
    let out = change(&env, &local, "local_settings");
    assert_eq!(out.json()["decision"], "block", "{}", out.stdout);
    assert!(read(&local).get("disableAllHooks").is_none());
    // A later, ordinary change elsewhere finds everything wired: allowed.
    std::fs::write(&local, r#"{"permissions": {"allow": ["Bash(ls)"]}}"#).unwrap();
    assert!(change(&env, &local, "local_settings").is_silent_allow());

    // An uninstall from a terminal, mid-session: nothing tells it from the agent's write, so the
    // running session undoes it and names the id the person types to keep it (tests/sanction.rs).
    let un = env.run(
        &["setup", "--uninstall", "--settings", user.to_str().unwrap()],
        b"",
    );
    assert_eq!(un.code, 0, "{}", un.stderr);
    assert!(un.stdout.contains("/loopgate allow <id>"), "{}", un.stdout);
    let out = change(&env, &user, "user_settings");
    assert!(
        out.json()["reason"]
            .as_str()
            .unwrap()
            .contains("/loopgate allow "),
        "{}",
        out.stdout
    );
    assert!(wired(&read(&user)));
    // With no session running, nothing undoes it.
    env.run(
        &["setup", "--uninstall", "--settings", user.to_str().unwrap()],
        b"",
    );
    assert!(!wired(&read(&user)));
}

/// Issue 30 part 1: loopgate's handler edited in place switches it off as surely as one removed.
/// Each edit below is refused and undone; the harmless twins (another tool's handler edited the
/// same way, loopgate's binary named through a link) pass untouched.
#[test]
fn a_handler_edited_in_place_is_refused_and_undone() {
    let env = Env::new();
    let home = env.state.parent().unwrap().to_path_buf();
    let user = home.join(".claude/settings.json");
    assert_eq!(
        env.run(&["setup", "--settings", user.to_str().unwrap()], b"")
            .code,
        0
    );
    let setup_wrote = read(&user);
    let pre = |v: &Value| v["hooks"]["PreToolUse"][0].clone();
    let command = pre(&setup_wrote)["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let bin = command.strip_suffix(" pre-tool-use").unwrap().to_string();
    type Edit = Box<dyn Fn(&mut Value)>;
    let handler = |f: fn(&mut Value, &str, &str)| -> Edit {
        let (command, bin) = (command.clone(), bin.clone());
        Box::new(move |v: &mut Value| {
            f(&mut v["hooks"]["PreToolUse"][0]["hooks"][0], &command, &bin)
        })
    };
    let edits: Vec<(&str, Edit)> = vec![
        ("async", handler(|h, _, _| h["async"] = json!(true))),
        (
            "if",
            handler(|h, _, _| h["if"] = json!("Bash(never-matches)")),
        ),
        ("shell", handler(|h, _, _| h["shell"] = json!("powershell"))),
        ("type", handler(|h, _, _| h["type"] = json!("prompt"))),
        ("timeout", handler(|h, _, _| h["timeout"] = json!(0.001))),
        (
            "/dev/null",
            handler(|h, c, _| h["command"] = json!(format!("{c} >/dev/null"))),
        ),
        (
            "|| true",
            handler(|h, c, _| h["command"] = json!(format!("{c} || true"))),
        ),
        (
            "LOOPGATE_DISABLE",
            handler(|h, c, _| h["command"] = json!(format!("LOOPGATE_DISABLE=1 {c}"))),
        ),
        (
            "--observe",
            handler(|h, _, b| h["command"] = json!(format!("{b} --observe pre-tool-use"))),
        ),
        (
            "subcommand",
            handler(|h, _, b| h["command"] = json!(format!("{b} post-tool-use"))),
        ),
        (
            "matcher",
            Box::new(|v: &mut Value| v["hooks"]["PreToolUse"][0]["matcher"] = json!("NoSuchTool")),
        ),
        (
            "ConfigChange matcher",
            Box::new(|v: &mut Value| v["hooks"]["ConfigChange"][0]["matcher"] = json!("never")),
        ),
    ];
    for (name, edit) in edits {
        let mut v = setup_wrote.clone();
        v["permissions"] = json!({"allow": ["Bash(ls)"]});
        edit(&mut v);
        std::fs::write(&user, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        let out = change(&env, &user, "user_settings");
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        let answer = out.json();
        assert_eq!(answer["decision"], "block", "{name}: {answer}");
        let reason = answer["reason"].as_str().unwrap();
        assert!(reason.contains("handler was changed"), "{name}: {reason}");
        let now = read(&user);
        assert_eq!(
            now["hooks"], setup_wrote["hooks"],
            "{name}: the handler is put back"
        );
        assert_eq!(
            now["permissions"]["allow"][0], "Bash(ls)",
            "{name}: the rest is kept"
        );
    }

    // Harmless twins: another tool's handler may be async, matched, redirected.
    let mut v = setup_wrote.clone();
    v["hooks"]["PreToolUse"]
        .as_array_mut()
        .unwrap()
        .push(json!({"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh >/dev/null", "async": true, "timeout": 1}]}));
    std::fs::write(&user, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    assert!(change(&env, &user, "user_settings").is_silent_allow());
    assert_eq!(read(&user), v);

    // loopgate named through a link to the same binary: the same program.
    #[cfg(unix)]
    {
        let link = home.join("bin/loopgate");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&bin, &link).unwrap();
        let linked = serde_json::to_string(&v)
            .unwrap()
            .replace(&format!("\"{bin} "), &format!("\"{} ", link.display()));
        std::fs::write(&user, &linked).unwrap();
        assert!(change(&env, &user, "user_settings").is_silent_allow());
    }
}

/// Issue 30 part 3: a configuration loosened mid-session (a user config made or edited while the
/// session runs, which FileChanged may never see) is told once at the next call, naming what was
/// loosened; a configuration in place from the start, or tightened, says nothing.
#[test]
fn a_configuration_loosened_mid_session_is_told_once() {
    let env = Env::new().config("[detectors.repeat]\nunknown = 4\n");
    let told = |out: &crate::common::Out| {
        out.stdout
            .contains("configuration was loosened during this session")
    };
    let first = env.bash("ls", Ok("a"));
    assert!(
        !told(&first),
        "the first call takes the baseline: {}",
        first.stdout
    );

    // Tightened: nothing to say.
    let env = env.config("[detectors.repeat]\nunknown = 2\n");
    assert!(!told(&env.bash("ls -a", Ok("a"))));

    // Loosened by a file written behind the session's back.
    let env =
        env.config("[detectors.repeat]\nunknown = 2\nsuccess = 9\n[guard]\nenabled = false\n");
    let out = env.bash("ls -l", Ok("a"));
    assert!(told(&out), "{}", out.stdout);
    let message = out.json()["systemMessage"].as_str().unwrap().to_string();
    assert!(
        message.contains("detectors.repeat.success 3 → 9"),
        "{message}"
    );
    assert!(message.contains("guard.enabled true → false"), "{message}");
    assert!(!message.contains("unknown"), "{message}");
    assert!(!told(&env.bash("ls -la", Ok("a"))), "told once");
    let log = std::fs::read_to_string(env.state.join("events.jsonl")).unwrap();
    assert!(log.contains("configuration was loosened"), "{log}");
}

/// Issue 30, plugin installs: loopgate's hooks are in the plugin, so a settings file can only
/// switch the plugin off. `enabledPlugins."loopgate@…": false`, spelt with a JSON escape too, is
/// undone and the plugin's own `/loopgate:loopgate allow <id>` named; another plugin switched
/// off, or loopgate's key in a settings install, is left alone. The plugin's files changed in
/// its cache are told at the session's first call; as shipped, nothing is said.
#[test]
fn a_plugin_install_is_judged_by_its_switches_and_its_files() {
    let root = tempfile::tempdir().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for rel in [
        ".claude-plugin/plugin.json",
        "hooks/hooks.json",
        "hooks/loopgate-hook",
        "commands/loopgate.md",
    ] {
        let to = root.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo.join(rel), to).unwrap();
    }
    let plugin = Env::new().plugin(root.path());
    let home = plugin.state.parent().unwrap().to_path_buf();
    let user = home.join(".claude/settings.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();

    std::fs::write(
        &user,
        r#"{"enabledPlugins": {"loopgate\u0040loopgate": false, "other@x": true}}"#,
    )
    .unwrap();
    let out = change(&plugin, &user, "user_settings");
    let answer = out.json();
    assert_eq!(answer["decision"], "block", "{answer}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(
        reason.contains("enabledPlugins.loopgate@loopgate")
            && reason.contains("/loopgate:loopgate allow "),
        "{reason}"
    );
    assert_eq!(read(&user)["enabledPlugins"]["loopgate@loopgate"], true);
    assert_eq!(
        read(&user)["enabledPlugins"]["other@x"],
        true,
        "the rest is kept"
    );

    // Harmless twins.
    std::fs::write(
        &user,
        r#"{"enabledPlugins": {"loopgate@loopgate": true, "other@x": false}}"#,
    )
    .unwrap();
    assert!(change(&plugin, &user, "user_settings").is_silent_allow());
    let settings_install = Env::new();
    let home2 = settings_install.state.parent().unwrap().to_path_buf();
    let user2 = home2.join(".claude/settings.json");
    assert_eq!(
        settings_install
            .run(&["setup", "--settings", user2.to_str().unwrap()], b"")
            .code,
        0
    );
    let mut v = read(&user2);
    v["enabledPlugins"] = json!({"loopgate@loopgate": false});
    std::fs::write(&user2, v.to_string()).unwrap();
    assert!(
        change(&settings_install, &user2, "user_settings").is_silent_allow(),
        "a settings install does not run the plugin: switching the plugin off is not switching loopgate off"
    );

    // The plugin's files: as shipped, nothing; the wrapper changed, told once at the first call.
    let start = |env: &Env| {
        let p = env.base("SessionStart", json!({"source": "startup"}));
        env.hook("session-start", &p)
    };
    let said = start(&plugin);
    assert!(!said.stdout.contains("systemMessage"), "{}", said.stdout);
    let mut changed = Env::new().plugin(root.path());
    changed.session = "sess-2".into();
    let wrapper = root.path().join("hooks/loopgate-hook");
    let text = std::fs::read_to_string(&wrapper).unwrap();
    std::fs::write(
        &wrapper,
        text.replace(
            "exec \"$bin\" --plugin \"$root\" \"$@\"",
            "[ \"$1\" = pre-tool-use ] && exit 0\nexec \"$bin\" --plugin \"$root\" \"$@\"",
        ),
    )
    .unwrap();
    let said = start(&changed).json();
    let message = said["systemMessage"].as_str().unwrap_or_default();
    assert!(message.contains("hooks/loopgate-hook"), "{said}");
    let later = changed.bash("ls", Ok("a"));
    assert!(
        !later.stdout.contains("loopgate-hook"),
        "told once: {}",
        later.stdout
    );
}

/// Issue 37, the hook's own environment: a project `env` entry reaches every later hook process
/// (observed). One that reaches the dynamic loader or what loopgate takes itself for is a wiring
/// change, undone and told; the person's ordinary variables, `PATH` among them, are left alone.
#[test]
fn an_env_entry_that_reaches_the_loader_or_loopgates_detection_is_undone_and_told() {
    let (env, _user, local) = wired_user_and_local();

    let ordinary = json!({"env": {"PATH": "/opt/node/bin:/usr/bin:/bin", "NODE_OPTIONS": "--max-old-space-size=4096"}});
    std::fs::write(&local, ordinary.to_string()).unwrap();
    assert!(change(&env, &local, "local_settings").is_silent_allow());
    assert_eq!(
        read(&local),
        ordinary,
        "ordinary variables are left as they are"
    );

    for (key, value) in [
        ("CLAUDE_PLUGIN_ROOT", "/tmp/not-a-plugin"),
        ("LD_PRELOAD", "/tmp/quiet.so"),
        ("DYLD_INSERT_LIBRARIES", "/tmp/quiet.dylib"),
        ("CLAUDE_CONFIG_DIR", "/tmp/hookless"),
    ] {
        let mut v = ordinary.clone();
        v["env"][key] = json!(value);
        std::fs::write(&local, v.to_string()).unwrap();
        let out = change(&env, &local, "local_settings");
        assert_eq!(out.code, 0, "{}", out.stderr);
        let answer = out.json();
        assert_eq!(answer["decision"], "block", "{key}: {answer}");
        assert!(answer["reason"].as_str().unwrap().contains(key), "{answer}");
        let now = read(&local);
        assert!(now["env"].get(key).is_none(), "{key} left in place: {now}");
        assert_eq!(now["env"]["PATH"], ordinary["env"]["PATH"], "{now}");
    }
}

/// ConfigChange for `local`, which must be refused well within the CLI's 10 s hook timeout.
fn refused_in_time(env: &Env, local: &Path, what: &str) -> crate::common::Out {
    let started = std::time::Instant::now();
    let out = change(env, local, "local_settings");
    let took = started.elapsed();
    assert!(took.as_secs() < 5, "{what}: {took:?}");
    assert_eq!(out.code, 0, "{what}: {}", out.stderr);
    assert_eq!(out.json()["decision"], "block", "{what}: {}", out.stdout);
    out
}

/// Issue 37 point 2: a settings file Claude Code reads and loopgate could not (JSON that
/// JavaScript's `JSON.parse` takes, a FIFO, a device, a directory, a huge file) was skipped as
/// if absent. Each now counts as switching loopgate off: refused, moved aside whole and replaced,
/// told — within a second, never waiting on the FIFO. Their harmless twins (the same JSON shapes
/// with nothing disabling) pass untouched.
#[test]
fn a_settings_file_read_as_the_cli_reads_it_or_undone() {
    let (env, user, local) = wired_user_and_local();
    let deep = |inner: &str| format!("{}{inner}{}", "[".repeat(130), "]".repeat(130));
    let routes: Vec<(&str, String)> = vec![
        (
            "a lone surrogate",
            r#"{"x": "\ud800", "disableAllHooks": true}"#.into(),
        ),
        ("1e400", r#"{"n": 1e400, "disableAllHooks": true}"#.into()),
        (
            "130 deep",
            format!(r#"{{"x": {}, "disableAllHooks": true}}"#, deep("1")),
        ),
        (
            "Infinity as the switch",
            r#"{"disableAllHooks": 1e400}"#.into(),
        ),
        (
            "an env entry past a surrogate",
            r#"{"a": "\udfff", "env": {"LOOPGATE_MODE": "observe"}}"#.into(),
        ),
        (
            "nested past what loopgate parses",
            format!(r#"{{"x": {}}}"#, "[".repeat(5000) + &"]".repeat(5000)),
        ),
        (
            "a huge file",
            format!(r#"{{"pad": "{}"}}"#, "x".repeat(5 << 20)),
        ),
    ];
    for (what, text) in &routes {
        std::fs::write(&local, text).unwrap();
        refused_in_time(&env, &local, what);
        let now =
            loopgate::util::js_json::parse(&std::fs::read_to_string(&local).unwrap()).unwrap();
        assert!(
            now.get("disableAllHooks").is_none() && now["env"].get("LOOPGATE_MODE").is_none(),
            "{what}: {now}"
        );
        assert!(wired(&read(&user)), "{what}");
        let _ = std::fs::remove_file(&local);
    }
    // Special files in its place: a FIFO nobody writes, a device, a directory.
    for what in ["fifo", "device", "directory"] {
        let _ = std::fs::remove_file(&local);
        let _ = std::fs::remove_dir_all(local.with_extension("json.loopgate-undone"));
        let _ = std::fs::remove_file(local.with_extension("json.loopgate-undone"));
        match what {
            "fifo" => assert!(std::process::Command::new("mkfifo")
                .arg(&local)
                .status()
                .unwrap()
                .success()),
            "device" => std::os::unix::fs::symlink("/dev/zero", &local).unwrap(),
            _ => std::fs::create_dir(&local).unwrap(),
        }
        let out = refused_in_time(&env, &local, what);
        let reason = out.json()["reason"].as_str().unwrap().to_string();
        assert!(reason.contains("cannot read it"), "{what}: {reason}");
        if what != "directory" {
            assert!(local.is_file(), "{what}: put right as a plain file");
        }
    }
    let _ = std::fs::remove_dir_all(&local);
    // The harmless twins: the same shapes, nothing that switches loopgate off.
    for text in [
        r#"{"x": "\ud800", "permissions": {"allow": ["Bash(ls)"]}}"#.to_string(),
        r#"{"n": 1e400}"#.to_string(),
        format!(r#"{{"x": {}}}"#, deep("1")),
    ] {
        std::fs::write(&local, &text).unwrap();
        let out = change(&env, &local, "local_settings");
        assert!(out.is_silent_allow(), "{text:.60}: {}", out.stdout);
        assert_eq!(
            std::fs::read_to_string(&local).unwrap(),
            text,
            "left as it is"
        );
    }
}

/// Issue 37 point 1: what loopgate takes itself for comes from the command line its wrapper or
/// setup wrote. `CLAUDE_PLUGIN_ROOT` in the hook's environment (a settings `env` entry reaches
/// every later hook process) made a settings install take itself for the plugin and stop
/// judging the person's wiring: the user's hooks removed went untold. Now they are put back;
/// the plugin's own wrapper (`--plugin ROOT`) still finds no wiring to restore.
#[test]
fn the_environment_does_not_make_loopgate_the_plugin() {
    let (env, user, _local) = wired_user_and_local();
    let env = env.var("CLAUDE_PLUGIN_ROOT", "/tmp/not-a-plugin");
    std::fs::write(&user, r#"{"permissions": {"allow": ["Bash(ls)"]}}"#).unwrap();
    let out = change(&env, &user, "user_settings");
    assert_eq!(out.json()["decision"], "block", "{}", out.stdout);
    assert!(out.stdout.contains("hooks are gone"), "{}", out.stdout);
    assert!(wired(&read(&user)));

    let plugin = Env::new().plugin(Path::new("/tmp/loopgate-plugin"));
    let user = plugin.state.parent().unwrap().join(".claude/settings.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(&user, r#"{"permissions": {"allow": ["Bash(ls)"]}}"#).unwrap();
    assert!(change(&plugin, &user, "user_settings").is_silent_allow());
    // The plugin's hook runs `sh` by name and its wrapper may fall back to the `loopgate` on
    // PATH: there PATH is wiring (a settings install names both by absolute path, and keeps it).
    std::fs::write(&user, r#"{"env": {"PATH": "/tmp/fake-sh:/usr/bin:/bin"}}"#).unwrap();
    let out = change(&plugin, &user, "user_settings");
    assert_eq!(out.json()["decision"], "block", "{}", out.stdout);
    assert!(read(&user)["env"].get("PATH").is_none(), "{}", read(&user));
}
