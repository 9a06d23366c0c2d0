//! Answers that are no outcome yet. A command left running in the background, or a CI run that
//! reports itself queued or in progress, has not succeeded or failed: asking about it again is a
//! wait, judged by time (issue 36). The poll that finally reports the command's end brings the
//! command's outcome, so a long command that fails the same way run after run is a repeated
//! failure like any other.

use crate::protocol::tool::ToolClass;
use serde_json::Value;

/// The longest answer read as a status report: status reports are short, and a long log that
/// mentions a status is not one (nor is it searched, on the hot path of every shell call).
const STATUS_SCAN: usize = 8 * 1024;

/// Whether a successful call's answer says that what it reports on is still under way: a shell
/// command's output, or a file read (Qwen Code's background tasks report through a status file).
pub fn answer_says(tool: &str, input: &Value, response: Option<&Value>) -> bool {
    if crate::judge::wait::polls(tool) {
        return false;
    }
    match ToolClass::of(tool) {
        ToolClass::Shell => {}
        ToolClass::Read if tool == "Read" => return reports_pending_status(text_of(response)),
        _ => return false,
    }
    // Claude Code's `run_in_background`: the answer carries the background task's id.
    if response.is_some_and(|r| r.get("backgroundTaskId").is_some()) {
        return true;
    }
    let text = text_of(response);
    if text.contains("Process running with session ID ") {
        return true;
    }
    (asks_background(input) && !ended(text)) || reports_pending_status(text)
}

/// What a poll reports of the command it polls once that command has ended: whether it failed,
/// and its output. `None` while it is still running (or for a call that is no poll).
pub fn poll_outcome(
    tool: &str,
    failed: bool,
    error: &str,
    response: Option<&Value>,
) -> Option<(bool, String)> {
    if !crate::judge::wait::polls(tool) {
        return None;
    }
    if failed {
        return Some((true, error.to_string()));
    }
    // Claude Code's `TaskOutput` (`{task: {status, output, exitCode}}`) and `BashOutput`
    // (`{status, stdout, stderr, exitCode}`).
    let task = response.map(|r| r.get("task").unwrap_or(r));
    if let Some(status) = task.and_then(|t| t.get("status")).and_then(Value::as_str) {
        let t = task.expect("a status is inside a task");
        if !matches!(status, "completed" | "failed" | "killed" | "exited") {
            return None;
        }
        let code = t.get("exitCode").and_then(Value::as_i64);
        let field = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
        let output = format!("{}{}{}", field("output"), field("stdout"), field("stderr"));
        return Some((
            status != "completed" || code.is_some_and(|c| c != 0),
            output,
        ));
    }
    let text = text_of(response);
    ended(text).then(|| (false, text.to_string()))
}

/// A shell call asking to run in the background: Claude Code's `run_in_background`, Gemini's and
/// Qwen's `is_background`, Copilot's `mode: async` (or `detach`).
fn asks_background(input: &Value) -> bool {
    let yes = |k: &str| input.get(k).and_then(Value::as_bool) == Some(true);
    yes("run_in_background")
        || yes("is_background")
        || yes("detach")
        || input.get("mode").and_then(Value::as_str) == Some("async")
}

/// The answer reports the process's exit: Codex's `Process exited with code N`, Copilot's
/// `<shellId: N completed with exit code X>` (read by its dialect as `Exit code X`), Gemini's and
/// Qwen's `Exit Code: X`.
fn ended(text: &str) -> bool {
    text.contains("Process exited with code ")
        || text.contains("completed with exit code ")
        || text
            .lines()
            .any(|l| l.starts_with("Exit code ") || l.starts_with("Exit Code: "))
}

/// The answer's text: a shell call's output, a file read's content, or the poll's text.
fn text_of(response: Option<&Value>) -> &str {
    match response {
        Some(Value::String(s)) => s,
        Some(r) => r
            .get("stdout")
            .or_else(|| r.pointer("/file/content"))
            .and_then(Value::as_str)
            .unwrap_or(""),
        None => "",
    }
}

