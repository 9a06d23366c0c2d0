//! Which agent CLI wrote a session file, told from its content (never its name: every file of
//! the corpus Entire keeps is called `full.jsonl`, whatever is inside).
//!
//! - Claude Code: JSONL whose conversation lines are `{"type": "user"|"assistant", "message":
//!   {"content": …}}` ([`transcript::inspect`]).
//! - Codex: a JSONL rollout whose lines are `{"timestamp", "type", "payload"}`, starting with
//!   `session_meta` (a subagent's names its parent: `parent_thread_id`).
//! - Copilot CLI: JSONL events `{"type": "session.start"|"user.message"|"tool.execution_start"|…,
//!   "data", "id", "timestamp"}`.
//! - Qwen Code (current releases): JSONL records `{"type": "user"|"assistant"|"tool_result"|
//!   "system", "message": {"role", "parts": […]}}`: Claude Code's outline with Gemini's content.
//! - Gemini CLI (and Qwen Code before its JSONL records): one JSON object `{"sessionId",
//!   "messages": [{"type": "user"|"gemini", …}]}`; Qwen's is told by its tool names. Gemini CLI's
//!   current JSONL chat records: a first line `{"sessionId", "projectHash", …}`, then messages
//!   and `{"$set": …}` updates ([`super::gemini::fold_records`]).
//! - OpenCode: one JSON object `{"info": {"id": "ses_…"}, "messages": [{"info", "parts"}]}`, as
//!   `opencode export` prints it (a child session, a subagent's, names its parent: `parentID`).

use super::transcript::{self, Kind};
use crate::protocol::dialect::{Agent, Caps};
use serde::Serialize;
use serde_json::Value;

/// The agent CLI whose session a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cli {
    Claude,
    Codex,
    Gemini,
    Qwen,
    Copilot,
    OpenCode,
}

impl Cli {
    /// Every CLI, in the order reports list them.
    pub const ALL: [Cli; 6] = [
        Cli::Claude,
        Cli::Codex,
        Cli::Gemini,
        Cli::Qwen,
        Cli::Copilot,
        Cli::OpenCode,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
            Cli::Qwen => "qwen",
            Cli::Copilot => "copilot",
            Cli::OpenCode => "opencode",
        }
    }

    /// The dialect its live hook speaks (OpenCode's is loopgate's plugin).
    pub fn agent(self) -> Agent {
        match self {
            Cli::Claude => Agent::Claude,
            Cli::Codex => Agent::Codex,
            Cli::Gemini => Agent::Gemini,
            Cli::Qwen => Agent::Qwen,
            Cli::Copilot => Agent::Copilot,
            Cli::OpenCode => Agent::OpenCode,
        }
    }

    /// What the engine is told the CLI can do, as the live hook tells it.
    pub fn caps(self) -> Caps {
        self.agent().caps()
    }

    /// Its hooks give each call an id (`tool_use_id`); Gemini's and Copilot's do not, so there a
    /// call's answer is paired by identity, as the live hook pairs it.
    pub fn call_ids(self) -> bool {
        !matches!(self, Cli::Gemini | Cli::Copilot)
    }
}

