//! `loopgate setup --agent <cli>` and `loopgate doctor` on the real binary, for each agent CLI
//! other than Claude Code: setup into a temporary HOME next to someone else's hooks and keys,
//! doctor says that CLI is wired, doctor names what broke, and `--uninstall` leaves the
//! foreign content as it was.

use crate::common::{Env, BIN};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub(crate) fn home(env: &Env) -> PathBuf {
    env.state.parent().unwrap().to_path_buf()
}

/// The CLI name, its default hook file under HOME, the check's name in doctor, and someone
/// else's content for that file.
fn cases() -> Vec<(&'static str, &'static str, &'static str, Value)> {
    let foreign = |event: &str| {
        json!({
            "theme": "dark",
            "hooks": {event: [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh", "timeout": 5}]}]},
        })
    };
    vec![
        (
            "codex",
            ".codex/hooks.json",
            "Codex CLI hooks",
            foreign("PreToolUse"),
        ),
        (
            "gemini",
            ".gemini/settings.json",
            "Gemini CLI hooks",
            foreign("BeforeTool"),
        ),
        (
            "qwen",
            ".qwen/settings.json",
            "Qwen Code hooks",
            foreign("PreToolUse"),
        ),
        (
            "copilot",
            ".copilot/hooks/loopgate.json",
            "Copilot CLI hooks",
            json!({"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "audit.sh", "timeoutSec": 5}]}}),
        ),
    ]
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The binary copied into HOME/bin (the hooks call it by that path).
pub(crate) fn bin(env: &Env) -> PathBuf {
    let dir = home(env).join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("loopgate");
    if !bin.exists() {
        std::fs::copy(BIN, &bin).unwrap();
    }
    bin
}

fn run(env: &Env, args: &[&str]) -> (i32, String, String) {
    let path = format!("{}:/usr/bin:/bin", home(env).join("bin").display());
    let o = env.command(args).env("PATH", path).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn doctor_check(env: &Env, name: &str) -> Value {
    doctor_check_with(env, name, &[])
}

/// [`doctor_check`] with more arguments to `doctor`.
fn doctor_check_with(env: &Env, name: &str, more: &[&str]) -> Value {
    let args: Vec<&str> = ["doctor", "--json"].iter().chain(more).copied().collect();
    let (_, stdout, stderr) = run(env, &args);
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} check in {v:#}"))
}

#[test]
fn setup_then_doctor_then_uninstall_for_each_cli() {
    for (agent, file, check, foreign) in cases() {
        let env = Env::new();
        let bin = bin(&env);
        let path = home(&env).join(file);
        write(&path, &foreign.to_string());
        let codex_config = home(&env).join(".codex/config.toml");
        let config_text = "model = \"gpt-5.5\" # mine\n";
        if agent == "codex" {
            write(&codex_config, config_text);
        }

        let (code, out, err) = run(
            &env,
            &["setup", "--agent", agent, "--bin", bin.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{agent}: {out}{err}");
        assert!(
            out.starts_with("added loopgate hooks to "),
            "{agent}: {out}"
        );
        let written = read_json(&path);
        let text = written.to_string();
        assert!(
            text.contains(&format!("{} --agent {agent} pre-tool-use", bin.display())),
            "{agent}: {text}"
        );
        assert!(
            text.contains("audit.sh") && !text.contains("--observe"),
            "{agent}: {text}"
        );
        if agent == "codex" {
            assert!(out.contains("trusted 5 hooks in"), "{out}");
        }

        let c = doctor_check(&env, check);
        assert_eq!(c["status"], "ok", "{agent}: {c}");
        // The Claude checks stay: no Claude Code here, and that is not a failure.
        assert_eq!(doctor_check(&env, "hooks wired once")["status"], "info");

        // Observe mode, run again: the entries are replaced in place.
        let (code, out, _) = run(
            &env,
            &[
                "setup",
                "--agent",
                agent,
                "--bin",
                bin.to_str().unwrap(),
                "--observe",
                "--json",
            ],
        );
        assert_eq!(code, 0);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["agent"], agent);
        assert_eq!(v["settings"], path.display().to_string());
        assert!(read_json(&path).to_string().contains("--observe --agent"));
        // Observe mode is never a plain ✓ (issue 38): doctor says nothing is denied.
        let observing = doctor_check(&env, check);
        assert_eq!(observing["status"], "info", "{agent}: {observing}");
        assert!(
            observing.to_string().contains("observe"),
            "{agent}: {observing}"
        );

        let (code, out, err) = run(&env, &["setup", "--agent", agent, "--uninstall"]);
        assert_eq!(code, 0, "{out}{err}");
        assert_eq!(
            read_json(&path),
            foreign,
            "{agent}: the foreign content is back as it was"
        );
        if agent == "codex" {
            assert!(out.contains("removed the trust of 5 hooks"), "{out}");
            assert_eq!(std::fs::read_to_string(&codex_config).unwrap(), config_text);
        }
        // Uninstalled is the person's choice: told, never failed (no fix that undoes it).
        let c = doctor_check(&env, check);
        assert_eq!(c["status"], "info", "{agent}: {c}");
        assert!(
            c["detail"].as_str().unwrap().contains("not checked"),
            "{agent}: no {agent} on PATH, and nothing claims it is installed: {c}"
        );
        // With the CLI on PATH, doctor says how to wire it, still without failing.
        let fake = home(&env).join("bin").join(agent);
        write(&fake, "#!/bin/sh\nexit 0\n");
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let c = doctor_check(&env, check);
        assert_eq!(c["status"], "info", "{agent}: {c}");
        assert!(
            c["detail"]
                .as_str()
                .unwrap()
                .contains(&format!("loopgate setup --agent {agent}")),
            "{c}"
        );
        std::fs::remove_file(&fake).unwrap();
    }
}

#[test]
fn doctor_names_what_broke_in_an_agent_clis_wiring() {
    let env = Env::new();
    let bin = bin(&env);
    let bin_arg = bin.to_str().unwrap();
    for agent in ["codex", "gemini"] {
        let (code, out, err) = run(&env, &["setup", "--agent", agent, "--bin", bin_arg]);
        assert_eq!(code, 0, "{out}{err}");
    }
    assert_eq!(doctor_check(&env, "Codex CLI hooks")["status"], "ok");

    // Codex's trust lost: Codex would skip the hooks silently.
    let config = home(&env).join(".codex/config.toml");
    let trusted = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, "").unwrap();
    let c = doctor_check(&env, "Codex CLI hooks");
    assert_eq!(c["status"], "fail");
    assert!(c["detail"].as_str().unwrap().contains("not trusted"), "{c}");
    let (code, ..) = run(&env, &["setup", "--agent", "codex", "--bin", bin_arg]);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), trusted);
    assert_eq!(doctor_check(&env, "Codex CLI hooks")["status"], "ok");

    // A hook without its --agent, and an event not wired.
    let path = home(&env).join(".gemini/settings.json");
    let mut s = read_json(&path);
    s["hooks"]["AfterTool"][0]["hooks"][0]["command"] = json!(format!("{bin_arg} post-tool-use"));
    s["hooks"].as_object_mut().unwrap().remove("AfterAgent");
    std::fs::write(&path, s.to_string()).unwrap();
    let c = doctor_check(&env, "Gemini CLI hooks");
    assert_eq!(c["status"], "fail");
    let detail = c["detail"].as_str().unwrap();
    assert!(detail.contains("not wired: AfterAgent"), "{detail}");
    assert!(detail.contains("without `--agent gemini`"), "{detail}");

    // Hooks switched off, and loopgate's env overridden, in the same file.
    s["hooksConfig"] = json!({"enabled": false});
    s["env"] = json!({"XDG_STATE_HOME": "/tmp/elsewhere"});
    std::fs::write(&path, s.to_string()).unwrap();
    let detail = doctor_check(&env, "Gemini CLI hooks")["detail"].to_string();
    assert!(detail.contains("hooksConfig.enabled to false"), "{detail}");
    assert!(
        detail.contains("sets XDG_STATE_HOME for every hook"),
        "{detail}"
    );

    // The binary the hooks call is gone.
    std::fs::remove_file(&bin).unwrap();
    let c = doctor_check(&env, "Codex CLI hooks");
    assert_eq!(c["status"], "fail");
    assert!(
        c["detail"].as_str().unwrap().contains("does not exist"),
        "{c}"
    );
    let (code, stdout, _) = run(&env, &["doctor"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("✗ Codex CLI hooks: "), "{stdout}");
}

#[test]
fn doctor_skips_clis_that_are_not_there() {
    let env = Env::new();
    bin(&env);
    let (_, stdout, _) = run(&env, &["doctor", "--json"]);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with("CLI hooks") || *n == "Qwen Code hooks"),
        "{names:?}"
    );
    // No Claude Code and no other CLI: the Claude check fails as it always did.
    assert_eq!(doctor_check(&env, "hooks wired once")["status"], "fail");
    // A config dir with no loopgate in it is told, not failed: a folder is no installed CLI.
    std::fs::create_dir_all(home(&env).join(".qwen")).unwrap();
    let c = doctor_check(&env, "Qwen Code hooks");
    assert_eq!(c["status"], "info");
    assert!(
        c["detail"].as_str().unwrap().contains("no `qwen` on PATH"),
        "{c}"
    );
    assert!(!c["detail"].as_str().unwrap().contains("installed"), "{c}");
}

#[test]
fn setup_rejects_what_does_not_apply() {
    let env = Env::new();
    let (code, _, err) = run(&env, &["setup", "--agent", "codex", "--managed"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--managed"), "{err}");
    let (code, _, err) = run(&env, &["setup", "--agent", "vim"]);
    assert_ne!(code, 0);
    assert!(err.contains("vim"), "{err}");
}

/// The pinned Codex CLI the e2e suite installs (`tests/e2e`), or `LOOPGATE_TEST_CODEX`.
fn codex_bin() -> Option<PathBuf> {
    let path = match std::env::var_os("LOOPGATE_TEST_CODEX") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/e2e-cache/agents/codex/node_modules/.bin/codex"),
    };
    path.is_file().then_some(path)
}

/// Codex itself says loopgate's hooks are trusted after `setup --agent codex`: its app-server's
/// `hooks/list` reports each one `trusted`, with the hash setup wrote. Needs the Codex CLI the
/// e2e suite installs; without it the test says so and passes (that suite fails under CI when the
/// CLI is missing).
#[test]
fn codex_itself_trusts_the_hooks_setup_wrote() {
    let Some(codex) = codex_bin() else {
        eprintln!("SKIP codex_itself_trusts_the_hooks_setup_wrote: no Codex CLI in target/e2e-cache/agents/codex (run the e2e suite once, or set LOOPGATE_TEST_CODEX)");
        return;
    };
    let env = Env::new();
    let bin = bin(&env);
    let (code, out, err) = run(
        &env,
        &["setup", "--agent", "codex", "--bin", bin.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}{err}");
    let home = home(&env);
    let mut child = std::process::Command::new(&codex)
        .arg("app-server")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("CODEX_HOME", home.join(".codex"))
        .current_dir(&env.project)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"name": "loopgate-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [env.project]}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    for r in requests {
        use std::io::Write;
        writeln!(stdin, "{r}").unwrap();
    }
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v["id"] == 2 {
                    let _ = tx.send(v);
                    return;
                }
            }
        }
    });
    let answer = rx.recv_timeout(std::time::Duration::from_secs(60));
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let answer = answer.expect("codex app-server answered hooks/list");
    let hooks: Vec<&Value> = answer["result"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|entry| entry["hooks"].as_array().unwrap())
        .collect();
    let config: toml::Table = std::fs::read_to_string(home.join(".codex/config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(hooks.len(), 5, "{answer:#}");
    for hook in hooks {
        assert!(
            hook["command"].as_str().unwrap().contains("--agent codex"),
            "{hook}"
        );
        assert_eq!(hook["trustStatus"], "trusted", "{hook}");
        let key = hook["key"].as_str().unwrap();
        assert_eq!(
            config["hooks"]["state"][key]["trusted_hash"].as_str(),
            hook["currentHash"].as_str(),
            "{key}"
        );
    }
}

/// `doctor --managed-dir DIR`'s "managed install" check.
#[cfg(unix)]
fn managed_check(env: &Env, managed: &Path) -> Value {
    doctor_check_with(
        env,
        "managed install",
        &["--managed-dir", managed.to_str().unwrap()],
    )
}

#[cfg(unix)]
fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    })
}

