//! Sessions remember the project (issue 22). An outer loop ("Ralph") starts a fresh session for
//! every iteration, so no session's own state sees it going round. A small per-project record
//! keeps the signatures of its latest sessions' first turns (the prompt, the calls with their
//! answers, the state of the work they ended in, git's HEAD), written at a Stop and read only at
//! a session's first prompt, never on a tool call. When the record's latest sessions are
//! [`IDENTICAL`] identical sessions of this very prompt that made no progress, with HEAD where it
//! was, the next one is refused at its first prompt, or the person is told where a person is
//! known to attend (`verdict::refuses_prompt`). Any new state clears it: a session with progress, a new commit, another prompt.

#[cfg(test)]
use crate::protocol::verdict::Action;
use crate::protocol::verdict::Verdict;
use crate::util::canon::{hex16, Digest16};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const NAME: &str = "outer_loop";
/// The record's extension in the state directory (housekeeping leaves such files alone).
pub const EXT: &str = "project";
/// Sessions the record keeps.
const MAX_SESSIONS: usize = 8;
/// Identical no-progress sessions after which the next one is refused.
pub const IDENTICAL: usize = 2;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Record {
    /// Oldest first.
    pub sessions: Vec<SessionSig>,
    /// The system clock when loopgate last wrote the record (0: written before it kept this):
    /// a file changed well after it is someone else's write, an earlier copy put back.
    pub written_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionSig {
    pub session: String,
    /// Digests (hex) of the first prompt and of the whole first turn.
    pub prompt: String,
    pub signature: String,
    /// git's HEAD (hex digest) when the turn ended; empty outside git.
    pub head: String,
    pub progress: bool,
    pub at_ms: u64,
}

/// The record's file for a project: one per project directory, in the state directory.
pub fn path(state_dir: &Path, project: &Path) -> PathBuf {
    let id = Digest16::of(project.as_os_str().as_encoded_bytes());
    state_dir.join(format!("{}.{EXT}", hex16(&id.0)))
}

/// The record, or an empty one when there is none or it cannot be read (it is advice: a lost
/// record costs one more iteration, never a refusal).
/// A FIFO, a device or a huge file in its place costs one stat (it hung each new session's first
/// prompt for 10 s, or read 2 GB from a link to `/dev/zero`); the next note replaces it.
pub fn read(path: &Path) -> Record {
    crate::platform::bounded::read_text(path, None, MAX_RECORD_BYTES)
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Far more than [`MAX_SESSIONS`] signatures take.
const MAX_RECORD_BYTES: u64 = 256 << 10;

/// Notes a session's first turn (replacing what the same session noted before) and writes the
/// record whole, through a temp file and a rename.
pub fn note(path: &Path, sig: SessionSig) -> std::io::Result<()> {
    let mut rec = read(path);
    rec.sessions.retain(|s| s.session != sig.session);
    rec.sessions.push(sig);
    let excess = rec.sessions.len().saturating_sub(MAX_SESSIONS);
    rec.sessions.drain(..excess);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("record");
    let tmp = dir.join(format!(".tmp-{name}-{}", std::process::id()));
    rec.written_ms = crate::platform::clock::wall_ms();
    std::fs::write(&tmp, serde_json::to_vec(&rec).unwrap_or_default())?;
    std::fs::rename(&tmp, path)?;
    let key = seen_key(path);
    if crate::store::seen::first_seen(dir, &key).is_none() {
        crate::store::seen::record(dir, &key, rec.written_ms);
    }
    Ok(())
}

/// The record's line in the state dir's list of what it has seen ([`crate::store::seen`]).
fn seen_key(path: &Path) -> String {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("record");
    format!("{NAME}:{stem}")
}

/// How far past loopgate's last write the record's change time may run before the change is
/// someone else's. Generous: the record is read once per session, a network file system's
/// clock may differ from this one, and a copy put back to escape an outer loop is older.
const CHANGED_AFTER_MS: i64 = 120_000;

/// What the person must hear about the record before it is judged: deleted since loopgate wrote
/// it (the state dir remembers that it did), or changed by something else since (an earlier copy
/// put back lowers the count of identical sessions). Either restarts the outer loop's count.
pub fn tampered(path: &Path, rec: &Record) -> Option<String> {
    let dir = path.parent()?;
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let since = crate::store::seen::first_seen(dir, &seen_key(path))?;
            return Some(format!(
                "the project's outer-loop record {} (kept since {}) was deleted: sessions that \
                 repeat this project's last ones without progress are counted again from zero",
                path.display(),
                crate::platform::clock::time_of_day(since)
            ));
        }
        Err(_) => return None,
        Ok(m) => m,
    };
    if !meta.is_file() || rec.written_ms == 0 {
        return None;
    }
    let changed_ms = i64::try_from(crate::platform::change_ns(&meta) / 1_000_000).ok()?;
    let written = i64::try_from(rec.written_ms).ok()?;
    (changed_ms - written > CHANGED_AFTER_MS).then(|| {
        format!(
            "the project's outer-loop record {} was written at {} by something other than \
             loopgate, which last wrote it at {}: an earlier copy put back counts this \
             project's repeated sessions from where they were then",
            path.display(),
            crate::platform::clock::time_of_day(u64::try_from(changed_ms).unwrap_or(0)),
            crate::platform::clock::time_of_day(rec.written_ms)
        )
    })
}

