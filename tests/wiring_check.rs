//! A session's first judged call checks the CLI's hook files (Codex, Gemini, Qwen, Copilot have
//! no blockable ConfigChange): after `loopgate setup --agent X` it says nothing; after an agent
//! unwired an event, switched hooks off or set a LOOPGATE_ variable for them (in the user's file
//! or the project's), the first call tells the person once — a `systemMessage`, stderr and a
//! `guard` notice in the event log — and the session's next call does not repeat it.

use crate::common::{Env, BIN};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const CHANGED: &str = "hook files is not whole";

struct Cli {
    name: &'static str,
    /// The user-level hook file under HOME.
    file: &'static str,
    /// The session's start (a SessionStart wired by hand), its first judged call and a later
    /// one: (fixture, subcommand).
    start: &'static str,
    first: (&'static str, &'static str),
    later: (&'static str, &'static str),
    /// An event of loopgate's in that CLI's file.
    event: &'static str,
}

fn clis() -> Vec<Cli> {
    vec![
        Cli {
            name: "codex",
            start: "codex/0.169.0/basic-01-SessionStart.json",
            file: ".codex/hooks.json",
            first: (
                "codex/0.169.0/basic-02-UserPromptSubmit.json",
                "user-prompt-submit",
            ),
            later: (
                "codex/0.169.0/basic-03-PreToolUse-Bash.json",
                "pre-tool-use",
            ),
            event: "Stop",
        },
        Cli {
            name: "gemini",
            start: "gemini/0.61.0/basic-01-SessionStart.json",
            file: ".gemini/settings.json",
            first: (
                "gemini/0.61.0/basic-02-BeforeAgent.json",
                "user-prompt-submit",
            ),
            later: (
                "gemini/0.61.0/basic-04-BeforeTool-run_shell_command.json",
                "pre-tool-use",
            ),
            event: "AfterAgent",
        },
        Cli {
            name: "qwen",
            start: "qwen/0.24.4/basic-01-SessionStart.json",
            file: ".qwen/settings.json",
            first: (
                "qwen/0.24.4/basic-03-UserPromptSubmit.json",
                "user-prompt-submit",
            ),
            later: (
                "qwen/0.24.4/basic-04-PreToolUse-run_shell_command.json",
                "pre-tool-use",
            ),
            event: "Stop",
        },
        Cli {
            name: "copilot",
            start: "copilot/1.0.102/basic-01-sessionStart.json",
            file: ".copilot/hooks/loopgate.json",
            first: (
                "copilot/1.0.102/basic-02-userPromptSubmitted.json",
                "user-prompt-submit",
            ),
            later: (
                "copilot/1.0.102/basic-03-preToolUse-bash.json",
                "pre-tool-use",
            ),
            event: "agentStop",
        },
    ]
}

fn fixture(rel: &str) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents");
    std::fs::read(root.join(rel)).unwrap()
}

fn home(env: &Env) -> PathBuf {
    env.state.parent().unwrap().to_path_buf()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn write_json(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, v.to_string()).unwrap();
}

/// A temp HOME where `loopgate setup --agent <cli>` wired loopgate.
fn set_up(cli: &Cli) -> Env {
    let env = Env::new();
    let o = env
        .command(&["setup", "--agent", cli.name, "--bin", BIN])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {o:?}", cli.name);
    env
}

/// (stdout, stderr) of one hook call with a captured payload.
fn call(env: &Env, cli: &Cli, (rel, sub): (&str, &str)) -> (String, String) {
    let out = env.run(&["--agent", cli.name, sub], &fixture(rel));
    assert_eq!(out.code, 0, "{}: {}", cli.name, out.stderr);
    (out.stdout, out.stderr)
}

fn guard_notices(env: &Env) -> Vec<Value> {
    env.events()
        .into_iter()
        .filter(|e| e["detector"] == "guard" && e["decision"] == "notice")
        .collect()
}

