//! After the detectors: whether the agent walked into a refusal (defiance), stage 3 of the
//! ladder (a loop the interventions did not break goes to the person), and the accounting of
//! each decision in the state.

use super::{decision_name, Ctx};
use crate::judge::ceiling;
use crate::judge::detectors::{self};
use crate::judge::ledger::Status;
use crate::judge::redact;
use crate::judge::state::{DecisionNote, Defied, SessionState, Standing};
use crate::protocol::payload::{Event, Payload, MAIN_AGENT};
use crate::protocol::verdict::{strongest, Action, Severity, Verdict};
use crate::util::canon::Digest16;
use serde_json::Value;

/// Whether the call refused now is one the agent walked into (issue 27): a refusal already
/// stood in this turn and nothing has changed since — no new state of the work, no news from
/// any call, and, where the refused call was a wait, less than the waiting gap of real time.
/// Returns how many refusals this adds to the ceiling's count: the standing one counts too, the
/// first time the agent goes on regardless. A first refusal, a warning or an `ask` adds none.
pub(super) fn defiance(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    verdicts: &[Verdict],
    subject: Option<Digest16>,
    ctx: &Ctx,
) -> u32 {
    state.heed.follow(state.turn.number);
    // A turn already over is refused whole: nothing more is walked into. In observe mode nothing
    // was refused, so nothing can be walked into: the ceiling and the ladder never count there.
    if !ctx.enforced() || (state.ceiling.ended && state.ceiling.turn == state.turn.number) {
        return 0;
    }
    let refusal = strongest(verdicts).filter(|v| {
        event == Event::PreToolUse
            && matches!(v.action, Action::Deny | Action::Halt)
            && v.detector != ceiling::NAME
    });
    let Some(v) = refusal else {
        return 0;
    };
    let agent = p.agent_key();
    let now = ctx.now_ms;
    let epoch = state.world.epoch;
    let news = state.heed.news_of(&agent);
    let gap_ms = ctx.config.detectors.repeat.waiting_gap_seconds * 1000;
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    let what = detectors::describe(p.tool(), &redact::target(p.tool(), input));
    let wait = state.agents.get(&agent).is_some_and(|a| {
        a.ledger
            .entries
            .back()
            .is_some_and(|e| Some(e.key) == subject && e.status == Status::Denied && e.waited)
    });
    let unchanged = state.heed.standing.as_ref().is_some_and(|s| {
        s.agent == agent
            && s.epoch == epoch
            && news <= s.at_ms
            && !(s.wait && now.saturating_sub(s.at_ms) >= gap_ms)
    });
    let counted = if unchanged {
        walked_into(&mut state.heed, now, &what, v.detector)
    } else {
        0
    };
    state.heed.standing = Some(Standing {
        at_ms: now,
        epoch,
        agent,
        wait,
        counted: counted > 0,
        what,
        detector: v.detector.to_string(),
    });
    counted
}

/// Stage 3 of the ladder: when a turn's interventions have not broken the loop, the next one goes
/// to the human. Attended, a PreToolUse `ask` puts it in front of them; unattended, the looping
/// call is denied and the turn's PostToolBatch ends the run (`decision: block` stops it at once,
/// where `continue: false` would still let the tool run). Stage 3 acts beyond the call in front of
/// it, so it needs evidence from two different repeated calls across model turns, never one batch.
pub(super) fn ladder(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    verdicts: &mut Vec<Verdict>,
    defied: bool,
    ctx: &Ctx,
) {
    let cfg = &ctx.config.ladder;
    if !cfg.enabled || p.agent() != MAIN_AGENT {
        return;
    }
    if deliver_escalation(state, event, verdicts, ctx) {
        return;
    }
    let Some(v) = strongest(verdicts) else {
        return;
    };
    // Only a refusal the agent walked into escalates: a warning, or one misjudged refusal, never
    // ends a turn.
    if !defied
        || !is_intervention(event, v)
        || state.turn.interventions < cfg.escalate_after.max(1)
        || state.turn.intervened_keys.len() < 2
    {
        return;
    }
    let unattended = ctx.attended == Some(false);
    let reason = redact::mask(&format!(
        "loopgate: {} interventions in this turn, on {} different calls, have not broken the loop, so it goes to the user now. Latest: {}",
        state.turn.interventions,
        state.turn.intervened_keys.len(),
        v.reason
            .trim_start_matches("LOOP_DETECTED (loopgate): ")
            .trim_start_matches("loopgate: ")
    ));
    // Re-arm: the next escalation needs as many failed interventions again.
    state.turn.interventions = 0;
    state.turn.intervened_keys.clear();
    state.turn.escalations += 1;
    state.totals.escalations += 1;
    let action = match (event, unattended) {
        _ if !ctx.caps.halt => {
            state.turn.escalation = Some(reason.clone());
            if event == Event::PreToolUse {
                Action::Deny
            } else {
                Action::Warn
            }
        }
        (Event::PreToolUse, false) => Action::Ask,
        (Event::PostToolBatch, true) => Action::Halt,
        (Event::PreToolUse, true) => {
            state.turn.escalation = Some(reason.clone());
            Action::Deny
        }
        _ => {
            state.turn.escalation = Some(reason.clone());
            Action::Warn
        }
    };
    verdicts.push(
        Verdict::new(LADDER, action, Severity::Critical, reason)
            .loop_warning()
            .with("stage", 3)
            .with("attended", !unattended)
            .with("escalated_from", v.detector),
    );
}

