//! Manual commands: what a person runs, as opposed to the hooks Claude Code runs.

pub mod completions;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod explain;
pub mod gc;
pub mod halted;
pub mod replay;
pub mod report;
pub mod reset;
pub mod resume;
pub mod setup;
pub mod status;
pub mod statusline;

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// The state directory: the flag, else `LOOPGATE_STATE_DIR`, else the platform default.
pub fn state_dir(flag: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(d) = flag.or_else(|| {
        std::env::var_os("LOOPGATE_STATE_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }) {
        return Ok(d);
    }
    match crate::config::paths::state_dir() {
        Some(d) => Ok(d),
        None => bail!("{}", crate::config::paths::NO_HOME),
    }
}

/// A duration option (`--since 2h`), or what to write instead.
pub fn duration(flag: &str, value: &str) -> Result<std::time::Duration> {
    humantime::parse_duration(value.trim()).map_err(|_| {
        anyhow::anyhow!(
            "{flag} {value:?} is not a duration: write a number and a unit, such as 30m, 2h or 7d"
        )
    })
}

/// Whether a hook has ever recorded anything in the state dir `dir`.
pub fn state_exists(dir: &Path) -> bool {
    dir.join("sessions").is_dir() || dir.join(crate::store::events::FILE).is_file()
}

/// The project a manual command looks at: the flag, else `CLAUDE_PROJECT_DIR`, else the
/// current directory.
pub fn project_dir(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os("CLAUDE_PROJECT_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .or_else(|| std::env::current_dir().ok())
        .map(|p| std::path::absolute(&p).unwrap_or(p))
}

/// The configuration as the hooks would load it for `project`.
pub fn load_config(
    file: Option<&Path>,
    observe: bool,
    project: Option<&Path>,
) -> crate::config::sources::Loaded {
    let mut sources = crate::config::Sources::from_process(file, observe, project);
    sources.provenance = true;
    crate::config::sources::load(&sources)
}
