//! Defence by effect on Claude Code's settings. Whatever tool or command changed a settings file
//! (a route the guard does not parse included), Claude Code fires `ConfigChange` with the file's
//! path before it takes the change in, and a `decision: block` keeps the hooks it has loaded.
//! Observed (`code-mode-and-config-change-observed.md` §B.4, §B.8): the block holds only until
//! the next change Claude Code accepts, which re-reads every settings file from disk. So the
//! answer to a change that switches loopgate off is to put the files right — loopgate's hooks
//! back, the disabling keys out, the changed version kept beside the file — and block; every
//! later reload then finds loopgate wired.
//!
//! The files are read as JSON, so `"disable\u0041llHooks"` is `disableAllHooks`. Nothing a tool
//! call can write makes a change the person's: an undone change waits, under a short id, for the
//! person to type `/loopgate allow <id>` ([`super::sanction`]).

use super::sanction::{self, Allowed, Kept};
use super::settings_file::{self, Settings};
use crate::setup;
use anyhow::{Context, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// `/loopgate` as the Claude Code plugin ships it (`commands/loopgate.md`).
pub const PLUGIN_SLASH: &str = "/loopgate:loopgate";

pub use super::sanction::ASIDE_SUFFIX;

/// What a settings file does that switches loopgate off; `plugin`: loopgate runs as Claude Code's
/// plugin, which `enabledPlugins` can switch off (a key read as JSON, so an escaped
/// `"loopgate\u0040…"` is the same key).
fn disabling(settings: &Value, plugin: bool) -> Vec<String> {
    let mut found = Vec::new();
    if plugin {
        for name in plugin_switched_off(settings) {
            found.push(format!("it sets enabledPlugins.{name} to false"));
        }
    }
    if settings
        .get("disableAllHooks")
        .is_some_and(|v| v != &Value::Bool(false))
    {
        found.push("it sets disableAllHooks".to_string());
    }
    for key in env_overrides(settings) {
        found.push(format!("it sets {key} for every hook"));
    }
    if plugin && sets_path(settings) {
        found.push(
            "it sets PATH for every hook, which decides the plugin's `sh` and the loopgate its \
             wrapper runs"
                .to_string(),
        );
    }
    found
}

/// Whether the settings' `env` sets `PATH`. A settings install's hooks name loopgate and its
/// checker by absolute path, so `PATH` cannot redirect them; the plugin's hook runs `sh` by name
/// and its wrapper may fall back to the `loopgate` on `PATH`, so there it is a wiring change.
fn sets_path(settings: &Value) -> bool {
    settings
        .get("env")
        .and_then(Value::as_object)
        .is_some_and(|env| env.keys().any(|k| k.eq_ignore_ascii_case("PATH")))
}

/// loopgate's entries in `enabledPlugins` (`loopgate@<marketplace>`) set to anything but true.
fn plugin_switched_off(settings: &Value) -> Vec<String> {
    settings
        .get("enabledPlugins")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(name, on)| {
            name.split('@').next() == Some("loopgate") && **on != Value::Bool(true)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// What a settings file's JSON does to loopgate, judged afresh (never taken from a record the
/// agent could have written): what `/loopgate allow` tells the person it keeps.
pub fn effects(settings: &Value, command_prefix: Option<&str>) -> Vec<String> {
    let mut found = disabling(settings, command_prefix.is_none());
    if settings
        .get("statusLine")
        .is_some_and(|v| !setup::is_our_status_line(v))
    {
        found.push("its statusLine is not loopgate's".into());
    }
    if !setup::has_loopgate_hooks(settings) {
        found.push("it has no loopgate hooks".into());
    } else if let Some(prefix) = command_prefix {
        found.extend(setup::handler_drift(settings, prefix, &setup::CLAUDE));
    }
    found
}

/// Whether a variable a settings file's `env` sets reaches what loopgate is or decides: its own
/// settings and state dir (`LOOPGATE_*`, `HOME`, `XDG_*`), what it takes itself for
/// (`CLAUDE_PLUGIN_ROOT`, `CLAUDE_CONFIG_DIR`), which libraries load into it (the dynamic
/// loader's `LD_*` and `DYLD_*`). Every later hook process inherits it (observed). `PATH` is
/// not among them: setup wires the binary and its checker by absolute path, and people keep
/// their own `PATH` in these files (it counts for the plugin only, see [`sets_path`]).
pub(crate) fn reaches_loopgate(key: &str) -> bool {
    const PREFIXES: &[&str] = &["LOOPGATE_", "XDG_", "LD_", "DYLD_"];
    const NAMES: &[&str] = &["HOME", "CLAUDE_PLUGIN_ROOT", "CLAUDE_CONFIG_DIR"];
    // Windows reads the environment without regard to case.
    let k = key.to_ascii_uppercase();
    PREFIXES.iter().any(|p| k.starts_with(p)) || NAMES.contains(&k.as_str())
}

/// Keys of the settings' (or a handler's) `env` that change where loopgate looks or what it does.
pub(crate) fn env_overrides(settings: &Value) -> Vec<String> {
    settings
        .get("env")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(Map::keys)
        .filter(|k| reaches_loopgate(k))
        .cloned()
        .collect()
}

/// The settings files Claude Code reads hooks from (user, project, local), as far as known.
pub fn settings_files(home: Option<&Path>, project: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        Some(d) => files.push(PathBuf::from(d).join("settings.json")),
        None => files.extend(home.map(|h| h.join(".claude/settings.json"))),
    }
    if let Some(p) = project {
        files.push(p.join(".claude/settings.json"));
        files.push(p.join(".claude/settings.local.json"));
    }
    // Managed settings wire loopgate where the agent cannot write (`setup --managed`).
    let managed = crate::config::paths::claude_managed_dir();
    files.push(managed.join("managed-settings.json"));
    if let Ok(entries) = std::fs::read_dir(managed.join("managed-settings.d")) {
        // Claude Code reads the drop-in's `.json` files.
        files.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json")),
        );
    }
    files
}

/// Loopgate's events no settings file wires any more.
fn unwired(files: &[(PathBuf, Value)]) -> Vec<&'static str> {
    setup::HOOKS
        .iter()
        .map(|&(event, _, _)| event)
        // FileChanged only reports, and UserPromptExpansion only hears the person's sanction:
        // without them loopgate still judges every call, and settings written before loopgate
        // wired them still work.
        .filter(|event| !matches!(*event, "FileChanged" | "UserPromptExpansion"))
        .filter(|event| {
            !files.iter().any(|(_, v)| {
                let mut only = Map::new();
                if let Some(groups) = v.get("hooks").and_then(|h| h.get(*event)) {
                    only.insert((*event).to_string(), groups.clone());
                }
                let mut probe = Map::new();
                probe.insert("hooks".into(), Value::Object(only));
                setup::has_loopgate_hooks(&Value::Object(probe))
            })
        })
        .collect()
}

