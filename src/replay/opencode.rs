//! OpenCode sessions as `opencode export <session>` prints them: one JSON object `{"info":
//! <session>, "messages": [{"info": <message>, "parts": [<part>…]}]}` (times in epoch ms). A
//! child session (a `task` subagent's) names its parent in `info.parentID`.
//!
//! OpenCode runs no hook command; loopgate's plugin speaks for it (`docs/opencode-observed.md`)
//! and passes OpenCode's own tool names and keys, which this mapping turns into Claude Code's for
//! the live hook and for replay alike, by what each tool does:
//! `bash` → `Bash`, `read` → `Read`, `write` → `Write`, `edit` → `Edit`, `multiedit` →
//! `MultiEdit`, `glob` → `Glob`, `grep` → `Grep`, `list` → `LS`, `webfetch` → `WebFetch`,
//! `websearch` → `WebSearch`, `task` → `Task`, `todowrite` → `TodoWrite`, `apply_patch` as a
//! Codex patch (Write or Edit); input keys `filePath`, `oldString`, `newString`, `replaceAll`
//! become `file_path`, `old_string`, `new_string`, `replace_all`. Other tools keep their names.
//!
//! What is read, and how:
//! - a user message with text the person typed (not only `synthetic` parts: attached files, the
//!   CLI's own "Continue…") → UserPromptSubmit at its `time.created`;
//! - each `tool` part → PreToolUse at `state.time.start`, and PostToolUse or PostToolUseFailure
//!   at `state.time.end`: status `error` (its `error` text) or a shell's `metadata.exit` other
//!   than 0 is a failure (`exit: null` with "User aborted the command": the person stopped it,
//!   `is_interrupt`); a part still `running` or `pending` has no answer;
//! - an assistant message that finished with `stop` ends the turn (Stop at its
//!   `time.completed`); one aborted (`MessageAbortedError`) interrupts it (no Stop);
//! - a child session is its parent's subagent: `agent_id` its session id, `agent_type` its agent,
//!   its turn ends with SubagentStop. OpenCode exports the child apart from its parent.
//!
//! What the file cannot tell: which events the plugin saw; the mapping follows it (a call's
//! PreToolUse at its start, its answer at its end, the turn's end where the session went idle); an `invalid` part (arguments that did not parse) ran no tool and
//! is left out, as Claude Code fires no hook for a call its input validation rejects.

use super::native::{self, from_ms, Answer, Step, Timed, Who};
use super::transcript::Converted;
use super::Cli;
use serde_json::{json, Value};

pub fn convert(text: &str, fallback_session_id: &str) -> Converted {
    convert_group(text, &[], fallback_session_id)
}

/// Converts a session's export (may be empty) with its child sessions' exports.
pub fn convert_group(main: &str, children: &[&str], fallback_session_id: &str) -> Converted {
    let mut session_id = None;
    let mut files = Vec::new();
    let mut skipped = 0;
    for text in std::iter::once(main).chain(children.iter().copied()) {
        if text.trim().is_empty() {
            continue;
        }
        let Ok(export) = serde_json::from_str::<Value>(text.trim()) else {
            skipped += 1;
            continue;
        };
        let id = str_at(&export, "/info/id").unwrap_or("").to_string();
        let parent = str_at(&export, "/info/parentID").map(str::to_string);
        if session_id.is_none() {
            session_id = parent.clone().or_else(|| Some(id.clone()));
        }
        let who = parent.map(|_| Who {
            id: id.clone(),
            kind: str_at(&export, "/info/agent")
                .or_else(|| {
                    export["messages"]
                        .as_array()?
                        .iter()
                        .find_map(|m| str_at(m, "/info/agent").or_else(|| str_at(m, "/info/mode")))
                })
                .unwrap_or("general")
                .to_string(),
        });
        files.push(steps(&export, who));
    }
    let session_id = session_id
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| fallback_session_id.to_string());
    native::build(Cli::OpenCode, session_id, files, skipped)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn ms_at(v: &Value, pointer: &str) -> Option<std::time::SystemTime> {
    v.pointer(pointer).and_then(Value::as_u64).map(from_ms)
}

