//! The person continues a halted session (`/loopgate continue`, `loopgate continue`): the halt is
//! marked continued and what keeps the session stopped is lifted, under the session's lock,
//! keeping everything else loopgate knows of it ([`crate::judge::halt::continue_session`]).

use super::Store;
use crate::judge::halt::Halt;
use crate::judge::state::DecisionNote;
use anyhow::{bail, Result};
use std::time::Duration;

/// What `continue` found.
pub enum Continued {
    /// The halt that stood, now continued.
    Halt(Halt),
    /// Nothing stood: never halted, or continued already.
    Nothing,
}

/// Continues the session whose state file has `stem`, logging it in the event log (a log that
/// cannot be written is said in the second value: the continue stands all the same). `raise`
/// adds that many dollars to the session's loop budget first (`continue --budget N`,
/// `/loopgate budget +N`), halted or not.
pub fn continue_stem(
    store: &Store,
    stem: &str,
    now_ms: u64,
    timeout: Duration,
    raise: Option<f64>,
) -> Result<(Continued, Option<String>)> {
    let lock = store.lock_stem(stem, timeout)?;
    let (Some(mut state), _) = store.load(&lock)? else {
        bail!("no state for this session in {}", store.dir().display());
    };
    let raise = raise.filter(|n| n.is_finite() && *n > 0.0);
    if let Some(n) = raise {
        crate::judge::budget::raise(&mut state.budget, n);
    }
    let Some(halt) = crate::judge::halt::continue_session(&mut state, now_ms) else {
        if raise.is_some() {
            state.updated_ms = state.updated_ms.max(now_ms);
            store.save(&lock, &mut state)?;
        }
        return Ok((Continued::Nothing, None));
    };
    state.note(DecisionNote {
        at_ms: now_ms,
        agent: crate::protocol::payload::MAIN_AGENT.into(),
        event: "continue".into(),
        tool: "-".into(),
        detector: "loopgate continue".into(),
        action: "continue".into(),
        severity: "info".into(),
        enforced: true,
        summary: format!(
            "the person continued the session after its halt ({})",
            halt.code
        ),
    });
    state.updated_ms = state.updated_ms.max(now_ms);
    store.save(&lock, &mut state)?;
    let line = serde_json::json!({
        "ts": crate::platform::clock::rfc3339(now_ms),
        "session": state.session,
        "agent": crate::protocol::payload::MAIN_AGENT,
        "event": "continue",
        "detector": "continue",
        "decision": "continue",
        "enforced": true,
        "severity": "info",
        "reason": format!("the person continued the session after its halt ({})", halt.code),
        "evidence": {"halt": halt.code, "halted_at_ms": halt.at_ms},
    });
    drop(lock);
    let logged = super::events::append(
        store.dir(),
        &[line],
        &crate::config::Log::default(),
        timeout,
    );
    let problem = logged
        .err()
        .map(|e| format!("the continue is not in the event log: {e:#}"));
    Ok((Continued::Halt(halt), problem))
}
