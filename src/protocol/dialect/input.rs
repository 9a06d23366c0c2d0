//! Input dialects: each CLI's hook payload turned into the Claude-shaped event the engine reads.
//! Claude Code's tool names and input keys are loopgate's canonical ones, so the guard, the ledger's
//! tool classes and the outcome rules apply unchanged; only what a CLI leaves out (an event name, a
//! call id, a failure flag) is inferred here, each rule citing what was observed.

use super::{patch, Agent};
use crate::protocol::payload::Event;
use serde_json::{Map, Value};

/// What a payload becomes: an event to judge, or nothing to do.
pub enum Translated {
    Judge(Value),
    /// Not an event loopgate acts on (a prompt that is not a user's, an event it does not use).
    Skip,
}

/// The event a payload names, in Claude Code's terms; `None` when the payload names none
/// (Copilot's native payloads: the subcommand says which event it is).
pub fn event_name(agent: Agent, payload: &Map<String, Value>) -> Option<Event> {
    let name = payload.get("hook_event_name").and_then(Value::as_str)?;
    match (agent, name) {
        (Agent::Gemini, "BeforeTool") => Some(Event::PreToolUse),
        (Agent::Gemini, "AfterTool") => Some(Event::PostToolUse),
        (Agent::Gemini, "AfterAgent") => Some(Event::Stop),
        (Agent::Gemini, "BeforeAgent") => Some(Event::UserPromptSubmit),
        _ => Event::parse(name),
    }
}

/// Turns `payload` from `agent` into Claude Code's shape for the `expected` event (the subcommand).
pub fn translate(agent: Agent, expected: Event, mut payload: Map<String, Value>) -> Translated {
    let mut event = event_name(agent, &payload).unwrap_or(expected);
    if agent == Agent::Copilot {
        copilot_identity(&mut payload);
    }
    if event == Event::Stop && agent == Agent::Copilot && has_agent(&payload) {
        // A Copilot subagent ends with its own stop (observed); for loopgate that is the
        // subagent's end, not the turn's.
        event = Event::SubagentStop;
    }
    match event {
        Event::UserPromptSubmit => {
            let prompt = payload.get("prompt").and_then(Value::as_str).unwrap_or("");
            // Qwen fires UserPromptSubmit before every model request, with an empty prompt after
            // a tool round: the model turn's calls are answered and the next request is about
            // to go out, which is what Claude Code's PostToolBatch says (without the list of
            // calls), and a block there ends the run (observed), so a turn past the loop
            // ceiling ends there.
            let main = !has_agent(&payload);
            if automatic_prompt(agent, prompt) {
                // The CLI's own "go on", not a person's new request: the turn goes on.
                return Translated::Skip;
            }
            if agent == Agent::Qwen && prompt.trim().is_empty() && main {
                event = Event::PostToolBatch;
                payload.insert("tool_calls".into(), Value::Array(Vec::new()));
            } else if prompt.trim().is_empty() || prompt.starts_with("loopgate:") || !main {
                // Gemini, Qwen and Copilot re-fire it with loopgate's own Stop reason as the
                // prompt when a Stop is blocked; Codex and Copilot fire it for a subagent's task.
                // None of these is the user asking for something new.
                return Translated::Skip;
            }
        }
        Event::PreToolUse | Event::PostToolUse | Event::PostToolUseFailure => {
            let (tool, input) = canonical_tool(agent, &payload);
            if event != Event::PreToolUse {
                if let Some(failure) = answer(agent, &tool, &mut payload) {
                    event = Event::PostToolUseFailure;
                    payload.insert("error".into(), Value::String(failure));
                }
            }
            payload.insert("tool_name".into(), Value::String(tool));
            payload.insert("tool_input".into(), input);
        }
        Event::PermissionRequest => {
            // Copilot names a write `edit` here whatever the tool was (observed): only which
            // kind of call asks is read, never its input.
            let (tool, _) = canonical_tool(agent, &payload);
            payload.insert("tool_name".into(), Value::String(tool));
        }
        _ => {}
    }
    if agent == Agent::Codex {
        // One `codex exec` prompt is one turn, and every event in it carries its id.
        if let Some(turn) = payload.remove("turn_id") {
            payload.insert("prompt_id".into(), turn);
        }
    }
    payload.insert("hook_event_name".into(), Value::String(event.name().into()));
    Translated::Judge(Value::Object(payload))
}

