//! One hook call, end to end: read stdin, load config and the locked session state, run the
//! engine, save, log, answer. Every failure on the way fails open (exit 1, one stderr line).

use crate::cli::Cli;
use crate::config::{self, Mode};
use crate::judge::engine::{self, Ctx};
use crate::judge::state::SessionState;
use crate::platform::git::Git;
use crate::protocol::dialect::{Agent, Read};
use crate::protocol::exit::Exit;
use crate::protocol::payload::MAIN_AGENT;
use crate::protocol::payload::{clip, Event, Payload};
use crate::protocol::verdict::{strongest, Action};
use crate::store::events;
use crate::store::outer_loop;
use crate::store::{Held, Store};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Stdin larger than this is not a hook payload we can judge in time.
const MAX_INPUT: u64 = 64 << 20;

use crate::config::MAX_LOCK_WAIT_MS;

/// How long a call waits for the session lock or the event log's: the config's, capped.
fn lock_wait(cfg: &config::Config) -> Duration {
    Duration::from_millis(cfg.lock_timeout_ms.min(MAX_LOCK_WAIT_MS))
}

pub fn run(cli: &Cli, expected: Event) -> Exit {
    if let Some(agent) = cli.agent {
        crate::protocol::exit::fail_open_with(agent.fail_open_code());
    }
    // Streamed and compacted: a tool result of tens of megabytes is hashed, never held.
    let read = {
        use crate::protocol::payload::compact::{read_compact_with, stdin_ready, STDIN_DEADLINE};
        let deadline = std::time::Instant::now() + STDIN_DEADLINE;
        read_compact_with(std::io::stdin().lock(), MAX_INPUT, || stdin_ready(deadline))
    };
    if crate::config::sources::env_flag("LOOPGATE_DISABLE") == Ok(true) {
        return Exit::Ok;
    }
    let result = read.and_then(|input| process(cli, expected, &input));
    match result {
        Ok(done) => {
            if !done.problems.is_empty() {
                say(&done.problems.join("; "));
            }
            if let Some(out) = done.stdout {
                let mut so = std::io::stdout().lock();
                if let Err(e) = so.write_all(out.as_bytes()).and_then(|_| so.flush()) {
                    if done.problems.is_empty() {
                        say(&format!("cannot write the answer to stdout: {e}"));
                    }
                    return Exit::FailOpen;
                }
            }
            done.exit
        }
        Err(e) => {
            say(&format!("{e:#}"));
            Exit::FailOpen
        }
    }
}

struct Done {
    stdout: Option<String>,
    problems: Vec<String>,
    exit: Exit,
}

impl Done {
    /// Nothing to answer, nothing to say.
    fn silent() -> Done {
        Done {
            stdout: None,
            problems: Vec::new(),
            exit: Exit::Ok,
        }
    }
}

