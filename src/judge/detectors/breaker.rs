//! Ralph's circuit breaker across turns (seed 003). A turn that tried and failed and changed
//! nothing — the Stop gate's judgement, a failed edit, or a refusal walked into — moves the
//! breaker CLOSED → HALF_OPEN after 2 such turns in a row and → OPEN after 3. A turn that only
//! answered, read, checked or talked never counts. OPEN denies every tool call until
//! `loopgate reset` or the cooldown, after which it is HALF_OPEN; a turn with progress in
//! HALF_OPEN closes it. Transitions are kept for `status`.
//!
//! The breaker exists for outer loops that re-feed the same prompt unattended. At a prompt it
//! refuses only such a re-feed (the prompt of a turn it counted, sent again where no person is
//! known to attend); any other prompt is new words from a person and always reaches the model,
//! with the person told where the session stands.

use crate::config::BreakerCfg;
use crate::judge::state::{Breaker, BreakerState, Transition};
use crate::platform::clock::time_of_day;
use crate::protocol::verdict::{Action, Severity, Verdict};
use crate::util::canon::Digest16;
use std::collections::VecDeque;

pub const NAME: &str = "breaker";
const MAX_HISTORY: usize = 20;
/// Prompts of counted turns kept: more than the turns that open the circuit.
const MAX_PROMPTS: usize = 8;

fn name(s: BreakerState) -> &'static str {
    match s {
        BreakerState::Closed => "CLOSED",
        BreakerState::HalfOpen => "HALF_OPEN",
        BreakerState::Open => "OPEN",
    }
}

fn move_to(b: &mut Breaker, to: BreakerState, now_ms: u64, reason: String) {
    if b.state == to {
        return;
    }
    if b.history.len() >= MAX_HISTORY {
        b.history.pop_front();
    }
    b.history.push_back(Transition {
        at_ms: now_ms,
        from: name(b.state).to_string(),
        to: name(to).to_string(),
        reason,
    });
    if to == BreakerState::Open {
        b.opened_ms = now_ms;
    }
    b.state = to;
}

/// The person's `loopgate reset`: the circuit starts closed, its history kept.
pub fn reset(b: &mut Breaker, now_ms: u64) {
    move_to(b, BreakerState::Closed, now_ms, "loopgate reset".into());
    b.no_progress_turns = 0;
}

/// Remembers the prompt of a turn that tried and failed (progress or not): only such a prompt,
/// sent again, may be refused.
pub fn remember_failed_prompt(prompts: &mut VecDeque<Digest16>, prompt: Digest16) {
    prompts.retain(|p| *p != prompt);
    if prompts.len() >= MAX_PROMPTS {
        prompts.pop_front();
    }
    prompts.push_back(prompt);
}

/// Folds a finished turn into the breaker. `no_progress` is `Some(n)` for a turn that tried and
/// failed without progress and was the n-th identical one: it counts as at least n turns in a row.
pub fn end_turn(
    b: &mut Breaker,
    progress: bool,
    no_progress: Option<u32>,
    now_ms: u64,
    cfg: &BreakerCfg,
) {
    if !cfg.enabled {
        return;
    }
    if progress {
        b.no_progress_turns = 0;
        if b.state == BreakerState::HalfOpen {
            move_to(
                b,
                BreakerState::Closed,
                now_ms,
                "progress detected, circuit recovered".into(),
            );
        }
        return;
    }
    let Some(identical) = no_progress else {
        return;
    };
    b.no_progress_turns = (b.no_progress_turns + 1).max(identical);
    let n = b.no_progress_turns;
    if b.state != BreakerState::Open && n >= cfg.open_after {
        move_to(
            b,
            BreakerState::Open,
            now_ms,
            format!("{n} turns in a row without progress"),
        );
    } else if b.state == BreakerState::Closed && n >= cfg.half_open_after {
        move_to(
            b,
            BreakerState::HalfOpen,
            now_ms,
            format!("{n} turns in a row without progress: monitoring"),
        );
    }
}

/// At every tool call: an OPEN breaker denies it, unless the cooldown has passed.
pub fn check(b: &mut Breaker, session: &str, now_ms: u64, cfg: &BreakerCfg) -> Option<Verdict> {
    if !cfg.enabled || b.state != BreakerState::Open {
        return None;
    }
    // A clock that went backwards must not stretch the cooldown: restart it from now.
    if now_ms < b.opened_ms {
        b.opened_ms = now_ms;
    }
    let cooldown = cfg.cooldown_minutes * 60_000;
    if now_ms - b.opened_ms >= cooldown {
        move_to(
            b,
            BreakerState::HalfOpen,
            now_ms,
            "cooldown elapsed: one more try".into(),
        );
        return None;
    }
    let reason = format!(
        "loopgate: the circuit breaker is OPEN — the last {} turns made no progress, so tool calls are paused. \
         Tell the user what you tried and what blocks you. The way out: the user runs `loopgate reset --session {}`, \
         or after {} the breaker lets one more turn try.",
        b.no_progress_turns,
        session,
        time_of_day(b.opened_ms + cooldown),
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::Critical, reason)
            .with("state", "OPEN")
            .with("no_progress_turns", b.no_progress_turns),
    )
}