/// A status report of something still moving: a machine-readable `in_progress` or `queued`
/// (`gh run list`, a CI API's JSON), or a status, state or phase whose value is pending, running,
/// waiting or requested (`gh pr checks` prints `pending` as a tab-separated field). Prose that
/// says "in progress" is not a status: a document re-read is a question, not a wait.
fn reports_pending_status(text: &str) -> bool {
    if text.len() > STATUS_SCAN || text.is_empty() {
        return false;
    }
    let head = text.to_ascii_lowercase();
    const MOVING: [&str; 4] = ["pending", "running", "waiting", "requested"];
    if words(&head).any(|w| w == "in_progress" || w == "queued") {
        return true;
    }
    let tabbed = head.lines().filter(|l| l.contains('\t'));
    if tabbed
        .flat_map(|l| l.split('\t'))
        .any(|f| MOVING.contains(&f.trim()))
    {
        return true;
    }
    ["status", "state", "phase"].iter().any(|key| {
        head.match_indices(key).any(|(at, _)| {
            let after = head[at + key.len()..].trim_start_matches(['"', '\'', ':', '=', ' ']);
            MOVING.iter().any(|m| {
                after.strip_prefix(m).is_some_and(|rest| {
                    !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            })
        })
    })
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn out(text: &str) -> Value {
        json!({"stdout": text, "stderr": ""})
    }

    #[test]
    fn ci_runs_queued_or_in_progress_are_under_way_and_their_end_is_not() {
        let bash = |cmd: &str| json!({"command": cmd});
        for text in [
            "in_progress\t\tfix build\tCI\tmain\tpush\t123\t1m\t2026-11-28",
            "[{\"status\":\"queued\",\"conclusion\":\"\"}]",
            "build\tpending\t0\thttps://ci.example/1",
            "deployment status: pending",
            "{\"state\": \"running\"}",
        ] {
            assert!(
                answer_says("Bash", &bash("gh run list"), Some(&out(text))),
                "{text}"
            );
        }
        for text in [
            "completed\tsuccess\tfix build\tCI\tmain\tpush\t123\t1m",
            "running 12 tests\ntest result: ok. 12 passed",
            "## In progress\n- the parser",
            "3 passing, 2 pending",
            "deployment status: pending_review_done",
        ] {
            assert!(
                !answer_says("Bash", &bash("gh run list"), Some(&out(text))),
                "{text}"
            );
        }
    }

    #[test]
    fn a_command_left_running_is_under_way_until_a_poll_reports_its_exit() {
        let claude = json!({"stdout": "", "stderr": "", "backgroundTaskId": "b7"});
        assert!(answer_says(
            "Bash",
            &json!({"command": "npm test"}),
            Some(&claude)
        ));
        let copilot = json!({"command": "npm test", "mode": "async"});
        assert!(answer_says("Bash", &copilot, Some(&out("started"))));
        assert!(!answer_says(
            "Bash",
            &copilot,
            Some(&out("ok\nExit code 0"))
        ));
        assert!(!answer_says(
            "Bash",
            &json!({"command": "npm test"}),
            Some(&out("ok"))
        ));
        // Qwen Code's background task reports through a status file the agent reads.
        let status = json!({"file": {"content": "{\"status\": \"running\", \"pid\": 7}"}});
        assert!(answer_says(
            "Read",
            &json!({"file_path": "/t/status.json"}),
            Some(&status)
        ));
        let done = json!({"file": {"content": "{\"status\": \"completed\", \"exit\": 0}"}});
        assert!(!answer_says(
            "Read",
            &json!({"file_path": "/t/status.json"}),
            Some(&done)
        ));

        let ended = Value::String("tests passed\nExit code 0".into());
        assert_eq!(
            poll_outcome("read_bash", false, "", Some(&ended)),
            Some((false, "tests passed\nExit code 0".into()))
        );
        let still = Value::String("Chunk ID: 2\nProcess running with session ID 7".into());
        assert_eq!(poll_outcome("write_stdin", false, "", Some(&still)), None);
        let task = json!({"retrieval_status": "success",
            "task": {"task_id": "b7", "status": "failed", "output": "boom", "exitCode": 1}});
        assert_eq!(
            poll_outcome("TaskOutput", false, "", Some(&task)),
            Some((true, "boom".into()))
        );
        let task = json!({"retrieval_status": "timeout", "task": {"status": "running"}});
        assert_eq!(poll_outcome("TaskOutput", false, "", Some(&task)), None);
        assert_eq!(
            poll_outcome("read_bash", true, "boom", None),
            Some((true, "boom".into()))
        );
        assert_eq!(poll_outcome("Bash", true, "boom", None), None);
    }
}
