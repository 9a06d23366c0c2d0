//! Cycles (seed 001's pattern repetition and state cycles): A-B-A-B, A-B-C-A-B-C … with the same
//! answer at every position and no new state anywhere in it — a revert cycle (edit, undo, edit)
//! included, since going back to a state already seen is not progress. A cycle is named once, the
//! moment its second full turn completes (or a second round in another order, [`stale_round`]);
//! it adds evidence and severity but never denies: the repeat rule refuses each call of the
//! cycle once that call itself has repeated too often.

use super::View;
use crate::judge::ledger::{Entry, Status};
use crate::protocol::verdict::{Action, Severity, Verdict};
use crate::util::canon::Digest16;

pub const NAME: &str = "cycle";

type Token = (Digest16, Option<Digest16>, bool);

/// A call and its answer.
fn token(e: &Entry) -> Token {
    (e.key, e.answer, e.status == Status::Ok)
}

/// Where the agent was and whether it got anywhere: the tool and its target, any failure as the
/// same failure (a rejected Edit's text quotes its drifting `old_string`), a success by its answer.
fn state_token(e: &Entry) -> Token {
    let ok = e.status == Status::Ok;
    let at = Digest16::of_parts(&[e.tool.as_bytes(), e.target.as_bytes()]);
    (at, if ok { e.answer } else { None }, ok)
}

/// The shortest period `p` (2..=max) for which the last `2p` tokens repeat with period `p` and
/// hold at least two different calls.
/// A step that answered nothing (a silent command, a sleep) did something: a round with one in
/// it is waiting or working, not going round.
fn period(tokens: &[Token], max: usize) -> Option<usize> {
    let n = tokens.len();
    (2..=max).find(|&p| {
        n >= 2 * p
            && (0..p).all(|i| tokens[n - 2 * p + i] == tokens[n - p + i])
            && tokens[n - p..].iter().any(|t| t.0 != tokens[n - 1].0)
            && !tokens[n - p..].iter().any(|t| t.2 && t.1.is_none())
    })
}

/// Rounds in any order: the latest calls all got (call, answer) pairs already seen in this state,
/// and they cover every call of the window, at least two. Named the moment such a round
/// completes (A, B, C, then C, A, B): the length of the stale round, or `None`.
fn stale_round(tokens: &[Token]) -> Option<usize> {
    let covers = |tokens: &[Token]| -> Option<usize> {
        let n = tokens.len();
        let k = (0..n)
            .take_while(|&k| {
                let i = n - 1 - k;
                let t = &tokens[i];
                !(t.2 && t.1.is_none()) && tokens[..i].contains(t)
            })
            .count();
        let mut all: Vec<Digest16> = tokens.iter().map(|t| t.0).collect();
        all.sort_unstable();
        all.dedup();
        let mut round: Vec<Digest16> = tokens[n - k..].iter().map(|t| t.0).collect();
        round.sort_unstable();
        round.dedup();
        (all.len() >= 2 && round == all).then_some(k)
    };
    let k = covers(tokens)?;
    // Named once: not if the round was already whole one call earlier.
    covers(&tokens[..tokens.len() - 1]).is_none().then_some(k)
}

pub fn on_answer(v: &View, e: &Entry) -> Option<Verdict> {
    let cfg = &v.config.detectors.cycle;
    if !cfg.enabled || !e.status.answered() {
        return None;
    }
    let max = cfg.max_period.clamp(2, 8);
    let window: Vec<&Entry> = v
        .ledger
        .answers()
        .take_while(|x| x.epoch_after == v.world.epoch)
        .take(2 * max + 1)
        .collect();
    let found = |f: fn(&Entry) -> Token| {
        let tokens: Vec<Token> = window.iter().rev().map(|e| f(e)).collect();
        let p = period(&tokens, max)?;
        // Named once: not if the same cycle already held one call earlier.
        (period(&tokens[..tokens.len() - 1], max) != Some(p)).then_some(p)
    };
    let p = found(token).or_else(|| found(state_token)).or_else(|| {
        let tokens: Vec<Token> = window.iter().rev().map(|e| token(e)).collect();
        stale_round(&tokens)
    })?;
    let calls: Vec<String> = v
        .ledger
        .answers()
        .take(p)
        .map(|x| super::describe(&x.tool, &x.target))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let edits = v.ledger.answers().take(p).any(|x| x.class.changes_files());
    let what = if edits {
        "and the files are back where they were each time"
    } else {
        "with the same answers each time"
    };
    let reason = format!(
        "loopgate: you are going round in a cycle — {} — twice now, {what}. Repeating it a third time will end the same way. \
         Step back: say what each step was meant to achieve and why it did not, then try something different.",
        calls.join(" → ")
    );
    Some(
        Verdict::new(NAME, Action::Warn, Severity::Medium, reason)
            .loop_warning()
            .with("period", p)
            .with("revert", edits),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(k: &str) -> Token {
        (Digest16::of(k.as_bytes()), Some(Digest16::of(b"x")), true)
    }

    #[test]
    fn two_full_turns_of_distinct_calls_make_a_cycle() {
        let (a, b, c) = (t("a"), t("b"), t("c"));
        assert_eq!(period(&[a, b, a, b], 8), Some(2));
        assert_eq!(period(&[a, b, c, a, b, c], 8), Some(3));
        assert_eq!(period(&[a, b, a], 8), None);
        assert_eq!(
            period(&[a, a, a, a], 8),
            None,
            "one call repeated is the repeat rule's"
        );
    }

    #[test]
    fn a_second_round_in_another_order_is_named_once() {
        let (a, b, c) = (t("a"), t("b"), t("c"));
        assert_eq!(stale_round(&[a, b, c, c, a]), None, "b not asked again yet");
        assert_eq!(stale_round(&[a, b, c, c, a, b]), Some(3));
        assert_eq!(stale_round(&[a, b, c, c, a, b, a]), None, "named already");
        assert_eq!(
            stale_round(&[a, a, a]),
            None,
            "one call is the repeat rule's"
        );
        let b2 = (b.0, Some(Digest16::of(b"new")), true);
        assert_eq!(stale_round(&[a, b, c, c, a, b2]), None, "a new answer");
    }
}
