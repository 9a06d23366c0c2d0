//! `loopgate setup`: wires the hooks into a Claude Code settings file (install.sh calls this).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub fn run(
    settings: Option<&Path>,
    bin: Option<&Path>,
    observe: bool,
    uninstall: bool,
) -> Result<()> {
    let settings: PathBuf = match settings {
        Some(p) => p.to_path_buf(),
        None => directories::BaseDirs::new()
            .context("cannot find the home directory")?
            .home_dir()
            .join(".claude")
            .join("settings.json"),
    };
    let bin = match bin {
        Some(b) => b.to_path_buf(),
        None => std::env::current_exe().context("cannot find this executable's path")?,
    };
    let prefix = crate::setup::command_prefix(&bin, observe)?;
    println!("{}", crate::setup::run(&settings, &prefix, uninstall)?);
    Ok(())
}
