//! The person's sanction of a settings change that switches loopgate off (issue 30, part 2).
//!
//! ConfigChange cannot tell the person's edit from the agent's (the payloads are the same,
//! observed), so it undoes every change that switches loopgate off and keeps it here, pending,
//! under a short id. Only the person can keep it, by typing `/loopgate allow <id>`.
//!
//! Why that holds against tool calls (observed with Claude Code 2.1.330, `tests/fixtures/sanction/`):
//! Claude Code fires `UserPromptExpansion` for a custom slash command only when the person types
//! it at the prompt. The model's Skill tool may not run a command marked
//! `disable-model-invocation` (setup writes `/loopgate` so), and the prompt of its ScheduleWakeup
//! (`/loopgate allow …` included) comes back as a plain UserPromptSubmit, never expanded. The
//! `prompt-expansion` handler that sees the person's command applies the change itself.
//!
//! What stays forgeable at user level: these records are files the agent can write too, and
//! ConfigChange accepts a file that matches an allowed record. So every change accepted that way
//! is told again where the person looks (the session's next hook call, the status line,
//! `doctor`): a forged record does not go untold. A managed install puts the wiring where the
//! agent cannot write, and then nothing here is needed.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// In the state dir: one `<id>.json` per change undone and waiting for the person.
const PENDING_DIR: &str = "sanction-pending";
/// In the state dir: the changes the person allowed, one per settings file.
const ALLOWED: &str = "sanction-allowed.json";
/// How long the person has to allow an undone change.
pub const VALID_MS: u64 = 10 * 60 * 1000;
/// Larger records are not read: settings files are a few KiB.
const MAX_RECORD: u64 = 1 << 20;
/// Undone changes kept at once: an agent that unwires loopgate over and over cannot fill the
/// state dir with them.
const MAX_PENDING: usize = 64;

/// A change ConfigChange undid, waiting for the person's `/loopgate allow <id>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub id: String,
    pub session: String,
    pub created_ms: u64,
    /// What the change did, in the words ConfigChange told the person.
    pub problems: Vec<String>,
    pub files: Vec<Kept>,
}

/// Beside a settings file, the version loopgate undid.
pub const ASIDE_SUFFIX: &str = ".loopgate-undone";

/// Where the version loopgate undid is kept, beside `file`.
pub fn aside_path(file: &Path) -> PathBuf {
    let mut aside = file.as_os_str().to_owned();
    aside.push(ASIDE_SUFFIX);
    PathBuf::from(aside)
}

/// One settings file of a pending change. The record holds digests, never settings text (an
/// `env` there may hold an API key): the changed version itself is the one kept beside the
/// file ([`aside_path`]), checked against its digest before it is written back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    pub file: PathBuf,
    /// The digest (SHA-256, 128 bits) of the file's text as the change left it (`None`: the
    /// change deleted it, or left something that is not a file loopgate can read).
    pub changed_digest: Option<String>,
    /// The canonical digest of the file as loopgate put it back: a file changed again since is
    /// not overwritten by an old allow.
    pub put_back: String,
}

/// A change the person allowed: the file, and the digest of its JSON as allowed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Allowed {
    pub file: PathBuf,
    pub digest: String,
    pub id: String,
    pub session: String,
    pub at_ms: u64,
}

/// Why `/loopgate allow <id>` kept nothing.
#[derive(Debug, PartialEq)]
pub enum Refused {
    Unknown,
    OtherSession,
    Expired,
    /// The file was changed again after loopgate put it back.
    ChangedSince(PathBuf),
}

impl Refused {
    pub fn message(&self, id: &str) -> String {
        match self {
            Refused::Unknown => format!("loopgate has no undone change {id} waiting"),
            Refused::OtherSession => format!(
                "change {id} was undone in another session; allow it there, or run \
                 `loopgate setup --uninstall` when no session runs"
            ),
            Refused::Expired => format!(
                "change {id} waited more than {} minutes; make the change again and allow the new id",
                VALID_MS / 60_000
            ),
            Refused::ChangedSince(f) => format!(
                "{} changed again since loopgate undid change {id}; make the change again and allow the new id",
                f.display()
            ),
        }
    }
}

/// The canonical digest of a settings file's JSON: key order and spacing do not count (Claude
/// Code's `/config` rewrites the file re-ordered, observed).
pub fn digest(settings: &Value) -> String {
    let mut bytes = Vec::new();
    crate::util::canon::write_canonical(settings, &mut bytes);
    crate::util::canon::text_key(&String::from_utf8_lossy(&bytes))
}

/// The JSON of a settings file's text, as ConfigChange reads it (empty is `{}`).
pub fn parse(text: &str) -> Option<Value> {
    super::settings_file::parse(text).ok()
}

/// A settings file's JSON now: `{}` when it is gone, `None` when it cannot be read as Claude
/// Code reads it (never a wait on a FIFO put in its place).
fn settings_now(path: &Path) -> Option<Value> {
    match super::settings_file::read(path) {
        super::settings_file::Settings::Missing => Some(Value::Object(serde_json::Map::new())),
        super::settings_file::Settings::Json(_, v) => Some(v),
        super::settings_file::Settings::Unreadable(_) => None,
    }
}

