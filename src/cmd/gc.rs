//! `loopgate gc`: housekeeping of the state directory on demand (see [`crate::gc`]).

use crate::config::Housekeeping;
use anyhow::{Context, Result};
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
        Some(s) => humantime::parse_duration(s).with_context(|| {
            format!("--older-than {s:?}: expected a duration such as 12h or 7d")
        })?,
        None => crate::gc::max_age(cfg),
    };
    let swept = crate::gc::sweep(
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
        "loopgate gc: {verb} {} session{}, {} lock, {} notice, {} quarantined and {} temp file{} ({} KiB) older than {} from {}",
        swept.sessions,
        if swept.sessions == 1 { "" } else { "s" },
        swept.locks,
        swept.notices,
        swept.quarantined,
        swept.temp,
        if swept.temp == 1 { "" } else { "s" },
        swept.bytes.div_ceil(1024),
        humantime::format_duration(age),
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
