//! The one repeat rule: the same call, the same answer, no new state between. Every repeat is
//! judged here once, with one budget per class of answer — failing calls by error class (seed 002:
//! transient 3 retries, deterministic 1, unknown 2), successful calls 3, read-only tools 4 — so no
//! second counter can fire earlier on the same evidence.
//!
//! Answers that differ only in numbers and ids (the shape) are the same answer with a budget
//! larger by [`SHAPE_TOLERANCE`]. Waiting is judged by real waiting: repeats spaced by a sleep or by minutes are polls,
//! and only back-to-back repeats spend the class budget; a spaced poll is stopped once its answer
//! has not changed for both `waiting_answers` answers and `waiting_minutes`.

use super::{Call, View};
use crate::config::Repeat;
use crate::judge::ledger::{Entry, Ledger, Status};
use crate::judge::outcome::ErrorClass;
use crate::protocol::verdict::{Action, Severity, Verdict};
use crate::util::canon::Digest16;

pub const NAME: &str = "repeat";

/// Extra repeats allowed when answers match only by shape: a changing count may be something
/// moving (a progress bar polled without waiting), yet it must not run on for ever (the same
/// comment posted again, each time with a new id, is caught only a little later than a repeat).
pub const SHAPE_TOLERANCE: u32 = 2;

/// The latest run of identical answers to one call.
#[derive(Debug, Clone)]
pub struct Chain<'a> {
    pub last: &'a Entry,
    /// Answers in the run, the latest included.
    pub answers: u32,
    /// Some answer matched the latest only by shape.
    pub shape_only: bool,
    /// Repeats in the run not preceded by real waiting.
    pub back_to_back: u32,
    pub first_ms: u64,
}

/// The answer of a successful call that said nothing and changed nothing loopgate can see.
const SILENCE: Digest16 = Digest16(*b"silence, no chg.");

/// What a call answered, for comparing it with its own earlier answers: silence with no new
/// state is an answer like any other (`ls dist/` empty again, a script that prints nothing).
/// A call that sleeps on purpose is the waiting itself, not a question: its silence says nothing.
fn said(e: &Entry) -> Option<Digest16> {
    e.answer
        .or_else(|| (e.status == Status::Ok && !e.novel && !e.sleeps).then_some(SILENCE))
}

/// Its shape (numbers and ids masked); silence is its own shape.
fn shape_of(e: &Entry) -> Option<Digest16> {
    e.shape.or_else(|| said(e).filter(|d| *d == SILENCE))
}

/// Whether answer `e` told the agent something it had not heard from that call (`prev`: the
/// call's previous answer): a first answer with content, an answer unlike the previous one, or a
/// new state of the work. Judged once, when the answer comes ([`Entry::news`]): news about the
/// work from any call means a wait on it has not been in vain so far.
pub fn is_news(prev: Option<&Entry>, e: &Entry) -> bool {
    if !e.status.answered() {
        return false;
    }
    if e.novel {
        return true;
    }
    match prev {
        Some(p) => said(p) != said(e),
        None => e.answer.is_some(),
    }
}

