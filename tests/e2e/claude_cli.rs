//! Finding, or installing once, the pinned Claude Code CLI, and the skip policy around it.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Once, OnceLock};

/// The version whose behaviour `hooks-observed.md` records; the scripts depend on it.
pub const VERSION: &str = "2.1.330";
const PACKAGE: &str = "@anthropic-ai/claude-code";

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cache_dir() -> PathBuf {
    repo_root().join("target").join("e2e-cache")
}

fn install_command() -> String {
    format!("npm install --prefix target/e2e-cache {PACKAGE}@{VERSION}")
}

/// The CLI to run, or `None` when this test should be skipped. A missing CLI fails the test (a
/// skipped test reported `ok` is how a suite silently stops testing anything), unless the person
/// asked for skips with `LOOPGATE_E2E_SKIP=1`, outside CI.
pub fn require() -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    found_or_skip(
        FOUND.get_or_init(locate_or_install),
        "Claude Code CLI",
        announce_skip,
    )
}

/// The person asked to skip end-to-end tests whose host cannot be had (never under `CI`).
pub fn skips_allowed() -> bool {
    std::env::var_os("CI").is_none()
        && std::env::var_os("LOOPGATE_E2E_SKIP").is_some_and(|v| v == "1")
}

/// Once per process, straight to the real stderr: libtest captures `eprintln!` of passing
/// tests, and a skip nobody sees is how a suite silently stops testing anything.
fn announce_skip(why: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = writeln!(
            std::io::stderr(),
            "SKIP e2e: Claude Code CLI {VERSION} unavailable ({why}). \
             Install it with `{}` from the repo root (skipped because LOOPGATE_E2E_SKIP=1).",
            install_command()
        );
    });
}

fn locate_or_install() -> Result<PathBuf, String> {
    let cache = cache_dir();
    fs::create_dir_all(&cache).map_err(|e| format!("create {}: {e}", cache.display()))?;
    // Another test process (a second `cargo test`) may be installing into the same folder;
    // the OnceLock covers threads of this one.
    let lock = File::create(cache.join(".install.lock")).map_err(|e| e.to_string())?;
    lock.lock().map_err(|e| format!("lock install: {e}"))?;
    if let Some(found) = find_working(&cache) {
        return Ok(found);
    }
    npm_install(&cache, &format!("{PACKAGE}@{VERSION}"))?;
    find_working(&cache).ok_or_else(|| {
        format!(
            "`{}` ran but no working claude {VERSION} was found",
            install_command()
        )
    })
}

/// `npm install <spec>` into `dir` (also used for the other agent CLIs).
pub fn npm_install(dir: &Path, spec: &str) -> Result<(), String> {
    eprintln!("e2e: installing {spec} into {}", dir.display());
    // Install scripts (node-gyp, a CLI's first run) cache under XDG_CACHE_HOME or ~/.cache: kept
    // beside the install, never in the person's HOME. npm's own cache stays ~/.npm (README).
    let caches = dir.join(".cache");
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(dir)
        .arg(spec)
        .env("XDG_CACHE_HOME", &caches)
        .env("npm_config_devdir", caches.join("node-gyp"))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run npm: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "npm install failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The npm wrapper's `bin/claude.exe` is replaced by the native binary in a postinstall step;
/// where install scripts are disabled it stays a placeholder, so the platform package's
/// binary is tried too.
fn find_working(cache: &Path) -> Option<PathBuf> {
    let modules = cache.join("node_modules");
    let mut candidates = vec![modules.join(".bin").join("claude")];
    if let Ok(entries) = fs::read_dir(modules.join("@anthropic-ai")) {
        let mut platform: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("claude"))
            .filter(|p| p.is_file())
            .collect();
        platform.sort();
        candidates.extend(platform);
    }
    candidates.into_iter().find(|c| reports_version(c))
}

fn reports_version(bin: &Path) -> bool {
    // A throwaway HOME, as for the other CLIs: nothing of the check lands in the person's.
    let home = cache_dir().join(".version-home");
    let _ = fs::create_dir_all(&home);
    Command::new(bin)
        .arg("--version")
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with(VERSION)
        })
}

/// Runs `install` for every one of `items` at once (npm and pip in parallel, so the first test
/// of each does not wait in turn); the results in the order of `items`.
pub fn install_each<T: Copy + Send>(
    items: &[T],
    install: fn(T) -> Result<PathBuf, String>,
) -> Vec<Result<PathBuf, String>> {
    std::thread::scope(|s| {
        let jobs: Vec<_> = items
            .iter()
            .map(|&item| s.spawn(move || install(item)))
            .collect();
        jobs.into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err("installer panicked".into()))
            })
            .collect()
    })
}

/// The skip policy over one install's result: the path; or, where the person asked for skips
/// ([`skips_allowed`]), `None` after `announce` (once, loudly); else a failure naming `what`.
pub fn found_or_skip(
    found: &Result<PathBuf, String>,
    what: &str,
    announce: impl FnOnce(&str),
) -> Option<PathBuf> {
    match found {
        Ok(path) => Some(path.clone()),
        Err(why) if skips_allowed() => {
            announce(why);
            None
        }
        Err(why) => panic!(
            "e2e: {what} unavailable: {why}. The end-to-end tests need Node.js with npm, Python 3 \
             and the npm registry; `LOOPGATE_E2E_SKIP=1 cargo test` skips them instead (never in CI)"
        ),
    }
}

/// A host that cannot be had fails the test unless skips were asked for: never a silent `ok`.
#[test]
fn a_missing_host_fails_unless_skips_were_asked_for() {
    let missing: Result<PathBuf, String> = Err("npm not found".into());
    let outcome = std::panic::catch_unwind(|| found_or_skip(&missing, "a host", |_| {}));
    if skips_allowed() {
        assert_eq!(outcome.ok(), Some(None), "skipped, as asked");
    } else {
        let why = outcome.expect_err("a missing host must fail the test");
        let text = why.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(text.contains("LOOPGATE_E2E_SKIP=1"), "{text}");
    }
}
