//! Output dialects: the deciding verdict in the shape each CLI obeys, per
//! `../shared/agents/<cli>/hooks-observed.md`. Where a CLI cannot carry something (Gemini and Qwen
//! drop a PreToolUse's context; only Gemini halts a run before a tool, and Qwen at the hook before
//! the next model request) the nearest thing it does
//! obey is used, and never an answer that backfires: no `ask` (Gemini ends the run on it, Codex
//! ignores it), no `allow` (it would skip the person's confirmation), no PostToolUse block (three
//! of them replace the tool's output with it).

use super::Agent;
use crate::protocol::payload::Event;
use crate::protocol::render;
use crate::protocol::verdict::{Action, Verdict};
use serde_json::{json, Value};

/// The answer for `verdict` on `event`; `source` is the event as the CLI named it (the hook
/// subcommand), which is what its `hookEventName` must say.
pub fn answer(agent: Agent, event: Event, source: Event, v: &Verdict) -> Option<String> {
    if agent == Agent::Claude {
        return render::answer(event, v);
    }
    if agent.is_plugin() {
        return plugin(event, v);
    }
    let reason = native_shell(agent, &v.reason);
    let reason = reason.as_str();
    let human = native_shell(agent, &render::human_line(v));
    let stop_like = matches!(event, Event::Stop | Event::SubagentStop);
    let out: Value = match (event, v.action) {
        (_, Action::Warn | Action::Ask) if stop_like => return None,
        (Event::PreToolUse, Action::Halt) if agent == Agent::Gemini => {
            // Gemini ends the run on `continue: false`, before the tool runs (observed).
            json!({"continue": false, "stopReason": reason, "systemMessage": human})
        }
        // Copilot: a halt is carried out by the permission hook that fires next, which only a
        // call preToolUse lets through reaches (`TurnEnd::Permission`).
        (Event::PreToolUse, Action::Halt) if agent == Agent::Copilot => return None,
        (Event::PreToolUse, Action::Deny | Action::Ask | Action::Halt) => {
            deny(agent, reason, &human)
        }
        // The call refused and the run ended at once (observed, Copilot 1.0.102).
        (Event::PermissionRequest, Action::Halt) if agent == Agent::Copilot => {
            json!({"behavior": "deny", "message": reason, "interrupt": true})
        }
        (Event::PermissionRequest, _) => return None,
        (Event::PreToolUse, Action::Warn) => context(agent, source, reason, &human),
        // Codex ends the turn on it, whatever another Stop hook answers (docs/stop-hook-loops.md).
        (Event::Stop, Action::Halt) if agent == Agent::Codex => {
            json!({"continue": false, "stopReason": reason})
        }
        // Gemini too; a block there would be re-fed to the model as a prompt.
        (Event::Stop, Action::Halt) if agent == Agent::Gemini => {
            json!({"continue": false, "stopReason": reason, "systemMessage": human})
        }
        (_, Action::Deny | Action::Halt) if stop_like => {
            json!({"decision": "block", "reason": reason})
        }
        (Event::UserPromptSubmit, Action::Deny | Action::Halt) => {
            json!({"decision": "block", "reason": reason})
        }
        (Event::PostToolUse | Event::PostToolUseFailure, Action::Halt)
            if agent == Agent::Gemini =>
        {
            json!({"continue": false, "stopReason": reason, "systemMessage": human})
        }
        // Qwen's UserPromptSubmit before the next model request, read as the model turn's end:
        // a block there ends the run with no further request (observed); anything else would
        // reach the model as part of a prompt.
        (Event::PostToolBatch, Action::Halt) => json!({"decision": "block", "reason": reason}),
        (Event::PostToolBatch, _) => return None,
        _ => context(agent, source, reason, &human),
    };
    Some(out.to_string())
}