/// The steps of one export, in time order (a step's parallel calls overlap).
fn steps(export: &Value, who: Option<Who>) -> Vec<Timed> {
    let mut out: Vec<Timed> = Vec::new();
    if let Some(dir) = str_at(export, "/info/directory") {
        out.push(Timed {
            at: None,
            step: Step::Cwd(dir.to_string()),
        });
    }
    let messages = export["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    // The model is still at work: its last message finished with calls to make.
    let mut working = false;
    let mut seen = std::collections::HashSet::new();
    for m in messages {
        let info = &m["info"];
        let created = ms_at(info, "/time/created");
        let parts = m["parts"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if str_at(info, "/role") == Some("user") {
            let typed: Vec<&str> = parts
                .iter()
                .filter(|p| {
                    str_at(p, "/type") == Some("text")
                        && p.get("synthetic").and_then(Value::as_bool) != Some(true)
                        && p.get("ignored").and_then(Value::as_bool) != Some(true)
                })
                .filter_map(|p| str_at(p, "/text"))
                .collect();
            if typed.is_empty() {
                continue;
            }
            if working {
                // Typed while the model worked: OpenCode hands it to the model at its next step,
                // so the turn before never ended (no Stop) and this one starts here.
                out.push(Timed {
                    at: created,
                    step: Step::Interrupt { who: who.clone() },
                });
                working = false;
            }
            let step = match &who {
                // A child session's task is its subagent's start, not a prompt of the person's.
                Some(w) => Step::Begin {
                    who: Some(w.clone()),
                    prompt_id: None,
                },
                None => Step::Prompt {
                    text: typed.join("\n"),
                    prompt_id: None,
                },
            };
            out.push(Timed { at: created, step });
            continue;
        }
        let mut events: Vec<Timed> = Vec::new();
        let mut last = created;
        for p in parts {
            match str_at(p, "/type") {
                Some("text") if p.get("synthetic").and_then(Value::as_bool) != Some(true) => {
                    let at = ms_at(p, "/time/end").or(ms_at(p, "/time/start")).or(last);
                    events.push(Timed {
                        at,
                        step: Step::Say {
                            who: who.clone(),
                            text: str_at(p, "/text").unwrap_or("").to_string(),
                        },
                    });
                }
                Some("tool") => {
                    let tool = str_at(p, "/tool").unwrap_or("");
                    if tool == "invalid" {
                        continue;
                    }
                    // The part's own id: models reuse call ids (`functions.bash:0`); an id seen
                    // before (Entire redacts some to `REDACTED`) is told apart by its place.
                    let mut id = str_at(p, "/id")
                        .or_else(|| str_at(p, "/callID"))
                        .unwrap_or("call")
                        .to_string();
                    if !seen.insert(id.clone()) {
                        id = format!("{id}#{}", seen.len());
                        seen.insert(id.clone());
                    }
                    let state = &p["state"];
                    let start = ms_at(state, "/time/start").or(last);
                    let end = ms_at(state, "/time/end").map(|e| start.map_or(e, |s| e.max(s)));
                    events.push(Timed {
                        at: start,
                        step: Step::Call {
                            who: who.clone(),
                            id: id.clone(),
                            name: tool.to_string(),
                            input: state["input"].clone(),
                            cwd: None,
                        },
                    });
                    if let Some(answer) = answer(tool, state) {
                        events.push(Timed {
                            at: end.or(start),
                            step: Step::Answer {
                                who: who.clone(),
                                id,
                                answer,
                            },
                        });
                    }
                    last = end.or(start).or(last);
                }
                _ => {}
            }
        }
        // Stable: a call's answer never comes before the call.
        events.sort_by_key(|t| t.at);
        out.extend(events);
        let completed = ms_at(info, "/time/completed").or(last);
        working = str_at(info, "/finish") == Some("tool-calls") && info.get("error").is_none();
        if info.pointer("/error/name").and_then(Value::as_str) == Some("MessageAbortedError") {
            out.push(Timed {
                at: completed,
                step: Step::Interrupt { who: who.clone() },
            });
        } else if str_at(info, "/finish") == Some("stop") {
            out.push(Timed {
                at: completed,
                step: Step::End {
                    who: who.clone(),
                    last_message: None,
                },
            });
        }
    }
    out
}

/// A tool part's answer; `None` while it was still running.
fn answer(tool: &str, state: &Value) -> Option<Answer> {
    match str_at(state, "/status") {
        Some("error") => {
            let text = match &state["error"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            Some(Answer::new(json!(text), Some(true)))
        }
        Some("completed") => {
            let text = match &state["output"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            if tool != "bash" {
                return Some(Answer::new(json!(text), Some(false)));
            }
            let exit = state.pointer("/metadata/exit");
            let failed = match exit {
                Some(Value::Number(n)) => n.as_i64() != Some(0),
                // Killed (stopped by the person, or its timeout) before it exited.
                Some(Value::Null) => true,
                _ => false,
            };
            let mut a = Answer::new(json!(text), Some(failed));
            a.interrupted = exit == Some(&Value::Null) && text.contains("User aborted the command");
            Some(a)
        }
        _ => None,
    }
}
