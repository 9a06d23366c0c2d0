//! Codex rollouts (`$CODEX_HOME/sessions/…/rollout-…-<thread>.jsonl`): one
//! `{"timestamp", "type", "payload"}` object per line, written by the terminal CLI and by Codex
//! Desktop alike.
//!
//! What is read, and how:
//! - `event_msg` `user_message` → UserPromptSubmit (its `prompt_id` the turn's `turn_id`, as
//!   Codex's hooks carry it); the same text recorded again before the model answers (review
//!   mode writes the event twice) is the same prompt; a rollout with no such event has its
//!   prompts read from the `response_item` user messages, Codex's own context left out; `task_started` opens a turn, `task_complete` ends it (Stop, with its
//!   `last_agent_message`), `turn_aborted` interrupts it (no Stop);
//! - `response_item` `function_call` / `custom_tool_call` → PreToolUse at its line's time, its
//!   `*_output` (paired by `call_id`) → PostToolUse or PostToolUseFailure at that line's time.
//!   Tool names as Codex's hooks give them: a shell command (`shell_command`, unified exec's
//!   `exec_command`, 0.144 code mode's `exec` cell holding one `tools.exec_command`) is `Bash`
//!   with `{command}`, a patch `apply_patch` with `{command: <patch>}` (then Write or Edit, as the
//!   live dialect maps it); other tools keep their names (`write_stdin`, `update_plan`,
//!   `spawn_agent`, `wait_agent`, …);
//! - success or failure: the exit code the rollout records (`exec_command_end`, the output's
//!   `Exit code: N` or `Process exited with code N`, the older rollouts' envelope
//!   `{"output", "metadata": {"exit_code"}}` of any tool, `shell` and `apply_patch` alike, whose
//!   answer is its `output`, a code-mode cell's `exit_code`); with none (a code-mode cell that printed only the output), the text, as
//!   the live hook judges it. The answer is the command's output without the header (chunk id,
//!   wall time, token count), which is what Codex's hook gets;
//! - a command still running when its call returned (`Process running with session ID N`) gets
//!   its Post event when a `write_stdin` poll of that session reports its exit (`Process exited
//!   with code N`), with the output of all its chunks: Codex fires the command's PostToolUse then,
//!   and no hook at all for `write_stdin` (observed with Codex 0.169.0: `docs/agents.md`);
//! - hosted tools (`web_search_call`, `tool_search_call`) run no local tool and fire no hook;
//! - a subagent's rollout (`session_meta.parent_thread_id`) is merged into its parent's by time:
//!   its calls carry `agent_id` (its thread id) and `agent_type`, the parent's `session_id`, and
//!   each of its turns ends with SubagentStop.

use super::native::{self, Answer, Step, Timed, Who};
use super::transcript::{parse_time, Converted};
use super::Cli;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Converts a session's rollout (may be empty) with its subagents' rollouts.
pub fn convert_group(main: &str, subagents: &[&str], fallback_session_id: &str) -> Converted {
    let mut skipped = 0;
    let mut session_id = None;
    let mut files = Vec::new();
    for (i, text) in std::iter::once(main)
        .chain(subagents.iter().copied())
        .enumerate()
    {
        if text.trim().is_empty() {
            continue;
        }
        let r = read(text);
        skipped += r.skipped;
        if session_id.is_none() {
            session_id = if i == 0 {
                r.id.clone()
            } else {
                r.parent.clone()
            };
        }
        files.push(r.steps);
    }
    let session_id = session_id.unwrap_or_else(|| fallback_session_id.to_string());
    native::build(Cli::Codex, session_id, files, skipped)
}

