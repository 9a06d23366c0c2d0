//! What crosses the wire between an agent CLI and loopgate: the hook input, the verdicts as
//! data, their rendering per CLI, and the exit codes.

pub mod dialect;
pub mod exit;
pub mod payload;
pub mod render;
pub mod tool;
pub mod verdict;