#[cfg(unix)]
#[test]
fn managed_setup_puts_the_binary_where_only_root_writes_and_doctor_flags_a_writable_one() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let env = Env::new();
    let home = home(&env);
    let managed = home.join("managed");
    let sys = home.join("sys");
    let install = sys.join("lib/loopgate");
    let (m, i) = (managed.to_str().unwrap(), install.to_str().unwrap());
    let args = ["setup", "--managed", "--managed-dir", m, "--install-dir", i];
    if !is_root() {
        // Not root (a developer's machine): the refusal is all there is to see.
        let (code, _, err) = run(&env, &args);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("run `sudo "), "{err}");
        return;
    }
    let (code, out, err) = run(&env, &args);
    assert_eq!(code, 0, "{out}{err}");
    let copy = install.join("loopgate");
    let meta = std::fs::metadata(&copy).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o755));
    assert_eq!(
        std::fs::metadata(&install).unwrap().mode() & 0o7777,
        0o755,
        "whatever the umask"
    );
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(BIN).unwrap());
    let drop_in = managed.join("managed-settings.d/loopgate.json");
    let wired: Value = serde_json::from_str(&std::fs::read_to_string(&drop_in).unwrap()).unwrap();
    assert_eq!(
        wired["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        format!("{i}/loopgate --ignore-env --config {i}/config.toml pre-tool-use"),
        "the managed hooks run the root-owned copy"
    );
    let start = wired["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(
        start.contains("sha256sum"),
        "the binary is checked at each session start: {start}"
    );
    assert!(
        start.contains("run sudo loopgate setup --managed again"),
        "a managed install's advice is root's command: {start}"
    );
    let check = managed_check(&env, &managed);
    assert_eq!(check["status"], "ok", "{check}");

    // The copy handed to another user: doctor says so and how to fix it.
    std::os::unix::fs::chown(&copy, Some(65534), None).unwrap();
    let check = managed_check(&env, &managed);
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        check["detail"].as_str().unwrap().contains("uid 65534"),
        "{check}"
    );
    assert!(
        check["fix"]
            .as_str()
            .unwrap()
            .contains("sudo loopgate setup --managed"),
        "{check}"
    );
    std::os::unix::fs::chown(&copy, Some(0), None).unwrap();

    // A directory above it anyone may write: doctor flags it, and setup refuses to install there.
    std::fs::set_permissions(&sys, std::fs::Permissions::from_mode(0o777)).unwrap();
    let check = managed_check(&env, &managed);
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("writable by every user"),
        "{check}"
    );
    std::fs::remove_file(&drop_in).unwrap();
    let (code, _, err) = run(&env, &args);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("writable by every user") && err.contains("Nothing installed"),
        "{err}"
    );
    assert!(
        !drop_in.exists(),
        "no managed hooks wired to a replaceable binary"
    );
    std::fs::set_permissions(&sys, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Managed hooks that find loopgate on PATH are no better.
    std::fs::write(&drop_in, serde_json::to_string(&json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "loopgate stop"}]}]}})).unwrap()).unwrap();
    let check = managed_check(&env, &managed);
    assert_eq!(check["status"], "fail", "{check}");
    assert!(
        check["detail"].as_str().unwrap().contains("from PATH"),
        "{check}"
    );

    // Uninstalling removes the drop-in and the copy the drop-in ran.
    let (code, out, err) = run(&env, &args);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(
        &env,
        &[
            "setup",
            "--managed",
            "--uninstall",
            "--managed-dir",
            m,
            "--install-dir",
            i,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(!drop_in.exists() && !copy.exists(), "{out}");
}

#[cfg(unix)]
#[test]
fn managed_setup_without_root_refuses_and_names_the_command_that_has_it() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let home = home(&env);
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        return; // the install test above sees the refusal when not root
    }
    // A place an unprivileged user can reach: the binary and a HOME of its own.
    let user = home.join("user");
    std::fs::create_dir_all(&user).unwrap();
    for d in [&home, &user] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let lg = user.join("lg");
    std::fs::copy(BIN, &lg).unwrap();
    let managed = user.join("managed");
    let o = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&lg)
        .args([
            "setup",
            "--managed",
            "--managed-dir",
            managed.to_str().unwrap(),
        ])
        .env_clear()
        .env("HOME", &user)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!(
            "run `sudo {} setup --managed --managed-dir {}`",
            lg.display(),
            managed.display()
        )),
        "{err}"
    );
    assert!(!managed.exists(), "nothing written");
}

