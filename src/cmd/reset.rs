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
    cfg: &crate::config::Config,
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
    let mut cleared: Vec<String> = Vec::new();
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
            cleared.push(state.session.clone());
            done += 1;
        }
    }
    let log = crate::config::Log::default();
    if let Err(e) = crate::store::events::append(store.dir(), &lines, &log, lock_timeout) {
        crate::hook::say(&format!("the reset is not in the event log: {e:#}"));
    }
    if done > 0 {
        notify(store, cfg, &cleared, all, now);
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

/// Every reset goes out to the person's receiver at once, the person's own included: a reset
/// throws away what loopgate counted, and the receiver cannot tell who typed it.
fn notify(store: &Store, cfg: &crate::config::Config, sessions: &[String], all: bool, now: u64) {
    let one = match sessions {
        [only] if !all => only.as_str(),
        _ => "*",
    };
    let reason = format!(
        "`loopgate reset{}` cleared the loop state of {} session{}: their loop counts start \
         again from zero",
        if all { " --all" } else { "" },
        sessions.len(),
        if sessions.len() == 1 { "" } else { "s" }
    );
    let notice = crate::hook::notify::Notice {
        kind: "reset",
        code: "loopgate_reset",
        session: one,
        project: None,
        cli: "loopgate",
        reason: &reason,
        evidence: serde_json::json!({"sessions": sessions, "all": all}),
        resume: "nothing to resume: if that was not you, `loopgate report` shows what came before"
            .into(),
        at_ms: now,
    };
    if let Some(failed) = crate::hook::notify::deliver(cfg, Some(store.dir()), "reset", &notice) {
        crate::hook::say(&failed);
    }
}