struct Rollout {
    id: Option<String>,
    parent: Option<String>,
    steps: Vec<Timed>,
    skipped: usize,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn read(text: &str) -> Rollout {
    let mut r = Rollout {
        id: None,
        parent: None,
        steps: Vec::new(),
        skipped: 0,
    };
    let mut who: Option<Who> = None;
    let mut meta_seen = false;
    // Per call: its tool as replayed, and the exit code an `exec_command_end` reported.
    let mut tools: HashMap<String, String> = HashMap::new();
    let mut exit_codes: HashMap<String, i64> = HashMap::new();
    // Unified exec sessions still running: their command's call id and output so far; and each
    // `write_stdin` poll's session.
    let mut running: HashMap<i64, (String, String)> = HashMap::new();
    let mut polls: HashMap<String, i64> = HashMap::new();
    // The success of the last patch applied (code-mode patches report it only this way).
    let mut patch_ok: Option<bool> = None;
    let mut turn_id: Option<String> = None;
    // The person's prompt is `event_msg` `user_message`; the model's copy of it, a
    // `response_item` user message, is read only from a rollout that records no such event.
    let events_have_prompts = native::json_lines(text).flatten().any(|l| {
        str_at(&l, "/type") == Some("event_msg")
            && str_at(&l, "/payload/type") == Some("user_message")
    });
    // The prompt of the turn so far, until the model answers: the same text recorded again in
    // the same turn (review mode writes its `user_message` twice) is the same prompt.
    let mut prompt_seen: Option<String> = None;
    for line in native::json_lines(text) {
        let Some(line) = line else {
            r.skipped += 1;
            continue;
        };
        let at = str_at(&line, "/timestamp").and_then(parse_time);
        let p = &line["payload"];
        let mut found: Vec<Step> = Vec::new();
        let mut push = |step: Step| found.push(step);
        match (str_at(&line, "/type"), str_at(p, "/type")) {
            (Some("session_meta"), _) => {
                if meta_seen {
                    continue; // a resumed session repeats it
                }
                meta_seen = true;
                r.id = str_at(p, "/id").map(str::to_string);
                r.parent = str_at(p, "/parent_thread_id")
                    .or_else(|| str_at(p, "/source/subagent/thread_spawn/parent_thread_id"))
                    .map(str::to_string);
                let is_subagent = r.parent.is_some() || p.pointer("/source/subagent").is_some();
                if is_subagent {
                    let kind = str_at(p, "/source/subagent/thread_spawn/agent_role")
                        .or_else(|| str_at(p, "/source/subagent"))
                        .unwrap_or("default");
                    who = Some(Who {
                        id: r.id.clone().unwrap_or_else(|| "subagent".into()),
                        kind: kind.to_string(),
                    });
                }
                if let Some(cwd) = str_at(p, "/cwd") {
                    push(Step::Cwd(cwd.to_string()));
                }
            }
            (Some("turn_context"), _) => {
                if let Some(cwd) = str_at(p, "/cwd") {
                    push(Step::Cwd(cwd.to_string()));
                }
            }
            (Some("event_msg"), Some("task_started")) => {
                prompt_seen = None;
                turn_id = str_at(p, "/turn_id").map(str::to_string);
                push(Step::Begin {
                    who: who.clone(),
                    prompt_id: turn_id.clone(),
                });
            }
            // A subagent's task fires UserPromptSubmit in Codex, which loopgate does not count
            // as a prompt of the person's.
            (Some("event_msg"), Some("user_message")) if who.is_none() => {
                let text = str_at(p, "/message").unwrap_or("").to_string();
                if let Some(step) = prompt(text, &mut prompt_seen, &turn_id) {
                    push(step);
                }
            }
            (Some("response_item"), Some("message"))
                if who.is_none() && !events_have_prompts && str_at(p, "/role") == Some("user") =>
            {
                let text = message_text(&p["content"]);
                if !is_injected(&text) {
                    if let Some(step) = prompt(text, &mut prompt_seen, &turn_id) {
                        push(step);
                    }
                }
            }
            (Some("event_msg"), Some("task_complete")) => {
                prompt_seen = None;
                push(Step::End {
                    who: who.clone(),
                    last_message: str_at(p, "/last_agent_message").map(str::to_string),
                });
            }
            (Some("event_msg"), Some("turn_aborted")) => {
                prompt_seen = None;
                push(Step::Interrupt { who: who.clone() });
            }
            (Some("event_msg"), Some("exec_command_end")) => {
                if let (Some(id), Some(code)) = (str_at(p, "/call_id"), p["exit_code"].as_i64()) {
                    exit_codes.insert(id.to_string(), code);
                }
            }
            (Some("event_msg"), Some("patch_apply_end")) => {
                patch_ok = p["success"].as_bool();
            }
            (Some("response_item"), Some("message")) if str_at(p, "/role") == Some("assistant") => {
                prompt_seen = None;
                push(Step::Say {
                    who: who.clone(),
                    text: message_text(&p["content"]),
                });
            }
            (Some("response_item"), Some("function_call" | "custom_tool_call")) => {
                let Some(id) = str_at(p, "/call_id") else {
                    continue;
                };
                let name = str_at(p, "/name").unwrap_or("");
                let (name, input) = as_hook_call(name, p);
                tools.insert(id.to_string(), name.clone());
                // Codex fires no hook for a poll: it belongs to the command it polls.
                if name == "write_stdin" {
                    if let Some(session) = input.get("session_id").and_then(Value::as_i64) {
                        polls.insert(id.to_string(), session);
                    }
                    continue;
                }
                patch_ok = None;
                prompt_seen = None;
                push(Step::Call {
                    who: who.clone(),
                    id: id.to_string(),
                    name,
                    input,
                    cwd: workdir(p),
                });
            }
            (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
                let Some(id) = str_at(p, "/call_id") else {
                    continue;
                };
                let tool = tools.get(id).map(String::as_str).unwrap_or("");
                let output = output_text(&p["output"]);
                if tool == "write_stdin" {
                    // Its steps are the polled command's answer, once the poll reports the exit.
                    found.extend(polled(&mut running, polls.get(id), &output, &who));
                } else if let Some(session) = running_session(&output) {
                    // Still running: its Post comes when a poll reports its exit.
                    running.insert(session, (id.to_string(), split_header(&output).0));
                } else {
                    push(tool_answer(
                        tool,
                        id,
                        &output,
                        exit_codes.get(id).copied(),
                        patch_ok,
                        &who,
                    ));
                }
            }
            _ => {}
        }
        r.steps
            .extend(found.into_iter().map(|step| Timed { at, step }));
    }
    r
}

/// The Post step of a call's output: its answer, or none yet for one still running.
fn tool_answer(
    tool: &str,
    id: &str,
    output: &str,
    exit_code: Option<i64>,
    patch_ok: Option<bool>,
    who: &Option<Who>,
) -> Step {
    match answer(tool, output, exit_code, patch_ok) {
        Some(answer) => Step::Answer {
            who: who.clone(),
            id: id.to_string(),
            answer,
        },
        // No outcome (an envelope saying it still runs): Codex fires no PostToolUse for it.
        None => Step::NoAnswer {
            who: who.clone(),
            id: id.to_string(),
        },
    }
}

/// The session id of a unified exec command still running when its call returned.
fn running_session(output: &str) -> Option<i64> {
    let (_, code) = split_header(output);
    if code != Some(None) {
        return None;
    }
    output.lines().find_map(|l| {
        l.trim_end()
            .strip_prefix("Process running with session ID ")?
            .trim()
            .parse()
            .ok()
    })
}

/// A `write_stdin` poll's output: one more chunk of its command's output, and once the poll
/// reports the exit, the command's answer (all its output, failed by its exit code).
fn polled(
    running: &mut HashMap<i64, (String, String)>,
    session: Option<&i64>,
    output: &str,
    who: &Option<Who>,
) -> Option<Step> {
    let session = *session?;
    let (body, code) = split_header(output);
    let (_, so_far) = running.get_mut(&session)?;
    so_far.push_str(&body);
    let Some(Some(code)) = code else {
        return None;
    };
    let (id, text) = running.remove(&session)?;
    Some(Step::Answer {
        who: who.clone(),
        id,
        answer: Answer::new(json!(text), Some(code != 0)),
    })
}

/// The prompt step for `text`, or `None` when it is the prompt this turn already has.
fn prompt(text: String, seen: &mut Option<String>, turn_id: &Option<String>) -> Option<Step> {
    if seen.as_deref().map(str::trim) == Some(text.trim()) {
        return None;
    }
    *seen = Some(text.clone());
    Some(Step::Prompt {
        text,
        prompt_id: turn_id.clone(),
    })
}

/// A user message Codex writes itself, not the person: the project's instructions, the
/// environment, skills, review results, an interrupted turn's notice (`<…>` blocks).
fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    t.is_empty() || t.starts_with('<') || t.starts_with("# AGENTS.md instructions")
}