/// What a file holds: the CLI and whether it is a session or a subagent's session.
pub fn inspect(text: &str) -> (Cli, Kind) {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if first.starts_with('{') {
        // One pretty-printed object (Gemini, OpenCode): its first line is not a whole object.
        let whole = match serde_json::from_str::<Value>(first) {
            Ok(v) => Some(v),
            Err(_) => serde_json::from_str::<Value>(text.trim()).ok(),
        };
        if let Some(found) = whole.as_ref().and_then(one_object) {
            return found;
        }
        if whole.as_ref().is_some_and(super::gemini::is_records_header) {
            if let Some((chat, _)) = super::gemini::fold_records(text) {
                let messages = chat["messages"].as_array().map(Vec::as_slice);
                let session = str_of(&chat, "/sessionId").map(str::to_string);
                return (
                    gemini_or_qwen(messages.unwrap_or(&[])),
                    Kind::Session {
                        session_id: session,
                    },
                );
            }
        }
    }
    for raw in text.lines().take(200) {
        let raw = raw.trim();
        if !raw.starts_with('{') {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(raw) else {
            continue;
        };
        if let Some(found) = jsonl_line(&v) {
            return found;
        }
    }
    match transcript::inspect(text) {
        Kind::NotTranscript => (Cli::Claude, unreadable(text).unwrap_or(Kind::NotTranscript)),
        kind => (Cli::Claude, kind),
    }
}

/// Why a file that is no session file cannot be read as JSON at all; `None` when it is JSON (or
/// JSON lines) of some other shape.
fn unreadable(text: &str) -> Option<Kind> {
    let why = |s: String| Some(Kind::Unreadable(s));
    if text.trim().is_empty() {
        return why("empty file".into());
    }
    if text.contains('\0') || text.contains('\u{FFFD}') {
        return why("not a text file (binary or not UTF-8)".into());
    }
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (n, first) = lines.next()?;
    let first = first.trim();
    if !(first.starts_with('{') || first.starts_with('[')) {
        let shown: String = first.chars().take(40).collect();
        return why(format!("not JSON (line {}: `{shown}`)", n + 1));
    }
    // A whole JSON document, or JSON lines: where is it broken?
    let whole = match serde_json::from_str::<Value>(text) {
        Ok(_) => return None,
        Err(e) => e,
    };
    let broken = |line: usize, e: &serde_json::Error| {
        let text = e.to_string();
        let what = text.split(" at line ").next().unwrap_or(&text).to_string();
        why(format!(
            "broken JSON at line {line}, column {}: {what}",
            e.column()
        ))
    };
    if serde_json::from_str::<Value>(first).is_err() {
        // One pretty-printed document.
        return broken(whole.line(), &whole);
    }
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Err(e) = serde_json::from_str::<Value>(line) {
            return broken(n + 1, &e);
        }
    }
    None
}

fn str_of<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// A whole-file object: an OpenCode export or a Gemini-style chat.
fn one_object(v: &Value) -> Option<(Cli, Kind)> {
    let messages = v.get("messages")?.as_array()?;
    if let Some(info) = v.get("info").filter(|i| i.is_object()) {
        let id = str_of(info, "/id")?;
        if !messages.iter().all(|m| m.get("parts").is_some()) {
            return None;
        }
        let kind = match str_of(info, "/parentID") {
            Some(parent) => Kind::Subagent {
                session_id: Some(parent.to_string()),
            },
            None => Kind::Session {
                session_id: Some(id.to_string()),
            },
        };
        return Some((Cli::OpenCode, kind));
    }
    let session = str_of(v, "/sessionId")?;
    let chat = messages
        .iter()
        .any(|m| matches!(str_of(m, "/type"), Some("user" | "gemini")));
    if !chat {
        return None;
    }
    let kind = Kind::Session {
        session_id: Some(session.to_string()),
    };
    Some((gemini_or_qwen(messages), kind))
}

/// Gemini CLI and the Qwen Code releases that wrote the same chat file differ in their tool
/// names: Qwen's edit tool is `edit` and its subagent tool `agent` (Gemini: `replace`,
/// `invoke_agent`).
fn gemini_or_qwen(messages: &[Value]) -> Cli {
    let names = messages
        .iter()
        .filter_map(|m| m.get("toolCalls")?.as_array())
        .flatten()
        .filter_map(|c| str_of(c, "/name"));
    for name in names {
        match name {
            "edit" | "agent" | "todo_write" | "task" => return Cli::Qwen,
            "replace" | "invoke_agent" | "google_web_search" => return Cli::Gemini,
            _ => {}
        }
    }
    Cli::Gemini
}

