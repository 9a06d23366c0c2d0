//! GitHub Copilot CLI session events (`~/.copilot/session-state/<session>/events.jsonl`, earlier
//! `~/.copilot/session-state/<session>.jsonl`): one `{"type", "data", "id", "timestamp",
//! "parentId"}` event per line; a subagent's events carry a top-level `agentId`.
//!
//! What is read, and how:
//! - `user.message` typed by the person (no `source`: the CLI's own injected messages — system
//!   reminders, skill contexts, discovered instructions — carry one) → UserPromptSubmit; a
//!   subagent's task message starts its turn without a prompt;
//! - `tool.execution_start` → PreToolUse at its time, `tool.execution_complete` (paired by
//!   `toolCallId`) → PostToolUse or PostToolUseFailure at its time, with the answer the hook gets
//!   (`{resultType, textResultForLlm}`): `success: false` is a failure, and a shell command's
//!   `<shellId: N completed with exit code X>` is read by the live dialect, exit code and all.
//!   Tool names as the live dialect maps them (`bash` → `Bash`, `view` → `Read`, `create` →
//!   `Write`, `edit` → `Edit`, `grep` → `Grep`, `glob` → `Glob`, `task` → `Task`, a string
//!   `apply_patch` as a patch); the others keep Copilot's names (`powershell`, `read_powershell`,
//!   `rg`, `sql`, …);
//! - a turn ends where the `agentStop` hook started (Stop), or, in a file without hooks, where the
//!   next prompt comes after a model answer without calls; a subagent's ends at its
//!   `subagentStop` hook or `subagent.completed`/`subagent.failed` (SubagentStop);
//! - `abort` interrupts the turn (no Stop).
//!
//! What the file cannot tell: Copilot's hook payloads carry no call id, so answers are paired by
//! identity there as in replay; an async shell (`mode: "async"`) answers at once and its
//! `read_*` polls are calls of their own, as the hook sees them.

use super::native::{self, Answer, Step, Timed, Who};
use super::transcript::{parse_time, Converted};
use super::Cli;
use serde_json::{json, Value};
use std::collections::HashMap;

pub fn convert(text: &str, fallback_session_id: &str) -> Converted {
    let mut session = None;
    let mut steps = Vec::new();
    let mut skipped = 0;
    // Subagents by the task call that started them.
    let mut kinds: HashMap<String, String> = HashMap::new();
    // Per agent ("" the main one): a turn is open, and its last model answer had calls.
    let mut open: HashMap<String, (bool, bool)> = HashMap::new();
    let mut last_at = None;
    for line in native::json_lines(text) {
        let Some(e) = line else {
            skipped += 1;
            continue;
        };
        let at = e["timestamp"].as_str().and_then(parse_time).or(last_at);
        let prev_at = last_at;
        last_at = at;
        let d = &e["data"];
        let who = str_at(&e, "/agentId").map(|id| Who {
            id: id.to_string(),
            kind: kinds
                .get(id)
                .cloned()
                .unwrap_or_else(|| "general-purpose".into()),
        });
        let k = who.as_ref().map(|w| w.id.clone()).unwrap_or_default();
        // A turn the file shows ending only by the next prompt ended with the model's answer.
        let mut ended_before: Option<Step> = None;
        let mut found: Vec<Step> = Vec::new();
        let mut push = |step: Step| found.push(step);
        match str_at(&e, "/type").unwrap_or("") {
            "session.start" => {
                session = str_at(d, "/sessionId").map(str::to_string);
                if let Some(cwd) = str_at(d, "/context/cwd") {
                    push(Step::Cwd(cwd.to_string()));
                }
            }
            "session.context_changed" => {
                if let Some(cwd) = str_at(d, "/cwd") {
                    push(Step::Cwd(cwd.to_string()));
                }
            }
            "subagent.started" => {
                if let (Some(id), Some(name)) = (str_at(d, "/toolCallId"), str_at(d, "/agentName"))
                {
                    kinds.insert(id.to_string(), name.to_string());
                }
            }
            "user.message" => {
                if who.is_some() {
                    push(Step::Begin {
                        who: who.clone(),
                        prompt_id: None,
                    });
                    open.insert(k, (true, false));
                } else if d.get("source").is_none() {
                    let state = open.entry(k).or_default();
                    if state.0 && !state.1 {
                        ended_before = Some(Step::End {
                            who: None,
                            last_message: None,
                        });
                    }
                    push(Step::Prompt {
                        text: str_at(d, "/content").unwrap_or("").to_string(),
                        prompt_id: None,
                    });
                    *state = (true, false);
                }
            }
            "assistant.message" => {
                let calls = d["toolRequests"].as_array().is_some_and(|r| !r.is_empty());
                let state = open.entry(k).or_default();
                *state = (true, calls);
                push(Step::Say {
                    who: who.clone(),
                    text: str_at(d, "/content").unwrap_or("").to_string(),
                });
            }
            "tool.execution_start" => {
                if let Some(id) = str_at(d, "/toolCallId") {
                    push(Step::Call {
                        who: who.clone(),
                        id: id.to_string(),
                        name: str_at(d, "/toolName").unwrap_or("").to_string(),
                        input: d["arguments"].clone(),
                        cwd: None,
                    });
                }
            }
            "tool.execution_complete" => {
                if let Some(id) = str_at(d, "/toolCallId") {
                    let success = d["success"].as_bool().unwrap_or(true);
                    let text = str_at(d, "/result/content")
                        .or_else(|| str_at(d, "/error/message"))
                        .unwrap_or("");
                    let raw = json!({
                        "resultType": if success { "success" } else { "failure" },
                        "textResultForLlm": text,
                    });
                    push(Step::Answer {
                        who: who.clone(),
                        id: id.to_string(),
                        answer: Answer::new(raw, None),
                    });
                }
            }
            "hook.start" => match str_at(d, "/hookType") {
                Some("agentStop") if who.is_none() => {
                    push(Step::End {
                        who: None,
                        last_message: None,
                    });
                    open.remove("");
                }
                Some("subagentStop") if who.is_some() => {
                    push(Step::End {
                        who: who.clone(),
                        last_message: None,
                    });
                    open.remove(&k);
                }
                _ => {}
            },
            "subagent.completed" | "subagent.failed" => {
                let sub = str_at(d, "/toolCallId").map(|id| Who {
                    id: id.to_string(),
                    kind: kinds
                        .get(id)
                        .cloned()
                        .unwrap_or_else(|| "general-purpose".into()),
                });
                if let Some(sub) = sub {
                    open.remove(&sub.id);
                    push(Step::End {
                        who: Some(sub),
                        last_message: None,
                    });
                }
            }
            "abort" => {
                push(Step::Interrupt { who: who.clone() });
                open.remove(&k);
            }
            _ => {}
        }
        if let Some(step) = ended_before {
            steps.push(Timed { at: prev_at, step });
        }
        steps.extend(found.into_iter().map(|step| Timed { at, step }));
    }
    if open.get("").is_some_and(|s| s.0 && !s.1) {
        steps.push(Timed::end(last_at, None));
    }
    let session = session.unwrap_or_else(|| fallback_session_id.to_string());
    native::build(Cli::Copilot, session, vec![steps], skipped)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}