/// A prompt the CLI sends by itself to keep its model going: Gemini CLI's and Qwen Code's
/// next-speaker check answers a model that stopped mid-task with `Please continue.` (their
/// `client.ts`), and a person who only says "continue" asks for nothing new either. No new
/// request means no new turn: a deploy failing the same way across such turns is one repeat.
pub fn automatic_prompt(agent: Agent, prompt: &str) -> bool {
    if !matches!(agent, Agent::Gemini | Agent::Qwen) {
        return false;
    }
    let p = prompt
        .trim()
        .trim_end_matches(['.', '!'])
        .to_ascii_lowercase();
    matches!(p.as_str(), "please continue" | "continue")
}

fn has_agent(payload: &Map<String, Value>) -> bool {
    payload
        .get("agent_id")
        .and_then(Value::as_str)
        .is_some_and(|a| !a.is_empty())
}

/// Copilot's native payloads are camelCase; inside a subagent its session id is the child's, and
/// the parent's session is `parentAgentId` (observed). loopgate keeps one session per user
/// session and tracks the child as an agent of it, as Claude Code's payloads do.
fn copilot_identity(p: &mut Map<String, Value>) {
    for (camel, snake) in [
        ("sessionId", "session_id"),
        ("agentId", "agent_id"),
        ("parentAgentId", "parent_agent_id"),
        ("toolName", "tool_name"),
        ("toolArgs", "tool_input"),
        // permissionRequest's name for the call's input.
        ("toolInput", "tool_input"),
        ("toolResult", "tool_result"),
        ("stopReason", "stop_reason"),
    ] {
        if let Some(v) = p.remove(camel) {
            p.entry(snake).or_insert(v);
        }
    }
    if let Some(parent) = p.get("parent_agent_id").cloned() {
        if parent.as_str().is_some_and(|s| !s.is_empty()) {
            p.insert("session_id".into(), parent);
        }
    }
}

/// The tool under Claude Code's name, with Claude Code's input keys.
fn canonical_tool(agent: Agent, p: &Map<String, Value>) -> (String, Value) {
    let name = p.get("tool_name").and_then(Value::as_str).unwrap_or("");
    let input = p.get("tool_input").cloned().unwrap_or(Value::Null);
    canonical_call(agent, name, input)
}

/// An OpenCode (or Kilo) call under Claude Code's tool name and input keys.
fn opencode_call(name: &str, input: Value) -> (String, Value) {
    let tool = match name {
        "bash" => "Bash",
        "read" => "Read",
        "write" => "Write",
        "edit" => "Edit",
        "multiedit" => "MultiEdit",
        "glob" => "Glob",
        "grep" => "Grep",
        "list" => "LS",
        "webfetch" => "WebFetch",
        "websearch" => "WebSearch",
        "task" => "Task",
        "todowrite" => "TodoWrite",
        "todoread" => "TodoRead",
        "apply_patch" | "patch" => {
            // The same patch format as Codex's: one added file is a Write, one updated an Edit.
            let text = input
                .get("patchText")
                .or_else(|| input.get("patch"))
                .and_then(Value::as_str)
                .unwrap_or("");
            return canonical_call(
                Agent::Codex,
                "apply_patch",
                serde_json::json!({ "command": text }),
            );
        }
        other => other,
    };
    let input = match input {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let k = match k.as_str() {
                    "filePath" => "file_path".to_string(),
                    "oldString" => "old_string".to_string(),
                    "newString" => "new_string".to_string(),
                    "replaceAll" => "replace_all".to_string(),
                    _ => k,
                };
                out.entry(k).or_insert(v);
            }
            Value::Object(out)
        }
        other => other,
    };
    (tool.to_string(), input)
}

