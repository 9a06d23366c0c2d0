//! Different questions, the same answer (seed 000's "stuck" quadrant: new approaches, same
//! outcome). Reworded searches or different commands that keep returning exactly the same
//! substantial answer, with no new state between, learn nothing: a warning once `warn_at` distinct
//! calls have returned it, and the next new question of the same kind is refused once `deny_at`
//! would be reached. Read-only tools are not exempt. The repeat rule owns repeats of one call;
//! this detector counts distinct calls only, so it never judges the same evidence twice.

use super::{Call, View};
use crate::judge::ledger::{Entry, Ledger};
use crate::protocol::tool::ToolClass;
use crate::protocol::verdict::{Action, Severity, Verdict};
use crate::util::canon::Digest16;

pub const NAME: &str = "stagnation";

/// Tools whose answers are compared with each other: looking tools with looking tools, commands
/// with commands. File changes are judged by the state they produce, never here.
fn family(c: ToolClass) -> Option<u8> {
    match c {
        ToolClass::Search => Some(0),
        ToolClass::Shell => Some(1),
        ToolClass::Other => Some(2),
        // Reading what a search found is using the answer, not asking again.
        ToolClass::Read => Some(3),
        ToolClass::Write | ToolClass::Edit => None,
    }
}

/// The latest substantial answer of this family in the current epoch, and the distinct calls that
/// returned it in a row (within the family) since the last new state.
fn stuck_on(ledger: &Ledger, fam: u8, epoch: u32) -> Option<(&Entry, Vec<Digest16>)> {
    let mut window = ledger
        .answers()
        .take_while(|e| e.epoch_after == epoch)
        .filter(|e| family(e.class) == Some(fam));
    let latest = window.next()?;
    if !latest.rich || latest.answer.is_none() {
        return None;
    }
    let mut keys = vec![latest.key];
    for e in window {
        if e.answer != latest.answer {
            break;
        }
        if !keys.contains(&e.key) {
            keys.push(e.key);
        }
    }
    Some((latest, keys))
}

/// Before a call: a new question of a family stuck on one answer `deny_at - 1` times is refused.
pub fn check(v: &View, call: &Call) -> Option<Verdict> {
    let cfg = &v.config.detectors.stagnation;
    if !cfg.enabled || cfg.ignore_tools.iter().any(|t| t == call.tool) {
        return None;
    }
    let fam = family(call.class)?;
    let (latest, keys) = stuck_on(v.ledger, fam, v.world.epoch)?;
    if keys.contains(&call.key) || (keys.len() as u32) + 1 < cfg.deny_at.max(2) {
        return None;
    }
    if v.now_ms.saturating_sub(latest.end_ms) >= cfg.cooldown_minutes * 60_000 {
        return None;
    }
    let reason = format!(
        "LOOP_DETECTED (loopgate): your last {} different {} all returned exactly the same answer, and nothing has changed since. \
         Asking another way will not find anything new: use what you already have, change something, or tell the user what you cannot find.",
        keys.len(),
        kind(call.class)
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::High, reason)
            .loop_warning()
            .with("distinct_calls", keys.len())
            .with(
                "answer",
                latest.answer.map(|a| a.short()).unwrap_or_default(),
            )
            .with("deny_at", cfg.deny_at),
    )
}

/// After an answer: the warning, once, when the `warn_at`-th distinct call returns it.
pub fn on_answer(v: &View, e: &Entry) -> Option<Verdict> {
    let cfg = &v.config.detectors.stagnation;
    if !cfg.enabled || cfg.ignore_tools.iter().any(|t| *t == e.tool) {
        return None;
    }
    let fam = family(e.class)?;
    let (latest, keys) = stuck_on(v.ledger, fam, v.world.epoch)?;
    if latest.key != e.key || keys.len() as u32 != cfg.warn_at.max(2) {
        return None;
    }
    // Only a new question counts: the same call again is the repeat rule's.
    let earlier = v
        .ledger
        .answers()
        .skip(1)
        .take_while(|x| x.epoch_after == v.world.epoch)
        .any(|x| x.key == e.key);
    if earlier {
        return None;
    }
    let reason = format!(
        "loopgate: {} different {} in a row have returned exactly the same answer. Rewording the question is not finding anything new; \
         use what you have, or change approach.",
        keys.len(),
        kind(e.class)
    );
    Some(
        Verdict::new(NAME, Action::Warn, Severity::Medium, reason)
            .loop_warning()
            .with("distinct_calls", keys.len())
            .with("warn_at", cfg.warn_at),
    )
}

fn kind(c: ToolClass) -> &'static str {
    match c {
        ToolClass::Search => "searches",
        ToolClass::Read => "reads",
        ToolClass::Shell => "commands",
        _ => "calls",
    }
}
