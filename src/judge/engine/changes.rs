//! What a call did to the work: the content of every file it changed, so progress is a state
//! of the work never seen before.

use super::calls::Finished;
use crate::judge::ledger::ABSENT;
use crate::judge::state::SessionState;
use crate::protocol::tool::ToolClass;
use crate::util::canon::Digest16;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A file a shell command created (`bashEditDiff` says `created`) was absent before it: that is
/// part of the state the session started from, so deleting it again goes back, not forward.
pub(super) fn observe_created(state: &mut SessionState, f: &Finished) {
    let Some(files) = f
        .response
        .and_then(|r| r.pointer("/bashEditDiff/files"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for file in files.iter().take(MAX_BASH_FILES) {
        if file.get("created").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let Some(p) = file.get("filePath").and_then(Value::as_str) else {
            continue;
        };
        let path = absolute(p, f.cwd);
        let at_start = state.world.id == state.turn.start_world;
        state
            .world
            .observe_before(Digest16::of(path.as_os_str().as_encoded_bytes()), ABSENT);
        if at_start {
            state.turn.start_world = state.world.id;
        }
    }
}

/// The digest of what a call left behind: each changed file and its content, and what it said.
pub(super) fn effect(changes: &[(Digest16, Digest16)], said: Option<Digest16>) -> Digest16 {
    let said = said.unwrap_or_default();
    let mut parts: Vec<&[u8]> = changes
        .iter()
        .flat_map(|(p, c)| [&p.0[..], &c.0[..]])
        .collect();
    parts.push(&said.0);
    Digest16::of_parts(&parts)
}

/// An edit that succeeded on a file loopgate cannot read (replaying a transcript on another
/// machine, or a file already gone again): its content is taken as the earlier content with this
/// edit applied, so successive edits stay different states instead of all looking "absent".
pub(super) fn unseen_edit(
    ch: &mut [(Digest16, Digest16)],
    world: &crate::judge::ledger::World,
    input: &Value,
) {
    for (path, content) in ch.iter_mut() {
        if *content == ABSENT {
            let before = world.files.get(path).map_or(ABSENT, |f| f.content);
            let mut edit = Vec::new();
            crate::util::canon::write_canonical(input, &mut edit);
            *content = Digest16::of_parts(&[&before.0, &edit]);
        }
    }
}

/// The file a Write/Edit/NotebookEdit names, absolute.
pub(super) fn file_path(input: &Value, cwd: Option<&str>) -> Option<PathBuf> {
    let p = input
        .get("file_path")
        .or_else(|| input.get("notebook_path"))
        .and_then(Value::as_str)?;
    Some(absolute(p, cwd))
}

pub(super) fn absolute(p: &str, cwd: Option<&str>) -> PathBuf {
    let path = Path::new(p);
    match cwd {
        Some(c) if path.is_relative() => Path::new(c).join(path),
        _ => path.to_path_buf(),
    }
}

/// Files read whole for their digest; bigger ones are known by size and time.
pub(super) const MAX_HASHED_FILE: u64 = 16 << 20;

/// Files a single shell command is judged by.
pub(super) const MAX_BASH_FILES: usize = 32;

/// The content of a file as a digest: [`ABSENT`] when it is not there. Only regular files are
/// read (a FIFO or a device would hang or never end), and only up to a size.
pub(super) fn content_digest(path: &Path) -> Digest16 {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else {
        return ABSENT;
    };
    if !meta.is_file() {
        return Digest16::of(b"\0not a regular file");
    }
    let stamp = || {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Digest16::of_parts(&[&meta.len().to_le_bytes(), &mtime.to_le_bytes()])
    };
    if meta.len() > MAX_HASHED_FILE {
        return stamp();
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    match std::fs::File::open(path).and_then(|f| f.take(MAX_HASHED_FILE).read_to_end(&mut buf)) {
        Ok(_) => Digest16::of(&buf),
        Err(_) => stamp(),
    }
}

/// What a successful call changed: `(path digest, content digest)` per file. `None` when it
/// changed more than can be known (Claude Code listed only some of the files).
pub(super) fn changes(
    tool: &str,
    input: &Value,
    response: Option<&Value>,
    cwd: Option<&str>,
) -> Option<Vec<(Digest16, Digest16)>> {
    let key = |p: &Path| Digest16::of(p.as_os_str().as_encoded_bytes());
    match ToolClass::of(tool) {
        ToolClass::Write => {
            let path = file_path(input, cwd)?;
            let content = input.get("content").and_then(Value::as_str).unwrap_or("");
            Some(vec![(key(&path), Digest16::of(content.as_bytes()))])
        }
        ToolClass::Edit => {
            let path = file_path(input, cwd)?;
            Some(vec![(key(&path), content_digest(&path))])
        }
        ToolClass::Shell => {
            let Some(diff) = response.and_then(|r| r.get("bashEditDiff")) else {
                return Some(Vec::new());
            };
            let mut paths: Vec<&str> = diff
                .get("changedFiles")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for f in diff
                .get("files")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(p) = f.get("filePath").and_then(Value::as_str) {
                    if !paths.contains(&p) {
                        paths.push(p);
                    }
                }
            }
            let more = diff.get("moreFiles").and_then(Value::as_u64).unwrap_or(0);
            if more > 0 || paths.len() > MAX_BASH_FILES {
                return None;
            }
            Some(
                paths
                    .into_iter()
                    .map(|p| {
                        let abs = absolute(p, cwd);
                        (key(&abs), content_digest(&abs))
                    })
                    .collect(),
            )
        }
        _ => Some(Vec::new()),
    }
}
