//! `loopgate reset`: clears loop state so a denied call may run again; config and log stay.

use crate::judge::state::{DecisionNote, Totals};
use crate::store::Store;
use anyhow::{bail, Result};
use std::time::Duration;

pub fn run(
    store: &Store,
    session: Option<&str>,
    all: bool,
    lock_timeout: Duration,
    as_json: bool,
) -> Result<()> {
    let stems: Vec<String> = if all {
        store.sessions().into_iter().map(|(stem, _)| stem).collect()
    } else {
        let Some(id) = session else {
            bail!("name a session with --session ID, or use --all");
        };
        let stem = Store::stem(id);
        if !store.sessions().iter().any(|(s, _)| *s == stem) {
            bail!("no state for session {id:?} in {}", store.dir().display());
        }
        vec![stem]
    };
    let mut done = 0;
    let mut lines = Vec::new();
    let now = crate::platform::clock::now_ms();
    for stem in &stems {
        let lock = store.lock_stem(stem, lock_timeout)?;
        if let (Some(mut state), _) = store.load(&lock)? {
            state.reset_loops();
            // The breaker's way out, as its refusals say: it starts closed, its history kept.
            crate::judge::detectors::breaker::reset(&mut state.breaker, now);
            // `status` starts again from zero and says so; what came before stays in the event
            // log, where `report` adds it back.
            let before = std::mem::take(&mut state.totals);
            state.recent.clear();
            state.note(DecisionNote {
                at_ms: now,
                agent: crate::protocol::payload::MAIN_AGENT.into(),
                event: "reset".into(),
                tool: "-".into(),
                detector: "loopgate reset".into(),
                action: "reset".into(),
                severity: "info".into(),
                enforced: true,
                summary: "loop state and counters cleared; what came before: `loopgate report`"
                    .into(),
            });
            state.updated_ms = now;
            store.save(&lock, &mut state)?;
            lines.push(reset_line(&state.session, now, &before));
            done += 1;
        }
    }
    let log = crate::config::Log::default();
    if let Err(e) = crate::store::events::append(store.dir(), &lines, &log, lock_timeout) {
        crate::hook::say(&format!("the reset is not in the event log: {e:#}"));
    }
    if as_json {
        println!("{}", serde_json::json!({"reset": done}));
    } else {
        println!(
            "loopgate: reset {done} session{}",
            if done == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

/// The event-log line of a reset: the counters it cleared, for `report` to keep counting them.
fn reset_line(session: &str, now_ms: u64, before: &Totals) -> serde_json::Value {
    serde_json::json!({
        "ts": crate::platform::clock::rfc3339(now_ms),
        "session": session,
        "agent": crate::protocol::payload::MAIN_AGENT,
        "prompt_id": null,
        "event": "reset",
        "tool": null,
        "detector": "reset",
        "decision": "reset",
        "enforced": true,
        "severity": "info",
        "reason": "loopgate reset",
        "evidence": {"cleared": before},
    })
}
