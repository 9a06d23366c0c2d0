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

/// Runs the CLI. A panic anywhere fails open: one stderr line, exit 1, the tool call proceeds.
pub fn main_entry() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        hook::say(&format!("internal error (failing open): {msg}"));
    }));
    std::panic::catch_unwind(run)
        .unwrap_or(Exit::FailOpen)
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
    match manual(&cli) {
        Ok(()) => Exit::Ok,
        Err(e) => {
            hook::say(&format!("{e:#}"));
            Exit::FailOpen
        }
    }
}

fn manual(cli: &Cli) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(5);
    match &cli.command {
        Command::Status { session, json } => {
            let store = store::Store::open(&hook::state_dir(cli)?)?;
            cmd::status::run(&store, session.as_deref(), *json)
        }
        Command::Reset { session, all } => {
            let store = store::Store::open(&hook::state_dir(cli)?)?;
            cmd::reset::run(&store, session.as_deref(), *all, timeout)
        }
        Command::Setup {
            settings,
            bin,
            uninstall,
        } => cmd::setup::run(settings.as_deref(), bin.as_deref(), cli.observe, *uninstall),
        Command::Report {
            session,
            since,
            json,
        } => {
            let store = store::Store::open(&hook::state_dir(cli)?)?;
            cmd::report::run(&store, session.as_deref(), since.as_deref(), *json)
        }
        Command::Replay {
            paths,
            json,
            blocks_only,
        } => {
            let loaded = config::load(&config::Sources::from_process(
                cli.config.as_deref(),
                false,
                None,
            ));
            for p in &loaded.problems {
                hook::say(p);
            }
            cmd::replay::run(paths, &loaded.config, *json, *blocks_only)
        }
        _ => unreachable!("hook subcommands are handled before"),
    }
}
