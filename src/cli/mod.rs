//! Command-line surface: one clap-derive enum, one variant per hook event or manual command.
//!
//! The options before the subcommand (`--state-dir`, `--config`, `--observe`) are what the hook
//! commands in a settings file use (`loopgate --observe pre-tool-use`); they are accepted before
//! a manual command only where they mean something for it, and each manual command also takes
//! the ones that apply to it after its name, where its `--help` lists them.

pub mod usage;
use crate::protocol::dialect::Agent;
use crate::protocol::payload::Event;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// `--version`: the crate version and the commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("LOOPGATE_COMMIT"),
    ")"
);

const EXAMPLES: &str = "\
Examples:
  loopgate demo                        see a loop denied, in a throw-away directory
  loopgate doctor                      check the installation, hooks, config and state dir
  loopgate config                      the effective configuration, each value with its source
  loopgate status --limit 5            the five most recently active sessions
  loopgate explain                     why the last decision was taken, and how to change it
  loopgate reset --all                 clear loop state after a false alarm
  loopgate --observe pre-tool-use      a hook command as settings.json runs it (stdin: payload)

Hook subcommands read one Claude Code hook payload on stdin; the rest are for people.";

#[derive(Debug, Parser)]
#[command(
    name = "loopgate",
    version = VERSION,
    about = "Detects an AI coding agent (Claude Code, Codex, Gemini CLI, Qwen Code, Copilot CLI, OpenCode, Kilo) stuck in a loop and breaks the loop",
    after_help = EXAMPLES
)]
pub struct Cli {
    /// Hooks: where per-session state and events.jsonl live [env: LOOPGATE_STATE_DIR]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Hooks: the one config file, instead of the user and project files [env: LOOPGATE_CONFIG]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Hooks: compute and log every decision, but deny, block and inject nothing [env: LOOPGATE_MODE=observe]
    #[arg(long)]
    pub observe: bool,

    /// Hooks: the agent CLI that runs the hook [default: detected from the payload, else claude]
    #[arg(long, value_enum, value_name = "CLI")]
    pub agent: Option<Agent>,

    /// Hooks: run as Claude Code's plugin installed at ROOT. Only the plugin's wrapper passes it:
    /// what loopgate takes itself for comes from the command line, never from an environment a
    /// settings file's `env` can set (`CLAUDE_PLUGIN_ROOT` there made loopgate stop judging the
    /// person's wiring).
    #[arg(long, value_name = "ROOT", hide = true)]
    pub plugin: Option<PathBuf>,

