//! Views of a finished run phrased as "what did the model see", across the four wire protocols.

use super::clis::Cli;
use super::harness::Run;
use serde_json::Value;
use std::fmt::Write as _;

impl Run {
    /// The exit code, `None` when killed by a signal or the timeout.
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// Model requests that offered tools: the agent's own turns, in arrival order.
    pub fn main_requests(&self) -> Vec<&Value> {
        self.requests
            .iter()
            .filter(|r| r["kind"] == "main")
            .map(|r| &r["body"])
            .collect()
    }

    /// Every tool result of the conversation, in order, as the model got it in its last request
    /// (each request carries the whole history).
    pub fn tool_outputs(&self) -> Vec<String> {
        self.main_requests()
            .last()
            .map(|body| tool_outputs(self.cli, body))
            .unwrap_or_default()
    }

    /// The tool results this run added to the conversation: those of its last request past the
    /// ones its first request carried (a continued session sends the earlier turns' results too).
    pub fn new_tool_outputs(&self) -> Vec<String> {
        let mains = self.main_requests();
        let before = mains
            .first()
            .map(|body| tool_outputs(self.cli, body).len())
            .unwrap_or(0);
        self.tool_outputs().into_iter().skip(before).collect()
    }

    /// This run's own entries of `events.jsonl`.
    pub fn own_events(&self) -> &[Value] {
        &self.events[self.first_event.min(self.events.len())..]
    }

    /// The text of every user-role message of the last request (where a Stop block's reason
    /// arrives as a new prompt).
    pub fn user_texts(&self) -> Vec<String> {
        self.main_requests()
            .last()
            .map(|body| user_texts(self.cli, body))
            .unwrap_or_default()
    }

    /// Whether any model request contains `needle` anywhere in its body.
    /// Whether any of loopgate's messages reached the model: each says `loopgate:` or
    /// `(loopgate)`. The bare name is no sign: the CLI's own prompt may name paths under a
    /// checkout called `loopgate` (Gemini lists its built-in skills by path).
    pub fn model_heard_from_loopgate(&self) -> bool {
        self.model_saw("loopgate:") || self.model_saw("(loopgate)")
    }

    pub fn model_saw(&self, needle: &str) -> bool {
        self.main_requests()
            .iter()
            .any(|b| b.to_string().contains(needle))
    }

    pub fn events_where(&self, pred: impl Fn(&Value) -> bool) -> Vec<&Value> {
        self.events.iter().filter(|e| pred(e)).collect()
    }

    /// What a failing assertion prints: outcome, tool results, user texts, loopgate's events.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "--- {} run: exit {:?}, timed out {}, {:.1} s, {} model requests ({} main)",
            self.cli.name(),
            self.code(),
            self.timed_out,
            self.elapsed.as_secs_f64(),
            self.requests.len(),
            self.main_requests().len()
        );
        for (n, out) in self.tool_outputs().iter().enumerate() {
            let _ = writeln!(s, "tool result #{}: {}", n + 1, clip(out, 400));
        }
        for text in self.user_texts() {
            let _ = writeln!(s, "user text: {}", clip(&text, 300));
        }
        for e in &self.events {
            let _ = writeln!(
                s,
                "event: {} {} {} {} enforced={} {}",
                e["event"],
                e["tool"],
                e["detector"],
                e["decision"],
                e["enforced"],
                clip(e["reason"].as_str().unwrap_or_default(), 160)
            );
        }
        let _ = writeln!(s, "stderr (tail): {}", tail(&self.stderr, 1500));
        let _ = writeln!(s, "stdout (tail): {}", tail(&self.stdout, 1500));
        s
    }
}

fn clip(text: &str, max: usize) -> String {
    let mut t: String = text.chars().take(max).collect();
    if t.len() < text.len() {
        t.push('…');
    }
    t.replace('\n', "\\n")
}

fn tail(text: &str, max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars[chars.len().saturating_sub(max)..].iter().collect()
}

/// Text of a content value: a string, or the text blocks of an array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b {
                Value::String(s) => s.clone(),
                _ => b["text"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| b.to_string()),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn items<'a>(body: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    body[key].as_array().into_iter().flatten()
}

fn tool_outputs(cli: Cli, body: &Value) -> Vec<String> {
    match cli {
        Cli::Codex => items(body, "input")
            .filter(|i| {
                matches!(
                    i["type"].as_str(),
                    Some("function_call_output" | "custom_tool_call_output")
                )
            })
            .map(|i| text_of(&i["output"]))
            .collect(),
        Cli::Qwen | Cli::OpenCode | Cli::Kilo => items(body, "messages")
            .filter(|m| m["role"] == "tool")
            .map(|m| text_of(&m["content"]))
            .collect(),
        Cli::Gemini => items(body, "contents")
            .flat_map(|c| items(c, "parts"))
            .filter(|p| p.get("functionResponse").is_some())
            .map(|p| p["functionResponse"]["response"].to_string())
            .collect(),
        Cli::Copilot => items(body, "messages")
            .filter(|m| m["role"] == "user")
            .flat_map(|m| items(m, "content"))
            .filter(|b| b["type"] == "tool_result")
            .map(|b| text_of(&b["content"]))
            .collect(),
    }
}

fn user_texts(cli: Cli, body: &Value) -> Vec<String> {
    let key = match cli {
        Cli::Codex => "input",
        Cli::Gemini => "contents",
        Cli::Qwen | Cli::Copilot | Cli::OpenCode | Cli::Kilo => "messages",
    };
    items(body, key)
        .filter(|m| m["role"] == "user")
        .filter_map(|m| {
            let content = if cli == Cli::Gemini {
                &m["parts"]
            } else {
                &m["content"]
            };
            let text: Vec<String> = match content {
                Value::Array(blocks) => blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str().map(str::to_string))
                    .collect(),
                Value::String(s) => vec![s.clone()],
                _ => Vec::new(),
            };
            (!text.is_empty()).then(|| text.join("\n"))
        })
        .collect()
}
