//! The event log: one JSON line per warning, denial, block or would-fire, in `events.jsonl`,
//! rotated to `events.jsonl.1` when it grows past the configured size.

use crate::config::Log;
use crate::engine::decision_name;
use crate::payload::{Event, Payload};
use crate::store::{lock_within, open_private};
use crate::verdict::Verdict;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

pub const FILE: &str = "events.jsonl";

pub struct Meta<'a> {
    pub payload: &'a Payload,
    pub event: Event,
    pub now_ms: u64,
    pub enforced: bool,
    pub preview: Option<String>,
    /// The settings in effect, so each line carries its detector's thresholds.
    pub config: Option<&'a crate::config::Config>,
}

/// Seed 001's six loop types, plus the signals that are not loops of one kind (failures, waiting,
/// the Stop gate, the breaker, the guard).
pub fn loop_type(detector: &str) -> &'static str {
    match detector {
        "repeat" => "action",
        "modification" => "modification",
        "stagnation" => "conversation",
        "circular" => "circular_dependency",
        "cycle" => "state_cycle",
        "failures" => "failures",
        "progress" | "breaker" => "no_progress",
        "ladder" => "escalation",
        "guard" => "tamper",
        _ => "other",
    }
}

pub fn line(m: &Meta, v: &Verdict) -> Value {
    let mut o = json!({
        "ts": crate::clock::rfc3339(m.now_ms),
        "session": crate::payload::clip(&m.payload.session_id, 128),
        "agent": crate::payload::clip(m.payload.agent(), 64),
        "prompt_id": m.payload.prompt_id,
        "event": m.event.name(),
        "tool": m.payload.tool_name,
        "detector": v.detector,
        "loop_type": loop_type(v.detector),
        "decision": decision_name(m.event, v.action),
        "enforced": m.enforced,
        "severity": v.severity.name(),
        "reason": v.reason,
        "evidence": v.evidence,
    });
    if let Some(p) = &m.preview {
        o["preview"] = Value::String(p.clone());
    }
    // Join keys named as in Claude Code's own OpenTelemetry events, for a team's log pipeline.
    o["session.id"] = o["session"].clone();
    o["prompt.id"] = o["prompt_id"].clone();
    if let Some(id) = &m.payload.tool_use_id {
        o["tool_use_id"] = Value::String(crate::payload::clip(id, 128));
    }
    if let Some(id) = &m.payload.agent_id {
        o["agent.id"] = Value::String(crate::payload::clip(id, 64));
    }
    if let Some(cfg) = m.config {
        if let Some(t) = crate::config_sources::thresholds(cfg, v.detector) {
            o["thresholds"] = t;
        }
    }
    o
}

/// Appends the lines under a log lock, rotating first when the file is too large. Lines from
/// parallel hook processes never interleave.
pub fn append(dir: &Path, lines: &[Value], cfg: &Log, timeout: Duration) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let path = dir.join(FILE);
    let lock_path = dir.join("events.lock");
    let lock = open_private(&lock_path).context("cannot open the event log lock")?;
    lock_within(&lock, &lock_path, timeout, "the event log")?;
    if fs::metadata(&path).is_ok_and(|m| m.len() > cfg.max_bytes) {
        crate::gc::rotate(&path, cfg.generations).context("cannot rotate the event log")?;
    }
    let mut buf = Vec::new();
    for l in lines {
        serde_json::to_writer(&mut buf, l)?;
        buf.push(b'\n');
    }
    let mut f = open_private(&path).context("cannot open the event log")?;
    f.seek(SeekFrom::End(0))?;
    f.write_all(&buf).context("cannot write the event log")?;
    Ok(())
}