/// The directory a shell call ran in (`workdir`), which Codex's hooks give as `cwd`; a
/// code-mode cell's is inside its one call.
fn workdir(p: &Value) -> Option<String> {
    let args = match &p["arguments"] {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        _ => match &p["input"] {
            Value::String(cell) => {
                return js_field(
                    cell.get(cell.find("tools.exec_command(")?..)?.get(19..)?,
                    "workdir",
                )
            }
            _ => return None,
        },
    };
    args.get("workdir")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The `text` of each item of a list, joined by `sep`.
fn texts(items: &[Value], sep: &str) -> String {
    items
        .iter()
        .filter_map(|i| i.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(sep)
}

/// An assistant message's text.
fn message_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => texts(items, "\n"),
        _ => String::new(),
    }
}

/// A tool output: a string, or (custom tools) a list of `input_text` items.
fn output_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        Value::Array(items) => texts(items, ""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The call as Codex's hooks name it: the shell tool is `Bash` with only `{command}`, a patch is
/// `apply_patch` with `{command: <patch>}`, a code-mode cell is the one tool it calls.
fn as_hook_call(name: &str, p: &Value) -> (String, Value) {
    let args = match (&p["arguments"], &p["input"]) {
        (Value::String(s), _) => serde_json::from_str(s).unwrap_or_else(|_| json!({ "input": s })),
        (Value::Null, Value::String(s)) => Value::String(s.clone()),
        (v @ Value::Object(_), _) => v.clone(),
        _ => json!({}),
    };
    match name {
        "shell_command" | "exec_command" | "shell" | "local_shell" => {
            let command = match args.get("command").or_else(|| args.get("cmd")) {
                Some(Value::String(s)) => s.clone(),
                // `shell`: ["bash", "-lc", "<command>"]
                Some(Value::Array(argv)) => argv
                    .last()
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                _ => String::new(),
            };
            ("Bash".into(), json!({ "command": command }))
        }
        "apply_patch" => {
            let patch = match &args {
                Value::String(s) => s.clone(),
                v => v
                    .get("input")
                    .or_else(|| v.get("patch"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            };
            ("apply_patch".into(), json!({ "command": patch }))
        }
        "exec" => match args.as_str().and_then(code_cell_call) {
            Some(call) => call,
            None => (
                "exec".into(),
                json!({ "code": args.as_str().unwrap_or_default() }),
            ),
        },
        _ => (
            name.to_string(),
            match args {
                v @ Value::Object(_) => v,
                other => json!({ "input": other }),
            },
        ),
    }
}

/// The one tool a code-mode cell calls (`await tools.exec_command({...})`), as if called directly.
fn code_cell_call(cell: &str) -> Option<(String, Value)> {
    let mut calls = Vec::new();
    let mut rest = cell;
    while let Some(i) = rest.find("tools.") {
        let after = &rest[i + 6..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let tail = &after[name.len()..];
        if !name.is_empty() && tail.starts_with('(') {
            calls.push((name, &tail[1..]));
        }
        rest = after;
    }
    let [(name, arg)] = calls.as_slice() else {
        return None;
    };
    let arg = arg.trim_start();
    match name.as_str() {
        "exec_command" => {
            let command = js_field(arg, "cmd")?;
            Some(("Bash".into(), json!({ "command": command })))
        }
        "apply_patch" => {
            // `tools.apply_patch(patch)` after `const patch = "…"`, or the literal itself.
            let patch = if arg.starts_with('"') {
                first_json::<String>(arg)?
            } else {
                let var: String = arg
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let decl = format!("{var} = ");
                let at = cell.find(&decl)? + decl.len();
                first_json::<String>(&cell[at..])?
            };
            Some(("apply_patch".into(), json!({ "command": patch })))
        }
        _ => {
            let input = first_json::<Value>(arg)
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({ "code": cell }));
            Some((name.clone(), input))
        }
    }
}

/// The first JSON value at the start of `s` (what follows it is ignored).
fn first_json<T: serde::de::DeserializeOwned>(s: &str) -> Option<T> {
    serde_json::Deserializer::from_str(s)
        .into_iter::<T>()
        .next()?
        .ok()
}

/// A string field of a JS object literal (`{"cmd": "…"}` or `{cmd: "…"}`).
fn js_field(obj: &str, field: &str) -> Option<String> {
    if let Some(v) = first_json::<Value>(obj) {
        return v.get(field)?.as_str().map(str::to_string);
    }
    for key in [format!("\"{field}\":"), format!("{field}:")] {
        if let Some(i) = obj.find(&key) {
            return first_json::<String>(obj[i + key.len()..].trim_start());
        }
    }
    None
}

/// The output without the header Codex puts before it, and the exit code the header gives
/// (`None` when it gives none; `Some(None)` when the process is still running).
fn split_header(output: &str) -> (String, Option<Option<i64>>) {
    let mut code = None;
    let mut body_at = None;
    let mut offset = 0;
    for line in output.split_inclusive('\n') {
        let l = line.trim_end();
        if let Some(n) = l.strip_prefix("Exit code: ") {
            code = n.trim().parse().ok().map(Some);
        } else if let Some(n) = l.strip_prefix("Process exited with code ") {
            code = n.trim().parse().ok().map(Some);
        } else if l.starts_with("Process running with session ID ") {
            code = Some(None);
        } else if l == "Output:" {
            body_at = Some(offset + line.len());
            break;
        } else if !(l.starts_with("Chunk ID: ")
            || l.starts_with("Wall time")
            || l.starts_with("Original token count: ")
            || l.starts_with("Total output lines: ")
            || l.starts_with("Script completed"))
        {
            break;
        }
        offset += line.len();
    }
    match body_at {
        Some(at) => (output[at..].to_string(), code),
        None => (output.to_string(), None),
    }
}

/// The output and exit code of an envelope `{"output": "…", "metadata": {"exit_code": N, …}}`.
fn envelope(output: &str) -> Option<(String, Option<i64>)> {
    if !output.trim_start().starts_with('{') {
        return None;
    }
    let Ok(Value::Object(r)) = serde_json::from_str::<Value>(output) else {
        return None;
    };
    let text = r.get("output")?.as_str()?;
    let metadata = r.get("metadata")?.as_object()?;
    let code = metadata.get("exit_code").and_then(Value::as_i64);
    Some((text.to_string(), code))
}

/// The answer as Codex's hook gets it, and whether the call failed; `None`: the command was still
/// running when the call returned.
fn answer(
    tool: &str,
    output: &str,
    exit_code: Option<i64>,
    patch_ok: Option<bool>,
) -> Option<Answer> {
    if output.starts_with("execution error:") || output.starts_with("exec_command failed") {
        return Some(Answer::new(json!(output), Some(true)));
    }
    let code_mode = output.starts_with("Script ");
    let (mut body, mut code) = split_header(output);
    if code_mode {
        if !output.starts_with("Script completed") {
            return Some(Answer::new(json!(body), Some(true)));
        }
        // `text(JSON.stringify(r))`: the call's own result, exit code included.
        if let Ok(Value::Object(r)) = serde_json::from_str::<Value>(body.trim()) {
            if let Some(out) = r.get("output").and_then(Value::as_str) {
                code = match r.get("exit_code") {
                    Some(Value::Number(n)) => n.as_i64().map(Some),
                    _ if r.contains_key("session_id") => Some(None),
                    _ => None,
                };
                body = out.to_string();
            }
        }
    }
    // The older rollouts' envelope, any tool's (`shell`, `apply_patch`, …):
    // `{"output": "…", "metadata": {"exit_code": 0, "duration_seconds": 0.0}}`. The answer is
    // its `output`, the failure its exit code.
    if let Some((text, code)) = envelope(output) {
        let (body, header_code) = split_header(&text);
        let code = code.or(header_code.flatten()).or(exit_code);
        return match header_code {
            Some(None) => None,
            _ => Some(Answer::new(json!(body), code.map(|c| c != 0))),
        };
    }
    if tool == "apply_patch" || tool == "Write" || tool == "Edit" {
        if output.starts_with("apply_patch verification failed") {
            return Some(Answer::new(json!(output), Some(true)));
        }
        if code_mode {
            return Some(Answer::new(json!(body), patch_ok.map(|ok| !ok)));
        }
    }
    match code.or(exit_code.map(Some)) {
        Some(None) => None,
        Some(Some(c)) => Some(Answer::new(json!(body), Some(c != 0))),
        None => Some(Answer::new(json!(body), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_left_out_and_exit_codes_read() {
        let (body, code) = split_header(
            "Chunk ID: e7b603\nWall time: 0.0000 seconds\nProcess exited with code 2\nOriginal token count: 5\nOutput:\nboom\n",
        );
        assert_eq!((body.as_str(), code), ("boom\n", Some(Some(2))));
        let (body, code) = split_header(
            "Exit code: 0\nWall time: 0.1 seconds\nTotal output lines: 3\nOutput:\na\n",
        );
        assert_eq!((body.as_str(), code), ("a\n", Some(Some(0))));
        assert!(answer(
            "Bash",
            "Chunk ID: 1\nWall time: 10.0 seconds\nProcess running with session ID 7\nOriginal token count: 1\nOutput:\npartial\n",
            None,
            None
        )
        .is_none());
        let a = answer(
            "Bash",
            "Script completed\nWall time 0.6 seconds\nOutput:\n{\"chunk_id\":\"3\",\"wall_time_seconds\":0,\"exit_code\":1,\"output\":\"FAIL\\n\"}",
            None,
            None,
        )
        .unwrap();
        assert_eq!((a.raw, a.failed), (json!("FAIL\n"), Some(true)));
        let a = answer(
            "Edit",
            r#"{"output":"Success. Updated the following files:\nM a.ts\n","metadata":{"exit_code":0,"duration_seconds":0.0}}"#,
            None,
            None,
        )
        .unwrap();
        assert_eq!(a.failed, Some(false));
    }

    /// A rollout's lines from `(type, payload)` pairs, a second apart.
    fn rollout(lines: &[(&str, Value)]) -> String {
        let mut out = vec![
            json!({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
                                  "payload": {"id": "t1", "cwd": "/p"}})
            .to_string(),
        ];
        for (i, (kind, payload)) in lines.iter().enumerate() {
            let at = format!("2026-01-01T00:00:{:02}Z", i + 1);
            out.push(json!({"timestamp": at, "type": kind, "payload": payload}).to_string());
        }
        out.join("\n")
    }

    fn user_item(text: &str) -> (&'static str, Value) {
        (
            "response_item",
            json!({"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": text}]}),
        )
    }

    fn user_event(text: &str) -> (&'static str, Value) {
        (
            "event_msg",
            json!({"type": "user_message", "message": text, "images": []}),
        )
    }

    fn prompts(text: &str) -> Vec<String> {
        convert_group(text, &[], "fb")
            .payloads
            .iter()
            .filter(|p| p.event == "UserPromptSubmit")
            .map(|p| p.payload["prompt"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_prompt_recorded_twice_in_a_turn_is_one_prompt() {
        let said = (
            "response_item",
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": "ok"}]}),
        );
        let review = "Review the code changes against the base branch 'main'.";
        // The model's copy and the event; review mode's event written twice.
        let text = rollout(&[
            user_item("# AGENTS.md instructions for /p\n\n<INSTRUCTIONS>x</INSTRUCTIONS>"),
            user_item("<environment_context>\n  <cwd>/p</cwd>\n</environment_context>"),
            user_item("fix the build"),
            user_event("fix the build"),
            said.clone(),
            user_event(review),
            user_event(review),
            said.clone(),
            // The same words again after the model answered: a prompt of its own.
            user_item("ok"),
            user_event("ok"),
            said.clone(),
            user_item("ok"),
            user_event("ok"),
        ]);
        assert_eq!(prompts(&text), ["fix the build", review, "ok", "ok"]);
        // A rollout without prompt events: the model's copies, the CLI's own context left out.
        let text = rollout(&[
            user_item("<environment_context>\n  <cwd>/p</cwd>\n</environment_context>"),
            user_item("fix the build"),
            said.clone(),
            user_item("again"),
            user_item("again"),
        ]);
        assert_eq!(prompts(&text), ["fix the build", "again"]);
    }

    /// As the rollout of a real Codex 0.169.0 run records it (see `docs/agents.md`): a command
    /// still running, polled with `write_stdin` until it exits with code 3. Its hooks were the
    /// command's PreToolUse, then its PostToolUse when the process exited; none for the poll.
    #[test]
    fn a_polled_command_is_answered_when_its_poll_reports_the_exit() {
        let call = |id: &str, name: &str, args: &str| {
            (
                "response_item",
                json!({"type": "function_call", "name": name, "arguments": args, "call_id": id}),
            )
        };
        let output = |id: &str, out: &str| {
            (
                "response_item",
                json!({"type": "function_call_output", "call_id": id, "output": out}),
            )
        };
        let text = rollout(&[
            user_event("run the slow test"),
            call(
                "call_0_0",
                "exec_command",
                r#"{"cmd": "sleep 2; echo FAIL one test; exit 3", "yield_time_ms": 300}"#,
            ),
            output(
                "call_0_0",
                "Chunk ID: a0b065\nWall time: 0.3014 seconds\nProcess running with session ID 91531\nOriginal token count: 0\nOutput:\nstarting\n",
            ),
            call(
                "call_1_0",
                "write_stdin",
                r#"{"session_id": 91531, "chars": "", "yield_time_ms": 5000}"#,
            ),
            output(
                "call_1_0",
                "Chunk ID: 2ad304\nWall time: 1.4599 seconds\nProcess exited with code 3\nOriginal token count: 4\nOutput:\nFAIL one test\n",
            ),
        ]);
        let c = convert_group(&text, &[], "fb");
        let tools: Vec<(&str, &str)> = c
            .payloads
            .iter()
            .filter(|p| p.event.contains("Tool"))
            .map(|p| (p.event, p.payload["tool_name"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(
            tools,
            [("PreToolUse", "Bash"), ("PostToolUseFailure", "Bash")],
            "the poll fires no hook; the command is answered when it exits"
        );
        let post = &c
            .payloads
            .iter()
            .find(|p| p.event == "PostToolUseFailure")
            .unwrap();
        assert_eq!(post.payload["tool_use_id"], "call_0_0");
        assert!(
            post.payload["error"]
                .as_str()
                .is_some_and(|e| e.contains("starting") && e.contains("FAIL one test")),
            "all its output: {}",
            post.payload
        );
    }

    #[test]
    fn the_older_output_envelope_is_read_for_every_tool() {
        let env = |output: &str, code: i64| {
            json!({"output": output, "metadata": {"exit_code": code, "duration_seconds": 0.0}})
                .to_string()
        };
        // `shell`: the answer is the envelope's output, the failure its exit code.
        let a = answer("Bash", &env("", 0), None, None).unwrap();
        assert_eq!((a.raw, a.failed), (json!(""), Some(false)));
        let a = answer(
            "Bash",
            &env("cat: x: No such file or directory\n", 1),
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            (a.raw, a.failed),
            (json!("cat: x: No such file or directory\n"), Some(true))
        );
        let a = answer("update_plan", &env("Plan updated", 0), None, None).unwrap();
        assert_eq!((a.raw, a.failed), (json!("Plan updated"), Some(false)));
        // Still running: no outcome yet, envelope or not.
        let running =
            "Chunk ID: 1\nWall time: 10.0 seconds\nProcess running with session ID 7\nOutput:\n";
        assert!(answer("Bash", &env(running, 0), None, None).is_none());
        assert!(answer("write_stdin", running, None, None).is_none());
        // Other JSON is an answer as it is.
        let a = answer(
            "mcp__db__query",
            r#"{"output": "rows", "rows": 3}"#,
            None,
            None,
        )
        .unwrap();
        assert_eq!(a.raw, json!(r#"{"output": "rows", "rows": 3}"#));

        // Played: the shell's empty success is an empty answer, its exit 1 a failure.
        let call = |id: &str, cmd: &str| {
            (
                "response_item",
                json!({"type": "function_call", "name": "shell", "call_id": id,
                       "arguments": json!({"command": ["bash", "-lc", cmd]}).to_string()}),
            )
        };
        let out = |id: &str, output: String| {
            (
                "response_item",
                json!({"type": "function_call_output", "call_id": id, "output": output}),
            )
        };
        let text = rollout(&[
            user_event("go"),
            call("c1", "mkdir -p a"),
            out("c1", env("", 0)),
            call("c2", "cat x"),
            out("c2", env("cat: x: No such file or directory\n", 1)),
        ]);
        let c = convert_group(&text, &[], "fb");
        let post: Vec<(&str, Value)> = c
            .payloads
            .iter()
            .filter(|p| p.event.starts_with("PostToolUse"))
            .map(|p| {
                let r = p.payload.get("tool_response").or(p.payload.get("error"));
                (p.event, r.cloned().unwrap_or(Value::Null))
            })
            .collect();
        assert_eq!(
            post,
            [
                ("PostToolUse", json!({"stdout": "", "stderr": ""})),
                (
                    "PostToolUseFailure",
                    json!("cat: x: No such file or directory\n")
                ),
            ]
        );
    }

    #[test]
    fn a_code_mode_cell_is_the_tool_it_calls() {
        let cell = r#"const r = await tools.exec_command({cmd:"git status","workdir":"/p","yield_time_ms":1000});
text(JSON.stringify(r));"#;
        assert_eq!(
            code_cell_call(cell),
            Some(("Bash".into(), json!({"command": "git status"})))
        );
        let cell = "const patch = \"*** Begin Patch\\n*** Add File: /p/a.md\\n+hi\\n*** End Patch\";\nconst r = await tools.apply_patch(patch);\ntext(JSON.stringify(r));";
        let (name, input) = code_cell_call(cell).unwrap();
        assert_eq!(name, "apply_patch");
        assert!(input["command"]
            .as_str()
            .unwrap()
            .contains("*** Add File: /p/a.md"));
        assert_eq!(code_cell_call("const a = 1;"), None);
    }
}