fn process(cli: &Cli, expected: Event, input: &[u8]) -> Result<Done> {
    let read = crate::protocol::dialect::read(cli.agent, expected, input)?;
    // A detected CLI's failures from here on exit as that CLI needs.
    crate::protocol::exit::fail_open_with(read.agent().fail_open_code());
    let (agent, payload, event) = match read {
        Read::Judge {
            agent,
            payload,
            event,
        } => (agent, *payload, event),
        Read::Skip(_) => {
            return Ok(Done {
                stdout: None,
                problems: Vec::new(),
                exit: Exit::Ok,
            })
        }
    };
    let project_dir = agent.project_dir();
    let loaded = config::sources::load(&config::Sources::from_process(
        cli.config.as_deref(),
        cli.observe,
        project_dir.as_deref(),
    ));
    if event == Event::SessionStart {
        if agent != Agent::Claude {
            // Setup wires no SessionStart for the other CLIs; one wired by hand leaves the
            // session's files to its first judged call, which then checks the wiring.
            return Ok(Done::silent());
        }
        let mut done = session_start(cli, &payload.session_id, &loaded.config)?;
        if agent == Agent::Claude {
            done.stdout =
                crate::defence::wiring::watch_answer(&watched(cli, project_dir.as_deref()));
        }
        return Ok(done);
    }
    if event == Event::ConfigChange {
        return config_change(cli, &payload, project_dir.as_deref(), &loaded.config);
    }
    if event == Event::FileChanged {
        return file_changed(cli, &payload, project_dir.as_deref(), &loaded.config);
    }
    let config_problems = loaded.problems.clone();
    let mut problems = loaded.problems;
    let cfg = loaded.config;
    // Things the human must hear about (tamper, a lost state): a `systemMessage` and a log line,
    // while the call itself is still judged.
    let mut notices: Vec<String> = Vec::new();
    let now_ms = crate::platform::clock::now_ms();
    // No usable store does not stop the judgement: the guard and the detectors answer on a fresh
    // in-memory state (and the person is told).
    let store = open_store(cli, &mut notices);
    let held = store.as_ref().and_then(|s| {
        match s.lock_or_busy(&Store::stem(&payload.session_id), lock_wait(&cfg)) {
            Ok(h) => Some(h),
            Err(e) => {
                notices.push(format!(
                    "{e:#}; this call was judged on a read-only copy of the session state and \
                     not recorded"
                ));
                None
            }
        }
    });
    let (lock, busy) = match &held {
        Some(Held::Locked(l)) => (Some(l), None),
        Some(Held::Busy(b)) => (None, Some(b)),
        None => (None, None),
    };
    if let Some(q) = lock.and_then(|l| l.healed.as_ref()) {
        notices.push(format!(
            "the session's lock file was {} and has been moved to {}; a fresh one was made",
            q.why,
            q.path.display()
        ));
    }
    let mut unreadable = false;
    let (loaded_state, quarantined) = match (&store, lock) {
        (Some(s), Some(l)) => s.load(l).unwrap_or_else(|e| {
            // What could not be read or moved aside is not written over either.
            notices.push(format!(
                "{e:#}; this call was judged on a fresh state and not recorded"
            ));
            unreadable = true;
            (None, None)
        }),
        (Some(s), None) => (Store::peek(&s.state_path(&payload.session_id)), None),
        (None, _) => (None, None),
    };
    if let Some(l) = lock {
        // What FileChanged noticed since the last call (its own answer is shown nowhere).
        notices.extend(crate::defence::wiring::take_pending(l.state_path()));
    }
    // A session's first call: did an agent change the CLI's hook files? (never on later calls)
    let rewired = lock
        .filter(|l| !l.session_known())
        .and_then(|_| crate::defence::wiring_check::session_notice(agent, project_dir.as_deref()));
    if let Some(q) = &quarantined {
        notices.push(format!(
            "session state was unusable ({}) and has been moved to {}; loop counts start again \
             from zero",
            q.why,
            q.path.display()
        ));
    }
    let fresh = || SessionState::new(&payload.session_id, now_ms);
    let mut state = match loaded_state {
        Some(s) if s.session != clip(&payload.session_id, 128) => {
            notices.push(
                "the session's state file was replaced by another session's state; it is \
                 ignored and loop counts start again from zero"
                    .into(),
            );
            fresh()
        }
        Some(s) => s,
        None => {
            if quarantined.is_none() && lock.is_some_and(|l| l.session_known()) {
                notices.push(
                    "the session's state file vanished since the last call (deleted by a tool?); \
                     loop counts start again from zero"
                        .into(),
                );
            }
            fresh()
        }
    };
    if lock.is_some() {
        notices.extend(config_loosened(&mut state, &cfg, cli.observe));
    }
    // Only Claude Code says whether a person is watching; for the others it is unknown.
    let attended = (agent == Agent::Claude)
        .then(|| std::env::var("CLAUDE_CODE_SESSION_ATTENDED").ok())
        .flatten()
        .map(|v| v.trim() != "0");
    // The guard protects the configured state dir even when it could not be used.
    let protected_dir = store
        .as_ref()
        .map(|s| s.dir().to_path_buf())
        .or_else(|| state_dir(cli).ok());
    let ctx_at = |now_ms| Ctx {
        config: &cfg,
        now_ms,
        project_dir: project_dir.as_deref(),
        attended,
        worktree: &Git,
        state_dir: protected_dir.as_deref(),
        caps: agent.caps(),
    };
    let ctx = ctx_at(now_ms);
    // Calls judged while the lock was held elsewhere: replayed before this one is judged, so
    // detection goes on counting however long the lock is held.
    let journal_path = lock
        .filter(|l| l.journal_pending())
        .map(|l| l.journal_path())
        .or_else(|| busy.map(|b| b.journal_path()));
    let pending =
        journal_path.and_then(|p| match crate::store::journal::read(&p, lock.is_some()) {
            Ok(j) => j,
            Err(e) => {
                notices.push(format!("cannot read the journal {}: {e}", p.display()));
                None
            }
        });
    if let Some(j) = &pending {
        replay(&mut state, &j.records, &payload.session_id, &ctx_at);
    }
    // A session's first prompt: is an outer loop going round the project? (the one place the
    // project's record is read; never on a tool call)
    let first_prompt =
        event == Event::UserPromptSubmit && payload.agent() == MAIN_AGENT && state.turn.number == 0;
    let outer = project_dir
        .as_deref()
        .zip(store.as_ref())
        .filter(|_| first_prompt)
        .and_then(|(dir, s)| outer_loop_check(s.dir(), dir, &payload, attended));
    let mut verdicts = match outer {
        Some(v) if v.action >= Action::Deny => vec![v],
        told => {
            let mut all = engine::handle(&mut state, &payload, event, &ctx);
            all.extend(told);
            all
        }
    };
    if event == Event::Stop
        && payload.agent() == MAIN_AGENT
        && state.turn.number == 1
        && verdicts.iter().all(|v| v.action < Action::Deny)
    {
        if let Some((dir, s)) = project_dir.as_deref().zip(store.as_ref()) {
            if let Err(e) = outer_loop_note(s.dir(), dir, &state, now_ms) {
                problems.push(format!(
                    "cannot note the session in the project's record: {e}"
                ));
            }
        }
    }
    verdicts
        .iter_mut()
        .for_each(crate::judge::redact::mask_verdict);
    if let (Some(s), Some(l)) = (&store, lock.filter(|_| !unreadable)) {
        match s.save(l, &state) {
            Ok(()) => match pending {
                Some(j) => merged(s.dir(), l, j, &payload.session_id, &mut notices),
                // A mark with no journal behind it (deleted, or a length someone wrote).
                None if l.journal_pending() => l.mark_journal_pending(false),
                None => {}
            },
            Err(e) => notices.push(format!(
                "{e:#}; this call was judged but not recorded (the saved state is kept as it was)"
            )),
        }
    }
    if let (Some(s), Some(b)) = (&store, busy) {
        journal_call(
            s.dir(),
            b,
            cli,
            expected,
            input,
            now_ms,
            &payload,
            &mut notices,
        );
    }
    // The OS frees memory at exit: dropping a large state is work nobody needs.
    std::mem::forget(state);
    let enforced = cfg.mode == Mode::Enforce;
    let meta = events::Meta {
        payload: &payload,
        event,
        now_ms,
        enforced,
        preview: cfg.log.preview.then(|| preview(&payload)).flatten(),
        config: Some(&cfg),
    };
    let mut lines: Vec<_> = verdicts.iter().map(|v| events::line(&meta, v)).collect();
    lines.extend(notices.iter().map(|n| notice_line(&meta, n)));
    if let Some(n) = &rewired {
        let mut line = notice_line(&meta, n);
        line["detector"] = "guard".into();
        lines.push(line);
    }
    notices.extend(rewired);
    if let Some(s) = &store {
        if let Err(e) = events::append(s.dir(), &lines, &cfg.log, lock_wait(&cfg)) {
            problems.push(format!("{e:#}"));
        }
    }
    let notify = !config_problems.is_empty()
        && store.as_ref().is_none_or(|s| {
            crate::store::notice::first_time(
                s.dir(),
                &payload.session_id,
                &config_problems.join("\n"),
            )
        });
    // Files only pile up as sessions start, so a session's first call is when housekeeping
    // looks at its stamp; the calls after it skip even that `stat`.
    let first_call = lock.is_some_and(|l| !l.session_known());
    drop(held);
    if let Some(s) = store.as_ref().filter(|_| first_call) {
        crate::store::gc::maybe_sweep(s.dir(), &cfg.housekeeping);
    }
    let answer = if enforced {
        strongest(&verdicts)
            .and_then(|v| crate::protocol::dialect::answer(agent, event, expected, v))
    } else {
        None
    };
    let mut stdout = with_notices(answer, &notices);
    if !notices.is_empty() {
        // Also on stderr, for logs that keep it; exit 0 keeps the answer (and the notice) valid.
        problems.extend(notices);
    }
    if notify {
        let message = crate::store::notice::config_message(&config_problems);
        stdout = Some(crate::store::notice::with_system_message(stdout, &message));
    }
    Ok(Done {
        stdout,
        problems,
        exit: Exit::Ok,
    })
}

