//! Ralph's circuit breaker across turns (seed 003). A turn that ended without progress — the Stop
//! gate's judgement, or a turn that needed a denial or an escalation and changed nothing — moves
//! the breaker CLOSED → HALF_OPEN after 2 such turns in a row and → OPEN after 3. OPEN denies
//! every tool call until `loopgate reset` or the cooldown, after which it is HALF_OPEN; a turn with
//! progress in HALF_OPEN closes it. Transitions are kept for `status`.

use crate::config::BreakerCfg;
use crate::judge::state::{Breaker, BreakerState, Transition};
use crate::platform::clock::time_of_day;
use crate::protocol::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "breaker";
const MAX_HISTORY: usize = 20;

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

/// Folds a finished turn into the breaker. `no_progress` is `Some(n)` for a turn without
/// progress that was the n-th identical one: it counts as at least n turns in a row.
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

/// A prompt the person typed while the circuit is OPEN goes ahead: they are told where the session
/// stands, and this one turn may try (HALF_OPEN; the same turn again opens the circuit at once).
pub fn person_prompted(b: &mut Breaker, session: &str, now_ms: u64) -> Verdict {
    move_to(
        b,
        BreakerState::HalfOpen,
        now_ms,
        "the person sent a prompt: one more try".into(),
    );
    let reason = format!(
        "loopgate: the last {} turns of this session made no progress; this prompt goes ahead because you typed it, and tool calls \
         may run for this turn. `loopgate status --session {session}` shows what repeated; \
         `loopgate reset --session {session}` clears the count.",
        b.no_progress_turns
    );
    Verdict::on_prompt(NAME, Some(true), reason)
        .loop_warning()
        .with("state", "HALF_OPEN")
        .with("no_progress_turns", b.no_progress_turns)
}

/// At a prompt, the main agent's: an OPEN breaker refuses it where no person is known to be
/// there to decide (an outer loop's next iteration then costs nothing); a prompt the person
/// typed goes ahead, and they are told.
pub fn at_prompt(p: &super::Prompt, g: &mut super::Gates) -> Option<Verdict> {
    if !p.main {
        return None;
    }
    let mut v = check(g.breaker, p.session, p.now_ms, &p.config.breaker)?;
    if crate::protocol::verdict::refuses_prompt(p.attended) {
        v.reason = v.reason.replacen(
            "so tool calls are paused. Tell the user what you tried and what blocks you.",
            "so this prompt was not sent to the model (it would have cost a turn and changed nothing).",
            1,
        );
        return Some(v);
    }
    Some(person_prompted(g.breaker, p.session, p.now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let v = person_prompted(&mut b, "s", 3);
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