/// A call `agent` names `name` with `input`, under Claude Code's tool name and input keys: what
/// the live hook judges, and what `loopgate replay` judges for a session this CLI recorded.
pub fn canonical_call(agent: Agent, name: &str, input: Value) -> (String, Value) {
    if agent.is_plugin() {
        // The plugin passes OpenCode's own tool names and argument keys, as its sessions record
        // them, so the live hook and `loopgate replay` map them the same way.
        return opencode_call(name, input);
    }
    let claude = match (agent, name) {
        (Agent::Codex, "apply_patch") => return patch::as_claude_call(&input),
        // Copilot CLI offers Codex's patch tool to GPT models, its input the bare patch text.
        (Agent::Copilot, "apply_patch") => {
            return match input {
                Value::String(text) => {
                    patch::as_claude_call(&serde_json::json!({ "command": text }))
                }
                other => patch::as_claude_call(&other),
            }
        }
        (Agent::Gemini | Agent::Qwen, "run_shell_command") => "Bash",
        (Agent::Gemini | Agent::Qwen, "write_file") => "Write",
        (Agent::Gemini, "replace") | (Agent::Qwen, "edit") => "Edit",
        (Agent::Gemini | Agent::Qwen, "read_file") => "Read",
        (Agent::Gemini | Agent::Qwen, "grep_search") => "Grep",
        (Agent::Gemini | Agent::Qwen, "glob") => "Glob",
        (Agent::Gemini | Agent::Qwen, "list_directory") => "LS",
        (Agent::Gemini | Agent::Qwen | Agent::Copilot, "web_fetch") => "WebFetch",
        (Agent::Gemini, "google_web_search") | (Agent::Qwen | Agent::Copilot, "web_search") => {
            "WebSearch"
        }
        (Agent::Gemini, "invoke_agent") | (Agent::Qwen, "agent") => "Task",
        (Agent::Copilot, "bash") => "Bash",
        // Copilot's shell on Windows: the same `{command, description, …}` as its `bash`.
        (Agent::Copilot, "powershell") => "PowerShell",
        (Agent::Copilot, "rg") => "Grep",
        (Agent::Copilot, "view") => "Read",
        (Agent::Copilot, "create") => "Write",
        (Agent::Copilot, "edit") => "Edit",
        (Agent::Copilot, "grep") => "Grep",
        (Agent::Copilot, "glob") => "Glob",
        (Agent::Copilot, "task") => "Task",
        _ => name,
    };
    (claude.to_string(), canonical_input(claude, input))
}

/// Input keys renamed to Claude Code's (Copilot keeps its own even in its PascalCase dialect), and
/// free text that does not change what a call does left out of its identity.
fn canonical_input(tool: &str, input: Value) -> Value {
    let Value::Object(mut m) = input else {
        return input;
    };
    let renames: &[(&str, &str)] = match tool {
        "Read" | "Write" | "Edit" => &[
            ("path", "file_path"),
            ("file_text", "content"),
            ("old_str", "old_string"),
            ("new_str", "new_string"),
            ("allow_multiple", "replace_all"),
        ],
        _ => &[],
    };
    for (from, to) in renames {
        if let Some(v) = m.remove(*from) {
            m.entry(*to).or_insert(v);
        }
    }
    if tool == "Edit" {
        // Gemini's `replace` carries the model's own words for the change.
        m.remove("instruction");
    }
    Value::Object(m)
}

/// Puts the CLI's tool result where the engine reads it (`tool_response`, Bash as
/// `{stdout, stderr}`), and says whether the call failed where the CLI reports a failure only in
/// the text. `Some(error text)` for a failure.
fn answer(agent: Agent, tool: &str, p: &mut Map<String, Value>) -> Option<String> {
    if let Some(e) = p.get("error").and_then(Value::as_str) {
        // A failure event (Qwen, Copilot) already says what went wrong; Qwen's shell report
        // without its empty fields, so `Error: (none)` is never taken for the error.
        return Some(match agent {
            Agent::Qwen | Agent::Gemini => without_lines(e, LLM_NOISE),
            _ => e.to_string(),
        });
    }
    let raw = p
        .remove("tool_response")
        .or_else(|| p.remove("tool_result"))
        .unwrap_or(Value::Null);
    if agent == Agent::Claude {
        p.insert("tool_response".into(), raw);
        return None;
    }
    match recorded_answer(agent, tool, &raw, None) {
        Ok(response) => {
            p.insert("tool_response".into(), response);
            None
        }
        Err(failure) => Some(failure),
    }
}

/// A call's answer in `agent`'s shape (the `tool_response` its hook gets), as the live hook reads
/// it: `Ok(tool_response)` in Claude Code's shape, or `Err(error text)` for a failure. `failed`
/// is what the caller already knows (`loopgate replay`: the exit code a session file recorded);
/// `None` leaves it to the text, as the live hook must.
pub fn recorded_answer(
    agent: Agent,
    tool: &str,
    raw: &Value,
    failed: Option<bool>,
) -> Result<Value, String> {
    let (text, said_failed) = match agent {
        Agent::Codex => codex_text(tool, raw),
        Agent::Gemini | Agent::Qwen => llm_text(raw),
        Agent::Copilot => copilot_text(raw),
        Agent::OpenCode | Agent::Kilo => plugin_text(raw),
        Agent::Claude => return Ok(raw.clone()),
    };
    shaped(tool, text, failed.unwrap_or(said_failed))
}

