//! Issue 37 point 5: the managed install with the real Claude Code, attacked by its agent.
//!
//! `loopgate setup --managed` runs as root inside a private mount namespace whose `/etc` is an
//! overlay, so `/etc/claude-code` (where Claude Code reads managed settings, with no override:
//! docs/managed-observed.md) is a temp dir and the machine's own `/etc` is never touched. Claude
//! Code then runs as an unprivileged user (uid 65534) with its own temp HOME and project, and
//! that user tries the issue's routes between sessions, as a script it wrote could: settings
//! layers, the binary, the drop-in, `env` (the loader's variables, loopgate's own), the status
//! line, hooks of its own, and the launch routes a shell start-up file would set
//! (`--setting-sources project,local`, `CLAUDE_CONFIG_DIR` to a hook-less copy, `--bare`). After
//! each, the next session's loop must still be refused.
//!
//! Needs root and `unshare`/`nsenter`/`setpriv` (util-linux) and overlayfs. Where one is missing
//! the test says so and passes, unless `CI=true`: CI runs as root, so there it must run.

use super::expect::assert_loop_broken;
use super::fake_api::{bash, Script, Turn};
use super::harness::Scenario;
use super::run::Run;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The agent's user: nobody, which owns nothing of the install.
const AGENT_UID: &str = "65534";
const FAILING: &str = "cat config/settings.yml";

/// A private mount namespace held open by a `sleep`; commands enter it with `nsenter`. Its `/etc`
/// is an overlay over the real one with `/etc/claude-code` bound to a temp dir, so what setup
/// writes there is visible from outside at [`Namespace::managed`].
struct Namespace {
    holder: Child,
    /// The host's view of the namespace's `/etc/claude-code`.
    managed: PathBuf,
}

