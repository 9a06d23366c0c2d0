//! What one `claude -p` run left behind, and views of it phrased as "what did the model see".

use super::fake_api::{content_text, FakeApi, Recorded};
use super::harness::Scenario;
use serde_json::Value;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

pub struct Run {
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub elapsed: Duration,
    /// `--output-format stream-json` lines.
    pub stream: Vec<Value>,
    pub stderr: String,
    /// Every `POST /v1/messages`, in arrival order.
    pub requests: Vec<Recorded>,
    /// Request lines of all HTTP traffic, side requests included.
    pub request_lines: Vec<String>,
    /// loopgate's `events.jsonl`.
    pub events: Vec<Value>,
    /// The main session transcript written by Claude Code.
    pub transcript: Vec<Value>,
    pub transcript_path: Option<PathBuf>,
}

/// A tool_result block as the model received it.
#[derive(Clone, Debug)]
pub struct ToolResult {
    pub tool_use_id: String,
    pub content: String,
    pub is_error: bool,
}

impl Run {
    pub fn collect(
        scenario: &Scenario,
        api: &FakeApi,
        out_dir: &Path,
        status: Option<ExitStatus>,
        timed_out: bool,
        elapsed: Duration,
    ) -> Run {
        let stream = read_jsonl(&out_dir.join("stdout.jsonl"));
        let transcript_path =
            session_id(&stream).and_then(|id| find_transcript(&scenario.home, &id));
        Run {
            status,
            timed_out,
            elapsed,
            stderr: fs::read_to_string(out_dir.join("stderr.txt")).unwrap_or_default(),
            requests: api.requests(),
            request_lines: api.request_lines(),
            events: read_jsonl(&scenario.state_dir.join("events.jsonl")),
            transcript: transcript_path
                .as_deref()
                .map(read_jsonl)
                .unwrap_or_default(),
            transcript_path,
            stream,
        }
    }

    /// Writes the request log and the other pieces next to stdout/stderr for post-mortems.
    pub fn save(&self, out_dir: &Path) {
        let requests: Vec<Value> = self
            .requests
            .iter()
            .map(|r| serde_json::json!({"conversation": r.conversation, "turn": r.turn, "body": r.body}))
            .collect();
        let write = |name: &str, text: String| {
            let _ = fs::write(out_dir.join(name), text);
        };
        write(
            "requests.json",
            serde_json::to_string_pretty(&requests).unwrap(),
        );
        write("request-lines.txt", self.request_lines.join("\n"));
        write("events.jsonl", to_jsonl(&self.events));
        write("transcript.jsonl", to_jsonl(&self.transcript));
        write("summary.txt", self.summary());
    }

    pub fn exit_code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// Requests of one conversation (`main`, or a subagent label), in arrival order.
    pub fn requests_of(&self, label: &str) -> Vec<&Recorded> {
        self.requests
            .iter()
            .filter(|r| r.conversation.as_deref() == Some(label))
            .collect()
    }

    /// The fullest history of a conversation: its request with the most messages. Histories
    /// only grow, so this holds everything the model was ever sent in that conversation.
    pub fn history(&self, label: &str) -> Vec<Value> {
        self.requests_of(label)
            .into_iter()
            .map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
            .max_by_key(Vec::len)
            .unwrap_or_default()
    }

    /// Every tool_result the model got, in history order.
    pub fn tool_results(&self, label: &str) -> Vec<ToolResult> {
        let history = self.history(label);
        tool_result_blocks(history.iter().filter(|m| m["role"] == "user"))
    }

    /// The result of one scripted call, by its id (`toolu_e2e_<turn>_<n>`): as the model got it,
    /// or, when the run ended before another request (a hook stopped it), as Claude Code
    /// produced it for the model in the stream-json output.
    pub fn find_tool_result(&self, id: &str) -> Option<ToolResult> {
        let sent = self
            .requests
            .iter()
            .filter_map(|r| r.conversation.as_deref())
            .flat_map(|label| self.tool_results(label));
        let produced = tool_result_blocks(
            self.stream
                .iter()
                .filter(|l| l["type"] == "user")
                .map(|l| &l["message"]),
        );
        sent.chain(produced).find(|r| r.tool_use_id == id)
    }

    /// Like [`Run::find_tool_result`], for a call that must have a result.
    pub fn tool_result(&self, id: &str) -> ToolResult {
        self.find_tool_result(id)
            .unwrap_or_else(|| panic!("no tool_result for {id}\n{}", self.summary()))
    }

    /// Why the run ended, from the stream's result event: `completed`, or `hook_stopped` when
    /// a hook ended it (PostToolBatch `decision: block`).
    pub fn terminal_reason(&self) -> Option<&str> {
        self.result().and_then(|r| r["terminal_reason"].as_str())
    }

