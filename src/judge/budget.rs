//! The loop budget (issue 39): what loops cost, and what happens when they cost too much. Only
//! waste counts: the model responses of calls inside a detected loop (from its first repeat on)
//! and after a warning the agent ignored, until a new state of the work or a new prompt closes
//! the loop's window. Ordinary work never opens a window, so it is never counted or paused.
//!
//! This module is pure: the hook reads the figures (the transcript's tail, the day ledger) only
//! for calls already judged part of a loop, and hands them in.

use crate::config::Budget;
use crate::judge::state::{LoopBudget, SessionState};
use crate::protocol::dialect::{Caps, TurnEnd};
use crate::protocol::payload::Event;
use crate::protocol::verdict::{Action, Severity, Verdict};

/// The detector name of the budget's verdicts, and the halt's reason code.
pub const NAME: &str = "budget";

/// Detectors whose verdicts never open a loop window: the guard judges tampering, not loops.
const NOT_LOOPS: [&str; 2] = [crate::judge::detectors::guard::NAME, NAME];

/// Model spend read for one loop call: what came after the last response counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    pub usd: f64,
    pub tokens: u64,
    pub responses: u64,
    /// The latest response's time: the next read counts only what comes after it.
    pub latest_ms: u64,
}

/// The day's loop spend across every session, as the day ledger holds it after this call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Day {
    pub date: String,
    pub usd: f64,
    pub tokens: u64,
}

/// The events the budget follows: a tool call's, a model turn's end and the turn's.
pub fn follows(event: Event) -> bool {
    matches!(
        event,
        Event::PreToolUse
            | Event::PostToolUse
            | Event::PostToolUseFailure
            | Event::PostToolBatch
            | Event::Stop
    )
}

/// Follows the loop window with this call's verdicts, and says whether the call is part of a
/// loop (the only calls whose spend is read). A new turn or a new state of the work closes the
/// window; a loop verdict (a refusal, or a warning that a loop is under way) opens it, from the
/// loop's first repeat in the current state of the work.
pub fn follow(state: &mut SessionState, agent: &str, verdicts: &[Verdict], now_ms: u64) -> bool {
    let (turn, epoch) = (state.turn.number, state.world.epoch);
    let b = &mut state.budget;
    if b.since_ms.is_some() && (b.turn != turn || b.epoch != epoch) {
        b.since_ms = None;
        b.live_mark = None;
    }
    let loops: Vec<String> = verdicts
        .iter()
        .filter(|v| v.is_intervention() && !NOT_LOOPS.contains(&v.detector))
        .map(|v| v.detector.to_string())
        .collect();
    if !loops.is_empty() && b.since_ms.is_none() {
        let since = first_repeat_ms(state, agent, epoch, turn).unwrap_or(now_ms);
        let b = &mut state.budget;
        b.since_ms = Some(since.min(now_ms));
        b.epoch = epoch;
        b.turn = turn;
        b.loops += 1;
        b.detectors = loops;
        b.detectors.dedup();
    }
    state.budget.since_ms.is_some()
}

/// When the loop began: the answer of the call that the first repeat of this turn, in the
/// current state of the work, repeated (the model response after it asked for the repeat).
fn first_repeat_ms(state: &SessionState, agent: &str, epoch: u32, turn: u32) -> Option<u64> {
    let ledger = &state.agents.get(agent)?.ledger;
    let mut first = std::collections::HashMap::new();
    ledger
        .entries
        .iter()
        .filter(|e| e.turn == turn && e.epoch == epoch)
        .find_map(|e| match first.entry(e.key) {
            std::collections::hash_map::Entry::Occupied(o) => Some(*o.get()),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(e.end_ms);
                None
            }
        })
}

/// Adds the spend read for a loop call, and the day's total after it.
pub fn add(b: &mut LoopBudget, spend: &Spend, day: Option<Day>) {
    b.usd += spend.usd.max(0.0);
    b.tokens += spend.tokens;
    b.responses += spend.responses;
    b.counted_ms = b.counted_ms.max(spend.latest_ms);
    if let Some(d) = day {
        if d.date != b.day {
            // A new day: what the person let go on yesterday is not today's.
            b.day_forgiven_usd = 0.0;
            b.day_warned = false;
        }
        b.day = d.date;
        b.day_usd = d.usd;
        b.day_tokens = d.tokens;
    }
}

/// How one bound stands.
#[derive(Debug, Clone, PartialEq)]
struct Bound {
    scope: &'static str,
    used: f64,
    limit: f64,
    unit: &'static str,
}