/// The configuration loosened since the session began, or since the person was last told: a
/// config file made or edited mid-session (one FileChanged may not see) that raises a threshold,
/// switches a detector or the guard off, or exempts a command. Told once; the new configuration
/// is the baseline from then on. A first call only takes the baseline.
fn config_loosened(
    state: &mut SessionState,
    cfg: &config::Config,
    flag_observe: bool,
) -> Option<String> {
    // The common case, the same configuration again, costs one encoding and a comparison.
    let now = postcard::to_allocvec(cfg).ok()?;
    if state.heed.config == now {
        return None;
    }
    let old = postcard::from_bytes::<config::Config>(&state.heed.config).ok();
    // `--observe` on the command line is how the hooks were wired (ConfigChange and the
    // first-call check judge that), not a configuration that changed: the mode stays the one
    // the baseline has.
    let (now, cfg) = match &old {
        Some(o) if flag_observe && o.mode != cfg.mode => {
            let kept = config::Config {
                mode: o.mode,
                ..cfg.clone()
            };
            (
                postcard::to_allocvec(&kept).ok()?,
                std::borrow::Cow::Owned(kept),
            )
        }
        _ => (now, std::borrow::Cow::Borrowed(cfg)),
    };
    if state.heed.config == now {
        return None;
    }
    state.heed.config = now;
    let changes = crate::config::tighten::loosened(&old?, &cfg);
    (!changes.is_empty()).then(|| {
        format!(
            "loopgate's configuration was loosened during this session: {}. If you did not \
             change it, `loopgate config` shows which file each value comes from.",
            changes.join(", ")
        )
    })
}

