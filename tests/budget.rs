//! Issue 39: the loop budget. A loop that burns past it pauses (an `ask` where a person attends,
//! the end of the turn where nobody does) and the person's continue or raise lets it go on; the
//! same work without a loop is never paused; the day's total is the backstop across sessions; a
//! project file may only tighten it; a lost or corrupt day ledger fails open.

use crate::common::{Env, Out};
use serde_json::{json, Value};

const FAIL: Result<&str, &str> =
    Err("Exit code 1\ncat: config/settings.yml: No such file or directory");

/// Input tokens of one model response: $0.20 at claude-opus-4-5's list price ($5 per million).
const TOKENS: u64 = 40_000;

/// An Env whose payloads name a transcript the test writes.
fn env_with(user: &str) -> Env {
    let mut env = Env::new().config(user);
    env.transcript = env
        .state
        .parent()
        .unwrap()
        .join("transcript.jsonl")
        .display()
        .to_string();
    env
}

/// The model's response that asks for the next call, as Claude Code writes it before the hook.
fn respond(env: &Env) {
    let n = std::fs::read_to_string(&env.transcript)
        .map(|t| t.lines().count())
        .unwrap_or(0);
    let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let line = json!({"type": "assistant", "timestamp": now, "sessionId": env.session,
        "message": {"id": format!("msg_{}_{n}", env.session), "model": "claude-opus-4-5",
        "usage": {"input_tokens": TOKENS, "output_tokens": 0}}});
    let mut text = std::fs::read_to_string(&env.transcript).unwrap_or_default();
    text.push_str(&format!("{line}\n"));
    std::fs::write(&env.transcript, text).unwrap();
    // Timestamps are milliseconds: the hook's clock must be past the response's.
    std::thread::sleep(std::time::Duration::from_millis(3));
}

/// One looping call: the model's response, then the call.
fn looped(env: &Env) -> Out {
    respond(env);
    env.bash("cat config/settings.yml", FAIL)
}

fn budget_of(env: &Env) -> Value {
    env.status()[0]["budget"].clone()
}

fn asked(o: &Out) -> bool {
    !o.stdout.is_empty() && o.json()["hookSpecificOutput"]["permissionDecision"] == "ask"
}

fn halted(env: &Env) -> (i32, Value) {
    let out = env.run(&["halted", "--json"], b"");
    (
        out.code,
        serde_json::from_str(&out.stdout).unwrap_or(Value::Null),
    )
}

fn typed(env: &Env, args: &str) -> Out {
    let mut p = crate::common::fixture("sanction/person-typed-UserPromptExpansion.json");
    p["session_id"] = json!(env.session);
    p["cwd"] = json!(env.project);
    p["command_args"] = json!(args);
    p["prompt"] = json!(format!("/loopgate {args}"));
    env.hook("prompt-expansion", &p)
}

const ONE_DOLLAR: &str = "[budget]\nsession_usd = 1\nday_usd = 50\n";

#[test]
fn a_loop_past_the_budget_asks_the_person_who_attends_and_a_raise_lets_it_go_on() {
    let mut env = env_with(ONE_DOLLAR).var("CLAUDE_CODE_SESSION_ATTENDED", "1");
    env.new_prompt("p-1");
    // The first call and its first repeat: no loop judged yet, nothing counted.
    looped(&env);
    looped(&env);
    assert_eq!(budget_of(&env)["session_usd"], 0.0);
    // The loop is refused from here on; its responses (from the first repeat's) are waste.
    let mut outs = Vec::new();
    for _ in 0..5 {
        outs.push(looped(&env));
        if asked(outs.last().unwrap()) {
            break;
        }
    }
    // Told in the call's answer, beside the loop's refusal.
    let warned = outs
        .iter()
        .any(|o| o.denied() && o.stdout.contains("loop budget (an estimate)"));
    assert!(
        warned,
        "warned before the pause: {:?}",
        outs.iter().map(|o| &o.stdout).collect::<Vec<_>>()
    );
    let last = outs.last().unwrap();
    assert!(asked(last), "paused with an ask: {}", last.stdout);
    let why = last.json()["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        why.contains("loop budget is spent") && why.contains("$1.00"),
        "{why}"
    );
    let (code, v) = halted(&env);
    assert_eq!(code, 3, "{v:#}");
    assert_eq!(v["halt"]["reason_code"], "budget");
    assert_eq!(v["halt"]["evidence"]["limit"], 1.0);
    assert_eq!(v["halt"]["evidence"]["detectors"], json!(["repeat"]));
    // Still past the budget: the next loop call asks again.
    assert!(asked(&looped(&env)));
    // The person raises the budget from inside the session: the loop goes on (refused by the
    // loop rules as before, no longer paused).
    let out = typed(&env, "budget +5");
    assert!(out.json()["reason"]
        .as_str()
        .unwrap()
        .contains("$5.00 higher"));
    assert_eq!(halted(&env).0, 0);
    let next = looped(&env);
    assert!(next.denied() && !asked(&next), "{}", next.stdout);
    let b = budget_of(&env);
    assert_eq!(b["session_limit_usd"], 6.0, "{b:#}");
}

