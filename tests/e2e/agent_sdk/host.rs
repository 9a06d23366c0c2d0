//! The two Agent SDKs, pinned, installed once into `target/e2e-cache/agent-sdk/<sdk>` (npm for
//! TypeScript, a venv for Python), an app per scenario that runs one `query()` through them, and
//! the skip policy (missing fails unless `LOOPGATE_E2E_SKIP=1`, then skips loudly).

use super::super::claude_cli::{found_or_skip, install_each, npm_install, repo_root};
use super::super::fake_api::Script;
use super::super::harness::Scenario;
use super::super::run::Run;
use serde_json::{json, Value};
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Once, OnceLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sdk {
    TypeScript,
    Python,
}

/// The hooks an app registers in code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hooks {
    None,
    /// `loopgateHooks()` / `loopgate_hooks()`, the helpers this repo ships.
    Loopgate,
    /// Callbacks that record their input and answer `{}` (observation).
    Record,
}

impl Sdk {
    pub const ALL: [Sdk; 2] = [Sdk::TypeScript, Sdk::Python];

    pub fn name(self) -> &'static str {
        match self {
            Sdk::TypeScript => "ts",
            Sdk::Python => "py",
        }
    }

    fn package(self) -> &'static str {
        match self {
            Sdk::TypeScript => "@anthropic-ai/claude-agent-sdk",
            Sdk::Python => "claude-agent-sdk",
        }
    }

    /// The version whose behaviour docs/agent-sdk.md records. Both bundle Claude Code 2.1.332.
    pub fn version(self) -> &'static str {
        match self {
            Sdk::TypeScript => "0.3.332",
            Sdk::Python => "0.2.189",
        }
    }

    fn index(self) -> usize {
        Sdk::ALL.iter().position(|s| *s == self).unwrap()
    }

    fn install_command(self) -> String {
        match self {
            Sdk::TypeScript => format!(
                "npm install --prefix target/e2e-cache/agent-sdk/ts {}@{}",
                self.package(),
                self.version()
            ),
            Sdk::Python => format!(
                "python3 -m venv target/e2e-cache/agent-sdk/py && \
                 target/e2e-cache/agent-sdk/py/bin/pip install {}=={}",
                self.package(),
                self.version()
            ),
        }
    }
}

fn cache_dir(sdk: Sdk) -> PathBuf {
    repo_root()
        .join("target")
        .join("e2e-cache")
        .join("agent-sdk")
        .join(sdk.name())
}

/// The SDK's install folder, or `None` when the test should be skipped. Both are installed at
/// once, in parallel, by the first call.
pub fn require(sdk: Sdk) -> Option<PathBuf> {
    static FOUND: OnceLock<Vec<Result<PathBuf, String>>> = OnceLock::new();
    let found = FOUND.get_or_init(|| install_each(&Sdk::ALL, locate_or_install));
    let what = format!("Agent SDK {} {}", sdk.package(), sdk.version());
    found_or_skip(&found[sdk.index()], &what, |why| announce_skip(sdk, why))
}

fn announce_skip(sdk: Sdk, why: &str) {
    static ONCE: [Once; 2] = [Once::new(), Once::new()];
    ONCE[sdk.index()].call_once(|| {
        let _ = writeln!(
            std::io::stderr(),
            "SKIP e2e: Agent SDK {} {} unavailable ({why}). Install it with `{}` from the repo \
             root (skipped because LOOPGATE_E2E_SKIP=1).",
            sdk.package(),
            sdk.version(),
            sdk.install_command()
        );
    });
}

fn locate_or_install(sdk: Sdk) -> Result<PathBuf, String> {
    let dir = cache_dir(sdk);
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let lock = File::create(dir.join(".install.lock")).map_err(|e| e.to_string())?;
    lock.lock().map_err(|e| format!("lock install: {e}"))?;
    if installed(sdk, &dir) {
        return Ok(dir);
    }
    match sdk {
        Sdk::TypeScript => npm_install(&dir, &format!("{}@{}", sdk.package(), sdk.version()))?,
        Sdk::Python => pip_install(&dir, &format!("{}=={}", sdk.package(), sdk.version()))?,
    }
    if installed(sdk, &dir) {
        Ok(dir)
    } else {
        Err(format!(
            "`{}` ran but {} {} is not there",
            sdk.install_command(),
            sdk.package(),
            sdk.version()
        ))
    }
}