/// A prompt that goes ahead while the circuit is OPEN: the person is told where the session
/// stands, and this one turn may try (HALF_OPEN; a counted turn again opens the circuit at once).
/// `new` says why it goes ahead: new words, or a re-feed a person known to attend typed.
pub fn person_prompted(b: &mut Breaker, session: &str, now_ms: u64, new: bool) -> Verdict {
    move_to(
        b,
        BreakerState::HalfOpen,
        now_ms,
        if new {
            "a new prompt: one more try".into()
        } else {
            "the person sent the prompt again: one more try".into()
        },
    );
    let why = if new {
        "this new prompt goes ahead"
    } else {
        "this prompt goes ahead because you typed it"
    };
    let reason = format!(
        "loopgate: the last {} turns of this session tried and failed without changing anything; {why}, \
         and tool calls may run for this turn. `loopgate status --session {session}` shows what repeated; \
         `loopgate reset --session {session}` clears the count.",
        b.no_progress_turns
    );
    Verdict::on_prompt(NAME, Some(true), reason)
        .loop_warning()
        .with("state", "HALF_OPEN")
        .with("no_progress_turns", b.no_progress_turns)
}

/// At a prompt, the main agent's, while the circuit is OPEN: the prompt of a turn that tried
/// and failed, sent again where the CLI says no person attends, is an outer loop's next
/// iteration and is refused (it costs nothing then); every other prompt goes ahead, and the
/// person is told.
pub fn at_prompt(p: &super::Prompt, g: &mut super::Gates) -> Option<Verdict> {
    if !p.main {
        return None;
    }
    let mut v = check(g.breaker, p.session, p.now_ms, &p.config.breaker)?;
    let new = !p.refeed;
    // Only where the CLI says nobody attends (Claude Code's headless runs): elsewhere the
    // same words again may well be a person's ("please", "2"), and a person is never refused.
    if !new && p.attended == Some(false) {
        v.reason = v.reason.replacen(
            "so tool calls are paused. Tell the user what you tried and what blocks you.",
            "and this prompt is the one those turns were given, sent again, so it was not sent to \
             the model (it would have cost a turn and changed nothing). A different prompt goes ahead.",
            1,
        );
        return Some(v.with("refeed", true));
    }
    Some(person_prompted(g.breaker, p.session, p.now_ms, new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_persons_reset_closes_an_open_circuit_and_keeps_its_history() {
        let cfg = BreakerCfg::default();
        let mut b = Breaker::default();
        for t in 0..3 {
            end_turn(&mut b, false, Some(1), t, &cfg);
        }
        assert_eq!(b.state, BreakerState::Open);
        reset(&mut b, 10);
        assert_eq!(b.state, BreakerState::Closed);
        assert_eq!(b.no_progress_turns, 0);
        assert!(check(&mut b, "s", 11, &cfg).is_none());
        assert_eq!(b.history.back().unwrap().reason, "loopgate reset");
    }

    #[test]
    fn failed_prompts_are_bounded_and_the_latest_kept() {
        let mut p = VecDeque::new();
        for i in 0..20u8 {
            remember_failed_prompt(&mut p, Digest16::of(&[i]));
        }
        remember_failed_prompt(&mut p, Digest16::of(&[12]));
        assert_eq!(p.len(), MAX_PROMPTS);
        assert_eq!(p.back(), Some(&Digest16::of(&[12])));
        assert!(!p.contains(&Digest16::of(&[0])));
    }

    #[test]
    fn closed_half_open_open_and_back() {
        let cfg = BreakerCfg::default();
        let mut b = Breaker::default();
        end_turn(&mut b, false, Some(1), 0, &cfg);
        assert_eq!(b.state, BreakerState::Closed);
        end_turn(&mut b, false, Some(1), 1, &cfg);
        assert_eq!(b.state, BreakerState::HalfOpen);
        end_turn(&mut b, false, None, 2, &cfg);
        assert_eq!(
            b.state,
            BreakerState::HalfOpen,
            "a quiet turn changes nothing"
        );
        end_turn(&mut b, false, Some(1), 3, &cfg);
        assert_eq!(b.state, BreakerState::Open);
        assert!(check(&mut b, "s", 10, &cfg).is_some());
        assert!(
            check(&mut b, "s", 3 + 30 * 60_000, &cfg).is_none(),
            "cooldown"
        );
        assert_eq!(b.state, BreakerState::HalfOpen);
        end_turn(&mut b, true, None, 5, &cfg);
        assert_eq!(b.state, BreakerState::Closed);
        assert_eq!(b.history.len(), 4);
    }

    /// The n-th identical turn stands for n turns without progress: the 3rd opens the circuit
    /// even when the first copy was a quiet turn that counted nothing.
    #[test]
    fn the_third_identical_turn_opens_it() {
        let cfg = BreakerCfg::default();
        let mut b = Breaker::default();
        end_turn(&mut b, false, None, 0, &cfg);
        end_turn(&mut b, false, Some(2), 1, &cfg);
        assert_eq!(b.state, BreakerState::HalfOpen);
        end_turn(&mut b, false, Some(3), 2, &cfg);
        assert_eq!(b.state, BreakerState::Open);
        assert_eq!(b.no_progress_turns, 3);
        let v = person_prompted(&mut b, "s", 3, true);
        assert_eq!(
            v.action,
            Action::Warn,
            "a person's prompt is told, not refused"
        );
        assert_eq!(b.state, BreakerState::HalfOpen);
        end_turn(&mut b, false, Some(4), 4, &cfg);
        assert_eq!(b.state, BreakerState::Open, "the same turn again");
    }

    #[test]
    fn clock_going_back_does_not_wedge_it() {
        let cfg = BreakerCfg::default();
        let mut b = Breaker::default();
        for t in 0..3 {
            end_turn(&mut b, false, Some(1), 1_000_000_000 + t, &cfg);
        }
        assert!(check(&mut b, "s", 5, &cfg).is_some());
        assert!(check(&mut b, "s", 5 + 30 * 60_000, &cfg).is_none());
    }
}
