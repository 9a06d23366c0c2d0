//! `loopgate setup --agent opencode|kilo`: OpenCode and Kilo CLI run no hook commands, so setup
//! writes loopgate's plugin (`opencode-plugin.js`, also shipped in the npm package) into the CLI's
//! global plugin folder, `~/.config/opencode/plugins/` or `~/.config/kilo/plugins/` (each loads
//! every file there at start, observed), with the binary's path and the dialect filled in, as the
//! other CLIs' hook files name the binary. The file is wholly loopgate's: installing rewrites
//! it, uninstalling deletes it.

use super::agents::Outcome;
use crate::protocol::dialect::Agent;
use anyhow::{bail, Context, Result};
use std::fs;
use std::io;
use std::path::Path;

/// The plugin's source; `loopgate setup` fills in [`COMMAND_LINE`] and [`AGENT_LINE`].
pub const SOURCE: &str = include_str!("opencode-plugin.js");
const COMMAND_LINE: &str = "const COMMAND = null";
const AGENT_LINE: &str = "const AGENT = \"opencode\"";
/// Its first words, which mark a file as loopgate's plugin.
const MARK: &str = "// loopgate's plugin for OpenCode and Kilo CLI";

/// The plugin as setup writes it: running `bin` (with `--observe` in observe mode) in `agent`'s
/// dialect.
pub fn text(agent: Agent, bin: &Path, observe: bool) -> Result<String> {
    let bin = bin
        .to_str()
        .with_context(|| format!("binary path {} is not valid UTF-8", bin.display()))?;
    let mut argv = vec![crate::platform::hook_command_path(bin)];
    if observe {
        argv.push("--observe".into());
    }
    argv.extend(["--agent".into(), agent.name().into()]);
    let command = format!("const COMMAND = {}", serde_json::to_string(&argv)?);
    let agent_line = format!("const AGENT = {}", serde_json::to_string(agent.name())?);
    Ok(SOURCE
        .replacen(COMMAND_LINE, &command, 1)
        .replacen(AGENT_LINE, &agent_line, 1))
}

/// Whether `text` is loopgate's plugin.
pub fn is_ours(text: &str) -> bool {
    text.starts_with(MARK)
}

/// The command a plugin file runs (`[program, args…]`), `None` when it names none (the npm
/// package's copy, which runs `loopgate` from PATH) or is not loopgate's.
pub fn command_in(text: &str) -> Option<Vec<String>> {
    if !is_ours(text) {
        return None;
    }
    let line = text.lines().find(|l| l.starts_with("const COMMAND = "))?;
    serde_json::from_str(line.trim_start_matches("const COMMAND = ")).ok()
}

/// The programs the plugin at `path` runs (none when it is missing or not loopgate's).
pub fn programs_in(path: &Path) -> Result<Vec<String>> {
    match fs::read_to_string(path) {
        Ok(t) => Ok(command_in(&t)
            .and_then(|c| c.into_iter().next())
            .into_iter()
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes (or with `uninstall`, deletes) the plugin at `path`. A file there that is not
/// loopgate's is left alone: it is the person's own plugin.
pub fn run(
    agent: Agent,
    path: &Path,
    bin: &Path,
    observe: bool,
    uninstall: bool,
) -> Result<Outcome> {
    let shown = path.display();
    let existing = match fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {shown}")),
    };
    if existing.as_deref().is_some_and(|t| !is_ours(t)) {
        bail!("{shown} is not loopgate's plugin; move it away, then run setup again");
    }
    let summary = if uninstall {
        match existing {
            Some(_) => {
                fs::remove_file(path).with_context(|| format!("cannot remove {shown}"))?;
                format!("removed loopgate's plugin {shown}")
            }
            None => format!("no loopgate plugin at {shown}; nothing to remove"),
        }
    } else {
        let want = text(agent, bin, observe)?;
        if existing.as_deref() == Some(want.as_str()) {
            format!("loopgate's plugin is already in {shown}")
        } else {
            let created_dirs = super::leftovers::missing_dirs(path);
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            fs::write(path, &want).with_context(|| format!("cannot write {shown}"))?;
            if existing.is_none() {
                // What an uninstall removes again (OpenCode loads only `*.{ts,js}` there).
                super::leftovers::mark_created(path, &created_dirs)?;
            }
            format!(
                "wrote loopgate's plugin to {shown}; {} loads it at its next start",
                agent.title()
            )
        }
    };
    Ok(Outcome {
        summary,
        notes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_plugin_names_the_binary_and_the_dialect() {
        let t = text(Agent::Kilo, Path::new("/opt/lg/loopgate"), true).unwrap();
        assert!(!t.contains(COMMAND_LINE) && !t.contains(AGENT_LINE));
        assert_eq!(
            command_in(&t).unwrap(),
            ["/opt/lg/loopgate", "--observe", "--agent", "kilo"]
        );
        assert!(t.contains("const AGENT = \"kilo\""));
        // The npm package's copy runs `loopgate` from PATH.
        assert_eq!(command_in(SOURCE), None);
        assert!(is_ours(SOURCE));
    }

    #[test]
    fn install_uninstall_and_a_foreign_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plugins").join("loopgate.js");
        let bin = Path::new("/usr/bin/loopgate");
        run(Agent::OpenCode, &path, bin, false, false).unwrap();
        assert_eq!(programs_in(&path).unwrap(), ["/usr/bin/loopgate"]);
        let again = run(Agent::OpenCode, &path, bin, false, false).unwrap();
        assert!(again.summary.contains("already"), "{}", again.summary);
        run(Agent::OpenCode, &path, bin, false, true).unwrap();
        assert!(!path.exists());
        fs::write(&path, "export const Mine = async () => ({})\n").unwrap();
        assert!(run(Agent::OpenCode, &path, bin, false, false).is_err());
        assert!(run(Agent::OpenCode, &path, bin, false, true).is_err());
        assert!(path.exists());
    }
}
