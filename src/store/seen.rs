//! The sessions this state dir has seen: one line each, `<stem> <first call, ms>`, written at a
//! session's first call. A session's state deleted together with its lock file looks like a new
//! session to the lock; this record, kept apart from both, tells the two apart so the person hears
//! that loop counts started again (issue 30 part 3). `gc` forgets the sessions it removes; the file
//! is bounded, the oldest half dropped past [`MAX_BYTES`].

use crate::platform;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

const FILE: &str = "sessions.seen";
/// About 1,300 sessions; past this the older half goes.
const MAX_BYTES: u64 = 64 << 10;

fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// The record's bytes (read unchecked: only a matched line is parsed).
fn read(state_dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Ok(f) = platform::open_private_read(&path(state_dir)) {
        let len = f.metadata().map_or(0, |m| m.len()).min(MAX_BYTES * 2);
        bytes.reserve_exact(usize::try_from(len).unwrap_or(0) + 1);
        let _ = f.take(MAX_BYTES * 2).read_to_end(&mut bytes);
    }
    bytes
}

/// The record's lines (a line that is not UTF-8 is not one loopgate wrote: dropped).
fn lines(bytes: &[u8]) -> Vec<&str> {
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok())
        .filter(|l| !l.is_empty())
        .collect()
}

/// When the session `stem` was first seen here, if it was. A session start reads the whole
/// record, so the line is found with `memmem` rather than line by line.
pub fn first_seen(state_dir: &Path, stem: &str) -> Option<u64> {
    let bytes = read(state_dir);
    let key = format!("{stem} ");
    memchr::memmem::find_iter(&bytes, key.as_bytes())
        .find(|&at| at == 0 || bytes[at - 1] == b'\n')
        .and_then(|at| {
            let rest = &bytes[at + key.len()..];
            let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
        })
}

/// Records the session `stem` as seen at `at_ms`. Best effort: a record not kept only means a
/// later deletion goes untold by this route (the transcript's may still tell it).
pub fn record(state_dir: &Path, stem: &str, at_ms: u64) {
    let Ok(mut f) = platform::open_private_append(&path(state_dir)) else {
        return;
    };
    let _ = writeln!(f, "{stem} {at_ms}");
    if f.seek(std::io::SeekFrom::End(0))
        .is_ok_and(|len| len > MAX_BYTES)
    {
        let bytes = read(state_dir);
        let lines = lines(&bytes);
        rewrite(state_dir, &lines[lines.len() / 2..]);
    }
}

/// Forgets the sessions `gc` removed: a session resumed after that is new again, not deleted.
pub fn forget(state_dir: &Path, stems: &[String]) {
    if stems.is_empty() {
        return;
    }
    let bytes = read(state_dir);
    let kept: Vec<&str> = lines(&bytes)
        .into_iter()
        .filter(|l| !stems.iter().any(|s| l.split(' ').next() == Some(s)))
        .collect();
    rewrite(state_dir, &kept);
}

fn rewrite(state_dir: &Path, lines: &[&str]) {
    let tmp = state_dir.join(format!("{FILE}.tmp"));
    let Ok(mut f) = platform::open_private_rw(&tmp, true) else {
        return;
    };
    let mut text = lines.join("\n");
    text.push('\n');
    if f.set_len(0).is_ok() && f.write_all(text.as_bytes()).is_ok() {
        let _ = std::fs::rename(&tmp, path(state_dir));
    } else {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_remembered_until_gc_forgets_it_and_the_record_stays_bounded() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(first_seen(d.path(), "a"), None);
        record(d.path(), "a", 5);
        record(d.path(), "b", 7);
        assert_eq!(first_seen(d.path(), "a"), Some(5));
        forget(d.path(), &["a".into()]);
        assert_eq!(first_seen(d.path(), "a"), None);
        assert_eq!(first_seen(d.path(), "b"), Some(7));
        for i in 0..3000 {
            record(d.path(), &format!("{i:032x}"), i);
        }
        let len = std::fs::metadata(path(d.path())).unwrap().len();
        assert!(len <= MAX_BYTES + 64, "{len}");
        assert_eq!(first_seen(d.path(), &format!("{:032x}", 2999)), Some(2999));
    }
}
