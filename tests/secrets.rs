//! Secrets never reach what loopgate stores or shows. For every format in `tests/data/secrets.json`
//! a session quotes it where detectors quote text — a failing command (identical-failure
//! reasons and evidence, consecutive-failure lists), its error text, a call rejected before it
//! ran (the batch "rejected:" line) — and then none of the secrets may appear in `events.jsonl`,
//! the state files, `status` (text and JSON) or `report` (text and JSON).

use crate::common::Env;
use serde_json::{json, Value};

fn table() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/secrets.json"),
    )
    .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value(v["cases"].clone()).unwrap()
}

#[test]
fn no_secret_is_stored_or_shown() {
    let table = table();
    assert!(table.len() >= 25);
    let env = Env::new();
    for (n, (text, _)) in table.iter().enumerate() {
        let input = json!({"command": format!("deploy {text}"), "description": "run"});
        let err = format!("Error: No such file or directory: {text}");
        // Fails twice the same deterministic way: the third identical call is denied with a
        // reason that quotes the error. Failures in a row build up the consecutive-failures
        // warning, which lists the calls.
        for k in 0..2 {
            let id = format!("t{n}-{k}");
            env.pre("Bash", input.clone(), &id);
            env.fail("Bash", input.clone(), &id, &err);
        }
        let third = env.pre("Bash", input.clone(), &format!("t{n}-2"));
        assert!(third.denied(), "{text}: {}", third.stdout);
        // A call Claude Code rejected before it ran, whose error quotes the secret: the batch
        // "rejected:" line.
        let edit =
            json!({"file_path": env.project.join("a.py"), "old_string": text, "new_string": "x"});
        env.batch_of(
            "Edit",
            &edit,
            &format!("rejected-{n}"),
            &format!("<tool_use_error>String to replace not found in file.\nString: {text}</tool_use_error>"),
        );
    }
    let mut shown: Vec<(String, String)> = Vec::new();
    for name in ["events.jsonl", "events.jsonl.1"] {
        if let Ok(t) = std::fs::read_to_string(env.state.join(name)) {
            shown.push((name.to_string(), t));
        }
    }
    assert!(!shown.is_empty(), "nothing was logged");
    // Session states are binary; their strings are stored as plain UTF-8 bytes, so a secret
    // would show as its text.
    let mut states = 0;
    for entry in std::fs::read_dir(env.state.join("sessions")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e != "lock") {
            states += 1;
            shown.push((
                p.display().to_string(),
                String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned(),
            ));
        }
    }
    assert!(states > 0, "no session state was written");
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["report"],
        &["report", "--json"],
    ] {
        let out = env.run(args, b"");
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        shown.push((args.join(" "), out.stdout));
    }
    let log = &shown[0].1;
    assert!(
        log.contains("LOOP_DETECTED") && log.contains("***"),
        "the log should quote masked errors: {log}"
    );
    let leaks: Vec<String> = shown
        .iter()
        .flat_map(|(where_, text)| {
            table
                .iter()
                .filter(|(_, secret)| text.contains(secret.as_str()))
                .map(move |(_, secret)| format!("{secret:?} in {where_}"))
        })
        .collect();
    assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));
}
