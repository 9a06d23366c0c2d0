//! A session whose state and lock file were both deleted looks new to the lock (issue 30 part 3).
//! Two records outside them tell it apart: the state dir's list of sessions seen
//! ([`crate::store::seen`]), and, when that went too, the CLI's own transcript, which shows the
//! tool calls loopgate should have counted. Either way the person is told once: this call's save
//! makes the session known again.

use super::Call;
use crate::protocol::payload::Event;
use std::io::Read;
use std::path::Path;

/// How much of a transcript is read: earlier calls show in its first part.
const TRANSCRIPT_HEAD: u64 = 4 << 20;
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
    let earlier = finished_calls(Path::new(call.payload.transcript_path.as_deref()?));
    // The call being judged may be in the transcript already: one more is an earlier one.
    (earlier >= 2).then(|| {
        format!(
            "no record of this session is left, yet its transcript shows {earlier} finished \
             tool calls: its state was deleted (or loopgate was wired only after the session \
             began), so loop counts start again from zero"
        )
    })
}

/// Finished tool calls in the first part of a transcript; 0 when it cannot be read.
fn finished_calls(transcript: &Path) -> usize {
    let Ok(f) = crate::platform::open_read_nonblocking(transcript) else {
        return 0;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return 0; // a FIFO or device in its place is not read
    }
    let mut head = Vec::new();
    if f.take(TRANSCRIPT_HEAD).read_to_end(&mut head).is_err() {
        return 0;
    }
    RESULT_MARKS
        .iter()
        .map(|m| memchr::memmem::find_iter(&head, m.as_bytes()).count())
        .sum()
}
