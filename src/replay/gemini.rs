//! Gemini CLI and Qwen Code chats. Both CLIs come from one code base and record a call the same
//! way (the model's `functionCall`, the tool's `functionResponse`, a status), in two files:
//!
//! - the chat file (`~/.gemini/tmp/<project hash>/chats/session-….json`; older Qwen releases the
//!   same under `~/.qwen/tmp/`): one JSON object, rewritten in place, `{"sessionId", "messages":
//!   [{"type": "user"|"gemini"|"info"|…, "timestamp", "content", "toolCalls": [{"id", "name",
//!   "args", "result": [{"functionResponse": {"response": {"output"}|{"error"}}}], "status",
//!   "timestamp"}]}]}`;
//! - Qwen Code's JSONL records (`~/.qwen/projects/<project>/chats/<session>.jsonl`, the file its
//!   hooks name as `transcript_path`): `{"uuid", "parentUuid", "sessionId", "timestamp", "type":
//!   "user"|"assistant"|"tool_result"|"system", "message": {"role", "parts": [{"text"} |
//!   {"functionCall": {"id", "name", "args"}} | {"functionResponse": {"id", "name",
//!   "response"}}]}, "toolCallResult": {"callId", "status", "error"}}`, a subagent's records
//!   marked with `agentId`.
//!
//! What is read, and how:
//! - a `user` message → UserPromptSubmit; each tool call → PreToolUse at the time its model
//!   message was recorded, its result → PostToolUse or PostToolUseFailure at the call's own time
//!   (the chat file's call `timestamp` is when it finished; Qwen's `tool_result` record's time).
//!   Tool names and inputs as the live dialect maps them (`run_shell_command` → `Bash`,
//!   `replace`/`edit` → `Edit`, …);
//! - failure: status `error` (the `error` text), else the shell's `Exit Code: N` in the output,
//!   which is where the live hook finds it too; status `cancelled` (the person refused the call, or
//!   pressed Esc) fired the call's hook before it and none after;
//! - a turn ends (Stop) where the next prompt comes or the file ends after a model message
//!   without calls; "Request cancelled." (an `info` message) ends it without one;
//! - Qwen: before each model request after a tool round, the batch event its dialect reads from
//!   Qwen's empty-prompt UserPromptSubmit.
//!
//! What the files cannot tell: no duration but start and end; no exit code but the text (the
//! chat file keeps only `Output: …` for some shell calls); Gemini's subagent calls are not in the
//! parent's chat file (and its hooks cannot tell them from the main agent's anyway).

use super::native::{self, from_ms, Answer, Step, Timed, Who};
use super::transcript::{parse_time, Converted};
use super::Cli;
use serde_json::{json, Value};
use std::time::SystemTime;

/// Converts one chat, JSON (Gemini, older Qwen) or Qwen's JSONL records.
pub fn convert(cli: Cli, text: &str, fallback_session_id: &str) -> Converted {
    let whole = serde_json::from_str::<Value>(text.trim())
        .ok()
        .filter(|v| v.get("messages").is_some_and(Value::is_array));
    let (session_id, steps, skipped) = match whole {
        Some(chat) => chat_steps(&chat),
        None => record_steps(text),
    };
    let session_id = session_id.unwrap_or_else(|| fallback_session_id.to_string());
    native::build(cli, session_id, vec![steps], skipped)
}

fn time_of(v: &Value) -> Option<SystemTime> {
    match v.get("timestamp") {
        Some(Value::String(s)) => parse_time(s),
        Some(Value::Number(n)) => n.as_u64().map(from_ms),
        _ => None,
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Text from a `content` that is a string, a list of `{text}` parts, or `{parts}`.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => o.get("parts").map(text_of).unwrap_or_default(),
        _ => String::new(),
    }
}

