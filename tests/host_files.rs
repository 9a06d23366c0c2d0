//! Issue 37 point 6: every host's loopgate files protected alike. The guard judges a write by
//! where it lands, so a tree copied over `~/.codex/` (or the project's `.codex/`), a rename, a
//! link or an inline program reaching Codex's hooks or OpenCode's and Kilo CLI's plugin is
//! refused, while a backup that only reads them and a copy of the same tree elsewhere are not.
//! What the guard did not see (an edit from a script, a helper's installed copy edited) is told
//! at the next session's first call, of any CLI, from the host-files record. And point 4: a
//! state put back from an earlier copy, however soon and with its lock file, costs the counts
//! nothing.

#![cfg(unix)]

use crate::common::{Env, Out};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn home(env: &Env) -> PathBuf {
    env.state.parent().unwrap().to_path_buf()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The call in a session of its own: refused by the guard, with its reason.
fn refused(env: &mut Env, n: usize, command: &str) -> (bool, String) {
    env.session = format!("hosts-{n}");
    let out = env.pre("Bash", json!({ "command": command }), &format!("h{n}"));
    assert_eq!(out.code, 0, "{command}: {}", out.stderr);
    let reason = if out.stdout.is_empty() {
        String::new()
    } else {
        out.json()["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    (out.denied(), reason)
}

/// `~/.codex/hooks.json`, the project's `.codex/hooks.json`, OpenCode's and Kilo's plugin, and
/// a tree in the project that holds a `hooks.json` and a `loopgate.js`.
fn hosts(env: &Env) {
    let home = home(env);
    write(&home.join(".codex/hooks.json"), "{\"hooks\": {}}\n");
    write(&env.project.join(".codex/hooks.json"), "{\"hooks\": {}}\n");
    for cli in ["opencode", "kilo"] {
        write(
            &home.join(format!("xdg/{cli}/plugins/loopgate.js")),
            "// loopgate's plugin\n",
        );
    }
    write(&env.project.join("evil/hooks.json"), "{}\n");
    write(&env.project.join("evil/config.toml"), "\n");
    write(&env.project.join("plug/plugins/loopgate.js"), "export {}\n");
    write(&env.project.join("src/main.rs"), "fn main() {}\n");
    write(&env.project.join("dot/.codex/hooks.json"), "{}\n");
}

#[test]
fn a_write_reaching_a_hosts_loopgate_files_is_refused_by_where_it_lands() {
    let mut env = Env::new();
    hosts(&env);
    let routes = [
        // The route, and the other ways a tree lands over a folder.
        "cp -r evil/. ~/.codex/",
        "cp -a evil/. \"$HOME/.codex\"",
        "cp -rT evil ~/.codex",
        "cp -r --no-target-directory evil ~/.codex",
        "rsync -a evil/ ~/.codex/",
        "rsync -a evil/ .codex",
        "ditto evil ~/.codex",
        "cp -r evil/. .codex/",
        "cd evil && cp -r . ~/.codex/",
        "mkdir -p t && echo '{}' > t/hooks.json && cp -r t/. ~/.codex/",
        "cp -r plug/. $XDG_CONFIG_HOME/opencode/",
        "cp -r plug/. $XDG_CONFIG_HOME/kilo/",
        "cp -r dot/. ~/",
        "rsync -a dot/ $HOME",
        "tar xf evil.tar -C ~/.codex",
        "unzip -o evil.zip -d ~/.codex",
        "cat evil/hooks.json > .codex/hooks.json",
        // One file, by any writer.
        "mv evil/hooks.json ~/.codex/",
        "ln -sf /dev/null ~/.codex/hooks.json",
        "install -m 644 evil/hooks.json ~/.codex/hooks.json",
        ": > $XDG_CONFIG_HOME/opencode/plugins/loopgate.js",
        "mv $XDG_CONFIG_HOME/kilo/plugins/loopgate.js /tmp/",
        "cp plug/plugins/loopgate.js ~/.config/opencode/plugins/loopgate.js",
        // Inline programs.
        "python3 -c \"import shutil,os; shutil.copytree('evil', os.path.expanduser('~/.codex'), dirs_exist_ok=True)\"",
        "node -e \"require('fs').cpSync('evil', require('os').homedir() + '/.codex', {recursive: true})\"",
        "python3 -c \"import os; os.rename('x.js', os.environ['XDG_CONFIG_HOME'] + '/opencode/plugins/loopgate.js')\"",
    ];
    let missed: Vec<String> = routes
        .iter()
        .enumerate()
        .filter_map(|(n, c)| {
            let (denied, reason) = refused(&mut env, n, c);
            (!(denied && reason.contains("reserved to the user"))).then(|| format!("{c}: {reason}"))
        })
        .collect();
    assert!(
        missed.is_empty(),
        "{} of {} routes allowed:\n{}",
        missed.len(),
        routes.len(),
        missed.join("\n")
    );

    // Their harmless twins: backups that only read, the same trees copied elsewhere, ordinary
    // copies in the project.
    let harmless = [
        "cp -r ~/.codex /tmp/codex-backup-lg",
        "cp -a ~/.codex/. /tmp/codex-backup-lg2/",
        "rsync -a ~/.codex/ /tmp/codex-backup-lg3/",
        "tar czf /tmp/codex-lg.tgz -C ~ .codex",
        "cat ~/.codex/hooks.json",
        "ls -la ~/.config/opencode/plugins/",
        "cp -r evil/. build/",
        "cp -r src/. dist/",
        "rsync -a src/ out/",
        "cp -r plug /tmp/plug-copy-lg",
        "python3 -c \"print(open('src/main.rs').read())\"",
        "diff -r evil ~/.codex",
        "cp -r dot /tmp/dot-copy-lg",
        "tar cf /tmp/evil-lg.tar evil",
    ];
    let denied: Vec<String> = harmless
        .iter()
        .enumerate()
        .filter_map(|(n, c)| {
            let (denied, reason) = refused(&mut env, 100 + n, c);
            (denied || !reason.is_empty()).then(|| format!("{c}: {reason}"))
        })
        .collect();
    assert!(
        denied.is_empty(),
        "{} of {} harmless calls denied:\n{}",
        denied.len(),
        harmless.len(),
        denied.join("\n")
    );
}

/// The `systemMessage` of an answer ("" when there is none).
fn notice(out: &Out) -> String {
    serde_json::from_str::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["systemMessage"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A new session's first call and a second one: what each told.
fn new_session(env: &mut Env, name: &str) -> (String, String) {
    env.session = name.into();
    let first = env.bash("ls", Ok("a"));
    let second = env.bash("ls -l", Ok("a"));
    assert_eq!(first.code, 0, "{}", first.stderr);
    (notice(&first), notice(&second))
}

#[test]
fn a_plugin_setup_wrote_then_edited_emptied_or_moved_is_told_at_any_sessions_first_call() {
    let mut env = Env::new();
    let xdg = home(&env).join("xdg");
    for cli in ["opencode", "kilo"] {
        let out = env.command(&["setup", "--agent", cli]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let opencode = xdg.join("opencode/plugins/loopgate.js");
    let kilo = xdg.join("kilo/plugins/loopgate.js");
    let shipped = std::fs::read_to_string(&opencode).unwrap();
    let (first, _) = new_session(&mut env, "as-set-up");
    assert!(!first.contains("other hosts"), "as setup left it: {first}");

    type Change = fn(&Path, &str);
    let changes: [(&str, Change, &str); 4] = [
        (
            "edited",
            |p, t| std::fs::write(p, t.replace("PreToolUse", "Nothing")).unwrap(),
            "was changed",
        ),
        (
            "emptied",
            |p, _| std::fs::write(p, "").unwrap(),
            "was changed",
        ),
        (
            "moved away",
            |p, _| std::fs::rename(p, p.with_extension("js.off")).unwrap(),
            "removed or moved away",
        ),
        (
            "replaced by a link",
            |p, _| {
                std::fs::remove_file(p).unwrap();
                std::os::unix::fs::symlink("/dev/null", p).unwrap();
            },
            "link",
        ),
    ];
    for (n, (how, change, says)) in changes.iter().enumerate() {
        change(&opencode, &shipped);
        let (first, second) = new_session(&mut env, &format!("after-{n}"));
        assert!(
            first.contains("OpenCode's loopgate plugin") && first.contains(says),
            "{how}: told at the first call: {first}"
        );
        assert!(
            !first.contains(&kilo.display().to_string()),
            "{how}: Kilo's is whole: {first}"
        );
        assert!(
            !second.contains("other hosts"),
            "{how}: once, at the first call: {second}"
        );
        let _ = std::fs::remove_file(opencode.with_extension("js.off"));
        let _ = std::fs::remove_file(&opencode);
        let out = env
            .command(&["setup", "--agent", "opencode"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let (first, _) = new_session(&mut env, &format!("put-right-{n}"));
        assert!(
            !first.contains("other hosts"),
            "{how}: setup again puts it right: {first}"
        );
    }
    // An uninstall removes it on purpose: nothing to tell.
    let out = env
        .command(&["setup", "--agent", "kilo", "--uninstall"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!kilo.exists());
    let (first, _) = new_session(&mut env, "uninstalled");
    assert!(
        !first.contains("other hosts"),
        "an uninstall is no tamper: {first}"
    );
}

#[test]
fn an_sdk_helpers_installed_copy_edited_is_told_at_the_first_call_that_still_runs() {
    let mut env = Env::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = home(&env).join("venv/lib/python3.12/site-packages/loopgate_agent_sdk/__init__.py");
    let modules = env.project.join("node_modules/loopgate/agent-sdk.js");
    write(
        &venv,
        &std::fs::read_to_string(root.join("python/loopgate_agent_sdk/__init__.py")).unwrap(),
    );
    write(
        &modules,
        &std::fs::read_to_string(root.join("npm/loopgate/agent-sdk.js")).unwrap(),
    );

    // Each copy names itself at its session's first call: as shipped, it is recorded, silently.
    for (n, copy) in [&venv, &modules].iter().enumerate() {
        env.hook_options = vec!["--sdk".into(), copy.display().to_string()];
        let (first, _) = new_session(&mut env, &format!("sdk-{n}"));
        assert!(!first.contains("other hosts"), "as shipped: {first}");
    }
    // The Python copy edited so that it no longer calls loopgate: the next session that still
    // runs (the npm helper's here) is told at its first call.
    let text = std::fs::read_to_string(&venv).unwrap();
    std::fs::write(&venv, text.replace("def loopgate_hooks(", "def _unused(")).unwrap();
    let (first, second) = new_session(&mut env, "sdk-after-edit");
    assert!(
        first.contains("Python Agent SDK helper") && first.contains("was changed"),
        "told: {first}"
    );
    assert!(!second.contains("other hosts"), "once: {second}");
    // A copy that names itself edited is told as such, and is never recorded as whole.
    env.hook_options = vec!["--sdk".into(), venv.display().to_string()];
    let (first, _) = new_session(&mut env, "sdk-edited-self");
    assert!(first.contains("differs from the copy loopgate"), "{first}");
    env.hook_options.clear();
    let (first, _) = new_session(&mut env, "sdk-edited-later");
    assert!(
        first.contains("Python Agent SDK helper"),
        "still told: {first}"
    );
}

/// Issue 37 point 4: a `make check` recipe whose own run copies the state dir aside before it
/// fails and puts the copy back 0.4 s after (lock file and all): told, and the failures still
/// count, so the fourth identical failing call is refused as without the recipe. Harmless twin:
/// the same session without the recipe, and a read-only backup of the state dir, told nothing.
#[test]
fn a_state_dir_put_back_by_the_failing_command_itself_loses_no_count() {
    for put_back in [true, false] {
        let mut env = Env::new();
        let transcript = env.project.join("transcript.jsonl");
        env.transcript = transcript.display().to_string();
        let aside = env.project.join("state-aside");
        let stamp = || humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        // The person's prompt, as the transcript keeps it (the calls carry its id).
        let mut lines = format!(
            "{}\n",
            json!({"type": "user", "timestamp": stamp(), "sessionId": env.session,
                "promptId": env.prompt, "message": {"role": "user", "content": "make the checks pass"}})
        );
        let error = "Exit code 2\nmake: *** [check] Error 2";
        let mut said = Vec::new();
        let mut denied_at = None;
        for i in 0..6 {
            let id = format!("toolu_mk_{i}");
            let input = json!({"command": "make check", "description": "run"});
            lines.push_str(&format!(
                "{}\n",
                json!({"type": "assistant", "timestamp": stamp(), "sessionId": env.session,
                    "message": {"id": format!("msg_{i}"), "role": "assistant",
                        "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": input}]}})
            ));
            std::fs::write(&transcript, &lines).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            let pre = env.pre("Bash", input.clone(), &id);
            said.push(notice(&pre));
            if pre.denied() {
                denied_at = Some(i);
                break;
            }
            // The recipe: the state dir copied aside (a read-only backup), then the failure.
            copy_dir(&env.state, &aside);
            std::thread::sleep(Duration::from_millis(5));
            lines.push_str(&format!(
                "{}\n",
                json!({"type": "user", "timestamp": stamp(), "sessionId": env.session,
                    "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
                        "content": error, "is_error": true}]}})
            ));
            std::fs::write(&transcript, &lines).unwrap();
            let fail = env.fail("Bash", input.clone(), &id, error);
            assert_eq!(fail.code, 0, "{}", fail.stderr);
            if put_back {
                std::thread::sleep(Duration::from_millis(400));
                copy_dir(&aside, &env.state);
            }
        }
        assert_eq!(denied_at, Some(3), "put back: {put_back}; told: {said:?}");
        let told: Vec<&String> = said.iter().filter(|s| s.contains("earlier copy")).collect();
        if put_back {
            assert_eq!(told.len(), 3, "each put-back told: {said:?}");
            assert!(
                said[1].contains("judged again: they still count"),
                "the lost failure counted again: {said:?}"
            );
        } else {
            assert!(
                told.is_empty(),
                "a backup that only reads is told nothing: {said:?}"
            );
        }
    }
}

/// `cp -a from/. to/`: every file written over in place (the lock file included), as a shell
/// recipe restores a copy.
fn copy_dir(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .args([
            "-a",
            &format!("{}/.", from.display()),
            &to.display().to_string(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
}
