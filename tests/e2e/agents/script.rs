//! Model scripts for `fake_llm.py`, with each CLI's own tool names and argument keys
//! (`../shared/agents/README.md`, "Inputs"). `{{PROJECT}}` and `{{SCRATCH}}` are substituted by
//! the harness.

use super::clis::Cli;
use serde_json::{json, Value};

/// A shell call.
pub fn shell(cli: Cli, command: &str) -> Value {
    match cli {
        Cli::Codex => json!({"name": "exec_command", "args": {"cmd": command}}),
        Cli::Gemini => {
            json!({"name": "run_shell_command", "args": {"command": command, "description": "run"}})
        }
        Cli::Qwen => {
            // Qwen Code 0.24.4 sometimes reports `Output: (empty)` for a command that prints and
            // exits at once on a loaded machine (seen in 1 of 4 concurrent runs; 0 of 20 once the
            // command lingers after its output). A lost output is a different answer, which
            // would make the repeats the scenarios rely on not repeats.
            let command = format!("{command}; s=$?; sleep 0.3; exit $s");
            json!({"name": "run_shell_command", "args": {"command": command, "description": "run"}})
        }
        Cli::Copilot | Cli::OpenCode | Cli::Kilo => {
            json!({"name": "bash", "args": {"command": command, "description": "run"}})
        }
    }
}

/// The CLI's whole-file write tool. Codex has none: its `apply_patch` "Add File" writes the whole
/// file (and overwrites one that exists). Copilot's `create` refuses a file that exists.
pub fn write(cli: Cli, rel: &str, content: &str) -> Value {
    let abs = format!("{{{{PROJECT}}}}/{rel}");
    match cli {
        Cli::Codex => {
            let lines: String = content.lines().map(|l| format!("+{l}\n")).collect();
            json!({"name": "apply_patch", "custom": true,
                   "input": format!("*** Begin Patch\n*** Add File: {rel}\n{lines}*** End Patch\n")})
        }
        Cli::Gemini | Cli::Qwen => {
            json!({"name": "write_file", "args": {"file_path": abs, "content": content}})
        }
        Cli::Copilot => json!({"name": "create", "args": {"path": abs, "file_text": content}}),
        Cli::OpenCode | Cli::Kilo => {
            json!({"name": "write", "args": {"filePath": abs, "content": content}})
        }
    }
}

/// The CLI's read tool (Codex reads through the shell).
pub fn read(cli: Cli, rel: &str) -> Value {
    let abs = format!("{{{{PROJECT}}}}/{rel}");
    match cli {
        Cli::Codex => shell(cli, &format!("cat {rel}")),
        Cli::Gemini | Cli::Qwen => json!({"name": "read_file", "args": {"file_path": abs}}),
        Cli::Copilot => json!({"name": "view", "args": {"path": abs}}),
        Cli::OpenCode | Cli::Kilo => json!({"name": "read", "args": {"filePath": abs}}),
    }
}

/// A model turn making one call.
pub fn call(c: Value) -> Value {
    json!({"tool_calls": [c]})
}

pub fn text(t: &str) -> Value {
    json!({"text": t})
}

/// The script: these turns, then `default_text` for every later request (a Stop block's
/// continuation gets it).
pub fn script(turns: Vec<Value>, default_text: &str) -> Value {
    json!({"turns": turns, "default_text": default_text})
}
