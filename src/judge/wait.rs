//! How long a call waits on purpose. Waiting is judged by time, wherever it happens (issue 27): a
//! call that waits by itself (a blocking read of a background process's output, Codex's
//! `write_stdin` with its yield time, `sleep N`, a `watch` or `wait` command) is a wait, not a
//! question, and an empty or unchanged answer from it is "no news yet".

use serde_json::Value;

/// The shortest wait that counts as waiting on purpose.
pub const MIN_WAIT_S: f64 = 2.0;

/// Claude Code's `TaskOutput` blocks by default for up to 30 s.
const TASK_OUTPUT_DEFAULT_MS: f64 = 30_000.0;

/// Tools that poll a command started earlier (Codex's `write_stdin`, Claude Code's
/// `BashOutput`/`TaskOutput`, Copilot CLI's `read_*`/`write_*` shells, Gemini CLI's
/// `read_background_output`): they belong to that command, and one still waiting for it has no
/// outcome yet.
pub fn polls(tool: &str) -> bool {
    matches!(
        tool,
        "write_stdin"
            | "BashOutput"
            | "TaskOutput"
            | "read_bash"
            | "write_bash"
            | "read_powershell"
            | "write_powershell"
            | "read_background_output"
    )
}

/// Tools whose call is itself a wait on work running elsewhere (a background shell, a worker, a
/// subagent): the real time such a call took is waiting, whatever its input says.
pub fn waits_by_nature(tool: &str, input: &Value) -> bool {
    match tool {
        "TaskOutput" => input.get("block").and_then(Value::as_bool) != Some(false),
        "write_stdin" => input
            .get("chars")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty),
        "BashOutput"
        | "read_bash"
        | "read_powershell"
        | "read_background_output"
        | "wait_agent"
        | "await_agent" => true,
        "Bash" | "PowerShell" => {
            let cmd = input.get("command").and_then(Value::as_str).unwrap_or("");
            shell_waits(cmd)
        }
        _ => false,
    }
}

/// The seconds a call says it will wait (0 when it says nothing): the longest `sleep N` of a
/// shell command, a blocking `TaskOutput`'s timeout, `write_stdin`'s yield time, Copilot's
/// `read_bash` delay.
pub fn declared_s(tool: &str, input: &Value) -> f64 {
    let num = |k: &str| input.get(k).and_then(Value::as_f64);
    match tool {
        "Bash" | "PowerShell" => {
            let cmd = input.get("command").and_then(Value::as_str).unwrap_or("");
            longest_sleep(cmd)
        }
        "TaskOutput" if input.get("block").and_then(Value::as_bool) != Some(false) => {
            num("timeout").unwrap_or(TASK_OUTPUT_DEFAULT_MS) / 1000.0
        }
        "write_stdin" => num("yield_time_ms").unwrap_or(0.0) / 1000.0,
        // Copilot CLI's detached shells: `read_bash` on Linux and macOS, `read_powershell` on
        // Windows, and their `write_*` twins, each with the seconds it waits.
        "read_bash" | "write_bash" | "read_powershell" | "write_powershell" => {
            num("delay").unwrap_or(0.0)
        }
        // Gemini CLI's background shells (observed in the e2e: `{pid, delay_ms}`).
        "read_background_output" => num("delay_ms").unwrap_or(0.0) / 1000.0,
        "wait_agent" | "await_agent" => {
            num("timeout_ms").map_or(0.0, |ms| ms / 1000.0) + num("timeout_seconds").unwrap_or(0.0)
        }
        _ => 0.0,
    }
}

/// Whether the call waited on purpose: it says it will wait, or it waits by its nature and took
/// real time (`took_ms`, once it has run: a non-blocking peek at a background shell answers at
/// once, and asking again at once is a question, not a wait).
pub fn waited_on_purpose(tool: &str, input: &Value, took_ms: Option<u64>) -> bool {
    declared_s(tool, input) >= MIN_WAIT_S
        || took_ms
            .is_some_and(|ms| ms as f64 >= MIN_WAIT_S * 1000.0 && waits_by_nature(tool, input))
}

/// The longest `sleep N` (with an `s`, `m`, `h` or `d` suffix) in a shell command.
fn longest_sleep(cmd: &str) -> f64 {
    // Every shell call's PreToolUse asks: most commands have no sleep to split words for.
    if !cmd.contains("leep") {
        return 0.0;
    }
    let mut longest = 0.0f64;
    let mut words = shell_words(cmd);
    while let Some(w) = words.next() {
        if w == "sleep" || w == "Start-Sleep" {
            let Some(arg) = words.next() else { break };
            let arg = arg.trim_start_matches("-Seconds");
            if let Some(s) = duration_s(arg) {
                longest = longest.max(s);
            }
        }
    }
    longest
}

