//! Issue 3 and 9: the last rungs, end to end. Stage 3 of the ladder in an unattended run (two
//! looping calls denied, then the run ended by the turn's PostToolBatch), and the circuit breaker
//! opened by three looping turns of one session, refusing the next prompt.

use super::expect::*;
use super::fake_api::{bash, Script, Turn};
use super::harness::{Install, Scenario};
use super::run::Run;
use serde_json::Value;

/// Commands that fail the same way every time and change nothing.
const FAILING: &str = "cat config/settings.yml";
const NO_SUCH_FILE: &str = "Exit code 1\ncat: config/settings.yml: No such file or directory";
const FAILING_TOO: &str = "cat config/settings.yaml";
const NO_SUCH_FILE_TOO: &str = "Exit code 1\ncat: config/settings.yaml: No such file or directory";

/// What the repeat rule tells the model once a deterministic error has been seen twice.
const LOOP_DETECTED: &str = "LOOP_DETECTED (loopgate): Bash `cat config/settings.yml` has failed 2 times with the same answer (deterministic error";
const LOOP_DETECTED_TOO: &str = "LOOP_DETECTED (loopgate): Bash `cat config/settings.yaml` has failed 2 times with the same answer (deterministic error";

const ESCALATED: &str =
    "loopgate: 3 interventions in this turn, on 2 different calls, have not broken the loop, so it goes to the user now.";

const BREAKER_OPEN: &str = "loopgate: the circuit breaker is OPEN";

/// The `informational` events of the stream: where `-p` puts the hooks' `systemMessage`s, the
/// only channel to the human running it.
fn informational(run: &Run) -> Vec<String> {
    run.stream
        .iter()
        .filter(|l| l["type"] == "system" && l["subtype"] == "informational")
        .filter_map(|l| l["content"].as_str().map(String::from))
        .collect()
}

/// The session id every line of the stream carries; all of them must agree.
fn session_id(run: &Run) -> String {
    let ids: Vec<&str> = run
        .stream
        .iter()
        .filter_map(|l| l["session_id"].as_str())
        .collect();
    assert!(!ids.is_empty(), "no session id\n{}", run.summary());
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one session, one id: {ids:?}"
    );
    ids[0].to_string()
}

