//! The event log: one JSON line per warning, denial, block or would-fire, in `events.jsonl`,
//! rotated to `events.jsonl.1` when it grows past the configured size.

use crate::config::Log;
use crate::judge::engine::decision_name;
use crate::protocol::payload::{Event, Payload};
use crate::protocol::verdict::Verdict;
use crate::store::lock::{lock_within, LockBusy};
use crate::store::open_private;
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
        "repeat" | "environment" => "action",
        "modification" => "modification",
        "stagnation" => "conversation",
        "circular" => "circular_dependency",
        "cycle" => "state_cycle",
        "failures" => "failures",
        "progress" | "breaker" => "no_progress",
        "ladder" | "ceiling" => "escalation",
        "guard" => "tamper",
        _ => "other",
    }
}

pub fn line(m: &Meta, v: &Verdict) -> Value {
    let mut o = json!({
        "ts": crate::platform::clock::rfc3339(m.now_ms),
        "session": crate::protocol::payload::clip(&m.payload.session_id, 128),
        "agent": m.payload.agent_key(),
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
        o["tool_use_id"] = Value::String(crate::protocol::payload::clip(id, 128));
    }
    if let Some(id) = &m.payload.agent_id {
        o["agent.id"] = Value::String(crate::protocol::payload::stored_id(id));
    }
    if let Some(t) = m
        .payload
        .transcript_path
        .as_deref()
        .filter(|t| !t.is_empty())
    {
        o["transcript_path"] = Value::String(crate::protocol::payload::clip(t, 4096));
    }
    if let Some(cfg) = m.config {
        if let Some(t) = crate::config::sources::thresholds(cfg, v.detector) {
            o["thresholds"] = t;
        }
    }
    // The one masking pass every line goes through, whatever a detector put in it.
    crate::judge::redact::mask_value(&mut o);
    o
}

/// Longest line kept whole; a longer one keeps its fields but loses its evidence and most of its
/// reason.
const MAX_LINE: usize = 16 << 10;

/// The bytes one call appends: each line bounded, and all of them together at most half the
/// log's size, so that after rotation the log stays under `max_bytes` whatever one call does.
fn render(lines: &[Value], max_bytes: u64) -> Result<Vec<u8>> {
    let budget = (max_bytes / 2).max(MAX_LINE as u64 * 2) as usize;
    let mut buf = Vec::new();
    for (n, l) in lines.iter().enumerate() {
        let mut one = serde_json::to_vec(l)?;
        if one.len() > MAX_LINE {
            let mut short = l.clone();
            short["evidence"] = json!({"truncated": true});
            if let Some(r) = l["reason"].as_str() {
                short["reason"] = Value::String(crate::protocol::payload::clip(r, 2000));
            }
            if let Some(p) = l["preview"].as_str() {
                short["preview"] = Value::String(crate::protocol::payload::clip(p, 200));
            }
            one = serde_json::to_vec(&short)?;
            one.truncate(MAX_LINE);
            if !one.ends_with(b"}") {
                // Still too long (a huge tool name): keep the fact, not the text.
                one = serde_json::to_vec(
                    &json!({"ts": l["ts"], "detector": l["detector"], "decision": l["decision"], "truncated": true}),
                )?;
            }
        }
        if buf.len() + one.len() + 1 > budget {
            let left = json!({
                "ts": l["ts"],
                "session": l["session"],
                "event": l["event"],
                "detector": "log",
                "decision": "truncated",
                "reason": format!("{} more lines of this call left out: the log is bounded", lines.len() - n),
            });
            serde_json::to_writer(&mut buf, &left)?;
            buf.push(b'\n');
            break;
        }
        buf.extend_from_slice(&one);
        buf.push(b'\n');
    }
    Ok(buf)
}

/// Appends the lines under a log lock, rotating first when the file would grow past its size.
/// Lines from parallel hook processes never interleave.
/// The longest a call waits for the event log's lock. loopgate's own holders keep it for one
/// write; a hold longer than this is someone else's, and waiting out the session lock's timeout
/// on every call would make each hook that slow for as long as they hold it.
const LOG_LOCK_WAIT: Duration = Duration::from_millis(200);

pub fn append(dir: &Path, lines: &[Value], cfg: &Log, timeout: Duration) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let path = dir.join(FILE);
    let lock_path = dir.join("events.lock");
    let lock = open_private(&lock_path).context("cannot open the event log lock")?;
    let buf = render(lines, cfg.max_bytes)?;
    if let Err(e) = lock_within(
        &lock,
        &lock_path,
        timeout.min(LOG_LOCK_WAIT),
        "the event log",
    ) {
        if e.downcast_ref::<LockBusy>().is_none() {
            return Err(e);
        }
        // The lines are still logged: one append-mode write, which concurrent appenders cannot
        // split, and no rotation (that waits for a call holding the lock).
        let mut f =
            crate::platform::open_private_append(&path).context("cannot open the event log")?;
        f.write_all(&buf).context("cannot write the event log")?;
        return Err(e.context("this call's lines were appended without the lock"));
    }
    let size = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if size > 0 && size + buf.len() as u64 > cfg.max_bytes {
        rotate(&path, cfg.generations).context("cannot rotate the event log")?;
    }
    let mut f = open_private(&path).context("cannot open the event log")?;
    f.seek(SeekFrom::End(0))?;
    f.write_all(&buf).context("cannot write the event log")?;
    Ok(())
}

/// Rotates `path` into `path.1`, `path.1` into `path.2` … keeping `generations` old files.
pub fn rotate(path: &Path, generations: u32) -> std::io::Result<()> {
    let numbered = |i: u32| {
        let mut s = path.as_os_str().to_owned();
        s.push(format!(".{i}"));
        std::path::PathBuf::from(s)
    };
    if generations == 0 {
        return fs::remove_file(path);
    }
    let _ = fs::remove_file(numbered(generations));
    for i in (1..generations).rev() {
        match fs::rename(numbered(i), numbered(i + 1)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    fs::rename(path, numbered(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_call_never_outgrows_the_log() {
        let d = tempfile::tempdir().unwrap();
        let cfg = Log {
            max_bytes: 64 << 10,
            ..Log::default()
        };
        let line = |n: usize| json!({"ts": "t", "detector": "x", "reason": "r".repeat(n), "evidence": {"e": "v".repeat(n)}});
        let huge: Vec<Value> = (0..2000).map(|_| line(300)).collect();
        let t = Duration::from_secs(1);
        for _ in 0..5 {
            append(d.path(), &huge, &cfg, t).unwrap();
            append(d.path(), &[line(1 << 20)], &cfg, t).unwrap();
            for f in [FILE.to_string(), format!("{FILE}.1")] {
                let len = fs::metadata(d.path().join(&f))
                    .map(|m| m.len())
                    .unwrap_or(0);
                assert!(len <= cfg.max_bytes, "{f}: {len}");
            }
        }
        let text = fs::read_to_string(d.path().join(FILE)).unwrap();
        assert!(text
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()));
        assert!(
            text.contains("left out")
                || fs::read_to_string(d.path().join(format!("{FILE}.1")))
                    .unwrap()
                    .contains("left out")
        );
    }
}
