//! `loopgate gc`: housekeeping of the state directory on demand (see [`crate::store::gc`]).

use crate::config::Housekeeping;
use anyhow::Result;
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

pub fn run(
    state_dir: &Path,
    cfg: &Housekeeping,
    older_than: Option<&str>,
    dry_run: bool,
    as_json: bool,
) -> Result<()> {
    let age = match older_than {
        Some(s) => super::duration("--older-than", s)?,
        None => crate::store::gc::max_age(cfg),
    };
    let swept = crate::store::gc::sweep(
        state_dir,
        age,
        cfg.max_quarantined,
        SystemTime::now(),
        dry_run,
    )?;
    let mut out = std::io::stdout().lock();
    if as_json {
        let mut v = serde_json::to_value(&swept)?;
        v["dry_run"] = dry_run.into();
        v["older_than_seconds"] = age.as_secs().into();
        v["state_dir"] = state_dir.display().to_string().into();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    writeln!(
        out,
        "loopgate gc: {verb} {}, {}, {}, {} and {} ({} KiB) older than {} from {}",
        count(swept.sessions as u64, "session"),
        count(swept.locks as u64, "lock"),
        count(swept.notices as u64, "notice"),
        count(swept.quarantined as u64, "quarantined file"),
        count(swept.temp as u64, "temp file"),
        swept.bytes.div_ceil(1024),
        age_words(age),
        state_dir.display()
    )?;
    if swept.busy > 0 {
        writeln!(out, "  {} in use, left alone", swept.busy)?;
    }
    if dry_run {
        for f in &swept.files {
            writeln!(out, "  {}", f.display())?;
        }
    }
    Ok(())
}

/// `1 session`, `3 sessions`.
fn count(n: impl std::fmt::Display + PartialEq<u64>, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// An age as people say it: `7 days`, `12 hours`, `90 seconds`.
fn age_words(age: std::time::Duration) -> String {
    let s = age.as_secs();
    match s {
        0 => "0 seconds".to_string(),
        _ if s.is_multiple_of(86_400) => count(s / 86_400, "day"),
        _ if s.is_multiple_of(3_600) => count(s / 3_600, "hour"),
        _ if s.is_multiple_of(60) => count(s / 60, "minute"),
        _ => count(s, "second"),
    }
}