#[test]
fn e2e_stage_three_escalation_ends_the_unattended_run() {
    let Some(mut s) = Scenario::new("escalation") else {
        return;
    };
    s.install(Install::Script);
    let prompt = "Read the settings file.";
    // Two loops in one turn: stage 3 acts beyond one call, so it needs two repeated calls.
    let (a, b) = (Turn::call(bash(FAILING)), Turn::call(bash(FAILING_TOO)));
    let mut turns = vec![
        a.clone(),
        a.clone(),
        a.clone(),
        b.clone(),
        b.clone(),
        b.clone(),
    ];
    // Issue 27: only refusals walked into count; the agent asks the refused calls again.
    turns.extend([a.clone(), b.clone(), a.clone(), b.clone(), a, b]);
    turns.push(Turn::text("I could not read the config."));
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    assert_clean_exit(&run);

    // Calls 1–2 and 4–5 ran and failed; 3 and 6 were denied, then 7, 8 and 9 asked them again
    // regardless (the three refusals walked into, on two different calls); the 10th escalated.
    for (t, text) in [
        (0, NO_SUCH_FILE),
        (1, NO_SUCH_FILE),
        (3, NO_SUCH_FILE_TOO),
        (4, NO_SUCH_FILE_TOO),
    ] {
        let r = run.tool_result(&format!("toolu_e2e_{t}_0"));
        assert!(r.is_error && r.content == text, "call {}: {r:?}", t + 1);
    }
    for (t, want) in [
        (2, LOOP_DETECTED),
        (5, LOOP_DETECTED_TOO),
        (6, LOOP_DETECTED),
        (7, LOOP_DETECTED_TOO),
        (8, LOOP_DETECTED),
    ] {
        let reason = assert_denied(&run, &run.tool_result(&format!("toolu_e2e_{t}_0")), "Bash");
        assert!(reason.starts_with(want), "call {}: {reason}", t + 1);
    }
    let tenth = run.tool_result("toolu_e2e_9_0");
    let escalated = assert_denied(&run, &tenth, "Bash");
    assert!(escalated.starts_with(ESCALATED), "{escalated}");
    assert!(
        escalated.contains(LOOP_DETECTED_TOO.trim_start_matches("LOOP_DETECTED (loopgate): ")),
        "the escalation quotes the latest intervention: {escalated}"
    );

    // The model was sent the denials, and nothing after the 10th call: the run ended in
    // that turn's PostToolBatch, before another request.
    assert!(
        run.requests
            .iter()
            .all(|r| r.conversation.as_deref() == Some("main") && r.turn <= 9),
        "no request after the 10th call\n{}",
        run.summary()
    );
    let sent = run.tool_results("main");
    let ids: Vec<&str> = sent.iter().map(|r| r.tool_use_id.as_str()).collect();
    assert_eq!(
        ids,
        (0..9)
            .map(|t| format!("toolu_e2e_{t}_0"))
            .collect::<Vec<_>>(),
        "{}",
        run.summary()
    );
    assert!(sent.iter().all(|r| r.is_error));
    assert!(
        !run.everything_sent("main").contains(ESCALATED),
        "the escalation must not reach the model: it goes to the user"
    );

    // The run stopped cleanly: a hook stop, exit 0, no answer text, the Stop hook never ran.
    let result = run.result().unwrap();
    assert_eq!(run.terminal_reason(), Some("hook_stopped"), "{result}");
    assert_eq!(result["result"], "", "{result}");
    assert_eq!(result["is_error"], false, "{result}");
    let denied: Vec<&str> = result["permission_denials"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["tool_use_id"].as_str())
        .collect();
    assert_eq!(
        denied,
        [
            "toolu_e2e_2_0",
            "toolu_e2e_5_0",
            "toolu_e2e_6_0",
            "toolu_e2e_7_0",
            "toolu_e2e_8_0",
            "toolu_e2e_9_0"
        ],
        "{result}"
    );

    // What the human is shown: the batch's systemMessage, as the stream's informational event,
    // and, in the transcript (what `--resume` shows), the full reason the run stopped with.
    let info = informational(&run);
    let expected =
        "PostToolBatch says: loopgate [ladder · critical]: ".to_string() + &ESCALATED[10..];
    // The escalating denial itself is critical, so the human also heard of it at PreToolUse.
    assert!(info.contains(&expected), "{info:?}\n{}", run.summary());
    let stopped: Vec<&Value> = run
        .transcript
        .iter()
        .filter(|l| l["attachment"]["type"] == "hook_stopped_continuation")
        .collect();
    assert_eq!(stopped.len(), 1, "{}", run.summary());
    assert_eq!(stopped[0]["attachment"]["hookName"], "PostToolBatch");
    assert_eq!(
        stopped[0]["attachment"]["message"].as_str(),
        Some(escalated.as_str())
    );

    // events.jsonl: the escalation is a deny at PreToolUse, then a block at PostToolBatch, with
    // the same reason, enforced, for the main agent; and nothing was logged after it.
    let esc = run.events_where(|e| e["detector"] == "ladder");
    let steps: Vec<(&str, &str)> = esc
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or(""),
                e["decision"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [("PreToolUse", "deny"), ("PostToolBatch", "block")],
        "{}",
        run.summary()
    );
    for e in &esc {
        assert_eq!(e["enforced"], true, "{e}");
        assert_eq!(e["agent"], "main", "{e}");
        assert_eq!(e["severity"], "critical", "{e}");
        assert_eq!(e["reason"].as_str(), Some(escalated.as_str()), "{e}");
    }
    assert_eq!(esc[0]["evidence"]["stage"], 3, "{}", esc[0]);
    assert_eq!(esc[0]["evidence"]["attended"], false, "{}", esc[0]);
    assert_eq!(esc[0]["evidence"]["escalated_from"], "repeat", "{}", esc[0]);
    assert_eq!(
        run.events.last().map(|e| &e["detector"]),
        Some(&Value::from("ladder")),
        "{}",
        run.summary()
    );
    assert_event_shape(&run);

    let status = s.status_json();
    assert_eq!(status["totals"]["escalations"], 1, "{status:#}");
}

/// One looping turn: the failing command three times (the third is denied), then an answer.
fn looping_turn() -> Vec<Turn> {
    // Two failures, the denial, and the refused call asked again regardless (issue 27: a turn is
    // stuck when the agent walks into a refusal, not when it heeds one).
    let mut turns = vec![Turn::call(bash(FAILING)); 4];
    turns.push(Turn::text("I could not read the config."));
    turns
}

