//! Issue 30 part 2, through the binary: a change that switches loopgate off is undone and kept
//! under an id; only the person's `/loopgate allow <id>` (a UserPromptExpansion, captured from the
//! real CLI in `tests/fixtures/sanction/`) keeps it, in its own session and in time. What the
//! agent can write (a pending or an allowed record) is told to the person, never silent.

use crate::common::{fixture, Env, Out};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn user_settings(env: &Env) -> PathBuf {
    env.state.parent().unwrap().join(".claude/settings.json")
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn wired(path: &Path) -> bool {
    read(path)["hooks"]["PreToolUse"]
        .to_string()
        .contains("pre-tool-use")
}

/// setup, then an unwiring ConfigChange undoes: the id the person is told.
fn undone(env: &Env) -> String {
    let user = user_settings(env);
    let setup = env.run(&["setup", "--settings", user.to_str().unwrap()], b"");
    assert_eq!(setup.code, 0, "{}", setup.stderr);
    std::fs::write(&user, r#"{"permissions": {"allow": ["Bash(ls)"]}}"#).unwrap();
    let out = config_change(env, &user);
    assert_eq!(out.json()["decision"], "block", "{}", out.stdout);
    assert!(wired(&user), "undone");
    // ConfigChange's own answer is shown nowhere: the next hook call tells the person.
    let next = env.pre("Bash", json!({"command": "ls"}), &env.id());
    let told = next.json()["systemMessage"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let id = told
        .split("/loopgate allow ")
        .nth(1)
        .map(|rest| rest[..6].to_string())
        .unwrap_or_else(|| panic!("no id told: {told}"));
    assert!(told.contains("hooks are gone"), "{told}");
    id
}

fn config_change(env: &Env, file: &Path) -> Out {
    let p = env.base(
        "ConfigChange",
        json!({"source": "user_settings", "file_path": file}),
    );
    env.hook("config-change", &p)
}

/// The person's `/loopgate <args>`, as the real CLI sends it, in `session`.
pub(crate) fn typed(env: &Env, session: &str, args: &str) -> Out {
    let mut p = fixture("sanction/person-typed-UserPromptExpansion.json");
    p["session_id"] = json!(session);
    p["cwd"] = json!(env.project);
    p["command_args"] = json!(args);
    p["prompt"] = json!(format!("/loopgate {args}"));
    env.hook("prompt-expansion", &p)
}

fn reason(out: &Out) -> String {
    assert_eq!(out.json()["decision"], "block", "{}", out.stdout);
    out.json()["reason"].as_str().unwrap().to_string()
}

fn statusline(env: &Env) -> String {
    env.run(&["statusline"], br#"{"session_id": "sess-1"}"#)
        .stdout
}

#[test]
fn setup_installs_the_person_only_command_and_its_handler() {
    let env = Env::new();
    let user = user_settings(&env);
    env.run(&["setup", "--settings", user.to_str().unwrap()], b"");
    let command =
        std::fs::read_to_string(user.parent().unwrap().join("commands/loopgate.md")).unwrap();
    assert!(
        command.contains("disable-model-invocation: true"),
        "{command}"
    );
    assert!(read(&user)["hooks"]["UserPromptExpansion"]
        .to_string()
        .contains("prompt-expansion"));
    let un = env.run(
        &["setup", "--uninstall", "--settings", user.to_str().unwrap()],
        b"",
    );
    // No session runs (none has touched the state): no note about one.
    assert!(!un.stdout.contains("/loopgate allow"), "{}", un.stdout);
    assert!(!user.parent().unwrap().join("commands/loopgate.md").exists());
}

#[test]
fn the_persons_allow_keeps_the_change_and_it_stays_told() {
    let env = Env::new();
    let user = user_settings(&env);
    let id = undone(&env);
    let said = reason(&typed(&env, &env.session, &format!("allow {id}")));
    assert!(
        said.contains(&format!("kept your change {id}")) && said.contains("no loopgate hooks"),
        "{said}"
    );
    assert!(!wired(&user), "the person's change is in place");
    // The reload that follows the write is not undone, and is told again.
    assert!(config_change(&env, &user).is_silent_allow());
    assert!(!wired(&user));
    let next = env.pre("Bash", json!({"command": "ls"}), &env.id());
    let told = next.json()["systemMessage"].to_string();
    assert!(
        told.contains(&format!("allowed by /loopgate allow {id}")),
        "{told}"
    );
    assert!(
        statusline(&env).contains("loopgate OFF"),
        "{}",
        statusline(&env)
    );
    let doctor = env.run(&["doctor"], b"");
    assert!(
        doctor.stdout.contains(&format!("/loopgate allow {id}")),
        "{}",
        doctor.stdout
    );
    // Used once.
    assert!(reason(&typed(&env, &env.session, &format!("allow {id}"))).contains("no undone change"));
    // setup wires loopgate again and forgets the allowance.
    env.run(&["setup", "--settings", user.to_str().unwrap()], b"");
    assert!(wired(&user));
    assert!(!statusline(&env).contains("OFF"));
}

#[test]
fn an_allow_that_is_not_the_persons_own_keeps_nothing() {
    let env = Env::new();
    let user = user_settings(&env);
    let id = undone(&env);
    // Another session's person (or a resumed agent) cannot allow it.
    assert!(
        reason(&typed(&env, "other-session", &format!("allow {id}"))).contains("another session")
    );
    // An unknown id, and words that are not an id.
    assert!(reason(&typed(&env, &env.session, "allow 000000")).contains("no undone change"));
    assert!(reason(&typed(&env, &env.session, "allow ../../x")).contains("no undone change"));
    assert!(reason(&typed(&env, &env.session, "")).contains("/loopgate allow <id>"));
    // The model's ScheduleWakeup brings `/loopgate allow <id>` back as a plain prompt (observed):
    // judged as a prompt, it keeps nothing.
    let mut wake = fixture("sanction/wakeup-UserPromptSubmit.json");
    wake["session_id"] = json!(env.session);
    wake["cwd"] = json!(env.project);
    wake["prompt"] = json!(format!("/loopgate allow {id}"));
    let out = env.hook("user-prompt-submit", &wake);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Another command's expansion is not loopgate's.
    let mut other = fixture("sanction/person-typed-UserPromptExpansion.json");
    other["command_name"] = json!("review");
    assert!(env.hook("prompt-expansion", &other).is_silent_allow());
    // A `/loopgate` an agent defined in the project (`.claude/commands/`): not loopgate's own.
    let mut project = fixture("sanction/person-typed-UserPromptExpansion.json");
    project["session_id"] = json!(env.session);
    project["command_args"] = json!(format!("allow {id}"));
    project["command_source"] = json!("projectSettings");
    assert!(reason(&env.hook("prompt-expansion", &project)).contains("not loopgate's own"));
    assert!(wired(&user), "nothing kept");
    // Too late: more than ten minutes after it was undone.
    let pending = env
        .state
        .join("sanction-pending")
        .join(format!("{id}.json"));
    let mut record = read(&pending);
    record["created_ms"] = json!(1_000);
    std::fs::write(&pending, record.to_string()).unwrap();
    assert!(
        reason(&typed(&env, &env.session, &format!("allow {id}"))).contains("more than 10 minutes")
    );
    assert!(wired(&user));
}

#[test]
fn records_the_agent_forges_are_told() {
    let env = Env::new();
    undone(&env);
    // A pending record of the agent's own, with words that hide what it does: the person who
    // types its id is told what it keeps, judged from the file itself.
    let mut forged = read(
        &std::fs::read_dir(env.state.join("sanction-pending"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path(),
    );
    forged["id"] = json!("abcdef");
    forged["problems"] = json!(["a harmless tidy-up"]);
    // The record holds a digest; the changed text is the one kept beside the file.
    let forged_text = r#"{"disableAllHooks": true}"#;
    let user = user_settings(&env);
    std::fs::write(format!("{}.loopgate-undone", user.display()), forged_text).unwrap();
    forged["files"][0]["changed_digest"] = json!(sha256_16(forged_text.as_bytes()));
    std::fs::write(
        env.state.join("sanction-pending/abcdef.json"),
        forged.to_string(),
    )
    .unwrap();
    let said = reason(&typed(&env, &env.session, "allow abcdef"));
    assert!(
        said.contains("disableAllHooks") && !said.contains("harmless"),
        "{said}"
    );

    // An allowed record written by the agent, then an unwiring: accepted, but told at the next
    // hook call, on the status line and by doctor.
    let env = Env::new();
    let user = user_settings(&env);
    env.run(&["setup", "--settings", user.to_str().unwrap()], b"");
    let unwired = json!({"env": {"LOOPGATE_MODE": "observe"}});
    let mut canon = Vec::new();
    write_canonical(&unwired, &mut canon);
    let digest = sha256_16(&canon);
    std::fs::create_dir_all(&env.state).unwrap();
    std::fs::write(
        env.state.join("sanction-allowed.json"),
        json!([{"file": user, "digest": digest, "id": "f0f0f0", "session": "sess-1", "at_ms": 1}])
            .to_string(),
    )
    .unwrap();
    std::fs::write(&user, unwired.to_string()).unwrap();
    assert!(config_change(&env, &user).is_silent_allow());
    let told = env.pre("Bash", json!({"command": "ls"}), &env.id()).stdout;
    assert!(told.contains("if you did not type that"), "{told}");
    assert!(statusline(&env).contains("loopgate OFF"));
    assert!(env.run(&["doctor"], b"").stdout.contains("f0f0f0"));
}

/// Canonical JSON as loopgate digests it: keys sorted, no spaces (these values have no escapes).
fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_string(k).unwrap().as_bytes());
                out.push(b':');
                write_canonical(&m[*k], out);
            }
            out.push(b'}');
        }
        other => out.extend(other.to_string().as_bytes()),
    }
}

fn sha256_16(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Issue 37 point 7: an undone change is kept for the person as a digest in loopgate's record,
/// never as settings text (an `env` there may hold an API key); the person's allow writes back
/// the version kept beside the file, byte for byte, and one changed since is not written.
#[test]
fn a_pending_change_keeps_digests_not_settings_text() {
    let env = Env::new();
    let user = user_settings(&env);
    env.run(&["setup", "--settings", user.to_str().unwrap()], b"");
    let key = "sk-ant-api03-Qw8rTz4mXy2pLk9vBn6cJd3hFg7sAe5uWq1oPi0";
    let changed =
        format!(r#"{{"env": {{"ANTHROPIC_API_KEY": "{key}", "LOOPGATE_MODE": "observe"}}}}"#);
    std::fs::write(&user, &changed).unwrap();
    assert_eq!(config_change(&env, &user).json()["decision"], "block");
    let told = env.pre("Bash", json!({"command": "ls"}), &env.id()).stdout;
    let id = told.split("/loopgate allow ").nth(1).unwrap()[..6].to_string();
    for entry in walkdir(&env.state) {
        let text = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(&key[14..]),
            "{} holds the key",
            entry.display()
        );
    }
    let said = reason(&typed(&env, &env.session, &format!("allow {id}")));
    assert!(said.contains("kept your change"), "{said}");
    assert_eq!(std::fs::read_to_string(&user).unwrap(), changed);

    // A version kept aside and changed since is not written back.
    let env = Env::new();
    let id = undone(&env);
    let user = user_settings(&env);
    std::fs::write(
        format!("{}.loopgate-undone", user.display()),
        r#"{"disableAllHooks": true}"#,
    )
    .unwrap();
    let said = reason(&typed(&env, &env.session, &format!("allow {id}")));
    assert!(said.contains("changed since"), "{said}");
    assert!(wired(&user));
}

/// Every file under `dir`.
fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out
}
