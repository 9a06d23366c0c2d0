//! A newcomer's first hour, through the binary: mistakes on the command line say what to do.

use crate::common::{Env, Out};
use std::path::Path;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn refused(env: &Env, args: &[&str]) -> Out {
    let out = env.run(args, b"");
    assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
    assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    out
}

#[test]
fn usage_errors_keep_what_to_do() {
    let env = Env::new();
    for (args, wants) in [
        (
            &["reset"][..],
            &["--session <SESSION>", "--all", "'loopgate reset --help'"][..],
        ),
        (
            &["replay"],
            &[
                "<PATHS>",
                "Usage: loopgate replay",
                "'loopgate replay --help'",
            ],
        ),
        (
            &["completions"],
            &["<SHELL>", "'loopgate completions --help'"],
        ),
        (
            &["stauts"],
            &["similar subcommand", "'status'", "'loopgate --help'"],
        ),
        (
            &["status", "--jsn"],
            &["'--json'", "'loopgate status --help'"],
        ),
        (&["completions", "tcsh"], &["possible values: bash", "zsh"]),
    ] {
        let out = refused(&env, args);
        for want in wants {
            assert!(
                out.stderr.contains(want),
                "{args:?} lacks {want}:\n{}",
                out.stderr
            );
        }
        assert!(out.stderr.starts_with("loopgate: "), "{}", out.stderr);
    }
}

#[test]
fn bare_loopgate_and_help_help_show_help() {
    let env = Env::new();
    for args in [&[][..], &["help", "--help"]] {
        let out = env.run(args, b"");
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(
            out.stdout.contains("Usage: loopgate"),
            "{args:?}: {}",
            out.stdout
        );
    }
}

#[test]
fn config_and_payload_errors_are_in_words() {
    let env = Env::new();
    let file = env.state.parent().unwrap().join("xdg/loopgate/config.toml");
    write(&file, "[detectors.repeat]\nsuccess = 3.5\n");
    let out = env.run(&["config"], b"");
    assert!(
        out.stderr.contains("expected a whole number"),
        "{}",
        out.stderr
    );
    let out = env.run(&["pre-tool-use"], b"0");
    assert_eq!(out.code, 1);
    for rust in ["u32", "struct", "Payload", "floating point"] {
        assert!(!out.stderr.contains(rust), "{}", out.stderr);
    }
    assert!(out.stderr.contains("expected an object"), "{}", out.stderr);
}

#[test]
fn counts_of_one_are_singular() {
    let mut env = Env::new();
    env.new_prompt("p1");
    env.bash("ls", Ok("a"));
    let out = env.run(&["report"], b"");
    assert!(out.stdout.contains("1 session, 1 call,"), "{}", out.stdout);
    assert!(!out.stdout.contains(" 1 calls"), "{}", out.stdout);
}
