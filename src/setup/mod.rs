//! Wiring loopgate's hooks into a Claude Code `settings.json` without clobbering anything.
//!
//! [`merge`] and [`remove`] are pure edits of a parsed settings value; [`run`] adds the file
//! handling: a missing file counts as `{}`, invalid JSON is an error that leaves the file alone,
//! the previous contents go to `<file>.loopgate-bak`, and the new contents replace the file
//! atomically. Nothing is written when nothing changes.
//!
//! A hook handler belongs to loopgate when the program its command runs is named `loopgate` or
//! `loopgate-hook` (see [`is_loopgate_command`]); everything else is left exactly as it was.
//!
//! The other agent CLIs' hook files are edited by the same code: a [`Format`] says which events
//! a CLI has, the unit of its timeouts and whether its handlers sit in matcher groups (Claude
//! Code's shape) or straight under the event (Copilot CLI's). [`agents`] has the per-CLI routes.

pub mod agents;
pub mod leftovers;
pub mod pin;
pub mod plugin;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The hook events loopgate listens to, with its subcommand for each and whether it is a tool
/// event (tool events get `"matcher": "*"`; the others ignore matchers, so they get none).
pub const HOOKS: &[(&str, &str, bool)] = &[
    ("SessionStart", "session-start", false),
    ("PreToolUse", "pre-tool-use", true),
    ("PostToolUse", "post-tool-use", true),
    ("PostToolUseFailure", "post-tool-use-failure", true),
    ("PostToolBatch", "post-tool-batch", false),
    ("Stop", "stop", false),
    ("SubagentStop", "subagent-stop", false),
    ("UserPromptSubmit", "user-prompt-submit", false),
    ("UserPromptExpansion", "prompt-expansion", false),
    ("ConfigChange", "config-change", false),
    ("FileChanged", "file-changed", false),
];

/// Seconds Claude Code waits for one loopgate hook before giving up on it (it then fails open).
pub const HOOK_TIMEOUT_SECS: u64 = 10;

/// How one agent CLI's hook file wires loopgate: its events (name, loopgate's subcommand, whether
/// it is a tool event that takes `"matcher": "*"`), the timeout in that CLI's unit, and the
/// handler shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    pub hooks: &'static [(&'static str, &'static str, bool)],
    /// The handler's timeout, in the CLI's unit (an integer: Codex rejects anything else).
    pub timeout: u64,
    /// Copilot CLI's shape: `{"type": "command", "bash": …, "timeoutSec": …}` handlers listed
    /// straight under the event, no matcher groups. Otherwise Claude Code's
    /// `[{"matcher": "*", "hooks": [{"type": "command", "command": …, "timeout": …}]}]`.
    pub flat: bool,
    /// The CLI runs a `statusLine` command (Claude Code): setup offers `loopgate statusline`
    /// where none is configured, and uninstalling takes back only its own.
    pub status_line: bool,
    /// Subcommands whose handlers setup pins to the binary's digest ([`pin`]): Claude Code's
    /// session start, where a failed check's message is shown at launch.
    pub pinned: &'static [&'static str],
}

/// Claude Code's settings files.
pub const CLAUDE: Format = Format {
    hooks: HOOKS,
    timeout: HOOK_TIMEOUT_SECS,
    flat: false,
    status_line: true,
    pinned: &["session-start"],
};

/// The `statusLine` setup offers: the hooks' binary (never in observe mode: the line only reads),
/// pinned to its digest, so a replaced binary shows on the line.
fn status_line(command_prefix: &str) -> Value {
    let bin = command_prefix
        .strip_suffix(" --observe")
        .unwrap_or(command_prefix);
    let command = pin_for(
        format!("{bin} statusline"),
        command_prefix,
        |_| pin::status_line_notice(),
        pin::DigestFrom::Binary,
    );
    json!({"type": "command", "command": command})
}

/// `command` pinned to the binary `command_prefix` names ([`pin::pin`]).
fn pin_for(
    command: String,
    command_prefix: &str,
    notice: impl FnOnce(&str) -> String,
    from: pin::DigestFrom,
) -> String {
    match shell_words(command_prefix, 1).first() {
        Some(program) => pin::pin(command, program, notice, from),
        None => command,
    }
}

/// loopgate's `statusLine` for the hooks `command_prefix` names, pinned as setup writes it.
pub fn our_status_line(command_prefix: &str) -> Value {
    status_line(command_prefix)
}

/// Whether a `statusLine` is loopgate's own.
pub fn is_our_status_line(v: &Value) -> bool {
    v.get("command")
        .and_then(Value::as_str)
        .map(pin::inner)
        .is_some_and(|c| is_loopgate_command(c) && c.trim_end().ends_with(" statusline"))
}

/// Offers loopgate's status line: added where there is none, kept up to date where it is ours,
/// and someone else's left alone (returned as `false`). Uninstalling removes only ours.
fn settle_status_line(settings: &mut Value, command_prefix: &str, uninstall: bool) -> bool {
    let Some(root) = settings.as_object_mut() else {
        return true;
    };
    match root.get("statusLine") {
        Some(v) if is_our_status_line(v) => {
            if uninstall {
                root.remove("statusLine");
            } else {
                root.insert("statusLine".into(), status_line(command_prefix));
            }
            true
        }
        Some(_) => false,
        None => {
            if !uninstall {
                root.insert("statusLine".into(), status_line(command_prefix));
            }
            true
        }
    }
}

/// Appended to the settings file's name to name the backup of its previous contents.
pub const BACKUP_SUFFIX: &str = ".loopgate-bak";

/// The command prefix `hooks/hooks.json` uses in the Claude Code plugin. The wrapper is run
/// through `sh` because plugin caches are known to drop the executable bit.
pub const PLUGIN_COMMAND_PREFIX: &str = r#"sh "${CLAUDE_PLUGIN_ROOT}/hooks/loopgate-hook""#;

/// Program names whose hook handlers are loopgate's.
const OWN_PROGRAMS: &[&str] = &["loopgate", "loopgate-hook"];

/// The command prefix for a settings file: the binary's path, shell-quoted when it needs it
/// (hook commands run under `sh -c`), followed by ` --observe` in observe mode.
pub fn command_prefix(bin: &Path, observe: bool) -> Result<String> {
    let bin = bin
        .to_str()
        .with_context(|| format!("binary path {} is not valid UTF-8", bin.display()))?;
    let mut prefix = shell_quote(&crate::platform::hook_command_path(bin));
    if observe {
        prefix.push_str(" --observe");
    }
    Ok(prefix)
}

/// The complete `"hooks"` object that wires every event in [`HOOKS`] to
/// `<command_prefix> <subcommand>`.
pub fn hook_block(command_prefix: &str) -> Value {
    hook_block_as(command_prefix, &CLAUDE)
}

/// [`hook_block`] for the CLI whose hook file has `format`.
pub fn hook_block_as(command_prefix: &str, format: &Format) -> Value {
    let mut block = Map::new();
    for &(event, subcommand, tool_event) in format.hooks {
        block.insert(
            event.to_owned(),
            Value::Array(vec![group(
                command_prefix,
                subcommand,
                tool_event,
                format,
                pin::DigestFrom::Binary,
            )]),
        );
    }
    Value::Object(block)
}

