//! Conversation loops — analysis paralysis (seed 001): the same read, search or listing again and
//! again with the same answer and nothing changed in between. Stage 1 is this guidance; stage 2 is
//! the turn gate's block of the same read (`read_only_output_repeats`).

use crate::config::Paralysis;
use crate::detectors::describe;
use crate::state::Run;
use crate::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "analysis_paralysis";

pub fn on_outcome(run: &Run, read_only: bool, cfg: &Paralysis) -> Option<Verdict> {
    if !cfg.enabled || !read_only || run.outcome.is_none() || run.count != cfg.max_repeats.max(2) {
        return None;
    }
    let reason = format!(
        "loopgate: {} has given you the same answer {} times with nothing changed in between. Stop gathering: \
         review what you already know, decide, and act on it.",
        describe(&run.tool, &run.target),
        run.count
    );
    Some(
        Verdict::new(NAME, Action::Warn, Severity::of_count(run.count), reason)
            .with("repeats", run.count),
    )
}
