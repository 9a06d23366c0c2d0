//! Exit codes carry protocol meaning for Claude Code, so they are decided here and nowhere else.
//!
//! Exit 2 is deliberately absent: Claude Code turns it into a blocking error that leaks the hook's
//! command line to the model. Deliberate blocks are JSON answers on exit 0.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};

/// The exit code of [`Exit::FailOpen`]: 1, which every CLI but one reads as "the hook failed, go
/// on". Copilot CLI reads 1 from a preToolUse hook as a denial, so its dialect sets 0.
static FAIL_OPEN: AtomicU8 = AtomicU8::new(1);

/// Sets the code a failure exits with, once the agent CLI is known (0 or 1; never 2).
pub fn fail_open_with(code: u8) {
    FAIL_OPEN.store(code.min(1), Ordering::Relaxed);
    crate::platform::start::crash_exit_with(code.min(1));
}

/// `loopgate halted`'s status for a halted session: neither success (0) nor the error every
/// command exits with (1), nor 2, which shells and CLIs use for a wrong command line.
pub const HALTED: u8 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The answer (possibly empty) is on stdout.
    Ok,
    /// Non-blocking error: Claude Code lets the call proceed and shows our one stderr line.
    FailOpen,
    /// `loopgate halted`: the session was halted by loopgate (a manual command, never a hook).
    Halted,
}

impl Exit {
    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::FailOpen => FAIL_OPEN.load(Ordering::Relaxed),
            Exit::Halted => HALTED,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
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
