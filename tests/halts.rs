//! Issue 39: every halt is one record a script reads (`loopgate halted`'s exit status, `status
//! --json`), the person continues a halted session from inside it without losing what loopgate
//! knows, and the person's own receiver hears of a halt or a switch-off at once, within a bound.

use crate::common::{fixture, Env, Out};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

const FAIL: Result<&str, &str> =
    Err("Exit code 1\ncat: config/settings.yml: No such file or directory");

/// Walks the agent into the ceiling: the turn ends on the 10th refusal walked into. Returns the
/// answer to the call that ended it.
fn loop_to_the_ceiling(env: &mut Env) -> Out {
    env.new_prompt("p-1");
    for _ in 0..2 {
        assert!(!env.bash("cat config/settings.yml", FAIL).denied());
    }
    let mut last = None;
    for _ in 0..10 {
        last = Some(env.bash("cat config/settings.yml", FAIL));
    }
    last.unwrap()
}

/// The person's `/loopgate <args>`, as Claude Code sends it.
fn typed(env: &Env, args: &str) -> Out {
    let mut p = fixture("sanction/person-typed-UserPromptExpansion.json");
    p["session_id"] = json!("sess-1");
    p["cwd"] = json!(env.project);
    p["command_args"] = json!(args);
    p["prompt"] = json!(format!("/loopgate {args}"));
    env.hook("prompt-expansion", &p)
}

fn halted(env: &Env) -> (i32, Value) {
    let out = env.run(&["halted", "--json"], b"");
    let v = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    (out.code, v)
}

#[test]
fn a_halt_is_one_record_a_script_reads_and_the_person_continues_it_keeping_what_loopgate_knows() {
    let mut env = Env::new();
    // Ordinary work is never a halt.
    env.new_prompt("p-0");
    assert!(!env.bash("ls", Ok("README.md")).denied());
    assert_eq!(halted(&env).0, 0, "no halt yet");
    let text = env.run(&["halted"], b"");
    assert_eq!(
        (text.code, text.stdout.trim()),
        (0, "not halted: session sess-1")
    );

    let ended = loop_to_the_ceiling(&mut env);
    assert!(ended.denied(), "{}", ended.stdout);
    let (code, v) = halted(&env);
    assert_eq!(code, 3, "a halted session exits 3: {v:#}");
    assert_eq!(v["halted"], true);
    assert_eq!(v["halt"]["reason_code"], "turn_ceiling", "{v:#}");
    assert_eq!(v["halt"]["evidence"]["refusals_in_turn"], 10, "{v:#}");
    assert!(v["halt"]["resume"]
        .as_str()
        .unwrap()
        .contains("/loopgate continue"));
    // One line for a person or a log, same exit status.
    let text = env.run(&["halted", "--session", "sess-1"], b"");
    assert_eq!(text.code, 3);
    assert!(
        text.stdout.starts_with("halted: turn_ceiling at "),
        "{}",
        text.stdout
    );
    // status --json carries the same record; the event log marks the decision that halted.
    let s = &env.status()[0];
    assert_eq!(
        (s["halted"].clone(), s["halts"].clone()),
        (json!(true), json!(1))
    );
    assert_eq!(s["last_halt"]["reason_code"], "turn_ceiling");
    assert!(
        env.events()
            .iter()
            .any(|e| e["evidence"]["halt"] == "turn_ceiling"),
        "the halting decision is marked in events.jsonl"
    );
    // Further refusals of the ended turn are the same halt, not new ones.
    env.bash("cat config/settings.yml", FAIL);
    assert_eq!(env.status()[0]["halts"], 1);

    let calls_before = env.status()[0]["totals"]["calls"].clone();
    let out = typed(&env, "continue");
    assert_eq!(out.json()["decision"], "block", "never reaches the model");
    let said = out.json()["reason"].as_str().unwrap().to_string();
    assert!(
        said.contains("continues after its halt (turn_ceiling)"),
        "{said}"
    );
    let (code, v) = halted(&env);
    assert_eq!((code, v["halted"].clone()), (0, json!(false)), "{v:#}");
    assert!(
        v["halt"]["continued_at"].is_string(),
        "the record stays, marked continued"
    );
    let s = &env.status()[0];
    assert_eq!(
        s["totals"]["calls"], calls_before,
        "unlike reset, the counters are kept"
    );
    assert_eq!(s["ceiling"]["ended_turns"], 0, "what stopped it is lifted");
    assert!(
        s["agents"]["main"]["ledger_entries"].as_u64().unwrap() > 0,
        "the ledger is kept"
    );
    // Typed again: nothing stands.
    let again = typed(&env, "continue");
    assert!(again.json()["reason"]
        .as_str()
        .unwrap()
        .contains("not halted"));
}