/// The configured state dir (repaired if an agent broke it, see [`Store::open_healing`]), or the private
/// per-user fallback (with a notice) when it cannot be used, or none: then the call is judged on
/// a fresh in-memory state and the person is told. Repairs are told once (they do not recur).
fn open_store(cli: &Cli, notices: &mut Vec<String>) -> Option<Store> {
    let opened = state_dir(cli).and_then(|dir| Store::open_healing(&dir));
    let (mut store, e) = match opened {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(e)),
    };
    if let Some(e) = e {
        let configured = state_dir(cli).ok();
        match open_fallback(configured.as_deref()) {
            Ok(s) => {
                notices.push(format!(
                    "the state dir is unusable ({e:#}); using the private fallback {} until it \
                     is repaired",
                    s.dir().display()
                ));
                store = Some(s);
            }
            Err(f) => notices.push(format!(
                "the state dir is unusable ({e:#}) and so is every private fallback ({f:#}); \
                 this call was judged on a fresh in-memory state and not recorded"
            )),
        }
    }
    if let Some(s) = store.as_mut() {
        notices.extend(
            s.take_healed()
                .into_iter()
                .map(|h| format!("the state dir was repaired: {h}")),
        );
    }
    store
}

/// The private fallback, repaired like the state dir; when an agent (or another user) poisoned it
/// beyond repair, the next of a few fixed alternatives beside it, so the state still persists
/// from call to call.
fn open_fallback(configured: Option<&std::path::Path>) -> Result<Store> {
    let base = Store::fallback_dir().context("no private fallback dir on this system")?;
    let mut last = None;
    for n in 1..=FALLBACKS {
        let dir = match n {
            1 => base.clone(),
            n => {
                let mut name = base.file_name().unwrap_or_default().to_os_string();
                name.push(format!(".{n}"));
                base.with_file_name(name)
            }
        };
        if Some(dir.as_path()) == configured {
            continue;
        }
        match Store::open_fallback(&dir) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no fallback dir")))
}

/// How many private fallback dirs are tried (`loopgate-<uid>`, then `.2`, `.3`).
const FALLBACKS: usize = 3;

/// Replays journaled calls into `state`, in order; their verdicts were given when they were
/// judged and are not given again.
fn replay<'a>(
    state: &mut SessionState,
    records: &[crate::store::journal::Record],
    session_id: &str,
    ctx_at: &dyn Fn(u64) -> Ctx<'a>,
) {
    for r in records {
        let (Some(agent), Some(expected)) = (r.agent(), r.expected()) else {
            continue;
        };
        let Ok(bytes) = serde_json::to_vec(&r.input) else {
            continue;
        };
        let Ok(Read::Judge { payload, event, .. }) =
            crate::protocol::dialect::read(agent, expected, &bytes)
        else {
            continue;
        };
        if payload.session_id != session_id
            || matches!(event, Event::SessionStart | Event::ConfigChange)
        {
            continue;
        }
        let _ = engine::handle(state, &payload, event, &ctx_at(r.ms));
    }
}

