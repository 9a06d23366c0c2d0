//! `loopgate setup`: wires the hooks into a Claude Code settings file (install.sh calls this).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub fn run(
    settings: Option<&Path>,
    bin: Option<&Path>,
    observe: bool,
    uninstall: bool,
) -> Result<()> {
    run_with(settings, bin, observe, uninstall, None)
}

/// `managed`: `Some(dir)` installs into Claude Code's managed-settings drop-in under `dir`
/// instead of a settings file (`setup --managed [--managed-dir DIR]`).
pub fn run_with(
    settings: Option<&Path>,
    bin: Option<&Path>,
    observe: bool,
    uninstall: bool,
    managed: Option<&Path>,
) -> Result<()> {
    if let Some(dir) = managed {
        let bin = match bin {
            Some(b) => b.to_path_buf(),
            None => std::env::current_exe().context("cannot find this executable's path")?,
        };
        let prefix = crate::setup::command_prefix(&bin, observe)?;
        println!("{}", crate::setup::run_managed(dir, &prefix, uninstall)?);
        if !uninstall {
            println!(
                "remove loopgate from your own settings (`loopgate setup --uninstall`) so its hooks do not run twice, \
                 and make sure {} is a binary the agent cannot replace (owned by root)",
                bin.display()
            );
        }
        return Ok(());
    }
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
