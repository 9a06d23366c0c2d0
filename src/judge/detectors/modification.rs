//! Modification loops (seed 001): the same file edited again and again around the same code, or
//! the same Edit rejected again and again ("String to replace not found" — the indentation loop).
//! Edits are compared by hashes of their meaningful lines, never by storing the code itself.

use crate::config::Modification;
use crate::judge::state::{AgentState, EditRec};
use crate::protocol::verdict::{Action, Severity, Verdict};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub const NAME: &str = "modification";
const MAX_EDITS: usize = 32;
const MAX_LINES: usize = 24;

/// Hashes of the lines an edit targets (its `old_string`), skipping lines too short to identify
/// code (`}`, blank lines).
pub fn touched_lines(input: &Value) -> Vec<u32> {
    let mut texts: Vec<&str> = Vec::new();
    if let Some(s) = input.get("old_string").and_then(Value::as_str) {
        texts.push(s);
    }
    if let Some(edits) = input.get("edits").and_then(Value::as_array) {
        for e in edits {
            if let Some(s) = e.get("old_string").and_then(Value::as_str) {
                texts.push(s);
            }
        }
    }
    let mut out: Vec<u32> = texts
        .iter()
        .flat_map(|t| t.lines())
        .map(str::trim)
        .filter(|l| l.len() >= 4)
        .map(|l| {
            let d = Sha256::digest(l.as_bytes());
            u32::from_le_bytes([d[0], d[1], d[2], d[3]])
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out.truncate(MAX_LINES);
    out
}

/// The same code: most of the smaller target's lines are in the other (agents pad `old_string`
/// with context lines, so one shared line is not enough).
fn overlaps(a: &[u32], b: &[u32]) -> bool {
    let shared = a.iter().filter(|x| b.binary_search(x).is_ok()).count();
    let smaller = a.len().min(b.len());
    smaller > 0 && shared * 2 > smaller
}

/// Earlier edits of `path` within the window that touched the same code as `lines`.
fn same_code(
    agent: &AgentState,
    path: &str,
    lines: &[u32],
    now_ms: u64,
    cfg: &Modification,
) -> (u32, u32) {
    let window = cfg.window_minutes * 60_000;
    let mut same = 0;
    let mut rejected = 0;
    for e in agent.edits.iter().filter(|e| e.path == path) {
        if now_ms.saturating_sub(e.at_ms) > window {
            continue;
        }
        if !e.ok {
            rejected += 1;
        }
        if !lines.is_empty() && overlaps(&e.lines, lines) {
            same += 1;
        }
    }
    (same, rejected)
}

/// An Edit that failed because its target text is not in the file (the indentation loop), as
/// opposed to a sibling call's error or a stale read: in every CLI's words.
pub fn is_miss(error: &str) -> bool {
    crate::judge::outcome::edit_missed(error)
}

/// Before an edit or write of a file: earlier attempts on it that ran and failed with the same
/// class of error, with the file and the work unchanged since, are one failure however the text
/// to replace was varied between them (Gemini's `replace` retried with the old text reworded, a
/// re-read of the unchanged file between each try). Refused once the error class's repeat
/// budget is spent, as the repeat rule refuses the same call. An edit Claude Code rejected
/// before its hooks (`Rejected`) is not counted: there, any edit that reaches PreToolUse has
/// already been checked against the file.
pub fn missed_edits(v: &super::View, call: &super::Call) -> Option<Verdict> {
    use crate::judge::ledger::Status;
    use crate::judge::outcome::ErrorClass;
    if !call.class.changes_files() || !v.config.detectors.modification.enabled {
        return None;
    }
    let target = crate::judge::redact::target(call.tool, call.input);
    if target.is_empty() {
        return None;
    }
    let mut failures: Vec<&crate::judge::ledger::Entry> = Vec::new();
    for e in v.ledger.answers() {
        if e.epoch_after != v.world.epoch {
            break;
        }
        if !e.class.changes_files() || e.target != target {
            continue;
        }
        match e.status {
            Status::Failed => {}
            Status::Ok => break,
            _ => continue,
        }
        if failures
            .first()
            .is_some_and(|f| f.error_class != e.error_class)
        {
            break;
        }
        failures.push(e);
    }
    let last = *failures.first()?;
    let allowed = super::repeat::failure_budget(last.error_class, &v.config.detectors.repeat);
    let tries = failures.len() as u32;
    // The very same call every time is the repeat rule's to judge.
    let reworded = failures.iter().any(|f| f.key != call.key);
    if tries <= allowed || !reworded {
        return None;
    }
    let class = last.error_class.map_or("unknown", ErrorClass::name);
    let error = if last.preview.is_empty() {
        String::new()
    } else {
        format!(": {}", last.preview)
    };
    let reason = format!(
        "LOOP_DETECTED (loopgate): {tries} edits of {target} have failed the same way ({class} \
         error{error}), and the file has not changed since. Another variation of the same edit will \
         fail too: read the file's current text where you mean to change it and copy the exact \
         lines, or rewrite the whole block (or the file) in one go; if it cannot be done, tell the \
         user what blocks you."
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::of_count(tries + 1), reason)
            .loop_warning()
            .with("call", last.key.short())
            .with("failed_edits", tries)
            .with("stage", 2),
    )
}

fn guidance(path: &str, edits: u32, rejected: u32, minutes: u64) -> String {
    let rejected_note = if rejected > 0 {
        format!(", {rejected} of them rejected because the text to replace was not found")
    } else {
        String::new()
    };
    format!(
        "loopgate: {path} has been edited {edits} times in {minutes} minutes around the same code{rejected_note}. \
         Stop patching: read the file's current state, check the exact indentation and whitespace of the text you \
         want to replace, and consider rewriting the whole block (or the file, with Write) in one go."
    )
}

/// Records a finished or rejected edit and gives stage-1 guidance at the threshold.
pub fn record(
    agent: &mut AgentState,
    path: &str,
    input: &Value,
    ok: bool,
    now_ms: u64,
    cfg: &Modification,
) -> Option<Verdict> {
    let lines = touched_lines(input);
    let (same, rejected) = same_code(agent, path, &lines, now_ms, cfg);
    if agent.edits.len() >= MAX_EDITS {
        agent.edits.pop_front();
    }
    agent.edits.push_back(EditRec {
        path: path.to_string(),
        lines: lines.clone(),
        at_ms: now_ms,
        ok,
    });
    if !cfg.enabled {
        return None;
    }
    let edits = same + 1;
    let rejected = rejected + u32::from(!ok);
    let loop_of_edits = edits >= cfg.max_edits.max(2);
    let loop_of_rejections = !ok && rejected >= cfg.max_rejected.max(1);
    if !loop_of_edits && !loop_of_rejections {
        return None;
    }
    let n = edits.max(rejected);
    Some(
        Verdict::new(
            NAME,
            Action::Warn,
            Severity::of_count(n + 2),
            guidance(path, n, rejected, cfg.window_minutes),
        )
        .loop_warning()
        .with("edits_same_code", edits)
        .with("rejected", rejected)
        .with("stage", 1),
    )
}

/// Stage 2: an Edit that would touch the same code again, past the threshold by two, is denied.
pub fn check(
    agent: &AgentState,
    path: &str,
    input: &Value,
    now_ms: u64,
    cfg: &Modification,
) -> Option<Verdict> {
    if !cfg.enabled {
        return None;
    }
    let lines = touched_lines(input);
    let (same, rejected) = same_code(agent, path, &lines, now_ms, cfg);
    // Denying an edit is only justified once edits of this code keep failing too: an agent that
    // reworks one function against changing complaints (a linter, then a type checker) is slow,
    // not stuck.
    if same + 1 < cfg.max_edits.max(2) + 2 || rejected < cfg.max_rejected.max(1) {
        return None;
    }
    Some(
        Verdict::new(
            NAME,
            Action::Deny,
            Severity::of_count(same + 1),
            guidance(path, same, rejected, cfg.window_minutes),
        )
        .with("edits_same_code", same)
        .with("stage", 2),
    )
}

/// After an Edit's answer (applied, or rejected because its text was not found): recorded, and
/// stage-1 guidance at the threshold.
pub fn on_answer(a: &mut super::Answer) -> Option<Verdict> {
    let ok = a.status == crate::judge::ledger::Status::Ok;
    if !matches!(a.tool, "Edit" | "MultiEdit") || !a.status.answered() || !(ok || is_miss(a.error))
    {
        return None;
    }
    let path = a.input.get("file_path").and_then(Value::as_str);
    let cfg = &a.config.detectors.modification;
    record(a.agent, path.unwrap_or(""), a.input, ok, a.now_ms, cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn edit(old: &str, new: &str) -> Value {
        json!({"file_path": "/p/a.py", "old_string": old, "new_string": new})
    }

    #[test]
    fn same_code_four_times_guides_then_denies() {
        let cfg = Modification::default();
        let mut a = AgentState::default();
        let mut fired = Vec::new();
        for i in 0..5 {
            let input = edit(
                "    return compute(x)",
                &format!("    return compute(x) + {i}"),
            );
            assert!(
                check(&a, "/p/a.py", &input, i * 1000, &cfg).is_none(),
                "edit {i}"
            );
            fired.push(record(&mut a, "/p/a.py", &input, true, i * 1000, &cfg).is_some());
        }
        assert_eq!(fired, vec![false, false, false, true, true]);
        let input = edit("    return compute(x)", "    return 0");
        assert!(
            check(&a, "/p/a.py", &input, 6000, &cfg).is_none(),
            "successful edits only guide"
        );
        record(&mut a, "/p/a.py", &input, false, 6500, &cfg);
        assert!(
            check(&a, "/p/a.py", &input, 7000, &cfg).is_none(),
            "one failure is not a pattern"
        );
        record(&mut a, "/p/a.py", &input, false, 7500, &cfg);
        assert!(
            check(&a, "/p/a.py", &input, 8000, &cfg).is_some(),
            "stage 2 once edits keep failing"
        );
    }

    #[test]
    fn different_code_or_outside_the_window_is_ordinary() {
        let cfg = Modification::default();
        let mut a = AgentState::default();
        for i in 0..10 {
            let input = edit(
                &format!("def function_{i}():"),
                &format!("def function_{i}(x):"),
            );
            assert!(record(&mut a, "/p/a.py", &input, true, i * 1000, &cfg).is_none());
        }
        let mut a = AgentState::default();
        for i in 0..6 {
            let input = edit("    return compute(x)", "    return compute(y)");
            assert!(record(&mut a, "/p/a.py", &input, true, i * 10 * 60_000, &cfg).is_none());
        }
    }

    #[test]
    fn repeated_rejections_guide_at_the_second() {
        let cfg = Modification::default();
        let mut a = AgentState::default();
        let input = edit("if x:\n  pass", "if y:\n  pass");
        assert!(record(&mut a, "/p/a.py", &input, false, 0, &cfg).is_none());
        let v = record(&mut a, "/p/a.py", &input, false, 1000, &cfg).expect("guidance");
        assert!(
            v.reason.contains("check the exact indentation"),
            "{}",
            v.reason
        );
    }
}
