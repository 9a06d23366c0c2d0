//! `loopgate replay`: real Claude Code transcripts fed offline through the same engine, in observe
//! mode with in-memory state (nothing on disk is touched), so every decision a session would have
//! met can be read and judged.

pub mod transcript;

use crate::config::{Config, Mode};
use crate::engine::{self, decision_name, Ctx};
use crate::git::NoGit;
use crate::payload::Payload;
use crate::state::SessionState;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

#[derive(Debug, Clone, Serialize)]
pub struct Fired {
    pub call: Option<usize>,
    pub event: &'static str,
    pub tool: String,
    pub agent: String,
    pub detector: &'static str,
    pub decision: &'static str,
    pub severity: &'static str,
    pub reason: String,
}

impl Fired {
    pub fn is_block(&self) -> bool {
        self.decision != "warn"
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionReport {
    pub file: String,
    pub session: String,
    pub calls: usize,
    pub fired: Vec<Fired>,
}

/// Replays one transcript's text through the engine.
pub fn replay_text(text: &str, name: &str, config: &Config) -> SessionReport {
    let mut cfg = config.clone();
    cfg.mode = Mode::Observe;
    let conv = transcript::convert(text, name);
    let mut states: HashMap<String, SessionState> = HashMap::new();
    let mut fired = Vec::new();
    let mut last_ms = 0u64;
    for cp in &conv.payloads {
        let Ok(bytes) = serde_json::to_vec(&cp.payload) else {
            continue;
        };
        // The same parser the hooks use: replay judges exactly what a hook would have read.
        let Ok((payload, event)) = Payload::parse(&bytes) else {
            continue;
        };
        let at = cp
            .at
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(last_ms);
        last_ms = last_ms.max(at);
        let ctx = Ctx {
            config: &cfg,
            now_ms: at,
            project_dir: None,
            attended: Some(false),
            worktree: &NoGit,
            state_dir: None,
        };
        let state = states
            .entry(payload.session_id.clone())
            .or_insert_with(|| SessionState::new(&payload.session_id, at));
        for v in engine::handle(state, &payload, event, &ctx) {
            fired.push(Fired {
                call: cp.call_index,
                event: event.name(),
                tool: payload.tool().to_string(),
                agent: payload.agent().to_string(),
                detector: v.detector,
                decision: decision_name(event, v.action),
                severity: v.severity.name(),
                reason: v.reason,
            });
        }
    }
    SessionReport {
        file: name.to_string(),
        session: conv.sessions_id,
        calls: conv.calls,
        fired,
    }
}

/// The `.jsonl` files named, directories expanded one level, sorted.
pub fn collect(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "jsonl"))
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Warnings and would-be blocks per detector, over all sessions.
pub fn tally(reports: &[SessionReport]) -> BTreeMap<&'static str, (usize, usize)> {
    let mut t = BTreeMap::new();
    for f in reports.iter().flat_map(|r| &r.fired) {
        let e = t.entry(f.detector).or_insert((0, 0));
        if f.is_block() {
            e.1 += 1;
        } else {
            e.0 += 1;
        }
    }
    t
}

pub fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
