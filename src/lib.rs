//! loopgate: a Claude Code hook that detects an agent stuck in a loop and breaks the loop.
//!
//! `main` only calls [`main_entry`]; every hook call is a fresh process that reads one payload,
//! updates the locked session state, and answers in the exact JSON Claude Code expects.

pub mod bounded;
pub mod canon;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod config_sources;
pub mod detectors;
pub mod engine;
pub mod events;
pub mod exit;
pub mod gc;
pub mod git;
pub mod hook;
pub mod ledger;
pub mod notice;
pub mod outcome;
pub mod paths;
pub mod payload;
pub mod redact;
pub mod render;
pub mod replay;
pub mod setup;
pub mod state;
pub mod store;
pub mod tighten;
pub mod verdict;

use clap::Parser;
use cli::{Cli, Command};
use exit::Exit;
use std::process::ExitCode;
use std::time::Duration;

/// Set when a write to stdout failed because the reader went away (`loopgate status | head -1`).
static BROKEN_PIPE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs the CLI. A panic anywhere fails open: one stderr line, exit 1, the tool call proceeds.
/// A reader that closed the pipe early ends a manual command quietly with exit 0.
pub fn main_entry() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            BROKEN_PIPE.store(true, std::sync::atomic::Ordering::SeqCst);
            return;
        }
        hook::say(&format!("internal error (failing open): {msg}"));
    }));
    std::panic::catch_unwind(run)
        .unwrap_or_else(|_| {
            if BROKEN_PIPE.load(std::sync::atomic::Ordering::SeqCst) {
                Exit::Ok
            } else {
                Exit::FailOpen
            }
        })
        .into()
}

fn run() -> Exit {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // clap exits 2 on usage errors; Claude Code reads 2 as a block, so map it to 1.
            return if e.use_stderr() {
                Exit::FailOpen
            } else {
                Exit::Ok
            };
        }
    };
    if let Some(event) = cli.command.hook_event() {
        return hook::run(&cli, event);
    }
    if let Err(e) = cli.check_options() {
        hook::say(&e);
        return Exit::FailOpen;
    }
    match manual(&cli) {
        Ok(true) => Exit::Ok,
        Ok(false) => Exit::FailOpen,
        Err(e) if is_broken_pipe(&e) => Exit::Ok,
        Err(e) => {
            hook::say(&format!("{e:#}"));
            Exit::FailOpen
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Runs a manual command; `Ok(false)` means it ran and reported a failure itself (doctor).
fn manual(cli: &Cli) -> anyhow::Result<bool> {
    let timeout = Duration::from_secs(5);
    let open = |arg: &cli::StateArg| -> anyhow::Result<store::Store> {
        store::Store::open(&cmd::state_dir(cli.state_dir_for(arg))?)
    };
    match &cli.command {
        Command::Status {
            state,
            session,
            limit,
            since,
            json,
        } => cmd::status::run(
            &open(state)?,
            session.as_deref(),
            *json,
            *limit,
            since.as_deref(),
        )?,
        Command::Reset {
            state,
            session,
            all,
            json,
        } => cmd::reset::run(&open(state)?, session.as_deref(), *all, timeout, *json)?,
        Command::Setup {
            settings,
            bin,
            observe,
            uninstall,
            restore,
            json,
            managed,
            managed_dir,
        } => cmd::setup::run(&cmd::setup::Options {
            settings: settings.as_deref(),
            bin: bin.as_deref(),
            observe: cli.observe || *observe,
            uninstall: *uninstall,
            restore: restore.as_ref().map(|r| r.as_deref()),
            json: *json,
            managed: managed.then(|| managed_dir.clone().unwrap_or_else(setup::managed_dir)),
        })?,
        Command::Report {
            state,
            session,
            since,
            json,
        } => cmd::report::run(&open(state)?, session.as_deref(), since.as_deref(), *json)?,
        Command::Replay {
            config,
            paths,
            json,
            blocks_only,
        } => {
            let loaded = cmd::load_config(cli.config_for(config).as_deref(), false, None);
            if let Some(f) = &loaded.missing_explicit {
                anyhow::bail!("config file {} does not exist", f.display());
            }
            for p in &loaded.problems {
                hook::say(p);
            }
            cmd::replay::run(paths, &loaded.config, *json, *blocks_only)?
        }
        Command::Config {
            config,
            observe,
            project,
            json,
        } => {
            let project = cmd::project_dir(project.as_deref());
            let file = cli.config_for(config);
            let loaded =
                cmd::load_config(file.as_deref(), cli.observe || *observe, project.as_deref());
            cmd::config::run(&loaded, *json)?
        }
        Command::Doctor {
            state,
            config,
            project,
            json,
        } => {
            let project = cmd::project_dir(project.as_deref());
            let file = cli.config_for(config);
            let loaded = cmd::load_config(file.as_deref(), false, project.as_deref());
            let inputs = cmd::doctor::Inputs {
                loaded: &loaded,
                state_dir: cmd::state_dir(cli.state_dir_for(state)).map_err(|e| format!("{e:#}")),
                project,
                home: paths::home_dir(),
                managed_dir: paths::claude_managed_dir(),
                path_var: std::env::var_os("PATH"),
            };
            return cmd::doctor::run(&inputs, *json);
        }
        Command::Explain {
            state,
            config,
            session,
            call,
            json,
        } => {
            let project = cmd::project_dir(None);
            let file = cli.config_for(config);
            let loaded = cmd::load_config(file.as_deref(), false, project.as_deref());
            let dir = cmd::state_dir(cli.state_dir_for(state))?;
            cmd::explain::run(&dir, &loaded, session.as_deref(), call.as_deref(), *json)?
        }
        Command::Gc {
            state,
            config,
            older_than,
            dry_run,
            json,
        } => {
            let file = cli.config_for(config);
            let loaded = cmd::load_config(file.as_deref(), false, None);
            let dir = cmd::state_dir(cli.state_dir_for(state))?;
            cmd::gc::run(
                &dir,
                &loaded.config.housekeeping,
                older_than.as_deref(),
                *dry_run,
                *json,
            )?
        }
        Command::Completions { shell } => cmd::completions::completions(*shell)?,
        Command::Man => cmd::completions::man()?,
        _ => unreachable!("hook subcommands are handled before"),
    }
    Ok(true)
}
