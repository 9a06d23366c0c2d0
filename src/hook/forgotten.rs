//! A session whose state and lock file were both deleted looks new to the lock (issue 30 part 3).
//! Two records outside them tell it apart: the state dir's list of sessions seen
//! ([`crate::store::seen`]), and, when that went too, the CLI's own transcript, which shows the
//! tool calls loopgate should have counted. Either way the person is told once: this call's save
//! makes the session known again.

use super::Call;
use crate::protocol::payload::Event;
use std::io::Read;
use std::path::Path;

/// How long the transcript is read: it is read only at the first call of a session the lock
/// does not know, but a transcript padded to gigabytes must not reach the CLI's hook timeout.
const TRANSCRIPT_BUDGET: std::time::Duration = std::time::Duration::from_millis(1500);
/// What is read at a time, and the end read first (the latest calls are there, whatever pads
/// the start).
const CHUNK: usize = 1 << 20;
const TAIL: u64 = 4 << 20;
/// A finished tool call in each CLI's transcript: Claude Code's `tool_result`, Codex's
/// `function_call_output`, Gemini's and Qwen's `functionResponse`, Copilot's completed execution.
const RESULT_MARKS: &[&str] = &[
    "\"tool_result\"",
    "\"function_call_output\"",
    "\"functionResponse\"",
    "\"tool.execution_complete\"",
];

/// At a session's start with no state and no lock (Claude Code's SessionStart): told when the
/// session was seen before (resumed after a deletion), else recorded as seen. Its transcript is
/// not read: a resumed or forked session's transcript holds calls from before.
pub(super) fn told_at_start(state_dir: &Path, stem: &str, now_ms: u64) -> Option<String> {
    let Some(at) = crate::store::seen::first_seen(state_dir, stem) else {
        crate::store::seen::record(state_dir, stem, now_ms);
        return None;
    };
    Some(format!(
        "this session's state and lock file were deleted since its last call (loopgate has \
         followed the session since {}): loop counts start again from zero. If that was not \
         you, something removed loopgate's record of this session",
        crate::platform::clock::time_of_day(at)
    ))
}

/// What the person must hear at the first call of a session the lock does not know, if anything:
/// [`told_at_start`], and past a session start, what the transcript shows.
pub(super) fn told(call: &Call, state_dir: &Path, stem: &str) -> Option<String> {
    if let Some(told) = told_at_start(state_dir, stem, call.now_ms) {
        return Some(told);
    }
    if call.event == Event::SessionStart {
        return None;
    }
    let path = Path::new(call.payload.transcript_path.as_deref()?);
    let earlier = match finished_calls(path) {
        Ok(n) => n,
        Err(what) => {
            return Some(format!(
                "no record of this session is left, and its transcript {} is {what}, so the \
                 calls it shows cannot be counted: the state may have been deleted together \
                 with the transcript's record. If that was not you, check the session",
                path.display()
            ))
        }
    };
    // The call being judged may be in the transcript already: one more is an earlier one.
    (earlier >= 2).then(|| {
        format!(
            "no record of this session is left, yet its transcript shows {earlier} finished \
             tool calls: its state was deleted (or loopgate was wired only after the session \
             began), so loop counts start again from zero"
        )
    })
}

/// Finished tool calls in a transcript, whatever its size: its last [`TAIL`] bytes first, then
/// from its start for as long as [`TRANSCRIPT_BUDGET`] allows. A transcript that is not there
/// is none yet (a new session's); a FIFO, or a link to something not a file (`/dev/null`), in
/// its place is what the CLI cannot keep calls in: `Err` says what it is.
fn finished_calls(transcript: &Path) -> Result<usize, &'static str> {
    let Ok(f) = crate::platform::open_read_nonblocking(transcript) else {
        return Ok(0);
    };
    let Ok(meta) = f.metadata() else {
        return Ok(0);
    };
    if !meta.is_file() {
        // Never read. A device named as such (a CLI or harness that keeps no transcript gives
        // `/dev/null`) is no sign; a link to one, or a FIFO, in the transcript's place is.
        let kind = crate::platform::special_kind(&meta.file_type()).unwrap_or("not a file");
        return match std::fs::symlink_metadata(transcript) {
            Ok(m) if m.file_type().is_symlink() => Err(kind),
            Ok(m) if crate::platform::special_kind(&m.file_type()) == Some("a FIFO") => Err(kind),
            _ => Ok(0),
        };
    }
    let deadline = std::time::Instant::now() + TRANSCRIPT_BUDGET;
    let len = meta.len();
    let tail_from = len.saturating_sub(TAIL);
    let mut found = marks_in(&f, tail_from, len, deadline);
    found += marks_in(&f, 0, tail_from, deadline);
    Ok(found)
}

/// [`RESULT_MARKS`] between `from` and `to`, read a chunk at a time until `deadline`; chunks
/// overlap by a mark's length so none is cut in two.
fn marks_in(f: &std::fs::File, from: u64, to: u64, deadline: std::time::Instant) -> usize {
    let overlap = RESULT_MARKS.iter().map(|m| m.len()).max().unwrap_or(0) - 1;
    let mut buf = vec![0u8; CHUNK + overlap];
    let (mut at, mut kept, mut found) = (from, 0usize, 0usize);
    while at < to && std::time::Instant::now() < deadline {
        let want = usize::try_from(to - at).unwrap_or(CHUNK).min(CHUNK);
        let Ok(n) = read_at(f, &mut buf[kept..kept + want], at) else {
            break;
        };
        if n == 0 {
            break;
        }
        let seen = kept + n;
        // A mark wholly inside the bytes kept from the last chunk was counted there.
        found += RESULT_MARKS
            .iter()
            .map(|m| {
                memchr::memmem::find_iter(&buf[..seen], m.as_bytes())
                    .filter(|i| i + m.len() > kept)
                    .count()
            })
            .sum::<usize>();
        // Keep the last bytes, one fewer than the longest mark, so a mark across the boundary
        // is found in the next chunk.
        let keep = overlap.min(seen);
        buf.copy_within(seen - keep..seen, 0);
        kept = keep;
        at += n as u64;
    }
    found
}

fn read_at(f: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    use std::io::{Seek, SeekFrom};
    let mut f = f;
    f.seek(SeekFrom::Start(at))?;
    f.read(buf)
}
