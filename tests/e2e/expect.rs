//! Assertions phrased in terms of what the model saw, shared by the scenarios.

use super::run::{Run, ToolResult};
use serde_json::Value;

/// How Claude Code presents a PreToolUse `permissionDecision: deny` to the model (hooks-observed.md
/// §3c): the reason, prefixed, as an error tool_result.
pub fn deny_prefix(tool: &str) -> String {
    format!("PreToolUse:{tool} hook error: ")
}

/// The user text Claude Code adds when a Stop hook blocks with `decision: block`.
pub const STOP_FEEDBACK: &str = "Stop hook feedback:\n";

/// Every reason loopgate writes names it (`loopgate: …`, `LOOP_DETECTED (loopgate): …`), which
/// tells its text apart from other hook output.
pub fn is_loopgate_text(text: &str) -> bool {
    text.contains("loopgate")
}

/// Where the first denial of an unchanged failing repeat may fall (0-based call index). One retry
/// is always legitimate, so the 1st and 2nd calls run; by the 4th identical failure with nothing
/// changed, the loop must be broken (the repeat rule: a deterministic error may be retried once,
/// an unknown one twice).
pub const FIRST_DENIAL: std::ops::RangeInclusive<usize> = 2..=3;

/// Asserts the call was denied by loopgate and returns the reason the model read.
pub fn assert_denied(run: &Run, result: &ToolResult, tool: &str) -> String {
    let prefix = deny_prefix(tool);
    let reason = result.content.strip_prefix(&prefix).unwrap_or_else(|| {
        panic!(
            "{} should have been denied by loopgate, model got {:?}\n{}",
            result.tool_use_id,
            result.content,
            run.summary()
        )
    });
    assert!(
        result.is_error,
        "a denial must reach the model as is_error: true"
    );
    assert!(
        is_loopgate_text(reason),
        "deny reason is not loopgate's: {reason:?}"
    );
    reason.to_string()
}

/// Asserts the call really ran: its result is the tool's own output, not a hook's.
pub fn assert_ran(run: &Run, result: &ToolResult) {
    assert!(
        !result.content.contains("hook error") && !is_loopgate_text(&result.content),
        "{} should have run, model got {:?}\n{}",
        result.tool_use_id,
        result.content,
        run.summary()
    );
}

/// For a run of identical calls: asserts the calls ran up to a first denial inside
/// [`FIRST_DENIAL`] and every later one was denied too. Returns the first denied index.
pub fn assert_loop_broken(run: &Run, results: &[ToolResult], tool: &str) -> usize {
    let first = results
        .iter()
        .position(|r| r.content.starts_with(&deny_prefix(tool)))
        .unwrap_or_else(|| panic!("no call was denied\n{}", run.summary()));
    assert!(
        FIRST_DENIAL.contains(&first),
        "first denial at call #{} (1-based), expected #{}..=#{}\n{}",
        first + 1,
        FIRST_DENIAL.start() + 1,
        FIRST_DENIAL.end() + 1,
        run.summary()
    );
    results[..first].iter().for_each(|r| assert_ran(run, r));
    results[first..].iter().for_each(|r| {
        assert_denied(run, r, tool);
    });
    first
}

/// The Stop blocks loopgate logged, in order.
pub fn stop_blocks(run: &Run) -> Vec<&Value> {
    run.events_where(|e| e["event"] == "Stop" && e["decision"] == "block" && e["enforced"] == true)
}

