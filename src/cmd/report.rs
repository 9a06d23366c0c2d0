//! `loopgate report`: what loopgate saw and did, from `events.jsonl` and the session states —
//! counts by detector, decision, severity, tool and session; the six-type design's statistics; and
//! per session whether the agent was looping on its inputs (the same arguments again) or on its
//! outputs (a tool that keeps answering the same): seed 004's `gate_blocked` aggregation.

use crate::judge::state::SessionState;
use crate::store::Store;
use anyhow::Result;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Detectors whose signal is the same arguments again, and those whose signal is the same answer.
const INPUT_SIGNALS: &[&str] = &["repeat", "environment", "cycle", "modification"];
const OUTPUT_SIGNALS: &[&str] = &["stagnation"];

pub fn run(store: &Store, session: Option<&str>, since: Option<&str>, as_json: bool) -> Result<()> {
    let cutoff = match since {
        Some(s) => {
            let d: Duration = super::duration("--since", s)?;
            Some(SystemTime::now() - d)
        }
        None => None,
    };
    let (events, unreadable) = read_events(store.dir(), session, cutoff);
    let range = match since {
        Some(s) => format!(" in the last {s}"),
        None => " in the event log".to_string(),
    };
    let states: Vec<SessionState> = store
        .sessions()
        .into_iter()
        .filter_map(|(_, p)| Store::peek(&p))
        .filter(|s| session.is_none_or(|id| s.session == crate::protocol::payload::clip(id, 128)))
        .collect();
    let mut report = build(&events, &states);
    let costs = crate::replay::cost::from_events(&events);
    report["loop_cost"] = loop_cost_json(&costs);
    report["budget"] = budget_json(store, &states);
    if unreadable > 0 {
        report["unreadable_lines_skipped"] = json!(unreadable);
    }
    // Logs written by older versions were not masked: mask on the way out too.
    crate::judge::redact::mask_value(&mut report);
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
        print_loop_cost(&costs, &range);
        print_unknown_cost(&crate::replay::cost::unreadable_transcripts(&events));
        print_budget(&report["budget"]);
    }
    Ok(())
}

/// Per session its loops' cost, and the total.
fn loop_cost_json(costs: &[(String, Vec<crate::replay::cost::LoopCost>)]) -> Value {
    let all: Vec<_> = costs.iter().flat_map(|(_, l)| l.clone()).collect();
    json!({
        "note": "tokens the model spent from each loop's first repeat to its last decision, read from the session transcripts; list prices only for known models",
        "prices_date": crate::replay::cost::PRICES_DATE,
        "sessions": costs.iter().map(|(s, l)| json!({"session": s, "loops": l})).collect::<Vec<_>>(),
        "calls": all.iter().map(|l| l.calls).sum::<usize>(),
        "tokens": all.iter().map(|l| l.tokens).sum::<u64>(),
        "list_price_usd": all.iter().filter_map(|l| l.list_price_usd).sum::<f64>(),
    })
}

/// The loop budget: what the sessions' loops spent against it, and the day's total.
fn budget_json(store: &Store, states: &[SessionState]) -> Value {
    let project = super::project_dir(None);
    let cfg = super::load_config(None, false, project.as_deref())
        .config
        .budget;
    let now = crate::platform::clock::now_ms();
    let today = crate::store::budget::date_of(now);
    let day = crate::store::budget::day(store.dir(), now);
    let sessions: Vec<Value> = states
        .iter()
        .filter(|s| s.budget.usd > 0.0 || s.halts.last.as_ref().is_some_and(|h| h.code == "budget"))
        .map(|s| {
            let mut b = s.budget.clone();
            b.day = day.date.clone();
            b.day_usd = day.usd;
            let mut v = crate::judge::budget::summary(&b, &cfg, &today);
            v["session"] = s.session.clone().into();
            v
        })
        .collect();
    json!({
        "enabled": cfg.enabled,
        "note": "loop spend: tokens and dollars of model responses inside detected loops; an estimate (list prices, or the CLI's own figure where it gives one)",
        "session_limit_usd": cfg.session_usd,
        "day": today,
        "day_usd": day.usd,
        "day_limit_usd": cfg.day_usd,
        "sessions": sessions,
    })
}