/// The run of identical answers `key` has had since the last new state, newest first. A link
/// that was a wait (real waiting came before it) is cut by news about the work from any call
/// between: while something moves, an unchanged answer is "no news yet", not a repeat.
/// `news_ms` is when the agent last had news: a run that fills the whole window with no news is
/// as old as that.
pub fn chain<'a>(
    ledger: &'a Ledger,
    key: &Digest16,
    epoch_now: u32,
    news_ms: u64,
) -> Option<Chain<'a>> {
    let entries = &ledger.entries;
    let mut mine = (0..entries.len())
        .rev()
        .filter(|&i| entries[i].status.answered() && entries[i].key == *key);
    let last_at = mine.next()?;
    let last = &entries[last_at];
    // A new state (or a new prompt) since the last answer: the next call is a new experiment.
    if last.epoch_after != epoch_now {
        return None;
    }
    // A call that changed something, or said nothing loopgate can compare, is never a repeat.
    let last_said = said(last)?;
    let mut c = Chain {
        last,
        answers: 1,
        shape_only: false,
        back_to_back: 0,
        first_ms: last.start_ms,
    };
    let mut newer_at = last_at;
    let mut whole = true;
    for at in mine {
        let (e, newer) = (&entries[at], &entries[newer_at]);
        if e.epoch_after != newer.epoch || e.status.failed() != last.status.failed() {
            whole = false;
            break;
        }
        if said(e) != Some(last_said) {
            // A changing value is news, whatever the gap: only a failure stays the same
            // answer up to numbers (a count of failing tests going down is still failing).
            if !last.status.failed() || shape_of(e).is_none() || shape_of(e) != shape_of(last) {
                whole = false;
                break;
            }
            c.shape_only = true;
        }
        if newer.waited && entries.range(at + 1..newer_at).any(|e| e.news) {
            whole = false;
            break;
        }
        c.answers += 1;
        if !newer.waited {
            c.back_to_back += 1;
        }
        c.first_ms = e.start_ms;
        newer_at = at;
    }
    // The window is full and shows no news before the run either: the run may be older than
    // the window, and no older than the agent's last news.
    if whole
        && news_ms > 0
        && entries.len() >= crate::judge::ledger::MAX_ENTRIES
        && !entries.range(..newer_at).any(|e| e.news)
    {
        c.first_ms = c.first_ms.min(news_ms);
    }
    Some(c)
}

/// A call's identical failures by the session's other subagents since the work last changed:
/// the same command retried by one subagent after another, or by several at once, is one loop.
/// The main agent is left out both ways: a subagent's loop must not trip it (it often checks
/// what a subagent reported), and its own retries are its own to count.
#[derive(Debug, Clone)]
pub struct Elsewhere {
    /// The latest of them, whose answer the others match.
    pub last: Entry,
    pub failures: u32,
    pub agents: u32,
}

impl Elsewhere {
    /// The failures of `key` by agents other than `me`, each agent's run of identical failures
    /// since its last other answer of that call, all in the state of the work `epoch`.
    pub fn of(
        agents: &std::collections::BTreeMap<String, crate::judge::state::AgentState>,
        me: &str,
        key: &Digest16,
        epoch: u32,
    ) -> Option<Elsewhere> {
        let main = crate::protocol::payload::MAIN_AGENT;
        if agents.len() < 2 || me == main {
            return None;
        }
        let mut runs: Vec<(&Entry, u32)> = Vec::new();
        for (id, agent) in agents {
            if id == me || id == main {
                continue;
            }
            let mut mine = agent.ledger.answers().filter(|e| e.key == *key);
            let Some(last) = mine.next() else { continue };
            if !last.status.failed() || last.epoch_after != epoch || said(last).is_none() {
                continue;
            }
            let more = mine
                .take_while(|e| {
                    e.status.failed() && e.epoch_after == epoch && said(e) == said(last)
                })
                .count() as u32;
            runs.push((last, more + 1));
        }
        let latest = runs.iter().map(|(e, _)| *e).max_by_key(|e| e.end_ms)?;
        let same: Vec<&(&Entry, u32)> = runs
            .iter()
            .filter(|(e, _)| said(e) == said(latest))
            .collect();
        Some(Elsewhere {
            last: latest.clone(),
            failures: same.iter().map(|(_, n)| n).sum(),
            agents: same.len() as u32,
        })
    }
}