/// One matcher group holding loopgate's handler for `subcommand` (in the flat shape, the
/// handler itself).
fn group(
    command_prefix: &str,
    subcommand: &str,
    tool_event: bool,
    format: &Format,
    from: pin::DigestFrom,
) -> Value {
    let mut command = format!("{command_prefix} {subcommand}");
    if format.pinned.contains(&subcommand) {
        command = pin_for(command, command_prefix, pin::session_start_notice, from);
    }
    if format.flat {
        return json!({"type": "command", "bash": command, "timeoutSec": format.timeout});
    }
    let handler = json!({
        "type": "command",
        "command": command,
        "timeout": format.timeout,
    });
    let mut group = Map::new();
    if tool_event {
        group.insert("matcher".to_owned(), Value::from("*"));
    }
    group.insert("hooks".to_owned(), Value::Array(vec![handler]));
    Value::Object(group)
}

/// How loopgate's handlers in `settings` differ from what setup writes with `command_prefix`
/// (issue 30: a handler edited in place — `async`, a matcher or `if` that never holds, a
/// redirection, `LOOPGATE_DISABLE=1 …`, `--observe`, another subcommand, a 1 ms timeout — is a
/// switch-off as surely as one removed). One line per difference; empty when there is none.
pub fn handler_drift(settings: &Value, command_prefix: &str, format: &Format) -> Vec<String> {
    let mut found = Vec::new();
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
        return found;
    };
    for &(event, subcommand, tool_event) in format.hooks {
        let Some(Value::Array(groups)) = hooks.get(event) else {
            continue;
        };
        // Its shape only: a pinned command's digest is not compared, so the binary is not hashed.
        let expected = group(
            command_prefix,
            subcommand,
            tool_event,
            format,
            pin::DigestFrom::ShapeOnly,
        );
        for g in groups {
            let (handlers, outer): (Vec<&Value>, Option<&Value>) = if format.flat {
                (vec![g], None)
            } else {
                match g.get("hooks") {
                    Some(Value::Array(hs)) => (hs.iter().collect(), Some(g)),
                    _ => continue,
                }
            };
            for h in handlers.into_iter().filter(|h| is_loopgate_handler(h)) {
                let mut why = Vec::new();
                if let Some(g) = outer {
                    why.extend(group_drift(g, tool_event));
                }
                let want = if format.flat {
                    &expected
                } else {
                    &expected["hooks"][0]
                };
                why.extend(handler_fields_drift(h, want));
                if !why.is_empty() {
                    found.push(format!(
                        "loopgate's {event} handler was changed ({})",
                        why.join(", ")
                    ));
                }
            }
        }
    }
    found
}

/// A matcher group holding loopgate's handler: a tool event's matcher must match every tool; other
/// events get none (a matcher there filters by source or file, and could match nothing).
fn group_drift(g: &Value, tool_event: bool) -> Vec<String> {
    let mut why = Vec::new();
    match g.get("matcher") {
        None => {}
        Some(Value::String(m)) if m == "*" || m.is_empty() => {}
        Some(m) if tool_event => why.push(format!("matcher {m}")),
        Some(m) => why.push(format!("matcher {m}")),
    }
    if let Some(map) = g.as_object() {
        for k in map
            .keys()
            .filter(|k| !matches!(k.as_str(), "matcher" | "hooks"))
        {
            why.push(format!("{k} on its group"));
        }
    }
    why
}

/// The fields of one loopgate handler against the one setup writes.
fn handler_fields_drift(h: &Value, want: &Value) -> Vec<String> {
    let mut why = Vec::new();
    let (Some(have), Some(want_map)) = (h.as_object(), want.as_object()) else {
        return vec!["not an object".into()];
    };
    for (k, v) in have {
        match want_map.get(k) {
            None => why.push(format!("{k}: {v}")),
            Some(w) if k == "command" || k == "bash" => {
                let (have, want) = (v.as_str().unwrap_or(""), w.as_str().unwrap_or(""));
                why.extend(command_drift(have, want));
            }
            // A shorter wait than setup's cuts the hook off before it answers.
            Some(w) if k == "timeout" || k == "timeoutSec" => {
                if v.as_u64().is_none_or(|t| t < w.as_u64().unwrap_or(0)) {
                    why.push(format!("{k}: {v}"));
                }
            }
            Some(w) if v != w => why.push(format!("{k}: {v}")),
            Some(_) => {}
        }
    }
    why
}

/// How a handler's command differs from the one setup writes. A pinned command ([`pin`]) must
/// keep its check, its binary and its notice; the digest it records is not compared (after an
/// upgrade it is the person's to renew with `loopgate setup`, and the shell's check tells them).
fn command_drift(have: &str, want: &str) -> Option<String> {
    let changed = match (pin::parse(have), pin::parse(want)) {
        (Some(h), Some(w)) => {
            // The binary may be named through a link, as an unpinned command's may.
            let same_path = h.path == w.path || same_binary(Path::new(h.path), Path::new(w.path));
            !same_path
                || h.notice != w.notice.replace(w.path, h.path)
                || !same_command(h.inner, w.inner)
        }
        (None, Some(_)) => return Some(format!("command {have:?}, without its binary check")),
        (Some(h), None) => !same_command(h.inner, want),
        (None, None) => !same_command(have, want),
    };
    changed.then(|| format!("command {have:?}"))
}

/// Whether a hook command runs what `want` runs: the same words, the program possibly written
/// another way (a link to the same file), and no shell operator around it.
fn same_command(have: &str, want: &str) -> bool {
    if have.trim() == want.trim() {
        return true;
    }
    const OPERATORS: &[char] = &[';', '&', '|', '<', '>', '`', '\n'];
    if have.contains(OPERATORS) || have.contains("$(") {
        return false;
    }
    let (h, w) = (shell_words(have, 64), shell_words(want, 64));
    if h.len() != w.len() || h.is_empty() || h[1..] != w[1..] {
        return false;
    }
    h[0] == w[0] || same_binary(Path::new(&h[0]), Path::new(&w[0]))
}

/// Whether two paths hold the same program: one file (a link), or a copy byte for byte (the
/// person's own second install). A program that differs is not loopgate as setup installed it.
fn same_binary(a: &Path, b: &Path) -> bool {
    // A bare name runs what PATH finds (`loopgate pre-tool-use`, as settings.example.json has it).
    let located = |p: &Path| -> Option<PathBuf> {
        if p.components().count() > 1 {
            return fs::canonicalize(p).ok();
        }
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(p))
            .find(|c| c.is_file())
            .and_then(|c| fs::canonicalize(c).ok())
    };
    let (Some(ra), Some(rb)) = (located(a), located(b)) else {
        return false;
    };
    if ra == rb {
        return true;
    }
    let size = |p: &Path| {
        fs::metadata(p)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len())
    };
    if size(&ra).is_none() || size(&ra) != size(&rb) {
        return false;
    }
    let digest = |p: &Path| -> Option<Vec<u8>> {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        let mut f = fs::File::open(p).ok()?;
        io::copy(&mut f, &mut h).ok()?;
        Some(h.finalize().to_vec())
    };
    digest(&ra).is_some_and(|d| Some(d) == digest(&rb))
}

/// Adds loopgate's hook entries to `settings`, replacing any older loopgate entries (another
/// binary path, other flags, events loopgate no longer uses) in place. Every other key and hook
/// is kept as it was. Returns whether `settings` changed; merging twice changes nothing.
pub fn merge(settings: &mut Value, command_prefix: &str) -> Result<bool> {
    merge_as(settings, command_prefix, &CLAUDE)
}

