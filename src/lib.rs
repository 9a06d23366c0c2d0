//! loopgate: a hook that agent CLIs run on every event, to detect an agent stuck in a loop and
//! break the loop.
//!
//! `main` calls [`main_entry`] (on Linux after its own process start-up, see `main.rs`); every
//! hook call is a fresh process that reads one payload, updates the locked session state, and
//! answers in the exact JSON its CLI expects.
//!
//! The folders of `src/` are layers. Each uses only itself and the layers before it in this list
//! (`tests/layers.rs` checks it; docs/architecture.md says what each holds):
//!
//! `util` < `platform` < `protocol` < `cli` < `config` < `judge` < `store` < `setup` <
//! `defence` < `replay` < `hook` < `cmd`
//!
//! This file, above them all, parses the command line and hands it to a hook or a command.

pub mod cli;
pub mod cmd;
pub mod config;
pub mod defence;
pub mod hook;
pub mod judge;
pub mod platform;
pub mod protocol;
pub mod replay;
pub mod setup;
pub mod store;
pub mod util;

use clap::Parser;
use cli::{Cli, Command};
use protocol::exit::Exit;
use std::time::Duration;

/// Set when a write to stdout failed because the reader went away (`loopgate status | head -1`).
static BROKEN_PIPE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs the CLI. A panic anywhere fails open: one stderr line, exit 1, the tool call proceeds.
/// A reader that closed the pipe early ends a manual command quietly with exit 0.
///
/// On Linux `main.rs` makes this the process's entry without Rust's runtime start-up, and does
/// there the part of that start-up loopgate relies on (standard streams that are open, a write to
/// a closed pipe that fails instead of killing); this flushes stdout at the end, as it would.
pub fn main_entry() -> Exit {
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
    let exit = run_with_room(|| std::panic::catch_unwind(run)).unwrap_or_else(|_| {
        if BROKEN_PIPE.load(std::sync::atomic::Ordering::SeqCst) {
            Exit::Ok
        } else {
            Exit::FailOpen
        }
    });
    // Rust's runtime would flush stdout after `main`; without it, text not ending in a newline
    // would be lost.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    exit
}

/// The stack loopgate's work needs, with a wide margin (the deepest path, a nested input
/// judged whole, uses well under 1 MiB).
const WORK_STACK: usize = 8 << 20;

/// Runs `work` on the main thread, or, when the caller set a stack limit too small for it (a
/// 16 KiB `ulimit -s` killed the process silently, with no line for the person), on a thread
/// whose stack size loopgate chooses (thread stacks are not bound by that limit). Only then:
/// a thread costs a hook call more than the one `getrlimit` does.
fn run_with_room<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    let small = crate::platform::stack_limit().is_some_and(|l| l < (2 << 20));
    if !small {
        return work();
    }
    std::thread::scope(|s| {
        match std::thread::Builder::new()
            .stack_size(WORK_STACK)
            .spawn_scoped(s, || {
                crate::platform::start::report_crashes_on_this_thread();
                work()
            }) {
            Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            Err(e) => {
                hook::say(&format!(
                    "cannot start with this stack limit ({e}); the call proceeds unjudged"
                ));
                std::process::exit(Exit::FailOpen.code().into())
            }
        }
    })
}