/// A call's answer text in Claude Code's shape: `Err(text)` for a failure, a shell call's as
/// `{stdout, stderr}`, any other's as the text.
pub fn shaped(tool: &str, text: String, failed: bool) -> Result<Value, String> {
    if failed {
        return Err(text);
    }
    Ok(if tool == "Bash" {
        serde_json::json!({"stdout": text, "stderr": ""})
    } else {
        Value::String(text)
    })
}

/// The plugin passes `tool.execute.after`'s output as it is: `{title, output, metadata}`, a shell
/// call's `metadata.exit` its exit code (observed: `exit: 1` for `false`, with output
/// `(no output)`). A tool that throws reaches no `tool.execute.after`; the plugin reports it from
/// the tool part's `error` state as a failure event instead.
/// An OpenCode export (`loopgate replay`) records the output text alone, with the failure known
/// from the part's state.
fn plugin_text(raw: &Value) -> (String, bool) {
    if let Value::String(s) = raw {
        return (s.clone(), false);
    }
    let text = match raw.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None if raw.is_null() => String::new(),
        None => raw.to_string(),
    };
    let exit = raw.pointer("/metadata/exit").and_then(Value::as_i64);
    (text, exit.is_some_and(|c| c != 0))
}

/// Codex gives a shell call's output as a bare string, with no exit code (observed: exit 0 and
/// exit 1 look the same), so a failure is judged from text only where the text is unambiguous.
/// `apply_patch` reports `Exit code: N` itself.
fn codex_text(tool: &str, raw: &Value) -> (String, bool) {
    let text = match raw {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    if let Some(code) = line_value(&text, "Exit code: ") {
        return (text.clone(), code != "0");
    }
    let failed = tool == "Bash" && shell_text_says_failed(&text);
    (text, failed)
}

/// Output whose last lines only a failing command prints: a shell that could not find or run
/// the command, and the error summaries of common toolchains. Deliberately short: a success
/// judged a failure is refused sooner when repeated, so only text no success prints belongs here.
fn shell_text_says_failed(text: &str) -> bool {
    const SIGNS: &[&str] = &[
        ": command not found",
        ": No such file or directory",
        ": Permission denied",
        "Traceback (most recent call last):",
        "npm ERR!",
        "npm error code",
        "error: could not compile",
        "FAILED (failures=",
        "FAILED (errors=",
        "make: *** ",
    ];
    let tail_start = text.len().saturating_sub(4096);
    let mut cut = tail_start;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let tail = &text[cut..];
    // Python reports a file it cannot compile without a traceback: its last line names the error.
    let last = tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    SIGNS.iter().any(|s| tail.contains(s))
        || ["SyntaxError: ", "IndentationError: ", "TabError: "]
            .iter()
            .any(|p| last.starts_with(p))
}

/// Gemini and Qwen: `{llmContent, returnDisplay, error?}`. A tool error carries `error`
/// (Gemini); a shell command's exit code is only inside `llmContent` (`Exit Code: 1`, observed).
fn llm_text(raw: &Value) -> (String, bool) {
    let content = match raw.get("llmContent") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => match raw {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        },
    };
    if let Some(e) = raw.get("error") {
        let msg = e
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| e.as_str().map(str::to_string))
            .unwrap_or_else(|| e.to_string());
        return (msg, true);
    }
    let text = without_lines(
        content
            .trim_start_matches("<untrusted_context>\n")
            .trim_end_matches("\n</untrusted_context>"),
        LLM_NOISE,
    );
    let failed = line_value(&text, "Exit Code: ").is_some_and(|c| c != "0");
    (text, failed)
}

/// Lines of Gemini's and Qwen's shell report that are not the answer: the call said back, the
/// process group id, new on every run, and the fields Qwen reports empty (`Error: (none)` is no
/// error).
const LLM_NOISE: &[&str] = &[
    // The command and directory said back (Qwen): the question, not its answer.
    "Command: ",
    "Directory: ",
    "Process Group PGID: ",
    "Error: (none)",
    "Signal: (none)",
    "Background PIDs: (none)",
];