/// A JSONL line that only one CLI writes.
fn jsonl_line(v: &Value) -> Option<(Cli, Kind)> {
    let kind = str_of(v, "/type")?;
    if kind == "session_meta" && v.get("payload").is_some_and(Value::is_object) {
        let p = &v["payload"];
        let parent = str_of(p, "/parent_thread_id")
            .or_else(|| str_of(p, "/source/subagent/thread_spawn/parent_thread_id"));
        let kind = match parent {
            Some(parent) => Kind::Subagent {
                session_id: Some(parent.to_string()),
            },
            None => Kind::Session {
                session_id: str_of(p, "/id").map(str::to_string),
            },
        };
        return Some((Cli::Codex, kind));
    }
    let copilot = kind == "session.start"
        || kind == "user.message"
        || kind.starts_with("tool.execution_")
        || kind.starts_with("assistant.turn_");
    if copilot && v.get("data").is_some_and(Value::is_object) {
        let session = str_of(v, "/data/sessionId").map(str::to_string);
        return Some((
            Cli::Copilot,
            Kind::Session {
                session_id: session,
            },
        ));
    }
    let qwen = matches!(kind, "user" | "assistant" | "tool_result")
        && (v.pointer("/message/parts").is_some_and(Value::is_array)
            || str_of(v, "/message/role") == Some("model"));
    if qwen {
        let session = str_of(v, "/sessionId").map(str::to_string);
        return Some((
            Cli::Qwen,
            Kind::Session {
                session_id: session,
            },
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_is_told_by_its_content() {
        let codex = r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"t1","cwd":"/p"}}"#;
        assert_eq!(
            inspect(codex),
            (
                Cli::Codex,
                Kind::Session {
                    session_id: Some("t1".into())
                }
            )
        );
        let child = r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"t2","parent_thread_id":"t1"}}"#;
        assert_eq!(
            inspect(child).1,
            Kind::Subagent {
                session_id: Some("t1".into())
            }
        );
        let copilot = r#"{"type":"session.start","data":{"sessionId":"c1"},"id":"x","timestamp":"2026-01-01T00:00:00Z","parentId":null}"#;
        assert_eq!(inspect(copilot).0, Cli::Copilot);
        let qwen = r#"{"uuid":"u","parentUuid":null,"sessionId":"q1","timestamp":"2026-01-01T00:00:00Z","type":"user","message":{"role":"user","parts":[{"text":"hi"}]}}"#;
        assert_eq!(inspect(qwen).0, Cli::Qwen);
        let gemini = "{\n  \"sessionId\": \"g1\",\n  \"messages\": [{\"type\": \"user\", \"content\": \"hi\"}]\n}";
        assert_eq!(inspect(gemini).0, Cli::Gemini);
        let opencode = "{\n  \"info\": {\"id\": \"ses_1\", \"parentID\": \"ses_0\"},\n  \"messages\": [{\"info\": {}, \"parts\": []}]\n}";
        assert_eq!(
            inspect(opencode),
            (
                Cli::OpenCode,
                Kind::Subagent {
                    session_id: Some("ses_0".into())
                }
            )
        );
        let claude = r#"{"type":"user","sessionId":"s","message":{"role":"user","content":"hi"}}"#;
        assert_eq!(inspect(claude).0, Cli::Claude);
        assert_eq!(inspect("{\"a\": 1}\n").1, Kind::NotTranscript);
        assert_eq!(inspect("[1, 2]").1, Kind::NotTranscript);
    }

    #[test]
    fn a_file_that_cannot_be_read_says_why() {
        let why = |text: &str| match inspect(text).1 {
            Kind::Unreadable(why) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(why(""), "empty file");
        assert_eq!(why(" \n\n"), "empty file");
        assert_eq!(why("not json"), "not JSON (line 1: `not json`)");
        assert_eq!(
            why("\u{FFFD}PNG\u{1a}"),
            "not a text file (binary or not UTF-8)"
        );
        // A pretty-printed document cut short: the document's error.
        assert_eq!(
            why("{\n  \"a\": [1,\n"),
            "broken JSON at line 3, column 0: EOF while parsing a value"
        );
        // JSON lines with a broken one, none of them a session's.
        assert_eq!(
            why("{\"a\": 1}\n\n{\"b\": tru}\n"),
            "broken JSON at line 3, column 10: expected ident"
        );
        // A session file with a broken line is still a session file (the line is counted).
        let codex = "{\"timestamp\":\"2026-01-01T00:00:00Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"t1\"}}\n{\"broken";
        assert_eq!(inspect(codex).0, Cli::Codex);
    }
}
