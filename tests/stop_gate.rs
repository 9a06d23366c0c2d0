//! Layer 3 through the real binary: when a Stop is blocked, and every legitimate end that is not.

use crate::common::{commit_all, Env};
use serde_json::json;

fn failing_edit_turn(env: &mut Env) {
    env.new_prompt("p-edit");
    env.rejected_edit("README.md", "text that is not there");
    env.rejected_edit("README.md", "text that is not there either");
}

#[test]
fn blocks_a_turn_whose_edits_left_nothing_changed() {
    let mut env = Env::new().git();
    failing_edit_turn(&mut env);
    let out = env.stop(false);
    assert!(out.stop_blocked(), "{}", out.stdout);
    let reason = out.json()["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("2 of its 2 file edits failed or were rejected"),
        "{reason}"
    );
    assert!(reason.contains("git status"), "{reason}");
    assert_eq!(
        out.json().as_object().unwrap().len(),
        2,
        "only decision and reason"
    );
}

/// A turn that tried to change a file (an edit that left it as it was), whose build kept failing
/// until loopgate refused it.
fn refused_build_turn(env: &mut Env) {
    env.new_prompt("p-deny");
    env.edit_from("README.md", "hello\n", "hello\n");
    for _ in 0..3 {
        env.bash("cargo build", Err("Exit code 101\nerror[E0425]"));
    }
    assert!(env
        .bash("cargo build", Err("Exit code 101\nerror[E0425]"))
        .denied());
}

#[test]
fn a_turn_that_heeded_a_refusal_ends_freely() {
    let mut env = Env::new().git();
    refused_build_turn(&mut env);
    // Told to stop and say what blocks it, the agent stops: its Stop is not refused.
    let out = env.stop(false);
    assert!(out.is_silent_allow(), "{}", out.stdout);
}

#[test]
fn blocks_a_turn_that_walked_into_a_refusal_and_changed_nothing() {
    let mut env = Env::new().git();
    refused_build_turn(&mut env);
    // It goes on regardless: the same refused call again, nothing changed.
    assert!(env
        .bash("cargo build", Err("Exit code 101\nerror[E0425]"))
        .denied());
    let out = env.stop(false);
    assert!(out.stop_blocked(), "{}", out.stdout);
    let reason = out.json()["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("calls loopgate refused were made again"),
        "{reason}"
    );
}

#[test]
fn lets_the_turn_end_after_max_blocks() {
    let mut env = Env::new().git();
    failing_edit_turn(&mut env);
    assert!(env.stop(false).stop_blocked());
    assert!(env.stop(true).stop_blocked());
    assert!(env.stop(true).is_silent_allow(), "budget of 2 spent");
    let mut env = Env::new().git().config("[progress]\nmax_blocks = 1\n");
    failing_edit_turn(&mut env);
    assert!(env.stop(false).stop_blocked());
    assert!(env.stop(true).is_silent_allow());
}

#[test]
fn allows_after_a_file_change() {
    let mut env = Env::new().git();
    failing_edit_turn(&mut env);
    std::fs::write(env.project.join("README.md"), "changed\n").unwrap();
    assert!(env.stop(false).is_silent_allow());
}

#[test]
fn allows_after_a_commit() {
    let mut env = Env::new().git();
    std::fs::write(env.project.join("work.txt"), "w\n").unwrap();
    failing_edit_turn(&mut env);
    let repo = git2::Repository::open(&env.project).unwrap();
    commit_all(&repo, "work");
    assert!(env.stop(false).is_silent_allow());
}

#[test]
fn allows_an_untracked_file() {
    let mut env = Env::new().git();
    failing_edit_turn(&mut env);
    std::fs::write(env.project.join("new.txt"), "n\n").unwrap();
    assert!(env.stop(false).is_silent_allow());
}

