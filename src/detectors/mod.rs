//! Detectors read the session state and return verdicts; none of them renders hook JSON.

pub mod breaker;
pub mod circular;
pub mod dedup;
pub mod failures;
pub mod gate;
pub mod guard;
pub mod identical_failure;
pub mod matrix;
pub mod modification;
pub mod paralysis;
pub mod patterns;
pub mod poll;
pub mod progress;
pub mod rate;

use serde_json::Value;

/// Tools whose success means a file changed.
pub fn is_edit_tool(tool: &str) -> bool {
    matches!(tool, "Edit" | "MultiEdit" | "Write" | "NotebookEdit")
}

/// Did this successful call change files? Edits do; Bash does when Claude Code reports a
/// `bashEditDiff` with changed files.
pub fn changed_files(tool: &str, response: Option<&Value>) -> bool {
    if is_edit_tool(tool) {
        return true;
    }
    tool == "Bash"
        && response
            .and_then(|r| r.get("bashEditDiff"))
            .is_some_and(|d| {
                d.get("changedFiles")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty())
                    || d.get("files")
                        .and_then(Value::as_array)
                        .is_some_and(|a| !a.is_empty())
            })
}

/// `Bash \`npm test\`` or `Edit src/a.rs`: how messages name a call.
pub fn describe(tool: &str, target: &str) -> String {
    if target.is_empty() {
        tool.to_string()
    } else if tool == "Bash" {
        format!("Bash `{target}`")
    } else {
        format!("{tool} {target}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bash_changes_files_only_with_a_diff() {
        let diff = json!({"stdout": "", "bashEditDiff": {"files": [{"filePath": "/p/x"}], "changedFiles": ["/p/x"]}});
        assert!(changed_files("Bash", Some(&diff)));
        assert!(!changed_files("Bash", Some(&json!({"stdout": "hi"}))));
        assert!(changed_files("Write", None));
        assert!(!changed_files("Read", None));
    }
}