/// The call's failures across the session's agents, once they are past its class budget: the
/// agent's own run of the same failure and the other agents' together.
fn across_agents(v: &View, call: &Call, own: Option<&Chain>) -> Option<Verdict> {
    let cfg = &v.config.detectors.repeat;
    let other = call.elsewhere.as_ref()?;
    if call.waited || v.now_ms.saturating_sub(other.last.end_ms) >= cfg.cooldown_minutes * 60_000 {
        return None;
    }
    // Every agent sees the failure once for itself (a first try, the parent checking what a
    // subagent reported); its retries are what the session's agents spend together.
    let own = own
        .filter(|c| c.last.status.failed() && said(c.last) == said(&other.last))
        .map_or(0, |c| c.answers);
    if own == 0 {
        return None;
    }
    let total = own + other.failures;
    let allowed = failure_budget(other.last.error_class, cfg);
    if total <= allowed {
        return None;
    }
    let what = super::describe(call.tool, &other.last.target);
    let class = other.last.error_class.map_or("unknown", ErrorClass::name);
    let error = if other.last.preview.is_empty() {
        String::new()
    } else {
        format!(": {}", other.last.preview)
    };
    let n = other.agents;
    let by = format!("by you and {n} other subagent{} of this session", plural(n));
    let reason = format!(
        "LOOP_DETECTED (loopgate): {what} has failed {total} times {by} with the same answer \
         ({class} error{error}), and nothing has changed since. Running it again will fail the \
         same way: change what makes it fail first, or report what blocks you."
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::of_count(total + 1), reason)
            .loop_warning()
            .with("call", other.last.key.short())
            .with("answers", total)
            .with("allowed_repeats", allowed)
            .with("agents", other.agents + 1),
    )
}

/// Retries a failure of this class is allowed: transient 3, deterministic 1, unknown 2 (seed 002).
pub fn failure_budget(class: Option<ErrorClass>, cfg: &Repeat) -> u32 {
    match class {
        Some(ErrorClass::Transient) => cfg.transient,
        Some(c) if c.deterministic() => cfg.deterministic,
        _ => cfg.unknown,
    }
}

/// Repeats allowed after the first answer, before the next identical call is refused.
pub fn budget(c: &Chain, cfg: &Repeat) -> u32 {
    let base = if c.last.status.failed() {
        failure_budget(c.last.error_class, cfg)
    } else if c.last.class.read_only() {
        cfg.read_only
    } else {
        cfg.success
    };
    if c.shape_only {
        base.saturating_add(SHAPE_TOLERANCE)
    } else {
        base
    }
}

pub fn check(v: &View, call: &Call) -> Option<Verdict> {
    let cfg = &v.config.detectors.repeat;
    if !cfg.enabled {
        return None;
    }
    let Some(c) = chain(v.ledger, &call.key, v.world.epoch, v.news_ms) else {
        return missing_reads(v, call);
    };
    // A wait with news about the work from any call since the last answer: not in vain so far.
    if call.waited && v.news_ms > c.last.end_ms {
        return None;
    }
    // A cooldown clears it: after a long enough pause the world may have moved without us seeing.
    if v.now_ms.saturating_sub(c.last.end_ms) >= cfg.cooldown_minutes * 60_000 {
        return None;
    }
    let allowed = budget(&c, cfg);
    let deterministic = c.last.error_class.is_some_and(ErrorClass::deterministic);
    // Waiting does not fix a deterministic error: every repeat spends the budget.
    let back_to_back = if deterministic {
        c.answers
    } else {
        c.back_to_back + u32::from(!call.waited)
    };
    let waited_ms = v.now_ms.saturating_sub(c.first_ms);
    let failing = c.last.status.failed();
    // A poll is judged by time with no news, never by count: an unchanged answer waits
    // `waiting_minutes` (and `waiting_answers`), the same failure `failing_poll_minutes`.
    let waiting_over = call.waited
        && !deterministic
        && if failing {
            waited_ms >= cfg.failing_poll_minutes * 60_000
        } else {
            c.answers >= cfg.waiting_answers.max(1) && waited_ms >= cfg.waiting_minutes * 60_000
        };
    if back_to_back <= allowed && !waiting_over {
        // A failing poll past its class budget is told, once, before time refuses it.
        let warn = failing && call.waited && !deterministic && c.answers == allowed + 1;
        if warn {
            return Some(poll_warning(&c, call, waited_ms, cfg.failing_poll_minutes));
        }
        return across_agents(v, call, Some(&c));
    }
    Some(verdict(
        &c,
        call,
        allowed,
        back_to_back,
        waiting_over,
        waited_ms,
    ))
}

