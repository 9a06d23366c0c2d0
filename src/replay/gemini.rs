//! Gemini CLI and Qwen Code chats. Both CLIs come from one code base and record a call the same
//! way (the model's `functionCall`, the tool's `functionResponse`, a status), in three formats:
//!
//! - the chat file (`~/.gemini/tmp/<project hash>/chats/session-….json`; older Qwen releases the
//!   same under `~/.qwen/tmp/`): one JSON object, rewritten in place, `{"sessionId", "messages":
//!   [{"type": "user"|"gemini"|"info"|…, "timestamp", "content", "toolCalls": [{"id", "name",
//!   "args", "result": [{"functionResponse": {"response": {"output"}|{"error"}}}], "status",
//!   "timestamp"}]}]}`;
//! - Gemini CLI's JSONL chat records (`~/.gemini/tmp/<project>/chats/session-….jsonl`, current
//!   releases, the file its hooks name as `transcript_path`): the chat file's content as a
//!   metadata line, then each message on a line of its own (again, whole, each time it changes)
//!   and `{"$set": {…}}` updates; folded into the chat file's shape by [`fold_records`]. The
//!   tools' answers are also written as `user` messages there: they are no prompt;
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
//! - calls the CLI refused before any hook (arguments that fail the tool's schema, an unknown
//!   tool; Gemini: a path outside the workspace; Qwen marks them `executionStatus:
//!   "not_started"`) are not played at all, as no hook saw them;
//! - a turn ends (Stop) where the next prompt comes or the file ends after a model message
//!   without calls; "Request cancelled." (an `info` message) ends it without one;
//! - Qwen: before each model request after a tool round, the batch event its dialect reads from
//!   Qwen's empty-prompt UserPromptSubmit.
//!
//! What the files cannot tell: no duration but start and end; no exit code but the text (the
//! chat file keeps only `Output: …` for some shell calls); Gemini's subagent calls are not in the
//! parent's chat file (and its hooks cannot tell them from the main agent's anyway): a
//! subagent's own chat (`"kind": "subagent"`, under `chats/<parent session>/`) is replayed as its
//! calls alone, under its own session id (the parent's is only in the file's path).

use super::native::{self, from_ms, Answer, Step, Timed, Who};
use super::transcript::{parse_time, Converted};
use super::Cli;
use serde_json::{json, Value};
use std::time::SystemTime;

/// Converts one chat: a chat file (Gemini, older Qwen), Gemini's JSONL chat records, or Qwen's
/// JSONL records.
pub fn convert(cli: Cli, text: &str, fallback_session_id: &str) -> Converted {
    let (session_id, steps, skipped) = if let Some((chat, skipped)) = fold_records(text) {
        let (session, steps, _) = chat_steps(&chat);
        (session, steps, skipped)
    } else {
        let whole = serde_json::from_str::<Value>(text.trim())
            .ok()
            .filter(|v| v.get("messages").is_some_and(Value::is_array));
        match whole {
            Some(chat) => chat_steps(&chat),
            None => record_steps(text),
        }
    };
    let session_id = session_id.unwrap_or_else(|| fallback_session_id.to_string());
    native::build(cli, session_id, vec![steps], skipped)
}

/// The first line of Gemini CLI's JSONL chat records: the session's metadata,
/// `{"sessionId", "projectHash", "startTime", "lastUpdated", "kind"}`.
pub(crate) fn is_records_header(line: &Value) -> bool {
    str_at(line, "/sessionId").is_some()
        && str_at(line, "/projectHash").is_some()
        && line.get("id").is_none()
}