    /// Hooks: run by the Agent SDK helper installed at FILE, which passes it so that its copy
    /// is checked at a session's first call (`defence::host_files`).
    #[arg(long, value_name = "FILE", hide = true)]
    pub sdk: Option<PathBuf>,
    /// Hooks: take no `LOOPGATE_*` variable from the environment. `setup --managed` writes it:
    /// the user's settings' `env` and shell reach a managed hook's environment, so a managed
    /// install's settings come from its files alone.
    #[arg(long, hide = true)]
    pub ignore_env: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// `--state-dir` for a manual command.
#[derive(Debug, Args, Default, Clone)]
pub struct StateArg {
    /// Where per-session state and events.jsonl live [env: LOOPGATE_STATE_DIR]
    #[arg(long = "state-dir", value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Which session a command about one session means (`halted`, `continue`).
#[derive(Debug, Args, Default, Clone)]
pub struct Pick {
    /// This session id
    #[arg(long)]
    pub session: Option<String>,
    /// The most recently active session
    #[arg(long)]
    pub latest: bool,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

/// `--config` for a manual command.
#[derive(Debug, Args, Default, Clone)]
pub struct ConfigArg {
    /// The one config file, instead of the user and project files [env: LOOPGATE_CONFIG]
    #[arg(long = "config", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Hook: SessionStart (makes a new session's files before its first prompt)
    SessionStart,
    /// Hook: PreToolUse (may deny a repeated call)
    PreToolUse,
    /// Hook: PostToolUse (records the outcome)
    PostToolUse,
    /// Hook: PostToolUseFailure (records the failure, may warn)
    PostToolUseFailure,
    /// Hook: PostToolBatch (sees calls rejected before they ran)
    PostToolBatch,
    /// Hook: Stop (the progress gate)
    Stop,
    /// Hook: SubagentStop
    SubagentStop,
    /// Hook: ConfigChange (puts loopgate's hooks back when a settings change removes them)
    ConfigChange,
    /// Hook: FileChanged (tells the person when the hooks' binary or loopgate's config changed)
    FileChanged,
    /// Hook: UserPromptSubmit (starts a new turn)
    UserPromptSubmit,
    /// Hook: UserPromptExpansion (the person's `/loopgate allow <id>` keeps a change loopgate undid)
    PromptExpansion,
    /// Hook: PermissionRequest (Copilot CLI: ends a turn past the loop ceiling)
    PermissionRequest,
    /// See loopgate work: a short loop played through the real hook, in a throw-away directory
    #[command(after_help = "Examples:\n  loopgate demo\n  loopgate demo --json")]
    Demo {
        /// Machine-readable output: each step, what the agent read, and the status afterwards
        #[arg(long)]
        json: bool,
    },
    /// Show sessions, most recently active first, with their counters and last decisions
    #[command(
        after_help = "Examples:\n  loopgate status --limit 3\n  loopgate status --since 2h --json"
    )]
    Status {
        #[command(flatten)]
        state: StateArg,
        /// Only this session id
        #[arg(long)]
        session: Option<String>,
        /// At most this many sessions (the most recently active)
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Only sessions active within this long (e.g. 30m, 2h, 7d)
        #[arg(long, value_name = "DURATION")]
        since: Option<String>,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// One short line for Claude Code's status bar: reads its statusLine JSON on stdin
    #[command(
        after_help = "`loopgate setup` adds it where no statusLine is configured. By hand, in ~/.claude/settings.json:\n  \"statusLine\": {\"type\": \"command\", \"command\": \"loopgate statusline\"}\nBeside a status line you already have (both get the same JSON on stdin):\n  \"command\": \"input=$(cat); printf '%s · %s' \\\"$(printf '%s' \\\"$input\\\" | your-command)\\\" \\\"$(printf '%s' \\\"$input\\\" | loopgate statusline)\\\"\""
    )]
    Statusline {
        #[command(flatten)]
        state: StateArg,
        /// The same facts as JSON, for a status line script of your own
        #[arg(long)]
        json: bool,
    },
    /// Clear loop state (config and event log stay)
    #[command(
        after_help = "Examples:\n  loopgate reset --session 0b6f…\n  loopgate reset --all",
        group(clap::ArgGroup::new("which").required(true).args(["session", "all"]))
    )]
    Reset {
        #[command(flatten)]
        state: StateArg,
        /// The session to reset
        #[arg(long)]
        session: Option<String>,
        /// Reset every session
        #[arg(long)]
        all: bool,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Whether a session was halted by loopgate: exit 0 not halted (or continued since), 3 halted
    #[command(
        after_help = "Exit status: 0 not halted (or continued since), 3 halted by loopgate, 1 error (no such session).\nExamples:\n  loopgate halted                      the most recently active session\n  loopgate halted --session 0b6f… --json\n  claude -p \"…\"; loopgate halted || echo \"stopped by loopgate\"",
        group(clap::ArgGroup::new("which").args(["session", "latest"]))
    )]
    Halted {
        #[command(flatten)]
        state: StateArg,
        #[command(flatten)]
        pick: Pick,
    },
    /// Continue a session loopgate halted, keeping what it knows (in Claude Code: `/loopgate continue`)
    #[command(
        after_help = "Examples:\n  loopgate continue --session 0b6f…\n  loopgate continue --latest\n  loopgate continue --latest --budget 5    and raise its loop budget by $5",
        group(clap::ArgGroup::new("which").required(true).args(["session", "latest"]))
    )]
    Continue {
        #[command(flatten)]
        state: StateArg,
        #[command(flatten)]
        pick: Pick,
        /// Also raise the session's loop budget by this many US dollars
        #[arg(long, value_name = "USD")]
        budget: Option<f64>,
    },
    /// What loopgate saw and did: counts, statistics, and per session inputs-or-outputs
    #[command(after_help = "Examples:\n  loopgate report --since 2h\n  loopgate report --json")]
    Report {
        #[command(flatten)]
        state: StateArg,
        /// Only this session id
        #[arg(long)]
        session: Option<String>,
        /// Only events newer than this (e.g. 2h, 30m, 7d)
        #[arg(long, value_name = "DURATION")]
        since: Option<String>,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Why a decision was taken (or why none was): detector, evidence, thresholds, how to change them
    #[command(
        after_help = "Examples:\n  loopgate explain                      the last decision\n  loopgate explain --session 0b6f…     the last decision in that session\n  loopgate explain toolu_01ABC…         a call, by its tool_use_id\n  loopgate explain 'npm test'           the last call whose preview contains this"
    )]
    Explain {
        #[command(flatten)]
        state: StateArg,
        #[command(flatten)]
        config: ConfigArg,
        /// Only this session id
        #[arg(long)]
        session: Option<String>,
        /// A call: its tool_use_id, or text in its logged preview
        call: Option<String>,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// The effective configuration as TOML, each value annotated with its source
    #[command(
        after_help = "Examples:\n  loopgate config\n  loopgate config --project . --json\n  LOOPGATE_DETECTORS__REPEAT__SUCCESS=5 loopgate config"
    )]
    Config {
        #[command(flatten)]
        config: ConfigArg,
        /// As the hooks would with --observe
        #[arg(long)]
        observe: bool,
        /// The project whose .claude/loopgate.toml applies [default: $CLAUDE_PROJECT_DIR, else the current directory]
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Check the installation: binary, hook wiring, config, state dir, Claude Code, git
    #[command(after_help = "Examples:\n  loopgate doctor\n  loopgate doctor --json")]
    Doctor {
        #[command(flatten)]
        state: StateArg,
        #[command(flatten)]
        config: ConfigArg,
        /// The project to check [default: $CLAUDE_PROJECT_DIR, else the current directory]
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// Claude Code's managed-settings directory [default: /etc/claude-code, or the
        /// macOS/Windows one]
        #[arg(long, value_name = "DIR")]
        managed_dir: Option<PathBuf>,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Remove old sessions, locks, quarantined and temp files ([housekeeping] in the config)
    #[command(after_help = "Examples:\n  loopgate gc --dry-run\n  loopgate gc --older-than 1d")]
    Gc {
        #[command(flatten)]
        state: StateArg,
        #[command(flatten)]
        config: ConfigArg,
        /// Remove files untouched this long [default: [housekeeping] max_age_days, 7 days]
        #[arg(long, value_name = "DURATION")]
        older_than: Option<String>,
        /// Only list what would be removed
        #[arg(long)]
        dry_run: bool,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Feed past sessions through the detectors offline (observe mode, in memory): Claude Code, Codex, Gemini CLI, Qwen Code, Copilot CLI, OpenCode
    #[command(
        after_help = "Examples:\n  loopgate replay ~/.claude/projects/\n  loopgate replay ~/.codex/sessions ~/.gemini/tmp\n  loopgate replay session.jsonl --blocks-only"
    )]
    Replay {
        #[command(flatten)]
        config: ConfigArg,
        /// Session files (.jsonl, .json; the CLI is told from the content) or directories searched recursively (e.g. ~/.claude/projects)
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
        /// List only would-be blocks (warnings still count in the summary)
        #[arg(long)]
        blocks_only: bool,
    },
    /// Wire loopgate's hooks into a Claude Code settings file, or another agent CLI's hook file (used by install.sh)
    #[command(
        after_help = "Examples:\n  loopgate setup                       wire the hooks into ~/.claude/settings.json\n  loopgate setup --observe             the same, in observe mode\n  loopgate setup --uninstall           remove loopgate's hooks, nothing else\n  loopgate setup --restore             put back the settings as they were before the last change\n  loopgate setup --agent codex         wire Codex CLI (~/.codex/hooks.json, and trust the hooks)"
    )]
    Setup {
        /// The agent CLI to wire: claude, codex, gemini, qwen, copilot, opencode or kilo (these two get loopgate's plugin) [default: claude]
        #[arg(long, value_enum, value_name = "CLI")]
        agent: Option<Agent>,
        /// The hook file to edit [default: ~/.claude/settings.json; for --agent: $CODEX_HOME/hooks.json,
        /// ~/.gemini/settings.json, ~/.qwen/settings.json, $COPILOT_HOME/hooks/loopgate.json,
        /// ~/.config/opencode/plugins/loopgate.js, ~/.config/kilo/plugins/loopgate.js]
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
        /// Path of the loopgate binary the hooks call [default: this executable]
        #[arg(long, value_name = "PATH")]
        bin: Option<PathBuf>,
        /// Wire the hooks in observe mode
        #[arg(long)]
        observe: bool,
        /// Remove loopgate's entries instead
        #[arg(long, conflicts_with = "restore")]
        uninstall: bool,
        /// Restore the settings file from its newest backup (or the backup given)
        #[arg(long, value_name = "BACKUP", num_args = 0..=1)]
        restore: Option<Option<PathBuf>>,
        /// Print the loopgate binary the file's hooks call (one a line) and change nothing
        #[arg(long, conflicts_with_all = ["restore", "uninstall", "managed"])]
        show_bin: bool,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
        /// Install into Claude Code's managed settings (managed-settings.d/loopgate.json), where
        /// user and project settings cannot disable the hooks; needs root
        #[arg(long, conflicts_with = "settings")]
        managed: bool,
        /// Managed-settings directory [default: /etc/claude-code, or the macOS/Windows one]
        #[arg(long, requires = "managed", value_name = "DIR")]
        managed_dir: Option<PathBuf>,
        /// With --managed: the root-owned directory the hooks' binary is copied to
        /// [default: /usr/local/lib/loopgate; macOS: /Library/Application Support/loopgate;
        /// Windows: %ProgramFiles%\loopgate]
        #[arg(long, requires = "managed", value_name = "DIR")]
        install_dir: Option<PathBuf>,
        /// With --managed: let user, project and plugin hooks run beside loopgate's (the drop-in
        /// sets allowManagedHooksOnly otherwise; such a hook runs unseen by the tamper guard)
        #[arg(long, requires = "managed")]
        allow_other_hooks: bool,
        /// With --managed: leave the loader's variables (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH)
        /// as the user's settings and shell set them (the drop-in's env sets them empty
        /// otherwise; a preloaded library silences the shell that runs each hook)
        #[arg(long, requires = "managed")]
        allow_loader_env: bool,
        /// With --managed: the hooks read the user's and the project's loopgate settings, which
        /// the agent's user can write (otherwise only config.toml in the install directory, root's)
        #[arg(long, requires = "managed")]
        allow_user_config: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(
        after_help = "Examples:\n  loopgate completions bash > ~/.local/share/bash-completion/completions/loopgate\n  loopgate completions zsh > \"${fpath[1]}/_loopgate\"\n  loopgate completions fish > ~/.config/fish/completions/loopgate.fish"
    )]
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff)
    #[command(after_help = "Example:\n  loopgate man > ~/.local/share/man/man1/loopgate.1")]
    Man,
}

