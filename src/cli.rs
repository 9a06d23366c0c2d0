//! Command-line surface: one clap-derive enum, one variant per hook event or manual command.

use crate::payload::Event;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "loopgate",
    version,
    about = "Detects a Claude Code agent stuck in a loop and breaks the loop"
)]
pub struct Cli {
    /// Where per-session state and events.jsonl live [env: LOOPGATE_STATE_DIR]
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Config file to use instead of the project and user files [env: LOOPGATE_CONFIG]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Compute and log every decision, but deny, block and inject nothing [env: LOOPGATE_MODE=observe]
    #[arg(long, global = true)]
    pub observe: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
    /// Hook: UserPromptSubmit (starts a new turn)
    UserPromptSubmit,
    /// Show sessions with their counters and last decisions
    Status {
        /// Only this session id
        #[arg(long)]
        session: Option<String>,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Clear loop state (config and event log stay)
    Reset {
        /// The session to reset
        #[arg(long, conflicts_with = "all", required_unless_present = "all")]
        session: Option<String>,
        /// Reset every session
        #[arg(long)]
        all: bool,
    },
    /// What loopgate saw and did: counts, statistics, and per session inputs-or-outputs
    Report {
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
    /// Feed Claude Code transcripts through the detectors offline (observe mode, in memory)
    Replay {
        /// Transcript files (.jsonl) or directories searched recursively (e.g. ~/.claude/projects)
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
        /// List only would-be blocks (warnings still count in the summary)
        #[arg(long)]
        blocks_only: bool,
    },
    /// Wire loopgate's hooks into a Claude Code settings file (used by install.sh)
    Setup {
        /// Settings file [default: ~/.claude/settings.json]
        #[arg(long)]
        settings: Option<PathBuf>,
        /// Path of the loopgate binary the hooks call [default: this executable]
        #[arg(long)]
        bin: Option<PathBuf>,
        /// Remove loopgate's entries instead
        #[arg(long)]
        uninstall: bool,
        /// Install into Claude Code's managed settings (managed-settings.d/loopgate.json), where
        /// user and project settings cannot disable the hooks; needs root
        #[arg(long, conflicts_with = "settings")]
        managed: bool,
        /// Managed-settings directory [default: /etc/claude-code, or the macOS/Windows one]
        #[arg(long, requires = "managed", value_name = "DIR")]
        managed_dir: Option<PathBuf>,
    },
}

impl Command {
    /// The hook event a hook subcommand expects on stdin.
    pub fn hook_event(&self) -> Option<Event> {
        Some(match self {
            Command::PreToolUse => Event::PreToolUse,
            Command::PostToolUse => Event::PostToolUse,
            Command::PostToolUseFailure => Event::PostToolUseFailure,
            Command::PostToolBatch => Event::PostToolBatch,
            Command::Stop => Event::Stop,
            Command::SubagentStop => Event::SubagentStop,
            Command::UserPromptSubmit => Event::UserPromptSubmit,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn subcommand_names_follow_hook_events() {
        let cli = Cli::try_parse_from(["loopgate", "post-tool-use-failure"]).unwrap();
        assert_eq!(cli.command.hook_event(), Some(Event::PostToolUseFailure));
        let cli = Cli::try_parse_from(["loopgate", "--observe", "pre-tool-use"]).unwrap();
        assert!(cli.observe);
    }
}
