//! Waiting is not looping. A call that polls for something to change (a status check, a server
//! coming up, CI checks) is exempt from the call-count rules; it gets a budget in time and in
//! unchanged results instead, and is stopped only when what it waits for has not changed for
//! `max_unchanged_minutes` over at least `min_unchanged_results` identical answers. Progressing
//! output restarts the clock. (OpenClaw's poll handling; the complaints in research §8.1.)

use crate::clock::time_of_day;
use crate::config::Poll;
use crate::detectors::describe;
use crate::state::Run;
use crate::verdict::{Action, Severity, Verdict};
use serde_json::Value;

pub const NAME: &str = "poll_budget";

/// Commands and tools whose job is to wait and look again.
pub fn is_poll(tool: &str, input: &Value) -> bool {
    match tool {
        "BashOutput" | "TaskOutput" => true,
        "Bash" => {
            let cmd = input.get("command").and_then(Value::as_str).unwrap_or("");
            POLL_WORDS.iter().any(|w| cmd.contains(w))
        }
        t => {
            t.starts_with("mcp__")
                && (t.contains("wait") || t.contains("poll") || t.contains("status"))
        }
    }
}

const POLL_WORDS: &[&str] = &[
    "sleep ",
    "gh pr checks",
    "gh run view",
    "gh run watch",
    "gh run list",
    "kubectl get",
    "kubectl rollout status",
    "docker ps",
    "docker compose ps",
    "systemctl status",
    "curl -s",
    "curl -f",
    "curl --fail",
    "curl -I",
    "wget -q",
    "nc -z",
    "pg_isready",
    "tail -n",
    "tail -f",
    "tail -",
    "pgrep ",
    "ps aux",
    "lsof -i",
    "wait-on",
    "until ",
    "while ",
];

pub fn check(run: &Run, now_ms: u64, cfg: &Poll) -> Option<Verdict> {
    let unchanged_ms = now_ms.saturating_sub(run.streak_ms);
    if !cfg.enabled
        || run.outcome.is_none()
        || run.count < cfg.min_unchanged_results.max(1)
        || unchanged_ms < cfg.max_unchanged_minutes * 60_000
    {
        return None;
    }
    let reason = format!(
        "loopgate: {} has returned the same answer {} times since {} ({} min) — what it waits for is not changing. \
         Stop polling: check why it is stuck (logs, the process, the config), or tell the user what you are waiting for.",
        describe(&run.tool, &run.target),
        run.count,
        time_of_day(run.streak_ms),
        unchanged_ms / 60_000,
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::of_count(run.count), reason)
            .with("unchanged_results", run.count)
            .with("unchanged_minutes", unchanged_ms / 60_000),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recognises_polls() {
        assert!(is_poll(
            "Bash",
            &json!({"command": "sleep 30 && gh pr checks 12"})
        ));
        assert!(is_poll("BashOutput", &json!({})));
        assert!(!is_poll("Bash", &json!({"command": "cargo test"})));
    }

    #[test]
    fn budget_is_time_and_unchanged_results() {
        let cfg = Poll::default();
        let run = Run {
            count: 20,
            outcome: Some("pending".into()),
            streak_ms: 0,
            ..Run::default()
        };
        assert!(
            check(&run, 9 * 60_000, &cfg).is_none(),
            "many calls, short time"
        );
        assert!(check(&run, 11 * 60_000, &cfg).is_some());
        let few = Run {
            count: 2,
            ..run.clone()
        };
        assert!(
            check(&few, 60 * 60_000, &cfg).is_none(),
            "long time, few results"
        );
        assert!(check(&run, 0, &cfg).is_none(), "clock went backwards");
    }
}