/// The standing refusal was walked into: it counts too the first time, then this one.
fn walked_into(heed: &mut crate::judge::state::Heed, now: u64, what: &str, detector: &str) -> u32 {
    let mut counted = 0;
    let first = heed
        .standing
        .as_ref()
        .filter(|s| !s.counted)
        .map(|s| Defied {
            at_ms: s.at_ms,
            what: s.what.clone(),
            detector: s.detector.clone(),
        });
    if let Some(d) = first {
        heed.note_defied(d);
        counted += 1;
    }
    heed.note_defied(Defied {
        at_ms: now,
        what: what.to_string(),
        detector: detector.to_string(),
    });
    counted + 1
}

/// An escalation already decided is delivered where the CLI can act on it (an `ask` at the next
/// PreToolUse when attended, the end of the run at PostToolBatch when not); on a CLI that cannot
/// end the run, the turn stays stopped by refusing every call. Returns whether one was.
fn deliver_escalation(
    state: &mut SessionState,
    event: Event,
    verdicts: &mut Vec<Verdict>,
    ctx: &Ctx,
) -> bool {
    let unattended = ctx.attended == Some(false);
    if !ctx.caps.halt {
        if state.turn.escalation.is_some() && event == Event::PreToolUse {
            // A CLI that cannot end the run: the turn stays stopped by denying every call, the
            // reason having been said once already.
            verdicts.push(
                Verdict::new(LADDER, Action::Deny, Severity::Critical, STANDING.into())
                    .loop_warning(),
            );
            return true;
        }
    } else if let Some(reason) = state.turn.escalation.clone() {
        let delivered = match (event, unattended) {
            (Event::PreToolUse, false) => Some(Action::Ask),
            (Event::PostToolBatch, true) => Some(Action::Halt),
            _ => None,
        };
        if let Some(action) = delivered {
            state.turn.escalation = None;
            verdicts.push(Verdict::new(LADDER, action, Severity::Critical, reason).loop_warning());
            return true;
        }
    }
    false
}

pub const LADDER: &str = "ladder";

/// Every call after the ladder's last stage, on a CLI that cannot end the run.
pub(super) const STANDING: &str =
    "loopgate: tool calls stay paused for the rest of this turn: the loop was \
    escalated (see the earlier loopgate message). Stop calling tools; tell the user what you tried \
    and what blocks you.";

/// Counts the deciding verdict and remembers it for `status`.
pub(super) fn account(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    v: &Verdict,
    subject: Option<Digest16>,
    defied: bool,
    ctx: &Ctx,
) {
    match (event, v.action) {
        (Event::Stop | Event::SubagentStop | Event::UserPromptSubmit, a) if a >= Action::Deny => {
            state.totals.blocks += 1
        }
        (_, Action::Warn) => state.totals.warnings += 1,
        _ => state.totals.denials += 1,
    }
    // What arms the Stop gate, the ladder and the breaker's count of stuck turns is a refusal the
    // agent walked into, or the ladder itself: never a warning, never one refusal it heeded.
    if p.agent() == MAIN_AGENT && is_intervention(event, v) && (defied || v.detector == LADDER) {
        if v.detector == LADDER || v.action >= Action::Deny {
            state.turn.hard_interventions += 1;
        }
        if let Some(key) = subject {
            let keys = &mut state.turn.intervened_keys;
            if !keys.contains(&key) && keys.len() < 8 {
                keys.push(key);
            }
        }
        // One per model turn: parallel calls denied together are one failed intervention, and the
        // model has not yet seen any of them.
        if v.detector != LADDER && state.turn.last_intervention_batch != Some(state.turn.batches) {
            state.turn.interventions += 1;
            state.turn.last_intervention_batch = Some(state.turn.batches);
        }
    }
    state.note(DecisionNote {
        at_ms: ctx.now_ms,
        agent: p.agent_key(),
        event: event.name().to_string(),
        tool: p.tool().to_string(),
        detector: v.detector.to_string(),
        action: decision_name(event, v.action).to_string(),
        severity: v.severity.name().to_string(),
        enforced: ctx.enforced(),
        summary: crate::protocol::payload::clip(&redact::mask(&v.reason), 200),
    });
}

/// Denials and loop warnings are signs the turn was stuck; advisory hints (consecutive failures)
/// are not: a turn that ran failing tests, or waited for a slow server, and reported is a
/// legitimate end. The Stop gate's and the prompt's own blocks are not interventions in the turn.
pub(super) fn is_intervention(event: Event, v: &Verdict) -> bool {
    !matches!(
        event,
        Event::Stop | Event::SubagentStop | Event::UserPromptSubmit
    ) && v.is_intervention()
}