fn print_budget(b: &Value) {
    if b["enabled"] != true {
        println!(
            "
loop budget: off"
        );
        return;
    }
    let n = |v: &Value| v.as_f64().unwrap_or(0.0);
    println!(
        "
loop budget (an estimate): today ${:.2} of ${:.2} spent in loops; each session ${:.2}",
        n(&b["day_usd"]),
        n(&b["day_limit_usd"]),
        n(&b["session_limit_usd"])
    );
    for s in b["sessions"].as_array().into_iter().flatten() {
        println!(
            "  session {}: ${:.2} in loops ({} tokens), ${:.2} counted against ${:.2}",
            s["session"].as_str().unwrap_or(""),
            n(&s["session_usd"]),
            s["session_tokens"],
            n(&s["session_counted_usd"]),
            n(&s["session_limit_usd"])
        );
    }
}

/// What the loops cost, for people; `range` says which events were counted.
pub fn print_loop_cost(costs: &[(String, Vec<crate::replay::cost::LoopCost>)], range: &str) {
    if costs.is_empty() {
        return;
    }
    println!("\nwhat the loops cost{range} (from each loop's first repeat to its last decision, read from the transcripts):");
    for (session, loops) in costs {
        println!("  session {session}");
        for line in crate::replay::cost::describe(loops, "    ") {
            println!("{line}");
        }
    }
    let all: Vec<_> = costs.iter().flat_map(|(_, l)| l.clone()).collect();
    println!("  {}", crate::replay::cost::total(&all));
}

/// Loops whose cost cannot be told, because their transcript is gone: said, not left out.
fn print_unknown_cost(unreadable: &[String]) {
    let Some(first) = unreadable.first() else {
        return;
    };
    println!(
        "\nwhat the loops cost is not known for {} (the transcript is gone or unreadable: {first}{})",
        crate::util::words::count(unreadable.len() as u64, "session"),
        if unreadable.len() > 1 { ", …" } else { "" }
    );
}

/// The events of the log's generations, and how many lines could not be read. A line is read
/// on its own: one that is not JSON (a torn write, a byte that is not UTF-8) is skipped and
/// counted, never the file it is in.
pub fn read_events(
    state_dir: &std::path::Path,
    session: Option<&str>,
    cutoff: Option<SystemTime>,
) -> (Vec<Value>, u64) {
    let mut out = Vec::new();
    let mut unreadable = 0;
    for path in crate::store::gc::log_generations(state_dir) {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        for line in bytes.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Ok(e) = serde_json::from_slice::<Value>(line) else {
                unreadable += 1;
                continue;
            };
            if session.is_some_and(|id| e["session"] != crate::protocol::payload::clip(id, 128)) {
                continue;
            }
            let ts = e["ts"]
                .as_str()
                .and_then(|t| humantime::parse_rfc3339_weak(t).ok());
            if cutoff.is_some_and(|c| ts.is_none_or(|t| t < c)) {
                continue;
            }
            out.push(e);
        }
    }
    (out, unreadable)
}

fn count_by(events: &[Value], key: &str) -> Map<String, Value> {
    let mut m: BTreeMap<String, u64> = BTreeMap::new();
    for e in events {
        let k = e[key].as_str().unwrap_or("-").to_string();
        *m.entry(k).or_default() += 1;
    }
    m.into_iter().map(|(k, v)| (k, json!(v))).collect()
}