/// [`merge`] for the CLI whose hook file has `format`.
pub fn merge_as(settings: &mut Value, command_prefix: &str, format: &Format) -> Result<bool> {
    let mut updated = settings.clone();
    let root = root_object(&mut updated)?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        bail!("\"hooks\" in the settings is not an object; fix it by hand, then try again");
    };

    // Events loopgate no longer listens to lose its entries.
    strip_events(hooks, |event| {
        !format.hooks.iter().any(|&(ours, _, _)| ours == event)
    });

    for &(event, subcommand, tool_event) in format.hooks {
        let ours = group(
            command_prefix,
            subcommand,
            tool_event,
            format,
            pin::DigestFrom::Binary,
        );
        match hooks.get_mut(event) {
            None => {
                hooks.insert(event.to_owned(), Value::Array(vec![ours]));
            }
            Some(Value::Array(groups)) => match strip_loopgate(groups) {
                Some(at) => groups.insert(at, ours),
                None => groups.push(ours),
            },
            Some(_) => bail!(
                "\"hooks.{event}\" in the settings is not an array; fix it by hand, then try again"
            ),
        }
    }

    let changed = updated != *settings;
    *settings = updated;
    Ok(changed)
}

/// Removes loopgate's hook entries from `settings` and nothing else. Matcher groups, event arrays
/// and the `"hooks"` object that become empty because of it are dropped; containers that were
/// already empty are kept. Returns whether `settings` changed.
pub fn remove(settings: &mut Value) -> Result<bool> {
    let mut updated = settings.clone();
    let root = root_object(&mut updated)?;
    let Some(hooks) = root.get_mut("hooks") else {
        return Ok(false);
    };
    let Value::Object(hooks) = hooks else {
        bail!("\"hooks\" in the settings is not an object; fix it by hand, then try again");
    };
    if strip_events(hooks, |_| true) && hooks.is_empty() {
        root.retain(|key, _| key != "hooks");
    }

    let changed = updated != *settings;
    *settings = updated;
    Ok(changed)
}

/// Strips loopgate's handlers from the events `select` picks, and drops the event arrays this
/// leaves empty. Returns whether it removed anything.
fn strip_events(hooks: &mut Map<String, Value>, select: impl Fn(&str) -> bool) -> bool {
    let mut removed_any = false;
    hooks.retain(|event, groups| match groups {
        Value::Array(groups) if select(event) => {
            let removed = strip_loopgate(groups).is_some();
            removed_any |= removed;
            !(removed && groups.is_empty())
        }
        _ => true,
    });
    removed_any
}

/// Removes loopgate's handlers from every matcher group, and the groups that this leaves empty
/// (in the flat shape, loopgate's handlers listed straight under the event).
/// Returns the index, among the groups that remain, where a replacement for the first loopgate
/// handler belongs: where its group was if that group is gone, else just after it.
fn strip_loopgate(groups: &mut Vec<Value>) -> Option<usize> {
    let mut first = None;
    let mut kept = Vec::with_capacity(groups.len());
    for mut group in groups.drain(..) {
        let mut removed = false;
        let mut now_empty = false;
        if is_loopgate_handler(&group) {
            removed = true;
            now_empty = true;
        } else if let Some(Value::Array(handlers)) = group.get_mut("hooks") {
            let before = handlers.len();
            handlers.retain(|handler| !is_loopgate_handler(handler));
            removed = handlers.len() != before;
            now_empty = handlers.is_empty();
        }
        if !(removed && now_empty) {
            kept.push(group);
        }
        if removed && first.is_none() {
            // Just after the group it was in, or where that group was if it is gone.
            first = Some(kept.len());
        }
    }
    *groups = kept;
    first
}

fn is_loopgate_handler(handler: &Value) -> bool {
    handler_command(handler).is_some_and(is_loopgate_command)
}

/// A handler's command line: `"command"`, or Copilot CLI's `"bash"`.
pub fn handler_command(handler: &Value) -> Option<&str> {
    handler
        .get("command")
        .or_else(|| handler.get("bash"))
        .and_then(Value::as_str)
}

/// Whether a hook command runs loopgate: its program (after any leading `NAME=value`
/// assignments, or the script given to `sh`/`bash`) is named `loopgate` or `loopgate-hook`,
/// whatever its directory and whatever arguments follow.
pub fn is_loopgate_command(command: &str) -> bool {
    let command = pin::inner(command);
    let words = shell_words(command, 4);
    let mut words = words
        .iter()
        .map(String::as_str)
        .skip_while(|word| is_assignment(word));
    let Some(mut program) = words.next() else {
        return false;
    };
    if matches!(base_name(program), "sh" | "bash") {
        match words.next() {
            Some(script) => program = script,
            None => return false,
        }
    }
    let name = base_name(program);
    let name = name.strip_suffix(".exe").unwrap_or(name);
    OWN_PROGRAMS.contains(&name)
}

/// The program a loopgate hook command runs (the script for `sh script`), as written.
pub fn command_program(command: &str) -> Option<String> {
    if !is_loopgate_command(command) {
        return None;
    }
    let command = pin::inner(command);
    let words = shell_words(command, 4);
    let mut words = words.into_iter().skip_while(|word| is_assignment(word));
    let program = words.next()?;
    if matches!(base_name(&program), "sh" | "bash") {
        return words.next();
    }
    Some(program)
}

fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// The value of `--agent` among the first words of a hook command, if it has one.
pub fn command_agent(command: &str) -> Option<String> {
    let command = pin::inner(command);
    let words = shell_words(command, 8);
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        if word == "--agent" {
            return words.next();
        }
        if let Some(value) = word.strip_prefix("--agent=") {
            return Some(value.to_owned());
        }
    }
    None
}

/// Splits the start of a `sh` command line into at most `max` words, undoing quotes and
/// backslashes. Expansions such as `${VAR}` are kept as written.
fn shell_words(command: &str, max: usize) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                    if words.len() == max {
                        return words;
                    }
                }
            }
            ';' | '&' | '|' if !in_word => break,
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(next @ ('"' | '\\' | '$' | '`')) => word.push(next),
                            Some(next) => {
                                word.push('\\');
                                word.push(next);
                            }
                            None => word.push('\\'),
                        },
                        _ => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word && words.len() < max {
        words.push(word);
    }
    words
}

/// Quotes `word` for `sh` when it holds anything but plainly safe characters.
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn root_object(settings: &mut Value) -> Result<&mut Map<String, Value>> {
    match settings {
        Value::Object(root) => Ok(root),
        _ => bail!("the settings are not a JSON object"),
    }
}

/// Backups kept per settings file: the oldest (the settings as they were before loopgate first
/// changed them) and the newest ones up to this many in all.
pub const KEEP_BACKUPS: usize = 5;

/// A new backup's path: `<file>.loopgate-bak.<UTC time>`, so names sort by age.
pub fn backup_path(settings_path: &Path) -> PathBuf {
    let stamp: String = humantime::format_rfc3339_millis(std::time::SystemTime::now())
        .to_string()
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    let mut name = settings_path
        .file_name()
        .map(|name| name.to_os_string())
        .unwrap_or_else(|| "settings.json".into());
    name.push(format!("{BACKUP_SUFFIX}.{stamp}"));
    let mut path = settings_path.with_file_name(&name);
    // Two changes within one millisecond: number the second.
    let mut n = 1;
    while path.exists() {
        let mut numbered = name.clone();
        numbered.push(format!("-{n}"));
        path = settings_path.with_file_name(numbered);
        n += 1;
    }
    path
}

/// The backups of `settings_path`, oldest first (an unstamped `<file>.loopgate-bak` from an
/// older loopgate counts as the oldest).
pub fn backups(settings_path: &Path) -> Vec<PathBuf> {
    let Some(name) = settings_path.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let prefix = format!("{name}{BACKUP_SUFFIX}");
    let dir = match settings_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            let rest = n.strip_prefix(&prefix)?;
            (rest.is_empty() || rest.starts_with('.')).then(|| (rest.to_string(), e.path()))
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, p)| p).collect()
}

