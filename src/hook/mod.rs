//! One hook call, end to end, as its steps: read the input, load the configuration, open the
//! locked session, judge, save, log, answer. Every failure on the way fails open (exit 1, one
//! stderr line). The events about the CLI's own settings (SessionStart, ConfigChange,
//! FileChanged) are answered apart, in [`settings`].

mod answer;
mod budget;
mod expansion;
mod forgotten;
mod journaled;
pub(crate) mod notify;
mod outer;
mod recount;
mod session;
mod settings;

use crate::cli::Cli;
use crate::config;
use crate::judge::engine::{self, Ctx};
use crate::judge::state::SessionState;
use crate::platform::git::Git;
use crate::protocol::dialect::{Agent, Read};
use crate::protocol::exit::Exit;
use crate::protocol::payload::{clip, Event, Payload, MAIN_AGENT};
use crate::protocol::verdict::{Action, Verdict};
use crate::store::journal::Pending;
use anyhow::{Context, Result};
use session::Session;
use std::io::Write;
use std::path::{Path, PathBuf};
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
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            say(&format!(
                "`loopgate {}` reads one hook JSON object on stdin, as the agent CLI sends it; \
                 type or paste one, then Ctrl-D (`loopgate --help` lists the commands)",
                cli.command.name()
            ));
        }
        let read = read_compact_with(std::io::stdin().lock(), MAX_INPUT, || stdin_ready(deadline));
        if read.is_ok() {
            crate::protocol::payload::compact::drain_stdin(MAX_INPUT);
        }
        read
    };
    if !cli.ignore_env && crate::config::sources::env_flag("LOOPGATE_DISABLE") == Ok(true) {
        return read.map_or(Exit::Ok, |input| switched_off(cli, expected, &input));
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

/// `LOOPGATE_DISABLE` is the person's documented kill switch, and a hook honours it: nothing
/// is judged. But a session that runs with it is told once, at its first call (a
/// `systemMessage`, stderr, the event log), and the person's out-of-band receiver hears it at
/// once (`switched_off`), so a switch-off nobody chose does not go by unseen. Costs a call only
/// while the switch is on.
fn switched_off(cli: &Cli, expected: Event, input: &[u8]) -> Exit {
    let Ok(Some((agent, payload, event))) = read(cli, expected, input) else {
        return Exit::Ok;
    };
    let Some(store) = session::open_store(cli, &mut Vec::new()) else {
        return Exit::Ok;
    };
    let text = "loopgate is switched off in this session: LOOPGATE_DISABLE is set in the hook's \
                environment, so no call is judged. If that was not you, remove it where it is set \
                (your shell's start-up files, or a settings file's `env`) and start a new session";
    let key = format!("{}\0disabled", payload.session_id);
    if !crate::store::notice::first_time(store.dir(), &key, text) {
        return Exit::Ok;
    }
    let project_dir = agent.project_dir();
    let cfg = config::sources::load(&config::Sources::for_hook(
        cli.config.as_deref(),
        cli.observe,
        project_dir.as_deref(),
    ))
    .config;
    let line = serde_json::json!({
        "ts": crate::platform::clock::rfc3339(crate::platform::clock::now_ms()),
        "session": clip(&payload.session_id, 128),
        "event": event.name(),
        "detector": "loopgate",
        "decision": "notice",
        "enforced": false,
        "severity": "high",
        "reason": format!("loopgate: {text}"),
    });
    let _ = crate::store::events::append(store.dir(), &[line], &cfg.log, lock_wait(&cfg));
    let project = project_dir.or_else(|| payload.cwd.as_deref().map(PathBuf::from));
    let notice = notify::Notice {
        kind: "switched_off",
        code: "disabled_by_env",
        session: &payload.session_id,
        project: project.as_deref(),
        cli: agent.name(),
        reason: text,
        evidence: serde_json::json!({"variable": "LOOPGATE_DISABLE"}),
        resume: "unset LOOPGATE_DISABLE and start a new session".into(),
        at_ms: crate::platform::clock::now_ms(),
    };
    let failed = notify::deliver(&cfg, Some(store.dir()), event.name(), &notice);
    say(&format!(
        "{text}{}",
        failed.map(|f| format!("; {f}")).unwrap_or_default()
    ));
    let answer = crate::store::notice::with_system_message(None, &format!("loopgate: {text}"));
    let mut so = std::io::stdout().lock();
    let _ = so.write_all(answer.as_bytes()).and_then(|_| so.flush());
    Exit::Ok
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

/// One judged hook call: what the CLI ran and what it sent.
struct Call<'a> {
    cli: &'a Cli,
    expected: Event,
    input: &'a [u8],
    agent: Agent,
    payload: &'a Payload,
    event: Event,
    project_dir: Option<&'a Path>,
    now_ms: u64,
}

/// What the person must hear: problems go to stderr; notices (tamper, a lost state) also go into
/// the answer's `systemMessage` and the log, while the call itself is still judged.
struct Told {
    problems: Vec<String>,
    /// The configuration's own problems, shown once per session.
    config_problems: Vec<String>,
    notices: Vec<String>,
    /// A halt this call made (a turn or session ended), for the out-of-band notice.
    halt: Option<crate::judge::halt::Halt>,
    /// The loop budget's warning of this call (its reason and evidence), for the notice.
    budget: Option<(String, serde_json::Value)>,
}

fn process(cli: &Cli, expected: Event, input: &[u8]) -> Result<Done> {
    let Some((agent, payload, event)) = read(cli, expected, input)? else {
        return Ok(Done::silent());
    };
    let project_dir = agent.project_dir();
    let mut loaded = config::sources::load(&config::Sources::for_hook(
        cli.config.as_deref(),
        cli.observe,
        project_dir.as_deref(),
    ));
    loaded.env_ignored.extend(env_state_dir_ignored(cli));
    let cfg = &loaded.config;
    if let Some(done) = settings::answer(cli, agent, &payload, event, project_dir.as_deref(), cfg) {
        return done;
    }
    let call = Call {
        cli,
        expected,
        input,
        agent,
        payload: &payload,
        event,
        project_dir: project_dir.as_deref(),
        now_ms: crate::platform::clock::now_ms(),
    };
    let mut told = Told {
        problems: loaded.problems.clone(),
        config_problems: loaded.problems.clone(),
        notices: Vec::new(),
        halt: None,
        budget: None,
    };
    let (session, mut state) = session::open(&call, cfg, &loaded.env_ignored, &mut told.notices);
    let (verdicts, pending) = judge(&call, &session, &mut state, cfg, &mut told);
    save(&call, &session, &mut state, pending, &mut told.notices);
    // The OS frees memory at exit: dropping a large state is work nobody needs.
    std::mem::forget(state);
    answer::log(&call, &session, &verdicts, cfg, &mut told);
    Ok(answer::answer(&call, session, &verdicts, cfg, told))
}

/// The payload in the CLI's dialect, or `None` for a call loopgate does not judge.
fn read(cli: &Cli, expected: Event, input: &[u8]) -> Result<Option<(Agent, Payload, Event)>> {
    let read = crate::protocol::dialect::read(cli.agent, expected, input)?;
    // A detected CLI's failures from here on exit as that CLI needs.
    crate::protocol::exit::fail_open_with(read.agent().fail_open_code());
    Ok(match read {
        Read::Judge {
            agent,
            payload,
            event,
        } => Some((agent, *payload, event)),
        Read::Skip(_) => None,
    })
}

/// The engine's verdicts on this call, after the calls journaled while the lock was held elsewhere
/// (replayed first, so detection goes on counting however long the lock is held) and, at a
/// session's first prompt, the project's outer-loop record.
fn judge(
    call: &Call,
    session: &Session,
    state: &mut SessionState,
    cfg: &config::Config,
    told: &mut Told,
) -> (Vec<Verdict>, Option<Pending>) {
    // Only Claude Code says whether a person is watching; for the others it is unknown.
    let attended = (call.agent == Agent::Claude)
        .then(|| std::env::var("CLAUDE_CODE_SESSION_ATTENDED").ok())
        .flatten()
        .map(|v| v.trim() != "0");
    // The guard protects the configured state dir even when it could not be used.
    let protected_dir = session
        .store
        .as_ref()
        .map(|s| s.dir().to_path_buf())
        .or_else(|| state_dir(call.cli).ok());
    let ctx_at = |now_ms| Ctx {
        config: cfg,
        now_ms,
        project_dir: call.project_dir,
        attended,
        worktree: &Git,
        state_dir: protected_dir.as_deref(),
        caps: call.agent.caps(),
    };
    let pending = journaled::pending(session, &mut told.notices);
    if let Some(j) = &pending {
        journaled::replay(state, &j.records, &call.payload.session_id, &ctx_at);
    }
    if session.put_back {
        told.notices
            .push(match recount::recount(call, state, &ctx_at) {
                Some(n) if n > 0 => format!(
                "the {n} tool calls the session's transcript shows since the copy's last update \
                 were judged again: they still count"
            ),
                _ => "the loop counts of the calls since the copy's last update are lost: the \
                  session's transcript shows none"
                    .to_string(),
            });
    }
    let (payload, event) = (call.payload, call.event);
    let mut verdicts = match outer::check(call, session, state, attended, &mut told.notices) {
        Some(v) if v.action >= Action::Deny => vec![v],
        told => {
            let mut all = engine::handle(state, payload, event, &ctx_at(call.now_ms));
            all.extend(told);
            all
        }
    };
    if event == Event::Stop
        && payload.agent() == MAIN_AGENT
        && state.turn.number == 1
        && verdicts.iter().all(|v| v.action < Action::Deny)
    {
        if let Err(e) = outer::note(call, session, state) {
            told.problems.push(format!(
                "cannot note the session in the project's record: {e}"
            ));
        }
    }
    let dir = session.store.as_ref().map(|s| s.dir());
    budget::step(call, dir, state, cfg, attended, &mut verdicts, told);
    verdicts
        .iter_mut()
        .for_each(crate::judge::redact::mask_verdict);
    // Observe mode halts nothing: there is nothing to record or resume.
    if cfg.mode == config::Mode::Enforce {
        told.halt = crate::judge::halt::note(state, event, &mut verdicts, call.now_ms);
    }
    if !state.evicted.is_empty() {
        told.notices.extend(evicted(call, session));
    }
    // What the person is told stays with the session too: `status` lists it, and the status
    // line shows it until newer decisions push it out.
    for n in told.notices.iter().chain(&session.rewired) {
        state.note(told_note(call, n));
    }
    (verdicts, pending)
}

/// A notice as one of the session's recent decisions (action `told`).
fn told_note(call: &Call, notice: &str) -> crate::judge::state::DecisionNote {
    crate::judge::state::DecisionNote {
        at_ms: call.now_ms,
        agent: call.payload.agent_key(),
        event: call.event.name().into(),
        tool: clip(call.payload.tool_name.as_deref().unwrap_or("-"), 64),
        detector: "loopgate".into(),
        action: "told".into(),
        severity: "high".into(),
        enforced: true,
        summary: clip(&crate::judge::redact::mask(notice), 300),
    }
}

/// More subagents at once than loopgate follows dropped one that had failing calls: a loop it
/// was in starts counting again, which the person hears once per session.
fn evicted(call: &Call, session: &Session) -> Option<String> {
    let text = format!(
        "more than {} subagents ran at once, so loopgate dropped the record of one whose calls \
         were failing; a loop it was in starts counting again from zero",
        crate::judge::state::MAX_AGENTS - 1
    );
    let key = format!("{}\0evicted", call.payload.session_id);
    let new = session
        .store
        .as_ref()
        .is_none_or(|s| crate::store::notice::first_time(s.dir(), &key, &text));
    new.then_some(text)
}

/// Saves the state (and empties the journal it now holds), or, while another process holds the
/// lock, records this call in the journal.
fn save(
    call: &Call,
    session: &Session,
    state: &mut SessionState,
    pending: Option<Pending>,
    notices: &mut Vec<String>,
) {
    let lock = session.lock().filter(|_| !session.unreadable);
    if let (Some(s), Some(l)) = (&session.store, lock) {
        match s.save(l, state) {
            Ok(()) => match pending {
                Some(j) => journaled::merged(s.dir(), l, j, &call.payload.session_id, notices),
                // A mark with no journal behind it (deleted, or a length someone wrote).
                None if l.journal_pending() => l.mark_journal_pending(false),
                None => {}
            },
            Err(e) => notices.push(format!(
                "{e:#}; this call was judged but not recorded (the saved state is kept as it was)"
            )),
        }
    }
    if let (Some(s), Some(b)) = (&session.store, session.busy()) {
        journaled::journal_call(s.dir(), b, call, notices);
    }
}

/// A hook's state dir: `--state-dir` on its command line, else the platform's default. Never
/// `LOOPGATE_STATE_DIR`: a settings file's `env` reaches the hook's process, and a state dir
/// named there (an empty one) would be a reset of every count, untold.
pub fn state_dir(cli: &Cli) -> Result<PathBuf> {
    cli.state_dir
        .clone()
        .or_else(crate::config::paths::state_dir)
        .context(crate::config::paths::NO_HOME)
}

/// `LOOPGATE_STATE_DIR=…` when the hook's environment names a state dir other than the one the
/// hook uses (it is ignored, and the person told).
fn env_state_dir_ignored(cli: &Cli) -> Option<String> {
    let named = std::env::var_os("LOOPGATE_STATE_DIR").filter(|v| !v.is_empty())?;
    let used = state_dir(cli).ok();
    (used.as_deref() != Some(Path::new(&named)))
        .then(|| format!("LOOPGATE_STATE_DIR={}", Path::new(&named).display()))
}

/// Claude Code shows the hook's stderr to the user: keep it to one line per problem. A stderr that
/// cannot be written (closed, `/dev/full`) is ignored: there is nobody left to tell.
pub fn say(msg: &str) {
    let line = format!("loopgate: {}\n", clip(&msg.replace('\n', " "), 400));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
