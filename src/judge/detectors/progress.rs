//! Layer 3: the progress gate on Stop. A turn may end unless it was visibly trying and failing —
//! it attempted file changes that left the worktree untouched, or, trying to change something,
//! walked into loopgate's refusals regardless — and nothing under the project changed since the
//! prompt. Reading, researching, running tests and
//! reporting are legitimate ends and are never blocked.

use crate::config::{Progress, When};
use crate::judge::state::Turn;
use crate::protocol::verdict::{Action, Severity, Verdict};

pub const NAME: &str = "progress";

/// What the gate concluded, also used by the circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// Not judged: disabled, attended, outside git, or no baseline for this turn.
    NotApplicable,
    Progress,
    /// Nothing changed, but the turn showed no sign of trying and failing.
    QuietTurn,
    /// Nothing changed and the turn was trying and failing.
    NoProgress,
}

/// Whether the gate acts in this session at all (enabled, and attended only when configured).
pub fn may_act(attended: Option<bool>, cfg: &Progress) -> bool {
    cfg.enabled
        && match cfg.when {
            When::Always => true,
            When::Unattended => attended == Some(false),
        }
}

/// Judges the turn. `changed` asks the worktree whether anything under the project changed since
/// the turn's stamp (`None`: cannot tell, which never blocks); it is the costliest thing a hook
/// call can do, so it runs only when the answer depends on it: a turn that changed files through
/// its tools, or showed no sign of trying and failing, is judged without it.
pub fn judge(
    turn: &Turn,
    attended: Option<bool>,
    cfg: &Progress,
    changed: impl FnOnce(&str) -> Option<bool>,
) -> Judgement {
    if !may_act(attended, cfg) {
        return Judgement::NotApplicable;
    }
    if turn.changes > 0 {
        return Judgement::Progress;
    }
    let Some(base) = turn.baseline.as_deref() else {
        return Judgement::NotApplicable;
    };
    // Armed only by an agent that kept failing to edit, or that walked into a refusal while
    // trying to change something (issue 27): a warning never arms it, and a turn that never
    // tried to change a file (a check, a question, a review) ends freely.
    if turn.edit_failures == 0 && (turn.interventions == 0 || turn.edit_attempts == 0) {
        return Judgement::QuietTurn;
    }
    match changed(base) {
        None => Judgement::NotApplicable,
        Some(true) => Judgement::Progress,
        Some(false) => Judgement::NoProgress,
    }
}

/// Blocks the Stop when the judgement is no progress and the per-turn budget allows.
pub fn check(
    t: &Turn,
    stop_hook_active: bool,
    judgement: Judgement,
    cfg: &Progress,
) -> Option<Verdict> {
    if judgement != Judgement::NoProgress {
        return None;
    }
    // Claude Code ends the turn itself after 9 blocks; stay well below, and never block once the
    // budget is spent, whatever stop_hook_active says.
    if t.stop_blocks >= cfg.max_blocks.min(8) {
        return None;
    }
    let mut signs = Vec::new();
    if t.edit_failures > 0 {
        signs.push(format!(
            "{} of its {} file edits failed or were rejected",
            t.edit_failures,
            t.edit_attempts.max(t.edit_failures)
        ));
    }
    if t.interventions > 0 && t.edit_attempts > 0 {
        signs.push(format!(
            "calls loopgate refused were made again {} time{} with nothing changed",
            t.interventions,
            if t.interventions == 1 { "" } else { "s" }
        ));
    }
    let reason = format!(
        "loopgate: nothing under the project has changed since this task began (no modified or new files, \
         no new commit), yet {}. Before you finish, make sure the change you intended is really on disk: \
         re-read the file you meant to edit, apply the edit against its current text, and check `git status`. \
         If it cannot be done, say plainly that the task is not finished and what blocks it.",
        signs.join(" and ")
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::Medium, reason)
            .with("edit_attempts", t.edit_attempts)
            .with("edit_failures", t.edit_failures)
            .with("interventions", t.interventions)
            .with("stop_blocks", t.stop_blocks)
            .with("max_blocks", cfg.max_blocks)
            .with("stop_hook_active", stop_hook_active),
    )
}

/// The Stop gate: the turn judged, what was found kept on it, and a block when it made no
/// progress and the budget allows.
pub fn at_stop(turn: &mut Turn, s: &super::Stop) -> Option<Verdict> {
    let cfg = &s.config.progress;
    let judgement = judge(turn, s.attended, cfg, s.changed);
    let verdict = check(turn, s.active, judgement, cfg);
    match judgement {
        Judgement::Progress => turn.progress = Some(true),
        Judgement::NoProgress => turn.progress = Some(false),
        _ => {}
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing_turn() -> Turn {
        Turn {
            baseline: Some("f0".into()),
            edit_attempts: 2,
            edit_failures: 2,
            ..Turn::default()
        }
    }

    /// A worktree that answers whether it changed since stamp `f0`: it did when `now` is not
    /// `f0`.
    fn fp(now: &str) -> impl FnOnce(&str) -> Option<bool> + '_ {
        move |base| Some(base != now)
    }

    fn no_scan(_: &str) -> Option<bool> {
        panic!("this judgement must not scan the worktree")
    }

    #[test]
    fn blocks_only_failing_turns_without_change() {
        let cfg = Progress::default();
        let t = failing_turn();
        let j = judge(&t, Some(false), &cfg, fp("f0"));
        assert_eq!(j, Judgement::NoProgress);
        assert!(check(&t, false, j, &cfg).is_some());
        assert_eq!(judge(&t, Some(false), &cfg, fp("f1")), Judgement::Progress);
        assert_eq!(
            judge(&t, Some(false), &cfg, |_| None),
            Judgement::NotApplicable
        );
        let quiet = Turn {
            baseline: Some("f0".into()),
            ..Turn::default()
        };
        assert_eq!(
            judge(&quiet, Some(false), &cfg, no_scan),
            Judgement::QuietTurn
        );
        let changed = Turn {
            changes: 1,
            ..failing_turn()
        };
        assert_eq!(
            judge(&changed, Some(false), &cfg, no_scan),
            Judgement::Progress
        );
    }

    #[test]
    fn attended_sessions_and_spent_budgets_pass() {
        let cfg = Progress::default();
        let t = failing_turn();
        assert_eq!(
            judge(&t, Some(true), &cfg, no_scan),
            Judgement::NotApplicable
        );
        let always = Progress {
            when: When::Always,
            ..Progress::default()
        };
        assert_eq!(
            judge(&t, Some(true), &always, fp("f0")),
            Judgement::NoProgress
        );
        let spent = Turn {
            stop_blocks: 2,
            ..failing_turn()
        };
        assert!(check(&spent, true, Judgement::NoProgress, &cfg).is_none());
    }
}
