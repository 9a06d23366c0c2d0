//! Whether real waiting came before a call: waiting is judged by time, never by counting calls.

use super::Ctx;
use crate::util::canon::Digest16;

/// Did real waiting come before this call: it waits on purpose itself (`sleep 3 && curl`, a
/// blocking read of a background task), its previous answer came from a call that waited (a poll
/// that blocked for 30 s), a call that waited ran since then, or minutes of quiet passed. For a
/// failure that has not changed, minutes spent on other calls are a detour, not waiting (the
/// warning must not be forgotten after it).
pub(super) fn waited(
    ledger: &crate::judge::ledger::Ledger,
    key: &Digest16,
    waits_itself: bool,
    now_ms: u64,
    ctx: &Ctx,
) -> bool {
    if waits_itself {
        return true;
    }
    let gap = ctx.config.detectors.repeat.waiting_gap_seconds;
    let Some(prev) = ledger.last_answer_of(key) else {
        return false;
    };
    // A sleep, or an answer that said what it reports on is still under way (a CI run queued)
    // and real time since: asking again then is waiting for it (asking again at once is not).
    let min_wait_ms = (crate::judge::wait::MIN_WAIT_S * 1000.0) as u64;
    if prev.sleeps || (prev.under_way && now_ms.saturating_sub(prev.end_ms) >= min_wait_ms) {
        return true;
    }
    let failing = prev.status.failed();
    let mut since = ledger
        .entries
        .iter()
        .rev()
        .take_while(|e| e.end_ms >= prev.end_ms && e.key != *key)
        .peekable();
    let quiet = since.peek().is_none();
    let gap_passed = now_ms.saturating_sub(prev.end_ms) >= gap * 1000;
    (gap_passed && (quiet || !failing)) || since.any(|e| e.sleeps)
}
