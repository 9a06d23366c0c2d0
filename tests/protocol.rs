//! The core layers driven through the real binary: what Claude Code receives on each call.

use crate::common::{fixture, Env, EVENT_KEYS};
use serde_json::json;

const FAIL: Result<&str, &str> = Err("Exit code 1\nerror: test failed, 3 failures");

#[test]
fn fourth_identical_failing_call_is_denied_with_the_exact_json() {
    let env = Env::new();
    for _ in 0..3 {
        assert!(env.bash("cargo test", FAIL).is_silent_allow());
    }
    let out = env.bash("cargo test", FAIL);
    let v = out.json();
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        v,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
               "permissionDecisionReason": reason}}),
        "nothing else in the answer"
    );
    // One rule judges it: the same call, the same answer, nothing new between; an unknown error
    // may be retried twice. The model is told what and how often.
    assert!(reason.contains("Bash `cargo test`"), "{reason}");
    assert!(reason.contains("3 times"), "{reason}");
    assert!(reason.contains("loopgate"), "{reason}");
    // And it stays denied while nothing changes.
    assert!(env.bash("cargo test", FAIL).denied());
}

#[test]
fn a_changed_outcome_keeps_the_call_allowed() {
    let env = Env::new();
    for (n, name) in [
        "parse", "lex", "eval", "print", "load", "save", "diff", "merge",
    ]
    .iter()
    .enumerate()
    {
        let err = format!("Exit code 1\ntest {name}::works failed");
        assert!(!env.bash("cargo test", Err(&err)).denied(), "run {n}");
    }
}

#[test]
fn answers_that_differ_only_in_numbers_get_a_larger_budget() {
    let env = Env::new();
    // An unknown error may be retried twice; differing only in a count, four times.
    for n in 0..5 {
        let err = format!("Exit code 1\n{} tests failed", 8 - n);
        assert!(!env.bash("cargo test", Err(&err)).denied(), "run {n}");
    }
    let out = env.bash("cargo test", Err("Exit code 1\n1 tests failed"));
    assert!(out.denied(), "{}", out.stdout);
    assert!(
        out.stdout.contains("up to numbers and ids"),
        "{}",
        out.stdout
    );
}

#[test]
fn an_edit_in_between_keeps_the_call_allowed() {
    let env = Env::new();
    std::fs::write(env.project.join("lib.rs"), "a").unwrap();
    for n in 0..6 {
        assert!(!env.bash("cargo test", FAIL).denied(), "run {n}");
        assert_eq!(env.edit("lib.rs", &format!("fix {n}")).code, 0);
    }
}

#[test]
fn noise_in_the_output_does_not_make_it_new() {
    let env = Env::new();
    for n in 0..3 {
        let err = format!(
            "Exit code 1\nFAILED in {n}.{n}1s at 2026-01-0{}T10:00:00Z",
            n + 1
        );
        assert!(env.bash("make", Err(&err)).is_silent_allow());
    }
    assert!(env
        .bash(
            "make",
            Err("Exit code 1\nFAILED in 9.99s at 2026-02-01T11:00:00Z")
        )
        .denied());
}

#[test]
fn rereading_an_unchanged_file_is_allowed_five_times_then_denied() {
    let env = Env::new();
    let input = json!({"file_path": "/p/a.rs"});
    for n in 0..5 {
        let id = env.id();
        assert!(
            env.pre("Read", input.clone(), &id).is_silent_allow(),
            "read {n}"
        );
        env.post(
            "Read",
            input.clone(),
            &id,
            json!({"type": "text", "file": {"content": "same"}}),
        );
    }
    let events = env.events();
    assert_eq!(
        events.len(),
        1,
        "one warning before the refusal: {events:?}"
    );
    assert_eq!(events[0]["detector"], "repeat");
    assert_eq!(events[0]["decision"], "warn");
    let out = env.pre("Read", input.clone(), &env.id());
    assert!(out.denied(), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("Read /p/a.rs has returned the same answer 5 times"),
        "{}",
        out.stdout
    );
}

