//! `loopgate config`: the effective configuration as TOML, each value annotated with where it
//! came from (default, user file, project file, config file, environment, flag).

use crate::config::sources::Loaded;
use crate::config::sources::Origin;
use anyhow::{bail, Result};
use serde_json::json;
use std::io::Write;
use toml::{Table, Value};

pub fn run(loaded: &Loaded, as_json: bool) -> Result<()> {
    if let Some(f) = &loaded.missing_explicit {
        bail!("config file {} does not exist", f.display());
    }
    let mut out = std::io::stdout().lock();
    if as_json {
        let settings: Vec<_> = crate::config::leaves(table(&loaded.effective))
            .into_iter()
            .map(|(key, v)| {
                let origin = loaded.origins.get(&key).cloned().unwrap_or(Origin::Default);
                json!({
                    "key": key,
                    "value": serde_json::to_value(v).unwrap_or_default(),
                    "source": origin,
                    "env": crate::config::sources::env_var_for(&key),
                })
            })
            .collect();
        let doc = json!({
            "settings": settings,
            "problems": loaded.problems,
            "observing_hooks": observing_hooks().map(|f| f.display().to_string()),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    for p in &loaded.problems {
        crate::hook::say(p);
    }
    writeln!(
        out,
        "# loopgate's effective configuration; after each value, where it came from"
    )?;
    if let Some(file) = observing_hooks() {
        writeln!(
            out,
            "# note: the hooks in {} run with --observe: for them mode is \"observe\" \
             (decisions are logged, nothing is denied)",
            file.display()
        )?;
    }
    write_table(&mut out, table(&loaded.effective), "", loaded)?;
    Ok(())
}

/// Claude Code's user settings file, when its loopgate hooks run with `--observe`.
fn observing_hooks() -> Option<std::path::PathBuf> {
    crate::config::paths::agent_hook_file(crate::protocol::dialect::Agent::Claude)
        .filter(|f| crate::setup::observing_hooks_in(f))
}

fn table(v: &Option<Table>) -> &Table {
    static EMPTY: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    v.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Table::new))
}

fn write_table(out: &mut impl Write, t: &Table, prefix: &str, loaded: &Loaded) -> Result<()> {
    let mut lines = Vec::new();
    for (k, v) in t {
        if v.is_table() {
            continue;
        }
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let origin = loaded
            .origins
            .get(&path)
            .cloned()
            .unwrap_or(Origin::Default);
        lines.push((format!("{k} = {v}"), origin.to_string()));
    }
    let width = lines
        .iter()
        .map(|(l, _)| l.len())
        .max()
        .unwrap_or(0)
        .min(60);
    for (line, origin) in lines {
        writeln!(out, "{line:width$}  # {origin}")?;
    }
    for (k, v) in t {
        let Value::Table(sub) = v else { continue };
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if sub.values().any(|v| !v.is_table()) {
            writeln!(out, "\n[{path}]")?;
        }
        write_table(out, sub, &path, loaded)?;
    }
    Ok(())
}