/// Copilot: `{resultType, textResultForLlm}` (native) or `{result_type, text_result_for_llm}`
/// (PascalCase). A shell command's exit code is only in the text:
/// `<shellId: 1 completed with exit code 1>` (observed), whose shell id changes on every call.
fn copilot_text(raw: &Value) -> (String, bool) {
    let field = |a: &str, b: &str| {
        raw.get(a)
            .or_else(|| raw.get(b))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut text = field("textResultForLlm", "text_result_for_llm");
    let kind = field("resultType", "result_type");
    let mut failed = !kind.is_empty() && kind != "success";
    if let Some(start) = text.rfind("<shellId: ") {
        if let Some(len) = text[start..].find('>') {
            let marker = text[start..start + len].to_string();
            let code = marker
                .rsplit_once("exit code ")
                .map(|(_, c)| c.trim().to_string());
            let mut body = text[..start].trim_end().to_string();
            body.push_str(&text[start + len + 1..]);
            if let Some(code) = code {
                failed |= code != "0";
                body.push_str(&format!("\nExit code {code}"));
            }
            text = body;
        }
    }
    (text, failed)
}

/// The value after `prefix` on the first line that starts with it.
fn line_value<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(str::trim)
}

fn without_lines(text: &str, prefixes: &[&str]) -> String {
    text.lines()
        .filter(|l| !prefixes.iter().any(|p| l.starts_with(p)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn judge(agent: Agent, expected: Event, v: Value) -> Value {
        match translate(agent, expected, v.as_object().unwrap().clone()) {
            Translated::Judge(v) => v,
            Translated::Skip => panic!("skipped"),
        }
    }

    #[test]
    fn gemini_shell_exit_code_is_a_failure_and_pgid_is_noise() {
        let out = judge(
            Agent::Gemini,
            Event::PostToolUse,
            json!({"session_id": "s", "hook_event_name": "AfterTool", "tool_name": "run_shell_command",
                   "tool_input": {"command": "make", "description": "build"},
                   "tool_response": {"llmContent": "<untrusted_context>\nOutput: boom\nExit Code: 2\nProcess Group PGID: 23204\n</untrusted_context>"}}),
        );
        assert_eq!(out["hook_event_name"], "PostToolUseFailure");
        assert_eq!(out["tool_name"], "Bash");
        assert_eq!(out["error"], "Output: boom\nExit Code: 2");
    }

    #[test]
    fn copilot_native_edit_becomes_claude_edit_in_the_parent_session() {
        let out = judge(
            Agent::Copilot,
            Event::PreToolUse,
            json!({"sessionId": "child", "agentId": "child", "parentAgentId": "parent",
                   "toolName": "edit", "toolArgs": {"path": "/p/a.rs", "old_str": "a", "new_str": "b"}}),
        );
        assert_eq!(out["session_id"], "parent");
        assert_eq!(out["agent_id"], "child");
        assert_eq!(out["hook_event_name"], "PreToolUse");
        assert_eq!(
            out["tool_input"],
            json!({"file_path": "/p/a.rs", "old_string": "a", "new_string": "b"})
        );
    }

    #[test]
    fn copilot_shell_exit_code_and_shell_id() {
        let ok = judge(
            Agent::Copilot,
            Event::PostToolUse,
            json!({"sessionId": "s", "toolName": "bash", "toolArgs": {"command": "ls"},
                   "toolResult": {"resultType": "success", "textResultForLlm": "a\n<shellId: 7 completed with exit code 0>"}}),
        );
        assert_eq!(ok["hook_event_name"], "PostToolUse");
        assert_eq!(ok["tool_response"]["stdout"], "a\nExit code 0");
        let failed = judge(
            Agent::Copilot,
            Event::PostToolUse,
            json!({"sessionId": "s", "toolName": "bash", "toolArgs": {"command": "ls"},
                   "toolResult": {"resultType": "success", "textResultForLlm": "nope\n<shellId: 8 completed with exit code 1>"}}),
        );
        assert_eq!(failed["hook_event_name"], "PostToolUseFailure");
        assert_eq!(failed["error"], "nope\nExit code 1");
    }

    #[test]
    fn prompts_that_are_not_the_users_are_skipped() {
        for (agent, v) in [
            (
                Agent::Qwen,
                json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "", "agent_id": "a"}),
            ),
            (
                Agent::Gemini,
                json!({"session_id": "s", "hook_event_name": "BeforeAgent", "prompt": ""}),
            ),
            (
                Agent::Gemini,
                json!({"session_id": "s", "hook_event_name": "BeforeAgent", "prompt": "loopgate: nothing changed"}),
            ),
            (
                Agent::Codex,
                json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "agent_id": "a", "prompt": "sub task"}),
            ),
        ] {
            assert!(matches!(
                translate(
                    agent,
                    Event::UserPromptSubmit,
                    v.as_object().unwrap().clone()
                ),
                Translated::Skip
            ));
        }
    }

    #[test]
    fn qwens_hook_before_the_next_model_request_is_the_model_turns_end() {
        let v = judge(
            Agent::Qwen,
            Event::UserPromptSubmit,
            json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "",
                   "prompt_id": "p########1"}),
        );
        assert_eq!(v["hook_event_name"], "PostToolBatch");
        assert_eq!(v["tool_calls"], json!([]));
        // The user's own prompt stays a prompt.
        let v = judge(
            Agent::Qwen,
            Event::UserPromptSubmit,
            json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "fix it"}),
        );
        assert_eq!(v["hook_event_name"], "UserPromptSubmit");
    }

    #[test]
    fn an_automatic_continue_is_no_prompt_and_each_clis_tools_are_classed() {
        for agent in [Agent::Gemini, Agent::Qwen] {
            let v = json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "Please continue."});
            assert!(matches!(
                translate(
                    agent,
                    Event::UserPromptSubmit,
                    v.as_object().unwrap().clone()
                ),
                Translated::Skip
            ));
        }
        assert!(!automatic_prompt(
            Agent::Gemini,
            "please continue with the tests"
        ));
        assert!(!automatic_prompt(Agent::Claude, "Please continue."));
        use crate::protocol::tool::ToolClass;
        for (agent, name, class) in [
            (Agent::Copilot, "powershell", ToolClass::Shell),
            (Agent::Copilot, "rg", ToolClass::Search),
            (Agent::Copilot, "web_fetch", ToolClass::Read),
            (Agent::Copilot, "read_powershell", ToolClass::Read),
            (Agent::Qwen, "list_directory", ToolClass::Read),
            (Agent::Qwen, "read_many_files", ToolClass::Read),
            (Agent::Gemini, "replace", ToolClass::Edit),
            (Agent::Qwen, "edit", ToolClass::Edit),
            (Agent::Gemini, "write_file", ToolClass::Write),
        ] {
            let (tool, _) = canonical_call(agent, name, json!({"command": "x"}));
            assert_eq!(ToolClass::of(&tool), class, "{agent:?} {name}");
        }
        let patch = "*** Begin Patch\n*** Update File: a.rs\n@@\n-a\n+b\n*** End Patch";
        let (tool, input) = canonical_call(Agent::Copilot, "apply_patch", json!(patch));
        assert_eq!(
            (tool.as_str(), &input["file_path"]),
            ("Edit", &json!("a.rs"))
        );
    }

    #[test]
    fn qwens_empty_report_fields_are_not_the_error() {
        let out = judge(
            Agent::Qwen,
            Event::PostToolUseFailure,
            json!({"session_id": "s", "hook_event_name": "PostToolUseFailure", "tool_name": "run_shell_command",
                   "tool_input": {"command": "javac A.java"},
                   "error": "Command: javac A.java\nDirectory: (root)\nOutput: bash: line 1: javac: command not found\nError: (none)\nExit Code: 127\nSignal: (none)\nProcess Group PGID: (none)"}),
        );
        assert_eq!(
            out["error"],
            "Output: bash: line 1: javac: command not found\nExit Code: 127"
        );
    }

    #[test]
    fn codex_shell_failure_only_from_unambiguous_text() {
        assert!(codex_text("Bash", &json!("bash: line 1: nosuch: command not found\n")).1);
        assert!(!codex_text("Bash", &json!("grep found: error: in line 3\n")).1);
        let syntax =
            "  File \"tool.py\", line 1\n    def (:\n        ^\nSyntaxError: invalid syntax\n";
        assert!(codex_text("Bash", &json!(syntax)).1);
        assert!(!codex_text("Bash", &json!("docs mention SyntaxError: in prose\nok\n")).1);
        assert!(
            codex_text(
                "apply_patch",
                &json!("Exit code: 1\nWall time: 0 seconds\nOutput:\nfailed\n")
            )
            .1
        );
    }
}