impl Bound {
    fn fraction(&self) -> f64 {
        if self.limit <= 0.0 {
            if self.used > 0.0 {
                f64::INFINITY
            } else {
                0.0
            }
        } else {
            self.used / self.limit
        }
    }

    fn said(&self) -> String {
        match self.unit {
            "usd" => format!("about ${:.2} of its ${:.2}", self.used, self.limit),
            _ => format!("{} of its {} tokens", self.used as u64, self.limit as u64),
        }
    }
}

/// The bounds in effect for this session: its own and the day's, in dollars and, when set, tokens.
fn bounds(b: &LoopBudget, cfg: &Budget, today: &str) -> Vec<Bound> {
    let day_used = if b.day == today { b.day_usd } else { 0.0 };
    let day_tokens = if b.day == today { b.day_tokens } else { 0 };
    let mut out = vec![
        Bound {
            scope: "session",
            used: (b.usd - b.forgiven_usd).max(0.0),
            limit: cfg.session_usd + b.raised_usd,
            unit: "usd",
        },
        Bound {
            scope: "day",
            used: (day_used - b.day_forgiven_usd).max(0.0),
            limit: cfg.day_usd + b.raised_usd,
            unit: "usd",
        },
    ];
    if let Some(t) = Some(cfg.session_tokens).filter(|t| *t > 0) {
        out.push(Bound {
            scope: "session",
            used: b.tokens.saturating_sub(b.forgiven_tokens) as f64,
            limit: t as f64,
            unit: "tokens",
        });
    }
    if let Some(t) = Some(cfg.day_tokens).filter(|t| *t > 0) {
        out.push(Bound {
            scope: "day",
            used: day_tokens as f64,
            limit: t as f64,
            unit: "tokens",
        });
    }
    out
}

/// What a person and a script see of the budget: spend against each bound.
pub fn summary(b: &LoopBudget, cfg: &Budget, today: &str) -> serde_json::Value {
    let bs = bounds(b, cfg, today);
    let usd = |scope| bs.iter().find(|x| x.scope == scope && x.unit == "usd");
    let (s, d) = (usd("session"), usd("day"));
    serde_json::json!({
        "enabled": cfg.enabled,
        "session_usd": b.usd,
        "session_tokens": b.tokens,
        "session_limit_usd": s.map(|x| x.limit),
        "session_counted_usd": s.map(|x| x.used),
        "day": today,
        "day_usd": if b.day == today { b.day_usd } else { 0.0 },
        "day_limit_usd": d.map(|x| x.limit),
        "in_loop": b.since_ms.is_some(),
        "loops": b.loops,
        "raised_usd": b.raised_usd,
        "estimate": true,
    })
}

