//! Sessions remember the project: at a session's first prompt the project's record says whether
//! an outer loop is going round; a session's first turn is noted there when it ends.

use super::session::Session;
use super::Call;
use crate::judge::engine;
use crate::judge::state::SessionState;
use crate::protocol::payload::{clip, Event, Payload, MAIN_AGENT};
use crate::protocol::verdict::Verdict;
use crate::store::outer_loop;

/// At the main agent's first prompt (the one place the record is read; never on a tool call).
pub(super) fn check(
    call: &Call,
    session: &Session,
    state: &SessionState,
    attended: Option<bool>,
    notices: &mut Vec<String>,
) -> Option<Verdict> {
    let first_prompt = call.event == Event::UserPromptSubmit
        && call.payload.agent() == MAIN_AGENT
        && state.turn.number == 0;
    let (dir, store) = call.project_dir.zip(session.store.as_ref())?;
    if !first_prompt {
        return None;
    }
    outer_loop_check(store.dir(), dir, call.payload, attended, notices)
}

/// Notes the session's first turn in the project's record (nothing without a project or store).
pub(super) fn note(call: &Call, session: &Session, state: &SessionState) -> std::io::Result<()> {
    match call.project_dir.zip(session.store.as_ref()) {
        Some((dir, store)) => outer_loop_note(store.dir(), dir, state, call.now_ms),
        None => Ok(()),
    }
}

/// git's HEAD as the project record keeps it (empty outside git).
fn head_of(project: &std::path::Path) -> String {
    crate::platform::git::Stamp::take(project)
        .map(|s| crate::util::canon::hex16(&s.head))
        .unwrap_or_default()
}

fn outer_loop_check(
    state_dir: &std::path::Path,
    project: &std::path::Path,
    payload: &Payload,
    attended: Option<bool>,
    notices: &mut Vec<String>,
) -> Option<crate::protocol::verdict::Verdict> {
    let file = outer_loop::path(state_dir, project);
    let rec = outer_loop::read(&file);
    notices.extend(outer_loop::tampered(&file, &rec));
    if rec.sessions.is_empty() {
        return None;
    }
    let prompt = engine::prompt_digest(payload)?;
    outer_loop::check(
        &rec,
        &clip(&payload.session_id, 128),
        &crate::util::canon::hex16(&prompt.0),
        &head_of(project),
        attended,
        &file,
    )
}

/// A session's first turn, noted in the project's record when it ends.
fn outer_loop_note(
    state_dir: &std::path::Path,
    project: &std::path::Path,
    state: &SessionState,
    now_ms: u64,
) -> std::io::Result<()> {
    let Some(prompt) = state.turn.prompt else {
        return Ok(());
    };
    let sig = outer_loop::SessionSig {
        session: state.session.clone(),
        prompt: crate::util::canon::hex16(&prompt.0),
        signature: crate::util::canon::hex16(&engine::turn_signature(state).0),
        head: head_of(project),
        progress: engine::turn_progress(state),
        at_ms: now_ms,
    };
    outer_loop::note(&outer_loop::path(state_dir, project), sig)
}
