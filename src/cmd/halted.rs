//! `loopgate halted`: whether a session was halted by loopgate, as an exit status a script can
//! branch on, and the halt's record (reason code, evidence, how to resume).

use crate::judge::halt::Halt;
use crate::judge::state::SessionState;
use crate::protocol::exit::Exit;
use crate::store::Store;
use anyhow::{bail, Result};
use serde_json::{json, Value};

/// The session `--session` names, or the most recently active one.
pub fn pick(store: &Store, session: Option<&str>) -> Result<(String, SessionState)> {
    let wanted = session.map(Store::stem);
    let found = store
        .sessions()
        .into_iter()
        .filter(|(stem, _)| wanted.as_ref().is_none_or(|w| w == stem))
        .filter_map(|(stem, path)| Some((stem, Store::peek(&path)?)))
        .max_by(|a, b| {
            a.1.updated_ms
                .cmp(&b.1.updated_ms)
                .then_with(|| b.0.cmp(&a.0))
        });
    match (found, session) {
        (Some(f), _) => Ok(f),
        (None, Some(id)) => bail!("no state for session {id:?} in {}", store.dir().display()),
        (None, None) => bail!("no sessions in {}", store.dir().display()),
    }
}

/// Prints the halt that stands (one line, or JSON) and exits 3; 0 when none stands.
pub fn run(store: &Store, session: Option<&str>, as_json: bool) -> Result<Exit> {
    let (_, state) = pick(store, session)?;
    let standing = state.halts.last.as_ref().filter(|h| h.stands());
    if as_json {
        let mut v = match &state.halts.last {
            Some(h) => record(&state.session, h),
            None => Value::Null,
        };
        crate::judge::redact::mask_value(&mut v);
        println!(
            "{}",
            json!({"session": state.session, "halted": standing.is_some(), "halt": v, "halts": state.halts.count})
        );
    } else {
        match (standing, &state.halts.last) {
            (Some(h), _) => println!(
                "halted: {} at {} (session {}): {} To go on: {}.",
                h.code,
                crate::platform::clock::rfc3339(h.at_ms),
                state.session,
                crate::judge::redact::mask(&h.reason),
                crate::judge::halt::how_to_resume(&state.session, true),
            ),
            (None, Some(h)) => println!(
                "not halted: session {} was halted ({}) and continued at {}",
                state.session,
                h.code,
                crate::platform::clock::rfc3339(h.continued_ms.unwrap_or_default()),
            ),
            (None, None) => println!("not halted: session {}", state.session),
        }
    }
    Ok(if standing.is_some() {
        Exit::Halted
    } else {
        Exit::Ok
    })
}

/// A halt as `status --json` and `halted --json` show it.
pub fn record(session: &str, h: &Halt) -> Value {
    json!({
        "reason_code": h.code,
        "at": crate::platform::clock::rfc3339(h.at_ms),
        "turn": h.turn,
        "event": h.event,
        "detector": h.detector,
        "reason": h.reason,
        "evidence": h.evidence_value(),
        "standing": h.stands(),
        "continued_at": h.continued_ms.map(crate::platform::clock::rfc3339),
        "resume": crate::judge::halt::how_to_resume(session, true),
    })
}