/// A `functionResponse.response` as the hook's `tool_response` (`{llmContent, error?}`).
fn response_raw(response: &Value, error: Option<&str>) -> Value {
    let output = match response.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let error = error
        .map(str::to_string)
        .or_else(|| match response.get("error") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        });
    match error {
        Some(e) => json!({"llmContent": output, "error": e}),
        None => json!({ "llmContent": output }),
    }
}

/// The answer of a call with `status`: `None` for a call that never ran.
fn answer(status: &str, raw: Value) -> Option<Answer> {
    match status {
        "cancelled" => None,
        "error" => Some(Answer::new(raw, Some(true))),
        // The shell's exit code is only in its output: the dialect reads it there.
        _ => Some(Answer::new(raw, None)),
    }
}

/// Steps of a chat file.
fn chat_steps(chat: &Value) -> (Option<String>, Vec<Timed>, usize) {
    let session = str_at(chat, "/sessionId").map(str::to_string);
    let mut steps = Vec::new();
    let mut open_turn = false;
    // The turn's last model message had calls: the model was not done.
    let mut pending_calls = false;
    // The person cancelled the turn: what the file records after it (the call the cancel cut
    // short) belongs to the cancelled turn.
    let mut cancelled = false;
    let mut last_at = None;
    let messages = chat["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for m in messages {
        let at = time_of(m);
        match str_at(m, "/type") {
            Some("user") => {
                if open_turn {
                    // AfterAgent fired when the model's last message was done.
                    steps.push(Timed::end(last_at, None));
                }
                steps.push(Timed {
                    at,
                    step: Step::Prompt {
                        text: text_of(&m["content"]),
                        prompt_id: None,
                    },
                });
                open_turn = true;
                pending_calls = false;
                cancelled = false;
            }
            Some("gemini") => {
                open_turn = !cancelled;
                steps.push(Timed {
                    at,
                    step: Step::Say {
                        who: None,
                        text: text_of(&m["content"]),
                    },
                });
                let calls = m["toolCalls"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                pending_calls = !calls.is_empty();
                let mut answers = Vec::new();
                for (n, c) in calls.iter().enumerate() {
                    let id = str_at(c, "/id")
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("call-{}-{n}", steps.len()));
                    steps.push(Timed {
                        at,
                        step: Step::Call {
                            who: None,
                            id: id.clone(),
                            name: str_at(c, "/name").unwrap_or("").to_string(),
                            input: c["args"].clone(),
                            cwd: None,
                        },
                    });
                    let response = c
                        .pointer("/result/0/functionResponse/response")
                        .cloned()
                        .unwrap_or(Value::Null);
                    let status = str_at(c, "/status").unwrap_or("success");
                    let step = match answer(status, response_raw(&response, None)) {
                        Some(answer) => Step::Answer {
                            who: None,
                            id,
                            answer,
                        },
                        None => Step::NoAnswer { who: None, id },
                    };
                    // A call's time is when it finished; never before its message.
                    let end = time_of(c).map(|t| at.map_or(t, |a| t.max(a))).or(at);
                    answers.push(Timed { at: end, step });
                }
                answers.sort_by_key(|t| t.at);
                last_at = answers.last().and_then(|t| t.at).or(at);
                steps.extend(answers);
                if cancelled {
                    steps.push(Timed {
                        at: last_at,
                        step: Step::Interrupt { who: None },
                    });
                }
            }
            Some("info") if text_of(&m["content"]).starts_with("Request cancelled") => {
                if open_turn {
                    steps.push(Timed {
                        at,
                        step: Step::Interrupt { who: None },
                    });
                }
                open_turn = false;
                pending_calls = false;
                cancelled = true;
            }
            _ => {}
        }
    }
    if open_turn && !pending_calls {
        steps.push(Timed::end(last_at, None));
    }
    (session, steps, 0)
}

