//! The same environment failure across edits that cannot fix it (issue 27, principle 7). A
//! missing compiler, JDK, program or signing key is not touched by editing the project's files:
//! each edit is a new state of the work, so the repeat rule starts over after it, and an agent
//! that edits, re-runs and gets the very same "JAVA_HOME is not set" goes round for ever. Here the
//! run of identical environment failures of one call is followed across new states that only file
//! edits made; anything that may have changed the machine (a command that succeeded and is not a
//! plain look, a new prompt) ends it.

use super::{Call, View};
use crate::judge::ledger::{Entry, Status};
use crate::judge::outcome::ErrorClass;
use crate::protocol::tool::ToolClass;
use crate::protocol::verdict::{Action, Severity, Verdict};
use crate::util::canon::Digest16;
use serde_json::Value;

pub const NAME: &str = "environment";

/// The latest run of one call's identical environment failures.
struct Run<'a> {
    last: &'a Entry,
    answers: u32,
    /// File edits between the first failure and now.
    edits: u32,
}

pub fn check(v: &View, call: &Call) -> Option<Verdict> {
    let cfg = &v.config.detectors.repeat;
    if !cfg.enabled || call.class != ToolClass::Shell {
        return None;
    }
    let Some(run) = run(&v.ledger.entries, &call.key, v.world.epoch) else {
        return lacking(v, call);
    };
    // Without an edit between, the repeat rule judges it (and sooner); a run too short of this
    // one command may still be one of several commands that all lack the same program.
    if run.edits == 0 || run.answers < cfg.environment_failures.max(2) {
        return lacking(v, call);
    }
    if v.now_ms.saturating_sub(run.last.end_ms) >= cfg.cooldown_minutes * 60_000 {
        return None;
    }
    let what = super::describe(&run.last.tool, &run.last.target);
    let error = if run.last.preview.is_empty() {
        String::new()
    } else {
        format!(" ({})", run.last.preview)
    };
    let reason = format!(
        "LOOP_DETECTED (loopgate): {what} has failed {} times with the same environment error{error}, \
         with {} edit{} of the project's files between. Editing the project does not give the machine \
         what it lacks: fix the environment (install the tool, set the variable, use one that is \
         there), or stop and tell the user what is missing.",
        run.answers,
        run.edits,
        if run.edits == 1 { "" } else { "s" },
    );
    Some(
        Verdict::new(
            NAME,
            Action::Deny,
            Severity::of_count(run.answers + 1),
            reason,
        )
        .loop_warning()
        .with("call", run.last.key.short())
        .with("answers", run.answers)
        .with("edits_between", run.edits)
        .with("environment_failures", cfg.environment_failures),
    )
}

/// Different commands that all need what the machine lacks (issue 36): `javac A.java`, then
/// `javac -d out A.java`, then `cd src && javac *.java`, each told `javac: command not found`; or
/// Copilot's `powershell` tool going back to PowerShell where `pwsh` is not available. Each is a
/// new call, so neither the repeat rule nor the run above sees it; what repeats is the missing
/// program. The next call that needs it is refused once `environment_failures` calls of this
/// turn failed for lack of it, with nothing between that may have installed it.
fn lacking(v: &View, call: &Call) -> Option<Verdict> {
    let cfg = &v.config.detectors.repeat;
    let command = call
        .input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("");
    let latest_turn = v.ledger.answers().next()?.turn;
    let this_turn = || {
        v.ledger
            .answers()
            .take_while(move |e| e.turn == latest_turn)
            .filter(|e| e.class == ToolClass::Shell)
    };
    let lacked = |e: &Entry| {
        (e.status == Status::Failed && e.error_class == Some(ErrorClass::Environment))
            .then(|| crate::judge::outcome::missing_program(&e.preview))
            .flatten()
    };
    let (program, first) = this_turn().find_map(|e| lacked(e).map(|p| (p, e)))?;
    let mut failures: Vec<&Entry> = Vec::new();
    for e in this_turn() {
        if e.status == Status::Ok {
            // It ran, or it may have installed it: what was missing may be there now.
            let ran_it =
                has_word(&e.target, &program) || (e.tool == first.tool && !names(first, &program));
            if ran_it || e.target.contains("install") || e.target.ends_with('…') {
                break;
            }
        } else if lacked(e).as_deref() == Some(program.as_str()) {
            failures.push(e);
        }
    }
    // The call needs it: it names it, or it is the tool that ran on it (`pwsh` for PowerShell).
    let needs = has_word(command, &program) || (call.tool == first.tool && !names(first, &program));
    let tries = failures.len() as u32;
    let reworded = failures.iter().any(|f| f.key != call.key);
    if !needs || !reworded || tries < cfg.environment_failures.max(2) {
        return None;
    }
    let error = if first.preview.is_empty() {
        String::new()
    } else {
        format!(" ({})", first.preview)
    };
    let reason = format!(
        "LOOP_DETECTED (loopgate): {tries} commands in this turn have failed because the machine \
         lacks `{program}`{error}, and nothing has installed it since. This one needs it too and \
         will fail the same way: install it (or use one that is there), or stop and tell the user \
         what is missing."
    );
    Some(
        Verdict::new(NAME, Action::Deny, Severity::of_count(tries + 1), reason)
            .loop_warning()
            .with("call", first.key.short())
            .with("answers", tries)
            .with("environment_failures", cfg.environment_failures),
    )
}

