//! Turns the deciding verdict into the exact JSON Claude Code 2.1.330 acts on (hooks-observed.md):
//! denials as `permissionDecision`, warnings as `additionalContext` with a `systemMessage` for the
//! human, Stop blocks as `decision: block`. Nothing to say is an empty stdout.

use crate::protocol::payload::Event;
use crate::protocol::verdict::{Action, Severity, Verdict};
use serde_json::{json, Value};

/// The one grey line the person sees: detector, severity, the reason's first sentence.
pub fn human_line(v: &Verdict) -> String {
    format!(
        "loopgate [{} · {}]: {}",
        v.detector,
        v.severity.name(),
        headline(&v.reason)
    )
}

pub fn answer(event: Event, v: &Verdict) -> Option<String> {
    let human = human_line(v);
    let out: Value = match (event, v.action) {
        // A critical denial (an OPEN breaker, an escalation) is news for the human too.
        (Event::PreToolUse, Action::Deny) if v.severity == Severity::Critical => json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": v.reason,
            },
            "systemMessage": human,
        }),
        (Event::PreToolUse, Action::Deny) => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": v.reason,
        }}),
        (Event::PreToolUse, Action::Ask) => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": v.reason,
        }}),
        // `continue: false` lets this one tool run, then ends the run (observed); the reason goes
        // to the human, and to the model as context in case the run is resumed.
        (Event::PreToolUse, Action::Halt) => json!({
            "continue": false,
            "stopReason": v.reason,
            "systemMessage": human,
        }),
        // Ends the turn whatever another Stop hook answers (issue 39: another hook's endless
        // blocks); see docs/stop-hook-loops.md for what was observed.
        (Event::Stop, Action::Halt) => json!({
            "continue": false,
            "stopReason": v.reason,
            "systemMessage": human,
        }),
        (Event::Stop | Event::SubagentStop, Action::Deny | Action::Halt) => {
            json!({"decision": "block", "reason": v.reason})
        }
        // No model request at all: an outer loop's next iteration costs nothing (observed).
        (Event::UserPromptSubmit, Action::Deny | Action::Halt) => {
            json!({"decision": "block", "reason": v.reason, "systemMessage": human})
        }
        // A prompt the person typed goes ahead; only they are told where the session stands.
        (Event::UserPromptSubmit, Action::Warn)
            if v.evidence.get("attended") == Some(&Value::Bool(true)) =>
        {
            json!({"systemMessage": v.reason})
        }
        // A batch block ends the run at once: the hard stop for unattended runs.
        (Event::PostToolBatch, Action::Deny | Action::Halt) => {
            json!({"decision": "block", "reason": v.reason, "systemMessage": human})
        }
        (
            Event::PreToolUse
            | Event::PostToolUse
            | Event::PostToolUseFailure
            | Event::PostToolBatch
            | Event::UserPromptSubmit,
            _,
        ) => json!({
            "hookSpecificOutput": {"hookEventName": event.name(), "additionalContext": v.reason},
            "systemMessage": human,
        }),
        // A warning on Stop would make Claude continue (observed): say nothing instead.
        (Event::Stop | Event::SubagentStop, Action::Warn | Action::Ask) => return None,
        // Nothing judges a session's start; its stdout would reach the model (observed).
        (Event::SessionStart, _) => return None,
        // Answered by `hook::config_change` itself.
        (Event::ConfigChange | Event::FileChanged | Event::UserPromptExpansion, _) => return None,
        // Only Copilot CLI's permission hook is wired (`dialect::output`).
        (Event::PermissionRequest, _) => return None,
    };
    Some(out.to_string())
}

/// The first sentence, without our own prefix: enough for the human's one grey line.
fn headline(reason: &str) -> &str {
    let r = reason.strip_prefix("loopgate: ").unwrap_or(reason);
    match r.find(". ") {
        Some(i) => &r[..=i],
        None => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(action: Action) -> Verdict {
        Verdict::new(
            "repeat",
            action,
            Severity::Low,
            "loopgate: seen it. Do else.".into(),
        )
    }

    #[test]
    fn deny_is_exactly_the_documented_shape() {
        let out: Value =
            serde_json::from_str(&answer(Event::PreToolUse, &v(Action::Deny)).unwrap()).unwrap();
        assert_eq!(
            out,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                   "permissionDecisionReason": "loopgate: seen it. Do else."}})
        );
    }

    #[test]
    fn stop_block_and_post_warning() {
        let out: Value =
            serde_json::from_str(&answer(Event::Stop, &v(Action::Deny)).unwrap()).unwrap();
        assert_eq!(
            out,
            json!({"decision": "block", "reason": "loopgate: seen it. Do else."})
        );
        let out: Value =
            serde_json::from_str(&answer(Event::PostToolUseFailure, &v(Action::Warn)).unwrap())
                .unwrap();
        assert_eq!(
            out["hookSpecificOutput"]["hookEventName"],
            "PostToolUseFailure"
        );
        assert_eq!(
            out["hookSpecificOutput"]["additionalContext"],
            "loopgate: seen it. Do else."
        );
        assert_eq!(out["systemMessage"], "loopgate [repeat · low]: seen it.");
        assert!(answer(Event::Stop, &v(Action::Warn)).is_none());
    }
}
