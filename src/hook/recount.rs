//! A session's state put back from an earlier copy (found by the lock file's record, see
//! `store::Store::load`) has lost the calls loopgate judged since the copy was taken. The CLI's
//! transcript, which a copy of loopgate's state dir does not reach, still shows them: the calls
//! it records after the restored state's last save are judged again into the state, as
//! `replay` judges a transcript, so a put-back costs the loop counts nothing. Read only when a
//! put-back was found, and only the transcript's end.
//!
//! What cannot be known errs low: a call whose transcript line is not later than the restored
//! state's last save (calls in parallel) is not counted again, rather than counted twice.

use super::Call;
use crate::judge::engine::{self, Ctx};
use crate::judge::state::SessionState;
use crate::protocol::payload::{Event, Payload};
use crate::replay::format::Cli;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::UNIX_EPOCH;

/// How much of the transcript's end is read: the calls lost to a put-back are its latest.
const TAIL: u64 = 4 << 20;

/// Judges again into `state` the calls the transcript shows after the state's last save and
/// before this call; how many tool calls that was, `None` when the transcript cannot be read
/// or is not one of this CLI's.
pub(super) fn recount<'a>(
    call: &Call,
    state: &mut SessionState,
    ctx_at: &dyn Fn(u64) -> Ctx<'a>,
) -> Option<usize> {
    let since = state.written.at_ms;
    if since == 0 {
        return None;
    }
    let cli = Cli::ALL.into_iter().find(|c| c.agent() == call.agent)?;
    let text = tail(Path::new(call.payload.transcript_path.as_deref()?))?;
    let converted = crate::replay::convert(cli, &text, &[], "transcript");
    let mut counted = 0;
    for cp in &converted.payloads {
        let Some(at) = cp
            .at
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_millis()).ok())
        else {
            continue;
        };
        if at <= since || at > call.now_ms {
            continue;
        }
        let mut json = cp.payload.clone();
        // This call is judged as itself, after.
        if call.payload.tool_use_id.is_some()
            && json["tool_use_id"].as_str() == call.payload.tool_use_id.as_deref()
        {
            continue;
        }
        json["session_id"] = call.payload.session_id.clone().into();
        let Ok(bytes) = serde_json::to_vec(&json) else {
            continue;
        };
        let Ok((payload, event)) = Payload::parse(&bytes) else {
            continue;
        };
        // A turn's end judged again could end the turn again; the calls are what was lost.
        if matches!(event, Event::Stop | Event::SubagentStop) {
            continue;
        }
        counted += usize::from(matches!(
            event,
            Event::PostToolUse | Event::PostToolUseFailure
        ));
        let _ = engine::handle(state, &payload, event, &ctx_at(at));
    }
    Some(counted)
}

/// The transcript's last [`TAIL`] bytes from a line's start; `None` when it is not a regular
/// file (a FIFO is never read).
fn tail(path: &Path) -> Option<String> {
    let mut f = crate::platform::open_read_nonblocking(path).ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let from = meta.len().saturating_sub(TAIL);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    f.take(TAIL).read_to_end(&mut bytes).ok()?;
    if from > 0 {
        let start = memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1);
        bytes.drain(..start);
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}