/// Gemini CLI's JSONL chat records (`chats/session-….jsonl`, 0.4x and later), folded into the
/// chat file's shape `{"sessionId", "kind", "messages": […]}`, and the lines that are not JSON.
/// `None` when the first record is not the metadata header.
///
/// The records, as Gemini's own loader reads them: the header; a message (`{"id", "type", …}`),
/// written again whole under the same `id` each time it changes (a model message gains its
/// `toolCalls`, each call its `result` and `status`); `{"$set": {…}}` updating the session's
/// fields (`lastUpdated`, …; `messages` replaces the list, as at the start and on a resume);
/// `{"$rewindTo": id}` when the person rewound the conversation to before that message.
/// Replay wants what happened, not what the conversation became: a message keeps its place
/// where it first appeared and takes its last content; a `$set` list and a rewind drop nothing
/// (the calls the rewound messages made did run, and their hooks fired).
pub fn fold_records(text: &str) -> Option<(Value, usize)> {
    let mut lines = native::json_lines(text);
    let header = lines.next()??;
    if !is_records_header(&header) {
        return None;
    }
    let mut meta = header;
    let mut messages: Vec<Value> = Vec::new();
    let mut at: std::collections::HashMap<String, usize> = Default::default();
    let mut upsert = |m: &Value, messages: &mut Vec<Value>| {
        let Some(id) = str_at(m, "/id") else { return };
        match at.get(id) {
            Some(&i) => messages[i] = m.clone(),
            None => {
                at.insert(id.to_string(), messages.len());
                messages.push(m.clone());
            }
        }
    };
    if let Some(list) = meta.get("messages").and_then(Value::as_array) {
        for m in list {
            upsert(m, &mut messages);
        }
    }
    let mut skipped = 0;
    for line in lines {
        let Some(r) = line else {
            skipped += 1;
            continue;
        };
        if let Some(set) = r.get("$set").and_then(Value::as_object) {
            for (k, v) in set {
                if k == "messages" {
                    for m in v.as_array().map(Vec::as_slice).unwrap_or(&[]) {
                        upsert(m, &mut messages);
                    }
                } else {
                    meta[k.as_str()] = v.clone();
                }
            }
        } else if str_at(&r, "/id").is_some() {
            upsert(&r, &mut messages);
        } else if r.get("$rewindTo").is_none() && !is_records_header(&r) {
            skipped += 1;
        }
    }
    meta["messages"] = Value::Array(messages);
    Some((meta, skipped))
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

/// A user message is the person's prompt: not only the tools' answers (`functionResponse`
/// parts), and not the session context Gemini CLI sends first (`<session_context>…`), which fire
/// no BeforeAgent.
fn is_prompt(content: &Value) -> bool {
    let answers_only = content.as_array().is_some_and(|parts| {
        !parts.is_empty()
            && parts
                .iter()
                .all(|p| p.get("functionResponse").is_some() || p.get("functionCall").is_some())
    });
    !answers_only
        && !text_of(content)
            .trim_start()
            .starts_with("<session_context>")
}

/// A call the CLI refused before its hooks (observed on Gemini CLI 0.61.0: arguments that fail
/// the tool's schema, an unknown tool, a path outside the workspace): no hook saw it, so replay
/// plays nothing for it either.
fn fires_no_hook(call: &Value) -> bool {
    if str_at(call, "/status") != Some("error") {
        return false;
    }
    let error = str_at(call, "/result/0/functionResponse/response/error").unwrap_or("");
    (error.starts_with("Tool \"") && error.contains("\" not found"))
        || error.starts_with("params must ")
        || error.starts_with("params/")
        || error.starts_with("Path not in workspace:")
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
            // The tools' answers going back to the model (the JSONL records write them as a
            // user message) and the CLI's own context are no prompt of the person's.
            Some("user") if !is_prompt(&m["content"]) => {}
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
                    if fires_no_hook(c) {
                        continue;
                    }
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
    if str_at(chat, "/kind") == Some("subagent") {
        // A subagent's own chat (`chats/<parent session>/<id>.json`): its task and the CLI's
        // nudges are no prompt of the person's, and Gemini fires no BeforeAgent or AfterAgent
        // for a subagent; its tool hooks look like the main agent's.
        steps.retain(|t| !matches!(t.step, Step::Prompt { .. } | Step::End { .. }));
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
    // Calls the CLI refused before running them (bad arguments, an unknown tool): their result
    // says `executionStatus: "not_started"`, and no hook saw them (observed on Qwen Code 0.24.4).
    let not_started: std::collections::HashSet<String> = native::json_lines(text)
        .flatten()
        .filter(|r| str_at(r, "/toolCallResult/executionStatus") == Some("not_started"))
        .filter_map(|r| str_at(&r, "/toolCallResult/callId").map(str::to_string))
        .collect();
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
                    if str_at(f, "/id").is_some_and(|id| not_started.contains(id)) {
                        continue;
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// (event, tool) of each payload.
    fn events(cli: Cli, text: &str) -> Vec<(&'static str, String)> {
        convert(cli, text, "fb")
            .payloads
            .iter()
            .map(|p| {
                let tool = p.payload["tool_name"].as_str().unwrap_or("").to_string();
                (p.event, tool)
            })
            .collect()
    }

    const CALL: &str = r#"{"id":"c1","name":"run_shell_command","args":{"command":"make"},"result":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"Output: boom\nExit Code: 2"}}}],"status":"success","timestamp":"2026-01-01T00:00:05Z"}"#;

    /// Gemini CLI's JSONL records of a turn: the header, the session context set as the first
    /// message, the prompt, the model message written twice (first without its call), the
    /// call's answer as a user message, the final answer, a `$set` and a broken line.
    fn records() -> String {
        [
            r#"{"sessionId":"s1","projectHash":"h","startTime":"2026-01-01T00:00:00Z","lastUpdated":"2026-01-01T00:00:00Z","kind":"main"}"#.to_string(),
            r#"{"$set":{"messages":[{"id":"m0","timestamp":"2026-01-01T00:00:00Z","type":"user","content":[{"text":"<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}],"lastUpdated":"2026-01-01T00:00:00Z"}}"#.to_string(),
            r#"{"id":"m1","timestamp":"2026-01-01T00:00:01Z","type":"user","content":[{"text":"build it"}]}"#.to_string(),
            r#"{"id":"m2","timestamp":"2026-01-01T00:00:02Z","type":"gemini","content":""}"#.to_string(),
            r#"{"$set":{"lastUpdated":"2026-01-01T00:00:02Z"}}"#.to_string(),
            format!(r#"{{"id":"m2","timestamp":"2026-01-01T00:00:02Z","type":"gemini","content":"","toolCalls":[{CALL}]}}"#),
            r#"{"id":"m3","timestamp":"2026-01-01T00:00:06Z","type":"user","content":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"Output: boom\nExit Code: 2"}}}]}"#.to_string(),
            r#"{"id":"m4","timestamp":"2026-01-01T00:00:07Z","type":"gemini","content":"It fails."}"#.to_string(),
            r#"{"id":"m5","timesta"#.to_string(),
        ]
        .join("\n")
    }

    #[test]
    fn gemini_jsonl_records_fold_into_the_chat_they_describe() {
        let (chat, skipped) = fold_records(&records()).unwrap();
        assert_eq!(skipped, 1);
        assert_eq!(chat["sessionId"], "s1");
        assert_eq!(chat["lastUpdated"], "2026-01-01T00:00:02Z");
        let ids: Vec<&str> = chat["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        // Written twice, kept once, where it first appeared, with its last content.
        assert_eq!(ids, ["m0", "m1", "m2", "m3", "m4"]);
        assert_eq!(chat["messages"][2]["toolCalls"][0]["id"], "c1");
        // Not the records: the chat file, or Qwen's records.
        assert!(fold_records(r#"{"sessionId":"s1","messages":[]}"#).is_none());
        let qwen = r#"{"uuid":"u","sessionId":"q","type":"user","message":{"role":"user","parts":[{"text":"hi"}]}}"#;
        assert!(fold_records(qwen).is_none());
    }

    #[test]
    fn gemini_jsonl_records_play_as_the_same_chat_file_does() {
        let expected = [
            ("UserPromptSubmit", String::new()),
            ("PreToolUse", "Bash".to_string()),
            ("PostToolUseFailure", "Bash".to_string()),
            ("Stop", String::new()),
        ];
        // The records: one prompt (not the session context, not the call's answer), one call.
        assert_eq!(events(Cli::Gemini, &records()), expected);
        let c = convert(Cli::Gemini, &records(), "fb");
        assert_eq!(c.sessions_id, "s1");
        assert_eq!(c.skipped_lines, 1);
        assert_eq!(c.payloads[0].payload["prompt"], "build it");
        assert_eq!(c.payloads[3].payload["last_assistant_message"], "It fails.");
        // The chat file of the same turn.
        let file = format!(
            r#"{{"sessionId":"s1","projectHash":"h","messages":[
            {{"id":"m1","timestamp":"2026-01-01T00:00:01Z","type":"user","content":[{{"text":"build it"}}]}},
            {{"id":"m2","timestamp":"2026-01-01T00:00:02Z","type":"gemini","content":"","toolCalls":[{CALL}]}},
            {{"id":"m4","timestamp":"2026-01-01T00:00:07Z","type":"gemini","content":"It fails."}}]}}"#
        );
        assert_eq!(events(Cli::Gemini, &file), expected);
        // Without the fold, the records were none of this.
        let (cli, kind) = crate::replay::format::inspect(&records());
        assert_eq!(cli, Cli::Gemini);
        assert_eq!(
            kind,
            crate::replay::transcript::Kind::Session {
                session_id: Some("s1".into())
            }
        );
    }

    #[test]
    fn a_subagents_chat_has_calls_but_no_prompt_or_stop() {
        let chat = |kind: &str| {
            format!(
                r#"{{"sessionId":"ngzcxj","kind":"{kind}","messages":[{{"type":"user","content":[{{"text":"Your task is to answer"}}]}},{{"type":"gemini","content":"","toolCalls":[{CALL}]}},{{"type":"gemini","content":"The answer."}}]}}"#
            )
        };
        assert_eq!(
            events(Cli::Gemini, &chat("subagent")),
            [
                ("PreToolUse", "Bash".to_string()),
                ("PostToolUseFailure", "Bash".to_string()),
            ]
        );
        assert_eq!(events(Cli::Gemini, &chat("main")).len(), 4);
    }

    #[test]
    fn calls_refused_before_any_hook_are_not_played() {
        let refused = |name: &str, error: &str| {
            format!(
                r#"{{"id":"{name}","name":"{name}","args":{{}},"result":[{{"functionResponse":{{"response":{{"error":{error:?}}}}}}}],"status":"error"}}"#
            )
        };
        let calls = [
            refused(
                "run_shell_command",
                "params must have required property 'command'",
            ),
            refused(
                "no_such_tool",
                "Tool \"no_such_tool\" not found. Did you mean one of: \"read_file\"?",
            ),
            refused(
                "write_file",
                "Path not in workspace: Attempted path \"/x\" resolves outside",
            ),
            refused("read_file", "File not found: /p/missing.txt"),
        ]
        .join(",");
        let file = format!(
            r#"{{"sessionId":"s","messages":[{{"type":"user","content":"go"}},{{"type":"gemini","content":"","toolCalls":[{calls}]}},{{"type":"gemini","content":"done"}}]}}"#
        );
        // Only the missing file went through the hooks (and failed).
        assert_eq!(
            events(Cli::Gemini, &file),
            [
                ("UserPromptSubmit", String::new()),
                ("PreToolUse", "Read".to_string()),
                ("PostToolUseFailure", "Read".to_string()),
                ("Stop", String::new()),
            ]
        );
        // Qwen says so itself: `executionStatus: "not_started"`.
        let qwen = [
            r#"{"sessionId":"q","timestamp":"2026-01-01T00:00:00Z","type":"user","message":{"role":"user","parts":[{"text":"go"}]}}"#,
            r#"{"sessionId":"q","timestamp":"2026-01-01T00:00:01Z","type":"assistant","message":{"role":"model","parts":[{"functionCall":{"id":"a","name":"run_shell_command","args":{"nocommand":true}}},{"functionCall":{"id":"b","name":"read_file","args":{"file_path":"/p/x"}}}]}}"#,
            r#"{"sessionId":"q","timestamp":"2026-01-01T00:00:02Z","type":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"a","name":"run_shell_command","response":{"error":"params must have required property 'command'"}}}]},"toolCallResult":{"callId":"a","status":"error","errorType":"invalid_tool_params","executionStatus":"not_started"}}"#,
            r#"{"sessionId":"q","timestamp":"2026-01-01T00:00:03Z","type":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"b","name":"read_file","response":{"output":"x"}}}]},"toolCallResult":{"callId":"b","status":"success","executionStatus":"success"}}"#,
            r#"{"sessionId":"q","timestamp":"2026-01-01T00:00:04Z","type":"assistant","message":{"role":"model","parts":[{"text":"done"}]}}"#,
        ]
        .join("\n");
        let names: Vec<String> = convert(Cli::Qwen, &qwen, "fb")
            .call_list
            .iter()
            .map(|c| c.tool_name.clone())
            .collect();
        assert_eq!(names, ["Read"]);
    }
}