/// The one warning a failing poll gets before it is refused.
fn poll_warning(c: &Chain, call: &Call, waited_ms: u64, budget_min: u64) -> Verdict {
    let what = super::describe(call.tool, &c.last.target);
    let error = in_brackets(&c.last.preview);
    let reason = format!(
        "loopgate: {what} has failed the same way {} times over {} of waiting{error}. If what \
         you wait for is still starting, keep waiting between checks; after {budget_min} minutes \
         of the same failure it will be refused. If it is not coming, find out why (its log, \
         whether it is running) instead of asking again.",
        c.answers,
        span(waited_ms),
    );
    Verdict::new(NAME, Action::Warn, Severity::Low, reason)
        .loop_warning()
        .with("call", c.last.key.short())
        .with("answers", c.answers)
        .with("waited_seconds", waited_ms / 1000)
        .with("failing_poll_minutes", budget_min)
}

/// A failure's quoted line, ` (…)`, or nothing.
fn in_brackets(preview: &str) -> String {
    if preview.is_empty() {
        String::new()
    } else {
        format!(" ({preview})")
    }
}

/// A duration as a person says it: `45 s`, `3 min`.
fn span(ms: u64) -> String {
    if ms < 120_000 {
        format!("{} s", ms / 1000)
    } else {
        format!("{} min", ms / 60_000)
    }
}

/// A read of one file is one question whatever its offset and limit: the same failure again
/// (up to numbers: a file over the token limit), with only empty reads past the end between, is
/// a repeat, refused once the failure's class budget is spent.
fn missing_reads(v: &View, call: &Call) -> Option<Verdict> {
    if call.tool != "Read" {
        return None;
    }
    let target = crate::judge::redact::target(call.tool, call.input);
    let mut failures: Vec<&Entry> = Vec::new();
    for e in v.ledger.answers() {
        if e.epoch_after != v.world.epoch {
            break;
        }
        if e.tool != "Read" || e.target != target {
            continue;
        }
        if !e.status.failed() {
            if e.rich {
                // A read that found content: the agent is reading, not missing.
                break;
            }
            continue;
        }
        if failures.first().is_some_and(|f| f.shape != e.shape) {
            break;
        }
        failures.push(e);
    }
    let last = *failures.first()?;
    let allowed = failure_budget(last.error_class, &v.config.detectors.repeat);
    let tries = failures.len() as u32;
    let reworded = failures.iter().any(|f| f.key != last.key);
    if tries <= allowed || !reworded {
        return None;
    }
    let error = if last.preview.is_empty() {
        String::new()
    } else {
        format!(" ({})", last.preview)
    };
    let reason = format!(
        "LOOP_DETECTED (loopgate): Read {target} has failed {tries} times with the same error{error} \
         whatever the offset and limit, with only empty reads between, and nothing has changed. \
         Another range will fail the same way: search the file for what you need (Grep), read a \
         small range (a few hundred lines), or tell the user what blocks you."
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::of_count(tries + 1), reason)
            .loop_warning()
            .with("call", last.key.short())
            .with("tool", "Read")
            .with("answers", tries)
            .with("allowed_repeats", allowed)
            .with("reworded", true),
    )
}

/// A call the agent CLI rejects before it runs (an Edit whose `old_string` is not in the file)
/// never reaches PreToolUse, so it cannot be refused; its PostToolBatch is the strongest channel
/// left. The first try past the repeat rule's budget is warned about there; the next ends the
/// run (`decision: block`).
fn rejected_again(v: &View, e: &Entry) -> Option<Verdict> {
    let cfg = &v.config.detectors.repeat;
    let c = chain(v.ledger, &e.key, v.world.epoch, v.news_ms)?;
    let allowed = budget(&c, cfg);
    let over = c.answers.saturating_sub(allowed + 1);
    if over == 0 {
        return None;
    }
    let what = super::describe(&e.tool, &e.target);
    let error = if e.preview.is_empty() {
        String::new()
    } else {
        format!(": {}", e.preview)
    };
    let (action, next) = if over == 1 {
        (
            Action::Warn,
            "The next identical try ends the turn: read the file again and edit its current text, \
             or tell the user what blocks you.",
        )
    } else {
        (
            Action::Halt,
            "The turn ends here: tell the user what you tried and what blocks you.",
        )
    };
    let reason = format!(
        "LOOP_DETECTED (loopgate): {what} was rejected {} times with the same error{error}, and \
         nothing has changed since. {next}",
        c.answers
    );
    Some(
        Verdict::new(NAME, action, Severity::of_count(c.answers + 2), reason)
            .loop_warning()
            .with("call", e.key.short())
            .with("answers", c.answers)
            .with("allowed_repeats", allowed)
            .with("rejected", true),
    )
}