/// Keeps the oldest backup and the newest ones, [`KEEP_BACKUPS`] in all.
fn prune_backups(settings_path: &Path) {
    let all = backups(settings_path);
    if all.len() <= KEEP_BACKUPS {
        return;
    }
    for p in &all[1..all.len() - (KEEP_BACKUPS - 1)] {
        let _ = fs::remove_file(p);
    }
}

/// The end of a backup's name that records "there was no settings file" (the backup is empty).
pub const NO_FILE_SUFFIX: &str = ".no-file";

/// Whether `backup` records that there was no settings file.
fn records_no_file(backup: &Path) -> bool {
    backup
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(NO_FILE_SUFFIX))
}

/// Puts back the settings from `backup` (or the newest backup). The contents it replaces are
/// backed up first, so restoring twice undoes the restore. A backup that records "no settings
/// file" removes the file. Refuses a backup whose hooks call a loopgate binary that is gone.
/// With no backup beside the file (an uninstall leaves none), `uninstalled` is what the last
/// uninstall took out of it (see [`leftovers`]); it is used up by the restore.
pub fn restore(
    settings_path: &Path,
    backup: Option<&Path>,
    uninstalled: Option<&Path>,
) -> Result<String> {
    let shown = settings_path.display();
    let all = backups(settings_path);
    let chosen = match backup {
        Some(b) => b.to_path_buf(),
        None => match all.last().cloned().or(uninstalled.map(Path::to_path_buf)) {
            Some(b) => b,
            None => bail!(
                "no loopgate backup of {shown} to restore, and no uninstall to undo (`loopgate setup` wires it)"
            ),
        },
    };
    let from_uninstall = all.is_empty() && backup.is_none() && uninstalled.is_some();
    let text = fs::read_to_string(&chosen)
        .with_context(|| format!("cannot read the backup {}", chosen.display()))?;
    let no_file = records_no_file(&chosen);
    let restored = if no_file {
        Value::Object(Map::new())
    } else {
        parse_settings(&text).with_context(|| {
            format!(
                "{} is not valid settings JSON; nothing restored",
                chosen.display()
            )
        })?
    };
    let gone = missing_programs(&restored);
    if !gone.is_empty() {
        bail!(
            "{} has hooks that call {}, which no longer exists: restored, every hook call would fail. \
             Nothing restored; install loopgate again (./install.sh, or `loopgate setup` with the binary you have)",
            chosen.display(),
            gone.join(", ")
        );
    }
    let target = resolve_symlink(settings_path);
    let permissions = fs::metadata(&target).ok().map(|meta| meta.permissions());
    let mut saved = None;
    let created_dirs = leftovers::missing_dirs(&target);
    let existed = target.exists();
    match fs::read_to_string(&target) {
        Ok(current) if current == text && !no_file => {
            return Ok(format!(
                "{shown} already has the contents of {}",
                chosen.display()
            ))
        }
        Ok(current) => {
            let path = backup_path(settings_path);
            write_atomic(&path, current.as_bytes(), permissions.as_ref())
                .with_context(|| format!("cannot write the backup {}", path.display()))?;
            saved = Some(path);
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound && no_file => {
            return Ok(format!(
                "{shown} does not exist, as recorded in {}",
                chosen.display()
            ))
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err).with_context(|| format!("cannot read {shown}")),
    }
    if no_file {
        fs::remove_file(&target).with_context(|| format!("cannot remove {shown}"))?;
        prune_backups(settings_path);
        return Ok(format!(
            "removed {shown}: there was none before loopgate created it ({}){}",
            chosen.display(),
            saved
                .map(|p| format!("; what it held: {}", p.display()))
                .unwrap_or_default()
        ));
    }
    write_atomic(&target, text.as_bytes(), permissions.as_ref())
        .with_context(|| format!("cannot write {shown}"))?;
    if !existed {
        // Restored where there was no file: an uninstall removes it again.
        leftovers::mark_created(settings_path, &created_dirs)?;
    }
    prune_backups(settings_path);
    if from_uninstall {
        let _ = fs::remove_file(&chosen);
        return Ok(format!("restored {shown} as it was before the uninstall"));
    }
    Ok(match saved {
        Some(p) => format!(
            "restored {shown} from {} (what it replaced: {})",
            chosen.display(),
            p.display()
        ),
        None => format!("restored {shown} from {}", chosen.display()),
    })
}

/// Adds (or with `uninstall`, removes) loopgate's hooks in the settings file at `settings_path`
/// and returns a one-line summary of what happened.
///
/// A missing file counts as `{}` (and is only created when hooks are added); invalid JSON is an
/// error and the file is left untouched. When the file changes, its previous contents are saved
/// to a timestamped [`backup_path`] first (the oldest and the newest backups are kept), and the new contents (pretty-printed, 2-space indent) replace it
/// atomically. A symlinked settings file is updated at its target.
pub fn run(settings_path: &Path, command_prefix: &str, uninstall: bool) -> Result<String> {
    run_as(settings_path, command_prefix, uninstall, &CLAUDE)
}

/// [`run`] for the CLI whose hook file has `format`. The flat (Copilot CLI) file also gets the
/// `"version": 1` it needs, and is deleted when uninstalling leaves nothing else in it.
pub fn run_as(
    settings_path: &Path,
    command_prefix: &str,
    uninstall: bool,
    format: &Format,
) -> Result<String> {
    let shown = settings_path.display();
    let target = resolve_symlink(settings_path);
    let original = match fs::read_to_string(&target) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(err).with_context(|| format!("cannot read {shown}")),
    };
    let mut settings = match &original {
        Some(text) => parse_settings(text).with_context(|| {
            format!("{shown} is not valid settings JSON; fix it by hand, then try again")
        })?,
        None => Value::Object(Map::new()),
    };
    let had_loopgate = has_loopgate_hooks(&settings);

    let mut changed = if uninstall {
        remove(&mut settings)
    } else {
        merge_as(&mut settings, command_prefix, format)
    }
    .with_context(|| format!("cannot update {shown}"))?;
    if format.flat && !uninstall {
        changed |= ensure_version(&mut settings);
    }
    let before = settings.clone();
    let status_line_ours =
        !format.status_line || settle_status_line(&mut settings, command_prefix, uninstall);
    changed |= settings != before;
    let status_note = if status_line_ours {
        ""
    } else {
        "; your statusLine is kept (to show loopgate's line in it too, see `loopgate statusline --help`)"
    };
    // Uninstalling left only what loopgate put there, in a file it created: the file goes.
    let delete = uninstall
        && changed
        && (format.flat || leftovers::was_created(settings_path))
        && settings.as_object().is_some_and(|root| {
            root.iter()
                .all(|(key, value)| format.flat && key == "version" && *value == json!(1))
        });
    // Uninstalling came back to the person's file as it was before setup: their bytes, not a
    // re-printing of them.
    let before_setup = uninstall
        .then(|| leftovers::before_setup(settings_path))
        .flatten()
        .filter(|text| parse_settings(text).is_ok_and(|v| v == settings));

    if !changed {
        return Ok(match (uninstall, &original) {
            (true, None) => format!("{shown} does not exist; no loopgate hooks to remove"),
            (true, Some(_)) => format!("no loopgate hooks in {shown}; nothing to remove"),
            (false, _) => format!("loopgate hooks already up to date in {shown}"),
        });
    }

    let permissions = fs::metadata(&target).ok().map(|meta| meta.permissions());
    let mut backup = None;
    // An uninstall keeps no backup beside the file: `setup --restore` finds what it took out in
    // the state dir (see `leftovers`).
    if let Some(text) = original.as_ref().filter(|_| !uninstall) {
        let path = backup_path(settings_path);
        write_atomic(&path, text.as_bytes(), permissions.as_ref())
            .with_context(|| format!("cannot write the backup {}", path.display()))?;
        backup = Some(path);
        prune_backups(settings_path);
    }
    let mut text = serde_json::to_string_pretty(&settings).context("cannot serialize settings")?;
    text.push('\n');
    if let Some(theirs) = before_setup {
        text = theirs;
    }
    let created_dirs = leftovers::missing_dirs(settings_path);
    if delete {
        fs::remove_file(&target).with_context(|| format!("cannot remove {shown}"))?;
    } else {
        write_atomic(&target, text.as_bytes(), permissions.as_ref())
            .with_context(|| format!("cannot write {shown}"))?;
    }
    if original.is_none() {
        // No file before: a backup that says so, for `--restore` to return to.
        leftovers::mark_created(settings_path, &created_dirs)?;
        prune_backups(settings_path);
    }

    let what = match (uninstall, had_loopgate, &original) {
        (true, _, _) if delete => format!("removed {shown}, which held only loopgate's hooks"),
        (true, _, _) if leftovers::before_setup(settings_path).is_some_and(|t| t == text) => {
            format!("removed loopgate hooks from {shown}: it is as it was before setup")
        }
        (true, _, _) => format!("removed loopgate hooks from {shown}"),
        (false, _, None) => format!("created {shown} with loopgate hooks"),
        (false, true, Some(_)) => format!("updated loopgate hooks in {shown}"),
        (false, false, Some(_)) => format!("added loopgate hooks to {shown}"),
    };
    let pinned = if uninstall {
        String::new()
    } else {
        pin_note(&settings)
    };
    Ok(match backup {
        Some(path) => format!("{what} (backup: {}){status_note}{pinned}", path.display()),
        None => format!("{what}{status_note}{pinned}"),
    })
}

