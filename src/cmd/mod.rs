//! Manual commands: what a person runs, as opposed to the hooks Claude Code runs.

pub mod replay;
pub mod report;
pub mod reset;
pub mod setup;
pub mod status;