/// Which side of the loop an event speaks of: `Some(true)` inputs, `Some(false)` outputs.
fn side(e: &Value) -> Option<bool> {
    let d = e["detector"].as_str().unwrap_or("");
    match (d, e["evidence"]["signal"].as_str().unwrap_or("")) {
        // A poll that waited and kept getting the same answer is a tool answering the same.
        ("repeat", _) if e["evidence"]["waiting"] == true => Some(false),
        _ if INPUT_SIGNALS.contains(&d) => Some(true),
        _ if OUTPUT_SIGNALS.contains(&d) => Some(false),
        _ => None,
    }
}

/// One sentence per session: inputs or outputs.
fn verdict_sentence(events: &[&Value]) -> String {
    let mut ins: BTreeMap<&str, u64> = BTreeMap::new();
    let mut outs: BTreeMap<&str, u64> = BTreeMap::new();
    for e in events {
        let d = e["detector"].as_str().unwrap_or("");
        match side(e) {
            Some(true) => *ins.entry(d).or_default() += 1,
            Some(false) => *outs.entry(d).or_default() += 1,
            None => {}
        }
    }
    let (ni, no): (u64, u64) = (ins.values().sum(), outs.values().sum());
    let list = |m: &BTreeMap<&str, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let also = |n: u64, what: &str| {
        if n > 0 {
            format!("; {n} on {what}")
        } else {
            String::new()
        }
    };
    match (ni, no) {
        (0, 0) => "no loop signals: nothing repeated long enough to matter.".to_string(),
        (i, o) if i >= o => format!(
            "looping on inputs — the same calls with the same arguments again ({i} signals: {}{}).",
            list(&ins),
            also(o, "outputs")
        ),
        (i, o) => format!(
            "looping on outputs — tools that keep answering the same ({o} signals: {}{}).",
            list(&outs),
            also(i, "inputs")
        ),
    }
}

pub fn build(all_events: &[Value], states: &[SessionState]) -> Value {
    // A `loopgate reset` line carries the counters it cleared from the state: counted back here.
    let (resets, decisions): (Vec<&Value>, Vec<&Value>) =
        all_events.iter().partition(|e| e["event"] == "reset");
    let events: Vec<Value> = decisions.into_iter().cloned().collect();
    let events = &events[..];
    let cleared = |keys: &[&str]| -> u64 {
        resets
            .iter()
            .flat_map(|e| {
                keys.iter()
                    .map(|k| e["evidence"]["cleared"][k].as_u64().unwrap_or(0))
            })
            .sum()
    };
    let calls: u64 = states.iter().map(|s| s.totals.calls).sum::<u64>() + cleared(&["calls"]);
    let failures: u64 =
        states.iter().map(|s| s.totals.failures).sum::<u64>() + cleared(&["failures"]);
    // A refused call never ran: it is neither a success nor a failure.
    let refused: u64 = states.iter().map(|s| s.totals.denials).sum::<u64>() + cleared(&["denials"]);
    let ran = calls.saturating_sub(refused);
    let interventions: u64 = states
        .iter()
        .map(|s| s.totals.denials + s.totals.warnings + s.totals.blocks)
        .sum::<u64>()
        + cleared(&["denials", "warnings", "blocks"]);
    let turns_int: u64 = states
        .iter()
        .map(|s| s.totals.turns_with_interventions)
        .sum::<u64>()
        + cleared(&["turns_with_interventions"]);
    let turns_prog: u64 = states
        .iter()
        .map(|s| s.totals.intervened_turns_with_progress)
        .sum::<u64>()
        + cleared(&["intervened_turns_with_progress"]);
    let mut sessions: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for e in events {
        sessions
            .entry(e["session"].as_str().unwrap_or("-").to_string())
            .or_default()
            .push(e);
    }
    for s in states {
        sessions.entry(s.session.clone()).or_default();
    }
    let per_session: Vec<Value> = sessions
        .iter()
        .map(|(id, evs)| {
            let st = states.iter().find(|s| &s.session == id);
            json!({
                "session": id,
                "events": evs.len(),
                "calls": st.map(|s| s.totals.calls),
                // The same spelling as `status` and the state file (CLOSED, HALF_OPEN, OPEN).
                "breaker": st.and_then(|s| serde_json::to_value(s.breaker.state).ok()),
                "summary": verdict_sentence(evs),
            })
        })
        .collect();
    json!({
        "events": events.len(),
        "by_detector": count_by(events, "detector"),
        "by_decision": count_by(events, "decision"),
        "by_severity": count_by(events, "severity"),
        "by_tool": count_by(events, "tool"),
        "by_session": count_by(events, "session"),
        "statistics": {
            "sessions": states.len(),
            "calls": calls,
            "failures": failures,
            "refused": refused,
            "ran": ran,
            "success_rate": if ran == 0 { Value::Null } else { json!(ran.saturating_sub(failures) as f64 / ran as f64) },
            "interventions": interventions,
            "turns_with_interventions": turns_int,
            "of_which_ended_with_progress": turns_prog,
        },
        "sessions": per_session,
        "generated": crate::platform::clock::rfc3339(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)),
    })
}

