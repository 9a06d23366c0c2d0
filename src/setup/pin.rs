//! The hooks' binary checked by something it does not control (issue 30 part 3). A binary
//! replaced by `exit 0` reports nothing about itself, so setup writes Claude Code's SessionStart
//! handler and status line as
//!
//! ```text
//! echo '<sha256>  <path>' | /usr/bin/sha256sum -c --status 2>/dev/null && exec <path> session-start; echo '<notice>'
//! ```
//!
//! Claude Code runs it with `/bin/sh -c` (observed), so the check is made by the system's shell and
//! a checker only root can change ([`crate::platform::system_digest_checker`]), against the digest
//! setup recorded in the settings file itself. The binary runs only when it is the one setup
//! installed; otherwise the shell prints the notice: a `systemMessage` the person sees at the
//! session's start, or the status line's text. Changing the recorded digest means changing the
//! settings, which ConfigChange judges; what stays forgeable at user level is in
//! `docs/security.md`.
//!
//! Only these two handlers are pinned: hashing the binary costs a few milliseconds and a process,
//! which the hook calls on the agent's hot path must not pay.

use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The parts of a pinned command.
#[derive(Debug, PartialEq, Eq)]
pub struct Pinned<'a> {
    pub digest: &'a str,
    pub path: &'a str,
    pub checker: &'a str,
    /// The loopgate command the check guards.
    pub inner: &'a str,
    /// What the shell prints when the check fails.
    pub notice: &'a str,
}

/// The pinned form of `inner`.
pub fn wrap(p: &Pinned) -> String {
    format!(
        "echo '{}  {}' | {} 2>/dev/null && exec {}; echo '{}'",
        p.digest, p.path, p.checker, p.inner, p.notice
    )
}

/// The parts of a command in exactly the form [`wrap`] writes, with a checker this OS family
/// knows; `None` for anything else.
pub fn parse(command: &str) -> Option<Pinned<'_>> {
    let rest = command.strip_prefix("echo '")?;
    let digest = rest.get(..64)?;
    if !digest
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let (path, rest) = rest[64..].strip_prefix("  ")?.split_once("' | ")?;
    let checker = crate::platform::DIGEST_CHECKERS
        .iter()
        .copied()
        .find(|c| rest.starts_with(c))?;
    let rest = rest[checker.len()..].strip_prefix(" 2>/dev/null && exec ")?;
    let (inner, notice) = rest.split_once("; echo '")?;
    let notice = notice.strip_suffix('\'')?;
    let parsed = Pinned {
        digest,
        path,
        checker,
        inner,
        notice,
    };
    // The guarded command is the pinned binary with plain arguments: no operator can hide in it.
    // Paths are plain too (a managed install's `--config /usr/local/lib/loopgate/config.toml`,
    // single-quoted where it has a space): with none of `;|&$<>()` and no backquote or newline,
    // a quote cannot make one.
    let args = inner
        .strip_prefix(&super::shell_quote(path))?
        .strip_prefix(' ')?;
    let plain = args
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./' ".contains(&b));
    (plain && pinnable(path) && !notice.contains('\'') && wrap(&parsed) == command)
        .then_some(parsed)
}

/// The command a pinned command guards (any other command is itself).
pub fn inner(command: &str) -> &str {
    parse(command).map_or(command, |p| p.inner)
}

/// Paths that go into the check's line, a single-quoted word and a JSON string as they are.
fn pinnable(path: &str) -> bool {
    path.starts_with('/')
        && !path
            .chars()
            .any(|c| matches!(c, '\'' | '"' | '\\') || c.is_control())
}

/// What SessionStart's shell says when the binary is not the one setup installed: a
/// `systemMessage`, shown at launch and never sent to the model (observed).
pub fn session_start_notice(path: &str) -> String {
    format!(
        "{{\"systemMessage\":\"loopgate is NOT judging this session: {path} is missing or is \
         not the binary loopgate setup installed (its SHA-256 differs from the one setup \
         recorded). If you upgraded loopgate, run loopgate setup again; if you did not, \
         something replaced it: reinstall loopgate and run loopgate doctor.\"}}"
    )
}

/// [`session_start_notice`] for a managed install, whose fix is root's.
pub fn managed_session_start_notice(path: &str) -> String {
    session_start_notice(path).replace(
        "run loopgate setup again",
        "run sudo loopgate setup --managed again",
    )
}

/// The status line's text in the same case.
pub fn status_line_notice() -> String {
    "loopgate ✗ OFF: its binary is not the one setup installed (loopgate setup, or reinstall)"
        .into()
}

/// Where [`pin`] takes the digest from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestFrom {
    /// The binary, hashed: what setup writes.
    Binary,
    /// Nowhere: the command's shape is all that is wanted (ConfigChange compares everything but
    /// the digest, see `setup::handler_drift`), so the binary is not read.
    ShapeOnly,
}