/// After a successful answer: when the next identical call back to back would be refused, say so
/// once, so a poll that asks again at once hears "wait between checks" before it is stopped.
pub fn on_answer(v: &View, e: &Entry) -> Option<Verdict> {
    let cfg = &v.config.detectors.repeat;
    if cfg.enabled && e.status == Status::Rejected {
        return rejected_again(v, e);
    }
    if !cfg.enabled || e.status != Status::Ok || e.waited {
        return None;
    }
    let c = chain(v.ledger, &e.key, v.world.epoch, v.news_ms)?;
    let allowed = budget(&c, cfg);
    if c.last.key != e.key || c.answers < 2 || c.back_to_back + 1 != allowed + 1 {
        return None;
    }
    let what = super::describe(&e.tool, &e.target);
    let reason = format!(
        "loopgate: {what} has returned the same answer {} times in a row with nothing changed; the next identical call will be refused. \
         If you are waiting for something, wait between checks (e.g. `sleep 30`); otherwise use the answer or change something first.",
        c.answers
    );
    Some(
        Verdict::new(NAME, Action::Warn, Severity::Low, reason)
            .with("call", e.key.short())
            .with("answers", c.answers)
            .with("allowed_repeats", allowed),
    )
}

fn verdict(
    c: &Chain,
    call: &Call,
    allowed: u32,
    back_to_back: u32,
    waiting_over: bool,
    waited_ms: u64,
) -> Verdict {
    let what = super::describe(&c.last.tool, &c.last.target);
    let n = c.answers;
    let same = if c.shape_only {
        "the same answer (up to numbers and ids)"
    } else {
        "the same answer"
    };
    let observed = if waiting_over && c.last.status.failed() {
        let error = in_brackets(&c.last.preview);
        format!(
            "{what} has failed the same way {n} times over {} of waiting{error}, with no news from any call in that time.",
            span(waited_ms)
        )
    } else if waiting_over {
        format!(
            "{what} has given {same} {n} times over {} of waiting, with no news from any call in that time.",
            span(waited_ms)
        )
    } else if c.last.status.failed() {
        let class = c.last.error_class.map_or("unknown", ErrorClass::name);
        let error = if c.last.preview.is_empty() {
            String::new()
        } else {
            format!(": {}", c.last.preview)
        };
        format!(
            "{what} has failed {n} time{} with {same} ({class} error{error}), and nothing has changed since.",
            plural(n)
        )
    } else if said(c.last) == Some(SILENCE) {
        format!("{what} has printed nothing and changed nothing {n} times in a row.")
    } else {
        format!("{what} has returned {same} {n} times in a row, and nothing has changed since.")
    };
    let advice = if waiting_over {
        "What you are waiting for is not happening: stop polling, find out why it is stuck, or tell the user what you are waiting on."
    } else if c.last.status.failed() {
        "Running it again will fail the same way. Change something first (the code, the input, the approach), or stop and tell the user what blocks you."
    } else if call.waited {
        "Running it again will not tell you anything new."
    } else {
        "Running it again will not tell you anything new. If you are waiting for something, wait between checks (e.g. `sleep 30`) instead of asking again at once; otherwise change something first or move on."
    };
    let reason = format!("LOOP_DETECTED (loopgate): {observed} {advice}");
    Verdict::new(NAME, Action::Deny, Severity::of_count(n + 1), reason)
        .loop_warning()
        .with("call", c.last.key.short())
        .with("tool", c.last.tool.as_str())
        .with("answers", n)
        .with("back_to_back", back_to_back)
        .with("allowed_repeats", allowed)
        .with("shape_only", c.shape_only)
        .with("failed", c.last.status == Status::Failed)
        .with("waited_minutes", waited_ms / 60_000)
        .with("waiting", waiting_over)
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