impl Command {
    /// The hook event a hook subcommand expects on stdin.
    pub fn hook_event(&self) -> Option<Event> {
        Some(match self {
            Command::SessionStart => Event::SessionStart,
            Command::PreToolUse => Event::PreToolUse,
            Command::PostToolUse => Event::PostToolUse,
            Command::PostToolUseFailure => Event::PostToolUseFailure,
            Command::PostToolBatch => Event::PostToolBatch,
            Command::Stop => Event::Stop,
            Command::SubagentStop => Event::SubagentStop,
            Command::ConfigChange => Event::ConfigChange,
            Command::FileChanged => Event::FileChanged,
            Command::UserPromptSubmit => Event::UserPromptSubmit,
            Command::PromptExpansion => Event::UserPromptExpansion,
            Command::PermissionRequest => Event::PermissionRequest,
            _ => return None,
        })
    }

    /// Whether running this command changes loopgate's wiring, state or sessions: what the
    /// guard refuses when the agent runs it. Judged on the parsed command, so a flag that makes
    /// a command only look (`gc --dry-run`, `setup --show-bin`) is seen for what it is.
    pub fn changes_something(&self) -> bool {
        match self {
            Command::Gc { dry_run, .. } => !dry_run,
            Command::Setup { show_bin, .. } => !show_bin,
            // Continuing a halted session is the person's, as a reset is.
            Command::Reset { .. } | Command::Continue { .. } => true,
            c => c.hook_event().is_some(),
        }
    }

