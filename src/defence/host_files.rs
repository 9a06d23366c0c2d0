//! Loopgate's files in hosts that run no hook file of their own: OpenCode's and Kilo CLI's plugin
//! (which `loopgate setup` writes, and which is their only way to call loopgate) and the Agent SDK
//! helpers an app imports (the Python package in a venv's site-packages, the npm package in
//! `node_modules`). An agent can edit, empty, move away or replace them as it can any file of
//! the user's; the guard refuses what it sees, and this record tells what it did not see.
//!
//! The record, `host-files` in the state dir, holds one line per file: its digest, what it is and
//! its path. Setup records the plugin it writes; a helper's copy is recorded by the first call it
//! makes (it names itself with `--sdk FILE`) when it is the copy this binary ships. Every
//! session's first call, of any CLI, compares each file with its digest and tells the person
//! what changed: a plugin rewritten so that OpenCode never calls loopgate is told by the next
//! session of another CLI, or by `loopgate doctor`, never by OpenCode's own sessions. Only the
//! first call pays: one small read, and one read of each recorded file.

use crate::platform;
use std::io::Write;
use std::path::{Path, PathBuf};

const FILE: &str = "host-files";
/// The largest file compared (a helper or a plugin is a few KiB).
const MAX_FILE: u64 = 1 << 20;
/// Past this many lines the record is not one loopgate wrote: nothing more is read.
const MAX_LINES: usize = 64;

/// The Agent SDK helpers as this version ships them, by file name.
const SDK: &[(&str, &str, &str)] = &[
    (
        "__init__.py",
        "the Python Agent SDK helper",
        include_str!("../../python/loopgate_agent_sdk/__init__.py"),
    ),
    (
        "agent-sdk.js",
        "the npm Agent SDK helper",
        include_str!("../../npm/loopgate/agent-sdk.js"),
    ),
];

/// One recorded file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub digest: String,
    pub what: String,
    pub path: PathBuf,
}

fn record_path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// A file's digest, line endings aside (a checkout on Windows may have made them CRLF); `None`
/// when it is missing, unreadable or too big.
pub fn digest_of(path: &Path) -> Option<String> {
    let text = platform::bounded::read_text(path, None, MAX_FILE).ok()??;
    Some(digest_text(&text))
}

fn digest_text(text: &str) -> String {
    crate::util::canon::text_key(&text.replace("\r\n", "\n"))
}

/// The recorded files (a line that does not parse is not one loopgate wrote: skipped).
pub fn entries(state_dir: &Path) -> Vec<Entry> {
    let Ok(Some(text)) = platform::bounded::read_text(&record_path(state_dir), None, 64 << 10)
    else {
        return Vec::new();
    };
    text.lines()
        .take(MAX_LINES)
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            let digest = parts.next()?.to_string();
            let what = parts.next()?.to_string();
            let path = PathBuf::from(parts.next()?);
            (!digest.is_empty() && path.is_absolute()).then_some(Entry { digest, what, path })
        })
        .collect()
}

fn write(state_dir: &Path, entries: &[Entry]) -> std::io::Result<()> {
    let tmp = state_dir.join(format!("{FILE}.tmp"));
    let mut text = String::new();
    for e in entries.iter().take(MAX_LINES) {
        text.push_str(&format!("{}\t{}\t{}\n", e.digest, e.what, e.path.display()));
    }
    let mut f = platform::open_private_rw(&tmp, true)?;
    let done = f
        .set_len(0)
        .and_then(|_| f.write_all(text.as_bytes()))
        .and_then(|_| std::fs::rename(&tmp, record_path(state_dir)));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Records `path` as `what` with its digest as it is now (replacing any earlier line for it).
pub fn record(state_dir: &Path, what: &str, path: &Path) -> std::io::Result<()> {
    let digest = digest_of(path).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "nothing to record there")
    })?;
    let mut all = entries(state_dir);
    let entry = Entry {
        digest,
        what: what.replace(['\t', '\n'], " "),
        path: path.to_path_buf(),
    };
    if all.contains(&entry) {
        return Ok(());
    }
    all.retain(|e| e.path != path);
    all.push(entry);
    std::fs::create_dir_all(state_dir)?;
    write(state_dir, &all)
}

