//! One hook call, end to end: read stdin, load config and the locked session state, run the
//! engine, save, log, answer. Every failure on the way fails open (exit 1, one stderr line).

use crate::cli::Cli;
use crate::config::{self, Mode};
use crate::engine::{self, Ctx};
use crate::events;
use crate::exit::Exit;
use crate::git::Git;
use crate::payload::{clip, Event, Payload};
use crate::render;
use crate::state::SessionState;
use crate::store::Store;
use crate::verdict::strongest;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Stdin larger than this is not a hook payload we can judge in time.
const MAX_INPUT: u64 = 64 << 20;

pub fn run(cli: &Cli, expected: Event) -> Exit {
    // Streamed and compacted: a tool result of tens of megabytes is hashed, never held.
    let read = crate::payload::compact::read_compact(std::io::stdin().lock(), MAX_INPUT);
    if crate::config_sources::env_flag("LOOPGATE_DISABLE") == Ok(true) {
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
                if so
                    .write_all(out.as_bytes())
                    .and_then(|_| so.flush())
                    .is_err()
                {
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

fn process(cli: &Cli, expected: Event, input: &[u8]) -> Result<Done> {
    let (payload, event) = Payload::parse(input)?;
    if event != expected {
        bail!(
            "the {} hook got a {} payload; check the hook wiring in settings.json",
            expected.name(),
            event.name()
        );
    }
    let project_dir = std::env::var_os("CLAUDE_PROJECT_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let loaded = config::load(&config::Sources::from_process(
        cli.config.as_deref(),
        cli.observe,
        project_dir.as_deref(),
    ));
    let config_problems = loaded.problems.clone();
    let mut problems = loaded.problems;
    let cfg = loaded.config;
    let store = Store::open(&state_dir(cli)?)?;
    let now_ms = crate::clock::now_ms();
    let lock = store.lock(
        &payload.session_id,
        Duration::from_millis(cfg.lock_timeout_ms),
    )?;
    let (loaded_state, quarantined) = store.load(&lock)?;
    let mut state = loaded_state.unwrap_or_else(|| SessionState::new(&payload.session_id, now_ms));
    let attended = std::env::var("CLAUDE_CODE_SESSION_ATTENDED")
        .ok()
        .map(|v| v.trim() != "0");
    let ctx = Ctx {
        config: &cfg,
        now_ms,
        project_dir: project_dir.as_deref(),
        attended,
        worktree: &Git,
        state_dir: Some(store.dir()),
    };
    let mut verdicts = engine::handle(&mut state, &payload, event, &ctx);
    verdicts.iter_mut().for_each(crate::redact::mask_verdict);
    store.save(&lock, &state)?;
    let enforced = cfg.mode == Mode::Enforce;
    let meta = events::Meta {
        payload: &payload,
        event,
        now_ms,
        enforced,
        preview: cfg.log.preview.then(|| preview(&payload)).flatten(),
        config: Some(&cfg),
    };
    let lines: Vec<_> = verdicts.iter().map(|v| events::line(&meta, v)).collect();
    let log_timeout = Duration::from_millis(cfg.lock_timeout_ms);
    if let Err(e) = events::append(store.dir(), &lines, &cfg.log, log_timeout) {
        problems.push(format!("{e:#}"));
    }
    let notify = !config_problems.is_empty()
        && crate::notice::first_time(
            store.dir(),
            &payload.session_id,
            &config_problems.join("\n"),
        );
    drop(lock);
    crate::gc::maybe_sweep(store.dir(), &cfg.housekeeping);
    if let Some(q) = quarantined {
        // Claude Code ignores stdout on exit 1, so this call proceeds unjudged; state is fresh.
        problems.push(format!(
            "session state was unreadable and has been moved to {}; starting fresh",
            q.0.display()
        ));
        return Ok(Done {
            stdout: None,
            problems,
            exit: Exit::FailOpen,
        });
    }
    let mut stdout = if enforced {
        strongest(&verdicts).and_then(|v| render::answer(event, v))
    } else {
        None
    };
    if notify {
        let message = crate::notice::config_message(&config_problems);
        stdout = Some(crate::notice::with_system_message(stdout, &message));
    }
    Ok(Done {
        stdout,
        problems,
        exit: Exit::Ok,
    })
}

fn preview(p: &Payload) -> Option<String> {
    p.tool_input
        .as_ref()
        .map(|i| crate::redact::target(p.tool(), i))
}

pub fn state_dir(cli: &Cli) -> Result<PathBuf> {
    cli.state_dir
        .clone()
        .or_else(|| {
            std::env::var_os("LOOPGATE_STATE_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .or_else(crate::paths::state_dir)
        .context(crate::paths::NO_HOME)
}

/// Claude Code shows the hook's stderr to the user: keep it to one line per problem.
pub fn say(msg: &str) {
    eprintln!("loopgate: {}", clip(&msg.replace('\n', " "), 400));
}