/// The outcome of a settings change that switched loopgate off: what it did, and what loopgate
/// did about it.
#[derive(Debug)]
pub struct Undone {
    pub changed: PathBuf,
    pub problems: Vec<String>,
    /// Files rewritten, each with where its changed version was kept.
    pub repaired: Vec<(PathBuf, PathBuf)>,
    /// Why a file could not be put right, if one could not.
    pub failed: Vec<String>,
    /// Each file put right, as the change left it: what `/loopgate allow <id>` would keep.
    pub kept: Vec<Kept>,
    /// The pending id the person may allow, once it is kept (see [`sanction::keep`]).
    pub id: Option<String>,
    /// The command the person types: the plugin's copy is known only by its namespaced name
    /// (observed: a plain `/loopgate` is an unknown command in a plugin install).
    pub slash: &'static str,
}

impl Undone {
    /// One message for the person (and the reason Claude Code records for the block).
    pub fn message(&self) -> String {
        let mut m = format!(
            "loopgate: a change to {} would switch loopgate off ({}). The change is refused",
            self.changed.display(),
            self.problems.join("; ")
        );
        for (file, aside) in &self.repaired {
            m.push_str(&format!(
                "; {} was put right (the changed version is kept in {})",
                file.display(),
                aside.display()
            ));
        }
        for f in &self.failed {
            m.push_str(&format!("; {f}"));
        }
        match &self.id {
            Some(id) => m.push_str(&format!(
                ". If you made this change, type {} allow {id} at the prompt within {} \
                 minutes to keep it (only a person can: the agent's tools cannot run it).",
                self.slash,
                sanction::VALID_MS / 60_000
            )),
            None => m.push_str(
                ". Only a person can switch loopgate off: run `loopgate setup --uninstall` \
                 when no session runs.",
            ),
        }
        m
    }
}