/// The failed call's own command names the missing program (`javac A.java`), rather than the
/// program being the tool's runtime (`pwsh` under Copilot's `powershell`).
fn names(e: &Entry, program: &str) -> bool {
    has_word(&e.target, program)
}

/// `word` stands alone in `text` (`python -m x`, `/usr/bin/javac`), not inside another word.
fn has_word(text: &str, word: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+')))
        .any(|w| w == word || w.strip_suffix(".exe") == Some(word))
}

/// The run of identical environment failures of `key`, newest first, through new states that
/// only file edits of the same turn made.
fn run<'a>(
    entries: &'a std::collections::VecDeque<Entry>,
    key: &Digest16,
    epoch_now: u32,
) -> Option<Run<'a>> {
    let mut mine = (0..entries.len())
        .rev()
        .filter(|&i| entries[i].status.answered() && entries[i].key == *key);
    let last_at = mine.next()?;
    let last = &entries[last_at];
    if last.status != Status::Failed
        || last.error_class != Some(ErrorClass::Environment)
        || last.answer.is_none()
    {
        return None;
    }
    let tail = last_at + 1..entries.len();
    let mut edits = edits_only(entries, tail, last.epoch_after, epoch_now, last.turn)?;
    let mut answers = 1;
    let mut newer_at = last_at;
    for at in mine {
        let e = &entries[at];
        if e.status != Status::Failed || e.answer != last.answer {
            break;
        }
        let between = at + 1..newer_at;
        match edits_only(
            entries,
            between,
            e.epoch_after,
            entries[newer_at].epoch,
            last.turn,
        ) {
            Some(n) => edits += n,
            None => break,
        }
        answers += 1;
        newer_at = at;
    }
    Some(Run {
        last,
        answers,
        edits,
    })
}

/// The file edits among `entries[range]` when they alone moved the epoch from `from` to `to`;
/// `None` when something else may have changed the machine: a command that succeeded and is more
/// than a look (it may have installed what was missing), a command that wrote files, another
/// turn, or an epoch move no edit explains (a new prompt: the person may have fixed it).
fn edits_only(
    entries: &std::collections::VecDeque<Entry>,
    range: std::ops::Range<usize>,
    from: u32,
    to: u32,
    turn: u32,
) -> Option<u32> {
    let mut edits = 0;
    for e in entries.range(range) {
        if e.turn != turn {
            return None;
        }
        if e.class == ToolClass::Shell && e.status == Status::Ok && !only_looks(&e.target) {
            return None;
        }
        if e.novel {
            if !e.class.changes_files() {
                return None;
            }
            edits += 1;
        }
    }
    (to.checked_sub(from) == Some(edits)).then_some(edits)
}

/// A shell command every part of which only looks (`ls /usr/lib/jvm`, `which javac`,
/// `echo $JAVA_HOME`): it cannot have given the machine what it lacked.
fn only_looks(command: &str) -> bool {
    const LOOKS: &[&str] = &[
        "ls", "cat", "head", "tail", "grep", "rg", "wc", "pwd", "echo", "which", "type", "file",
        "stat", "tree", "diff", "du", "df", "env", "printenv", "whoami", "uname", "less", "find",
        "readlink", "realpath", "command",
    ];
    // A clipped target may hide a later part: judge only whole commands.
    if command.ends_with('…') || command.is_empty() {
        return false;
    }
    command
        .split(['|', ';', '&', '\n'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .all(|part| {
            let mut words = part.split_whitespace();
            let first = words.next().unwrap_or("");
            match first {
                "git" => matches!(
                    words.next(),
                    Some("status" | "diff" | "log" | "show" | "branch")
                ),
                "find" => !part.contains("-delete") && !part.contains("-exec"),
                _ => LOOKS.contains(&first),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::only_looks;

    #[test]
    fn a_look_is_told_from_what_may_install() {
        for look in [
            "ls /usr/lib/jvm",
            "which javac || echo missing",
            "echo $JAVA_HOME",
            "git status && git diff",
            "find / -name javac 2>/dev/null | head",
        ] {
            assert!(only_looks(look), "{look}");
        }
        for change in [
            "sudo apt-get install -y openjdk-17-jdk",
            "ls && brew install gcc",
            "find . -name '*.class' -delete",
            "sdk install java",
            "npm install",
            "export JAVA_HOME=/opt/jdk && mvn test",
        ] {
            assert!(!only_looks(change), "{change}");
        }
    }
}