/// The answer loopgate's OpenCode/Kilo plugin carries out (`npm/loopgate/opencode/loopgate.js`):
/// `deny` is thrown from `tool.execute.before` (the model reads the message as the tool's
/// result, observed); `halt` aborts the session, then throws (no model request follows,
/// observed); `context` is appended to the tool's output at `tool.execute.after`, the one text of
/// a call the model reads; `block` at a session's idle is logged by the plugin, which cannot
/// keep `opencode run` going (observed: a prompt sent from `session.idle` gets no model request).
fn plugin(event: Event, v: &Verdict) -> Option<String> {
    let reason = native_shell(Agent::OpenCode, &v.reason);
    let stop_like = matches!(event, Event::Stop | Event::SubagentStop);
    let out = match (event, v.action) {
        (Event::PermissionRequest | Event::PostToolBatch, _) => return None,
        (_, Action::Warn | Action::Ask) if stop_like => return None,
        (Event::PreToolUse, Action::Deny | Action::Ask) => {
            json!({"decision": "deny", "reason": reason})
        }
        (Event::PreToolUse | Event::PostToolUse | Event::PostToolUseFailure, Action::Halt) => {
            let human = native_shell(Agent::OpenCode, &render::human_line(v));
            json!({"decision": "halt", "reason": reason, "message": human})
        }
        (_, Action::Deny | Action::Halt) if stop_like => {
            json!({"decision": "block", "reason": reason})
        }
        (Event::UserPromptSubmit, Action::Deny | Action::Halt) => {
            json!({"decision": "block", "reason": reason})
        }
        _ => json!({"context": reason}),
    };
    Some(out.to_string())
}

/// The shell tool under the name the CLI and its model know it by: detectors name calls as Claude
/// Code does (`Bash \`npm test\``), and a Gemini model told "Bash" looks for a tool it lacks.
fn native_shell(agent: Agent, text: &str) -> String {
    let name = match agent {
        Agent::Gemini | Agent::Qwen => "run_shell_command",
        Agent::Copilot | Agent::OpenCode | Agent::Kilo => "bash",
        Agent::Claude | Agent::Codex => return text.to_string(),
    };
    text.replace("Bash `", &format!("{name} `"))
}

fn deny(agent: Agent, reason: &str, human: &str) -> Value {
    match agent {
        // Gemini ignores Claude's shape and the tool runs (observed); the systemMessage is
        // printed for the person.
        Agent::Gemini => json!({"decision": "deny", "reason": reason, "systemMessage": human}),
        // Copilot's native dialect obeys only the top-level shape.
        Agent::Copilot => json!({"permissionDecision": "deny", "permissionDecisionReason": reason}),
        _ => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }}),
    }
}

/// Guidance for the model with the call going ahead.
fn context(agent: Agent, source: Event, reason: &str, human: &str) -> Value {
    match agent {
        // Top-level only (observed); its `hookSpecificOutput.additionalContext` is ignored.
        Agent::Copilot => json!({"additionalContext": reason}),
        Agent::Gemini => json!({
            "hookSpecificOutput": {"hookEventName": gemini_name(source), "additionalContext": reason},
            "systemMessage": human,
        }),
        _ => json!({"hookSpecificOutput": {
            "hookEventName": source.name(),
            "additionalContext": reason,
        }}),
    }
}