impl Namespace {
    fn new(root: &Path) -> Result<Namespace, String> {
        let managed = root.join("etc-claude-code");
        let layers = root.join("overlay");
        let ready = root.join("ns-ready");
        fs::create_dir_all(&managed).map_err(|e| e.to_string())?;
        fs::create_dir_all(&layers).map_err(|e| e.to_string())?;
        // The overlay's upper layer on a tmpfs: overlayfs refuses an upper dir on overlayfs,
        // which a container's own root often is.
        let script = format!(
            "set -e; mount -t tmpfs tmpfs {l}; mkdir {l}/up {l}/wk; \
             mount -t overlay overlay -o lowerdir=/etc,upperdir={l}/up,workdir={l}/wk /etc; \
             mkdir -p /etc/claude-code; mount --bind {m} /etc/claude-code; touch {r}; exec sleep 600",
            l = layers.display(),
            m = managed.display(),
            r = ready.display()
        );
        let mut holder = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run unshare: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready.exists() {
            if let Ok(Some(status)) = holder.try_wait() {
                let mut why = String::new();
                if let Some(mut err) = holder.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut err, &mut why);
                }
                return Err(format!(
                    "a private mount namespace with /etc/claude-code could not be made ({status}): {}",
                    why.trim()
                ));
            }
            if Instant::now() > deadline {
                let _ = holder.kill();
                return Err("the mount namespace did not come up within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Namespace { holder, managed })
    }

    fn enter(&self) -> Vec<String> {
        ["nsenter", "-t", &self.holder.id().to_string(), "-m", "--"]
            .map(String::from)
            .to_vec()
    }

    /// What runs a program as the agent's user inside the namespace.
    fn as_agent(&self) -> Vec<String> {
        let mut words = self.enter();
        words.extend(
            [
                "setpriv",
                "--reuid",
                AGENT_UID,
                "--regid",
                AGENT_UID,
                "--clear-groups",
                "--",
            ]
            .map(String::from),
        );
        words
    }

    /// `args` as root inside the namespace.
    fn root(&self, args: &[&str]) -> Output {
        let words = self.enter();
        Command::new(&words[0])
            .args(&words[1..])
            .args(args)
            .output()
            .expect("nsenter")
    }

    /// A shell script as the agent's user inside the namespace, with the scenario's HOME.
    fn agent_sh(&self, s: &Scenario, script: &str) -> Output {
        let words = self.as_agent();
        Command::new(&words[0])
            .args(&words[1..])
            .args(["sh", "-c", script])
            .current_dir(&s.project)
            .env_clear()
            .env("HOME", &s.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .expect("nsenter setpriv sh")
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// `None` (after saying why) where this machine cannot run the test and `CI` is not "true".
fn namespace_or_skip(root: &Path) -> Option<Namespace> {
    let uid = Command::new("id").arg("-u").output().ok();
    let is_root = uid.is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let made = if is_root {
        Namespace::new(root)
    } else {
        Err("it needs root (to mount in a private namespace and install as root)".into())
    };
    match made {
        Ok(ns) => Some(ns),
        Err(why) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("SKIP e2e managed install: {why}");
            None
        }
        Err(why) => panic!("e2e managed install cannot run under CI: {why}"),
    }
}

/// A session whose agent runs the failing command 6 times; asserts the loop was refused.
fn loop_refused(s: &Scenario, prompt: &str) -> Run {
    let run = failing_session(s, prompt);
    // Claude Code wraps a managed hook's denial in `<tool_use_error>` (docs/managed-observed.md).
    let results: Vec<_> = (0..6)
        .map_while(|t| run.find_tool_result(&format!("toolu_e2e_{t}_0")))
        .map(|mut r| {
            r.content = r
                .content
                .trim_start_matches("<tool_use_error>")
                .trim_end_matches("</tool_use_error>")
                .to_string();
            r
        })
        .collect();
    assert!(!results.is_empty(), "{}", run.summary());
    assert_loop_broken(&run, &results, "Bash");
    run
}

fn failing_session(s: &Scenario, prompt: &str) -> Run {
    let mut turns = vec![Turn::call(bash(FAILING)); 6];
    turns.push(Turn::text("I could not read the config."));
    s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    )
}

fn denied_any(run: &Run) -> bool {
    (0..6)
        .filter_map(|t| run.find_tool_result(&format!("toolu_e2e_{t}_0")))
        .any(|r| r.content.contains("LOOP_DETECTED"))
}

/// A shared library that makes any process whose command line runs one of loopgate's tool hooks
/// exit 0 at once:
/// preloaded into the `sh` that runs a hook, it silences the hook whatever loopgate's build.
/// `None` where no C compiler is at hand.
fn silencer(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("silence.c");
    let lib = dir.join("silence.so");
    fs::write(
        &src,
        r#"#include <fcntl.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void silence(void) {
    char b[8192]; int fd = open("/proc/self/cmdline", O_RDONLY); if (fd < 0) return;
    ssize_t n = read(fd, b, sizeof b - 1); close(fd); if (n <= 0) return;
    for (ssize_t i = 0; i < n; i++) if (!b[i]) b[i] = ' ';
    b[n] = 0; if (strstr(b, "loopgate") && strstr(b, "tool-use")) _exit(0);
}
"#,
    )
    .ok()?;
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        eprintln!("e2e managed install: no C compiler, the LD_PRELOAD route is not tried");
        return None;
    }
    fs::set_permissions(&lib, fs::Permissions::from_mode(0o755)).ok()?;
    Some(lib)
}

fn chown_agent(path: &Path) {
    let ok = Command::new("chown")
        .args(["-R", &format!("{AGENT_UID}:{AGENT_UID}")])
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "chown {}", path.display());
}

