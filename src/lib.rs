//! loopgate: a Claude Code hook that detects an agent stuck in a loop and breaks the loop.
//!
//! `main` only calls [`main_entry`]; every hook call is a fresh process that reads one payload,
//! updates the locked session state, and answers in the exact JSON Claude Code expects.

pub mod canon;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod codec;
pub mod config;
pub mod detectors;
pub mod engine;
pub mod events;
pub mod exit;
pub mod git;
pub mod hook;
pub mod ledger;
pub mod noise;
pub mod outcome;
pub mod payload;
pub mod redact;
pub mod render;
pub mod replay;
pub mod setup;
pub mod state;
pub mod store;
pub mod verdict;

use clap::Parser;
use cli::{Cli, Command};
use exit::Exit;
use std::process::ExitCode;
use std::time::Duration;

/// Runs the CLI. A panic anywhere fails open: one stderr line, exit 1, the tool call proceeds.
pub fn main_entry() -> ExitCode {
    // A file-size limit (`ulimit -f`) must surface as EFBIG on the write, handled like any write
    // error, not as a silent SIGXFSZ death. A handler (rather than SIG_IGN, which needs unsafe)
    // has the same effect on the write.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
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
    // Hook calls (one process per tool call) skip clap: its parser is built and run only for the
    // manual commands.
    if let Some(cli) = hook_cli(std::env::args_os().skip(1)) {
        let event = cli.command.hook_event().expect("a hook subcommand");
        return hook::run(&cli, event);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            // clap exits 2 on usage errors (Claude Code reads 2 as a block) and prints several
            // lines: one line, exit 1.
            let text = e.render().to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("usage error");
            hook::say(&format!(
                "{} (see `loopgate --help`)",
                first.trim().trim_start_matches("error: ")
            ));
            return Exit::FailOpen;
        }
        Err(e) => {
            // --help, --version: their text on stdout, exit 0.
            let _ = e.print();
            return Exit::Ok;
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

/// Parses a hook call's arguments by hand: exactly one hook subcommand, plus the global
/// `--observe`, `--state-dir DIR` and `--config FILE` (also as `--opt=value`), in any order.
/// Anything else (`--help`, a typo, a manual command) returns `None` and goes to clap.
pub fn hook_cli(args: impl IntoIterator<Item = std::ffi::OsString>) -> Option<Cli> {
    use cli::Command as C;
    let mut args = args.into_iter();
    let (mut state_dir, mut config, mut observe, mut command) = (None, None, false, None);
    while let Some(arg) = args.next() {
        let s = arg.to_str()?;
        let (name, inline) = match s.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (s, None),
        };
        let mut value = || -> Option<std::path::PathBuf> {
            let v = match inline {
                Some(v) => v.into(),
                None => args.next()?,
            };
            (!v.is_empty()).then(|| v.into())
        };
        match name {
            "--observe" if inline.is_none() => observe = true,
            "--state-dir" => state_dir = Some(value()?),
            "--config" => config = Some(value()?),
            _ if inline.is_some() || command.is_some() => return None,
            "pre-tool-use" => command = Some(C::PreToolUse),
            "post-tool-use" => command = Some(C::PostToolUse),
            "post-tool-use-failure" => command = Some(C::PostToolUseFailure),
            "post-tool-batch" => command = Some(C::PostToolBatch),
            "stop" => command = Some(C::Stop),
            "subagent-stop" => command = Some(C::SubagentStop),
            "user-prompt-submit" => command = Some(C::UserPromptSubmit),
            _ => return None,
        }
    }
    Some(Cli {
        state_dir,
        config,
        observe,
        command: command?,
    })
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
            managed,
            managed_dir,
        } => {
            let managed = managed.then(|| managed_dir.clone().unwrap_or_else(setup::managed_dir));
            cmd::setup::run_with(
                settings.as_deref(),
                bin.as_deref(),
                cli.observe,
                *uninstall,
                managed.as_deref(),
            )
        }
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
            let loaded = config::load(&config::Sources {
                flag_file: cli.config.as_deref(),
                env_file: std::env::var_os("LOOPGATE_CONFIG").map(Into::into),
                user_file: config::user_config_file(),
                ..Default::default()
            });
            for p in &loaded.problems {
                hook::say(p);
            }
            cmd::replay::run(paths, &loaded.config, *json, *blocks_only)
        }
        _ => unreachable!("hook subcommands are handled before"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn hand(args: &[&str]) -> Option<Cli> {
        hook_cli(args.iter().map(Into::into))
    }

    #[test]
    fn hook_argv_parses_like_clap() {
        for args in [
            &["pre-tool-use"][..],
            &["--observe", "post-tool-use"],
            &["stop", "--state-dir", "/s", "--config=/c"],
            &["--state-dir=/s", "user-prompt-submit", "--observe"],
            &["--config", "/c", "post-tool-use-failure"],
            &["post-tool-batch"],
            &["subagent-stop"],
        ] {
            let h = hand(args).unwrap_or_else(|| panic!("{args:?} not parsed by hand"));
            let c = Cli::try_parse_from(std::iter::once("loopgate").chain(args.iter().copied()))
                .unwrap();
            assert_eq!(format!("{h:?}"), format!("{c:?}"), "{args:?}");
        }
    }

    #[test]
    fn everything_else_goes_to_clap() {
        for args in [
            &[][..],
            &["status"],
            &["--help"],
            &["pre-tool-use", "--help"],
            &["pre-tool-use", "stop"],
            &["pre-tool-use", "extra"],
            &["--state-dir"],
            &["--state-dir", "", "stop"],
            &["--observe=1", "stop"],
            &["--bogus", "stop"],
            &["Stop"],
        ] {
            assert!(hand(args).is_none(), "{args:?} parsed by hand");
        }
    }
}
