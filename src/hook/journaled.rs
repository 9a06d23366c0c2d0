//! Calls judged while another process held the session lock: journaled then, replayed into the
//! state by the next call that holds the lock, so holding the lock cannot switch loopgate off.

use super::session::Session;
use super::Call;
use crate::judge::engine::{self, Ctx};
use crate::judge::state::SessionState;
use crate::protocol::dialect::Read;
use crate::protocol::payload::Event;
use crate::store::journal::Pending;

/// The journal to replay: this lock's, when a record is marked pending, or the holder's.
pub(super) fn pending(session: &Session, notices: &mut Vec<String>) -> Option<Pending> {
    let lock = session.lock();
    let path = lock
        .filter(|l| l.journal_pending())
        .map(|l| l.journal_path())
        .or_else(|| session.busy().map(|b| b.journal_path()))?;
    match crate::store::journal::read(&path, lock.is_some()) {
        Ok(j) => j,
        Err(e) => {
            notices.push(format!("cannot read the journal {}: {e}", path.display()));
            None
        }
    }
}

/// Replays journaled calls into `state`, in order; their verdicts were given when they were
/// judged and are not given again.
pub(super) fn replay<'a>(
    state: &mut SessionState,
    records: &[crate::store::journal::Record],
    session_id: &str,
    ctx_at: &dyn Fn(u64) -> Ctx<'a>,
) {
    for r in records {
        let (Some(agent), Some(expected)) = (r.agent(), r.expected()) else {
            continue;
        };
        let Ok(bytes) = serde_json::to_vec(&r.input) else {
            continue;
        };
        let Ok(Read::Judge { payload, event, .. }) =
            crate::protocol::dialect::read(agent, expected, &bytes)
        else {
            continue;
        };
        if payload.session_id != session_id
            || matches!(event, Event::SessionStart | Event::ConfigChange)
        {
            continue;
        }
        let _ = engine::handle(state, &payload, event, &ctx_at(r.ms));
    }
}

/// The session notice key for "the lock is held elsewhere", told once per hold.
fn busy_notice_key(session_id: &str) -> String {
    format!("{session_id}\0lock-busy")
}

/// The journal's records are in the saved state: empty it, clear the mark, and let a later hold
/// be told again.
pub(super) fn merged(
    dir: &std::path::Path,
    lock: &crate::store::SessionLock,
    journal: crate::store::journal::Pending,
    session_id: &str,
    notices: &mut Vec<String>,
) {
    let n = journal.records.len();
    // Cleared while appenders still wait for the journal's lock: one that appends after it is
    // released marks the file again, so its record is not left behind unmarked.
    lock.mark_journal_pending(false);
    match journal.finish() {
        Ok(true) => {}
        Ok(false) => lock.mark_journal_pending(true),
        Err(e) => {
            lock.mark_journal_pending(true);
            notices.push(format!("cannot empty the session's journal: {e}"));
        }
    }
    crate::store::notice::forget(dir, &busy_notice_key(session_id));
    notices.push(format!(
        "the session lock is free again; {n} call{} judged while it was held {} merged into the \
         session state",
        if n == 1 { "" } else { "s" },
        if n == 1 { "was" } else { "were" }
    ));
}

/// The lock is held elsewhere: this call goes to the journal, so the next call counts it.
pub(super) fn journal_call(
    dir: &std::path::Path,
    busy: &crate::store::Busy,
    call: &Call,
    notices: &mut Vec<String>,
) {
    let path = busy.journal_path();
    let recorded =
        crate::store::journal::line(call.input, call.cli.agent, call.expected, call.now_ms)
            .map(|line| crate::store::journal::append(&path, &line));
    busy.mark_journal();
    let text = match recorded {
        Some(Ok(crate::store::journal::Appended::Recorded)) => {
            "the session state is locked by another process; calls are judged on \
                           the saved state plus a journal of the calls since, and recorded in that \
                           journal until the lock is free (holding the lock cannot switch \
                           loopgate off)"
                .to_string()
        }
        Some(Ok(crate::store::journal::Appended::DroppedOlder)) => {
            "the session state is locked by \
                another process and its journal filled up: its older calls were dropped, the \
                latest ones are still recorded and counted"
                .to_string()
        }
        None => "the session state is locked by another process; this call could not be \
                 journaled and is judged but not recorded"
            .to_string(),
        Some(Err(e)) => format!(
            "the session state is locked by another process and its journal {} cannot be \
             written ({e}): this call was judged but not recorded",
            path.display()
        ),
    };
    if crate::store::notice::first_time(dir, &busy_notice_key(&call.payload.session_id), &text) {
        notices.push(text);
    }
}
