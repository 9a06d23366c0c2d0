//! Calls judged while another process held the session lock past the deadline. Judging them on a
//! frozen copy without recording them would let whoever holds the lock freeze detection (the
//! same failing call allowed for ever), so each such call is appended to a per-session journal
//! (`sessions/<stem>.journal`, JSON lines): the next busy call judges on the saved state plus the
//! journal, and the next call that gets the lock replays the journal into the state, saves, and
//! empties it.
//!
//! The file is opened in append mode and each record goes out in one `write`, so concurrent
//! appenders never overwrite each other. Appenders and the merging holder also take the
//! journal's own lock for a moment ([`BRIEF`]): a record cannot land between the holder's read
//! and its truncation (a kill storm with every call journaled lost one there). Someone holding
//! that lock too only brings back that narrow window: appends then go ahead without it. The journal is bounded in bytes
//! ([`MAX_BYTES`]); a record is the call's input with every string masked (no secret reaches the
//! disk) and clipped ([`CLIP`]), so one record stays small however large the tool output was.
//!
//! What can still go wrong: with the journal's lock held by someone else, a record appended
//! between a holder's last read and its truncation is lost; a holder killed between saving the
//! state and emptying the journal leaves records that the next holder counts a second time
//! (stricter, never laxer); records past the bound are not kept (the call is judged, and the
//! person told).

use crate::platform;
use crate::protocol::dialect::Agent;
use crate::protocol::payload::Event;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Extension of journal files, beside the session's `.state`.
pub const EXT: &str = "journal";
/// The most a journal holds; calls past it are judged but not recorded.
pub const MAX_BYTES: u64 = 1 << 20;
/// The largest record appended.
const MAX_RECORD: usize = 32 << 10;
/// Strings longer than this are kept as a prefix and a digest of the whole: equal strings stay
/// equal, different ones different, and a record stays small.
const CLIP: usize = 1024;
/// The clip used when a record is still too large at [`CLIP`] (many long strings).
const CLIP_TIGHT: usize = 96;

/// One call, as the journal keeps it.
#[derive(Serialize, Deserialize)]
pub struct Record {
    pub ms: u64,
    /// The `--agent` the hook ran with, if any.
    #[serde(default)]
    pub agent: Option<String>,
    /// The event the hook command was for.
    pub expected: String,
    pub input: Value,
}

impl Record {
    pub fn agent(&self) -> Option<Option<Agent>> {
        match &self.agent {
            None => Some(None),
            Some(a) => Agent::parse(a).map(Some),
        }
    }

    pub fn expected(&self) -> Option<Event> {
        Event::parse(&self.expected)
    }
}

/// The journal line for a call (newline included), or `None` when its input does not reduce to
/// a record of bounded size.
pub fn line(input: &[u8], agent: Option<Agent>, expected: Event, ms: u64) -> Option<Vec<u8>> {
    let parsed: Value = serde_json::from_slice(input).ok()?;
    for clip in [CLIP, CLIP_TIGHT] {
        let mut v = parsed.clone();
        reduce(&mut v, clip);
        let rec = Record {
            ms,
            agent: agent.map(|a| a.name().to_string()),
            expected: expected.name().to_string(),
            input: v,
        };
        let mut out = serde_json::to_vec(&rec).ok()?;
        if out.len() < MAX_RECORD {
            out.push(b'\n');
            return Some(out);
        }
    }
    None
}

/// Masks every string, then clips the long ones to a prefix and a digest of the whole.
fn reduce(v: &mut Value, clip: usize) {
    match v {
        Value::String(s) => {
            let masked = crate::judge::redact::mask(s);
            *s = if masked.len() > clip {
                let mut end = clip;
                while !masked.is_char_boundary(end) {
                    end -= 1;
                }
                format!(
                    "{}…[{} bytes, {}]",
                    &masked[..end],
                    masked.len(),
                    crate::util::canon::text_key(&masked)
                )
            } else {
                masked
            };
        }
        Value::Array(a) => a.iter_mut().for_each(|x| reduce(x, clip)),
        Value::Object(m) => m.values_mut().for_each(|x| reduce(x, clip)),
        _ => {}
    }
}

/// How long an appender or a merging holder waits for the journal's own lock before going ahead
/// without it (see the module docs).
const BRIEF: std::time::Duration = std::time::Duration::from_millis(50);

fn lock_briefly(file: &File, path: &Path) -> bool {
    crate::store::lock::lock_within(file, path, BRIEF, "the session journal").is_ok()
}

/// What [`append`] did with a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    Recorded,
    /// The journal was full (the lock held for long): its older half was dropped to make room,
    /// so the latest calls — what a loop is made of — go on being counted.
    DroppedOlder,
}

/// Appends one line, making room by dropping the oldest records when the journal is full.
pub fn append(path: &Path, line: &[u8]) -> io::Result<Appended> {
    let mut f = platform::open_private_append(path)?;
    lock_briefly(&f, path);
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mut how = Appended::Recorded;
    if meta.len() + line.len() as u64 > MAX_BYTES {
        let len = meta.len().min(MAX_BYTES + MAX_RECORD as u64);
        let mut buf = vec![0u8; len as usize];
        // The append handle cannot read; this one shares the lock's file, not its lock.
        platform::read_exact_at(&platform::open_private_rw(path, false)?, &mut buf, 0)?;
        // Whole lines from the first one past the older half.
        let half = buf.len() / 2;
        let keep = memchr::memchr(b'\n', &buf[half..]).map_or(buf.len(), |i| half + i + 1);
        f.set_len(0)?;
        // Appending to an emptied file writes from its start.
        f.write_all(&buf[keep..])?;
        how = Appended::DroppedOlder;
    }
    // One `write` per record: appenders never interleave inside a line.
    f.write_all(line)?;
    Ok(how)
}

