//! Defence by effect: whatever changed Claude Code's settings (here, writes the guard never saw),
//! the ConfigChange hook that follows refuses a change that switches loopgate off, puts the
//! files right (keeping the changed version aside) and tells the person; ordinary changes and
//! the person's own `loopgate setup --uninstall` pass.

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

    // The person's uninstall, mid-session: left alone.
    let un = env.run(
        &["setup", "--uninstall", "--settings", user.to_str().unwrap()],
        b"",
    );
    assert_eq!(un.code, 0, "{}", un.stderr);
    assert!(change(&env, &user, "user_settings").is_silent_allow());
    assert!(!wired(&read(&user)));
}
