//! What a person sees when the command line is wrong: clap's whole message (the missing
//! arguments, "a similar subcommand exists", the possible values, the usage line), pointing at
//! the subcommand's own `--help`, on exit 1 — clap's own exit 2 reads as a block to Claude Code.

use crate::cli::Cli;
use clap::CommandFactory;
use std::ffi::OsString;

/// What a bare `loopgate` prints: the few commands a newcomer needs, and where the rest are.
const START: &str = "\
loopgate detects an AI coding agent stuck in a loop and breaks the loop. It runs as a hook of
Claude Code (or Codex, Gemini, Qwen Code, Copilot CLI) on every tool call.

Usage: loopgate <COMMAND> [OPTIONS]

Start here:
  loopgate demo      see a loop denied, in a throw-away directory
  loopgate setup     wire the hooks into ~/.claude/settings.json (--agent for another CLI)
  loopgate doctor    check the installation
  loopgate status    recent sessions and what loopgate did in them
  loopgate report    what it saw and did, and what the loops cost

Every command and option: loopgate --help
";

/// What to do with a command line clap refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Text for stdout, exit 0: `--help`, `--version`, a bare `loopgate`.
    Show(String),
    /// Text for stderr, exit 1.
    Error(String),
}

/// Turns clap's refusal of `args` (without the program name) into what to print.
pub fn refusal(e: &clap::Error, args: &[OsString]) -> Refusal {
    let words: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    if words.is_empty() {
        // Nothing asked for: where to start, not an error.
        return Refusal::Show(START.to_string());
    }
    if words.first() == Some(&"help") && words.iter().any(|w| *w == "--help" || *w == "-h") {
        return Refusal::Show(Cli::command().render_long_help().to_string());
    }
    if !e.use_stderr() {
        return Refusal::Show(e.render().to_string());
    }
    let sub = subcommand(&words);
    let help = match &sub {
        Some(sub) => format!("'loopgate {sub} --help'"),
        None => "'loopgate --help'".to_string(),
    };
    let text = e.render().to_string();
    let text = text
        .trim_end()
        .replacen("error: ", "loopgate: ", 1)
        .replace("'--help'", &help);
    if sub.as_deref().is_some_and(is_hook) {
        // A hook command an agent CLI runs: its stderr is one line, whatever went wrong.
        let parts: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        return Refusal::Error(format!("{}\n", parts.join("; ")));
    }
    Refusal::Error(format!("{text}\n"))
}

/// Whether `name` is a hook subcommand (run by an agent CLI, not typed by a person).
fn is_hook(name: &str) -> bool {
    Cli::command()
        .find_subcommand(name)
        .and_then(|s| s.get_about())
        .is_some_and(|a| a.to_string().starts_with("Hook:"))
}

/// The first word of the command line that names a subcommand, as the user would type it.
fn subcommand(words: &[&str]) -> Option<String> {
    let cmd = Cli::command();
    words.iter().find_map(|w| {
        cmd.get_subcommands()
            .find(|s| s.get_name() == *w)
            .map(|s| s.get_name().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn refuse(args: &[&str]) -> Refusal {
        let e = Cli::try_parse_from(std::iter::once("loopgate").chain(args.iter().copied()))
            .expect_err("refused");
        let args: Vec<OsString> = args.iter().map(Into::into).collect();
        refusal(&e, &args)
    }

    #[test]
    fn errors_keep_what_to_do_and_point_at_the_subcommands_help() {
        let Refusal::Error(t) = refuse(&["reset"]) else {
            panic!()
        };
        assert!(t.contains("--session <SESSION>"), "{t}");
        assert!(t.contains("'loopgate reset --help'"), "{t}");
        assert!(t.starts_with("loopgate: "), "{t}");
    }

    #[test]
    fn a_hook_commands_error_is_one_line() {
        let Refusal::Error(t) = refuse(&["pre-tool-use", "--bogus"]) else {
            panic!()
        };
        assert_eq!(t.lines().count(), 1, "{t}");
        assert!(t.contains("'loopgate pre-tool-use --help'"), "{t}");
    }

    #[test]
    fn bare_and_help_help_show_help() {
        assert!(matches!(refuse(&[]), Refusal::Show(t) if t.contains("Usage:")));
        assert!(matches!(refuse(&["help", "--help"]), Refusal::Show(t) if t.contains("Usage:")));
    }
}