/// The session notice key for "the lock is held elsewhere", told once per hold.
fn busy_notice_key(session_id: &str) -> String {
    format!("{session_id}\0lock-busy")
}

/// The journal's records are in the saved state: empty it, clear the mark, and let a later hold
/// be told again.
fn merged(
    dir: &std::path::Path,
    lock: &crate::store::SessionLock,
    journal: crate::store::journal::Pending,
    session_id: &str,
    notices: &mut Vec<String>,
) {
    let n = journal.records.len();
    // Cleared while appenders still wait for the journal's lock: one that appends after it is
    // released marks the file again, so its record is not left behind unmarked.
    lock.mark_journal_pending(false);
    match journal.finish() {
        Ok(true) => {}
        Ok(false) => lock.mark_journal_pending(true),
        Err(e) => {
            lock.mark_journal_pending(true);
            notices.push(format!("cannot empty the session's journal: {e}"));
        }
    }
    crate::store::notice::forget(dir, &busy_notice_key(session_id));
    notices.push(format!(
        "the session lock is free again; {n} call{} judged while it was held {} merged into the \
         session state",
        if n == 1 { "" } else { "s" },
        if n == 1 { "was" } else { "were" }
    ));
}

/// The lock is held elsewhere: this call goes to the journal, so the next call counts it.
#[allow(clippy::too_many_arguments)]
fn journal_call(
    dir: &std::path::Path,
    busy: &crate::store::Busy,
    cli: &Cli,
    expected: Event,
    input: &[u8],
    now_ms: u64,
    payload: &Payload,
    notices: &mut Vec<String>,
) {
    let path = busy.journal_path();
    let recorded = crate::store::journal::line(input, cli.agent, expected, now_ms)
        .map(|line| crate::store::journal::append(&path, &line));
    busy.mark_journal();
    let text = match recorded {
        Some(Ok(crate::store::journal::Appended::Recorded)) => {
            "the session state is locked by another process; calls are judged on \
                           the saved state plus a journal of the calls since, and recorded in that \
                           journal until the lock is free (holding the lock cannot switch \
                           loopgate off)"
                .to_string()
        }
        Some(Ok(crate::store::journal::Appended::DroppedOlder)) => {
            "the session state is locked by \
                another process and its journal filled up: its older calls were dropped, the \
                latest ones are still recorded and counted"
                .to_string()
        }
        None => "the session state is locked by another process; this call could not be \
                 journaled and is judged but not recorded"
            .to_string(),
        Some(Err(e)) => format!(
            "the session state is locked by another process and its journal {} cannot be \
             written ({e}): this call was judged but not recorded",
            path.display()
        ),
    };
    if crate::store::notice::first_time(dir, &busy_notice_key(&payload.session_id), &text) {
        notices.push(text);
    }
}