/// Four prompts in one session: `claude -p --input-format stream-json`, each prompt a user message
/// on stdin. In 2.1.330 every message is a turn of its own (UserPromptSubmit with a new
/// `prompt_id`, its own `result` event) under one `session_id`, which is what loopgate keys on.
/// Default configuration: with one denial per turn the ladder never escalates, and the Stop gate's
/// two blocks per turn are answered by the script's fallback text. Three looping turns open the
/// circuit; the fourth prompt, the third fed again as an outer loop with nobody there would, is
/// refused before any model request (issue 9 item 9). A new, different instruction after the
/// same three turns goes ahead (issue 36): `sessions::e2e_a_new_instruction_after_three_failed_turns_reaches_the_model`.
#[test]
fn e2e_three_looping_turns_open_the_circuit_and_the_next_prompt_is_refused() {
    let Some(mut s) = Scenario::new("breaker-open") else {
        return;
    };
    s.install(Install::Script);
    let prompts = [
        "Turn one: read the settings file.",
        "Turn two: read the settings file again.",
        "Turn three: one more try at the settings file.",
        "Turn three: one more try at the settings file.",
    ];
    let script = Script::default()
        .prompt("t1", prompts[0], looping_turn())
        .prompt("t2", prompts[1], looping_turn())
        .prompt("t3", prompts[2], looping_turn());
    let run = s.run_prompts(&prompts, script);
    assert_clean_exit(&run);
    let session = session_id(&run);

    // Turns 1–3 each looped: two failures, then loopgate's denial.
    for t in ["t1", "t2", "t3"] {
        for n in 0..2 {
            let r = run.tool_result(&format!("toolu_e2e_{t}_{n}_0"));
            assert!(r.is_error && r.content == NO_SUCH_FILE, "{t}: {r:?}");
        }
        let reason = assert_denied(
            &run,
            &run.tool_result(&format!("toolu_e2e_{t}_2_0")),
            "Bash",
        );
        assert!(reason.starts_with(LOOP_DETECTED), "{t}: {reason}");
    }

    // Turn 4 never reached the model: the prompt was refused, and the human was told the way out.
    assert!(
        run.requests_of("t3").iter().all(|r| r.again == 0),
        "no model request for the refused prompt\n{}",
        run.summary()
    );
    let info = informational(&run);
    let refused = info
        .iter()
        .find(|m| m.starts_with("UserPromptSubmit operation blocked by hook:"))
        .unwrap_or_else(|| panic!("{info:?}\n{}", run.summary()));
    assert!(refused.contains(BREAKER_OPEN), "{refused}");
    assert!(
        refused.contains(&format!("`loopgate reset --session {session}`")),
        "{refused}"
    );

    let status = s.status_json();
    let breaker = &status["breaker"];
    assert_eq!(breaker["state"], "OPEN", "{status:#}");
    assert_eq!(breaker["no_progress_turns"], 3, "{status:#}");
    let moves: Vec<(&str, &str)> = breaker["history"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["from"].as_str().unwrap_or(""),
                t["to"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        moves,
        [("CLOSED", "HALF_OPEN"), ("HALF_OPEN", "OPEN")],
        "{status:#}"
    );

    let refusals = run.events_where(|e| e["detector"] == "breaker");
    assert_eq!(refusals.len(), 1, "{}", run.summary());
    let refusal = refusals[0];
    assert_eq!(refusal["event"], "UserPromptSubmit", "{refusal}");
    assert_eq!(refusal["decision"], "block", "{refusal}");
    assert_eq!(refusal["enforced"], true, "{refusal}");
    assert_event_shape(&run);

    // Each turn is judged when its Stop lets it end (or at the next prompt): the third looping
    // turn opens the circuit, and the fourth prompt is the one refused.
    let turns = events_by_prompt(&run);
    assert_eq!(turns.len(), 4, "one prompt id per turn\n{}", run.summary());
    assert_eq!(refusal["prompt_id"], turns[3].0, "{refusal}");
}

/// The main agent's events grouped by prompt id, in order: (prompt id, timestamps in ms).
fn events_by_prompt(run: &Run) -> Vec<(Value, Vec<u64>)> {
    let mut turns: Vec<(Value, Vec<u64>)> = Vec::new();
    for e in run.events_where(|e| e["agent"] == "main") {
        let ts = e["ts"]
            .as_str()
            .and_then(|t| humantime::parse_rfc3339(t).ok());
        let ms = ts
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .unwrap_or_else(|| panic!("bad ts in {e}"));
        match turns.last_mut() {
            Some((id, times)) if *id == e["prompt_id"] => times.push(ms),
            _ => turns.push((e["prompt_id"].clone(), vec![ms])),
        }
    }
    turns
}
