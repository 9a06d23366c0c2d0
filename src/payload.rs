//! The hook input: one JSON object on stdin, parsed tolerantly (unknown fields ignored) but with the
//! fields each event needs checked, so a malformed call fails open with a clear line.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;

/// Hook events loopgate understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    PreToolUse,
    PostToolUse,
    PostToolUseFailure,
    PostToolBatch,
    Stop,
    SubagentStop,
    UserPromptSubmit,
}

impl Event {
    pub fn parse(name: &str) -> Option<Event> {
        Some(match name {
            "PreToolUse" => Event::PreToolUse,
            "PostToolUse" => Event::PostToolUse,
            "PostToolUseFailure" => Event::PostToolUseFailure,
            "PostToolBatch" => Event::PostToolBatch,
            "Stop" => Event::Stop,
            "SubagentStop" => Event::SubagentStop,
            "UserPromptSubmit" => Event::UserPromptSubmit,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Event::PreToolUse => "PreToolUse",
            Event::PostToolUse => "PostToolUse",
            Event::PostToolUseFailure => "PostToolUseFailure",
            Event::PostToolBatch => "PostToolBatch",
            Event::Stop => "Stop",
            Event::SubagentStop => "SubagentStop",
            Event::UserPromptSubmit => "UserPromptSubmit",
        }
    }

    fn is_tool_event(self) -> bool {
        matches!(
            self,
            Event::PreToolUse | Event::PostToolUse | Event::PostToolUseFailure
        )
    }
}

/// One entry of a PostToolBatch: `tool_response` is the text the model saw.
#[derive(Debug, Clone, Deserialize)]
pub struct BatchCall {
    pub tool_name: String,
    #[serde(default)]
    pub tool_input: Value,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub tool_response: Value,
}

/// The fields of every hook payload loopgate reads. Everything else is ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Payload {
    pub session_id: String,
    pub hook_event_name: String,
    #[serde(default)]
    pub prompt_id: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_input: Option<Value>,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub tool_response: Option<Value>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub is_interrupt: Option<bool>,
    #[serde(default)]
    pub stop_hook_active: Option<bool>,
    /// UserPromptSubmit: what the user asked (only its digest is kept).
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<BatchCall>>,
}

impl Payload {
    /// Parses stdin bytes and checks the event has what it needs.
    pub fn parse(bytes: &[u8]) -> Result<(Payload, Event)> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            bail!("empty hook input on stdin (expected one JSON object)");
        }
        let p: Payload =
            serde_json::from_slice(bytes).context("hook input is not a valid hook JSON object")?;
        let event = Event::parse(&p.hook_event_name).with_context(|| {
            format!("unknown hook_event_name {:?}", clip(&p.hook_event_name, 60))
        })?;
        if p.session_id.is_empty() {
            bail!("hook input has an empty session_id");
        }
        if event.is_tool_event() {
            if p.tool_name.as_deref().unwrap_or("").is_empty() {
                bail!("{} hook input has no tool_name", event.name());
            }
            if !matches!(p.tool_input, Some(Value::Object(_))) {
                bail!("{} hook input has no tool_input object", event.name());
            }
        }
        if event == Event::PostToolBatch && p.tool_calls.is_none() {
            bail!("PostToolBatch hook input has no tool_calls");
        }
        let mut p = p;
        // Identifiers land in the state file: an absurdly long one must not bloat it.
        for field in [
            &mut p.tool_name,
            &mut p.tool_use_id,
            &mut p.prompt_id,
            &mut p.agent_id,
        ]
        .into_iter()
        .flatten()
        {
            bound(field);
        }
        for bc in p.tool_calls.iter_mut().flatten() {
            bound(&mut bc.tool_name);
            if let Some(id) = bc.tool_use_id.as_mut() {
                bound(id);
            }
        }
        Ok((p, event))
    }

    /// Which agent made the call: subagents are tracked apart from the main agent.
    pub fn agent(&self) -> &str {
        match self.agent_id.as_deref() {
            Some(id) if !id.is_empty() => id,
            _ => crate::state::MAIN_AGENT,
        }
    }

    pub fn tool(&self) -> &str {
        self.tool_name.as_deref().unwrap_or("")
    }
}

/// Longest identifier kept as it is; a longer one becomes a prefix plus a digest of the whole, so
/// distinct ids stay distinct.
const MAX_ID: usize = 200;

fn bound(s: &mut String) {
    if s.len() <= MAX_ID {
        return;
    }
    let mut cut = MAX_ID / 2;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    *s = format!("{}…{}", &s[..cut], crate::canon::text_key(s));
}

/// Shortens untrusted text for messages and logs, on a char boundary.
pub fn clip(s: &str, max_chars: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max_chars)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().nth(max_chars).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_cannot_be_a_hook_call() {
        for bad in [
            &b""[..],
            b"   \n",
            b"not json",
            b"[1,2]",
            b"{}",
            b"{\"session_id\":5,\"hook_event_name\":\"Stop\"}",
            b"{\"session_id\":\"s\",\"hook_event_name\":\"Nope\"}",
            b"{\"session_id\":\"s\",\"hook_event_name\":\"PreToolUse\"}",
            b"{\"session_id\":\"s\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":\"x\"}",
            b"{\"session_id\":\"s\",\"hook_event_name\":\"PostToolBatch\"}",
            b"\xff\xfe{}",
        ] {
            assert!(Payload::parse(bad).is_err(), "accepted {:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn ignores_unknown_fields_and_reads_agent() {
        let (p, e) = Payload::parse(
            br#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"agent_id":"a1","future":{"x":1}}"#,
        )
        .unwrap();
        assert_eq!(e, Event::PreToolUse);
        assert_eq!(p.agent(), "a1");
    }

    #[test]
    fn huge_identifiers_are_bounded_and_stay_distinct() {
        let make = |c: char| {
            let name: String = std::iter::repeat_n(c, 1 << 20).collect();
            format!(
                r#"{{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"{name}","tool_input":{{}},"tool_use_id":"{name}","prompt_id":"{name}"}}"#
            )
        };
        let (a, _) = Payload::parse(make('y').as_bytes()).unwrap();
        let (b, _) = Payload::parse(make('z').as_bytes()).unwrap();
        assert!(a.tool().len() < 300 && a.prompt_id.as_ref().unwrap().len() < 300);
        assert_ne!(a.tool(), b.tool());
    }

    #[test]
    fn clip_marks_cut_and_strips_controls() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdef", 3), "abc…");
    }
}