/// SessionStart makes a new session's lock and state files, so that its first prompt creates none:
/// a file creation costs milliseconds on some filesystems (NFS, a journal-less ext4 after
/// deletions), while a session's start is not waited on. Anything else (a resumed session, a state
/// to move aside, a busy lock, a config problem) is left to the session's next event, which judges
/// and reports it. It answers nothing of its own, since plain stdout would reach the model
/// (observed); for Claude Code the caller answers the paths to watch, which does not.
fn session_start(cli: &Cli, session_id: &str, cfg: &config::Config) -> Result<Done> {
    // Anything amiss is left to the session's next event, which judges and tells.
    let Some(store) = open_store(cli, &mut Vec::new()) else {
        return Ok(Done::silent());
    };
    let Ok(lock) = store.lock(session_id, lock_wait(cfg)) else {
        return Ok(Done::silent());
    };
    if lock.session_is_new() && lock.healed.is_none() {
        if store
            .save(
                &lock,
                &SessionState::new(session_id, crate::platform::clock::now_ms()),
            )
            .is_err()
        {
            return Ok(Done::silent());
        }
        drop(lock);
        crate::store::gc::maybe_sweep(store.dir(), &cfg.housekeeping);
    }
    Ok(Done::silent())
}

/// git's HEAD as the project record keeps it (empty outside git).
fn head_of(project: &std::path::Path) -> String {
    crate::platform::git::Stamp::take(project)
        .map(|s| crate::util::canon::hex16(&s.head))
        .unwrap_or_default()
}

fn outer_loop_check(
    state_dir: &std::path::Path,
    project: &std::path::Path,
    payload: &Payload,
    attended: Option<bool>,
) -> Option<crate::protocol::verdict::Verdict> {
    let file = outer_loop::path(state_dir, project);
    let rec = outer_loop::read(&file);
    if rec.sessions.is_empty() {
        return None;
    }
    let prompt = engine::prompt_digest(payload)?;
    outer_loop::check(
        &rec,
        &clip(&payload.session_id, 128),
        &crate::util::canon::hex16(&prompt.0),
        &head_of(project),
        attended,
        &file,
    )
}

/// A session's first turn, noted in the project's record when it ends.
fn outer_loop_note(
    state_dir: &std::path::Path,
    project: &std::path::Path,
    state: &SessionState,
    now_ms: u64,
) -> std::io::Result<()> {
    let Some(prompt) = state.turn.prompt else {
        return Ok(());
    };
    let sig = outer_loop::SessionSig {
        session: state.session.clone(),
        prompt: crate::util::canon::hex16(&prompt.0),
        signature: crate::util::canon::hex16(&engine::turn_signature(state).0),
        head: head_of(project),
        progress: engine::turn_progress(state),
        at_ms: now_ms,
    };
    outer_loop::note(&outer_loop::path(state_dir, project), sig)
}

