//! Housekeeping of the state directory: session states, their lock and notice files,
//! quarantined (unreadable) states and orphaned temp files that nobody touched for
//! `[housekeeping] max_age_days` (default 7) are removed; quarantined files are also capped in
//! number. `loopgate gc` runs it on demand; the first hook call of a session runs it at most once a
//! day (one `stat` of a stamp file otherwise), so no call pays for it twice.
//!
//! A session whose lock another process holds is never touched. Also here: rotation of
//! `events.jsonl` into several generations.

use crate::config::Housekeeping;
use anyhow::{Context, Result};
use serde::Serialize;
use std::fs::{self, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The stamp whose age decides whether a hook call runs housekeeping.
pub const STAMP: &str = "gc.stamp";
/// How often a hook call runs housekeeping at most.
pub const EVERY: Duration = Duration::from_secs(24 * 3600);
/// A temp file lives for the milliseconds of one write; one this old is an orphan whatever the
/// configured age.
const TEMP_AGE: Duration = Duration::from_secs(3600);

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Swept {
    pub sessions: usize,
    pub locks: usize,
    pub notices: usize,
    pub quarantined: usize,
    pub temp: usize,
    pub bytes: u64,
    /// Sessions old enough but skipped because another process held their lock.
    pub busy: usize,
    /// What was (or, with a dry run, would be) removed.
    pub files: Vec<PathBuf>,
}

impl Swept {
    pub fn total(&self) -> usize {
        self.sessions + self.locks + self.notices + self.quarantined + self.temp
    }
}

enum Kind {
    Session,
    Lock,
    Notice,
    Quarantined,
    Temp,
    Other,
}

fn kind(name: &str) -> Kind {
    if name.starts_with(".tmp-") {
        Kind::Temp
    } else if name.contains(".corrupt-") || name.contains(".legacy-json-") {
        Kind::Quarantined
    } else if name
        .rsplit_once('.')
        // `.json`: a state of the first format, which a hook call moves aside, but an abandoned
        // session may have left one.
        .is_some_and(|(_, ext)| ext == crate::store::EXT || ext == "json")
    {
        Kind::Session
    } else if name.ends_with(".lock") {
        Kind::Lock
    } else if name.ends_with(".notice") {
        Kind::Notice
    } else {
        Kind::Other
    }
}

/// The age after which the configuration has files removed.
pub fn max_age(cfg: &Housekeeping) -> Duration {
    Duration::from_secs(cfg.max_age_days.saturating_mul(86_400))
}

/// Removes what is older than `max_age` (measured from `now`) from `state_dir`, and
/// quarantined files beyond the newest `max_quarantined`.
pub fn sweep(
    state_dir: &Path,
    max_age: Duration,
    max_quarantined: usize,
    now: SystemTime,
    dry_run: bool,
) -> Result<Swept> {
    let sessions = state_dir.join("sessions");
    let mut out = Swept::default();
    let rd = match fs::read_dir(&sessions) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", sessions.display())),
    };
    let mut entries: Vec<(String, PathBuf, fs::Metadata)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let meta = fs::symlink_metadata(e.path()).ok()?;
            Some((name, e.path(), meta))
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let age = |m: &fs::Metadata| {
        m.modified()
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    };
    let exists = |name: &str| entries.iter().any(|(n, _, _)| n == name);
    let mut quarantined: Vec<(SystemTime, PathBuf, u64)> = Vec::new();
    let mut gone_sessions: Vec<String> = Vec::new();

    for (name, path, meta) in &entries {
        match kind(name) {
            Kind::Session if age(meta) > max_age => {
                let stem = name.rsplit_once('.').map_or(name.as_str(), |(s, _)| s);
                let lock = sessions.join(format!("{stem}.lock"));
                // Hold the session's lock while removing it, so no hook is mid-update.
                let guard = match OpenOptions::new().read(true).write(true).open(&lock) {
                    Ok(f) => match f.try_lock() {
                        Ok(()) => Some(f),
                        Err(TryLockError::WouldBlock) => {
                            out.busy += 1;
                            continue;
                        }
                        Err(TryLockError::Error(_)) => None,
                    },
                    Err(_) => None,
                };
                remove(path, meta, dry_run, &mut out)?;
                out.sessions += 1;
                gone_sessions.push(stem.to_string());
                for (ext, counter) in [("notice", 0), ("lock", 1)] {
                    let p = sessions.join(format!("{stem}.{ext}"));
                    if let Ok(m) = fs::symlink_metadata(&p) {
                        remove(&p, &m, dry_run, &mut out)?;
                        if counter == 0 {
                            out.notices += 1;
                        } else {
                            out.locks += 1;
                        }
                    }
                }
                // The status line's record of the session's own cost (the loop budget).
                let live = crate::store::budget::live_path(state_dir, stem);
                if let Ok(m) = fs::symlink_metadata(&live) {
                    remove(&live, &m, dry_run, &mut out)?;
                }
                drop(guard);
            }
            Kind::Lock | Kind::Notice if age(meta) > max_age => {
                let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name);
                if gone_sessions.iter().any(|s| s == stem)
                    || exists(&format!("{stem}.{}", crate::store::EXT))
                    || exists(&format!("{stem}.json"))
                {
                    continue; // handled with, or kept with, its session
                }
                if matches!(kind(name), Kind::Lock) {
                    let Ok(f) = OpenOptions::new().read(true).write(true).open(path) else {
                        continue;
                    };
                    if f.try_lock().is_err() {
                        out.busy += 1;
                        continue;
                    }
                    remove(path, meta, dry_run, &mut out)?;
                    out.locks += 1;
                } else {
                    remove(path, meta, dry_run, &mut out)?;
                    out.notices += 1;
                }
            }
            Kind::Temp if age(meta) > max_age.min(TEMP_AGE) => {
                remove(path, meta, dry_run, &mut out)?;
                out.temp += 1;
            }
            Kind::Quarantined => {
                quarantined.push((
                    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    path.clone(),
                    meta.len(),
                ));
            }
            _ => {}
        }
    }
    if !dry_run {
        super::seen::forget(state_dir, &gone_sessions);
    }
    // Newest first: the cap keeps the most recent evidence.
    quarantined.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    for (i, (modified, path, _)) in quarantined.iter().enumerate() {
        let old = now.duration_since(*modified).unwrap_or_default() > max_age;
        if old || i >= max_quarantined {
            if let Ok(m) = fs::symlink_metadata(path) {
                remove(path, &m, dry_run, &mut out)?;
                out.quarantined += 1;
            }
        }
    }
    Ok(out)
}