/// A directory's change stamp moves when an entry goes; the walk counts it when a file git tracks
/// is gone from it (deleted by a command no tool reported), not when only a scratch file was.
#[test]
fn allows_a_tracked_file_deleted_and_blocks_a_scratch_file_gone_again() {
    let mut env = Env::new().git();
    std::fs::create_dir_all(env.project.join("docs")).unwrap();
    std::fs::write(env.project.join("docs/old.md"), "old\n").unwrap();
    let repo = git2::Repository::open(&env.project).unwrap();
    commit_all(&repo, "docs");
    failing_edit_turn(&mut env);
    std::fs::remove_file(env.project.join("docs/old.md")).unwrap();
    assert!(env.stop(false).is_silent_allow());

    let mut env = Env::new().git();
    failing_edit_turn(&mut env);
    std::fs::create_dir_all(env.project.join("scratch")).unwrap();
    std::fs::write(env.project.join("scratch/t.txt"), "t\n").unwrap();
    std::fs::remove_file(env.project.join("scratch/t.txt")).unwrap();
    assert!(
        env.stop(false).stop_blocked(),
        "a scratch file created and gone again is no change"
    );
}

#[test]
fn never_blocks_outside_git() {
    let mut env = Env::new();
    failing_edit_turn(&mut env);
    assert!(env.stop(false).is_silent_allow());
}

#[test]
fn never_blocks_a_read_only_turn() {
    let mut env = Env::new().git();
    env.new_prompt("p-read");
    let input = json!({"file_path": env.project.join("README.md")});
    for _ in 0..3 {
        let id = env.id();
        env.pre("Read", input.clone(), &id);
        env.post(
            "Read",
            input.clone(),
            &id,
            json!({"type": "text", "file": {"content": "hello\n"}}),
        );
    }
    env.bash("grep -r TODO .", Ok("README.md: TODO"));
    assert!(env.stop(false).is_silent_allow());
}

#[test]
fn never_blocks_a_turn_that_ran_failing_tests_and_reported() {
    let mut env = Env::new().git();
    env.new_prompt("p-test");
    env.bash(
        "cargo test",
        Err("Exit code 101\ntest result: FAILED. 3 passed; 2 failed"),
    );
    env.bash("cargo test -- --nocapture", Err("Exit code 101\n2 failed"));
    env.bash(
        "curl -s localhost:3000/health",
        Err("Exit code 7\nconnection refused"),
    );
    assert!(env.stop(false).is_silent_allow());
}

#[test]
fn attended_sessions_are_left_alone_unless_configured() {
    let mut env = Env::new().git().var("CLAUDE_CODE_SESSION_ATTENDED", "1");
    failing_edit_turn(&mut env);
    assert!(env.stop(false).is_silent_allow());
    let mut env = Env::new()
        .git()
        .var("CLAUDE_CODE_SESSION_ATTENDED", "1")
        .config("[progress]\nwhen = \"always\"\n");
    failing_edit_turn(&mut env);
    assert!(env.stop(false).stop_blocked());
}

#[test]
fn observe_mode_never_blocks_but_logs() {
    let mut env = Env::new().git().config("mode = \"observe\"\n");
    failing_edit_turn(&mut env);
    assert!(env.stop(false).is_silent_allow());
    let e = env.events();
    assert!(e.iter().any(|e| e["detector"] == "progress"
        && e["decision"] == "block"
        && e["enforced"] == false));
}

#[test]
fn anchors_on_the_project_dir_not_cwd() {
    let mut env = Env::new().git();
    std::fs::create_dir(env.project.join("sub")).unwrap();
    failing_edit_turn(&mut env);
    let p = env.base(
        "Stop",
        json!({"stop_hook_active": false, "cwd": env.project.join("sub")}),
    );
    let out = env
        .command(&["stop"])
        .current_dir(env.project.join("sub"))
        .write_stdin(p.to_string())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"block\""));
    std::fs::write(env.project.join("sub/made.txt"), "x").unwrap();
    assert!(env.stop(false).is_silent_allow());
}