/// What ConfigChange found: a change to undo, and the files that switch loopgate off because
/// the person allowed it (told again each time, since the record of it is a file).
#[derive(Debug, Default)]
pub struct Checked {
    pub undone: Option<Undone>,
    pub allowed: Vec<Allowed>,
}

/// What the person must hear about changes they allowed, still in effect in `changed`.
pub fn allowed_message(allowed: &[Allowed]) -> Option<String> {
    let a = allowed.first()?;
    Some(format!(
        "loopgate: {} switches loopgate off as allowed by /loopgate allow {} (at {}); if you \
         did not type that, run `loopgate setup` to wire loopgate again",
        a.file.display(),
        a.id,
        sanction::when(a)
    ))
}

/// Judges the settings after a change to `changed`: when any file in `files` disables hooks or
/// overrides loopgate's environment, or loopgate's events are no longer all wired, puts the
/// files right (hooks merged back with `command_prefix` into the changed file, disabling keys
/// removed) and says what it did. `None`: nothing switches loopgate off.
pub fn check_change(
    changed: &Path,
    files: &[PathBuf],
    command_prefix: Option<&str>,
    state_dir: Option<&Path>,
) -> Checked {
    let mut all: Vec<PathBuf> = files.to_vec();
    if !all.iter().any(|f| f == changed) {
        all.push(changed.to_path_buf());
    }
    let mut problems = Vec::new();
    let mut parsed: Vec<(PathBuf, Option<String>, Value)> = Vec::new();
    let mut allowed: Vec<Allowed> = Vec::new();
    // Files Claude Code reads and loopgate cannot (a FIFO, a device, a huge file, JSON past
    // what loopgate parses): whatever they set is unknown, so they count as switching loopgate
    // off, and are moved aside whole and replaced.
    let mut unreadable: Vec<PathBuf> = Vec::new();
    for f in &all {
        let (text, v) = match settings_file::read(f) {
            Settings::Missing => (None, Value::Object(Map::new())),
            Settings::Json(text, v) => (Some(text), v),
            Settings::Unreadable(why) => {
                problems.push(format!(
                    "{}: loopgate cannot read it as Claude Code does: {why}",
                    f.display()
                ));
                unreadable.push(f.clone());
                parsed.push((f.clone(), None, Value::Object(Map::new())));
                continue;
            }
        };
        if let Some(a) = sanction::allowed_for(state_dir, f, &v) {
            // As the person allowed it with `/loopgate allow <id>`.
            allowed.push(a);
            continue;
        }
        problems.extend(
            disabling(&v, command_prefix.is_none())
                .into_iter()
                .map(|p| format!("{}: {p}", f.display())),
        );
        parsed.push((f.clone(), text, v));
    }
    let values: Vec<(PathBuf, Value)> = parsed
        .iter()
        .map(|(p, _, v)| (p.clone(), v.clone()))
        .collect();
    // Run from a plugin, loopgate's hooks are not in any settings file: only what disables
    // hooks counts then. Hooks gone from a file the person allowed so are not missed.
    let missing = match command_prefix {
        Some(_) if allowed.is_empty() => unwired(&values),
        _ => Vec::new(),
    };
    if !missing.is_empty() {
        problems.push(format!("loopgate's {} hooks are gone", missing.join(", ")));
    }
    // Handlers edited in place.
    let mut drifted: Vec<PathBuf> = Vec::new();
    if let Some(prefix) = command_prefix {
        let managed = crate::config::paths::claude_managed_dir();
        for (f, _, v) in &parsed {
            // Managed settings are out of the agent's reach, and the person's setup wrote them
            // with the root-owned copy.
            if f.starts_with(&managed) {
                continue;
            }
            let drift = setup::handler_drift(v, prefix, &setup::CLAUDE);
            if !drift.is_empty() {
                problems.extend(drift.into_iter().map(|d| format!("{}: {d}", f.display())));
                drifted.push(f.clone());
            }
        }
    }
    // The status line, where the person sees loopgate off: judged like a handler while
    // loopgate's is installed.
    let status = match command_prefix {
        Some(_) => status_line_check(&parsed, state_dir, allowed.is_empty()),
        None => StatusLine::default(),
    };
    problems.extend(status.problems.iter().cloned());
    // Told only where this change is about an allowed file: each reload re-reads them all.
    allowed.retain(|a| a.file == changed);
    if problems.is_empty() {
        return Checked {
            undone: None,
            allowed,
        };
    }
    let mut undone = Undone {
        changed: changed.to_path_buf(),
        problems,
        repaired: Vec::new(),
        failed: Vec::new(),
        kept: Vec::new(),
        id: None,
        slash: match command_prefix {
            Some(_) => "/loopgate",
            None => PLUGIN_SLASH,
        },
    };
    for (file, text, mut v) in parsed {
        let whole = unreadable.contains(&file);
        let mut fix = whole || !disabling(&v, command_prefix.is_none()).is_empty();
        if fix {
            let plugin_off = match command_prefix {
                None => plugin_switched_off(&v),
                Some(_) => Vec::new(),
            };
            if let Some(root) = v.as_object_mut() {
                root.remove("disableAllHooks");
                if let Some(plugins) = root
                    .get_mut("enabledPlugins")
                    .and_then(Value::as_object_mut)
                {
                    for name in plugin_off {
                        plugins.insert(name, Value::Bool(true));
                    }
                }
                if let Some(env) = root.get_mut("env").and_then(Value::as_object_mut) {
                    let plugin = command_prefix.is_none();
                    env.retain(|k, _| {
                        !(reaches_loopgate(k) || (plugin && k.eq_ignore_ascii_case("PATH")))
                    });
                }
            }
        }
        if status.strip.contains(&file) {
            if let Some(root) = v.as_object_mut() {
                root.remove("statusLine");
            }
            fix = true;
        }
        if let (Some(prefix), true) = (command_prefix, status.restore.as_ref() == Some(&file)) {
            if let Some(root) = v.as_object_mut() {
                root.insert("statusLine".into(), setup::our_status_line(prefix));
            }
            fix = true;
        }
        let rewire = (file == changed && !missing.is_empty()) || drifted.contains(&file);
        if let Some(prefix) = command_prefix.filter(|_| rewire) {
            match setup::merge(&mut v, prefix) {
                Ok(_) => fix = true,
                Err(e) => undone.failed.push(format!("{}: {e:#}", file.display())),
            }
        }
        if !fix {
            continue;
        }
        match put_right(&file, text.as_deref(), &v, whole) {
            Ok(aside) => {
                undone.kept.push(Kept {
                    file: file.clone(),
                    changed_digest: text.as_deref().map(crate::util::canon::text_key),
                    put_back: sanction::digest(&v),
                });
                undone.repaired.push((file, aside));
            }
            Err(e) => undone
                .failed
                .push(format!("{} could not be put right: {e:#}", file.display())),
        }
    }
    Checked {
        undone: Some(undone),
        allowed,
    }
}