/// A JSON count with its noun, plural right.
fn n(v: &Value, word: &str) -> String {
    crate::util::words::count(v.as_u64().unwrap_or(0), word)
}

fn print(r: &Value) {
    if let Some(n) = r["unreadable_lines_skipped"].as_u64() {
        println!("{n} unreadable line(s) of the event log skipped (not JSON, or not UTF-8)");
    }
    let st = &r["statistics"];
    println!(
        "{}, {}{}, {} (success rate {} of the calls that ran), {}; {} needed one, {} of them still ended with progress",
        n(&st["sessions"], "session"),
        n(&st["calls"], "call"),
        match st["refused"].as_u64() {
            Some(r) if r > 0 => format!(" ({r} refused)"),
            _ => String::new(),
        },
        n(&st["failures"], "failure"),
        st["success_rate"]
            .as_f64()
            .map(|x| format!("{:.1}%", x * 100.0))
            .unwrap_or_else(|| "-".into()),
        n(&st["interventions"], "intervention"),
        n(&st["turns_with_interventions"], "turn"),
        st["of_which_ended_with_progress"],
    );
    for (title, key) in [
        ("detector", "by_detector"),
        ("decision", "by_decision"),
        ("severity", "by_severity"),
        ("tool", "by_tool"),
    ] {
        let Some(m) = r[key].as_object().filter(|m| !m.is_empty()) else {
            continue;
        };
        println!("\n{title:<24} events");
        for (k, v) in m {
            println!("{k:<24} {v:>6}");
        }
    }
    println!();
    for s in r["sessions"].as_array().into_iter().flatten() {
        println!(
            "session {} ({}, breaker {}): {}",
            s["session"].as_str().unwrap_or("-"),
            n(&s["events"], "event"),
            s["breaker"].as_str().unwrap_or("-"),
            s["summary"].as_str().unwrap_or("")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_judged_on_inputs_or_outputs() {
        let e = |d: &str, signal: &str| json!({"session": "s", "detector": d, "decision": "deny", "severity": "low", "tool": "Bash", "evidence": {"signal": signal}});
        let ins = [e("repeat", ""), e("cycle", ""), e("stagnation", "")];
        let refs: Vec<&Value> = ins.iter().collect();
        assert!(verdict_sentence(&refs).starts_with("looping on inputs"));
        let mut waiting = e("repeat", "");
        waiting["evidence"]["waiting"] = json!(true);
        let outs = [waiting, e("stagnation", ""), e("repeat", "")];
        let refs: Vec<&Value> = outs.iter().collect();
        assert!(
            verdict_sentence(&refs).starts_with("looping on outputs"),
            "{}",
            verdict_sentence(&refs)
        );
        assert!(verdict_sentence(&[]).starts_with("no loop signals"));
        let r = build(&ins, &[]);
        assert_eq!(r["by_detector"]["repeat"], 1);
        assert_eq!(r["by_decision"]["deny"], 3);
    }
}