/// What checks the binary from outside, said once at setup: the person should know that an
/// upgrade without `loopgate setup` will be told at every session start.
fn pin_note(settings: &Value) -> String {
    let pinned = settings["hooks"]["SessionStart"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().into_iter().flatten())
        .filter_map(handler_command)
        .find_map(pin::parse);
    match pinned {
        Some(p) => format!(
            "; each session start checks the binary's SHA-256 with {} (after upgrading loopgate, \
             run `loopgate setup` again)",
            p.checker.split(' ').next().unwrap_or(p.checker)
        ),
        None => String::new(),
    }
}

/// Whether a loopgate hook command runs in observe mode (`--observe` among its words).
pub fn command_observes(command: &str) -> bool {
    is_loopgate_command(command)
        && shell_words(pin::inner(command), 12)
            .iter()
            .any(|w| w == "--observe")
}

/// Whether any loopgate hook in the hook file at `path` runs in observe mode.
pub fn observing_hooks_in(path: &Path) -> bool {
    fs::read_to_string(resolve_symlink(path))
        .ok()
        .and_then(|text| parse_settings(&text).ok())
        .is_some_and(|v| loopgate_commands(&v).into_iter().any(command_observes))
}

/// Whether any hook in `settings` runs loopgate.
pub fn has_loopgate_hooks(settings: &Value) -> bool {
    !loopgate_commands(settings).is_empty()
}

/// The command lines of the hooks in `settings` that run loopgate (either shape).
fn loopgate_commands(settings: &Value) -> Vec<&str> {
    settings
        .get("hooks")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(Map::values)
        .filter_map(Value::as_array)
        .flatten()
        .flat_map(|item| {
            std::iter::once(item).chain(
                item.get("hooks")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten(),
            )
        })
        .filter_map(handler_command)
        .filter(|c| is_loopgate_command(c))
        .collect()
}

/// The loopgate programs the hooks in `settings` run, as written, each once.
pub fn hooked_programs(settings: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for program in loopgate_commands(settings)
        .into_iter()
        .filter_map(command_program)
    {
        if !out.contains(&program) {
            out.push(program);
        }
    }
    out
}

/// The loopgate programs the hook file at `path` runs (none when it does not exist).
pub fn hooked_programs_in(path: &Path) -> Result<Vec<String>> {
    match fs::read_to_string(resolve_symlink(path)) {
        Ok(text) => Ok(hooked_programs(&parse_settings(&text).with_context(
            || format!("{} is not valid settings JSON", path.display()),
        )?)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The hooked programs named by a path that does not exist: restoring hooks that call them
/// would make every hook call fail.
fn missing_programs(settings: &Value) -> Vec<String> {
    hooked_programs(settings)
        .into_iter()
        .filter(|p| p.contains(['/', '\\']) && !Path::new(p).exists())
        .collect()
}

/// Puts `"version": 1` first in a Copilot CLI hook file that lacks it. Returns whether it did.
fn ensure_version(settings: &mut Value) -> bool {
    let Value::Object(root) = settings else {
        return false;
    };
    if root.contains_key("version") {
        return false;
    }
    let mut with = Map::new();
    with.insert("version".to_owned(), json!(1));
    with.extend(std::mem::take(root));
    *root = with;
    true
}

/// A settings file's JSON (`{}` when missing or empty).
pub fn read_json(path: &Path) -> Result<Value> {
    match fs::read_to_string(path) {
        Ok(text) => parse_settings(&text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Value::Object(Map::new())),
        Err(e) => Err(e.into()),
    }
}

/// The file of `/loopgate`, the command the person types to keep a change loopgate undid, in the
/// `commands/` folder beside the settings file.
pub const SLASH_COMMAND_FILE: &str = "loopgate.md";

/// `/loopgate`'s text. `disable-model-invocation` is what makes it the person's alone: the model's
/// Skill tool may not run it (observed), so only the person's typing fires the
/// UserPromptExpansion that `loopgate prompt-expansion` answers. Its body never reaches the model:
/// the handler blocks every `/loopgate`.
/// The same file ships in the Claude Code plugin (`commands/`), so a plugin install has it too.
const SLASH_COMMAND: &str = include_str!("../../commands/loopgate.md");

pub fn slash_command_path(settings_path: &Path) -> Option<PathBuf> {
    Some(
        settings_path
            .parent()?
            .join("commands")
            .join(SLASH_COMMAND_FILE),
    )
}

/// Writes `/loopgate` beside `settings_path` unless it is already there as setup writes it.
/// Returns whether it wrote.
pub fn write_slash_command(settings_path: &Path) -> Result<bool> {
    let Some(path) = slash_command_path(settings_path) else {
        return Ok(false);
    };
    if fs::read_to_string(&path).is_ok_and(|t| t == SLASH_COMMAND) {
        return Ok(false);
    }
    write_atomic(&path, SLASH_COMMAND.as_bytes(), None)?;
    Ok(true)
}

/// Removes `/loopgate` from beside `settings_path` when it is the one setup wrote (a file the
/// person changed is theirs). Returns whether it removed it.
/// The `commands/` folder goes too when that leaves it empty.
pub fn remove_slash_command(settings_path: &Path) -> bool {
    slash_command_path(settings_path).is_some_and(|path| {
        let removed = fs::read_to_string(&path).is_ok_and(|t| t == SLASH_COMMAND)
            && fs::remove_file(&path).is_ok();
        if removed {
            if let Some(dir) = path.parent() {
                let _ = fs::remove_dir(dir); // only when empty
            }
        }
        removed
    })
}

fn parse_settings(text: &str) -> Result<Value> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let value: Value = serde_json::from_str(text)?;
    if !value.is_object() {
        bail!("the top level is not a JSON object");
    }
    Ok(value)
}

/// The file a symlinked settings path points to, so that writing keeps the link.
fn resolve_symlink(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
        }
        _ => path.to_owned(),
    }
}