/// The first call reports `expect` (in systemMessage, stderr and the log); the second is quiet.
fn reported_once(env: &Env, cli: &Cli, expect: &str, what: &str) {
    let (stdout, stderr) = call(env, cli, (cli.start, "session-start"));
    assert!(
        stdout.is_empty() && stderr.is_empty(),
        "{} {what}: SessionStart answers nothing: {stdout}{stderr}",
        cli.name
    );
    let (stdout, stderr) = call(env, cli, cli.first);
    let answer: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{} {what}: {e}: {stdout:?} {stderr}", cli.name));
    let shown = answer["systemMessage"].as_str().unwrap_or_default();
    assert!(
        shown.contains(CHANGED) && shown.contains(expect),
        "{} {what}: {shown:?}",
        cli.name
    );
    assert!(stderr.contains(expect), "{} {what}: {stderr}", cli.name);
    let logged = guard_notices(env);
    assert_eq!(logged.len(), 1, "{} {what}: {logged:?}", cli.name);
    assert!(
        logged[0]["reason"].as_str().unwrap().contains(expect),
        "{} {what}: {logged:?}",
        cli.name
    );
    let (stdout, stderr) = call(env, cli, cli.later);
    assert!(
        !stdout.contains(CHANGED) && !stderr.contains(CHANGED),
        "{} {what}: repeated: {stdout}{stderr}",
        cli.name
    );
    assert_eq!(guard_notices(env).len(), 1, "{} {what}", cli.name);
}

#[test]
fn a_whole_wiring_says_nothing_even_beside_a_projects_own_hooks() {
    for cli in clis() {
        let env = set_up(&cli);
        // The project's own hooks, in its own file, are not loopgate's business.
        let own = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]}});
        match cli.name {
            "codex" => write_json(&env.project.join(".codex/hooks.json"), &own),
            "gemini" => write_json(&env.project.join(".gemini/settings.json"), &own),
            "qwen" => write_json(&env.project.join(".qwen/settings.json"), &own),
            _ => write_json(
                &env.project.join(".github/hooks/audit.json"),
                &json!({"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "audit.sh"}]}}),
            ),
        }
        for step in [cli.first, cli.later] {
            let (stdout, stderr) = call(&env, &cli, step);
            assert!(
                !stdout.contains("loopgate") && !stderr.contains("loopgate"),
                "{}: {stdout}{stderr}",
                cli.name
            );
        }
        assert!(guard_notices(&env).is_empty(), "{}", cli.name);
    }
}

#[test]
fn an_event_unwired_in_the_users_file_is_reported_once() {
    for cli in clis() {
        let env = set_up(&cli);
        let path = home(&env).join(cli.file);
        let mut v = read_json(&path);
        v["hooks"].as_object_mut().unwrap().remove(cli.event);
        write_json(&path, &v);
        reported_once(&env, &cli, &format!("not wired: {}", cli.event), "unwired");
    }
}

#[test]
fn hooks_switched_off_or_loopgates_env_set_are_reported_once() {
    for cli in clis() {
        // Switched off in the user's files.
        let env = set_up(&cli);
        let expect = match cli.name {
            "codex" => {
                let config = home(&env).join(".codex/config.toml");
                let text = std::fs::read_to_string(&config).unwrap();
                std::fs::write(
                    &config,
                    format!("[features]\ncodex_hooks = false\n\n{text}"),
                )
                .unwrap();
                "features.codex_hooks = false"
            }
            "copilot" => {
                let path = home(&env).join(cli.file);
                let mut v = read_json(&path);
                v["disableAllHooks"] = json!(true);
                write_json(&path, &v);
                "sets disableAllHooks"
            }
            _ => {
                let path = home(&env).join(cli.file);
                let mut v = read_json(&path);
                v["hooksConfig"] = json!({"enabled": false});
                write_json(&path, &v);
                "hooksConfig.enabled to false"
            }
        };
        reported_once(&env, &cli, expect, "switched off");

        // A LOOPGATE_ variable for the hooks.
        let env = set_up(&cli);
        let path = home(&env).join(cli.file);
        let mut v = read_json(&path);
        if cli.name == "copilot" {
            // Copilot's handlers carry their own env.
            v["hooks"]["preToolUse"][0]["env"] = json!({"LOOPGATE_DISABLE": "1"});
        } else {
            v["env"] = json!({"LOOPGATE_DISABLE": "1"});
        }
        write_json(&path, &v);
        reported_once(&env, &cli, "LOOPGATE_DISABLE", "env");
    }
}

#[test]
fn codex_trust_dropped_is_reported_once() {
    let cli = clis().remove(0);
    let env = set_up(&cli);
    std::fs::write(
        home(&env).join(".codex/config.toml"),
        "model = \"gpt-5.5\"\n",
    )
    .unwrap();
    reported_once(&env, &cli, "not trusted", "untrusted");
}

