//! `loopgate status`: sessions with their counters and last decisions.

use crate::clock::rfc3339;
use crate::state::SessionState;
use crate::store::Store;
use anyhow::{bail, Result};
use serde_json::{json, Value};

pub fn run(store: &Store, session: Option<&str>, as_json: bool) -> Result<()> {
    let wanted = session.map(Store::stem);
    let sessions: Vec<(String, SessionState)> = store
        .sessions()
        .into_iter()
        .filter(|(stem, _)| wanted.as_ref().is_none_or(|w| w == stem))
        .filter_map(|(stem, path)| Some((stem, Store::peek(&path)?)))
        .collect();
    if let (Some(id), true) = (session, sessions.is_empty()) {
        bail!("no state for session {id:?} in {}", store.dir().display());
    }
    if as_json {
        let all: Vec<Value> = sessions.iter().map(|(stem, s)| summary(stem, s)).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    if sessions.is_empty() {
        println!("no sessions in {}", store.dir().display());
        return Ok(());
    }
    for (_, s) in &sessions {
        print_session(s);
    }
    Ok(())
}

pub fn summary(stem: &str, s: &SessionState) -> Value {
    let agents: serde_json::Map<String, Value> = s
        .agents
        .iter()
        .map(|(name, a)| {
            let mut top: Vec<_> = a.runs.values().filter(|r| r.count >= 2).collect();
            top.sort_by_key(|r| std::cmp::Reverse(r.count));
            let repeats: Vec<Value> = top
                .iter()
                .take(5)
                .map(|r| json!({"tool": r.tool, "target": r.target, "identical_in_a_row": r.count, "total": r.total}))
                .collect();
            (
                name.clone(),
                json!({
                    "calls_recorded": a.calls.len(),
                    "consecutive_failures": a.consecutive_failures,
                    "epoch": a.epoch,
                    "repeats": repeats,
                }),
            )
        })
        .collect();
    json!({
        "session": s.session,
        "state_file": format!("{stem}.json"),
        "started": rfc3339(s.started_ms),
        "updated": rfc3339(s.updated_ms),
        "turn": s.turn,
        "totals": s.totals,
        "breaker": s.breaker,
        "agents": agents,
        "recent": s.recent,
    })
}

fn print_session(s: &SessionState) {
    let t = &s.totals;
    println!("session {}  (updated {})", s.session, rfc3339(s.updated_ms));
    println!(
        "  calls {}  failures {}  denials {}  warnings {}  stop blocks {}",
        t.calls, t.failures, t.denials, t.warnings, t.blocks
    );
    println!(
        "  turn {}: {} edit attempts ({} failed), {} interventions, {} stop blocks",
        s.turn.number,
        s.turn.edit_attempts,
        s.turn.edit_failures,
        s.turn.interventions,
        s.turn.stop_blocks
    );
    println!(
        "  circuit breaker {:?}, {} turns in a row without progress",
        s.breaker.state, s.breaker.no_progress_turns
    );
    for t in &s.breaker.history {
        println!(
            "    {} {} -> {}: {}",
            rfc3339(t.at_ms),
            t.from,
            t.to,
            t.reason
        );
    }
    for (name, a) in &s.agents {
        let worst = a.runs.values().max_by_key(|r| r.count);
        let repeat = worst
            .filter(|r| r.count >= 2)
            .map(|r| format!(", longest repeat {}× {} {}", r.count, r.tool, r.target))
            .unwrap_or_default();
        println!(
            "  agent {name}: {} consecutive failures{repeat}",
            a.consecutive_failures
        );
    }
    for n in &s.recent {
        println!(
            "  {} {} {} {} [{} · {}{}] {}",
            rfc3339(n.at_ms),
            n.event,
            n.tool,
            n.action,
            n.detector,
            n.severity,
            if n.enforced { "" } else { ", observed" },
            n.summary
        );
    }
}
