//! What kind of thing a tool does, by the names each agent CLI gives its tools: the one place
//! a rule learns whether a call runs a command, writes a file or only looks.

use serde::{Deserialize, Serialize};

/// What kind of thing a tool does, so rules can be stated once for every agent CLI's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    Shell,
    Write,
    Edit,
    Read,
    Search,
    Other,
}

impl ToolClass {
    pub fn of(tool: &str) -> ToolClass {
        match tool {
            "Bash" | "PowerShell" => ToolClass::Shell,
            "Write" => ToolClass::Write,
            "Edit" | "MultiEdit" | "NotebookEdit" => ToolClass::Edit,
            "Read" | "NotebookRead" | "LS" | "WebFetch" | "TaskList" | "TaskGet" | "TaskOutput"
            | "BashOutput" => ToolClass::Read,
            // The other CLIs' tools the dialects keep under their own names (their input has no
            // Claude Code counterpart): Qwen's and Gemini's multi-file read, Copilot's reads of
            // a running shell's output.
            "read_many_files" | "read_bash" | "read_powershell" => ToolClass::Read,
            "Grep" | "Glob" | "WebSearch" | "ToolSearch" => ToolClass::Search,
            t if t.starts_with("mcp__") && looks_like_query(t) => ToolClass::Read,
            _ => ToolClass::Other,
        }
    }

    /// Tools that only look: their answers are judged, never their effects.
    pub fn read_only(self) -> bool {
        matches!(self, ToolClass::Read | ToolClass::Search)
    }

    pub fn changes_files(self) -> bool {
        matches!(self, ToolClass::Write | ToolClass::Edit)
    }
}

/// An MCP tool whose name says it only asks (`get_status`, `list_pods`, `search_issues`).
fn looks_like_query(tool: &str) -> bool {
    let name = tool
        .rsplit("__")
        .next()
        .unwrap_or(tool)
        .to_ascii_lowercase();
    [
        "get", "list", "read", "search", "status", "describe", "fetch", "query", "view", "show",
    ]
    .iter()
    .any(|v| name.split(['_', '-']).any(|w| w == *v))
}
