//! `loopgate statusline`: one short line for Claude Code's status bar. Claude Code runs its
//! `statusLine` command with the session's JSON on stdin (`session_id`, `cwd`, `model`, …;
//! `tests/fixtures/statusline/`) whenever the screen updates, so this reads the state without the
//! lock and without clap, and says little while all is well. The one thing it writes is Claude
//! Code's own cost of the session (`cost.total_cost_usd`), for the loop budget, in one tiny file,
//! only when it changed and only for a session loopgate knows.

use crate::judge::ceiling::{SESSION_BOUND, TURN_BOUND};
use crate::judge::state::SessionState;
use crate::store::Store;
use std::io::Read;
use std::path::PathBuf;

/// Where the status line's input stops being read: Claude Code's is about 2 KiB.
const MAX_INPUT: u64 = 64 << 10;

/// Prints the line for the session named on stdin (`json`: its facts as one JSON object);
/// `state_dir` is `--state-dir`, if given.
pub fn run(state_dir: Option<PathBuf>, json: bool) {
    let mut input = String::new();
    let _ = std::io::stdin().take(MAX_INPUT).read_to_string(&mut input);
    let (text, state) = judge(&input, state_dir);
    if json {
        let facts = match &state {
            Some(s) => {
                let observed = s.observed();
                serde_json::json!({
                "line": text,
                "session": s.session,
                "calls": s.totals.calls,
                "warnings": s.totals.warnings,
                "refused": if observed { 0 } else { s.totals.denials },
                "would_refuse": if observed { s.totals.denials } else { 0 },
                "walked_into": if s.ceiling.turn == s.turn.number { s.ceiling.refusals } else { 0 },
                "turn_bound": TURN_BOUND,
                "turn_ended": s.ceiling.turn == s.turn.number && s.ceiling.ended,
                "ended_turns": s.ceiling.ended_turns,
                "session_bound": SESSION_BOUND,
                "told": told(s),
                "budget": budget(s).1,
                })
            }
            None => serde_json::json!({"line": text}),
        };
        println!("{facts}");
    } else {
        println!("{text}");
    }
}

/// The line, and the session's state when there is one.
fn judge(input: &str, state_dir: Option<PathBuf>) -> (String, Option<SessionState>) {
    if std::env::var("LOOPGATE_DISABLE")
        .ok()
        .and_then(|v| crate::config::sources::parse_bool(&v))
        == Some(true)
    {
        return ("loopgate off (LOOPGATE_DISABLE is set)".into(), None);
    }
    // As a hook's: the flag or the default, never `LOOPGATE_STATE_DIR` (Claude Code runs the
    // status line with the settings files' `env`, which could point it at an empty dir).
    let dir = state_dir.or_else(crate::config::paths::state_dir);
    // A change the person allowed (`/loopgate allow <id>`) that switches loopgate off stays on
    // the status bar while it is in effect: its record is a file an agent could forge.
    if let Some(a) = dir
        .as_deref()
        .and_then(|d| crate::defence::sanction::in_effect(d).into_iter().next())
    {
        let file = a.file.file_name().unwrap_or_default().to_string_lossy();
        return (
            format!(
                "loopgate OFF in {file}: allowed by /loopgate allow {} (`loopgate doctor`)",
                a.id
            ),
            None,
        );
    }
    let input = serde_json::from_str::<serde_json::Value>(input).ok();
    let session = input
        .as_ref()
        .and_then(|v| v.get("session_id")?.as_str().map(str::to_owned));
    let Some(session) = session.filter(|s| !s.is_empty()) else {
        return ("loopgate".into(), None);
    };
    let state = dir
        .iter()
        .chain(Store::fallback_dir().iter())
        .find_map(|d| Some((d.clone(), Store::peek(&Store::state_path_in(d, &session))?)));
    let live = input
        .as_ref()
        .and_then(|v| v.pointer("/cost/total_cost_usd")?.as_f64());
    if let (Some((d, _)), Some(usd)) = (&state, live) {
        crate::store::budget::write_live(d, &session, usd);
    }
    match state.map(|(_, s)| s) {
        Some(s) => (describe(&s), Some(s)),
        // No call of this session has reached loopgate yet.
        None => ("loopgate ✓".into(), None),
    }
}

/// Loop spend against the budget, once a loop has cost anything (the configuration is read only
/// then): `loops $0.42/$5 · today $1.10/$20`; and the same as facts.
fn budget(s: &SessionState) -> (Option<String>, serde_json::Value) {
    let b = &s.budget;
    if b.usd <= 0.0 && b.day_usd <= 0.0 {
        return (None, serde_json::Value::Null);
    }
    let project = super::project_dir(None);
    let cfg = super::load_config(None, false, project.as_deref())
        .config
        .budget;
    let today = crate::store::budget::date_of(crate::platform::clock::now_ms());
    let facts = crate::judge::budget::summary(b, &cfg, &today);
    let n = |k: &str| facts[k].as_f64().unwrap_or(0.0);
    let mut line = format!(
        "loops ${:.2}/${:.2}",
        n("session_counted_usd"),
        n("session_limit_usd")
    );
    if n("day_usd") > 0.0 {
        line.push_str(&format!(
            " · today ${:.2}/${:.2}",
            n("day_usd"),
            n("day_limit_usd")
        ));
    }
    (Some(line), facts)
}

/// The things the person was told (tampering, a state lost or put back) among the session's
/// recent decisions.
fn told(s: &SessionState) -> usize {
    s.recent.iter().filter(|n| n.action == "told").count()
}

/// Where one session stands, shortest first: calls; then warnings and refusals if any; then
/// the ceiling once the agent has walked into a refusal this turn.
pub fn describe(s: &SessionState) -> String {
    let t = &s.totals;
    let c = &s.ceiling;
    let this_turn = c.turn == s.turn.number;
    if c.ended_turns >= SESSION_BOUND {
        return format!(
            "loopgate ■ {}/{SESSION_BOUND} turns ended at the loop ceiling: unattended prompts \
             are refused until `loopgate reset`",
            c.ended_turns
        );
    }
    if this_turn && c.ended {
        return format!(
            "loopgate ■ turn ended: {} refusals walked into · {}/{SESSION_BOUND} turns ended",
            c.refusals.max(TURN_BOUND),
            c.ended_turns
        );
    }
    let calls = if t.calls == 1 { "call" } else { "calls" };
    let mut parts = vec![format!("{} {calls}", t.calls)];
    if t.warnings > 0 {
        parts.push(format!("{} warned", t.warnings));
    }
    // Observe mode refuses nothing: what it counted is what it would have refused.
    let observed = s.observed();
    if t.denials > 0 && observed {
        parts.push(format!("{} would be refused (observe mode)", t.denials));
    } else if t.denials > 0 {
        parts.push(format!("{} refused", t.denials));
    }
    if this_turn && c.refusals > 0 {
        parts.push(format!("ceiling {}/{TURN_BOUND}", c.refusals));
    }
    if c.ended_turns > 0 {
        parts.push(format!("{}/{SESSION_BOUND} turns ended", c.ended_turns));
    }
    let (spent, _) = budget(s);
    parts.extend(spent);
    let told = told(s);
    if told > 0 {
        parts.push(format!("{told} told: loopgate status"));
    }
    let mark = if told > 0 {
        "⚠"
    } else if (t.denials > 0 && !observed) || c.ended_turns > 0 {
        "▲"
    } else {
        "✓"
    };
    format!("loopgate {mark} {}", parts.join(" · "))
}
