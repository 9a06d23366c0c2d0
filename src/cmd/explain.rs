//! `loopgate explain [--session ID] [CALL]`: why the last (or a given) decision was taken —
//! which detector fired, on what evidence, with which thresholds, and how to change them — or,
//! for a call nothing was logged for, which detectors were watching and that none reached its
//! threshold.
//!
//! It reads only the event log (each line carries detector, reason, evidence and the
//! detector's thresholds) and the configuration, never a detector's internals, so it keeps
//! working whatever the detectors become.

use crate::config::sources::Loaded;
use crate::config::sources::{self, Origin};
use anyhow::Result;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

pub fn run(
    state_dir: &Path,
    loaded: &Loaded,
    session: Option<&str>,
    call: Option<&str>,
    as_json: bool,
) -> Result<()> {
    let events = read_events(state_dir, session);
    let mut out = std::io::stdout().lock();
    let matches = |e: &Value| match call {
        None => true,
        Some(c) => {
            e["tool_use_id"].as_str() == Some(c)
                || e["preview"].as_str().is_some_and(|p| p.contains(c))
        }
    };
    let Some(last) = events.iter().rev().find(|e| matches(e)) else {
        return explain_nothing(&mut out, loaded, session, call, events.len(), as_json);
    };
    // Every verdict logged for the same call (same time, event and tool), strongest first.
    let same: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["ts"] == last["ts"]
                && e["event"] == last["event"]
                && e["session"] == last["session"]
                && e["tool"] == last["tool"]
        })
        .collect();
    let main = same
        .iter()
        .copied()
        .find(|e| e["decision"] != "warn")
        .unwrap_or(last);
    let table = main["detector"].as_str().and_then(sources::detector_table);
    let settings = table
        .as_deref()
        .map(|t| current_settings(loaded, t))
        .unwrap_or_default();
    if as_json {
        let doc = json!({
            "found": true,
            "decision": main,
            "also": same.iter().filter(|e| !std::ptr::eq(**e, main)).collect::<Vec<_>>(),
            "config_table": table,
            "exemption": exemption(main),
            "settings_now": settings.iter().map(|(k, v, o)| json!({"key": k, "value": serde_json::to_value(v).unwrap_or_default(), "source": o})).collect::<Vec<_>>(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let s = |v: &Value| v.as_str().unwrap_or("-").to_string();
    let enforced = main["enforced"].as_bool().unwrap_or(true);
    writeln!(
        out,
        "{} {} at {}{}",
        s(&main["decision"]),
        if enforced {
            "(enforced)"
        } else {
            "(observe mode: logged, not acted on)"
        },
        s(&main["ts"]),
        if call.is_some() {
            ""
        } else {
            ", the last decision logged"
        }
    )?;
    writeln!(
        out,
        "  session {}  agent {}  prompt {}",
        s(&main["session"]),
        s(&main["agent"]),
        s(&main["prompt_id"])
    )?;
    let mut what = format!("  call: {} {}", s(&main["event"]), s(&main["tool"]));
    if let Some(p) = main["preview"].as_str() {
        what.push_str(&format!(" `{p}`"));
    }
    if let Some(id) = main["tool_use_id"].as_str() {
        what.push_str(&format!("  (tool_use_id {id})"));
    }
    writeln!(out, "{what}")?;
    writeln!(
        out,
        "  detector: {} ({} loop, severity {})",
        s(&main["detector"]),
        s(&main["loop_type"]),
        s(&main["severity"])
    )?;
    writeln!(out, "  why: {}", s(&main["reason"]))?;
    if !main["evidence"].is_null() {
        writeln!(out, "  evidence: {}", compact(&main["evidence"]))?;
    }
    match main["thresholds"].as_object() {
        Some(t) => writeln!(
            out,
            "  thresholds when it fired: {}",
            t.iter()
                .map(|(k, v)| format!("{k} = {}", compact(v)))
                .collect::<Vec<_>>()
                .join(", ")
        )?,
        None => writeln!(
            out,
            "  thresholds when it fired: not logged (an older event)"
        )?,
    }
    for e in same.iter().filter(|e| !std::ptr::eq(**e, main)) {
        writeln!(
            out,
            "  also: {} {} — {}",
            s(&e["detector"]),
            s(&e["decision"]),
            s(&e["reason"])
        )?;
    }
    if let Some(t) = &table {
        writeln!(
            out,
            "  to change it, set these under [{t}] (now in effect):"
        )?;
        for (k, v, origin) in &settings {
            writeln!(out, "    {k} = {v}    # {origin}")?;
        }
        writeln!(
            out,
            "    in the user file {}, or in the environment as {}<KEY>",
            user_file(),
            sources::env_var_for(&format!("{t}."))
        )?;
        writeln!(
            out,
            "    (a project's .claude/loopgate.toml may only tighten them; see `loopgate config`)"
        )?;
    }
    if let Some(ex) = exemption(main) {
        writeln!(
            out,
            "  to never have such calls judged by the loop rules (a poller you trust), add to the \
             user file {} (a project file cannot):\n    [exempt]\n    {ex}",
            user_file()
        )?;
    }
    if enforced && main["event"] == "PreToolUse" {
        writeln!(
            out,
            "  to let this call run now: loopgate reset --session {}",
            s(&main["session"])
        )?;
    }
    Ok(())
}

/// The `[exempt]` line that would have let a call refused by a loop rule through: the command
/// itself (a clipped one by its start), or the tool. The guard and a paused session are not loop
/// rules: nothing exempts a call from them.
fn exemption(e: &Value) -> Option<String> {
    let refused = matches!(
        e["decision"].as_str(),
        Some("deny" | "ask" | "halt" | "block")
    );
    let detector = e["detector"].as_str().unwrap_or("");
    if !refused
        || e["event"] != "PreToolUse"
        || matches!(detector, "guard" | "breaker" | "outer_loop" | "progress")
    {
        return None;
    }
    let tool = e["tool"].as_str().filter(|t| !t.is_empty())?;
    match (tool, e["preview"].as_str()) {
        ("Bash" | "PowerShell", Some(cmd)) if !cmd.is_empty() => {
            let (cmd, clipped) = match cmd.strip_suffix('…') {
                Some(start) => (start, true),
                None => (cmd, false),
            };
            let pattern = glob::Pattern::escape(cmd)
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            Some(format!(
                "commands = [\"{pattern}{}\"]",
                if clipped { "*" } else { "" }
            ))
        }
        _ => Some(format!("tools = [\"{tool}\"]")),
    }
}

fn explain_nothing(
    out: &mut impl Write,
    loaded: &Loaded,
    session: Option<&str>,
    call: Option<&str>,
    logged: usize,
    as_json: bool,
) -> Result<()> {
    let detectors = watching(loaded);
    if as_json {
        let doc = json!({
            "found": false,
            "call": call,
            "session": session,
            "events_searched": logged,
            "mode": serde_json::to_value(loaded.config.mode).unwrap_or_default(),
            "detectors": detectors.iter().map(|(t, names, on, settings)| json!({
                "table": t,
                "detectors": names,
                "enabled": on,
                "settings": settings.iter().map(|(k, v, o)| json!({"key": k, "value": serde_json::to_value(v).unwrap_or_default(), "source": o})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    match call {
        Some(c) => writeln!(
            out,
            "nothing fired on a call matching {c:?}{}: every detector that looked let it pass",
            session
                .map(|s| format!(" in session {s}"))
                .unwrap_or_default()
        )?,
        None => writeln!(
            out,
            "no decision logged yet{}: every call so far passed every detector",
            session
                .map(|s| format!(" in session {s}"))
                .unwrap_or_default()
        )?,
    }
    writeln!(
        out,
        "  (events.jsonl records warnings, denials, blocks and would-fire decisions only; {logged} searched)"
    )?;
    writeln!(
        out,
        "  none of these reached its threshold (mode {}):",
        serde_json::to_value(loaded.config.mode)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    )?;
    for (table, names, on, settings) in &detectors {
        let knobs: Vec<String> = settings
            .iter()
            .filter(|(k, v, _)| k != "enabled" && !v.is_array())
            .map(|(k, v, _)| format!("{k} = {v}"))
            .collect();
        let origin = settings
            .iter()
            .find(|(k, _, _)| k == "enabled")
            .map(|(_, _, o)| o.to_string())
            .unwrap_or_default();
        writeln!(
            out,
            "  {} {:<28} {}{}",
            if *on { "on " } else { "off" },
            format!("[{table}]"),
            if names.is_empty() {
                String::new()
            } else {
                format!("({}) ", names.join(", "))
            },
            if *on {
                knobs.join(", ")
            } else {
                format!("switched off ({origin}): it did not look")
            }
        )?;
    }
    Ok(())
}

type Setting = (String, toml::Value, Origin);

/// The settings of `table` now in effect, with their sources.
fn current_settings(loaded: &Loaded, table: &str) -> Vec<Setting> {
    let Some(toml::Value::Table(t)) = loaded
        .effective
        .as_ref()
        .and_then(|e| sources::get(e, table))
    else {
        return Vec::new();
    };
    t.iter()
        .filter(|(_, v)| !v.is_table())
        .map(|(k, v)| {
            let origin = loaded
                .origins
                .get(&format!("{table}.{k}"))
                .cloned()
                .unwrap_or(Origin::Default);
            (k.clone(), v.clone(), origin)
        })
        .collect()
}

/// Every table with an `enabled` switch: a detector (or the guard, ladder, breaker), the names
/// it logs under, whether it is on, and its settings.
fn watching(loaded: &Loaded) -> Vec<(String, Vec<String>, bool, Vec<Setting>)> {
    let Some(root) = loaded.effective.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (path, v) in crate::config::leaves(root) {
        let Some(table) = path.strip_suffix(".enabled") else {
            continue;
        };
        let names: Vec<String> = known_detectors()
            .into_iter()
            .filter(|d| sources::detector_table(d).as_deref() == Some(table))
            .collect();
        out.push((
            table.to_string(),
            names,
            v.as_bool().unwrap_or(true),
            current_settings(loaded, table),
        ));
    }
    out
}

fn known_detectors() -> Vec<String> {
    sources::detector_names().collect()
}

fn user_file() -> String {
    crate::config::user_config_file()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "~/.config/loopgate/config.toml".into())
}

fn compact(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        _ => v.to_string(),
    };
    // The log is masked when written; a line from an older version may not be.
    crate::protocol::payload::clip(&crate::judge::redact::mask(&s), 300)
}

/// Events of every log generation, oldest first, optionally of one session (lines that cannot
/// be read are skipped, as `report` skips and counts them).
fn read_events(state_dir: &Path, session: Option<&str>) -> Vec<Value> {
    let (mut events, _) = crate::cmd::report::read_events(state_dir, session, None);
    // A `loopgate reset` line records the person's command, and a notice what the person was
    // told (a lost state, a loosened configuration): neither is a decision.
    events.retain(|e| e["event"] != "reset" && e["decision"] != "notice");
    events
}