/// An event-log line for a notice (not a verdict: nothing was denied for it).
fn notice_line(m: &events::Meta, notice: &str) -> serde_json::Value {
    serde_json::json!({
        "ts": crate::platform::clock::rfc3339(m.now_ms),
        "session": clip(&m.payload.session_id, 128),
        "agent": m.payload.agent_key(),
        "prompt_id": m.payload.prompt_id,
        "event": m.event.name(),
        "tool": m.payload.tool_name,
        "detector": "state_store",
        "loop_type": "other",
        "decision": "notice",
        "enforced": m.enforced,
        "severity": "high",
        "reason": format!("loopgate: {notice}"),
    })
}

/// Adds the notices to the answer's `systemMessage` (the human sees it, the model does not), or
/// answers with only a `systemMessage` when there was nothing else to say.
fn with_notices(answer: Option<String>, notices: &[String]) -> Option<String> {
    if notices.is_empty() {
        return answer;
    }
    let text = format!("loopgate: {}", notices.join("; "));
    let mut v = answer
        .and_then(|a| serde_json::from_str::<serde_json::Value>(&a).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    let msg = match v.get("systemMessage").and_then(|m| m.as_str()) {
        Some(m) => format!("{m} | {text}"),
        None => text,
    };
    v["systemMessage"] = serde_json::Value::String(msg);
    Some(v.to_string())
}

fn preview(p: &Payload) -> Option<String> {
    p.tool_input
        .as_ref()
        .map(|i| crate::judge::redact::target(p.tool(), i))
}

pub fn state_dir(cli: &Cli) -> Result<PathBuf> {
    cli.state_dir
        .clone()
        .or_else(|| {
            std::env::var_os("LOOPGATE_STATE_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .or_else(crate::config::paths::state_dir)
        .context(crate::config::paths::NO_HOME)
}

/// Claude Code shows the hook's stderr to the user: keep it to one line per problem. A stderr that
/// cannot be written (closed, `/dev/full`) is ignored: there is nobody left to tell.
pub fn say(msg: &str) {
    let line = format!("loopgate: {}\n", clip(&msg.replace('\n', " "), 400));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The files a Claude Code session watches for FileChanged: the hooks' binary and loopgate's
/// config files (see [`crate::defence::wiring::watch_paths`]).
fn watched(cli: &Cli, project: Option<&std::path::Path>) -> Vec<std::path::PathBuf> {
    crate::defence::wiring::watch_paths(
        std::env::current_exe().ok().as_deref(),
        &config_files(cli, project),
    )
}

fn config_files(cli: &Cli, project: Option<&std::path::Path>) -> Vec<std::path::PathBuf> {
    cli.config
        .clone()
        .into_iter()
        .chain(config::user_config_file())
        .chain(project.map(config::project_config_file))
        .collect()
}

/// FileChanged: a watched file changed. It cannot block and its answer is shown nowhere
/// (observed), so what the person must hear is logged, said on stderr, and kept for the
/// session's next hook call to show.
fn file_changed(
    cli: &Cli,
    payload: &Payload,
    project_dir: Option<&std::path::Path>,
    cfg: &config::Config,
) -> Result<Done> {
    let (Some(changed), Some(exe)) = (
        payload.file_path.as_deref().filter(|f| !f.is_empty()),
        std::env::current_exe().ok(),
    ) else {
        return Ok(Done::silent());
    };
    let project = project_dir
        .map(std::path::Path::to_path_buf)
        .or_else(|| payload.cwd.as_deref().map(std::path::PathBuf::from));
    let mode_now = || {
        let mut off = Vec::new();
        if cfg.mode == Mode::Observe {
            off.push("puts loopgate in observe mode (it denies nothing)");
        }
        if !cfg.guard.enabled {
            off.push("switches the tamper guard off");
        }
        (!off.is_empty()).then(|| off.join(" and "))
    };
    let Some(message) = crate::defence::wiring::file_changed(
        std::path::Path::new(changed),
        payload.file_event.as_deref().unwrap_or("change"),
        Some(&exe),
        &config_files(cli, project.as_deref()),
        mode_now,
    ) else {
        return Ok(Done::silent());
    };
    let message = crate::judge::redact::mask(&message);
    let mut notices = Vec::new();
    if let Some(store) = open_store(cli, &mut notices) {
        let _ =
            crate::defence::wiring::keep_pending(&store.state_path(&payload.session_id), &message);
        let line = settings_event_line(
            payload,
            ("FileChanged", "notice", cfg.mode == Mode::Enforce),
            &format!("loopgate: {message}"),
            serde_json::json!({"file_path": clip(changed, 256), "change": payload.file_event.as_deref().map(|e| clip(e, 16))}),
        );
        let _ = events::append(store.dir(), &[line], &cfg.log, lock_wait(cfg));
    }
    Ok(Done {
        stdout: None,
        problems: vec![message],
        exit: Exit::Ok,
    })
}

/// ConfigChange: a settings file changed on disk. When the settings now switch loopgate off
/// (hooks unwired, all hooks disabled, loopgate's environment overridden), the files are put
/// right and the change is blocked, so the hooks Claude Code has loaded keep running and the next
/// reload finds loopgate wired again; the person is told, on screen and in the log. See
/// [`crate::defence::wiring`].
fn config_change(
    cli: &Cli,
    payload: &Payload,
    project_dir: Option<&std::path::Path>,
    cfg: &config::Config,
) -> Result<Done> {
    let Some(changed) = payload.file_path.as_deref().filter(|f| !f.is_empty()) else {
        return Ok(Done::silent());
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from);
    let project = project_dir
        .map(std::path::Path::to_path_buf)
        .or_else(|| payload.cwd.as_deref().map(std::path::PathBuf::from));
    let files = crate::defence::wiring::settings_files(home.as_deref(), project.as_deref());
    // A plugin's hooks live in the plugin, not in the settings: there is no wiring to restore.
    let prefix = match std::env::var_os("CLAUDE_PLUGIN_ROOT") {
        Some(_) => None,
        None => {
            let exe = std::env::current_exe().context("cannot find loopgate's own binary")?;
            Some(crate::setup::command_prefix(&exe, cli.observe)?)
        }
    };
    let mut notices = Vec::new();
    let store = open_store(cli, &mut notices);
    let Some(undone) = crate::defence::wiring::check_change(
        std::path::Path::new(changed),
        &files,
        prefix.as_deref(),
        store.as_ref().map(Store::dir),
    ) else {
        return Ok(Done::silent());
    };
    let message = crate::judge::redact::mask(&undone.message());
    if let Some(store) = &store {
        let line = settings_event_line(
            payload,
            ("ConfigChange", "deny", true),
            &message,
            serde_json::json!({"file_path": clip(changed, 256)}),
        );
        let _ = events::append(store.dir(), &[line], &cfg.log, lock_wait(cfg));
    }
    Ok(Done {
        stdout: Some(
            serde_json::json!({
                "decision": "block",
                "reason": message,
                "systemMessage": message,
            })
            .to_string(),
        ),
        problems: Vec::new(),
        exit: Exit::Ok,
    })
}

/// The event-log line of a guard decision on a settings or watched file (ConfigChange,
/// FileChanged): `(event, decision, enforced)`, the reason shown, and what changed.
fn settings_event_line(
    payload: &Payload,
    (event, decision, enforced): (&str, &str, bool),
    reason: &str,
    evidence: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "ts": crate::platform::clock::rfc3339(crate::platform::clock::now_ms()),
        "session": clip(&payload.session_id, 128),
        "event": event,
        "detector": "guard",
        "decision": decision,
        "enforced": enforced,
        "severity": "high",
        "reason": reason,
        "evidence": evidence,
    })
}
