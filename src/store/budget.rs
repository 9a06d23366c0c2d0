//! The loop budget on disk: the day ledger (loop spend of the day across every session and CLI on
//! the machine) and Claude Code's live session cost as loopgate's status line saw it.
//!
//! The day ledger is written only when loop spend is added, which ordinary work never does, under
//! its own lock with a short deadline; it is a few dozen bytes. A ledger that is missing, locked
//! too long or unreadable fails open: the call goes on, its spend counted from this call.

use crate::judge::budget::Day;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The day ledger's file in the state directory.
pub const DAY_FILE: &str = "budget-day.json";
const DAY_LOCK: &str = "budget-day.lock";
/// The live costs' folder: one tiny file per session.
const LIVE_DIR: &str = "live";
/// More than any ledger of ours takes.
const MAX_BYTES: u64 = 4 << 10;
/// How long a loop call waits for another session's update of the day ledger.
const LOCK_WAIT: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
struct Ledger {
    day: String,
    usd: f64,
    tokens: u64,
}

/// The UTC date of `ms`, `YYYY-MM-DD`: the day a day's bound counts.
pub fn date_of(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_string()
}

/// Adds a loop call's spend to the day's total (a new day starts over) and returns the total
/// (`None` when the ledger could not be used), with what the person must hear about it.
pub fn add_to_day(dir: &Path, now_ms: u64, usd: f64, tokens: u64) -> (Option<Day>, Option<String>) {
    match add(dir, now_ms, usd, tokens) {
        Ok((day, problem)) => (Some(day), problem),
        Err(e) => (None, Some(e)),
    }
}

fn add(dir: &Path, now_ms: u64, usd: f64, tokens: u64) -> Result<(Day, Option<String>), String> {
    let today = date_of(now_ms);
    let lock_path = dir.join(DAY_LOCK);
    let lock = crate::store::open_private(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    crate::store::lock::lock_within(&lock, &lock_path, LOCK_WAIT, "the day ledger")
        .map_err(|e| format!("{e:#}; this call's loop spend is not in the day's total"))?;
    let path = dir.join(DAY_FILE);
    let (mut l, problem) = match crate::platform::bounded::read_text(&path, None, MAX_BYTES) {
        Ok(None) => (Ledger::default(), None),
        Ok(Some(t)) => match serde_json::from_str::<Ledger>(&t) {
            Ok(l) if l.usd.is_finite() && l.usd >= 0.0 => (l, None),
            _ => (Ledger::default(), Some("unreadable")),
        },
        Err(_) => (Ledger::default(), Some("unreadable")),
    };
    if l.day != today {
        l = Ledger {
            day: today,
            ..Ledger::default()
        };
    }
    l.usd += usd.max(0.0);
    l.tokens += tokens;
    let tmp = dir.join(format!(".tmp-{DAY_FILE}-{}", std::process::id()));
    let written = std::fs::write(&tmp, serde_json::to_vec(&l).unwrap_or_default())
        .and_then(|_| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    let day = Day {
        date: l.day,
        usd: l.usd,
        tokens: l.tokens,
    };
    let problem = match (problem, written) {
        (Some(p), _) => Some(format!(
            "the day ledger {} was {p}; the day's loop spend starts over from this call",
            path.display()
        )),
        (None, Err(e)) => Some(format!(
            "cannot write the day ledger {}: {e}",
            path.display()
        )),
        (None, Ok(())) => None,
    };
    Ok((day, problem))
}

/// The day's loop spend as the ledger holds it, for `status` and the status line (no lock: a
/// torn read shows nothing).
pub fn day(dir: &Path, now_ms: u64) -> Day {
    let today = date_of(now_ms);
    let l = crate::platform::bounded::read_text(&dir.join(DAY_FILE), None, MAX_BYTES)
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str::<Ledger>(&t).ok())
        .filter(|l| l.day == today)
        .unwrap_or_default();
    Day {
        date: today,
        usd: l.usd,
        tokens: l.tokens,
    }
}

/// The status line's record of a session's own cost, by the session's file stem
/// (housekeeping removes it with the session).
pub fn live_path(dir: &Path, stem: &str) -> PathBuf {
    dir.join(LIVE_DIR).join(format!("{stem}.cost"))
}

/// Records Claude Code's own cost of the session (`cost.total_cost_usd` of the status line's
/// input): one small file, written whole through a rename, no lock (only the status line writes
/// it, and a reader takes whichever whole file it finds).
pub fn write_live(dir: &Path, session: &str, usd: f64) {
    if !usd.is_finite() || usd < 0.0 {
        return;
    }
    let path = live_path(dir, &crate::store::Store::stem(session));
    let text = format!("{usd}");
    if std::fs::read_to_string(&path).is_ok_and(|t| t == text) {
        return;
    }
    let Some(parent) = path.parent() else { return };
    if crate::store::create_private_dir(parent).is_err() {
        return;
    }
    let tmp = parent.join(format!(".tmp-{}", std::process::id()));
    if std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .is_err()
    {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Claude Code's own cost of the session as the status line last recorded it, if it did.
pub fn read_live(dir: &Path, session: &str) -> Option<f64> {
    crate::platform::bounded::read_text(
        &live_path(dir, &crate::store::Store::stem(session)),
        None,
        64,
    )
    .ok()
    .flatten()
    .and_then(|t| t.trim().parse::<f64>().ok())
    .filter(|u| u.is_finite() && *u >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_adds_up_and_a_new_day_starts_over() {
        let d = tempfile::tempdir().unwrap();
        let day_ms = 86_400_000;
        let usd = |ms, add| add_to_day(d.path(), ms, add, 1).0.unwrap().usd;
        assert_eq!(usd(10, 1.5), 1.5);
        assert_eq!(usd(20, 1.0), 2.5);
        assert_eq!(day(d.path(), 30).usd, 2.5);
        assert_eq!(usd(day_ms + 1, 0.5), 0.5);
        assert_eq!(day(d.path(), 30).usd, 0.0, "yesterday is not today");
    }

    #[test]
    fn a_corrupt_ledger_starts_over_and_says_so() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(DAY_FILE), "{not json").unwrap();
        let (day_now, e) = add_to_day(d.path(), 10, 1.0, 1);
        assert_eq!(day_now.unwrap().usd, 1.0);
        assert!(e.unwrap().contains("starts over"));
        assert_eq!(day(d.path(), 10).usd, 1.0);
    }

    #[test]
    fn the_live_cost_round_trips() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_live(d.path(), "s"), None);
        write_live(d.path(), "s", 0.25);
        assert_eq!(read_live(d.path(), "s"), Some(0.25));
    }
}