#[test]
fn five_consecutive_failures_warn_the_model_and_the_human() {
    let env = Env::new();
    let mut answers = Vec::new();
    for n in 0..10 {
        let input = json!({"command": format!("try-{n}")});
        let id = env.id();
        env.pre("Bash", input.clone(), &id);
        answers.push(env.fail("Bash", input, &id, "Exit code 127\nnot found"));
    }
    let warned: Vec<usize> = (0..10)
        .filter(|&i| {
            answers[i]
                .context()
                .is_some_and(|c| c.contains("in a row have failed"))
        })
        .collect();
    assert_eq!(warned, vec![4, 9], "warn at the 5th and 10th failure only");
    let v = answers[4].json();
    assert_eq!(
        v["hookSpecificOutput"]["hookEventName"],
        "PostToolUseFailure"
    );
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(ctx.contains("5 tool calls in a row have failed"), "{ctx}");
    assert!(ctx.contains("Bash `try-4`"), "names the calls: {ctx}");
    assert!(v["systemMessage"].as_str().unwrap().starts_with("loopgate"));
}

#[test]
fn a_success_resets_the_failure_count() {
    let env = Env::new();
    for n in 0..4 {
        env.bash(&format!("f{n}"), Err("Exit code 1"));
    }
    env.bash("true-ish", Ok("fine"));
    let id = env.id();
    let input = json!({"command": "f9"});
    env.pre("Bash", input.clone(), &id);
    assert!(env
        .fail("Bash", input, &id, "Exit code 1")
        .context()
        .is_none());
}

#[test]
fn observe_mode_denies_nothing_and_logs_would_fire() {
    let env = Env::new().config("mode = \"observe\"\n");
    for _ in 0..6 {
        assert!(env.bash("cargo test", FAIL).is_silent_allow());
    }
    let events = env.events();
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e["enforced"] == false));
    assert!(events
        .iter()
        .any(|e| e["detector"] == "repeat" && e["decision"] == "deny"));
    assert!(events.iter().any(|e| e["detector"] == "failures"));
}

#[test]
fn observe_flag_wins_over_env() {
    let env = Env::new().var("LOOPGATE_MODE", "enforce");
    for _ in 0..3 {
        env.bash("x", FAIL);
    }
    let p = env.base("PreToolUse", json!({"tool_name": "Bash", "tool_input": {"command": "x", "description": "run"}, "tool_use_id": "z"}));
    let out = env.run(&["--observe", "pre-tool-use"], p.to_string().as_bytes());
    assert!(out.is_silent_allow());
}

#[test]
fn reset_clears_a_denial() {
    let env = Env::new();
    for _ in 0..3 {
        env.bash("cargo test", FAIL);
    }
    assert!(env.bash("cargo test", FAIL).denied());
    let out = env.run(&["reset", "--session", "sess-1"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(env.bash("cargo test", FAIL).is_silent_allow());
    assert!(
        env.events().iter().any(|e| e["decision"] == "deny"),
        "the log stays"
    );
}

#[test]
fn every_event_is_one_jsonl_line_with_its_evidence() {
    let env = Env::new();
    for _ in 0..4 {
        env.bash("cargo test", FAIL);
    }
    let events = env.events();
    let e = events
        .iter()
        .find(|e| e["detector"] == "repeat")
        .expect("a repeat event");
    for key in EVENT_KEYS {
        assert!(e.get(key).is_some(), "missing {key} in {e}");
    }
    assert_eq!(e["evidence"]["answers"], 3);
    assert_eq!(e["session"], "sess-1");
}

#[test]
fn status_shows_counters_and_last_decisions() {
    let env = Env::new();
    for _ in 0..4 {
        env.bash("cargo test", FAIL);
    }
    let s = &env.status()[0];
    assert_eq!(s["session"], "sess-1");
    assert_eq!(s["totals"]["denials"], 1);
    assert_eq!(s["agents"]["main"]["repeats"][0]["same_answer_in_a_row"], 3);
    assert_eq!(s["recent"][0]["action"], "deny");
    let text = env.run(&["status"], b"");
    assert!(text.stdout.contains("denials 1"), "{}", text.stdout);
}

#[test]
fn subagent_calls_do_not_trip_the_main_agent() {
    let env = Env::new();
    let input = json!({"command": "npm test"});
    for n in 0..3 {
        let id = format!("sub-{n}");
        let mut p = env.base(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id}),
        );
        p["agent_id"] = json!("a-sub");
        assert!(env.hook("pre-tool-use", &p).is_silent_allow());
        let mut f = env.base("PostToolUseFailure", json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id, "error": "Exit code 1\nsame"}));
        f["agent_id"] = json!("a-sub");
        env.hook("post-tool-use-failure", &f);
    }
    assert!(env.pre("Bash", input, "main-1").is_silent_allow());
}