    /// The subcommand's name as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::SessionStart => "session-start",
            Command::PreToolUse => "pre-tool-use",
            Command::PostToolUse => "post-tool-use",
            Command::PostToolUseFailure => "post-tool-use-failure",
            Command::PostToolBatch => "post-tool-batch",
            Command::Stop => "stop",
            Command::SubagentStop => "subagent-stop",
            Command::ConfigChange => "config-change",
            Command::FileChanged => "file-changed",
            Command::UserPromptSubmit => "user-prompt-submit",
            Command::PromptExpansion => "prompt-expansion",
            Command::PermissionRequest => "permission-request",
            Command::Status { .. } => "status",
            Command::Statusline { .. } => "statusline",
            Command::Reset { .. } => "reset",
            Command::Halted { .. } => "halted",
            Command::Continue { .. } => "continue",
            Command::Report { .. } => "report",
            Command::Explain { .. } => "explain",
            Command::Config { .. } => "config",
            Command::Doctor { .. } => "doctor",
            Command::Gc { .. } => "gc",
            Command::Replay { .. } => "replay",
            Command::Setup { .. } => "setup",
            Command::Completions { .. } => "completions",
            Command::Man => "man",
            Command::Demo { .. } => "demo",
        }
    }
}

impl Cli {
    /// Rejects an option given before a manual command it means nothing to, so that
    /// `loopgate --observe status` is not silently the same as `loopgate status`.
    pub fn check_options(&self) -> Result<(), String> {
        if self.command.hook_event().is_some() {
            return Ok(());
        }
        let (state, config, observe) = match &self.command {
            Command::Status { .. }
            | Command::Statusline { .. }
            | Command::Reset { .. }
            | Command::Halted { .. }
            | Command::Continue { .. }
            | Command::Report { .. } => (true, false, false),
            Command::Explain { .. } | Command::Doctor { .. } | Command::Gc { .. } => {
                (true, true, false)
            }
            Command::Config { .. } => (false, true, true),
            Command::Replay { .. } => (false, true, false),
            Command::Setup { .. } => (false, false, true),
            _ => (false, false, false),
        };
        let name = self.command.name();
        for (given, applies, flag) in [
            (self.state_dir.is_some(), state, "--state-dir"),
            (self.config.is_some(), config, "--config"),
            (self.observe, observe, "--observe"),
            (self.agent.is_some(), false, "--agent"),
            (self.plugin.is_some(), false, "--plugin"),
            (self.ignore_env, false, "--ignore-env"),
        ] {
            if given && !applies {
                if flag == "--agent" && name == "setup" {
                    return Err("--agent goes after `setup`: `loopgate setup --agent <cli>`".into());
                }
                return Err(format!("{flag} does not apply to `loopgate {name}`"));
            }
        }
        Ok(())
    }