fn setup_managed(ns: &Namespace, install_dir: &Path, extra: &[&str]) {
    let bin = env!("CARGO_BIN_EXE_loopgate");
    let dir = install_dir.to_str().unwrap();
    let mut args = vec![
        bin,
        "setup",
        "--managed",
        "--managed-dir",
        "/etc/claude-code",
        "--install-dir",
        dir,
    ];
    args.extend(extra);
    let out = ns.root(&args);
    assert!(
        out.status.success(),
        "setup --managed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `text` to `path` as the agent's user, as a script of its own would.
fn write_as_agent(s: &Scenario, ns: &Namespace, path: &Path, text: &str) {
    let quoted = text.replace('\'', r"'\''");
    let out = ns.agent_sh(
        s,
        &format!(
            "mkdir -p '{}' && printf '%s' '{quoted}' > '{}'",
            path.parent().unwrap().display(),
            path.display()
        ),
    );
    assert!(
        out.status.success(),
        "the agent's user could not write {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn e2e_a_managed_install_holds_against_its_unprivileged_agent() {
    let Some(mut s) = Scenario::new("managed") else {
        return;
    };
    let root = s.root_dir().to_path_buf();
    // Every user may pass through; nothing in it is the agent's but its own dirs.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    let Some(ns) = namespace_or_skip(&root) else {
        return;
    };
    let sys = root.join("sys");
    fs::create_dir_all(&sys).unwrap();
    fs::set_permissions(&sys, fs::Permissions::from_mode(0o755)).unwrap();
    let install = sys.join("lib/loopgate");
    setup_managed(&ns, &install, &[]);
    let bin = install.join("loopgate");
    let drop_in = ns.managed.join("managed-settings.d/loopgate.json");
    for (path, mode) in [(&bin, 0o755), (&drop_in, 0o644)] {
        let meta = fs::metadata(path).unwrap();
        assert_eq!(
            (meta.uid(), meta.mode() & 0o7777),
            (0, mode),
            "{}",
            path.display()
        );
    }
    let wired: Value = serde_json::from_str(&fs::read_to_string(&drop_in).unwrap()).unwrap();
    assert_eq!(wired["allowManagedHooksOnly"], true, "{wired:#}");
    assert_eq!(wired["env"]["LD_PRELOAD"], "", "{wired:#}");
    // A managed hook takes no LOOPGATE_* variable, the harness's state dir included.
    s.state_dir = s.home.join(".local/state/loopgate");
    fs::create_dir_all(&s.state_dir).unwrap();
    let state = s.state_dir.clone();
    for dir in [&s.home, &s.project, &state, &s.tmp_dir().to_path_buf()] {
        chown_agent(dir);
    }
    let mut claude = super::claude_cli::require().expect("found by Scenario::new");
    if !ns
        .agent_sh(&s, &format!("test -x '{}'", claude.display()))
        .status
        .success()
    {
        // A checkout under a directory others cannot search (`/root`): the agent's user runs
        // a copy where it can reach it (a hard link where the file system allows).
        let copy = sys.join("claude");
        // `node_modules/.bin/claude` is a relative link: link to what it names.
        let claude_file = fs::canonicalize(&claude).unwrap();
        if fs::hard_link(&claude_file, &copy).is_err() {
            fs::copy(&claude_file, &copy).unwrap();
        }
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
        s.use_cli(&copy);
        claude = copy;
    }
    let reach = ns.agent_sh(&s, &format!("test -x '{}'", claude.display()));
    assert!(
        reach.status.success(),
        "uid {AGENT_UID} cannot run {}",
        claude.display()
    );
    // nsenter starts in the namespace holder's directory: claude is started in the project.
    let mut launcher = ns.as_agent();
    launcher.extend(["env".into(), "-C".into(), s.project.display().to_string()]);
    s.launch_with(&launcher);

    // 1. The install as it is: Claude Code reads the drop-in, the loop is refused.
    loop_refused(&s, "Read the config, please.");

    // 2. The binary and the drop-in: the agent's user can neither replace, move nor add.
    let before = fs::read(&bin).unwrap();
    for attack in [
        format!("cp /bin/true '{}'", bin.display()),
        format!("mv '{}' /tmp/moved-loopgate", bin.display()),
        format!("printf '{{}}' > '{}'", drop_in.display()),
        "printf '{\"disableAllHooks\":true}' > /etc/claude-code/managed-settings.json".into(),
        "printf '{\"disableAllHooks\":true}' > /etc/claude-code/managed-settings.d/zz.json".into(),
    ] {
        let out = ns.agent_sh(&s, &attack);
        assert!(!out.status.success(), "the agent's user could: {attack}");
    }
    assert_eq!(fs::read(&bin).unwrap(), before, "the binary is unchanged");

    // 3. Every layer the agent can write, between sessions: hooks disabled and emptied, the
    //    loader's and loopgate's variables set for every hook, a hook of its own that deletes
    //    loopgate's state before each call, a status line of its own.
    let silence = silencer(&root);
    let marker = s.tmp_dir().join("agent-hook-ran");
    let own_hook = json!({"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command",
        "command": format!("rm -rf '{}'/*; touch '{}'", state.display(), marker.display())}]}]});
    let lax = root.join("lax-config");
    let mut env = json!({
        "LOOPGATE_DISABLE": "1",
        "LOOPGATE_CLOCK_MS": "1",
        "LOOPGATE_MODE": "observe",
        "LOOPGATE_DETECTORS__REPEAT__DETERMINISTIC": "50",
        "LOOPGATE_STATE_DIR": root.join("elsewhere").display().to_string(),
        "XDG_CONFIG_HOME": lax.display().to_string(),
    });
    if let Some(lib) = &silence {
        env["LD_PRELOAD"] = json!(lib.display().to_string());
    }
    for dir in [root.join("elsewhere"), lax.join("loopgate")] {
        fs::create_dir_all(&dir).unwrap();
    }
    chown_agent(&root.join("elsewhere"));
    chown_agent(&lax);
    // loopgate's own settings files, as lax as they go: observe only.
    for file in [
        lax.join("loopgate/config.toml"),
        s.home.join(".config/loopgate/config.toml"),
        s.project.join(".claude/loopgate.toml"),
    ] {
        write_as_agent(&s, &ns, &file, "mode = \"observe\"\n");
    }
    let layers = [
        s.home.join(".claude/settings.json"),
        s.project.join(".claude/settings.json"),
        s.project.join(".claude/settings.local.json"),
    ];
    let write_layers = |disable: bool| {
        for file in &layers {
            let mut settings = json!({"hooks": own_hook, "env": env,
                "statusLine": {"type": "command", "command": "echo all clear"}});
            if disable {
                settings["disableAllHooks"] = json!(true);
            }
            write_as_agent(&s, &ns, file, &settings.to_string());
        }
    };
    write_layers(true);
    loop_refused(&s, "Read the config once more.");
    // Without disableAllHooks (which would stop the agent's own hook as well):
    // allowManagedHooksOnly keeps it from running.
    write_layers(false);
    let run = loop_refused(&s, "Read the config yet again.");
    assert!(
        !marker.exists(),
        "the agent's own hook ran beside loopgate's: {}",
        run.summary()
    );

    // 4. What a shell start-up file, an alias or a wrapper would launch Claude Code with.
    let hookless = root.join("hookless-config");
    fs::create_dir_all(&hookless).unwrap();
    fs::write(hookless.join("settings.json"), "{}").unwrap();
    chown_agent(&hookless);
    s.set_args(&["--setting-sources", "project,local"]);
    loop_refused(&s, "Read the config with project settings only.");
    s.set_args(&[]);
    s.set_env("CLAUDE_CONFIG_DIR", &hookless.display().to_string());
    loop_refused(&s, "Read the config with another config dir.");
    s.unset_env("CLAUDE_CONFIG_DIR");
    s.set_args(&["--bare"]);
    loop_refused(&s, "Read the config, bare.");
    s.set_args(&[]);

    // 5. The same install with both locks taken off: the agent's own hook runs, and (where a C
    //    compiler made the library) the preloaded library silences loopgate: nothing refused.
    setup_managed(
        &ns,
        &install,
        &["--allow-other-hooks", "--allow-loader-env"],
    );
    let run = failing_session(&s, "Read the config without the locks.");
    assert!(
        marker.exists(),
        "without allowManagedHooksOnly the agent's hook runs: {}",
        run.summary()
    );
    if silence.is_some() {
        assert!(
            !denied_any(&run),
            "without the loader's variables locked, the preloaded library silences loopgate: {}",
            run.summary()
        );
    }
}