#[test]
fn every_real_fixture_is_accepted() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let env = Env::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue; // tests/fixtures/replay/ holds transcripts, not hook payloads
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let p = fixture(&name);
        let sub = match p["hook_event_name"].as_str().unwrap() {
            "SessionStart" => "session-start",
            "PreToolUse" => "pre-tool-use",
            "PostToolUse" => "post-tool-use",
            "PostToolUseFailure" => "post-tool-use-failure",
            "PostToolBatch" => "post-tool-batch",
            "Stop" => "stop",
            "SubagentStop" => "subagent-stop",
            "UserPromptSubmit" => "user-prompt-submit",
            _ => continue, // SessionEnd, SubagentStart: not hooked
        };
        let out = env.run(&[sub], &std::fs::read(&path).unwrap());
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        assert!(out.stderr.is_empty(), "{name}: {}", out.stderr);
        seen += 1;
    }
    assert!(seen >= 50, "only {seen} fixtures ran");
}

#[test]
fn report_counts_events_and_judges_each_session() {
    let env = Env::new();
    for _ in 0..5 {
        env.bash("cargo test", FAIL);
    }
    let out = env.run(&["report", "--json"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(r["by_detector"]["repeat"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["statistics"]["calls"], 5);
    assert_eq!(
        r["statistics"]["failures"], 3,
        "two calls were denied, three ran"
    );
    let s = &r["sessions"][0];
    assert_eq!(s["session"], "sess-1");
    assert!(
        s["summary"]
            .as_str()
            .unwrap()
            .starts_with("looping on inputs"),
        "{s}"
    );
    let text = env.run(&["report", "--since", "1h"], b"");
    assert!(text.stdout.contains("looping on inputs"), "{}", text.stdout);
    let none = env.run(&["report", "--session", "other"], b"");
    assert!(none.stdout.contains("0 sessions"), "{}", none.stdout);
    assert_eq!(env.run(&["report", "--since", "soon"], b"").code, 1);
    // One line that is not UTF-8 in the log: skipped and counted, the rest still reported (it
    // used to make the whole file unreadable, and the report empty).
    let log = env.state.join("events.jsonl");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.splice(0..0, b"{\"session\":\"\xff\xfe\"}\n".iter().copied());
    std::fs::write(&log, bytes).unwrap();
    let out = env.run(&["report", "--json"], b"");
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(r["by_detector"]["repeat"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["unreadable_lines_skipped"], 1, "{r}");
    let text = env.run(&["report"], b"");
    assert!(text.stdout.contains("1 unreadable line"), "{}", text.stdout);
    assert!(text.stdout.contains("looping on inputs"), "{}", text.stdout);
}

#[test]
/// Twenty subagents at once, each failing the same way: each is its own agent (a first try
/// each, allowed), and their retries are one loop across them (issue 37 point 4: failures of one
/// command are counted across the session's subagents).
fn twenty_subagents_each_repeating_a_failing_call_are_each_denied() {
    let env = Env::new();
    let input = json!({"command": "cat config/missing.yml"});
    let err = "Exit code 1\ncat: config/missing.yml: No such file or directory";
    let call = |agent: &str, id: &str, event: &str, sub: &str, extra: serde_json::Value| {
        let mut p = env.base(event, extra);
        p["agent_id"] = json!(agent);
        p["tool_name"] = json!("Bash");
        p["tool_input"] = input.clone();
        p["tool_use_id"] = json!(id);
        env.hook(sub, &p)
    };
    // Claude Code runs up to 20 subagents at once; their ids here share a prefix longer than
    // the 64 characters an id is stored in, so clipping would make them one agent.
    let agent = |a: usize| format!("{}-{a}", "subagent".repeat(10));
    // Interleaved, as concurrent subagents run: each one's first try runs and fails (were the
    // ids clipped into one agent, the third would be its own second retry, and refused).
    for a in 1..=20 {
        let id = format!("a{a}-0");
        let out = call(&agent(a), &id, "PreToolUse", "pre-tool-use", json!({}));
        assert!(
            out.is_silent_allow(),
            "agent {a}'s first try: {}",
            out.stdout
        );
        call(
            &agent(a),
            &id,
            "PostToolUseFailure",
            "post-tool-use-failure",
            json!({"error": err}),
        );
    }
    // Each retry is the same deterministic failure again, twenty times over: refused.
    for a in 1..=20 {
        let out = call(
            &agent(a),
            &format!("a{a}-1"),
            "PreToolUse",
            "pre-tool-use",
            json!({}),
        );
        assert!(out.denied(), "agent {a}: {}", out.stdout);
    }
    // The main agent has not run the command at all: it is not denied.
    assert!(env.pre("Bash", input, "main-1").is_silent_allow());
}

/// More subagents at once than loopgate follows (20 beside the main agent): one whose calls were
/// failing is dropped only when every other is failing too, and then the person is told, once.
/// Subagents with nothing failing make room silently, as they always did.
#[test]
fn a_failing_subagent_dropped_for_room_is_told_once_and_ordinary_ones_silently() {
    let env = Env::new();
    let call = |agent: usize, n: usize, fails: bool| {
        let input = json!({"command": format!("make target-{agent}")});
        let id = format!("a{agent}-{n}");
        let mut p = env.base(
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id}),
        );
        p["agent_id"] = json!(format!("sub-{agent}"));
        let pre = env.hook("pre-tool-use", &p);
        let mut q = p.clone();
        q["hook_event_name"] = json!("PostToolUse");
        let (sub, extra) = if fails {
            q["hook_event_name"] = json!("PostToolUseFailure");
            (
                "post-tool-use-failure",
                json!({"error": "Exit code 2\nmake: *** [target] Error 2"}),
            )
        } else {
            (
                "post-tool-use",
                json!({"tool_response": {"stdout": "built", "stderr": ""}}),
            )
        };
        for (k, v) in extra.as_object().unwrap() {
            q[k] = v.clone();
        }
        [pre, env.hook(sub, &q)]
    };
    let told = |outs: &[crate::common::Out; 2]| {
        outs.iter()
            .any(|o| o.stdout.contains("subagents ran at once"))
    };
    // 30 ordinary subagents: ten are dropped for room, and nobody needs to hear it.
    for a in 1..=30 {
        assert!(!told(&call(a, 0, false)), "ordinary subagent {a}");
    }
    // 21 more, every one failing: the first failing ones are dropped, and the person hears it
    // once (on the call that dropped one), not on every call after.
    let outs: Vec<_> = (31..=60).map(|a| call(a, 0, true)).collect();
    let told_at: Vec<usize> = (31..=60)
        .zip(&outs)
        .filter(|(_, o)| told(o))
        .map(|(a, _)| a)
        .collect();
    assert_eq!(told_at.len(), 1, "told on {told_at:?}");
    assert!(outs.iter().flatten().all(|o| o.code == 0));
    let notice = outs
        .iter()
        .flatten()
        .find(|o| o.stdout.contains("subagents ran at once"))
        .unwrap();
    assert!(
        notice.json()["systemMessage"]
            .as_str()
            .is_some_and(|m| m.contains("loopgate:") && m.contains("starts counting again")),
        "{}",
        notice.stdout
    );
    assert!(
        env.events().iter().any(|e| e["reason"]
            .as_str()
            .is_some_and(|r| r.contains("subagents ran at once"))),
        "the notice is in the event log too"
    );
}

/// A SubagentStop that names no agent stops no one: the main agent's record of its repeated
/// failing call survives it (it used to be wiped, and the third try went through).
#[test]
fn a_subagent_stop_without_an_agent_id_leaves_the_main_agent_alone() {
    let env = Env::new();
    let input = json!({"command": "cat config/missing.yml"});
    let err = "Exit code 1\ncat: config/missing.yml: No such file or directory";
    for id in ["m-0", "m-1"] {
        assert!(env.pre("Bash", input.clone(), id).is_silent_allow());
        env.fail("Bash", input.clone(), id, err);
    }
    let stop = env.hook(
        "subagent-stop",
        &env.base("SubagentStop", json!({"stop_hook_active": false})),
    );
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    let third = env.pre("Bash", input, "m-2");
    assert!(third.denied(), "{}", third.stdout);
}