/// At a session's first prompt: refused (or, a person known to attend, told) when the latest
/// sessions of the project were [`IDENTICAL`] identical ones of this prompt without progress.
pub fn check(
    rec: &Record,
    session: &str,
    prompt: &str,
    head: &str,
    attended: Option<bool>,
    record_path: &Path,
) -> Option<Verdict> {
    let mut earlier = rec.sessions.iter().rev().filter(|s| s.session != session);
    let latest = earlier.next()?;
    let same = |s: &SessionSig| {
        s.prompt == prompt && !s.progress && s.head == head && s.signature == latest.signature
    };
    if !same(latest) {
        return None;
    }
    let n = 1 + earlier.take_while(|s| same(s)).count();
    if n < IDENTICAL {
        return None;
    }
    let refused = crate::protocol::verdict::refuses_prompt(attended);
    let way_out = format!(
        "Change the prompt or the project (a commit counts), or remove {} to let it run again.",
        record_path.display()
    );
    let reason = if refused {
        format!(
            "loopgate: the last {n} sessions of this project ran this same prompt, made the same \
             calls with the same answers and ended with nothing changed, so this session's first \
             prompt was not sent to the model: an outer loop is going round. {way_out}"
        )
    } else {
        format!(
            "loopgate: the last {n} sessions of this project ran this same prompt and ended \
             identically with nothing changed; this prompt goes ahead because you typed it. \
             {way_out}"
        )
    };
    Some(
        Verdict::on_prompt(NAME, attended, reason)
            .loop_warning()
            .with("identical_sessions", n as u64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(session: &str, progress: bool) -> SessionSig {
        SessionSig {
            session: session.into(),
            prompt: "p".into(),
            signature: "s".into(),
            head: "h".into(),
            progress,
            at_ms: 0,
        }
    }

    #[test]
    fn two_identical_sessions_without_progress_refuse_the_third_and_progress_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path(), Path::new("/p"));
        note(&file, sig("a", false)).unwrap();
        let rec = read(&file);
        assert!(check(&rec, "c", "p", "h", Some(false), &file).is_none());
        note(&file, sig("b", false)).unwrap();
        let rec = read(&file);
        let v = check(&rec, "c", "p", "h", Some(false), &file).unwrap();
        assert_eq!(v.action, Action::Deny);
        assert_eq!(
            check(&rec, "c", "p", "h", Some(true), &file)
                .unwrap()
                .action,
            Action::Warn
        );
        assert!(check(&rec, "c", "other", "h", Some(false), &file).is_none());
        assert!(check(&rec, "c", "p", "new-head", Some(false), &file).is_none());
        note(&file, sig("c", true)).unwrap();
        assert!(check(&read(&file), "d", "p", "h", Some(false), &file).is_none());
        for i in 0..20 {
            note(&file, sig(&format!("s{i}"), false)).unwrap();
        }
        assert_eq!(read(&file).sessions.len(), MAX_SESSIONS);
    }
}
