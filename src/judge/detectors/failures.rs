//! Layer 2 of seed 003: consecutive failures, read from the ledger. Cancellations and refusals are
//! not failures, and parallel calls that failed together are one failure (the model made one
//! decision). The warning repeats only every further `warn_after` failures.

use super::View;
use crate::judge::ledger::{Entry, Status};
use crate::protocol::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "failures";

/// Failed calls named in the warning.
const NAMED: usize = 5;

/// Trailing failed decisions: failures that overlapped in time in one batch count once.
fn streak<'a>(entries: impl Iterator<Item = &'a Entry>) -> (u32, Vec<&'a Entry>) {
    let mut n = 0;
    let mut named = Vec::new();
    let mut newer: Option<&Entry> = None;
    for e in entries {
        match e.status {
            Status::Ok => break,
            Status::Cancelled | Status::Refused | Status::Denied => continue,
            Status::Failed | Status::Rejected => {}
        }
        let parallel = newer.is_some_and(|x| x.batch == e.batch && x.start_ms <= e.end_ms);
        if !parallel {
            n += 1;
            if named.len() < NAMED {
                named.push(e);
            }
        }
        newer = Some(e);
    }
    (n, named)
}

pub fn on_answer(v: &View, e: &Entry) -> Option<Verdict> {
    let cfg = &v.config.failures;
    if !cfg.enabled || !e.status.failed() {
        return None;
    }
    let (n, named) = streak(v.ledger.entries.iter().rev());
    let (before, _) = streak(v.ledger.entries.iter().rev().skip(1));
    let every = cfg.warn_after.max(1);
    // Fire when the count reaches a multiple, not again for a parallel sibling of the same step.
    if n == before || n < every || !n.is_multiple_of(every) {
        return None;
    }
    // The same call failing five times is named once, with its count.
    let mut counted: Vec<(String, usize)> = Vec::new();
    for x in named.iter().rev() {
        let name = super::describe(&x.tool, &x.target);
        match counted.iter_mut().find(|(n, _)| *n == name) {
            Some(c) => c.1 += 1,
            None => counted.push((name, 1)),
        }
    }
    let names: Vec<String> = counted
        .into_iter()
        .map(|(name, k)| {
            if k > 1 {
                format!("{name} ({k}×)")
            } else {
                name
            }
        })
        .collect();
    let reason = format!(
        "loopgate: {n} tool calls in a row have failed (latest: {}). \
         Stop and reconsider before the next call: read the last error closely, check your assumptions \
         (paths, names, versions, whether the command exists), and change approach instead of retrying.",
        names.join("; "),
    );
    Some(
        Verdict::new(NAME, Action::Warn, Severity::of_count(n), reason)
            .with("consecutive_failures", n)
            .with("warn_after", every),
    )
}