/// Forgets `path` (an uninstall removed it on purpose).
pub fn forget(state_dir: &Path, path: &Path) -> std::io::Result<()> {
    let mut all = entries(state_dir);
    let before = all.len();
    all.retain(|e| e.path != path);
    if all.len() == before {
        return Ok(());
    }
    write(state_dir, &all)
}

/// What changed in the recorded files since they were recorded, one line each.
pub fn problems(state_dir: &Path) -> Vec<String> {
    entries(state_dir)
        .into_iter()
        .filter_map(|e| {
            let shown = e.path.display();
            match std::fs::symlink_metadata(&e.path) {
                Err(_) => Some(format!("{} {shown} was removed or moved away", e.what)),
                Ok(m) if m.file_type().is_symlink() => Some(format!(
                    "{} {shown} was replaced by a link (to {})",
                    e.what,
                    std::fs::read_link(&e.path)
                        .map(|t| t.display().to_string())
                        .unwrap_or_default()
                )),
                Ok(_) => (digest_of(&e.path).as_deref() != Some(e.digest.as_str()))
                    .then(|| format!("{} {shown} was changed", e.what)),
            }
        })
        .collect()
}

/// A helper's copy that names itself (`--sdk FILE`) at a session's first call: recorded when it
/// is the copy this binary ships, else what the person must hear.
pub fn sdk_copy(state_dir: &Path, file: &Path) -> Option<String> {
    let name = file.file_name()?.to_str()?;
    let Some((_, what, shipped)) = SDK.iter().find(|(n, _, _)| *n == name) else {
        return Some(format!(
            "{} is not an Agent SDK helper loopgate ships",
            file.display()
        ));
    };
    let file = crate::config::paths::lexical(file);
    let now = digest_of(&file);
    if now.as_deref() == Some(digest_text(shipped).as_str()) {
        let _ = record(state_dir, what, &file);
        return None;
    }
    Some(format!(
        "{what} {} differs from the copy loopgate {} ships: edited, or installed at another \
         version than the binary",
        file.display(),
        env!("CARGO_PKG_VERSION")
    ))
}

/// The person's message for `problems`, or `None` when there are none.
pub fn notice(problems: &[String]) -> Option<String> {
    (!problems.is_empty()).then(|| {
        format!(
            "loopgate's files in other hosts are not as loopgate left them: {}. A host whose \
             plugin or helper was changed may no longer call loopgate for every call; if you \
             did not change them, run `loopgate setup --agent opencode` (or kilo) again, or \
             reinstall the helper, and `loopgate doctor`",
            problems.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_file_changed_removed_or_linked_is_named() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let f = d.path().join("plugins/loopgate.js");
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, "one\n").unwrap();
        record(&state, "OpenCode's plugin", &f).unwrap();
        assert!(problems(&state).is_empty());
        std::fs::write(&f, "one\r\n").unwrap();
        assert!(problems(&state).is_empty(), "CRLF alone is no change");
        std::fs::write(&f, "two\n").unwrap();
        assert!(problems(&state)[0].contains("was changed"));
        std::fs::remove_file(&f).unwrap();
        assert!(problems(&state)[0].contains("removed or moved"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/dev/null", &f).unwrap();
            assert!(problems(&state)[0].contains("link"));
        }
        forget(&state, &f).unwrap();
        assert!(entries(&state).is_empty());
    }

    #[test]
    fn only_the_shipped_helper_is_recorded() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let f = d
            .path()
            .join("site-packages/loopgate_agent_sdk/__init__.py");
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, SDK[0].2).unwrap();
        assert_eq!(sdk_copy(&state, &f), None);
        assert_eq!(entries(&state).len(), 1);
        std::fs::write(&f, "def loopgate_hooks(**_): return {}\n").unwrap();
        assert!(sdk_copy(&state, &f).unwrap().contains("differs"));
        assert!(problems(&state)[0].contains("was changed"));
    }
}