/// Asserts the first Stop was blocked with loopgate's reason, the agent carried on, and loopgate
/// let it stop within its budget (`progress.max_blocks = 2`), well before Claude Code's own
/// cap of 9 consecutive blocks would have ended the turn. (The feedback is read from requests
/// made after the block, so finding it at all proves the agent carried on.)
pub fn assert_stop_blocked_then_released(run: &Run) {
    let feedback = stop_feedback(run);
    let logged = stop_blocks(run);
    assert!(
        (1..=2).contains(&feedback.len()),
        "expected 1–2 Stop blocks, got {}\n{}",
        feedback.len(),
        run.summary()
    );
    assert_eq!(
        feedback.len(),
        logged.len(),
        "blocks seen vs logged\n{}",
        run.summary()
    );
    assert_eq!(
        Some(feedback[0].as_str()),
        logged[0]["reason"].as_str(),
        "the model must read loopgate's reason verbatim"
    );
    assert!(is_loopgate_text(&feedback[0]));
    let capped = run
        .stream
        .iter()
        .any(|l| l.to_string().contains("consecutive times"));
    assert!(
        !capped,
        "Claude Code's block cap ended the turn, not loopgate"
    );
}

/// Asserts no Stop was blocked and loopgate logged no Stop decision.
pub fn assert_stop_allowed(run: &Run) {
    assert!(
        stop_feedback(run).is_empty() && stop_blocks(run).is_empty(),
        "this turn must be allowed to stop\n{}",
        run.summary()
    );
}

/// The reasons of every Stop block the main agent was sent, in order.
pub fn stop_feedback(run: &Run) -> Vec<String> {
    run.user_texts("main")
        .into_iter()
        .filter_map(|t| t.strip_prefix(STOP_FEEDBACK).map(String::from))
        .collect()
}

/// loopgate's additional context for `event`, as delivered in `role: "system"` messages.
/// Claude Code merges the contexts of one step into a single message, joined by blank lines
/// (even across events: a PreToolUse and a PostToolUseFailure context, plus its own notes), so
/// messages are split into their `<Event>:<Tool> hook additional context: …` parts first.
pub fn loopgate_context(run: &Run, label: &str, event: &str) -> Vec<String> {
    let marker = format!("{event}:");
    run.system_messages(label)
        .iter()
        .flat_map(|m| m.split("\n\n"))
        .filter(|part| part.starts_with(&marker) && is_loopgate_text(part))
        .map(String::from)
        .collect()
}

/// Asserts nothing written by loopgate reached the model in this conversation.
pub fn assert_silent(run: &Run, label: &str) {
    let sent = run.everything_sent(label);
    assert!(
        !is_loopgate_text(&sent) && !sent.contains("hook error") && !sent.contains(STOP_FEEDBACK),
        "loopgate output reached the model:\n{}",
        run.summary()
    );
}

/// The run ended on its own with exit 0 (no timeout, no crash).
/// `detector` ended the unattended run as Claude Code obeys: its PreToolUse refused the call,
/// then the model turn's PostToolBatch blocked (and nothing else of it, warnings aside), and the
/// run stopped there. Returns those two events.
pub fn assert_refused_then_run_ended<'a>(run: &'a Run, detector: &str) -> Vec<&'a Value> {
    assert_eq!(
        run.terminal_reason(),
        Some("hook_stopped"),
        "{}",
        run.summary()
    );
    let events = run.events_where(|e| e["detector"] == detector && e["decision"] != "warn");
    let steps: Vec<(String, String)> = events
        .iter()
        .map(|e| (e["event"].to_string(), e["decision"].to_string()))
        .collect();
    assert_eq!(
        steps,
        [
            ("\"PreToolUse\"".to_string(), "\"deny\"".to_string()),
            ("\"PostToolBatch\"".to_string(), "\"block\"".to_string())
        ],
        "{}",
        run.summary()
    );
    events
}

pub fn assert_clean_exit(run: &Run) {
    assert!(!run.timed_out, "claude timed out\n{}", run.summary());
    assert_eq!(
        run.exit_code(),
        Some(0),
        "claude exit code\n{}",
        run.summary()
    );
    let result = run
        .result()
        .unwrap_or_else(|| panic!("no result event\n{}", run.summary()));
    assert_eq!(result["subtype"], "success", "{result}");
}

/// Asserts every events.jsonl line has the keys the log format promises.
pub fn assert_event_shape(run: &Run) {
    for e in &run.events {
        for k in crate::common::EVENT_KEYS {
            assert!(e.get(k).is_some(), "events.jsonl line without {k}: {e}");
        }
    }
}