    /// Texts of the `role: "system"` messages in the conversation, where Claude Code puts most
    /// hook feedback.
    pub fn system_messages(&self, label: &str) -> Vec<String> {
        self.history(label)
            .iter()
            .filter(|m| m["role"] == "system")
            .map(|m| content_text(&m["content"]))
            .collect()
    }

    /// Plain text of the user messages after the first (the first is the prompt with the CLI's
    /// context around it): Stop hook feedback, task notifications… Tool results are excluded.
    pub fn user_texts(&self, label: &str) -> Vec<String> {
        self.history(label)
            .iter()
            .filter(|m| m["role"] == "user")
            .skip(1)
            .flat_map(|m| match &m["content"] {
                Value::String(s) => vec![s.clone()],
                Value::Array(blocks) => blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str().map(String::from))
                    .collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    /// Every string the model was sent in this conversation after its prompt: tool results,
    /// system messages and later user texts. "Nothing from loopgate reached the model" is
    /// checked against this.
    pub fn everything_sent(&self, label: &str) -> String {
        let mut all: Vec<String> = self
            .tool_results(label)
            .into_iter()
            .map(|r| r.content)
            .collect();
        all.extend(self.system_messages(label));
        all.extend(self.user_texts(label));
        all.join("\n---\n")
    }

    /// The final `result` event of the stream.
    pub fn result(&self) -> Option<&Value> {
        self.stream.iter().rev().find(|l| l["type"] == "result")
    }

    /// loopgate events matching a predicate.
    pub fn events_where(&self, pred: impl Fn(&Value) -> bool) -> Vec<&Value> {
        self.events.iter().filter(|e| pred(e)).collect()
    }

    /// A human-readable account of the run, printed when an assertion fails.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "exit: {:?} timed_out: {} elapsed: {:?}",
            self.status, self.timed_out, self.elapsed
        );
        for r in &self.requests {
            let msgs = r.body["messages"].as_array().map_or(0, Vec::len);
            let _ = writeln!(
                s,
                "request conv={:?} turn={} messages={msgs}",
                r.conversation, r.turn
            );
        }
        let mut labels: Vec<&str> = self
            .requests
            .iter()
            .filter_map(|r| r.conversation.as_deref())
            .collect();
        labels.dedup();
        labels.sort();
        labels.dedup();
        for label in labels {
            let _ = writeln!(s, "--- conversation {label}");
            for r in self.tool_results(label) {
                let _ = writeln!(
                    s,
                    "tool_result {} is_error={} {:?}",
                    r.tool_use_id, r.is_error, r.content
                );
            }
            for m in self.system_messages(label) {
                let _ = writeln!(s, "system {:?}", clip(&m, 300));
            }
            for t in self.user_texts(label) {
                let _ = writeln!(s, "user {:?}", clip(&t, 300));
            }
        }
        let _ = writeln!(
            s,
            "--- transcript {:?} ({} lines)",
            self.transcript_path,
            self.transcript.len()
        );
        let _ = writeln!(s, "--- loopgate events ({})", self.events.len());
        for e in &self.events {
            let _ = writeln!(s, "{e}");
        }
        let _ = writeln!(s, "--- stderr\n{}", clip(&self.stderr, 2000));
        s
    }
}

/// tool_result blocks of user messages (`{"role": "user", "content": [...]}`).
fn tool_result_blocks<'a>(messages: impl Iterator<Item = &'a Value>) -> Vec<ToolResult> {
    messages
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| ToolResult {
            tool_use_id: b["tool_use_id"].as_str().unwrap_or_default().into(),
            content: content_text(&b["content"]),
            is_error: b["is_error"].as_bool().unwrap_or(false),
        })
        .collect()
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max).collect::<String>() + "…"
    }
}

pub fn read_jsonl(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn to_jsonl(values: &[Value]) -> String {
    values.iter().map(|v| format!("{v}\n")).collect()
}

fn session_id(stream: &[Value]) -> Option<String> {
    stream
        .iter()
        .find_map(|l| l["session_id"].as_str().map(String::from))
}

/// `~/.claude/projects/<sanitized cwd>/<session>.jsonl`; searched rather than computed so the
/// sanitizing rule does not have to be copied here.
fn find_transcript(home: &Path, session: &str) -> Option<PathBuf> {
    let name = format!("{session}.jsonl");
    fs::read_dir(home.join(".claude").join("projects"))
        .ok()?
        .flatten()
        .map(|d| d.path().join(&name))
        .find(|p| p.is_file())
}