/// Writes `contents` to a temporary file beside `path`, syncs it, then renames it over `path`.
pub(crate) fn write_atomic(
    path: &Path,
    contents: &[u8],
    permissions: Option<&fs::Permissions>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".loopgate-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(contents)?;
    if let Some(permissions) = permissions {
        tmp.as_file().set_permissions(permissions.clone())?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

/// loopgate's file in the managed-settings drop-in directory: it holds only loopgate's hooks.
pub const MANAGED_FILE: &str = "loopgate.json";

/// Installs (or removes) loopgate's hooks as a managed-settings drop-in,
/// `<dir>/managed-settings.d/loopgate.json`. Managed hooks are the ones user and project settings
/// cannot switch off (`disableAllHooks` outside managed settings does not reach them), so an
/// agent editing `~/.claude/settings.json` or `.claude/settings.local.json` no longer disables
/// loopgate. Writing there needs the rights of whoever administers the machine (usually root);
/// the binary the hooks run should then be one the user cannot replace either.
pub fn run_managed(dir: &Path, command_prefix: &str, uninstall: bool) -> Result<String> {
    let drop_in = dir.join("managed-settings.d");
    let path = drop_in.join(MANAGED_FILE);
    let shown = path.display();
    if uninstall {
        return match fs::remove_file(&path) {
            Ok(()) => Ok(format!("removed {shown}")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Ok(format!("{shown} does not exist; nothing to remove"))
            }
            Err(e) => Err(e).with_context(|| format!("cannot remove {shown}")),
        };
    }
    let settings = json!({ "hooks": hook_block(command_prefix) });
    let mut text = serde_json::to_string_pretty(&settings).context("cannot serialize settings")?;
    text.push('\n');
    if fs::read_to_string(&path).is_ok_and(|old| old == text) {
        return Ok(format!("loopgate hooks already up to date in {shown}"));
    }
    // Readable by every user's Claude Code, writable by its owner only.
    let permissions = crate::platform::world_readable_permissions();
    write_atomic(&path, text.as_bytes(), permissions.as_ref()).with_context(|| {
        format!("cannot write {shown} (managed settings usually need root: try sudo)")
    })?;
    Ok(format!(
        "installed loopgate hooks as managed settings in {shown}"
    ))
}

/// The binary's file name in [`crate::platform::system_install_dir`].
pub fn system_bin_name() -> String {
    format!("loopgate{}", std::env::consts::EXE_SUFFIX)
}

/// Puts the hooks' binary where only the system's owner can change it, for managed settings,
/// and returns the path the hooks should run. `src` is used where it is when it already is such
/// a binary and no `dir` was asked for; otherwise it is copied into `dir` (default
/// [`crate::platform::system_install_dir`]), made `0755` in `0755` directories, and written
/// to a temporary file renamed into place, so a hook running at that moment is not disturbed.
/// Refuses when the result could still be replaced by someone else (a user-owned or
/// group-writable directory above it), naming the path and the owner.
pub fn install_system_copy(src: &Path, dir: Option<&Path>) -> Result<PathBuf> {
    use crate::platform::SystemOwned;
    if dir.is_none() && crate::platform::system_owned(src) == SystemOwned::Yes {
        return Ok(src.to_path_buf());
    }
    let dir = dir
        .map(Path::to_path_buf)
        .unwrap_or_else(crate::platform::system_install_dir);
    let dest = dir.join(system_bin_name());
    let refuse = |why: String| {
        anyhow::anyhow!(
            "{why}: the agent, running as a user, could replace the binary the managed hooks run. \
             Nothing installed; choose a directory only root can write with --install-dir DIR"
        )
    };
    let same = fs::canonicalize(src)
        .ok()
        .is_some_and(|s| Some(s) == fs::canonicalize(&dest).ok());
    crate::platform::create_shared_dir(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    if let SystemOwned::No(why) = crate::platform::system_owned(&dir) {
        return Err(refuse(why));
    }
    if !same {
        let mut tmp = tempfile::Builder::new()
            .prefix(".loopgate-")
            .suffix(".tmp")
            .tempfile_in(&dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        let mut from =
            fs::File::open(src).with_context(|| format!("cannot read {}", src.display()))?;
        io::copy(&mut from, tmp.as_file_mut())
            .with_context(|| format!("cannot copy {} to {}", src.display(), dir.display()))?;
        if let Some(permissions) = crate::platform::shared_executable_permissions() {
            tmp.as_file().set_permissions(permissions)?;
        }
        tmp.as_file().sync_all()?;
        tmp.persist(&dest)
            .map_err(|e| e.error)
            .with_context(|| format!("cannot write {}", dest.display()))?;
    }
    if let SystemOwned::No(why) = crate::platform::system_owned(&dest) {
        return Err(refuse(why));
    }
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "/opt/bin/loopgate";

    fn merged(mut settings: Value, prefix: &str) -> Value {
        merge(&mut settings, prefix).unwrap();
        settings
    }

    fn handler(command: &str) -> Value {
        json!({"type": "command", "command": command})
    }

    #[test]
    fn hook_block_has_every_event_with_a_timeout() {
        let block = hook_block(PREFIX);
        let block = block.as_object().unwrap();
        assert_eq!(block.len(), HOOKS.len());
        assert_eq!(
            block["PreToolUse"],
            json!([{"matcher": "*", "hooks": [
                {"type": "command", "command": "/opt/bin/loopgate pre-tool-use", "timeout": 10}
            ]}])
        );
        assert_eq!(
            block["Stop"],
            json!([{"hooks": [{"type": "command", "command": "/opt/bin/loopgate stop", "timeout": 10}]}])
        );
    }

    #[test]
    fn merge_into_empty_settings() {
        let mut settings = json!({});
        assert!(merge(&mut settings, PREFIX).unwrap());
        assert_eq!(settings, json!({"hooks": hook_block(PREFIX)}));
    }

    #[test]
    fn merge_keeps_other_keys_and_other_hooks_on_the_same_events() {
        let other_pre = json!({"matcher": "Bash", "hooks": [handler("guard.sh")]});
        let other_stop = json!({"hooks": [handler("notify-send done")]});
        let settings = json!({
            "model": "opus",
            "permissions": {"allow": ["Bash(ls:*)"]},
            "hooks": {
                "PreToolUse": [other_pre],
                "Stop": [other_stop],
                "SessionEnd": [{"hooks": [handler("echo bye")]}],
            },
        });
        let after = merged(settings.clone(), PREFIX);
        let ours = hook_block(PREFIX);
        assert_eq!(after["model"], "opus");
        assert_eq!(after["permissions"], settings["permissions"]);
        assert_eq!(
            after["hooks"]["SessionEnd"],
            settings["hooks"]["SessionEnd"]
        );
        assert_eq!(
            after["hooks"]["PreToolUse"],
            json!([other_pre, ours["PreToolUse"][0]])
        );
        assert_eq!(after["hooks"]["Stop"], json!([other_stop, ours["Stop"][0]]));
        assert_eq!(after["hooks"]["PostToolBatch"], ours["PostToolBatch"]);
    }

    #[test]
    fn merging_twice_is_merging_once() {
        let settings =
            json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [handler("guard.sh")]}]}});
        let once = merged(settings, PREFIX);
        let mut twice = once.clone();
        assert!(!merge(&mut twice, PREFIX).unwrap());
        assert_eq!(twice, once);
    }

    #[test]
    fn merge_replaces_older_loopgate_entries_in_place() {
        let settings = json!({"hooks": {
            "PreToolUse": [
                {"matcher": "*", "hooks": [
                    {"type": "command", "command": "/old/place/loopgate --observe pre-tool-use", "timeout": 5}
                ]},
                {"matcher": "Bash", "hooks": [handler("guard.sh")]},
            ],
            "Stop": [{"hooks": [handler("notify-send done"), handler("'/home/a b/bin/loopgate' stop")]}],
            "SessionEnd": [{"hooks": [handler("loopgate session-end")]}],
            "Notification": [{"hooks": [handler("LOOPGATE_X=1 loopgate notify")]}, {"hooks": [handler("beep")]}],
        }});
        let new_prefix = "/new/bin/loopgate --observe";
        let after = merged(settings, new_prefix);
        let ours = hook_block(new_prefix);
        // The replacement goes where the old entry was.
        assert_eq!(
            after["hooks"]["PreToolUse"],
            json!([ours["PreToolUse"][0], {"matcher": "Bash", "hooks": [handler("guard.sh")]}])
        );
        // A mixed group keeps its other handler; ours follows it.
        assert_eq!(
            after["hooks"]["Stop"],
            json!([{"hooks": [handler("notify-send done")]}, ours["Stop"][0]])
        );
        // Events loopgate no longer uses lose its entries, and the emptied array with them.
        assert!(after["hooks"].get("SessionEnd").is_none());
        assert_eq!(
            after["hooks"]["Notification"],
            json!([{"hooks": [handler("beep")]}])
        );
        assert!(!has_loopgate_hooks(
            &json!({"hooks": {"Notification": after["hooks"]["Notification"]}})
        ));
    }

    #[test]
    fn merge_rejects_malformed_shapes() {
        assert!(merge(&mut json!([]), PREFIX).is_err());
        assert!(merge(&mut json!({"hooks": []}), PREFIX).is_err());
        assert!(merge(&mut json!({"hooks": {"Stop": {}}}), PREFIX).is_err());
    }

    #[test]
    fn remove_leaves_other_hooks_intact() {
        let user = json!({
            "env": {"FOO": "1"},
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [handler("guard.sh")]}],
                "Stop": [{"hooks": [handler("notify-send done")]}],
            },
        });
        let mut settings = merged(user.clone(), PREFIX);
        assert!(remove(&mut settings).unwrap());
        assert_eq!(settings, user);
        assert!(!remove(&mut settings).unwrap());
    }

    #[test]
    fn remove_keeps_other_handlers_of_a_mixed_group() {
        let mut settings = json!({"hooks": {"Stop": [
            {"hooks": [handler("notify-send done"), handler("/x/loopgate stop")]}
        ]}});
        assert!(remove(&mut settings).unwrap());
        assert_eq!(
            settings,
            json!({"hooks": {"Stop": [{"hooks": [handler("notify-send done")]}]}})
        );
    }

    #[test]
    fn remove_drops_containers_it_empties_and_keeps_ones_already_empty() {
        let mut settings = merged(json!({"model": "opus"}), PREFIX);
        assert!(remove(&mut settings).unwrap());
        assert_eq!(settings, json!({"model": "opus"}));

        let mut settings = merged(json!({"hooks": {"Notification": []}}), PREFIX);
        assert!(remove(&mut settings).unwrap());
        assert_eq!(settings, json!({"hooks": {"Notification": []}}));

        let mut settings = json!({"hooks": {}});
        assert!(!remove(&mut settings).unwrap());
        assert_eq!(settings, json!({"hooks": {}}));
    }

    #[test]
    fn recognises_loopgate_commands_only() {
        for ours in [
            "loopgate stop",
            "/usr/local/bin/loopgate --observe pre-tool-use",
            "'/home/a b/.local/bin/loopgate' stop",
            r#""/home/a b/.local/bin/loopgate" stop"#,
            "LOOPGATE_MODE=observe loopgate stop",
            r#""${CLAUDE_PLUGIN_ROOT}/hooks/loopgate-hook" stop"#,
            r#"sh "${CLAUDE_PLUGIN_ROOT}/hooks/loopgate-hook" stop"#,
            "C:/tools/loopgate.exe stop",
        ] {
            assert!(is_loopgate_command(ours), "{ours}");
        }
        for theirs in [
            "",
            "notloopgate stop",
            "loopgate-helper stop",
            "/opt/loopgate/bin/guard stop",
            "echo loopgate",
            "sh -c 'loopgate stop'",
            "sh",
        ] {
            assert!(!is_loopgate_command(theirs), "{theirs}");
        }
    }

    #[test]
    fn command_prefix_quotes_paths_that_need_it() {
        let prefix = |p: &str, observe| command_prefix(Path::new(p), observe).unwrap();
        assert_eq!(prefix("/usr/bin/loopgate", false), "/usr/bin/loopgate");
        assert_eq!(
            prefix("/usr/bin/loopgate", true),
            "/usr/bin/loopgate --observe"
        );
        assert_eq!(
            prefix("/home/a b/it's/loopgate", false),
            r"'/home/a b/it'\''s/loopgate'"
        );
        let quoted = prefix("/home/a b/it's/loopgate", true);
        assert!(is_loopgate_command(&format!("{quoted} stop")));
        assert_eq!(
            shell_words(&format!("{quoted} stop"), 4),
            ["/home/a b/it's/loopgate", "--observe", "stop"]
        );
    }

    #[test]
    fn settings_example_is_the_hook_block_for_loopgate_on_path() {
        let example: Value =
            serde_json::from_str(include_str!("../../settings.example.json")).unwrap();
        assert_eq!(example, json!({"hooks": hook_block("loopgate")}));
    }

    #[test]
    fn plugin_hooks_json_matches_hooks() {
        let plugin: Value = serde_json::from_str(include_str!("../../hooks/hooks.json")).unwrap();
        assert!(plugin["description"].is_string());
        let hooks = plugin["hooks"].as_object().unwrap();
        assert_eq!(hooks.len(), HOOKS.len());
        for &(event, subcommand, _) in HOOKS {
            let command = hooks[event][0]["hooks"][0]["command"].as_str().unwrap();
            assert_eq!(command.rsplit(' ').next(), Some(subcommand), "{event}");
        }
        // The plugin's SessionStart may install the binary once (hooks/loopgate-hook): npm
        // needs longer than a hook call.
        let mut expected = hook_block(PLUGIN_COMMAND_PREFIX);
        expected["SessionStart"][0]["hooks"][0]["timeout"] = json!(120);
        assert_eq!(plugin["hooks"], expected);
        assert!(has_loopgate_hooks(&plugin));
    }

    #[test]
    fn plugin_manifest_does_not_list_the_hooks_file() {
        let manifest: Value =
            serde_json::from_str(include_str!("../../.claude-plugin/plugin.json")).unwrap();
        assert_eq!(manifest["name"], "loopgate");
        assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
        assert!(manifest.get("hooks").is_none());
    }

    mod run {
        use super::*;
        use tempfile::TempDir;

        fn setup() -> (TempDir, PathBuf) {
            let dir = TempDir::new().unwrap();
            let path = dir.path().join(".claude").join("settings.json");
            (dir, path)
        }

        fn read(path: &Path) -> Value {
            serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
        }

        #[test]
        fn creates_a_missing_file_and_records_there_was_none() {
            let (_dir, path) = setup();
            let summary = run(&path, PREFIX, false).unwrap();
            assert!(summary.starts_with("created "), "{summary}");
            assert_eq!(
                read(&path),
                json!({"hooks": hook_block(PREFIX), "statusLine": status_line(PREFIX)})
            );
            let all = backups(&path);
            assert_eq!(all.len(), 1);
            assert!(records_no_file(&all[0]), "{all:?}");
            let text = fs::read_to_string(&path).unwrap();
            assert!(text.starts_with("{\n  \"hooks\": {\n    \""), "{text}");
            assert!(text.ends_with("}\n"));
        }

        #[test]
        fn backs_up_changes_and_leaves_an_up_to_date_file_alone() {
            let (_dir, path) = setup();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let original = "{\"model\":\"opus\"}";
            fs::write(&path, original).unwrap();
            let newest = |path: &Path| fs::read_to_string(backups(path).last().unwrap()).unwrap();

            let summary = run(&path, PREFIX, false).unwrap();
            assert!(summary.starts_with("added "), "{summary}");
            assert!(summary.contains(".loopgate-bak."), "{summary}");
            assert_eq!(newest(&path), original);
            let installed = fs::read_to_string(&path).unwrap();

            let summary = run(&path, PREFIX, false).unwrap();
            assert!(summary.contains("already up to date"), "{summary}");
            assert_eq!(fs::read_to_string(&path).unwrap(), installed);
            assert_eq!(backups(&path).len(), 1, "no change, no backup");

            let summary = run(&path, "/elsewhere/loopgate", false).unwrap();
            assert!(summary.starts_with("updated "), "{summary}");
            assert_eq!(newest(&path), installed);
            assert_eq!(
                fs::read_to_string(&backups(&path)[0]).unwrap(),
                original,
                "the pre-loopgate settings stay"
            );

            let summary = run(&path, PREFIX, true).unwrap();
            assert!(summary.starts_with("removed "), "{summary}");
            assert_eq!(read(&path), json!({"model": "opus"}));
            let summary = run(&path, PREFIX, true).unwrap();
            assert!(summary.contains("nothing to remove"), "{summary}");
        }

        #[test]
        fn keeps_the_oldest_and_the_newest_backups_and_restores() {
            let (_dir, path) = setup();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let original = "{\"model\":\"opus\"}";
            fs::write(&path, original).unwrap();
            // Binaries that exist: restore refuses hooks that call one that is gone.
            for i in 0..10 {
                let bin = path.with_file_name(format!("bin{i}")).join("loopgate");
                fs::create_dir_all(bin.parent().unwrap()).unwrap();
                fs::write(&bin, "").unwrap();
                run(&path, bin.to_str().unwrap(), false).unwrap();
            }
            let all = backups(&path);
            assert_eq!(all.len(), KEEP_BACKUPS);
            assert_eq!(fs::read_to_string(&all[0]).unwrap(), original);
            let before = fs::read_to_string(&path).unwrap();
            let summary = restore(&path, None, None).unwrap();
            assert!(summary.starts_with("restored "), "{summary}");
            assert!(fs::read_to_string(&path).unwrap().contains("bin8/loopgate"));
            restore(&path, None, None).unwrap();
            assert_eq!(
                fs::read_to_string(&path).unwrap(),
                before,
                "twice undoes it"
            );
            restore(&path, Some(&backups(&path)[0]), None).unwrap();
            assert_eq!(fs::read_to_string(&path).unwrap(), original);
            let (_d2, empty) = setup();
            assert!(restore(&empty, None, None)
                .unwrap_err()
                .to_string()
                .contains("no loopgate backup"));
        }

        #[test]
        fn uninstall_does_not_create_a_missing_file() {
            let (_dir, path) = setup();
            let summary = run(&path, PREFIX, true).unwrap();
            assert!(summary.contains("does not exist"), "{summary}");
            assert!(!path.exists());
        }

        #[test]
        fn invalid_json_is_an_error_and_the_file_stays_untouched() {
            let (_dir, path) = setup();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            for bad in ["{\"hooks\": {", "[1, 2]", "// comment\n{}"] {
                fs::write(&path, bad).unwrap();
                for uninstall in [false, true] {
                    let err = run(&path, PREFIX, uninstall).unwrap_err();
                    assert!(
                        format!("{err:#}").contains("not valid settings JSON"),
                        "{err:#}"
                    );
                    assert_eq!(fs::read_to_string(&path).unwrap(), bad);
                    assert!(backups(&path).is_empty());
                }
            }
            let dir_entries = fs::read_dir(path.parent().unwrap()).unwrap().count();
            assert_eq!(dir_entries, 1, "no temporary files are left behind");
        }

        #[test]
        fn the_status_line_is_offered_only_where_there_is_none() {
            let (_dir, path) = setup();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let theirs = json!({"type": "command", "command": "~/bin/my-line"});
            fs::write(&path, json!({"statusLine": theirs}).to_string()).unwrap();
            let summary = run(&path, PREFIX, false).unwrap();
            assert_eq!(
                read(&path)["statusLine"],
                theirs,
                "someone else's line is kept"
            );
            assert!(summary.contains("your statusLine is kept"), "{summary}");
            run(&path, PREFIX, true).unwrap();
            assert_eq!(
                read(&path)["statusLine"],
                theirs,
                "and not taken by uninstall"
            );

            fs::write(&path, "{}").unwrap();
            run(&path, &format!("{PREFIX} --observe"), false).unwrap();
            assert_eq!(
                read(&path)["statusLine"]["command"],
                format!("{PREFIX} statusline"),
                "where there was none, it is added (reading needs no observe mode)"
            );
            run(&path, PREFIX, true).unwrap();
            assert_eq!(
                read(&path).get("statusLine"),
                None,
                "uninstall takes its own back"
            );
        }

        #[test]
        fn an_empty_file_counts_as_empty_settings() {
            let (_dir, path) = setup();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "\n").unwrap();
            run(&path, PREFIX, false).unwrap();
            assert_eq!(
                read(&path),
                json!({"hooks": hook_block(PREFIX), "statusLine": status_line(PREFIX)})
            );
        }

        #[test]
        fn preserves_key_order() {
            let (_dir, path) = setup();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let original = r#"{"zeta": 1, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "b", "timeout": 3}]}], "Notification": []}, "alpha": {"y": 1, "x": 2}}"#;
            fs::write(&path, original).unwrap();
            run(&path, PREFIX, false).unwrap();
            run(&path, PREFIX, true).unwrap();
            let text = fs::read_to_string(&path).unwrap();
            assert_eq!(
                text.replace(char::is_whitespace, ""),
                original.replace(char::is_whitespace, ""),
                "key order changed: serde_json needs its \"preserve_order\" feature"
            );
        }

        #[cfg(unix)]
        #[test]
        fn keeps_permissions_and_symlinks() {
            use std::os::unix::fs::{symlink, PermissionsExt};
            let (dir, path) = setup();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let real = dir.path().join("dotfiles-settings.json");
            fs::write(&real, "{}").unwrap();
            fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
            symlink(&real, &path).unwrap();

            run(&path, PREFIX, false).unwrap();
            assert!(fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink());
            assert_eq!(
                read(&real),
                json!({"hooks": hook_block(PREFIX), "statusLine": status_line(PREFIX)})
            );
            let mode = fs::metadata(&real).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o640);
            assert!(backups(&path)[0].is_file());
        }
    }

    #[test]
    fn managed_drop_in_holds_only_loopgates_hooks() {
        let d = tempfile::tempdir().unwrap();
        let msg = run_managed(d.path(), PREFIX, false).unwrap();
        assert!(msg.starts_with("installed"), "{msg}");
        let path = d.path().join("managed-settings.d").join(MANAGED_FILE);
        let v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v, json!({ "hooks": hook_block(PREFIX) }));
        assert!(has_loopgate_hooks(&v));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o644
            );
        }
        assert!(run_managed(d.path(), PREFIX, false)
            .unwrap()
            .contains("up to date"));
        assert!(run_managed(d.path(), PREFIX, true)
            .unwrap()
            .starts_with("removed"));
        assert!(!path.exists());
        assert!(run_managed(d.path(), PREFIX, true)
            .unwrap()
            .contains("nothing to remove"));
    }
}