/// `command` pinned to `program`, the binary it runs, when this system has a root-owned checker
/// and `program` is an absolute path to a file; otherwise `command` unchanged.
pub fn pin(
    command: String,
    program: &str,
    notice: impl FnOnce(&str) -> String,
    from: DigestFrom,
) -> String {
    if !pinnable(program) || !Path::new(program).is_file() {
        return command;
    }
    let Some(checker) = crate::platform::system_digest_checker() else {
        return command;
    };
    let digest = match from {
        DigestFrom::Binary => match digest_of(Path::new(program)) {
            Ok(d) => d,
            Err(_) => return command,
        },
        DigestFrom::ShapeOnly => "0".repeat(64),
    };
    wrap(&Pinned {
        digest: &digest,
        path: program,
        checker,
        inner: &command,
        notice: &notice(program),
    })
}

/// A file's SHA-256 in hex, computed once per process and file version (setup pins two commands
/// to the same binary; ConfigChange may put several files right).
pub fn digest_of(path: &Path) -> Result<String> {
    use sha2::Digest;
    type Key = (PathBuf, u64, Option<std::time::SystemTime>);
    static SEEN: Mutex<Vec<(Key, String)>> = Mutex::new(Vec::new());
    let meta = std::fs::metadata(path)?;
    anyhow::ensure!(meta.is_file(), "{} is not a file", path.display());
    let key: Key = (path.to_path_buf(), meta.len(), meta.modified().ok());
    if let Some((_, d)) = SEEN.lock().ok().and_then(|s| {
        s.iter()
            .find(|(k, _)| *k == key)
            .map(|(k, d)| (k.clone(), d.clone()))
    }) {
        return Ok(d);
    }
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut h)?;
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if let Ok(mut s) = SEEN.lock() {
        s.push((key, digest.clone()));
    }
    Ok(digest)
}

/// Whether the binary a pinned command names still has the digest it records: `doctor`'s own
/// view of the check the shell makes at each session start.
pub fn holds(p: &Pinned) -> bool {
    digest_of(Path::new(p.path)).is_ok_and(|d| d == p.digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(checker: &'static str) -> String {
        wrap(&Pinned {
            digest: &"ab".repeat(32),
            path: "/home/u/.local/bin/loopgate",
            checker,
            inner: "/home/u/.local/bin/loopgate session-start",
            notice: &session_start_notice("/home/u/.local/bin/loopgate"),
        })
    }

    #[test]
    fn only_the_exact_form_parses() {
        let Some(&checker) = crate::platform::DIGEST_CHECKERS.first() else {
            return; // Windows: nothing is ever pinned
        };
        let good = sample(checker);
        let p = parse(&good).unwrap();
        assert_eq!(p.inner, "/home/u/.local/bin/loopgate session-start");
        assert_eq!(inner(&good), p.inner);
        let notice: serde_json::Value = serde_json::from_str(p.notice).unwrap();
        assert!(notice["systemMessage"].as_str().unwrap().contains("NOT"));
        for bad in [
            good.replace(checker, "/tmp/sha256sum -c --status"),
            good.replace(&"ab".repeat(32), "XY"),
            good.replace(" && exec ", " ; exec "),
            format!("{good} >/dev/null"),
            good.replace("; echo '", "; true; echo '"),
            format!("X=1 {good}"),
        ] {
            assert_eq!(parse(&bad), None, "{bad}");
            assert_eq!(inner(&bad), bad);
        }
    }

    #[test]
    fn a_managed_installs_flags_and_paths_parse_and_an_operator_does_not() {
        let Some(&checker) = crate::platform::DIGEST_CHECKERS.first() else {
            return;
        };
        let bin = "/usr/local/lib/loopgate/loopgate";
        let pinned = |inner: &str| {
            wrap(&Pinned {
                digest: &"ab".repeat(32),
                path: bin,
                checker,
                inner,
                notice: &session_start_notice(bin),
            })
        };
        for good in [
            format!("{bin} --ignore-env --config /usr/local/lib/loopgate/config.toml session-start"),
            format!("{bin} --ignore-env --config '/Library/Application Support/loopgate/config.toml' session-start"),
        ] {
            assert_eq!(parse(&pinned(&good)).map(|p| p.inner), Some(good.as_str()));
        }
        for bad in [
            format!("{bin} --config x; rm -rf ~ session-start"),
            format!("{bin} --config $(evil) session-start"),
            format!("{bin} --config 'a' >/dev/null session-start"),
        ] {
            assert_eq!(parse(&pinned(&bad)), None, "{bad}");
        }
    }
}