/// Commands that block until something outside happens: a follower, a watcher, a wait.
fn shell_waits(cmd: &str) -> bool {
    let words: Vec<&str> = shell_words(cmd).take(64).collect();
    words.iter().enumerate().any(|(i, w)| {
        let prev = i.checked_sub(1).map(|j| words[j]);
        match *w {
            // `gh run watch`, `kubectl wait`, `docker wait`, `wait-on`, `wait-for-it`, the builtin.
            "watch" | "wait" | "wait-on" | "wait-for-it" | "wait-for-it.sh" => true,
            "--watch" | "--wait" => true,
            // `tail -f`, `kubectl logs -f`, `journalctl -f`: they read what arrives.
            "-f" | "-F" | "--follow" => matches!(prev, Some("tail" | "logs" | "journalctl")),
            _ => false,
        }
    })
}

/// A shell command's words, split at blanks and separators (quotes kept with their word: the
/// waiting words are never quoted).
fn shell_words(cmd: &str) -> impl Iterator<Item = &str> {
    cmd.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '`'))
        .filter(|w| !w.is_empty())
}

/// `30`, `2.5`, `30s`, `5m`, `1h`, `1d` in seconds.
fn duration_s(arg: &str) -> Option<f64> {
    let (num, unit) = match arg
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
    {
        Some((at, _)) => arg.split_at(at),
        None => (arg, ""),
    };
    let n: f64 = num.parse().ok()?;
    let scale = match unit {
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return None,
    };
    Some(n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bash(cmd: &str) -> Value {
        json!({ "command": cmd })
    }

    #[test]
    fn sleeps_in_every_spelling_are_waits() {
        for (cmd, s) in [
            ("sleep 3 && curl -sf localhost:8080/health", 3.0),
            ("sleep 2m; tail log", 120.0),
            ("until curl -sf x; do sleep 0.5; done", 0.5),
            ("echo a; sleep 30\ncat out.txt", 30.0),
            ("sleepy 30", 0.0),
            ("npm test", 0.0),
        ] {
            assert_eq!(declared_s("Bash", &bash(cmd)), s, "{cmd}");
        }
        assert!(waited_on_purpose("Bash", &bash("sleep 5; ls dist"), None));
        assert!(!waited_on_purpose(
            "Bash",
            &bash("sleep 1; ls dist"),
            Some(1_000)
        ));
    }

    #[test]
    fn background_reads_wait_by_their_nature_and_timeout() {
        let blocking = json!({"task_id": "b1", "block": true, "timeout": 30000});
        assert_eq!(declared_s("TaskOutput", &blocking), 30.0);
        assert_eq!(declared_s("TaskOutput", &json!({"task_id": "b1"})), 30.0);
        let peek = json!({"task_id": "b1", "block": false, "timeout": 5000});
        assert_eq!(declared_s("TaskOutput", &peek), 0.0);
        assert!(!waited_on_purpose("TaskOutput", &peek, Some(10)));
        let poll = json!({"session_id": 7, "chars": "", "yield_time_ms": 30000});
        assert_eq!(declared_s("write_stdin", &poll), 30.0);
        let typing = json!({"session_id": 7, "chars": "q\n", "yield_time_ms": 100});
        assert!(!waited_on_purpose("write_stdin", &typing, Some(100)));
        assert!(waited_on_purpose(
            "read_bash",
            &json!({"shellId": "1", "delay": 10}),
            None
        ));
        assert!(waited_on_purpose(
            "read_background_output",
            &json!({"pid": 4242, "delay_ms": 2000}),
            None
        ));
        assert!(polls("read_background_output"));
        // A non-blocking peek that answered at once did not wait; one that took 20 s did.
        let peek = json!({"bash_id": "b1"});
        assert!(!waited_on_purpose("BashOutput", &peek, Some(40)));
        assert!(waited_on_purpose("BashOutput", &peek, Some(20_000)));
    }

    #[test]
    fn watchers_and_followers_wait_and_ordinary_commands_do_not() {
        for cmd in [
            "gh run watch 123",
            "gh pr checks --watch",
            "kubectl wait --for=condition=ready pod/x --timeout=120s",
            "docker compose up -d --wait",
            "timeout 60 tail -f server.log",
            "kubectl logs -f deploy/api",
            "npx wait-on http://localhost:3000",
        ] {
            assert!(waits_by_nature("Bash", &bash(cmd)), "{cmd}");
        }
        for cmd in [
            "cargo test",
            "pytest -x --timeout 30",
            "git diff -f",
            "rm -f out.txt",
            "timeout 60 pytest",
        ] {
            assert!(!waits_by_nature("Bash", &bash(cmd)), "{cmd}");
        }
    }
}
