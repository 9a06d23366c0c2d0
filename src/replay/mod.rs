//! `loopgate replay`: real sessions fed offline through the same engine, in observe mode with
//! in-memory state (nothing on disk is touched), so every decision a session would have met can be
//! read and judged. Claude Code transcripts ([`transcript`]), Codex rollouts ([`codex`]), Gemini
//! CLI and Qwen Code chats ([`gemini`]), Copilot CLI session events ([`copilot`]) and OpenCode
//! exports ([`opencode`]) are read, each told from its content ([`format::inspect`]); each
//! becomes the hook payloads its CLI would have fired, in Claude Code's shape, judged with that
//! CLI's capabilities as its live hook is.
//!
//! Each event is judged at the transcript's own time (`Ctx::now_ms`). The Stop gate is judged too,
//! from the session's ledger alone: replay reads no worktree (the files a transcript touched are
//! not the files on this machine), so the engine gets [`LedgerOnly`], a worktree that never
//! changes, and a project directory nothing can be under: whether a turn changed anything is the
//! ledger's world state, nothing else. When loopgate would block a Stop, Claude Code would have let the model go on and then fired another Stop with
//! `stop_hook_active: true`; replay plays that second Stop at once (the transcript cannot show what
//! the model would have done in between) and then follows the transcript again.

pub mod codex;
pub mod copilot;
pub mod cost;
pub mod format;
pub mod gemini;
mod native;
pub mod opencode;
pub mod pricing;
pub mod spend;
pub mod transcript;

pub use format::Cli;

use crate::config::{Config, Mode};
use crate::judge::engine::{self, decision_name, Ctx};
use crate::judge::state::SessionState;
use crate::platform::git::Worktree;
use crate::protocol::payload::{Event, Payload};
use crate::protocol::verdict::{Action, Verdict};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;
use transcript::{ConvertedPayload, Kind};