fn run() -> Exit {
    // Hook calls (one process per tool call) skip clap: its parser is built and run only for the
    // manual commands.
    // The status line runs on every screen update: no clap either.
    if let Some(dir) = statusline_args(std::env::args_os().skip(1)) {
        cmd::statusline::run(dir, false);
        return Exit::Ok;
    }
    if let Some(cli) = hook_cli(std::env::args_os().skip(1)) {
        if cli.ignore_env {
            platform::start::ignore_env();
        }
        let event = cli.command.hook_event().expect("a hook subcommand");
        return hook::run(&cli, event);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let args: Vec<_> = std::env::args_os().skip(1).collect();
            return match cli::usage::refusal(&e, &args) {
                cli::usage::Refusal::Show(text) => {
                    print!("{text}");
                    Exit::Ok
                }
                cli::usage::Refusal::Error(text) => {
                    eprint!("{text}");
                    Exit::FailOpen
                }
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
    if let Command::Halted { state, pick } = &cli.command {
        // Reading must not create the state dir: with nothing recorded there, no session exists.
        let halted = cmd::state_dir(cli.state_dir_for(state))
            .and_then(|d| match cmd::state_exists(&d) {
                true => store::Store::open(&d),
                false => anyhow::bail!(
                    "no sessions in {}: no hook has recorded anything there yet",
                    d.display()
                ),
            })
            .and_then(|s| cmd::halted::run(&s, pick.session.as_deref(), pick.json));
        return halted.unwrap_or_else(|e| {
            hook::say(&format!("{e:#}"));
            Exit::FailOpen
        });
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
        Command::Status { state, json, .. } | Command::Report { state, json, .. }
            if !cmd::state_exists(&cmd::state_dir(cli.state_dir_for(state))?) =>
        {
            // Reading must not create the state dir: nothing has been recorded there yet.
            let dir = cmd::state_dir(cli.state_dir_for(state))?;
            if *json {
                println!("[]");
            } else {
                println!(
                    "no sessions in {}: no hook has recorded anything there yet",
                    dir.display()
                );
            }
        }
        Command::Reset { state, json, .. }
            if !cmd::state_exists(&cmd::state_dir(cli.state_dir_for(state))?) =>
        {
            let dir = cmd::state_dir(cli.state_dir_for(state))?;
            if *json {
                println!("{}", serde_json::json!({"reset": 0}));
            } else {
                println!(
                    "loopgate: nothing to reset: no hook has recorded anything in {} yet",
                    dir.display()
                );
            }
        }
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
        Command::Statusline { state, json } => {
            cmd::statusline::run(cli.state_dir_for(state), *json)
        }
        Command::Reset {
            state,
            session,
            all,
            json,
        } => {
            let loaded = cmd::load_config(cli.config.as_deref(), false, None);
            cmd::reset::run(
                &open(state)?,
                session.as_deref(),
                *all,
                timeout,
                *json,
                &loaded.config,
            )?
        }
        Command::Setup {
            agent,
            settings,
            bin,
            observe,
            uninstall,
            restore,
            show_bin,
            json,
            managed,
            managed_dir,
            install_dir,
            allow_other_hooks,
            allow_loader_env,
            allow_user_config,
        } => cmd::setup::run(&cmd::setup::Options {
            show_bin: *show_bin,
            agent: agent.unwrap_or(protocol::dialect::Agent::Claude),
            settings: settings.as_deref(),
            bin: bin.as_deref(),
            observe: cli.observe || *observe,
            uninstall: *uninstall,
            restore: restore.as_ref().map(|r| r.as_deref()),
            json: *json,
            managed: managed.then(|| {
                managed_dir
                    .clone()
                    .unwrap_or_else(crate::config::paths::claude_managed_dir)
            }),
            state_dir: cmd::state_dir(cli.state_dir.clone()).ok(),
            install_dir: install_dir.as_deref(),
            locks: setup::ManagedLocks {
                managed_hooks_only: !*allow_other_hooks,
                loader_env: !*allow_loader_env,
                config: !*allow_user_config,
            },
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
            managed_dir,
            json,
        } => {
            let project = cmd::project_dir(project.as_deref());
            let file = cli.config_for(config);
            let loaded = cmd::load_config(file.as_deref(), false, project.as_deref());
            let inputs = cmd::doctor::Inputs {
                loaded: &loaded,
                state_dir: cmd::state_dir(cli.state_dir_for(state)).map_err(|e| format!("{e:#}")),
                project,
                home: config::paths::home_dir(),
                managed_dir: managed_dir
                    .clone()
                    .unwrap_or_else(config::paths::claude_managed_dir),
                agents: protocol::dialect::Agent::ALL
                    .into_iter()
                    .filter(|&a| a != protocol::dialect::Agent::Claude)
                    .filter_map(|a| Some((a, config::paths::agent_config_dir(a)?)))
                    .collect(),
                path_var: std::env::var_os("PATH"),
                sdk_bin: std::env::var_os("LOOPGATE_BIN").filter(|v| !v.is_empty()),
                sdk_stable_bin: config::paths::npm_stable_bin(),
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
        Command::Continue {
            state,
            pick,
            budget,
        } => cmd::resume::run(
            &open(state)?,
            pick.session.as_deref(),
            timeout,
            pick.json,
            *budget,
        )?,
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
        Command::Demo { json } => return cmd::demo::run(*json),
        _ => unreachable!("hook subcommands are handled before"),
    }
    Ok(true)
}

/// Parses a hook call's arguments by hand, exactly as clap would: `--observe`, `--state-dir DIR`
/// and `--config FILE` (also as `--opt=value`) before exactly one hook subcommand, nothing after.
/// Anything else (`--help`, a typo, a manual command) returns `None` and goes to clap.
/// `statusline [--state-dir DIR]`, read by hand: `Some(dir flag)` when that is the command line.
fn statusline_args(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Option<Option<std::path::PathBuf>> {
    let mut args = args.into_iter();
    if args.next()? != "statusline" {
        return None;
    }
    let dir = match (args.next(), args.next(), args.next()) {
        (None, _, _) => None,
        (Some(flag), Some(d), None) if flag == "--state-dir" && !d.is_empty() => Some(d.into()),
        // Anything else (--help, a typo) goes to clap for its message.
        _ => return None,
    };
    Some(dir)
}

pub fn hook_cli(args: impl IntoIterator<Item = std::ffi::OsString>) -> Option<Cli> {
    use cli::Command as C;
    let mut args = args.into_iter();
    let (mut state_dir, mut config, mut observe, mut command) = (None, None, false, None);
    let (mut agent, mut plugin, mut sdk, mut ignore_env) = (None, None, None, false);
    while let Some(arg) = args.next() {
        if command.is_some() {
            return None;
        }
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
            "--ignore-env" if inline.is_none() => ignore_env = true,
            "--state-dir" => state_dir = Some(value()?),
            "--config" => config = Some(value()?),
            "--plugin" => plugin = Some(value()?),
            "--sdk" => sdk = Some(value()?),
            "--agent" => agent = Some(protocol::dialect::Agent::parse(value()?.to_str()?)?),
            _ if inline.is_some() || command.is_some() => return None,
            "session-start" => command = Some(C::SessionStart),
            "pre-tool-use" => command = Some(C::PreToolUse),
            "post-tool-use" => command = Some(C::PostToolUse),
            "post-tool-use-failure" => command = Some(C::PostToolUseFailure),
            "post-tool-batch" => command = Some(C::PostToolBatch),
            "stop" => command = Some(C::Stop),
            "subagent-stop" => command = Some(C::SubagentStop),
            "user-prompt-submit" => command = Some(C::UserPromptSubmit),
            "config-change" => command = Some(C::ConfigChange),
            "file-changed" => command = Some(C::FileChanged),
            "prompt-expansion" => command = Some(C::PromptExpansion),
            "permission-request" => command = Some(C::PermissionRequest),
            _ => return None,
        }
    }
    Some(Cli {
        state_dir,
        config,
        observe,
        agent,
        plugin,
        sdk,
        ignore_env,
        command: command?,
    })
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
            &["--state-dir", "/s", "--config=/c", "stop"],
            &["--state-dir=/s", "--observe", "user-prompt-submit"],
            &["--config", "/c", "post-tool-use-failure"],
            &["post-tool-batch"],
            &["subagent-stop"],
            &["session-start"],
            &["--agent", "codex", "pre-tool-use"],
            &["--agent=gemini", "--observe", "stop"],
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
            &["stop", "--state-dir", "/s"],
            &["user-prompt-submit", "--observe"],
            &["--bogus", "stop"],
            &["Stop"],
            &["--agent", "nope", "stop"],
            &["--agent", "", "stop"],
        ] {
            assert!(hand(args).is_none(), "{args:?} parsed by hand");
        }
    }
}