#[test]
fn a_project_file_that_switches_hooks_off_is_reported_once() {
    for cli in clis() {
        let env = set_up(&cli);
        let p = &env.project;
        let expect = match cli.name {
            "codex" => {
                std::fs::create_dir_all(p.join(".codex")).unwrap();
                std::fs::write(p.join(".codex/config.toml"), "[features]\nhooks = false\n")
                    .unwrap();
                "features.hooks = false"
            }
            "gemini" | "qwen" => {
                let file = p.join(format!(".{}/settings.json", cli.name));
                write_json(&file, &json!({"hooksConfig": {"enabled": false}}));
                "hooksConfig.enabled to false"
            }
            _ => {
                write_json(
                    &p.join(".github/hooks/mine.json"),
                    &json!({"version": 1, "env": {"XDG_STATE_HOME": "/tmp/elsewhere"}, "hooks": {}}),
                );
                "XDG_STATE_HOME"
            }
        };
        reported_once(&env, &cli, expect, "project");
    }
}

#[test]
fn wired_from_a_file_not_read_here_only_switches_and_env_are_judged() {
    for cli in clis() {
        // No setup: the calls come from a file loopgate does not read (a `--settings` path).
        let env = Env::new();
        let (stdout, stderr) = call(&env, &cli, cli.first);
        assert!(
            !stdout.contains(CHANGED) && !stderr.contains(CHANGED),
            "{}: {stdout}{stderr}",
            cli.name
        );
        let env = Env::new();
        let file = match cli.name {
            "copilot" => env.project.join(".github/hooks/mine.json"),
            "codex" => env.project.join(".codex/hooks.json"),
            name => env.project.join(format!(".{name}/settings.json")),
        };
        write_json(&file, &json!({"env": {"LOOPGATE_STATE_DIR": "/tmp/x"}}));
        reported_once(&env, &cli, "LOOPGATE_STATE_DIR", "unknown source");
    }
}

/// Issue 30 part 1 on the other CLIs: loopgate's handler edited in place in the user's file (a
/// matcher that filters, a 1 ms timeout, `--config` added, output thrown away) is told at the
/// session's first call, naming the change; `set_up`'s own wiring says nothing (the first test).
#[test]
fn a_handler_edited_in_place_is_reported_once() {
    type Edit = fn(&mut Value, &str);
    let edits: [(&str, Edit, &str); 4] = [
        (
            "matcher",
            |h, _| h["matcher"] = json!("NoSuchTool"),
            "matcher \"NoSuchTool\"",
        ),
        (
            "timeout",
            |h, cli| {
                let (key, target) = handler(h, cli);
                let key = if key == "bash" {
                    "timeoutSec"
                } else {
                    "timeout"
                };
                target[key] = json!(0);
            },
            "timeout",
        ),
        (
            "--config",
            |h, cli| {
                let (key, target) = handler(h, cli);
                let cmd = target[key]
                    .as_str()
                    .unwrap()
                    .replace(" pre-tool-use", " --config /tmp/lenient.toml pre-tool-use");
                target[key] = json!(cmd);
            },
            "--config",
        ),
        (
            "/dev/null",
            |h, cli| {
                let (key, target) = handler(h, cli);
                let cmd = format!("{} >/dev/null", target[key].as_str().unwrap());
                target[key] = json!(cmd);
            },
            "/dev/null",
        ),
    ];
    for cli in clis() {
        let pre = match cli.name {
            "gemini" => "BeforeTool",
            "copilot" => "preToolUse",
            _ => "PreToolUse",
        };
        for (what, edit, expect) in edits {
            // Copilot's handlers have no matcher group to filter with.
            if cli.name == "copilot" && what == "matcher" {
                continue;
            }
            let env = set_up(&cli);
            let path = home(&env).join(cli.file);
            let mut v = read_json(&path);
            edit(&mut v["hooks"][pre][0], cli.name);
            write_json(&path, &v);
            reported_once(&env, &cli, expect, what);
        }
    }
}

/// Loopgate's handler in `group` and the key of its command (Copilot's flat handler is the group).
fn handler<'a>(group: &'a mut Value, cli: &str) -> (&'static str, &'a mut Value) {
    if cli == "copilot" {
        ("bash", group)
    } else {
        ("command", &mut group["hooks"][0])
    }
}
