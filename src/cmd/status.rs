//! `loopgate status`: sessions with their counters and last decisions.

use crate::judge::state::SessionState;
use crate::platform::clock::rfc3339;
use crate::store::Store;
use anyhow::{bail, Result};
use serde_json::{json, Value};

/// Sessions most recently active first; `limit` keeps the first N, `since` (e.g. `2h`) only
/// those active within that long.
pub fn run(
    store: &Store,
    session: Option<&str>,
    as_json: bool,
    limit: Option<usize>,
    since: Option<&str>,
) -> Result<()> {
    let cutoff_ms = match since {
        Some(s) => {
            let d = super::duration("--since", s)?;
            Some(crate::platform::clock::now_ms().saturating_sub(d.as_millis() as u64))
        }
        None => None,
    };
    let wanted = session.map(Store::stem);
    let mut sessions: Vec<(String, SessionState)> = store
        .sessions()
        .into_iter()
        .filter(|(stem, _)| wanted.as_ref().is_none_or(|w| w == stem))
        .filter_map(|(stem, path)| Some((stem, Store::peek(&path)?)))
        .filter(|(_, s)| cutoff_ms.is_none_or(|c| s.updated_ms >= c))
        .collect();
    sessions.sort_by(|a, b| {
        b.1.updated_ms
            .cmp(&a.1.updated_ms)
            .then_with(|| a.0.cmp(&b.0))
    });
    sessions.truncate(limit.unwrap_or(usize::MAX));
    if let (Some(id), true) = (session, sessions.is_empty()) {
        bail!("no state for session {id:?} in {}", store.dir().display());
    }
    let budget = Budget::load(store);
    if as_json {
        let mut all = Value::Array(
            sessions
                .iter()
                .map(|(stem, s)| {
                    let mut v = summary(stem, s);
                    v["budget"] = budget.of(s);
                    v
                })
                .collect(),
        );
        // States written by older versions were not masked: mask on the way out too.
        crate::judge::redact::mask_value(&mut all);
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    if sessions.is_empty() {
        println!("no sessions in {}", store.dir().display());
        return Ok(());
    }
    for (_, s) in &sessions {
        print_session(s);
        budget.print(s);
    }
    if let Some(id) = session {
        // One session asked for: what its loops cost (reads its transcript; hooks never do).
        let (events, _) = crate::cmd::report::read_events(store.dir(), Some(id), None);
        crate::cmd::report::print_loop_cost(&crate::replay::cost::from_events(&events), "");
    }
    Ok(())
}

/// The calls of an agent now repeating the same answer with nothing new between, longest first.
fn repeats(s: &SessionState, a: &crate::judge::state::AgentState) -> Vec<(String, u32, bool)> {
    let mut keys = Vec::new();
    let mut out = Vec::new();
    for e in a.ledger.answers() {
        if keys.contains(&e.key) {
            continue;
        }
        keys.push(e.key);
        if let Some(c) = crate::judge::detectors::repeat::chain(&a.ledger, &e.key, s.world.epoch, 0)
        {
            if c.answers >= 2 {
                out.push((
                    crate::judge::detectors::describe(&e.tool, &e.target),
                    c.answers,
                    e.status.failed(),
                ));
            }
        }
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.1));
    out
}

