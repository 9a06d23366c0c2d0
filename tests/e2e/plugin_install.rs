//! The plugin route with nothing built (issue 19): `claude --plugin-dir` on a copy of the
//! plugin's files alone (no `target/`), with no loopgate, cargo or rustc on PATH. The first
//! session's SessionStart installs the plugin's version from the npm registry into the plugin's
//! data dir, once, and says so; the hooks then break a loop; a second session installs nothing.
//!
//! It needs an npm registry holding this version's packages: `tests/dist/plugin-route.sh` starts
//! one (verdaccio, local) with the release builds and runs this test with
//! `LOOPGATE_E2E_NPM_REGISTRY` set. Without that variable the test starts its own
//! (`tests/dist/local-registry.sh`: the binary under test packaged for this host), so a plain
//! `cargo test` proves the route too; it fails, saying why, when that cannot be had, unless skips
//! were asked for (`LOOPGATE_E2E_SKIP=1`, never under `CI`).

use super::expect::*;
use super::harness::Scenario;
use super::loops::{call_results, looping_script};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

const REGISTRY_VAR: &str = "LOOPGATE_E2E_NPM_REGISTRY";

/// The registry given, or one of this test's own; `None` when it cannot be had and skips were
/// asked for.
fn registry() -> Option<(String, Option<LocalRegistry>)> {
    if let Some(url) = std::env::var(REGISTRY_VAR).ok().filter(|u| !u.is_empty()) {
        return Some((url, None));
    }
    match LocalRegistry::start() {
        Ok(local) => Some((local.url.clone(), Some(local))),
        Err(why) if super::claude_cli::skips_allowed() => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIP e2e plugin install: no registry ({why}; skipped because LOOPGATE_E2E_SKIP=1)"
            );
            None
        }
        Err(why) => panic!(
            "e2e plugin install: {REGISTRY_VAR} is not set and no local registry could be started: \
             {why} (LOOPGATE_E2E_SKIP=1 skips it, outside CI)"
        ),
    }
}

/// `tests/dist/local-registry.sh`, serving until dropped (its stdin closed).
struct LocalRegistry {
    url: String,
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
}

impl LocalRegistry {
    fn start() -> Result<LocalRegistry, String> {
        use std::io::BufRead as _;
        use std::process::{Command, Stdio};
        let root = super::claude_cli::repo_root();
        let out = root.join("target/e2e-out/plugin-install-registry");
        let log_path = root.join("target/e2e-out/plugin-install-registry.log");
        fs::create_dir_all(log_path.parent().unwrap()).map_err(|e| e.to_string())?;
        let log = fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let mut child = Command::new(root.join("tests/dist/local-registry.sh"))
            .arg(env!("CARGO_BIN_EXE_loopgate"))
            .arg(&out)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run tests/dist/local-registry.sh: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let url = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("REGISTRY=").map(str::to_owned));
        match url {
            Some(url) => Ok(LocalRegistry { url, child, stdin }),
            None => {
                drop(stdin);
                let _ = child.wait();
                let err = fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = err.lines().rev().take(5).collect();
                Err(format!(
                    "tests/dist/local-registry.sh gave no registry ({}): {}",
                    log_path.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ))
            }
        }
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        drop(self.stdin.take()); // the script stops its registry when its stdin closes
        let _ = self.child.wait();
    }
}

/// The plugin as `/plugin install` copies it: its manifests and hooks, nothing built.
fn copy_plugin(to: &Path) {
    let root = super::claude_cli::repo_root();
    for rel in [
        ".claude-plugin/plugin.json",
        ".claude-plugin/marketplace.json",
        "hooks/hooks.json",
        "hooks/loopgate-hook",
        "commands/loopgate.md",
    ] {
        let dest = to.join(rel);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::copy(root.join(rel), dest).unwrap();
    }
}

/// A PATH with node and npm, the shell and its tools, and neither loopgate nor a Rust toolchain.
fn path_without_rust() -> String {
    let node = which("node").expect("node on PATH (npm installs the plugin's binary)");
    let dirs: Vec<PathBuf> = [
        node.parent().unwrap().to_path_buf(),
        "/usr/bin".into(),
        "/bin".into(),
    ]
    .into();
    for dir in &dirs {
        for tool in ["loopgate", "cargo", "rustc"] {
            assert!(
                !dir.join(tool).exists(),
                "{} is on the test PATH; this route must work without it",
                dir.join(tool).display()
            );
        }
    }
    std::env::join_paths(dirs).unwrap().into_string().unwrap()
}

/// What loopgate's SessionStart hook printed, from the stream's `hook_response` event.
fn session_start_stdout(run: &super::run::Run) -> String {
    run.stream
        .iter()
        .find(|l| l["subtype"] == "hook_response" && l["hook_event"] == "SessionStart")
        .map(|l| l["stdout"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[test]
fn e2e_plugin_installs_its_binary_once_then_breaks_loops() {
    let Some(mut s) = Scenario::new("plugin-install") else {
        return;
    };
    let Some((registry, _local)) = registry() else {
        return;
    };
    let plugin = s.tmp_dir().parent().unwrap().join("plugin");
    copy_plugin(&plugin);
    s.plugin_dir(&plugin);
    s.set_env("PATH", &path_without_rust());
    s.set_env("npm_config_registry", &registry);
    let npm_cache = s.home.join(".npm").display().to_string();
    s.set_env("npm_config_cache", &npm_cache);
    s.set_env("npm_config_update_notifier", "false");

    let prompt = "Read the settings file.";
    let run = s.run(prompt, looping_script(prompt));
    assert_clean_exit(&run);
    let installed = s.plugin_data().join("bin").join("loopgate");
    assert!(
        installed.is_file(),
        "SessionStart did not install {}\n{}",
        installed.display(),
        run.summary()
    );
    assert_eq!(
        &fs::read(&installed).unwrap()[..4],
        b"\x7fELF",
        "the installed binary is native"
    );
    // The user is told: the SessionStart hook answered with a systemMessage saying so.
    let said = session_start_stdout(&run);
    assert!(
        said.contains("\"systemMessage\"")
            && said.contains(&format!("installed loopgate {}", env!("CARGO_PKG_VERSION"))),
        "the install was not announced: {said:?}\n{}",
        run.summary()
    );
    let results = call_results(&run, 8);
    assert_loop_broken(&run, &results, "Bash");
    let first_install = fs::metadata(&installed).unwrap().modified().unwrap();

    // A second session: the binary is there, nothing is installed, the loop is broken again.
    let run = s.run(prompt, looping_script(prompt));
    assert_clean_exit(&run);
    assert_eq!(
        fs::metadata(&installed).unwrap().modified().unwrap(),
        first_install,
        "the second session installed again"
    );
    assert!(
        !session_start_stdout(&run).contains("installed"),
        "the second session announced an install"
    );
    let results = call_results(&run, 8);
    assert_loop_broken(&run, &results, "Bash");
}