fn remove(path: &Path, meta: &fs::Metadata, dry_run: bool, out: &mut Swept) -> Result<()> {
    if !dry_run {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", path.display())),
        }
    }
    out.bytes += meta.len();
    out.files.push(path.to_path_buf());
    Ok(())
}

/// Runs [`sweep`] when the last run is older than [`EVERY`]: what a hook call does, at the cost
/// of one `stat` otherwise. Errors are swallowed: housekeeping must never fail a hook.
pub fn maybe_sweep(state_dir: &Path, cfg: &Housekeeping) {
    let stamp = state_dir.join(STAMP);
    let now = SystemTime::now();
    let fresh = fs::symlink_metadata(&stamp)
        .ok()
        .filter(|m| m.file_type().is_file())
        .and_then(|m| m.modified().ok())
        .and_then(|t| now.duration_since(t).ok())
        .is_some_and(|age| age < EVERY);
    if fresh {
        return;
    }
    // Claim the run first, so parallel hook calls do not all sweep.
    let _ = fs::remove_file(&stamp);
    if crate::store::open_private(&stamp).is_err() {
        return;
    }
    let _ = sweep(state_dir, max_age(cfg), cfg.max_quarantined, now, false);
}

/// `events.jsonl` and its rotated generations that exist, oldest first.
pub fn log_generations(state_dir: &Path) -> Vec<PathBuf> {
    let base = state_dir.join(crate::store::events::FILE);
    let mut out: Vec<PathBuf> = (1..=99)
        .map(|i| state_dir.join(format!("{}.{i}", crate::store::events::FILE)))
        .take_while(|p| p.exists())
        .collect();
    out.reverse();
    if base.exists() {
        out.push(base);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path, days: u64) {
        let t = SystemTime::now() - Duration::from_secs(days * 86_400 + 60);
        let f = OpenOptions::new().append(true).open(path).unwrap();
        f.set_modified(t).unwrap();
    }

    fn file(dir: &Path, name: &str, days_old: u64) -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, b"x").unwrap();
        age(&p, days_old);
        p
    }

    #[test]
    fn a_sessions_live_cost_goes_with_it() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("sessions");
        let live = d.path().join("live");
        fs::create_dir_all(&s).unwrap();
        fs::create_dir_all(&live).unwrap();
        file(&s, "aaaa.state", 8);
        file(&s, "bbbb.state", 1);
        let gone = file(&live, "aaaa.cost", 8);
        let kept = file(&live, "bbbb.cost", 8);
        let cfg = Housekeeping::default();
        sweep(d.path(), max_age(&cfg), 20, SystemTime::now(), false).unwrap();
        assert!(!gone.exists() && kept.exists());
    }

    #[test]
    fn removes_old_files_and_keeps_recent_and_busy_ones() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("sessions");
        fs::create_dir_all(&s).unwrap();
        let old_json = file(&s, "aaaa.json", 8);
        let old_lock = file(&s, "aaaa.lock", 8);
        let old_notice = file(&s, "aaaa.notice", 8);
        let new_json = file(&s, "bbbb.json", 1);
        let new_lock = file(&s, "bbbb.lock", 30); // its session is recent: kept
        let busy_json = file(&s, "cccc.json", 9);
        let busy_lock = file(&s, "cccc.lock", 9);
        let held = OpenOptions::new().write(true).open(&busy_lock).unwrap();
        held.lock().unwrap();
        let orphan_lock = file(&s, "dddd.lock", 10);
        let old_tmp = file(&s, ".tmp-abc", 1);
        let new_q = file(&s, "eeee.corrupt-1-2", 1);
        let old_q = file(&s, "ffff.corrupt-1-2", 8);
        // A state of today's format with its lock, and a first-format state moved aside.
        let old_state = file(&s, "gggg.state", 8);
        let old_state_lock = file(&s, "gggg.lock", 8);
        let old_legacy = file(&s, "hhhh.legacy-json-1-2", 8);
        let cfg = Housekeeping::default();
        let age = max_age(&cfg);

        let dry = sweep(d.path(), age, 20, SystemTime::now(), true).unwrap();
        assert_eq!(dry.total(), 9);
        assert!(old_json.exists(), "a dry run removes nothing");

        let swept = sweep(d.path(), age, 20, SystemTime::now(), false).unwrap();
        assert_eq!(
            (
                swept.sessions,
                swept.locks,
                swept.notices,
                swept.temp,
                swept.quarantined,
                swept.busy
            ),
            (2, 3, 1, 1, 2, 1)
        );
        for gone in [
            &old_json,
            &old_lock,
            &old_notice,
            &orphan_lock,
            &old_tmp,
            &old_q,
            &old_state,
            &old_state_lock,
            &old_legacy,
        ] {
            assert!(!gone.exists(), "{}", gone.display());
        }
        for kept in [&new_json, &new_lock, &busy_json, &busy_lock, &new_q] {
            assert!(kept.exists(), "{}", kept.display());
        }
        drop(held);
    }

    #[test]
    fn quarantined_files_are_capped_newest_kept() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("sessions");
        fs::create_dir_all(&s).unwrap();
        for i in 0..5u64 {
            let p = s.join(format!("q{i}.corrupt-{i}-1"));
            fs::write(&p, b"x").unwrap();
            let t = SystemTime::now() - Duration::from_secs(100 - i);
            OpenOptions::new()
                .append(true)
                .open(&p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        let age = max_age(&Housekeeping::default());
        let swept = sweep(d.path(), age, 2, SystemTime::now(), false).unwrap();
        assert_eq!(swept.quarantined, 3);
        assert!(s.join("q4.corrupt-4-1").exists() && s.join("q3.corrupt-3-1").exists());
    }

    #[test]
    fn rotation_keeps_generations() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join(crate::store::events::FILE);
        for i in 0..5 {
            fs::write(&log, format!("{i}")).unwrap();
            crate::store::events::rotate(&log, 3).unwrap();
        }
        fs::write(&log, "5").unwrap();
        let gens = log_generations(d.path());
        let texts: Vec<String> = gens
            .iter()
            .map(|p| fs::read_to_string(p).unwrap())
            .collect();
        assert_eq!(texts, ["2", "3", "4", "5"]);
    }

    #[test]
    fn maybe_sweep_runs_once_a_day() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("sessions");
        fs::create_dir_all(&s).unwrap();
        let cfg = Housekeeping::default();
        maybe_sweep(d.path(), &cfg);
        assert!(d.path().join(STAMP).exists());
        let old = file(&s, "aaaa.json", 8);
        maybe_sweep(d.path(), &cfg);
        assert!(old.exists(), "the stamp is fresh: no second sweep today");
        age(&d.path().join(STAMP), 2);
        maybe_sweep(d.path(), &cfg);
        assert!(!old.exists());
    }
}