pub fn summary(stem: &str, s: &SessionState) -> Value {
    let agents: serde_json::Map<String, Value> = s
        .agents
        .iter()
        .map(|(name, a)| {
            let repeats: Vec<Value> = repeats(s, a)
                .into_iter()
                .take(5)
                .map(|(call, n, failed)| json!({"call": call, "same_answer_in_a_row": n, "failing": failed}))
                .collect();
            (
                name.clone(),
                json!({
                    "ledger_entries": a.ledger.entries.len(),
                    "in_flight": a.ledger.pending.len(),
                    "repeats": repeats,
                }),
            )
        })
        .collect();
    let mut out = json!({
        "session": s.session,
        "state_file": format!("{stem}.{}", crate::store::EXT),
        "started": rfc3339(s.started_ms),
        "updated": rfc3339(s.updated_ms),
        "turn": s.turn,
        "totals": s.totals,
        "breaker": s.breaker,
        "ceiling": ceiling(s),
        "world": {"files_tracked": s.world.files.len(), "new_states": s.world.novel_states, "epoch": s.world.epoch},
        "agents": agents,
        "recent": s.recent,
    });
    with_rfc3339(&mut out);
    // After the `_ms` twins: the record's own fields are already as scripts read them.
    out["halted"] = s.halts.last.as_ref().is_some_and(|h| h.stands()).into();
    out["halts"] = s.halts.count.into();
    out["last_halt"] = s
        .halts
        .last
        .as_ref()
        .map_or(Value::Null, |h| super::halted::record(&s.session, h));
    out
}

/// Where the session stands against the ceiling nothing but `loopgate reset` lowers.
fn ceiling(s: &SessionState) -> Value {
    use crate::judge::ceiling::{SESSION_BOUND, TURN_BOUND};
    let c = &s.ceiling;
    let current = c.turn == s.turn.number;
    json!({
        "refused_in_turn": if current { c.refusals } else { 0 },
        "turn_bound": TURN_BOUND,
        "turn_ended": current && c.ended,
        "ended_turns": c.ended_turns,
        "session_bound": SESSION_BOUND,
        "unattended_prompts_refused": c.ended_turns >= SESSION_BOUND,
        "last_ended_ms": c.last_ended_ms,
        // What the count is made of: the refusals the agent walked into in this turn.
        "walked_into": if s.heed.turn == s.turn.number {
            s.heed.defied.iter().map(|d| json!({"at_ms": d.at_ms, "call": crate::judge::redact::mask(&d.what), "detector": d.detector})).collect::<Vec<_>>()
        } else {
            Vec::new()
        },
    })
}

/// Every `…_ms` timestamp gets its RFC 3339 twin (`at_ms` → `at`), as in every other output.
fn with_rfc3339(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let stamps: Vec<(String, u64)> = map
                .iter()
                .filter_map(|(k, v)| Some((k.strip_suffix("_ms")?.to_string(), v.as_u64()?)))
                // A timestamp (after 2001), not a duration.
                .filter(|(_, ms)| *ms > 1_000_000_000_000)
                .collect();
            for (k, ms) in stamps {
                map.entry(k).or_insert_with(|| Value::String(rfc3339(ms)));
            }
            map.values_mut().for_each(with_rfc3339);
        }
        Value::Array(items) => items.iter_mut().for_each(with_rfc3339),
        _ => {}
    }
}

/// `println!` with secrets masked.
macro_rules! say {
    ($($arg:tt)*) => { println!("{}", crate::judge::redact::mask(&format!($($arg)*))) };
}

