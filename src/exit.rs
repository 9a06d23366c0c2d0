//! Exit codes carry protocol meaning for Claude Code, so they are decided here and nowhere else.
//!
//! Exit 2 is deliberately absent: Claude Code turns it into a blocking error that leaks the hook's
//! command line to the model. Deliberate blocks are JSON answers on exit 0.

use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The answer (possibly empty) is on stdout.
    Ok,
    /// Non-blocking error: Claude Code lets the call proceed and shows our one stderr line.
    FailOpen,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        match e {
            Exit::Ok => ExitCode::SUCCESS,
            Exit::FailOpen => ExitCode::from(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_open_is_one_never_two() {
        assert_eq!(ExitCode::from(Exit::FailOpen), ExitCode::from(1));
        assert_eq!(ExitCode::from(Exit::Ok), ExitCode::SUCCESS);
    }
}