/// The binary's outside check rewritten: a pinned command in `changed` (the session start's, the
/// status line's) whose digest is not that of the binary running now. Run by the binary that was
/// installed, this is the first step of a binary-and-digest rewrite told before the second;
/// after an upgrade without `loopgate setup`, it is the stale digest session starts already name.
/// Hashes the binary only when the changed file holds a pinned command for it.
pub fn pin_rewritten(changed: &Path, exe: &Path) -> Option<String> {
    let Settings::Json(_, v) = settings_file::read(changed) else {
        return None;
    };
    let mut commands: Vec<&str> = Vec::new();
    if let Some(c) = v
        .get("statusLine")
        .and_then(|s| s.get("command"))
        .and_then(Value::as_str)
    {
        commands.push(c);
    }
    for group in v
        .get("hooks")
        .and_then(|h| h.get("SessionStart"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for h in group
            .get("hooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            commands.extend(h.get("command").and_then(Value::as_str));
        }
    }
    let exe = exe.to_str()?;
    let pinned: Vec<_> = commands
        .into_iter()
        .filter_map(setup::pin::parse)
        .filter(|p| p.path == exe)
        .collect();
    if pinned.is_empty() {
        return None;
    }
    let now = setup::pin::digest_of(Path::new(exe)).ok()?;
    let stale = pinned.iter().find(|p| p.digest != now)?;
    Some(format!(
        "{}: the digest pinned for {exe} ({}…) is no longer the running binary's ({}…): either \
         loopgate was upgraded and `loopgate setup` not run since, or the check that tells you \
         when loopgate's binary is replaced was rewritten. If neither was you, reinstall loopgate \
         and run `loopgate doctor`",
        changed.display(),
        &stale.digest[..12],
        &now[..12]
    ))
}

/// In the state dir: loopgate's status line is installed (setup put it in the user's settings),
/// so one gone from every file was taken away, not never there.
const STATUS_LINE_RECORD: &str = "statusline.installed";

/// Records whether loopgate's status line is installed (setup, and ConfigChange when it finds
/// it in place).
pub fn note_status_line(state_dir: &Path, installed: bool) {
    let record = state_dir.join(STATUS_LINE_RECORD);
    if !installed {
        let _ = std::fs::remove_file(record);
    } else if std::fs::symlink_metadata(&record).is_err()
        && crate::store::Store::open(state_dir).is_ok()
    {
        let _ = crate::store::open_private(&record);
    }
}

/// What the settings do to loopgate's status line.
#[derive(Debug, Default)]
struct StatusLine {
    problems: Vec<String>,
    /// Files whose own `statusLine` takes the place of loopgate's: it comes out.
    strip: Vec<PathBuf>,
    /// The user's file, where loopgate's goes back when no file holds it any more.
    restore: Option<PathBuf>,
}

/// Claude Code shows the `statusLine` of the highest layer that sets one: managed, then the
/// project's local file, the project's, the user's (`files` is in that order, lowest first). While
/// loopgate's is installed, a higher layer's own line, or loopgate's taken out or rewritten (a
/// line that hides `✗ OFF`), would leave the person nothing that tells them loopgate is off.
/// Managed settings are the administrator's and are left alone; `may_restore`: no file is as the
/// person allowed it with `/loopgate allow`.
fn status_line_check(
    parsed: &[(PathBuf, Option<String>, Value)],
    state_dir: Option<&Path>,
    may_restore: bool,
) -> StatusLine {
    const KEY: &str = "statusLine";
    let managed = crate::config::paths::claude_managed_dir();
    let mut out = StatusLine::default();
    let (admin, layers): (Vec<_>, Vec<_>) =
        parsed.iter().partition(|(f, _, _)| f.starts_with(&managed));
    if admin.iter().any(|(_, _, v)| v.get(KEY).is_some()) {
        return out;
    }
    let is_ours = |v: &Value| v.get(KEY).is_some_and(setup::is_our_status_line);
    let ours = layers.iter().rposition(|(_, _, v)| is_ours(v));
    let record = state_dir.map(|d| d.join(STATUS_LINE_RECORD));
    let recorded = record.as_ref().is_some_and(|r| r.exists());
    if ours.is_none() && !recorded {
        return out;
    }
    if let (Some(dir), Some(_), false) = (state_dir, ours, recorded) {
        note_status_line(dir, true);
    }
    let others = |from: usize| {
        layers[from..]
            .iter()
            .filter(|(_, _, v)| v.get(KEY).is_some() && !is_ours(v))
            .map(|(f, _, _)| f.clone())
            .collect::<Vec<_>>()
    };
    match ours {
        Some(i) => {
            for f in others(i + 1) {
                out.problems.push(format!(
                    "{}: its statusLine takes the place of loopgate's, which tells you when \
                     loopgate is off",
                    f.display()
                ));
                out.strip.push(f);
            }
        }
        None if may_restore => {
            let Some((user, _, _)) = layers.first() else {
                return out;
            };
            out.problems.push(
                "loopgate's status line, which tells you when loopgate is off, is gone or \
                 rewritten"
                    .into(),
            );
            out.strip = others(1);
            out.restore = Some(user.clone());
        }
        None => {}
    }
    out
}

/// Writes the repaired settings, keeping the changed version beside them: its text, or for a
/// file loopgate could not read (`whole`), the file itself moved aside, whatever it is.
fn put_right(file: &Path, changed: Option<&str>, repaired: &Value, whole: bool) -> Result<PathBuf> {
    let aside = sanction::aside_path(file);
    if whole {
        if aside.is_dir() && !aside.is_symlink() {
            std::fs::remove_dir_all(&aside).ok();
        }
        std::fs::rename(file, &aside)
            .with_context(|| format!("cannot move it aside to {}", aside.display()))?;
    } else {
        setup::write_atomic(&aside, changed.unwrap_or("").as_bytes(), None)
            .with_context(|| format!("cannot keep the changed version in {}", aside.display()))?;
    }
    let mut text = serde_json::to_string_pretty(repaired)?;
    text.push('\n');
    let permissions = std::fs::metadata(file).ok().map(|m| m.permissions());
    setup::write_atomic(file, text.as_bytes(), permissions.as_ref())?;
    Ok(aside)
}

/// In the state dir's `sessions/`: what FileChanged noticed, for the session's next hook call
/// to show (FileChanged's own answer is shown nowhere, observed). A `.notice` file, so `gc`
/// removes one that no call ever took.
const PENDING_EXT: &str = "changed.notice";
/// A pending file past this is not added to: the person has been told enough.
const PENDING_MAX: u64 = 16 << 10;

/// The paths a Claude Code session should watch for FileChanged: the hooks' binary and
/// loopgate's config files that exist now (a file made later is reported unreliably, observed).
/// The settings files are not among them: ConfigChange already sees, and can undo, their changes.
pub fn watch_paths(exe: Option<&Path>, config_files: &[PathBuf]) -> Vec<PathBuf> {
    exe.into_iter()
        .map(Path::to_path_buf)
        .chain(config_files.iter().cloned())
        .filter(|p| p.is_file())
        .collect()
}

/// SessionStart's answer asking Claude Code to watch `paths` (an empty object when there are
/// none); it reaches neither the model nor the screen (observed).
pub fn watch_answer(paths: &[PathBuf]) -> Value {
    if paths.is_empty() {
        return Value::Object(Map::new());
    }
    let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    serde_json::json!({"hookSpecificOutput": {
        "hookEventName": "SessionStart",
        "watchPaths": paths,
    }})
}

/// What the person must hear about a watched file that changed, if anything. `what` is
/// FileChanged's `event` (`change`, `add`, `unlink`); `mode_now` says what loopgate's config does
/// now that it changed (`None` when it still enforces).
pub fn file_changed(
    changed: &Path,
    what: &str,
    exe: Option<&Path>,
    config_files: &[PathBuf],
    mode_now: impl FnOnce() -> Option<String>,
) -> Option<String> {
    let same = |p: &Path| {
        p == changed
            || std::fs::canonicalize(p)
                .ok()
                .is_some_and(|c| std::fs::canonicalize(changed).ok() == Some(c))
    };
    let shown = changed.display();
    if exe.is_some_and(same) {
        return Some(if what == "unlink" {
            format!(
                "the hooks' binary {shown} was deleted mid-session: every later hook call fails \
                 and loopgate is off until it is reinstalled (./install.sh or `loopgate setup`)"
            )
        } else {
            format!(
                "the hooks' binary {shown} was replaced mid-session; if that was not you \
                 upgrading loopgate, reinstall it and run `loopgate doctor`"
            )
        });
    }
    if config_files.iter().any(|f| same(f)) {
        let off = mode_now()?;
        return Some(format!(
            "loopgate's config {shown} changed mid-session and now {off}; if that was not you, \
             put it back (`loopgate config` shows every value and its source)"
        ));
    }
    None
}

/// Beside the session's state file (whose name already hashes the session id).
fn pending_path(state_file: &Path) -> PathBuf {
    state_file.with_extension(PENDING_EXT)
}

/// Keeps `message` for the session's next hook call to show.
pub fn keep_pending(state_file: &Path, message: &str) -> Result<()> {
    let path = pending_path(state_file);
    let f = crate::platform::open_private_rw(&path, true)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let at = f.metadata()?.len();
    if at < PENDING_MAX {
        let line = format!("{}\n", message.replace('\n', " "));
        crate::platform::write_all_at(&f, line.as_bytes(), at)?;
    }
    Ok(())
}

/// The messages FileChanged kept for this session, each once: the file is moved away before it
/// is read, so a message kept meanwhile waits for the next call instead of being lost.
pub fn take_pending(state_file: &Path) -> Vec<String> {
    let path = pending_path(state_file);
    let mut taking = path.clone().into_os_string();
    taking.push(".taking");
    let taking = PathBuf::from(taking);
    if std::fs::rename(&path, &taking).is_err() {
        return Vec::new(); // the common case: nothing pending, one failed rename
    }
    let text = crate::platform::open_private_read(&taking)
        .ok()
        .and_then(|f| {
            use std::io::Read;
            let mut text = String::new();
            f.take(PENDING_MAX * 2).read_to_string(&mut text).ok()?;
            Some(text)
        })
        .unwrap_or_default();
    let _ = std::fs::remove_file(&taking);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_that_reaches_the_loader_or_loopgates_detection_is_a_wiring_change() {
        for key in [
            "LOOPGATE_MODE",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "CLAUDE_PLUGIN_ROOT",
            "CLAUDE_CONFIG_DIR",
            "HOME",
            "XDG_STATE_HOME",
            "ld_preload",
        ] {
            assert!(reaches_loopgate(key), "{key}");
        }
        for key in [
            "PATH",
            "NODE_OPTIONS",
            "RUST_LOG",
            "ANTHROPIC_MODEL",
            "MY_LD_FLAG",
        ] {
            assert!(!reaches_loopgate(key), "{key}");
        }
    }

    #[test]
    fn a_watched_file_is_reported_by_what_it_is_and_what_happened() {
        let d = tempfile::tempdir().unwrap();
        let (bin, cfg) = (d.path().join("loopgate"), d.path().join("config.toml"));
        std::fs::write(&bin, "").unwrap();
        std::fs::write(&cfg, "").unwrap();
        let cfgs = [cfg.clone()];
        let off = || Some("puts loopgate in observe mode".to_string());
        let said = |p: &Path, what| file_changed(p, what, Some(&bin), &cfgs, off);
        assert!(said(&bin, "change").unwrap().contains("was replaced"));
        assert!(said(&bin, "unlink").unwrap().contains("was deleted"));
        assert!(said(&cfg, "change").unwrap().contains("observe mode"));
        assert_eq!(
            file_changed(&cfg, "change", Some(&bin), &cfgs, || None),
            None
        );
        assert_eq!(said(&d.path().join("other"), "change"), None);
        assert_eq!(
            watch_paths(Some(&bin), &[cfg.clone(), d.path().join("gone")]),
            [bin.clone(), cfg]
        );

        std::fs::create_dir(d.path().join("sessions")).unwrap();
        let state = d.path().join("sessions").join("s1.state");
        assert!(take_pending(&state).is_empty());
        keep_pending(&state, "one").unwrap();
        keep_pending(&state, "two\nlines").unwrap();
        assert_eq!(take_pending(&state), ["one", "two lines"]);
        assert!(take_pending(&state).is_empty(), "each once");
    }
    use serde_json::json;

    fn wired() -> Value {
        let mut v = json!({"permissions": {"allow": ["Bash(npm test)"]}});
        setup::merge(&mut v, "loopgate").unwrap();
        v
    }

    #[test]
    fn an_unwiring_change_is_undone_and_an_ordinary_one_is_not() {
        let d = tempfile::tempdir().unwrap();
        let user = d.path().join("home/.claude/settings.json");
        let local = d.path().join("proj/.claude/settings.local.json");
        std::fs::create_dir_all(user.parent().unwrap()).unwrap();
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        let files = vec![user.clone(), local.clone()];
        std::fs::write(&user, wired().to_string()).unwrap();
        // An ordinary change: nothing to say.
        std::fs::write(&local, r#"{"permissions": {"allow": ["Bash(ls)"]}}"#).unwrap();
        assert!(check_change(&local, &files, Some("loopgate"), None)
            .undone
            .is_none());
        // Hooks switched off through a JSON escape: undone, the changed version kept.
        std::fs::write(&local, r#"{"disable\u0041llHooks": true}"#).unwrap();
        let u = check_change(&local, &files, Some("loopgate"), None)
            .undone
            .unwrap();
        assert!(u.message().contains("disableAllHooks"), "{}", u.message());
        let now: Value = serde_json::from_str(&std::fs::read_to_string(&local).unwrap()).unwrap();
        assert!(now.get("disableAllHooks").is_none(), "{now}");
        assert!(
            std::fs::read_to_string(format!("{}{ASIDE_SUFFIX}", local.display()))
                .unwrap()
                .contains("disable")
        );
        // The user's file unwired (by any tool): loopgate's hooks are merged back, the rest kept.
        std::fs::write(&user, r#"{"permissions": {"allow": ["Bash(npm test)"]}, "env": {"LOOPGATE_MODE": "observe"}}"#).unwrap();
        let u = check_change(&user, &files, Some("loopgate"), None)
            .undone
            .unwrap();
        assert!(u.message().contains("hooks are gone"), "{}", u.message());
        let now: Value = serde_json::from_str(&std::fs::read_to_string(&user).unwrap()).unwrap();
        assert!(setup::has_loopgate_hooks(&now));
        assert_eq!(now["permissions"]["allow"][0], "Bash(npm test)");
        assert!(now["env"].get("LOOPGATE_MODE").is_none(), "{now}");
        // The same unwiring, allowed by the person: left alone, and told.
        std::fs::write(&user, "{}").unwrap();
        let state = d.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let u = check_change(&user, &files, Some("loopgate"), Some(&state))
            .undone
            .unwrap();
        let id = sanction::keep(&state, "s1", &u.problems, u.kept, 1).unwrap();
        let p = sanction::allow(&state, &id, "s1", 2).unwrap();
        sanction::apply(&state, &p, 2).unwrap();
        let checked = check_change(&user, &files, Some("loopgate"), Some(&state));
        assert!(checked.undone.is_none());
        assert!(allowed_message(&checked.allowed)
            .unwrap()
            .contains(&format!("/loopgate allow {id}")));
    }
}