#[test]
fn continue_from_outside_for_the_other_clis_and_the_agent_cannot_run_it() {
    let mut env = Env::new();
    loop_to_the_ceiling(&mut env);
    env.new_prompt("p-2");
    // The agent's own `loopgate continue` is refused by the guard.
    let out = env.bash("loopgate continue --latest", Ok(""));
    assert!(out.denied(), "{}", out.stdout);
    assert_eq!(halted(&env).0, 3);
    let out = env.run(&["continue", "--session", "sess-1", "--json"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (v["continued"].clone(), v["reason_code"].clone()),
        (json!(true), json!("turn_ceiling"))
    );
    assert_eq!(halted(&env).0, 0);
    // No such session: an error a script tells apart from a halt.
    assert_eq!(env.run(&["halted", "--session", "nope"], b"").code, 1);
}

/// A receiver on 127.0.0.1 that records each request's body; `answer` false: it accepts and
/// never answers (a receiver that hangs).
pub(crate) fn receiver(answer: bool) -> (String, std::sync::mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { break };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // Head, then the body by its length.
            while let Ok(n) = s.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(i) = text.find("\r\n\r\n") {
                    let len: usize = text
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() >= i + 4 + len {
                        let _ = tx.send(text[i + 4..].to_string());
                        break;
                    }
                }
            }
            if answer {
                let _ = s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
            } else {
                std::thread::sleep(Duration::from_secs(30));
            }
        }
    });
    (url, rx)
}

fn notices(env: &Env) -> Vec<Value> {
    env.events()
        .into_iter()
        .filter(|e| e["detector"] == "notify")
        .collect()
}

#[test]
fn a_halt_reaches_the_persons_webhook_and_an_ordinary_call_sends_nothing() {
    let (url, got) = receiver(true);
    let mut env = Env::new().config(&format!("[notify]\nwebhook = \"{url}\"\n"));
    env.new_prompt("p-0");
    env.bash("ls", Ok("README.md"));
    assert!(
        got.recv_timeout(Duration::from_millis(300)).is_err(),
        "ordinary work sends nothing"
    );
    assert!(notices(&env).is_empty());

    loop_to_the_ceiling(&mut env);
    let body: Value =
        serde_json::from_str(&got.recv_timeout(Duration::from_secs(5)).unwrap()).unwrap();
    assert_eq!(body["kind"], "halt");
    assert_eq!(body["reason_code"], "turn_ceiling");
    assert_eq!(body["session"], "sess-1");
    assert_eq!(body["cli"], "claude");
    assert_eq!(body["project"], json!(env.project));
    assert_eq!(body["evidence"]["refusals_in_turn"], 10);
    assert!(body["resume"]
        .as_str()
        .unwrap()
        .contains("/loopgate continue"));
    let sent = notices(&env);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0]["decision"], "notice_sent");
    // The rest of the ended turn is the same halt: no second notice.
    env.bash("cat config/settings.yml", FAIL);
    assert!(got.recv_timeout(Duration::from_millis(300)).is_err());
}