fn installed(sdk: Sdk, dir: &Path) -> bool {
    match sdk {
        Sdk::TypeScript => {
            let manifest = dir.join("node_modules/@anthropic-ai/claude-agent-sdk/package.json");
            let version = fs::read_to_string(manifest)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| v["version"].as_str().map(String::from));
            version.as_deref() == Some(sdk.version()) && runs("node", &["--version"])
        }
        Sdk::Python => Command::new(dir.join("bin").join("python"))
            .args([
                "-c",
                "import claude_agent_sdk; print(claude_agent_sdk.__version__)",
            ])
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| {
                o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == sdk.version()
            }),
    }
}

fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A venv at `dir` (made if missing) with `spec` installed from PyPI.
fn pip_install(dir: &Path, spec: &str) -> Result<(), String> {
    eprintln!("e2e: installing {spec} into {}", dir.display());
    let python = dir.join("bin").join("python");
    if !python.is_file() {
        let out = Command::new("python3")
            .args(["-m", "venv"])
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run python3: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "python3 -m venv failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(spec)
        // pip's cache beside the venv, not in the person's ~/.cache.
        .env("PIP_CACHE_DIR", dir.join(".cache").join("pip"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "pip install failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// What one app run does: the prompt, the `settingSources` option (`None`: not passed, the SDK's
/// default) and the hooks registered in code.
pub struct App<'a> {
    pub prompt: &'a str,
    pub setting_sources: Option<&'a [&'a str]>,
    pub hooks: Hooks,
    /// For [`Hooks::Record`]: the events recorded, into `<tmp>/callbacks`.
    pub record_events: &'a [&'a str],
}

impl App<'_> {
    pub fn new(prompt: &str) -> App<'_> {
        App {
            prompt,
            setting_sources: None,
            hooks: Hooks::None,
            record_events: &[],
        }
    }
}

/// Runs the app in `s`'s project through `sdk` (at `dir`, from [`require`]) against a fake API
/// playing `script`. Tools run without asking (`bypassPermissions`), as in an unattended agent.
pub fn run_app(s: &Scenario, sdk: Sdk, dir: &Path, app: &App, script: Script) -> Run {
    let record_dir = s.tmp_dir().join("callbacks");
    fs::create_dir_all(&record_dir).unwrap();
    let options = match sdk {
        Sdk::TypeScript => json!({
            "permissionMode": "bypassPermissions",
            "allowDangerouslySkipPermissions": true,
        }),
        Sdk::Python => json!({"permission_mode": "bypassPermissions"}),
    };
    let mut config = json!({
        "prompt": app.prompt,
        "hooks": match app.hooks {
            Hooks::None => "none",
            Hooks::Loopgate => "loopgate",
            Hooks::Record => "record",
        },
        "recordDir": record_dir,
        "recordEvents": app.record_events,
        "options": options,
    });
    if let Some(sources) = app.setting_sources {
        config["settingSources"] = json!(sources);
    }
    let app_dir = s.tmp_dir().join("app");
    fs::create_dir_all(&app_dir).unwrap();
    let env = vec![
        ("LG_SDK_CONFIG", config.to_string()),
        // The helpers' binary: this build's (an installed one would run the release build).
        ("LOOPGATE_BIN", env!("CARGO_BIN_EXE_loopgate").to_string()),
    ];
    match sdk {
        Sdk::TypeScript => {
            // An app folder whose node_modules has the SDK and this repo's npm package, so the
            // driver imports `loopgate/agent-sdk` through the package's `exports`.
            let driver = app_dir.join("driver.mjs");
            fs::write(&driver, include_str!("driver.mjs")).unwrap();
            let modules = app_dir.join("node_modules");
            fs::create_dir_all(&modules).unwrap();
            let link = |from: PathBuf, to: &str| {
                let _ = std::os::unix::fs::symlink(from, modules.join(to));
            };
            link(dir.join("node_modules/@anthropic-ai"), "@anthropic-ai");
            link(repo_root().join("npm/loopgate"), "loopgate");
            let driver = driver.display().to_string();
            s.run_host(Path::new("node"), &[&driver], &env, script)
        }
        Sdk::Python => {
            let driver = app_dir.join("driver.py");
            fs::write(&driver, include_str!("driver.py")).unwrap();
            let mut env = env;
            // The helper module from this repo, imported by path.
            env.push((
                "PYTHONPATH",
                repo_root().join("python").display().to_string(),
            ));
            // No __pycache__ left in the repo's python/.
            env.push(("PYTHONDONTWRITEBYTECODE", "1".into()));
            let driver = driver.display().to_string();
            s.run_host(&dir.join("bin").join("python"), &[&driver], &env, script)
        }
    }
}

/// The inputs the recording callbacks were given, in order.
pub fn recorded_callbacks(s: &Scenario) -> Vec<Value> {
    let dir = s.tmp_dir().join("callbacks");
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| serde_json::from_str(&fs::read_to_string(f).ok()?).ok())
        .collect()
}