#[test]
fn unattended_the_turn_ends_at_the_budget_and_continue_starts_it_over() {
    let mut env = env_with(ONE_DOLLAR);
    env.new_prompt("p-1");
    let mut ended = None;
    for _ in 0..10 {
        respond(&env);
        let id = env.id();
        let input = json!({"command": "cat config/settings.yml", "description": "run"});
        let pre = env.pre("Bash", input.clone(), &id);
        assert!(!asked(&pre), "nobody attends: no ask");
        let text = if pre.denied() {
            crate::common::denial_text("Bash", &pre)
        } else {
            env.fail("Bash", input.clone(), &id, FAIL.unwrap_err());
            FAIL.unwrap_err().to_string()
        };
        let batch = env.batch_of("Bash", &input, &id, &text);
        if batch.stdout.contains("loop budget is spent") {
            ended = Some(batch);
            break;
        }
    }
    let ended = ended.expect("the turn ended at the budget");
    assert_eq!(ended.json()["decision"], "block", "{}", ended.stdout);
    assert_eq!(halted(&env).1["halt"]["reason_code"], "budget");
    let out = env.run(&["continue", "--latest", "--json"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(halted(&env).0, 0);
    let b = budget_of(&env);
    assert_eq!(
        b["session_counted_usd"], 0.0,
        "continue starts the bound over: {b:#}"
    );
    assert!(
        b["session_usd"].as_f64().unwrap() >= 1.0,
        "what was spent is kept: {b:#}"
    );
}

#[test]
fn the_same_work_without_a_loop_is_never_paused_or_counted() {
    let mut env = env_with("[budget]\nsession_usd = 0.5\nday_usd = 0.5\n");
    env.new_prompt("p-1");
    for i in 0..20 {
        respond(&env);
        let out = env.bash(
            &format!("cat part{i}.txt"),
            Ok(&format!("part {i} of the data")),
        );
        assert!(out.is_silent_allow(), "call {i}: {}", out.stdout);
    }
    let b = budget_of(&env);
    assert_eq!(
        (b["session_usd"].clone(), b["day_usd"].clone()),
        (json!(0.0), json!(0.0))
    );
    assert!(
        !env.state.join("budget-day.json").exists(),
        "ordinary work writes no ledger"
    );
}

#[test]
fn the_day_is_the_backstop_across_sessions() {
    let cfg = "[budget]\nsession_usd = 100\nday_usd = 1\n";
    let mut a = env_with(cfg).var("CLAUDE_CODE_SESSION_ATTENDED", "1");
    a.new_prompt("p-1");
    for _ in 0..4 {
        looped(&a);
    }
    let spent_a = budget_of(&a)["day_usd"].as_f64().unwrap();
    assert!(spent_a > 0.0 && spent_a < 1.0, "{spent_a}");
    // Another session on the same machine (same state dir), its own transcript.
    let mut b = a;
    b.session = "sess-2".into();
    b.transcript = b.transcript.replace("transcript", "transcript-2");
    b.new_prompt("p-1");
    let mut asked_at = None;
    for i in 0..8 {
        if asked(&looped(&b)) {
            asked_at = Some(i);
            break;
        }
    }
    assert!(
        asked_at.is_some(),
        "the day's bound paused the second session"
    );
    let (_, v) = halted(&b);
    assert_eq!(v["halt"]["evidence"]["scope"], "day", "{v:#}");
}

#[test]
fn a_project_file_may_only_tighten_the_budget() {
    // The project lowers it: in effect.
    let mut env = env_with("[budget]\nsession_usd = 100\nday_usd = 100\n")
        .var("CLAUDE_CODE_SESSION_ATTENDED", "1")
        .project_config("[budget]\nsession_usd = 1\n");
    env.new_prompt("p-1");
    let paused = (0..10).any(|_| asked(&looped(&env)));
    assert!(paused, "the project's lower bound is in effect");
    // The project raises it or switches it off: ignored, and said.
    let mut env = env_with(ONE_DOLLAR)
        .var("CLAUDE_CODE_SESSION_ATTENDED", "1")
        .project_config("[budget]\nsession_usd = 1000\nenabled = false\n[budget.prices]\n\"claude-\" = {input = 0.0, output = 0.0}\n");
    let first = env.new_prompt("p-1");
    assert!(
        first.stdout.contains("budget.session_usd"),
        "{}",
        first.stdout
    );
    let paused = (0..10).any(|_| asked(&looped(&env)));
    assert!(paused, "the user's bound and prices stand");
}

#[test]
fn a_corrupt_or_missing_day_ledger_fails_open() {
    let mut env = env_with(ONE_DOLLAR).var("CLAUDE_CODE_SESSION_ATTENDED", "1");
    std::fs::create_dir_all(&env.state).unwrap();
    std::fs::write(env.state.join("budget-day.json"), "{\"day\": [not json").unwrap();
    env.new_prompt("p-1");
    let mut said = false;
    let mut paused = false;
    for _ in 0..10 {
        respond(&env);
        let out = env.bash("cat config/settings.yml", FAIL);
        assert_eq!(out.code, 0);
        said |= out.stderr.contains("day ledger");
        if asked(&out) {
            paused = true;
            break;
        }
    }
    assert!(said, "the person is told once, in one line");
    assert!(paused, "the session's own bound still holds");
    // A ledger that vanished mid-session: the next loop call starts it again.
    std::fs::remove_file(env.state.join("budget-day.json")).unwrap();
    let out = looped(&env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(env.state.join("budget-day.json").exists());
}

#[cfg(unix)]
#[test]
fn the_person_hears_of_the_warning_and_the_pause_and_every_view_shows_loop_spend() {
    let got = std::env::temp_dir().join(format!("loopgate-budget-notices-{}", std::process::id()));
    let _ = std::fs::remove_file(&got);
    let mut env = env_with(&format!(
        "{ONE_DOLLAR}[notify]\ncommand = [\"sh\", \"-c\", \"cat >> \\\"$0\\\"; echo >> \\\"$0\\\"\", \"{}\"]\n",
        got.display()
    ))
    .var("CLAUDE_CODE_SESSION_ATTENDED", "1");
    env.new_prompt("p-1");
    let paused = (0..10).any(|_| asked(&looped(&env)));
    assert!(paused);
    let text = std::fs::read_to_string(&got).unwrap_or_default();
    let _ = std::fs::remove_file(&got);
    let notices: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let kinds: Vec<(&str, &str)> = notices
        .iter()
        .map(|n| {
            (
                n["kind"].as_str().unwrap(),
                n["reason_code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds, [("budget", "budget"), ("halt", "budget")], "{text}");
    assert_eq!(notices[1]["evidence"]["limit"], 1.0);

    // The status line records Claude Code's own cost (for the budget) and shows loop spend.
    let line = env.run(
        &["statusline"],
        json!({"session_id": env.session, "cost": {"total_cost_usd": 2.5}})
            .to_string()
            .as_bytes(),
    );
    assert!(line.stdout.contains("loops $1.00/$1.00"), "{}", line.stdout);
    let live: Vec<_> = std::fs::read_dir(env.state.join("live")).unwrap().collect();
    assert_eq!(live.len(), 1, "one tiny file for the session");
    // status (text and JSON) and report show it too.
    let status = env.run(&["status"], b"");
    assert!(
        status.stdout.contains("loop budget: $1.00 of $1.00"),
        "{}",
        status.stdout
    );
    assert_eq!(budget_of(&env)["session_limit_usd"], 1.0);
    let report = env.run(&["report", "--json"], b"");
    let r: Value = serde_json::from_str(&report.stdout).unwrap();
    assert!(
        r["budget"]["day_usd"].as_f64().unwrap() >= 1.0,
        "{:#}",
        r["budget"]
    );
    assert_eq!(r["budget"]["sessions"][0]["session"], env.session);
}