/// OpenCode and Kilo CLI: setup writes loopgate's plugin (no hook file) with the binary's path,
/// doctor checks it runs, a plugin that is someone else's is left alone, and `--uninstall`
/// deletes it.
#[test]
fn setup_writes_the_plugin_doctor_checks_it_uninstall_deletes_it() {
    for (agent, check) in [("opencode", "OpenCode plugin"), ("kilo", "Kilo CLI plugin")] {
        let env = Env::new();
        let bin = bin(&env);
        let bin_arg = bin.to_str().unwrap();
        // OpenCode's core keeps its config under XDG_CONFIG_HOME (the test env sets it).
        let path = home(&env)
            .join("xdg")
            .join(agent)
            .join("plugins/loopgate.js");
        let (code, out, err) = run(&env, &["setup", "--agent", agent, "--bin", bin_arg]);
        assert_eq!(code, 0, "{agent}: {out}{err}");
        assert!(out.contains(&path.display().to_string()), "{agent}: {out}");
        let text = std::fs::read_to_string(&path).unwrap();
        let command = serde_json::to_string(&[bin_arg, "--agent", agent]).unwrap();
        assert!(
            text.contains(&format!("const COMMAND = {command}")),
            "{agent}: {text}"
        );
        assert_eq!(doctor_check(&env, check)["status"], "ok", "{agent}");
        let (_, shown, _) = run(&env, &["setup", "--agent", agent, "--show-bin"]);
        assert_eq!(shown.trim(), bin_arg);

        run(
            &env,
            &["setup", "--agent", agent, "--bin", bin_arg, "--observe"],
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"--observe\",\"--agent\""), "{text}");

        // A binary that is gone: doctor names it and the fix.
        std::fs::rename(&bin, bin.with_extension("moved")).unwrap();
        let c = doctor_check(&env, check);
        assert_eq!(c["status"], "fail", "{agent}: {c}");
        assert!(
            c["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("does not exist"),
            "{c}"
        );
        std::fs::rename(bin.with_extension("moved"), &bin).unwrap();

        let (code, out, err) = run(&env, &["setup", "--agent", agent, "--uninstall"]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(!path.exists(), "{agent}: the plugin is deleted");
        // With the folders setup made gone too, nothing says this CLI is here: no check at all.
        let (_, doctor, _) = run(&env, &["doctor", "--json"]);
        assert!(!doctor.contains(check), "{agent}: {doctor}");

        // Someone else's plugin under loopgate's name is neither replaced nor deleted.
        let mine = "export const Mine = async () => ({})\n";
        write(&path, mine);
        let (code, _, err) = run(&env, &["setup", "--agent", agent, "--bin", bin_arg]);
        assert_ne!(code, 0);
        assert!(err.contains("not loopgate's plugin"), "{err}");
        run(&env, &["setup", "--agent", agent, "--uninstall"]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), mine);
    }
}