/// A journal read, to be emptied once its records are saved in the state.
pub struct Pending {
    file: File,
    read: u64,
    pub records: Vec<Record>,
    /// Lines that did not parse (a torn append, tampering): skipped.
    pub skipped: usize,
}

/// Reads the journal, if there is one. A journal that is not a regular file is an error (the
/// caller moves nothing: the journal is only ever read, and emptied through the open handle).
/// `merge`: the caller holds the session lock and will empty the journal; appends wait until the
/// returned [`Pending`] is dropped.
pub fn read(path: &Path, merge: bool) -> io::Result<Option<Pending>> {
    let file = match platform::open_private_rw(path, false) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if merge {
        lock_briefly(&file, path);
    }
    let len = file.metadata()?.len().min(MAX_BYTES + MAX_RECORD as u64);
    let mut buf = vec![0u8; len as usize];
    platform::read_exact_at(&file, &mut buf, 0)?;
    let mut records = Vec::new();
    let mut skipped = 0;
    for l in buf.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Record>(l) {
            Ok(r) => records.push(r),
            Err(_) => skipped += 1,
        }
    }
    Ok(Some(Pending {
        file,
        read: len,
        records,
        skipped,
    }))
}

impl Pending {
    /// Empties the journal after its records were saved, keeping whatever was appended since it
    /// was read; `Ok(true)` when it is now empty.
    pub fn finish(self) -> io::Result<bool> {
        let len = self.file.metadata()?.len();
        let tail = if len > self.read && len <= MAX_BYTES + MAX_RECORD as u64 {
            let mut t = vec![0u8; (len - self.read) as usize];
            platform::read_exact_at(&self.file, &mut t, self.read)?;
            t
        } else {
            Vec::new()
        };
        self.file.set_len(0)?;
        if !tail.is_empty() {
            platform::write_all_at(&self.file, &tail, 0)?;
        }
        Ok(tail.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(cmd: &str) -> Vec<u8> {
        json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": cmd}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn records_are_small_masked_and_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.journal");
        let huge = "x".repeat(1 << 20);
        let a = line(&input(&huge), None, Event::PreToolUse, 7).unwrap();
        assert!(a.len() < 4096, "{}", a.len());
        let b = line(
            &input("curl -u admin:hunter22 http://x"),
            Some(Agent::Codex),
            Event::PreToolUse,
            8,
        )
        .unwrap();
        assert!(!String::from_utf8_lossy(&b).contains("hunter22"));
        assert_eq!(append(&p, &a).unwrap(), Appended::Recorded);
        assert_eq!(append(&p, &b).unwrap(), Appended::Recorded);
        let got = read(&p, false).unwrap().unwrap();
        assert_eq!(got.records.len(), 2);
        assert_eq!(got.records[1].agent(), Some(Some(Agent::Codex)));
        assert_eq!(got.records[0].expected(), Some(Event::PreToolUse));
        // Equal long strings stay equal, different ones differ.
        let again = line(&input(&huge), None, Event::PreToolUse, 9).unwrap();
        let other = line(&input(&"y".repeat(1 << 20)), None, Event::PreToolUse, 9).unwrap();
        let cmd = |l: &[u8]| {
            serde_json::from_slice::<Record>(&l[..l.len() - 1])
                .unwrap()
                .input["tool_input"]["command"]
                .clone()
        };
        assert_eq!(cmd(&a), cmd(&again));
        assert_ne!(cmd(&a), cmd(&other));
        // Appended after the read: kept by `finish`.
        assert_eq!(append(&p, &again).unwrap(), Appended::Recorded);
        assert!(!got.finish().unwrap(), "the late record is kept");
        let left = read(&p, false).unwrap().unwrap();
        assert_eq!(left.records.len(), 1);
        assert_eq!(left.records[0].ms, 9);
    }

    #[test]
    fn a_full_journal_drops_its_older_half_and_keeps_the_latest() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.journal");
        let rec = |ms| line(&input(&"z".repeat(900)), None, Event::PreToolUse, ms).unwrap();
        let mut n = 0;
        while append(&p, &rec(n)).unwrap() == Appended::Recorded {
            n += 1;
            assert!(n < 100_000);
        }
        assert!(std::fs::metadata(&p).unwrap().len() <= MAX_BYTES);
        let left = read(&p, false).unwrap().unwrap();
        assert_eq!(left.skipped, 0, "only whole lines are kept");
        assert!(left.records.len() < n as usize && left.records.len() > n as usize / 3);
        assert_eq!(
            left.records.last().unwrap().ms,
            n,
            "the latest call is kept"
        );
        for k in 1..=n {
            assert!(append(&p, &rec(n + k)).is_ok());
        }
        assert!(std::fs::metadata(&p).unwrap().len() <= MAX_BYTES);
    }
}