/// Streams each already in time order, merged into one by their keys: each keeps its own order,
/// and on a tie the earlier stream goes first (the main session before its subagents).
pub(crate) fn merge_by_key<K: Ord + Copy, T>(streams: Vec<Vec<(K, T)>>) -> Vec<T> {
    let total = streams.iter().map(Vec::len).sum();
    let mut iters: Vec<_> = streams
        .into_iter()
        .map(|v| v.into_iter().peekable())
        .collect();
    let mut out = Vec::with_capacity(total);
    loop {
        let next = iters
            .iter_mut()
            .enumerate()
            .filter_map(|(i, it)| it.peek().map(|(k, _)| (*k, i)))
            .min();
        let Some((_, i)) = next else { break };
        if let Some((_, item)) = iters[i].next() {
            out.push(item);
        }
    }
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct Fired {
    /// The call's index in the session; for a Stop, the last call of the turn that ends; for a
    /// PostToolBatch, its first call.
    pub call: Option<usize>,
    /// PostToolBatch: its last call.
    pub call_last: Option<usize>,
    pub event: &'static str,
    pub tool: String,
    pub agent: String,
    pub detector: &'static str,
    pub decision: &'static str,
    pub severity: &'static str,
    pub reason: String,
    /// The Stop Claude Code would have fired after loopgate blocked the previous one.
    pub continuation: bool,
    /// The call's `tool_use` id, and the transcript's time of the event: where the loop is.
    #[serde(skip)]
    pub tool_use_id: Option<String>,
    #[serde(skip)]
    pub at_ms: u64,
}

impl Fired {
    pub fn is_block(&self) -> bool {
        self.decision != "warn"
    }

    pub fn is_turn_end(&self) -> bool {
        matches!(self.event, "Stop" | "SubagentStop")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionReport {
    pub file: String,
    /// The CLI that recorded the session.
    pub cli: Cli,
    /// Subagent transcripts replayed with this session.
    pub subagent_files: Vec<String>,
    pub session: String,
    /// Every tool call, subagents' included.
    pub calls: usize,
    pub subagent_calls: usize,
    /// Turn ends judged by the Stop gate (Stop and SubagentStop events, continuations included).
    pub stops: usize,
    pub fired: Vec<Fired>,
    /// What each loop cost, from the main transcript's token usage.
    pub loops: Vec<crate::replay::cost::LoopCost>,
    /// Lines of the session's files that could not be read (not JSON, or a record of no known
    /// shape): the rest of the file was replayed without them.
    pub skipped_lines: usize,
    /// What the loop budget would have done (the session's bound only: a replay has no day).
    pub budget: BudgetReplay,
}

/// The loop budget over a replayed session: its loop spend, and its warnings and pauses.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BudgetReplay {
    pub loop_usd: f64,
    pub loop_tokens: u64,
    /// Loop windows opened.
    pub loops: u32,
    pub would_warn: u32,
    pub would_pause: u32,
    /// Where the spend came from: `transcript`, `rollout` or `estimate`.
    pub source: &'static str,
}

/// Replays one transcript's text through the engine.
pub fn replay_text(text: &str, name: &str, config: &Config) -> SessionReport {
    replay_group(text, &[], name, config)
}

/// Replays a Claude Code session's main transcript (may be empty) with its subagents' transcripts.
pub fn replay_group(main: &str, subagents: &[&str], name: &str, config: &Config) -> SessionReport {
    replay_session(Cli::Claude, main, subagents, name, config)
}

/// A session file of `cli` (may be empty) with its subagents' files, as the hook payloads that
/// CLI would have fired.
pub fn convert(cli: Cli, main: &str, subagents: &[&str], name: &str) -> transcript::Converted {
    match cli {
        Cli::Claude => transcript::convert_group(main, subagents, name),
        Cli::Codex => codex::convert_group(main, subagents, name),
        Cli::Gemini | Cli::Qwen => {
            // A chat has no subagent files of its own: each is replayed as it is.
            let text = if main.trim().is_empty() {
                subagents.first().copied().unwrap_or("")
            } else {
                main
            };
            gemini::convert(cli, text, name)
        }
        Cli::Copilot => {
            let text = if main.trim().is_empty() {
                subagents.first().copied().unwrap_or("")
            } else {
                main
            };
            copilot::convert(text, name)
        }
        Cli::OpenCode => opencode::convert_group(main, subagents, name),
    }
}

/// Replays a session of `cli`: its main file (may be empty) with its subagents' files.
pub fn replay_session(
    cli: Cli,
    main: &str,
    subagents: &[&str],
    name: &str,
    config: &Config,
) -> SessionReport {
    let mut cfg = config.clone();
    cfg.mode = Mode::Observe;
    let conv = convert(cli, main, subagents, name);
    // Only Claude Code says whether a person is watching; for the others, as their live hooks,
    // it is unknown.
    let attended = (cli == Cli::Claude).then_some(false);
    let mut states: HashMap<String, SessionState> = HashMap::new();
    let (responses, source) = match cli {
        Cli::Claude => (spend::claude(main), "transcript"),
        Cli::Codex => (spend::codex(main), "rollout"),
        _ => (Vec::new(), "estimate"),
    };
    let mut budget = BudgetReplay {
        source,
        ..BudgetReplay::default()
    };
    let (fired, stops) = judge_all(&conv.payloads, |payload, event, now_ms| {
        let ctx = Ctx {
            config: &cfg,
            now_ms,
            project_dir: Some(Path::new(NO_PROJECT)),
            attended,
            worktree: &LedgerOnly,
            state_dir: None,
            caps: cli.caps(),
        };
        let state = states
            .entry(payload.session_id.clone())
            .or_insert_with(|| SessionState::new(&payload.session_id, now_ms));
        let verdicts = engine::handle(state, payload, event, &ctx);
        if cfg.budget.enabled {
            replay_budget(
                state,
                payload,
                event,
                &verdicts,
                &ctx,
                &responses,
                &mut budget,
            );
        }
        verdicts
    });
    // Token usage is read from Claude Code transcripts only.
    let loops = if cli == Cli::Claude {
        crate::replay::cost::read(main).loops(&decisions(&fired))
    } else {
        Vec::new()
    };
    SessionReport {
        file: name.to_string(),
        cli,
        subagent_files: Vec::new(),
        session: conv.sessions_id,
        calls: conv.calls,
        subagent_calls: conv
            .call_list
            .iter()
            .filter(|c| c.agent_id.is_some())
            .count(),
        loops,
        stops,
        fired,
        skipped_lines: conv.skipped_lines,
        budget,
    }
}

/// The loop budget's step of the live hook (`hook::budget`), on a replayed call: the same window,
/// the spend from the whole session file up to the call's time (or the estimate), the session's
/// bound. Its verdicts are counted, never added to what fired.
fn replay_budget(
    state: &mut SessionState,
    payload: &Payload,
    event: Event,
    verdicts: &[Verdict],
    ctx: &Ctx,
    responses: &[spend::Response],
    out: &mut BudgetReplay,
) {
    let cfg = &ctx.config.budget;
    if !crate::judge::budget::follows(event) {
        return;
    }
    let loops_before = state.budget.loops;
    if !crate::judge::budget::follow(state, &payload.agent_key(), verdicts, ctx.now_ms) {
        return;
    }
    out.loops += state.budget.loops - loops_before;
    if matches!(event, Event::PreToolUse | Event::Stop) {
        let b = &state.budget;
        let since = b.since_ms.unwrap_or(ctx.now_ms).max(b.counted_ms + 1);
        let s = if out.source == "estimate" {
            if event == Event::PreToolUse {
                spend::estimate(cfg, ctx.now_ms)
            } else {
                crate::judge::budget::Spend::default()
            }
        } else {
            spend::of(responses, since, ctx.now_ms, &cfg.prices)
        };
        out.loop_usd += s.usd;
        out.loop_tokens += s.tokens;
        crate::judge::budget::add(&mut state.budget, &s, None);
    }
    match crate::judge::budget::weigh(&mut state.budget, cfg, event, ctx.attended, ctx.caps, "")
        .map(|v| v.action)
    {
        Some(Action::Warn) => out.would_warn += 1,
        Some(_) => out.would_pause += 1,
        None => {}
    }
}

/// The decisions of a replay, as [`crate::replay::cost`] places them in the transcript.
fn decisions(fired: &[Fired]) -> Vec<crate::replay::cost::Decision> {
    fired
        .iter()
        .filter(|f| !f.continuation)
        .map(|f| crate::replay::cost::Decision {
            detector: f.detector.to_string(),
            tool_use_id: f.tool_use_id.clone(),
            at_ms: f.at_ms,
        })
        .collect()
}

/// The worktree of a replay: one that never changes, so the Stop gate and the circuit breaker
/// judge a turn by the ledger's world state (the content the session's own calls wrote) and by
/// nothing on this machine's disk.
pub struct LedgerOnly;

impl Worktree for LedgerOnly {
    fn stamp(&self, _dir: &Path) -> Option<String> {
        Some("replay: the ledger is the only worktree".to_string())
    }

    fn changed_since(&self, _dir: &Path, _stamp: &str) -> Option<bool> {
        Some(false)
    }
}

/// The project directory replay gives the engine: `/dev/null` is not a directory, so no file a
/// transcript names is under it and no detector reads this machine's files for it.
const NO_PROJECT: &str = "/dev/null/loopgate-replay";

/// Feeds every payload to `judge` (payload, event, the transcript's time in ms, never going back)
/// and plays the Stop Claude Code would fire after a blocked one. Returns what fired and how many
/// turn ends were judged.
fn judge_all(
    payloads: &[ConvertedPayload],
    mut judge: impl FnMut(&Payload, Event, u64) -> Vec<Verdict>,
) -> (Vec<Fired>, usize) {
    let mut fired = Vec::new();
    let mut stops = 0;
    let mut last_ms = 0u64;
    let mut play = |cp: &ConvertedPayload, json: &Value, continuation: bool| -> Option<bool> {
        let bytes = serde_json::to_vec(json).ok()?;
        // The same parser the hooks use: replay judges exactly what a hook would have read.
        let (payload, event) = Payload::parse(&bytes).ok()?;
        let at = cp
            .at
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_millis()).ok())
            .unwrap_or(last_ms)
            .max(last_ms);
        last_ms = at;
        let turn_end = matches!(event, Event::Stop | Event::SubagentStop);
        stops += usize::from(turn_end);
        let tool = match &payload.tool_calls {
            // A batch: the tools it ran, each once.
            Some(calls) if event == Event::PostToolBatch => {
                let mut names: Vec<&str> = Vec::new();
                for c in calls {
                    if !names.contains(&c.tool_name.as_str()) {
                        names.push(&c.tool_name);
                    }
                }
                names.join(",")
            }
            _ => payload.tool().to_string(),
        };
        let mut blocked = false;
        for v in judge(&payload, event, at) {
            blocked |= turn_end && matches!(v.action, Action::Deny | Action::Halt);
            fired.push(Fired {
                call: cp.call_index,
                call_last: cp.call_last,
                event: event.name(),
                tool: tool.clone(),
                agent: payload.agent().to_string(),
                detector: v.detector,
                decision: decision_name(event, v.action),
                severity: v.severity.name(),
                reason: v.reason,
                continuation,
                tool_use_id: payload.tool_use_id.clone(),
                at_ms: at,
            });
        }
        Some(blocked)
    };
    for cp in payloads {
        let Some(blocked) = play(cp, &cp.payload, false) else {
            continue;
        };
        if blocked && !cp.continued {
            // Claude Code would have let the model go on and asked again; what the model would
            // have done in between is not in the transcript, so only that Stop is played.
            let mut again = cp.payload.clone();
            again["stop_hook_active"] = Value::Bool(true);
            play(cp, &again, true);
        }
    }
    (fired, stops)
}

