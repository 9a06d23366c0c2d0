//! Setup then uninstall leaves exactly what was there before setup, per CLI (issue 38): the
//! files loopgate created are gone (not `{}`, not 0 bytes), its backups and the folders it made
//! too, and a file the person had is back byte for byte. A restore then puts back all the
//! uninstall took out, `/loopgate` included; doctor says when `/loopgate` is missing.

use crate::common::Env;
use crate::setup_agents::{bin, home};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const CLIS: [&str; 7] = [
    "claude", "codex", "gemini", "qwen", "copilot", "opencode", "kilo",
];

/// Every path under HOME with its bytes (`None` for a folder), except loopgate's state dir
/// (kept on purpose: the README says state stays until you delete it) and the test's project.
fn tree(env: &Env) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    fn walk(
        dir: &Path,
        root: &Path,
        skip: &[PathBuf],
        out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>,
    ) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if skip.contains(&path) {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                out.insert(rel, None);
                walk(&path, root, skip, out);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    let root = home(env);
    let skip = [env.state.clone(), env.project.clone(), root.join("bin")];
    let mut out = BTreeMap::new();
    walk(&root, &root, &skip, &mut out);
    out
}

fn setup(env: &Env, cli: &str, more: &[&str]) -> String {
    let bin = bin(env);
    let mut args = vec!["setup", "--agent", cli, "--bin", bin.to_str().unwrap()];
    args.extend_from_slice(more);
    let out = env.run(&args, b"");
    assert_eq!(out.code, 0, "{cli} {more:?}: {}{}", out.stdout, out.stderr);
    out.stdout
}

/// A file the person had for `cli`, written the way no serializer would (odd spacing, no final
/// newline), so that only a byte-for-byte return passes.
fn persons_file(env: &Env, cli: &str) {
    let home = home(env);
    let (path, text) = match cli {
        "claude" => (".claude/settings.json", "{ \"model\":  \"opus\" }"),
        "codex" => (
            ".codex/config.toml",
            "# mine\nmodel = \"o3\"   \n\n[projects.\"/x\"]\ntrust_level = \"trusted\"",
        ),
        "gemini" => (".gemini/settings.json", "{\n    \"theme\": \"dark\"\n}"),
        "qwen" => (".qwen/settings.json", "{\"theme\":\"dark\"}"),
        "copilot" => (".copilot/config.json", "{}"),
        _ => ("xdg/opencode/opencode.json", "{\"$schema\": \"x\"}"),
    };
    let path = home.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn setup_then_uninstall_leaves_the_tree_as_it_was_for_each_cli() {
    for with_files in [false, true] {
        for cli in CLIS {
            let env = Env::new();
            bin(&env);
            if with_files {
                persons_file(&env, cli);
            }
            let before = tree(&env);
            setup(&env, cli, &[]);
            assert_ne!(tree(&env), before, "{cli}: setup wrote something");
            // Run again in observe mode: a second setup leaves backups of its own.
            setup(&env, cli, &["--observe"]);
            let out = env.run(&["setup", "--agent", cli, "--uninstall"], b"");
            assert_eq!(out.code, 0, "{cli}: {}", out.stderr);
            let after = tree(&env);
            let changed: Vec<_> = before
                .keys()
                .chain(after.keys())
                .filter(|k| before.get(*k) != after.get(*k))
                .collect();
            assert!(
                changed.is_empty(),
                "{cli} (the person's files: {with_files}): left or changed {changed:?}\n{}",
                out.stdout
            );
        }
    }
}

#[test]
fn restore_after_uninstall_puts_back_the_hooks_and_the_slash_command() {
    let env = Env::new();
    let home = home(&env);
    let settings = home.join(".claude/settings.json");
    let command = home.join(".claude/commands/loopgate.md");
    setup(&env, "claude", &[]);
    let wired = std::fs::read_to_string(&settings).unwrap();
    assert!(command.is_file());
    let out = env.run(&["setup", "--uninstall"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!settings.exists() && !command.exists(), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("`loopgate setup --restore` puts them back"),
        "{}",
        out.stdout
    );

    let out = env.run(&["setup", "--restore"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), wired);
    assert!(command.is_file(), "/loopgate is back: {}", out.stdout);
    let doctor = env.run(&["doctor"], b"");
    assert!(
        doctor.stdout.contains("✓ /loopgate command"),
        "{}",
        doctor.stdout
    );
    // The uninstall made the state dir (no hook had run yet) owner-only, as a hook makes it.
    assert!(!doctor.stdout.contains("✗ state dir"), "{}", doctor.stdout);
    // And the restored install uninstalls cleanly again.
    let out = env.run(&["setup", "--uninstall"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!home.join(".claude").exists(), "{}", out.stdout);
}

#[test]
fn doctor_flags_a_missing_slash_command_and_setup_says_it_put_it_back() {
    let env = Env::new();
    let home = home(&env);
    setup(&env, "claude", &[]);
    let command = home.join(".claude/commands/loopgate.md");
    std::fs::remove_file(&command).unwrap();
    let doctor = env.run(&["doctor"], b"");
    assert_ne!(doctor.code, 0, "{}", doctor.stdout);
    assert!(
        doctor.stdout.contains("✗ /loopgate command") && doctor.stdout.contains("is missing"),
        "{}",
        doctor.stdout
    );
    let out = setup(&env, "claude", &[]);
    assert!(command.is_file());
    assert!(!out.contains("already up to date"), "{out}");
    assert!(out.contains("put back"), "{out}");
}

#[test]
fn the_uninstall_note_is_said_only_while_a_session_runs() {
    let mut env = Env::new();
    setup(&env, "claude", &[]);
    let out = env.run(&["setup", "--uninstall"], b"");
    assert!(!out.stdout.contains("note:"), "no session: {}", out.stdout);

    setup(&env, "claude", &[]);
    env.new_prompt("a task"); // a session's hook ran just now
    let out = env.run(&["setup", "--uninstall"], b"");
    let last = out.stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("note: a Claude Code session running now puts loopgate back"),
        "said last: {}",
        out.stdout
    );
    assert_eq!(out.stdout.matches("note:").count(), 1, "{}", out.stdout);
}

#[test]
fn setup_and_doctor_tell_observe_mode_for_every_cli() {
    for cli in CLIS {
        let env = Env::new();
        let out = setup(&env, cli, &["--observe"]);
        assert!(
            out.contains("observe mode: loopgate logs what it would deny"),
            "{cli}: {out}"
        );
        let doctor = env.run(&["doctor", "--json"], b"");
        let v: serde_json::Value = serde_json::from_str(&doctor.stdout).unwrap();
        let mode = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "mode")
            .unwrap()
            .clone();
        assert_eq!(mode["status"], "info", "{cli}: {mode}");
        assert!(
            mode["detail"].as_str().unwrap().starts_with("observe for"),
            "{cli}: {mode}"
        );
    }
}
