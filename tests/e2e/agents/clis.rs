//! The other agent CLIs (OpenCode and Kilo CLI through loopgate's plugin), pinned, installed once
//! into `target/e2e-cache/agents/<cli>`, and the skip policy around them (the same as Claude
//! Code's: missing fails, unless `LOOPGATE_E2E_SKIP=1` asks for a loud skip).

use super::super::claude_cli::{found_or_skip, install_each, npm_install, repo_root};
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Once, OnceLock};

/// An agent CLI other than Claude Code, at the version `../shared/agents/README.md` recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cli {
    Codex,
    Gemini,
    Qwen,
    Copilot,
    OpenCode,
    Kilo,
}

impl Cli {
    pub const ALL: [Cli; 6] = [
        Cli::Codex,
        Cli::Gemini,
        Cli::Qwen,
        Cli::Copilot,
        Cli::OpenCode,
        Cli::Kilo,
    ];

    /// The name `--agent` takes, and the npm package's binary.
    pub fn name(self) -> &'static str {
        match self {
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
            Cli::Qwen => "qwen",
            Cli::Copilot => "copilot",
            Cli::OpenCode => "opencode",
            Cli::Kilo => "kilo",
        }
    }

    /// OpenCode and Kilo CLI load loopgate's plugin instead of running hook commands.
    pub fn is_plugin(self) -> bool {
        matches!(self, Cli::OpenCode | Cli::Kilo)
    }

    fn package(self) -> &'static str {
        match self {
            Cli::Codex => "@openai/codex",
            Cli::Gemini => "@google/gemini-cli",
            Cli::Qwen => "@qwen-code/qwen-code",
            Cli::Copilot => "@github/copilot",
            Cli::OpenCode => "opencode-ai",
            Cli::Kilo => "@kilocode/cli",
        }
    }

    /// The version whose hook behaviour was observed; the scripts depend on it.
    pub fn version(self) -> &'static str {
        match self {
            Cli::Codex => "0.169.0",
            Cli::Gemini => "0.61.0",
            Cli::Qwen => "0.24.4",
            Cli::Copilot => "1.0.102",
            Cli::OpenCode => "1.18.33",
            // 7.8.1 (the newest on 2026-11-27) has no linux-x64 binary package published.
            Cli::Kilo => "7.7.7",
        }
    }

    /// The wire protocol `fake_llm.py --api` speaks to it.
    pub fn api(self) -> &'static str {
        match self {
            Cli::Codex => "openai-responses",
            Cli::Gemini => "gemini",
            Cli::Qwen | Cli::OpenCode | Cli::Kilo => "openai-chat",
            Cli::Copilot => "anthropic",
        }
    }

    fn index(self) -> usize {
        Cli::ALL.iter().position(|c| *c == self).unwrap()
    }

    fn install_command(self) -> String {
        format!(
            "npm install --prefix target/e2e-cache/agents/{} {}@{}",
            self.name(),
            self.package(),
            self.version()
        )
    }
}

/// The CLI's binary, or `None` when the test should be skipped. The first call installs all the
/// CLIs at once (npm in parallel), so the first test of each CLI does not wait in turn.
pub fn require(cli: Cli) -> Option<PathBuf> {
    static FOUND: OnceLock<Vec<Result<PathBuf, String>>> = OnceLock::new();
    let found = FOUND.get_or_init(|| install_each(&Cli::ALL, locate_or_install));
    let what = format!("{} {}", cli.name(), cli.version());
    found_or_skip(&found[cli.index()], &what, |why| announce_skip(cli, why))
}

/// Once per CLI and process, straight to the real stderr (libtest captures `eprintln!` of
/// passing tests, and a skip nobody sees is how a suite silently stops testing anything).
fn announce_skip(cli: Cli, why: &str) {
    static ONCE: [Once; 6] = [const { Once::new() }; 6];
    ONCE[cli.index()].call_once(|| {
        let _ = writeln!(
            std::io::stderr(),
            "SKIP e2e: {} {} unavailable ({why}). Install it with `{}` from the repo root \
             (skipped because LOOPGATE_E2E_SKIP=1).",
            cli.name(),
            cli.version(),
            cli.install_command()
        );
    });
}

fn cache_dir(cli: Cli) -> PathBuf {
    repo_root()
        .join("target")
        .join("e2e-cache")
        .join("agents")
        .join(cli.name())
}

fn locate_or_install(cli: Cli) -> Result<PathBuf, String> {
    let dir = cache_dir(cli);
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    // Another test process may be installing into the same folder; the OnceLock covers the
    // threads of this one.
    let lock = File::create(dir.join(".install.lock")).map_err(|e| e.to_string())?;
    lock.lock().map_err(|e| format!("lock install: {e}"))?;
    let bin = dir.join("node_modules").join(".bin").join(cli.name());
    if reports_version(cli, &bin) {
        return Ok(bin);
    }
    npm_install(&dir, &format!("{}@{}", cli.package(), cli.version()))?;
    if reports_version(cli, &bin) {
        Ok(bin)
    } else {
        Err(format!(
            "`{}` ran but {} does not report {}",
            cli.install_command(),
            bin.display(),
            cli.version()
        ))
    }
}

/// `--version` prints `codex-cli 0.169.0`, `0.61.0`, `0.24.4`, `GitHub Copilot CLI 1.0.102.`,
/// `1.18.33`, `7.7.7`.
fn reports_version(cli: Cli, bin: &Path) -> bool {
    if !bin.is_file() {
        return false;
    }
    // A throwaway HOME: `codex --version` and `gemini --version` create dot-dirs in HOME.
    let home = bin.ancestors().nth(3).unwrap_or(bin).join(".version-home");
    let _ = fs::create_dir_all(&home);
    Command::new(bin)
        .arg("--version")
        .env("HOME", &home)
        // OpenCode and Kilo make their cache and data dirs at start: in HOME unless XDG says.
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env_remove("CODEX_HOME")
        .env_remove("COPILOT_HOME")
        .env("COPILOT_AUTO_UPDATE", "false")
        .env("NO_UPDATE_NOTIFIER", "1")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| {
            let text = String::from_utf8_lossy(&o.stdout);
            o.status.success()
                && text
                    .split(|c: char| c.is_whitespace() || c == 'v')
                    .any(|w| w.trim_end_matches('.') == cli.version())
        })
}