/// One file found: its path and the name it is reported under.
#[derive(Debug, Clone)]
pub struct Found {
    pub path: PathBuf,
    pub label: String,
    /// Why it cannot be read, known while looking (a directory that cannot be listed, a link
    /// to nothing): [`plan`] reports it as skipped.
    pub problem: Option<String>,
}

/// How deep `collect` looks into directories (`~/.claude/projects/<project>/<session>/subagents/`
/// is three levels).
const MAX_DEPTH: usize = 8;

/// The files named, and the `.jsonl` and `.json` files under the directories named (searched recursively,
/// without following symlinked directories; each directory's files in name order, then its
/// subdirectories). A path that does not exist is an error.
pub fn collect(paths: &[PathBuf]) -> std::io::Result<Vec<Found>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p)?;
        if meta.is_dir() {
            walk(p, p, 0, &mut out)?;
        } else {
            out.push(Found {
                path: p.clone(),
                label: p.display().to_string(),
                problem: None,
            });
        }
    }
    Ok(out)
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<Found>) -> std::io::Result<()> {
    let label = |path: &Path| {
        path.strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    let mut problem = |path: &Path, why: String| {
        out.push(Found {
            path: path.to_path_buf(),
            label: label(path),
            problem: Some(why),
        })
    };
    let mut entries = Vec::new();
    for e in std::fs::read_dir(dir)? {
        match e {
            Ok(e) => entries.push(e),
            Err(e) => problem(dir, format!("cannot list the whole directory: {e}")),
        }
    }
    entries.sort_by_key(|e| e.file_name());
    let mut subdirs = Vec::new();
    let mut files = Vec::new();
    for e in entries {
        let path = e.path();
        let ft = match e.file_type() {
            Ok(ft) => ft,
            Err(err) => {
                problem(&path, format!("cannot tell what it is: {err}"));
                continue;
            }
        };
        if ft.is_dir() {
            subdirs.push(path);
        } else if path
            .extension()
            .is_some_and(|x| x == "jsonl" || x == "json")
        {
            if path.is_file() {
                files.push(path);
            } else if ft.is_symlink() && std::fs::metadata(&path).is_err() {
                problem(&path, "a symbolic link to nothing".into());
            }
        }
    }
    for path in files {
        out.push(Found {
            label: label(&path),
            path,
            problem: None,
        });
    }
    for d in subdirs {
        // A directory that is not searched is named, like an unreadable file.
        let why = if depth >= MAX_DEPTH {
            format!("a directory more than {MAX_DEPTH} levels down: not searched")
        } else {
            match walk(root, &d, depth + 1, out) {
                Ok(()) => continue,
                Err(e) => format!("cannot list the directory: {e}"),
            }
        };
        out.push(Found {
            label: label(&d),
            path: d,
            problem: Some(why),
        });
    }
    Ok(())
}

/// A session to replay: its main transcript (absent when only subagent transcripts were found)
/// and its subagents' transcripts.
#[derive(Debug, Clone)]
pub struct Group {
    pub cli: Cli,
    pub main: Option<Found>,
    pub subagents: Vec<Found>,
}

impl Group {
    pub fn label(&self) -> &str {
        self.main
            .as_ref()
            .or(self.subagents.first())
            .map(|f| f.label.as_str())
            .unwrap_or("")
    }
}

/// Sorts files into sessions: a subagent's file joins the main file of the same CLI with the
/// same session id (Claude Code's `sessionId`, the parent thread of a Codex subagent rollout, the
/// parent session of an OpenCode child), or, with none at hand, the other subagent files of that
/// session. Files that are no session file come back with the reason.
pub fn plan(found: Vec<Found>, kind_of: impl Fn(&Path) -> Result<(Cli, Kind), String>) -> Plan {
    let mut groups: Vec<Group> = Vec::new();
    let mut main_of: HashMap<(Cli, String), usize> = HashMap::new();
    let mut orphans_of: HashMap<(Cli, String), usize> = HashMap::new();
    let mut pending: Vec<(Cli, Option<String>, Found)> = Vec::new();
    let mut skipped = Vec::new();
    for f in found {
        if let Some(why) = &f.problem {
            skipped.push((f.label, why.clone()));
            continue;
        }
        match kind_of(&f.path) {
            Err(why) => skipped.push((f.label, why)),
            Ok((_, Kind::NotTranscript)) => skipped.push((f.label, NOT_A_SESSION.to_string())),
            Ok((_, Kind::Unreadable(why))) => skipped.push((f.label, why)),
            Ok((cli, Kind::Session { session_id })) => {
                if let Some(s) = session_id {
                    main_of.entry((cli, s)).or_insert(groups.len());
                }
                groups.push(Group {
                    cli,
                    main: Some(f),
                    subagents: Vec::new(),
                });
            }
            Ok((cli, Kind::Subagent { session_id })) => pending.push((cli, session_id, f)),
        }
    }
    for (cli, session, f) in pending {
        let alone = Group {
            cli,
            main: None,
            subagents: Vec::new(),
        };
        let target = match session {
            Some(s) => {
                let k = (cli, s);
                match main_of.get(&k).or(orphans_of.get(&k)) {
                    Some(&i) => i,
                    None => {
                        orphans_of.insert(k, groups.len());
                        groups.push(alone);
                        groups.len() - 1
                    }
                }
            }
            None => {
                groups.push(alone);
                groups.len() - 1
            }
        };
        groups[target].subagents.push(f);
    }
    Plan { groups, skipped }
}

/// Why a file is not replayed.
pub const NOT_A_SESSION: &str = "not a session file of Claude Code, Codex, Gemini CLI, Qwen Code, \
    Copilot CLI or OpenCode";

#[derive(Debug, Default)]
pub struct Plan {
    pub groups: Vec<Group>,
    /// (file, why it is not replayed)
    pub skipped: Vec<(String, String)>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::verdict::Severity;
    use serde_json::json;

    fn stop(continued: bool, ms: u64) -> ConvertedPayload {
        ConvertedPayload {
            event: "Stop",
            payload: json!({"session_id": "s", "hook_event_name": "Stop", "prompt_id": "p",
                            "stop_hook_active": false, "last_assistant_message": "done"}),
            at: Some(UNIX_EPOCH + std::time::Duration::from_millis(ms)),
            call_index: Some(7),
            call_last: None,
            continued,
        }
    }

    /// A judge that blocks every Stop, recording what it was shown.
    fn blocking(
        seen: &mut Vec<(bool, u64)>,
    ) -> impl FnMut(&Payload, Event, u64) -> Vec<Verdict> + '_ {
        move |p, _, ms| {
            seen.push((p.stop_hook_active == Some(true), ms));
            vec![Verdict::new(
                "progress_gate",
                Action::Deny,
                Severity::Medium,
                "no".into(),
            )]
        }
    }

    #[test]
    fn a_blocked_stop_is_asked_again_once() {
        let mut seen = Vec::new();
        let (fired, stops) = judge_all(&[stop(false, 5_000)], blocking(&mut seen));
        assert_eq!(seen, [(false, 5_000), (true, 5_000)]);
        assert_eq!(stops, 2);
        assert_eq!(fired.len(), 2);
        assert!(fired.iter().all(|f| f.is_block() && f.call == Some(7)));
        assert!(!fired[0].continuation && fired[1].continuation);
        // The transcript already shows the turn going on after this Stop: it plays that instead.
        let mut seen = Vec::new();
        let (fired, stops) = judge_all(&[stop(true, 5_000)], blocking(&mut seen));
        assert_eq!((fired.len(), stops), (1, 1));
    }

    #[test]
    fn the_clock_never_goes_back() {
        let mut seen = Vec::new();
        let payloads = [stop(true, 9_000), stop(true, 4_000)];
        judge_all(&payloads, blocking(&mut seen));
        assert_eq!(seen, [(false, 9_000), (false, 9_000)]);
    }

    fn found(label: &str) -> Found {
        Found {
            path: PathBuf::from(label),
            label: label.to_string(),
            problem: None,
        }
    }

    #[test]
    fn subagent_transcripts_join_their_session() {
        let files = [
            "a.jsonl",
            "a/subagents/agent-1.jsonl",
            "b/subagents/agent-2.jsonl",
            "b/subagents/agent-3.jsonl",
            "notes.jsonl",
        ];
        let p = plan(files.iter().map(|f| found(f)).collect(), |p| {
            let s = p.to_string_lossy();
            let session = |id: &str| Some(id.to_string());
            let kind = match s.as_ref() {
                "a.jsonl" => Kind::Session {
                    session_id: session("A"),
                },
                "a/subagents/agent-1.jsonl" => Kind::Subagent {
                    session_id: session("A"),
                },
                "notes.jsonl" => Kind::NotTranscript,
                _ => Kind::Subagent {
                    session_id: session("B"),
                },
            };
            Ok((Cli::Claude, kind))
        });
        assert_eq!(p.groups.len(), 2);
        assert_eq!(p.groups[0].label(), "a.jsonl");
        assert_eq!(p.groups[0].subagents.len(), 1);
        assert!(p.groups[1].main.is_none());
        assert_eq!(p.groups[1].label(), "b/subagents/agent-2.jsonl");
        assert_eq!(p.groups[1].subagents.len(), 2);
        assert_eq!(p.skipped.len(), 1);
        assert_eq!(p.skipped[0].0, "notes.jsonl");
    }
}