#[test]
fn a_receiver_that_hangs_or_is_down_costs_the_call_no_more_than_the_bound() {
    for hangs in [true, false] {
        let url = if hangs {
            receiver(false).0
        } else {
            // A port nobody listens on.
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/hook", l.local_addr().unwrap());
            drop(l);
            url
        };
        let mut env = Env::new().config(&format!(
            "[notify]\nwebhook = \"{url}\"\ntimeout_ms = 400\n"
        ));
        env.new_prompt("p-1");
        for _ in 0..11 {
            env.bash("cat config/settings.yml", FAIL);
        }
        let start = Instant::now();
        let out = env.bash("cat config/settings.yml", FAIL);
        let took = start.elapsed();
        assert!(
            out.denied(),
            "the halt is answered all the same: {}",
            out.stdout
        );
        assert!(took < Duration::from_millis(1500), "the call took {took:?}");
        assert!(
            out.stderr.contains("the notice to the webhook failed"),
            "{}",
            out.stderr
        );
        let failed = notices(&env);
        assert_eq!(failed.len(), 1, "{failed:#?}");
        assert_eq!(failed[0]["decision"], "notice_failed");
        assert!(failed[0]["evidence"]["ms"].as_u64().unwrap() < 1000);
    }
}

#[cfg(unix)]
#[test]
fn a_switch_off_reaches_the_persons_command_with_secrets_masked() {
    let env = Env::new();
    let got = env.state.parent().unwrap().join("notice.json");
    let env = env.config(&format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat > \\\"$0\\\"\", \"{}\"]\n",
        got.display()
    ));
    let home = env.state.parent().unwrap().to_path_buf();
    let user = home.join(".claude/settings.json");
    assert_eq!(
        env.run(&["setup", "--settings", user.to_str().unwrap()], b"")
            .code,
        0
    );
    std::fs::write(
        &user,
        json!({"env": {"LOOPGATE_MODE": "observe", "GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}).to_string(),
    )
    .unwrap();
    let p = env.base(
        "ConfigChange",
        json!({"source": "user_settings", "file_path": user}),
    );
    let out = env.hook("config-change", &p);
    assert_eq!(out.json()["decision"], "block");
    let body: Value = serde_json::from_str(&std::fs::read_to_string(&got).unwrap()).unwrap();
    assert_eq!(body["kind"], "switched_off", "{body:#}");
    assert_eq!(body["reason_code"], "config_change");
    assert!(
        body["reason"].as_str().unwrap().contains("hooks are gone"),
        "{body:#}"
    );
    assert!(!body.to_string().contains("ghp_abcdefghij"), "{body:#}");
    assert_eq!(notices(&env)[0]["decision"], "notice_sent");
}

/// A project file the agent can write cannot name a receiver (it would send the person's
/// notices elsewhere).
#[test]
fn a_project_file_cannot_name_a_receiver() {
    let (url, got) = receiver(true);
    let mut env = Env::new().project_config(&format!("[notify]\nwebhook = \"{url}\"\n"));
    loop_to_the_ceiling(&mut env);
    assert!(got.recv_timeout(Duration::from_millis(500)).is_err());
}

/// Point 4: another Stop hook that always blocks (Claude Code says so with `stop_hook_active`)
/// keeps the model answering; after 5 such blocks with nothing done between, loopgate ends the
/// turn with `continue: false`, which wins over the other hook's block.
#[test]
fn another_hooks_endless_stop_blocks_are_ended_and_work_between_restarts_the_count() {
    let mut env = Env::new();
    env.new_prompt("p-1");
    env.bash("ls", Ok("README.md"));
    assert!(
        env.stop(false).is_silent_allow(),
        "the turn's end is loopgate's to let go"
    );
    for n in 1..5 {
        assert!(
            env.stop(true).is_silent_allow(),
            "block {n} by the other hook"
        );
    }
    let out = env.stop(true);
    let v = out.json();
    assert_eq!(v["continue"], false, "{v}");
    let why = v["stopReason"].as_str().unwrap();
    assert!(
        why.contains("another hook blocked the end of this turn 5 times"),
        "{why}"
    );
    assert!(v.get("decision").is_none(), "never a block of its own: {v}");
    let (code, h) = halted(&env);
    assert_eq!(
        (code, h["halt"]["reason_code"].clone()),
        (3, json!("stop_hook_loop"))
    );

    // The other way: a call between each blocked Stop is work, however many there are.
    env.new_prompt("p-2");
    assert!(env.stop(false).is_silent_allow());
    for n in 0..12 {
        env.bash(&format!("echo step {n}"), Ok(&format!("step {n}")));
        assert!(env.stop(true).is_silent_allow(), "stop {n} after work");
    }
    // And a Stop the CLI says follows no block starts over.
    for _ in 0..3 {
        assert!(env.stop(true).is_silent_allow());
    }
    assert!(env.stop(false).is_silent_allow());
    for _ in 0..4 {
        assert!(env.stop(true).is_silent_allow());
    }
    assert_eq!(env.status()[0]["halts"], 1, "only the first turn was ended");
}

/// loopgate's own Stop gate bounds itself: its blocks are never taken for another hook's, even
/// at its largest budget.
#[test]
fn loopgates_own_stop_gate_is_never_ended_as_another_hooks_loop() {
    let mut env = Env::new().git().config("[progress]\nmax_blocks = 8\n");
    env.new_prompt("p-edit");
    env.rejected_edit("README.md", "text that is not there");
    env.rejected_edit("README.md", "text that is not there either");
    assert!(env.stop(false).stop_blocked());
    for n in 1..8 {
        let out = env.stop(true);
        assert!(out.stop_blocked(), "own block {}: {}", n + 1, out.stdout);
    }
    // Its budget spent, the turn ends unfinished: that is the Stop gate's halt, said to
    // nobody in the session (a word at Stop would make the model go on).
    assert!(env.stop(true).is_silent_allow());
    let (code, h) = halted(&env);
    assert_eq!(
        (code, h["halt"]["reason_code"].clone()),
        (3, json!("stop_gate")),
        "{h:#}"
    );
    assert_eq!(h["halt"]["evidence"]["stop_blocks"], 8);
}

/// Gemini CLI re-feeds a blocked AfterAgent's reason as a new prompt (BeforeAgent), so each
/// blocked Stop arrives in a turn of its own; the CLI's `stop_hook_active` still says it follows
/// a block. loopgate ends it with `continue: false` (a `block` would be re-fed as one more
/// prompt), and a real prompt between starts the count over.
#[test]
fn geminis_endless_after_agent_blocks_are_ended_across_its_re_fed_prompts() {
    let env = Env::new();
    let prompt = |text: &str| {
        env.run(
            &["--agent", "gemini", "user-prompt-submit"],
            json!({"session_id": "g1", "hook_event_name": "BeforeAgent", "prompt": text,
                   "cwd": env.project})
            .to_string()
            .as_bytes(),
        )
    };
    let after_agent = |active: bool| {
        env.run(
            &["--agent", "gemini", "stop"],
            json!({"session_id": "g1", "hook_event_name": "AfterAgent", "prompt": "Say done.",
                   "prompt_response": "Done.", "stop_hook_active": active, "cwd": env.project})
            .to_string()
            .as_bytes(),
        )
    };
    prompt("Say done.");
    assert_eq!(after_agent(false).stdout.trim(), "");
    for n in 1..5 {
        prompt("OTHER-HOOK: keep going");
        assert_eq!(after_agent(true).stdout.trim(), "", "block {n}");
    }
    prompt("OTHER-HOOK: keep going");
    let v: Value = serde_json::from_str(after_agent(true).stdout.trim()).unwrap();
    assert_eq!(v["continue"], false, "{v}");
    assert!(v.get("decision").is_none(), "a block would be re-fed: {v}");

    // Fewer than 5 blocks, then a Stop the CLI says follows no block: the count starts over.
    for round in 0..2 {
        prompt("The next task.");
        assert_eq!(after_agent(false).stdout.trim(), "");
        for n in 1..5 {
            prompt("OTHER-HOOK: keep going");
            assert_eq!(
                after_agent(true).stdout.trim(),
                "",
                "round {round}, block {n}"
            );
        }
    }
}
