//! `loopgate statusline` through the binary, on the status-line input Claude Code 2.1.330 was
//! seen to send (`tests/fixtures/statusline/`, captured from the interactive CLI against the fake
//! model): one short line, quiet while all is well, telling refusals and the ceiling as they come.

use crate::common::Env;
use serde_json::Value;

/// The captured input, for `env`'s session.
fn input(env: &Env) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/statusline");
    let mut v: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("2.1.330-after-turn.json")).unwrap(),
    )
    .unwrap();
    v["session_id"] = env.session.clone().into();
    v["cwd"] = env.project.to_string_lossy().into_owned().into();
    v.to_string().into_bytes()
}

fn line(env: &Env) -> String {
    let out = env.run(&["statusline"], &input(env));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    assert_eq!(out.stdout.lines().count(), 1, "one line: {:?}", out.stdout);
    out.stdout.trim_end().to_string()
}

#[test]
fn the_line_is_quiet_while_all_is_well_and_tells_refusals_and_the_ceiling() {
    let env = Env::new();
    assert_eq!(
        line(&env),
        "loopgate ✓",
        "a session loopgate has not seen yet"
    );
    env.bash("ls", Ok("README.md"));
    assert_eq!(line(&env), "loopgate ✓ 1 call");

    let error = "Exit code 1\ncat: config.yml: No such file or directory";
    env.bash("cat config.yml", Err(error));
    env.bash("cat config.yml", Err(error));
    assert!(env.bash("cat config.yml", Err(error)).denied());
    let refused = line(&env);
    assert!(refused.starts_with("loopgate ▲ "), "{refused}");
    assert!(refused.contains("1 refused"), "{refused}");
    assert!(
        !refused.contains("ceiling"),
        "a first refusal is not defiance: {refused}"
    );

    // Walked into: the refusal repeated with nothing changed.
    for _ in 0..3 {
        assert!(env.bash("cat config.yml", Err(error)).denied());
    }
    let defied = line(&env);
    assert!(defied.contains("ceiling 4/10"), "{defied}");

    for _ in 0..6 {
        env.bash("cat config.yml", Err(error));
    }
    let ended = line(&env);
    assert!(ended.starts_with("loopgate ■ turn ended"), "{ended}");
    let facts = env.run(&["statusline", "--json"], &input(&env)).json();
    assert_eq!(facts["line"], ended.as_str());
    assert_eq!(facts["turn_ended"], true);
    assert_eq!(facts["walked_into"], 10);
}

#[test]
fn the_line_reads_without_writing_and_says_when_loopgate_is_off() {
    let env = Env::new();
    env.bash("ls", Ok("README.md"));
    let sessions = env.state.join("sessions");
    let before = files(&sessions);
    line(&env);
    let after = files(&sessions);
    assert_eq!(before, after, "the status line changes nothing on disk");

    let off = env.var("LOOPGATE_DISABLE", "1");
    assert_eq!(line(&off), "loopgate off (LOOPGATE_DISABLE is set)");
}

/// The files in `dir` with their modification times.
fn files(dir: &std::path::Path) -> Vec<(std::ffi::OsString, std::time::SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), e.metadata().unwrap().modified().unwrap())
        })
        .collect()
}

#[test]
fn bad_input_still_gets_a_line() {
    let env = Env::new();
    for stdin in [&b""[..], b"not json", b"{\"session_id\": 5}"] {
        let out = env.run(&["statusline"], stdin);
        assert_eq!(out.code, 0);
        assert_eq!(out.stdout, "loopgate\n", "{stdin:?}");
    }
}

/// What the person was told (here: the session's state deleted between two calls) stays on the
/// status line, and in `status`, after the message itself has scrolled by.
#[test]
fn a_notice_stays_on_the_line_and_in_status() {
    let env = Env::new();
    assert!(env.bash("ls", Ok("a b")).is_silent_allow());
    assert!(line(&env).starts_with("loopgate ✓"), "{}", line(&env));
    std::fs::remove_file(env.state_file()).unwrap();
    let told = env.bash("ls", Ok("a b"));
    assert!(told.stdout.contains("vanished"), "{}", told.stdout);
    let shown = line(&env);
    assert!(
        shown.starts_with("loopgate ⚠") && shown.contains("1 told: loopgate status"),
        "{shown}"
    );
    let facts = env.run(&["statusline", "--json"], &input(&env)).json();
    assert_eq!(facts["told"], 1, "{facts}");
    let status = env.run(&["status", "--session", &env.session], b"");
    assert!(
        status.stdout.contains(" told [loopgate") && status.stdout.contains("vanished"),
        "{}",
        status.stdout
    );
}

/// Issue 38: observe mode (`./install.sh --observe`, the README's safe first step) refuses
/// nothing, so neither the status line nor `status` may claim a refusal, a ceiling count or a
/// refusal walked into; they say what would have been refused.
#[test]
fn observe_mode_never_claims_a_refusal() {
    let env = Env::new().observe();
    let error = "Exit code 1\ncat: config.yml: No such file or directory";
    for _ in 0..6 {
        let out = env.bash("cat config.yml", Err(error));
        assert!(!out.denied(), "observe mode denied a call: {}", out.stdout);
    }
    let observed = line(&env);
    assert!(observed.starts_with("loopgate ✓ 6 calls"), "{observed}");
    assert!(
        observed.contains("would be refused (observe mode)"),
        "{observed}"
    );
    assert!(
        !observed.contains(" refused ·") && !observed.ends_with(" refused"),
        "{observed}"
    );
    assert!(!observed.contains("ceiling"), "{observed}");
    let facts = env.run(&["statusline", "--json"], &input(&env)).json();
    assert_eq!(facts["refused"], 0, "{facts}");
    assert_eq!(facts["walked_into"], 0, "{facts}");
    assert!(facts["would_refuse"].as_u64().unwrap() >= 1, "{facts}");

    let status = env.run(&["status", "--session", &env.session.clone()], b"");
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains("observe mode: nothing was denied"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("ceiling: 0 of 10"),
        "{}",
        status.stdout
    );
    assert!(!status.stdout.contains("walked into"), "{}", status.stdout);
}
