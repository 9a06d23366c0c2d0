//! Where things live. The config and state directories both come from the `directories` crate,
//! so they agree on every platform: on Linux `$XDG_CONFIG_HOME/loopgate` (`~/.config/loopgate`)
//! and `$XDG_STATE_HOME/loopgate` (`~/.local/state/loopgate`); on macOS both are
//! `~/Library/Application Support/loopgate`.
//!
//! With `HOME` unset there is no home: loopgate refuses, as `install.sh` does, rather than quietly
//! using the home from the password file (which may not be the one Claude Code runs in).

use anyhow::{bail, Result};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// The one message for a missing home, shared by every command.
pub const NO_HOME: &str = "HOME is not set; set it (or --state-dir for state, \
                           --config for the config file) and run this again";

/// The home directory, only when `HOME` is set (on Unix).
pub fn home_dir() -> Option<PathBuf> {
    base_dirs().map(|b| b.home_dir().to_path_buf())
}

// The directories are computed once per process: a hook call asks for the home, config and state
// directories several times (config lookup, store, guard), and `directories` reads the
// environment and builds every platform directory on each call. Nothing in loopgate changes
// its own environment.
fn base_dirs() -> Option<&'static directories::BaseDirs> {
    static DIRS: OnceLock<Option<directories::BaseDirs>> = OnceLock::new();
    DIRS.get_or_init(|| {
        if !home_is_set() {
            return None;
        }
        directories::BaseDirs::new()
    })
    .as_ref()
}

fn home_is_set() -> bool {
    !cfg!(unix) || std::env::var_os("HOME").is_some_and(|h| !h.is_empty())
}

/// Where the npm package's `loopgate setup` copies the binary the hooks run, and where the Agent
/// SDK helpers (`loopgate/agent-sdk`, `loopgate_agent_sdk`) look for it after `LOOPGATE_BIN`:
/// `<local data dir>/loopgate/bin/loopgate` (npm/loopgate/bin/loopgate.js, stableBinDir).
pub fn npm_stable_bin() -> Option<PathBuf> {
    base_dirs().map(|b| {
        b.data_local_dir()
            .join("loopgate")
            .join("bin")
            .join(format!("loopgate{}", std::env::consts::EXE_SUFFIX))
    })
}

/// Like [`home_dir`], for callers that cannot go on without it.
pub fn require_home() -> Result<PathBuf> {
    match home_dir() {
        Some(h) => Ok(h),
        None => bail!("{NO_HOME}"),
    }
}

fn project_dirs() -> Option<&'static directories::ProjectDirs> {
    static DIRS: OnceLock<Option<directories::ProjectDirs>> = OnceLock::new();
    DIRS.get_or_init(|| {
        // Not `base_dirs()`: a hook call needs only these, and each set costs a dozen lookups.
        if !home_is_set() {
            return None;
        }
        directories::ProjectDirs::from("", "", "loopgate")
    })
    .as_ref()
}

/// The user's loopgate config directory (holding `config.toml`).
pub fn config_dir() -> Option<PathBuf> {
    project_dirs().map(|p| p.config_dir().to_path_buf())
}

/// The default state directory (sessions, locks, `events.jsonl`).
pub fn state_dir() -> Option<PathBuf> {
    let p = project_dirs()?;
    Some(
        p.state_dir()
            .unwrap_or_else(|| p.data_local_dir())
            .to_path_buf(),
    )
}

/// Claude Code's user settings file.
pub fn claude_user_settings() -> Option<PathBuf> {
    home_dir().map(|h| h.join(".claude").join("settings.json"))
}

/// An agent CLI's home for its user configuration: `$CODEX_HOME` (else `~/.codex`),
/// `~/.gemini`, `~/.qwen`, `$COPILOT_HOME` (else `~/.copilot`), `~/.claude`,
/// `$XDG_CONFIG_HOME/opencode` and `…/kilo` (else under `~/.config`).
pub fn agent_config_dir(agent: crate::protocol::dialect::Agent) -> Option<PathBuf> {
    use crate::protocol::dialect::Agent;
    let from_env = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let (var, dir) = match agent {
        Agent::Claude => (None, ".claude"),
        Agent::Codex => (Some("CODEX_HOME"), ".codex"),
        Agent::Gemini => (None, ".gemini"),
        Agent::Qwen => (None, ".qwen"),
        Agent::Copilot => (Some("COPILOT_HOME"), ".copilot"),
        // OpenCode's core keeps its global config under the XDG config home.
        Agent::OpenCode | Agent::Kilo => {
            let base =
                from_env("XDG_CONFIG_HOME").or_else(|| home_dir().map(|h| h.join(".config")))?;
            return Some(base.join(agent.name()));
        }
    };
    var.and_then(from_env)
        .or_else(|| home_dir().map(|h| h.join(dir)))
}

/// The user-level file `loopgate setup --agent <cli>` edits by default (see [`agent_config_dir`]):
/// `settings.json` for Claude Code, Gemini CLI and Qwen Code, Codex's `hooks.json`, and
/// loopgate's own `hooks/loopgate.json` for Copilot CLI, loopgate's plugin
/// `plugins/loopgate.js` for OpenCode and Kilo CLI.
pub fn agent_hook_file(agent: crate::protocol::dialect::Agent) -> Option<PathBuf> {
    use crate::protocol::dialect::Agent;
    let dir = agent_config_dir(agent)?;
    Some(match agent {
        Agent::Claude | Agent::Gemini | Agent::Qwen => dir.join("settings.json"),
        Agent::Codex => dir.join("hooks.json"),
        Agent::Copilot => dir.join("hooks").join("loopgate.json"),
        Agent::OpenCode | Agent::Kilo => dir.join("plugins").join("loopgate.js"),
    })
}

/// Claude Code's managed-settings directory on this system, the one `setup --managed` writes
/// (2.1.330 reads no override for it).
pub fn claude_managed_dir() -> PathBuf {
    if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/ClaudeCode")
    } else if cfg!(windows) {
        PathBuf::from(r"C:\Program Files\ClaudeCode")
    } else {
        PathBuf::from("/etc/claude-code")
    }
}

/// `a/./b/../c//d` → `a/c/d`, without touching the disk (symlinks stay as they are named).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_and_state_live_under_loopgate() {
        if home_dir().is_none() {
            return;
        }
        let c = config_dir().unwrap();
        let s = state_dir().unwrap();
        assert!(c.ends_with("loopgate"), "{}", c.display());
        assert!(s.ends_with("loopgate"), "{}", s.display());
    }
}