/// Steps of Qwen Code's JSONL records.
fn record_steps(text: &str) -> (Option<String>, Vec<Timed>, usize) {
    let mut session = None;
    let mut steps = Vec::new();
    let mut skipped = 0;
    // Per agent ("" the main one): a turn is open, and its last model message had calls.
    let mut open: std::collections::HashMap<String, (bool, bool)> = Default::default();
    let mut last_at = None;
    for line in native::json_lines(text) {
        let Some(r) = line else {
            skipped += 1;
            continue;
        };
        if session.is_none() {
            session = str_at(&r, "/sessionId").map(str::to_string);
        }
        let at = time_of(&r).or(last_at);
        let prev_at = last_at;
        last_at = at;
        if let Some(cwd) = str_at(&r, "/cwd") {
            steps.push(Timed {
                at,
                step: Step::Cwd(cwd.to_string()),
            });
        }
        let who = str_at(&r, "/agentId").map(|id| Who {
            id: id.to_string(),
            kind: str_at(&r, "/agentName")
                .unwrap_or("general-purpose")
                .to_string(),
        });
        let k = who.as_ref().map(|w| w.id.clone()).unwrap_or_default();
        let parts = r
            .pointer("/message/parts")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let state = open.entry(k).or_default();
        match (str_at(&r, "/type"), str_at(&r, "/subtype")) {
            (Some("user"), None) => {
                let text = text_of(&r["message"]);
                if who.is_some() {
                    // A subagent's task: a turn of its own, no prompt of the person's.
                    steps.push(Timed {
                        at,
                        step: Step::Begin {
                            who: who.clone(),
                            prompt_id: None,
                        },
                    });
                } else if !text.trim().is_empty() {
                    if state.0 {
                        steps.push(Timed::end(prev_at, None));
                    }
                    steps.push(Timed {
                        at,
                        step: Step::Prompt {
                            text,
                            prompt_id: None,
                        },
                    });
                }
                *state = (true, false);
            }
            (Some("assistant"), _) => {
                if state.1 {
                    // The calls were answered and the next model request went out: Qwen's hook
                    // before it fired once the last answer was in.
                    steps.push(Timed {
                        at: prev_at,
                        step: Step::ModelRequest { who: who.clone() },
                    });
                }
                state.0 = true;
                steps.push(Timed {
                    at,
                    step: Step::Say {
                        who: who.clone(),
                        text: text_of(&r["message"]),
                    },
                });
                let mut calls = false;
                for p in parts {
                    let Some(f) = p.get("functionCall") else {
                        continue;
                    };
                    calls = true;
                    steps.push(Timed {
                        at,
                        step: Step::Call {
                            who: who.clone(),
                            id: str_at(f, "/id").unwrap_or("").to_string(),
                            name: str_at(f, "/name").unwrap_or("").to_string(),
                            input: f["args"].clone(),
                            cwd: None,
                        },
                    });
                }
                state.1 = calls;
            }
            (Some("tool_result"), _) => {
                let status = str_at(&r, "/toolCallResult/status").unwrap_or("success");
                let error = str_at(&r, "/toolCallResult/error/message")
                    .or_else(|| str_at(&r, "/toolCallResult/error"));
                for p in parts {
                    let Some(f) = p.get("functionResponse") else {
                        continue;
                    };
                    let id = str_at(f, "/id")
                        .or_else(|| str_at(&r, "/toolCallResult/callId"))
                        .unwrap_or("")
                        .to_string();
                    let raw = response_raw(&f["response"], error.filter(|_| status == "error"));
                    let step = match answer(status, raw) {
                        Some(answer) => Step::Answer {
                            who: who.clone(),
                            id,
                            answer,
                        },
                        None => Step::NoAnswer {
                            who: who.clone(),
                            id,
                        },
                    };
                    steps.push(Timed { at, step });
                }
            }
            _ => {}
        }
    }
    // The file ends: a turn whose model had the last word is over.
    let mut ends: Vec<_> = open.into_iter().filter(|(_, s)| s.0 && !s.1).collect();
    ends.sort();
    for (k, _) in ends {
        let who = (!k.is_empty()).then(|| Who {
            id: k,
            kind: "general-purpose".into(),
        });
        steps.push(Timed::end(last_at, who));
    }
    (session, steps, skipped)
}