fn gemini_name(e: Event) -> &'static str {
    match e {
        Event::PreToolUse => "BeforeTool",
        Event::PostToolUse | Event::PostToolUseFailure => "AfterTool",
        Event::Stop | Event::SubagentStop => "AfterAgent",
        Event::UserPromptSubmit => "BeforeAgent",
        Event::PostToolBatch => "AfterTool",
        Event::SessionStart => "SessionStart",
        Event::ConfigChange => "ConfigChange",
        Event::FileChanged => "FileChanged",
        Event::UserPromptExpansion => "UserPromptExpansion",
        Event::PermissionRequest => "PermissionRequest",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::verdict::Severity;

    fn v(action: Action) -> Verdict {
        Verdict::new(
            "repeat",
            action,
            Severity::Low,
            "loopgate: seen it. Do else.".into(),
        )
    }

    fn out(agent: Agent, event: Event, action: Action) -> Option<Value> {
        answer(agent, event, event, &v(action)).map(|s| serde_json::from_str(&s).unwrap())
    }

    #[test]
    fn each_cli_gets_the_deny_shape_it_obeys() {
        let pre = Event::PreToolUse;
        assert_eq!(
            out(Agent::Gemini, pre, Action::Deny).unwrap()["decision"],
            "deny"
        );
        assert_eq!(
            out(Agent::Copilot, pre, Action::Deny).unwrap(),
            json!({"permissionDecision": "deny", "permissionDecisionReason": "loopgate: seen it. Do else."})
        );
        for agent in [Agent::Codex, Agent::Qwen] {
            let o = out(agent, pre, Action::Ask).unwrap();
            assert_eq!(o["hookSpecificOutput"]["permissionDecision"], "deny");
        }
        // Only Gemini can halt before the tool; elsewhere a halt is a denial.
        assert_eq!(
            out(Agent::Gemini, pre, Action::Halt).unwrap()["continue"],
            false
        );
        assert_eq!(
            out(Agent::Codex, pre, Action::Halt).unwrap()["hookSpecificOutput"]
                ["permissionDecision"],
            "deny"
        );
    }

    #[test]
    fn qwen_ends_the_turn_at_the_hook_before_the_next_model_request() {
        let halt = answer(
            Agent::Qwen,
            Event::PostToolBatch,
            Event::UserPromptSubmit,
            &v(Action::Halt),
        )
        .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&halt).unwrap(),
            json!({"decision": "block", "reason": "loopgate: seen it. Do else."})
        );
        for action in [Action::Warn, Action::Deny] {
            let a = answer(
                Agent::Qwen,
                Event::PostToolBatch,
                Event::UserPromptSubmit,
                &v(action),
            );
            assert!(a.is_none(), "{action:?}");
        }
    }

    #[test]
    fn the_plugin_is_told_to_throw_abort_or_append() {
        for agent in [Agent::OpenCode, Agent::Kilo] {
            let pre = Event::PreToolUse;
            assert_eq!(
                out(agent, pre, Action::Deny).unwrap(),
                json!({"decision": "deny", "reason": "loopgate: seen it. Do else."})
            );
            assert_eq!(out(agent, pre, Action::Ask).unwrap()["decision"], "deny");
            let halt = out(agent, pre, Action::Halt).unwrap();
            assert_eq!(halt["decision"], "halt");
            assert!(halt["message"].is_string());
            assert_eq!(
                out(agent, Event::PostToolUse, Action::Warn).unwrap(),
                json!({"context": "loopgate: seen it. Do else."})
            );
            assert_eq!(
                out(agent, Event::Stop, Action::Deny).unwrap()["decision"],
                "block"
            );
            assert!(out(agent, Event::Stop, Action::Warn).is_none());
        }
    }

    #[test]
    fn stop_blocks_and_warnings() {
        for agent in [Agent::Codex, Agent::Gemini, Agent::Qwen, Agent::Copilot] {
            assert_eq!(
                out(agent, Event::Stop, Action::Deny).unwrap(),
                json!({"decision": "block", "reason": "loopgate: seen it. Do else."})
            );
            assert!(out(agent, Event::Stop, Action::Warn).is_none());
        }
        assert_eq!(
            out(Agent::Copilot, Event::PostToolUse, Action::Warn).unwrap(),
            json!({"additionalContext": "loopgate: seen it. Do else."})
        );
        assert_eq!(
            out(Agent::Gemini, Event::PostToolUseFailure, Action::Warn).unwrap()
                ["hookSpecificOutput"]["hookEventName"],
            "AfterTool"
        );
    }
}