fn print_session(s: &SessionState) {
    let t = &s.totals;
    say!("session {}  (updated {})", s.session, rfc3339(s.updated_ms));
    if let Some(r) = s.recent.iter().rev().find(|n| n.event == "reset") {
        say!(
            "  reset at {}: the counters below start from then (before: `loopgate report`)",
            rfc3339(r.at_ms)
        );
    }
    if let Some(h) = s.halts.last.as_ref().filter(|h| h.stands()) {
        say!(
            "  HALTED ({}) at {}: {}",
            h.code,
            rfc3339(h.at_ms),
            crate::protocol::payload::clip(&crate::judge::redact::mask(&h.reason), 200)
        );
        say!(
            "  to go on: {}",
            crate::judge::halt::how_to_resume(&s.session, true)
        );
    }
    // Observe mode counts what it would have done; say so instead of calling them denials.
    let observed = s.observed();
    let (denials, blocks) = if observed {
        ("would deny", "would block at stop")
    } else {
        ("denials", "stop blocks")
    };
    say!(
        "  calls {}  failures {}  {denials} {}  warnings {}  {blocks} {}{}",
        t.calls,
        t.failures,
        t.denials,
        t.warnings,
        t.blocks,
        if observed {
            "  (observe mode: nothing was denied)"
        } else {
            ""
        }
    );
    say!(
        "  turn {}: {} ({} failed), {}, {}",
        s.turn.number,
        crate::util::words::count(s.turn.edit_attempts, "edit attempt"),
        s.turn.edit_failures,
        crate::util::words::count(s.turn.interventions, "intervention"),
        crate::util::words::count(s.turn.stop_blocks, "stop block")
    );
    say!(
        "  circuit breaker {}, {} in a row without progress",
        serde_json::to_value(s.breaker.state)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        crate::util::words::count(s.breaker.no_progress_turns, "turn")
    );
    let c = ceiling(s);
    say!(
        "  ceiling: {} of {} refused calls in this turn{}; {} of {} turns ended at it{}",
        c["refused_in_turn"],
        c["turn_bound"],
        if c["turn_ended"] == true {
            " (turn ended)"
        } else {
            ""
        },
        c["ended_turns"],
        c["session_bound"],
        if c["unattended_prompts_refused"] == true {
            ": unattended prompts are refused until `loopgate reset`"
        } else {
            ""
        }
    );
    if s.heed.turn == s.turn.number && !s.heed.defied.is_empty() {
        say!(
            "    walked into: {}",
            crate::judge::ceiling::evidence(&s.heed)
        );
    }
    for t in &s.breaker.history {
        say!(
            "    {} {} -> {}: {}",
            rfc3339(t.at_ms),
            t.from,
            t.to,
            t.reason
        );
    }
    say!(
        "  work: {} tracked, {} new states so far",
        crate::util::words::count(s.world.files.len() as u64, "file"),
        s.world.novel_states
    );
    for (name, a) in &s.agents {
        let repeat = repeats(s, a)
            .first()
            .map(|(call, n, _)| {
                format!(", longest repeat: {call} gave the same answer {n}× in a row")
            })
            .unwrap_or_default();
        say!(
            "  agent {name}: {} in the ledger{repeat}",
            crate::util::words::count(a.ledger.entries.len() as u64, "call")
        );
    }
    for n in &s.recent {
        say!(
            "  {} {} {} {} [{} · {}{}] {}",
            rfc3339(n.at_ms),
            n.event,
            n.tool,
            if n.enforced {
                n.action.clone()
            } else {
                format!("would {}", n.action)
            },
            n.detector,
            n.severity,
            if n.enforced { "" } else { ", observed" },
            n.summary
        );
    }
}

/// The loop budget in effect (the user's and this project's files) and the day's loop spend.
struct Budget {
    cfg: crate::config::Budget,
    today: String,
    day: crate::judge::budget::Day,
}

impl Budget {
    fn load(store: &Store) -> Budget {
        let project = super::project_dir(None);
        let cfg = super::load_config(None, false, project.as_deref())
            .config
            .budget;
        let now = crate::platform::clock::now_ms();
        Budget {
            cfg,
            today: crate::store::budget::date_of(now),
            day: crate::store::budget::day(store.dir(), now),
        }
    }

    /// One session's loop spend against its bounds, the day's as the ledger holds it now.
    fn of(&self, s: &SessionState) -> Value {
        let mut b = s.budget.clone();
        b.day = self.day.date.clone();
        b.day_usd = self.day.usd;
        b.day_tokens = self.day.tokens;
        crate::judge::budget::summary(&b, &self.cfg, &self.today)
    }

    fn print(&self, s: &SessionState) {
        let v = self.of(s);
        let n = |k: &str| v[k].as_f64().unwrap_or(0.0);
        if !self.cfg.enabled {
            say!("  loop budget: off");
            return;
        }
        say!(
            "  loop budget: ${:.2} of ${:.2} spent in loops this session{} · today ${:.2} of ${:.2} (estimates)",
            n("session_counted_usd"),
            n("session_limit_usd"),
            if s.budget.since_ms.is_some() { " (a loop is under way)" } else { "" },
            n("day_usd"),
            n("day_limit_usd"),
        );
    }
}