    /// `--state-dir` given after the subcommand, else before it.
    pub fn state_dir_for(&self, arg: &StateArg) -> Option<PathBuf> {
        arg.dir.clone().or_else(|| self.state_dir.clone())
    }

    /// `--config` given after the subcommand, else before it.
    pub fn config_for(&self, arg: &ConfigArg) -> Option<PathBuf> {
        arg.file.clone().or_else(|| self.config.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
        for sub in Cli::command().get_subcommands() {
            let name = sub.get_name();
            let args: Vec<&str> = match name {
                "reset" => vec!["loopgate", name, "--all"],
                "continue" => vec!["loopgate", name, "--latest"],
                "replay" => vec!["loopgate", name, "x"],
                "completions" => vec!["loopgate", name, "bash"],
                "help" => continue,
                _ => vec!["loopgate", name],
            };
            let cli = Cli::try_parse_from(&args).unwrap();
            assert_eq!(cli.command.name(), name);
        }
    }

    #[test]
    fn subcommand_names_follow_hook_events() {
        let cli = Cli::try_parse_from(["loopgate", "post-tool-use-failure"]).unwrap();
        assert_eq!(cli.command.hook_event(), Some(Event::PostToolUseFailure));
        let cli = Cli::try_parse_from(["loopgate", "--observe", "pre-tool-use"]).unwrap();
        assert!(cli.observe);
        assert_eq!(cli.command.name(), "pre-tool-use");
    }

    #[test]
    fn options_apply_only_where_they_mean_something() {
        let ok = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).unwrap();
            cli.check_options()
        };
        assert!(ok(&["loopgate", "--state-dir", "/s", "status"]).is_ok());
        assert!(ok(&["loopgate", "status", "--state-dir", "/s"]).is_ok());
        assert!(ok(&["loopgate", "--observe", "setup"]).is_ok());
        assert_eq!(
            ok(&["loopgate", "--observe", "status"]),
            Err("--observe does not apply to `loopgate status`".into())
        );
        assert!(ok(&["loopgate", "--config", "/c", "reset", "--all"]).is_err());
        assert!(Cli::try_parse_from(["loopgate", "status", "--observe"]).is_err());
        let cli = Cli::try_parse_from(["loopgate", "setup", "--restore"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Setup {
                restore: Some(None),
                ..
            }
        ));
        let cli = Cli::try_parse_from(["loopgate", "setup", "--restore", "/b"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Setup {
                restore: Some(Some(_)),
                ..
            }
        ));
    }

    #[test]
    fn help_has_examples_and_no_hook_options_under_manual_commands() {
        let mut cmd = Cli::command();
        let top = cmd.render_long_help().to_string();
        assert!(top.contains("Examples:"), "{top}");
        let status = cmd
            .find_subcommand_mut("status")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(
            status.contains("--state-dir") && !status.contains("--observe"),
            "{status}"
        );
        assert!(VERSION.contains(" ("), "{VERSION}");
    }
}