/// A record's text: a regular file of at most [`MAX_RECORD`] bytes (a FIFO put in its place is
/// never waited on).
fn read_small(path: &Path) -> Option<String> {
    crate::platform::bounded::read_text(path, None, MAX_RECORD)
        .ok()
        .flatten()
}

/// An id is six hex digits: short enough to type, and safe as a file name.
fn valid_id(id: &str) -> bool {
    id.len() == 6
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn pending_path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join(PENDING_DIR).join(format!("{id}.json"))
}

/// Keeps an undone change for the person; returns its id.
pub fn keep(
    state_dir: &Path,
    session: &str,
    problems: &[String],
    files: Vec<Kept>,
    now_ms: u64,
) -> Result<String> {
    let dir = state_dir.join(PENDING_DIR);
    crate::platform::create_private_dir(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    prune(&dir, MAX_PENDING - 1);
    let mut seed = format!("{now_ms} {} {session}", std::process::id());
    for f in &files {
        seed.push_str(&f.file.display().to_string());
        seed.push_str(f.changed_digest.as_deref().unwrap_or(""));
    }
    for salt in 0u32..16 {
        let id = crate::util::canon::text_key(&format!("{seed} {salt}"))[..6].to_string();
        let path = pending_path(state_dir, &id);
        if path.exists() {
            continue;
        }
        let record = Pending {
            id: id.clone(),
            session: session.to_string(),
            created_ms: now_ms,
            problems: problems.to_vec(),
            files,
        };
        crate::setup::write_atomic(&path, serde_json::to_string(&record)?.as_bytes(), None)?;
        return Ok(id);
    }
    bail!("no free id in {}", dir.display())
}

/// Removes the undone changes nobody allowed in time (by the file system's clock, which wrote
/// them), then the oldest beyond `keep`.
fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    let mut records: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    records.sort();
    let expired = |at: &std::time::SystemTime| {
        now.duration_since(*at)
            .is_ok_and(|age| age.as_millis() > u128::from(VALID_MS))
    };
    let beyond = records.len().saturating_sub(keep);
    for (i, (at, path)) in records.iter().enumerate() {
        if i < beyond || expired(at) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The pending change `id`, if there is one.
pub fn pending(state_dir: &Path, id: &str) -> Option<Pending> {
    if !valid_id(id) {
        return None;
    }
    let text = read_small(&pending_path(state_dir, id))?;
    serde_json::from_str(&text).ok()
}

/// What `/loopgate allow <id>` does for the person in `session`: checks the pending change, then
/// writes each file back as the change left it, recording it as allowed first (so the
/// ConfigChange that follows the write finds it allowed). The pending record goes either way
/// once it is used.
pub fn allow(state_dir: &Path, id: &str, session: &str, now_ms: u64) -> Result<Pending, Refused> {
    let p = pending(state_dir, id).ok_or(Refused::Unknown)?;
    if p.session != session {
        return Err(Refused::OtherSession);
    }
    if now_ms.saturating_sub(p.created_ms) > VALID_MS || p.created_ms > now_ms + 60_000 {
        let _ = std::fs::remove_file(pending_path(state_dir, id));
        return Err(Refused::Expired);
    }
    for k in &p.files {
        let now = settings_now(&k.file);
        if now.map(|v| digest(&v)).as_deref() != Some(k.put_back.as_str()) {
            return Err(Refused::ChangedSince(k.file.clone()));
        }
    }
    let _ = std::fs::remove_file(pending_path(state_dir, id));
    Ok(p)
}

/// Records `file`'s allowed content and writes it. `Err` names what could not be written.
pub fn apply(state_dir: &Path, p: &Pending, now_ms: u64) -> Result<()> {
    for k in &p.files {
        let changed = match &k.changed_digest {
            Some(sha) => {
                let aside = aside_path(&k.file);
                let text = crate::platform::bounded::read_text(
                    &aside,
                    None,
                    super::settings_file::MAX_BYTES,
                )
                .ok()
                .flatten()
                .filter(|t| crate::util::canon::text_key(t) == *sha)
                .with_context(|| {
                    format!(
                        "the changed version kept in {} is gone or was changed since",
                        aside.display()
                    )
                })?;
                Some(text)
            }
            None => None,
        };
        let value = parse(changed.as_deref().unwrap_or(""))
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        record_allowed(
            state_dir,
            Allowed {
                file: k.file.clone(),
                digest: digest(&value),
                id: p.id.clone(),
                session: p.session.clone(),
                at_ms: now_ms,
            },
        )?;
        match &changed {
            Some(text) => {
                let permissions = std::fs::metadata(&k.file).ok().map(|m| m.permissions());
                crate::setup::write_atomic(&k.file, text.as_bytes(), permissions.as_ref())?;
            }
            None => {
                let _ = std::fs::remove_file(&k.file);
            }
        }
    }
    Ok(())
}

fn all_allowed(state_dir: &Path) -> Vec<Allowed> {
    read_small(&state_dir.join(ALLOWED))
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn record_allowed(state_dir: &Path, a: Allowed) -> Result<()> {
    let mut list = all_allowed(state_dir);
    list.retain(|x| x.file != a.file);
    list.push(a);
    crate::setup::write_atomic(
        &state_dir.join(ALLOWED),
        serde_json::to_string(&list)?.as_bytes(),
        None,
    )
}

/// The allowed record `file` now matches, if any.
pub fn allowed_for(state_dir: Option<&Path>, file: &Path, settings: &Value) -> Option<Allowed> {
    let d = digest(settings);
    all_allowed(state_dir?)
        .into_iter()
        .find(|a| a.file == file && a.digest == d)
}

/// Allowed changes still in effect (the file still as allowed): for the status line and doctor.
pub fn in_effect(state_dir: &Path) -> Vec<Allowed> {
    all_allowed(state_dir)
        .into_iter()
        .filter(|a| {
            let now = settings_now(&a.file);
            now.is_some_and(|v| digest(&v) == a.digest)
        })
        .collect()
}

/// Forgets what was allowed for `file`: `loopgate setup` wired it again.
pub fn forget(state_dir: &Path, file: &Path) {
    let list = all_allowed(state_dir);
    if list.iter().any(|a| a.file == file) {
        let kept: Vec<Allowed> = list.into_iter().filter(|a| a.file != file).collect();
        if let Ok(text) = serde_json::to_string(&kept) {
            let _ = crate::setup::write_atomic(&state_dir.join(ALLOWED), text.as_bytes(), None);
        }
    }
}

/// The words of `/loopgate allow <id>`: the id, if the arguments are exactly that.
pub fn allow_id(args: &str) -> Option<&str> {
    let mut words = args.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("allow"), Some(id), None) => Some(id),
        _ => None,
    }
}

/// When an allowed change took effect, as the person reads it (UTC).
pub fn when(a: &Allowed) -> String {
    crate::platform::clock::rfc3339(a.at_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn undone_changes_past_their_time_or_beyond_the_bound_are_removed() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join(PENDING_DIR);
        std::fs::create_dir(&dir).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for i in 0..70 {
            let f = std::fs::File::create(dir.join(format!("{i:06x}.json"))).unwrap();
            // One expired record; the others a second apart, oldest first.
            let at = if i == 69 {
                old
            } else {
                std::time::SystemTime::now() - std::time::Duration::from_secs(100 - i)
            };
            f.set_modified(at).unwrap();
        }
        std::fs::write(dir.join("notes.txt"), "not a record").unwrap();
        prune(&dir, 63);
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left.len(), 64, "63 records and the other file: {left:?}");
        assert!(!left.contains(&format!("{:06x}.json", 69)), "expired");
        assert!(
            !left.contains(&format!("{:06x}.json", 0)),
            "the oldest beyond the bound"
        );
        assert!(
            left.contains(&format!("{:06x}.json", 68)),
            "the newest stays"
        );
        assert!(left.contains(&"notes.txt".to_string()));
    }

    #[test]
    fn a_pending_change_is_allowed_once_in_its_session_and_in_time() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("settings.json");
        std::fs::write(&f, r#"{"hooks": {"a": 1}}"#).unwrap();
        let put_back = digest(&json!({"hooks": {"a": 1}}));
        let kept = |changed: &str| {
            std::fs::write(aside_path(&f), changed).unwrap();
            vec![Kept {
                file: f.clone(),
                changed_digest: Some(crate::util::canon::text_key(changed)),
                put_back: put_back.clone(),
            }]
        };
        let id = keep(d.path(), "s1", &["gone".into()], kept("{}"), 1_000).unwrap();
        assert!(valid_id(&id), "{id}");
        assert_eq!(
            allow(d.path(), &id, "s2", 2_000).unwrap_err(),
            Refused::OtherSession
        );
        let p = allow(d.path(), &id, "s1", 2_000).unwrap();
        apply(d.path(), &p, 2_000).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "{}");
        assert!(allowed_for(Some(d.path()), &f, &json!({})).is_some());
        assert_eq!(in_effect(d.path()).len(), 1);
        assert_eq!(
            allow(d.path(), &id, "s1", 2_000).unwrap_err(),
            Refused::Unknown
        );
        std::fs::write(&f, r#"{"hooks": {"a": 1}}"#).unwrap();
        let id = keep(d.path(), "s1", &[], kept("{}"), 1_000).unwrap();
        assert_eq!(
            allow(d.path(), &id, "s1", 1_000 + VALID_MS + 1).unwrap_err(),
            Refused::Expired
        );
        let id = keep(d.path(), "s1", &[], kept("{}"), 1_000).unwrap();
        std::fs::write(&f, r#"{"other": true}"#).unwrap();
        assert!(matches!(
            allow(d.path(), &id, "s1", 2_000),
            Err(Refused::ChangedSince(_))
        ));
        assert_eq!(
            allow(d.path(), "../../x", "s1", 2_000).unwrap_err(),
            Refused::Unknown
        );
        assert_eq!(allow_id(" allow  3f9a2c "), Some("3f9a2c"));
        assert_eq!(allow_id("allow"), None);
        forget(d.path(), &f);
        assert!(in_effect(d.path()).is_empty());
    }
}