/// The budget's verdict on a loop call: a warning once past `warn_at` of a bound, and past a
/// bound the pause (an `ask` where a person may attend, the turn's end where nobody does).
/// `attended` is the CLI's word, as the ceiling reads it.
pub fn weigh(
    b: &mut LoopBudget,
    cfg: &Budget,
    event: Event,
    attended: Option<bool>,
    caps: Caps,
    today: &str,
) -> Option<Verdict> {
    if !cfg.enabled {
        return None;
    }
    let bs = bounds(b, cfg, today);
    let worst = bs
        .iter()
        .max_by(|x, y| x.fraction().total_cmp(&y.fraction()))?;
    let unattended = attended == Some(false);
    let evidence = |v: Verdict| {
        v.with("scope", worst.scope)
            .with("unit", worst.unit)
            .with("spent", round(worst.used))
            .with("limit", round(worst.limit))
            .with("session_usd", round(b.usd))
            .with("day_usd", round(b.day_usd))
            .with("loops", b.loops)
            .with("detectors", b.detectors.clone())
            .with("estimate", true)
    };
    if worst.fraction() >= 1.0 {
        let action = match (event, unattended) {
            (Event::PreToolUse, false) => Action::Ask,
            (Event::PreToolUse, true) if caps.turn_end == TurnEnd::BeforeTool => Action::Halt,
            (Event::PreToolUse, true) => Action::Deny,
            (Event::PostToolBatch, true)
                if matches!(caps.turn_end, TurnEnd::Batch | TurnEnd::NextRequest) =>
            {
                Action::Halt
            }
            _ => return None,
        };
        let reason = format!(
            "loopgate: the loop budget is spent: loops in this {} have cost {} (an estimate), \
             so loopgate pauses here{}. Stop repeating what has not worked; tell the user what \
             blocks you. The user can go on with `/loopgate continue` or raise the budget with \
             `/loopgate budget +5` (or `loopgate continue --budget 5`).",
            if worst.scope == "day" {
                "day"
            } else {
                "session"
            },
            worst.said(),
            if action == Action::Ask {
                " and asks the user"
            } else {
                ""
            }
        );
        return Some(evidence(
            Verdict::new(NAME, action, Severity::Critical, reason).with("attended", attended),
        ));
    }
    let warned = if worst.scope == "day" {
        &mut b.day_warned
    } else {
        &mut b.warned
    };
    if worst.fraction() >= cfg.warn_at && !*warned && event != Event::Stop {
        *warned = true;
        let reason = format!(
            "loopgate: loops in this {} have cost {} loop budget (an estimate); at the budget \
             loopgate pauses the session. Stop repeating what has not worked: change the approach, \
             or tell the user what blocks you.",
            if worst.scope == "day" {
                "day"
            } else {
                "session"
            },
            worst.said()
        );
        return Some(evidence(Verdict::new(
            NAME,
            Action::Warn,
            Severity::High,
            reason,
        )));
    }
    None
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// The person's continue after a budget halt: the bound counts again from what was spent, and
/// the warnings may come again.
pub fn forgive(b: &mut LoopBudget) {
    b.forgiven_usd = b.usd;
    b.forgiven_tokens = b.tokens;
    b.day_forgiven_usd = b.day_usd;
    b.warned = false;
    b.day_warned = false;
}

/// The person's `/loopgate budget +N` (or `continue --budget N`): N more dollars for this
/// session's loops, and for its share of the day's backstop.
pub fn raise(b: &mut LoopBudget, usd: f64) {
    b.raised_usd += usd.max(0.0);
    b.warned = false;
    b.day_warned = false;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::dialect::Agent;

    fn cfg() -> Budget {
        Budget {
            session_usd: 1.0,
            day_usd: 10.0,
            ..Budget::default()
        }
    }

    fn spent(usd: f64) -> LoopBudget {
        LoopBudget {
            usd,
            day: "d".into(),
            day_usd: usd,
            ..LoopBudget::default()
        }
    }

    #[test]
    fn warns_once_then_pauses_by_who_attends() {
        let caps = Agent::Claude.caps();
        let mut b = spent(0.5);
        assert_eq!(
            weigh(&mut b, &cfg(), Event::PreToolUse, None, caps, "d"),
            None
        );
        let mut b = spent(0.85);
        let w = weigh(&mut b, &cfg(), Event::PreToolUse, None, caps, "d").unwrap();
        assert_eq!(w.action, Action::Warn);
        assert_eq!(
            weigh(&mut b, &cfg(), Event::PreToolUse, None, caps, "d"),
            None
        );
        let mut b = spent(1.2);
        let ask = weigh(&mut b, &cfg(), Event::PreToolUse, Some(true), caps, "d").unwrap();
        assert_eq!(ask.action, Action::Ask);
        let deny = weigh(&mut b, &cfg(), Event::PreToolUse, Some(false), caps, "d").unwrap();
        assert_eq!(deny.action, Action::Deny);
        let end = weigh(&mut b, &cfg(), Event::PostToolBatch, Some(false), caps, "d").unwrap();
        assert_eq!(end.action, Action::Halt);
    }

    #[test]
    fn continue_and_raise_give_room() {
        let caps = Agent::Claude.caps();
        let mut b = spent(1.2);
        forgive(&mut b);
        assert_eq!(
            weigh(&mut b, &cfg(), Event::PreToolUse, None, caps, "d"),
            None
        );
        let mut b = spent(1.2);
        raise(&mut b, 5.0);
        assert_eq!(
            weigh(&mut b, &cfg(), Event::PreToolUse, None, caps, "d"),
            None
        );
    }

    #[test]
    fn the_day_is_a_backstop_and_a_new_day_starts_over() {
        let caps = Agent::Claude.caps();
        let mut b = LoopBudget {
            day: "d".into(),
            day_usd: 11.0,
            ..LoopBudget::default()
        };
        let v = weigh(&mut b, &cfg(), Event::PreToolUse, None, caps, "d").unwrap();
        assert_eq!(v.evidence["scope"], "day");
        assert_eq!(
            weigh(&mut b, &cfg(), Event::PreToolUse, None, caps, "e"),
            None
        );
    }
}
