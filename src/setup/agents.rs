//! `loopgate setup --agent <cli>` for the agent CLIs other than Claude Code: each CLI's hook file
//! in its own shape (`../shared/agents/<cli>/hooks-observed.md`), edited by the Claude Code
//! route's merge, remove, backup and restore code, plus Codex's hook-trust step.
//!
//! Codex runs a hook from a non-managed file only when `config.toml` holds
//! `[hooks.state."<key>"] trusted_hash = "<hash>"` for it, and skips it silently otherwise. The
//! key is `<absolute hooks.json path>:<event label>:<group index>:<handler index>`; the hash is
//! Codex's `version_for_toml` of the hook's normalised identity: the sha256 of the compact JSON,
//! keys sorted, of `{"event_name", "matcher" (none for Stop and UserPromptSubmit), "hooks":
//! [{"type": "command", "command", "timeout" (600 when unset), "async", "statusMessage"}]}`
//! (`codex-rs/hooks/src/engine/discovery.rs`, `codex-rs/config/src/fingerprint.rs`). Checked
//! against what `codex app-server`'s `hooks/list` reports for loopgate's hooks in Codex 0.169.0.

use super::{Format, HOOK_TIMEOUT_SECS};
use crate::protocol::dialect::Agent;
use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Codex CLI: Claude Code's event names (it has no PostToolUseFailure or PostToolBatch).
const CODEX_HOOKS: &[(&str, &str, bool)] = &[
    ("PreToolUse", "pre-tool-use", true),
    ("PostToolUse", "post-tool-use", true),
    ("Stop", "stop", false),
    ("SubagentStop", "subagent-stop", false),
    ("UserPromptSubmit", "user-prompt-submit", false),
];

/// Gemini CLI: its own event names.
const GEMINI_HOOKS: &[(&str, &str, bool)] = &[
    ("BeforeTool", "pre-tool-use", true),
    ("AfterTool", "post-tool-use", true),
    ("AfterAgent", "stop", false),
    ("BeforeAgent", "user-prompt-submit", false),
];

/// Qwen Code: Claude Code's names, with a failure event.
const QWEN_HOOKS: &[(&str, &str, bool)] = &[
    ("PreToolUse", "pre-tool-use", true),
    ("PostToolUse", "post-tool-use", true),
    ("PostToolUseFailure", "post-tool-use-failure", true),
    ("Stop", "stop", false),
    ("SubagentStop", "subagent-stop", false),
    ("UserPromptSubmit", "user-prompt-submit", false),
];

/// Copilot CLI: the native camelCase names (no matchers in its flat shape).
const COPILOT_HOOKS: &[(&str, &str, bool)] = &[
    ("preToolUse", "pre-tool-use", false),
    ("postToolUse", "post-tool-use", false),
    ("postToolUseFailure", "post-tool-use-failure", false),
    ("agentStop", "stop", false),
    ("subagentStop", "subagent-stop", false),
    ("userPromptSubmitted", "user-prompt-submit", false),
    // The one answer that ends a Copilot run mid-turn (`dialect::TurnEnd::Permission`).
    ("permissionRequest", "permission-request", false),
];

/// The hook file shape of `agent`.
pub fn format(agent: Agent) -> Format {
    let (hooks, timeout, flat) = match agent {
        // The plugin agents have no hook file; Claude Code's list of events stands for theirs.
        Agent::Claude | Agent::OpenCode | Agent::Kilo => return super::CLAUDE,
        Agent::Codex => (CODEX_HOOKS, HOOK_TIMEOUT_SECS, false),
        // Gemini CLI counts hook timeouts in milliseconds.
        Agent::Gemini => (GEMINI_HOOKS, HOOK_TIMEOUT_SECS * 1000, false),
        Agent::Qwen => (QWEN_HOOKS, HOOK_TIMEOUT_SECS, false),
        Agent::Copilot => (COPILOT_HOOKS, HOOK_TIMEOUT_SECS, true),
    };
    Format {
        hooks,
        timeout,
        flat,
        status_line: false,
        pinned: &[],
    }
}

/// The command prefix for `agent`'s hook file: `<bin> [--observe] --agent <cli>` (Claude Code's
/// has no `--agent`: it is the default dialect).
pub fn command_prefix(bin: &Path, observe: bool, agent: Agent) -> Result<String> {
    let mut prefix = super::command_prefix(bin, observe)?;
    if agent != Agent::Claude {
        prefix.push_str(" --agent ");
        prefix.push_str(agent.name());
    }
    Ok(prefix)
}

/// What `setup --agent` did, and what the user must still do.
#[derive(Debug, Default)]
pub struct Outcome {
    pub summary: String,
    pub notes: Vec<String>,
}

/// Adds (or with `uninstall`, removes) loopgate's hooks in `agent`'s hook file at `path`, as
/// [`super::run`] does for Claude Code. For Codex it then trusts the hooks it wrote (or drops the
/// trust of the ones it removed) in `codex_config`, Codex's user `config.toml`.
/// `user_file` is the CLI's default user-level file: another file is taken as a project's, and
/// the notes say what that CLI needs before it runs project hooks.
pub fn run(
    agent: Agent,
    path: &Path,
    command_prefix: &str,
    uninstall: bool,
    user_file: Option<&Path>,
    codex_config: Option<&Path>,
) -> Result<Outcome> {
    let stale = if agent == Agent::Codex {
        codex_hooks_in(path)?
    } else {
        Vec::new()
    };
    let mut out = Outcome {
        summary: super::run_as(path, command_prefix, uninstall, &format(agent))?,
        notes: Vec::new(),
    };
    if agent == Agent::Codex {
        let config = codex_config.context(
            "no Codex config.toml to record the hooks' trust in (set CODEX_HOME or HOME)",
        )?;
        if let Some(trust) = sync_codex_trust(path, config, &stale)? {
            out.summary.push_str("; ");
            out.summary.push_str(&trust);
        }
    }
    let project = user_file.is_none_or(|user| {
        crate::config::paths::lexical(user) != crate::config::paths::lexical(path)
    });
    if !uninstall && project {
        out.notes.extend(project_note(agent, path));
    }
    Ok(out)
}

/// What a CLI needs before it runs hooks from a project's file.
fn project_note(agent: Agent, path: &Path) -> Option<String> {
    let shown = path.display();
    Some(match agent {
        Agent::Claude | Agent::Qwen | Agent::OpenCode | Agent::Kilo => return None,
        Agent::Codex => format!(
            "Codex reads {shown} only in a trusted project (`codex exec --trust`, or trust it when the TUI asks)"
        ),
        Agent::Gemini => format!(
            "Gemini CLI runs project hooks ({shown}) only with GEMINI_CLI_TRUST_WORKSPACE=true (--skip-trust is not enough)"
        ),
        Agent::Copilot => format!(
            "Copilot CLI runs project hooks ({shown}) only in a trusted folder (copilot --trust-folder)"
        ),
    })
}

/// Restores `agent`'s hook file from a backup; for Codex the hooks' trust is then brought in
/// line with the restored file.
pub fn restore(
    agent: Agent,
    path: &Path,
    backup: Option<&Path>,
    uninstalled: Option<&Path>,
    codex_config: Option<&Path>,
) -> Result<String> {
    let stale = if agent == Agent::Codex {
        codex_hooks_in(path).unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut summary = super::restore(path, backup, uninstalled)?;
    if let (Agent::Codex, Some(config)) = (agent, codex_config) {
        if let Some(trust) = sync_codex_trust(path, config, &stale)? {
            summary.push_str("; ");
            summary.push_str(&trust);
        }
    }
    Ok(summary)
}

/// One loopgate hook in a Codex `hooks.json`, with the trust key and hash Codex gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexHook {
    pub event: String,
    pub command: String,
    pub key: String,
    pub hash: String,
}

/// The loopgate hooks in the Codex hook file at `path` (none when it does not exist).
pub fn codex_hooks_in(path: &Path) -> Result<Vec<CodexHook>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    let settings = super::parse_settings(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    Ok(codex_hooks(path, &settings))
}

/// The loopgate hooks in a parsed Codex hook file that lives at `path`.
pub fn codex_hooks(path: &Path, settings: &Value) -> Vec<CodexHook> {
    let source = codex_key_source(path);
    let mut out = Vec::new();
    let Some(events) = settings.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in events {
        let label = codex_event_label(event);
        for (group_index, group) in groups.as_array().into_iter().flatten().enumerate() {
            let matcher = group.get("matcher").and_then(Value::as_str);
            let handlers = group.get("hooks").and_then(Value::as_array);
            for (handler_index, handler) in handlers.into_iter().flatten().enumerate() {
                let Some(command) = super::handler_command(handler) else {
                    continue;
                };
                if !super::is_loopgate_command(command) {
                    continue;
                }
                out.push(CodexHook {
                    event: event.clone(),
                    command: command.to_owned(),
                    key: format!("{source}:{label}:{group_index}:{handler_index}"),
                    hash: codex_hook_hash(&label, matcher, handler),
                });
            }
        }
    }
    out
}

/// The absolute path Codex names a hook file by in its trust keys.
fn codex_key_source(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    crate::config::paths::lexical(&absolute)
        .display()
        .to_string()
}

/// Codex's label for an event in trust keys and hashes: `PreToolUse` → `pre_tool_use`.
pub fn codex_event_label(event: &str) -> String {
    let mut label = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                label.push('_');
            }
            label.push(c.to_ascii_lowercase());
        } else {
            label.push(c);
        }
    }
    label
}

/// The hash Codex records as a command hook's `trusted_hash` (see the module docs).
pub fn codex_hook_hash(label: &str, matcher: Option<&str>, handler: &Value) -> String {
    use sha2::{Digest, Sha256};
    let timeout = handler.get("timeout").and_then(Value::as_u64);
    let timeout = if label == "session_end" {
        timeout.unwrap_or(1).clamp(1, 3)
    } else {
        timeout.unwrap_or(600).max(1)
    };
    // Keys in sorted order: serde_json keeps insertion order here ("preserve_order").
    let mut normalized = Map::new();
    normalized.insert(
        "async".into(),
        json!(handler
            .get("async")
            .and_then(Value::as_bool)
            .unwrap_or(false)),
    );
    normalized.insert(
        "command".into(),
        json!(super::handler_command(handler).unwrap_or("")),
    );
    if let Some(message) = handler.get("statusMessage").and_then(Value::as_str) {
        normalized.insert("statusMessage".into(), json!(message));
    }
    normalized.insert("timeout".into(), json!(timeout));
    normalized.insert("type".into(), json!("command"));
    let mut identity = Map::new();
    identity.insert("event_name".into(), json!(label));
    identity.insert("hooks".into(), json!([normalized]));
    let matcher = matcher.filter(|_| !matches!(label, "stop" | "user_prompt_submit"));
    if let Some(matcher) = matcher {
        identity.insert("matcher".into(), json!(matcher));
    }
    let bytes = serde_json::to_vec(&Value::Object(identity)).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Brings `[hooks.state]` in Codex's `config.toml` in line with the loopgate hooks now in
/// `hooks_path`: each gets `trusted_hash` = its hash; the entries of `stale` (the loopgate hooks
/// the file held before) that no longer name one are removed. Every other table, key and comment
/// is kept; the previous contents are backed up. Returns a summary, or `None` when nothing
/// changed.
pub fn sync_codex_trust(
    hooks_path: &Path,
    config: &Path,
    stale: &[CodexHook],
) -> Result<Option<String>> {
    let current = codex_hooks_in(hooks_path)?;
    let shown = config.display();
    let target = super::resolve_symlink(config);
    let original = match fs::read_to_string(&target) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(err).with_context(|| format!("cannot read {shown}")),
    };
    let mut doc: toml_edit::DocumentMut =
        original.as_deref().unwrap_or("").parse().with_context(|| {
            format!("{shown} is not valid TOML; fix it by hand, then try again")
        })?;

    let (trusted, untrusted) = edit_trust(&mut doc, &current, stale)
        .with_context(|| format!("cannot record hook trust in {shown}"))?;
    if trusted == 0 && untrusted == 0 {
        return Ok(None);
    }
    let mut text = doc.to_string();
    if untrusted > 0 && super::leftovers::was_created(config) && text.trim().is_empty() {
        // All that was left is what loopgate made: the file goes, as it was not there before.
        fs::remove_file(&target).with_context(|| format!("cannot remove {shown}"))?;
        return Ok(Some(format!(
            "removed {shown}, which held only the hooks' trust"
        )));
    }
    if let Some(theirs) = super::leftovers::before_setup(config) {
        let same = |t: &str| t.parse::<toml::Table>().ok();
        if untrusted > 0 && same(&theirs).is_some() && same(&theirs) == same(&text) {
            text = theirs; // the person's bytes, not a re-printing of them
        }
    }
    let permissions = fs::metadata(&target).ok().map(|meta| meta.permissions());
    if let Some(text) = &original {
        let backup = super::backup_path(config);
        super::write_atomic(&backup, text.as_bytes(), permissions.as_ref())
            .with_context(|| format!("cannot write the backup {}", backup.display()))?;
        super::prune_backups(config);
    }
    let created_dirs = super::leftovers::missing_dirs(&target);
    super::write_atomic(&target, text.as_bytes(), permissions.as_ref())
        .with_context(|| format!("cannot write {shown}"))?;
    if original.is_none() {
        super::leftovers::mark_created(config, &created_dirs)?;
    }
    let mut said = Vec::new();
    if trusted > 0 {
        said.push(format!(
            "trusted {trusted} hook{} in {shown}",
            plural(trusted)
        ));
    }
    if untrusted > 0 {
        said.push(format!(
            "removed the trust of {untrusted} hook{} from {shown}",
            plural(untrusted)
        ));
    }
    Ok(Some(said.join("; ")))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The `[hooks.state]` edit of [`sync_codex_trust`]: returns how many entries it set and how
/// many it removed.
fn edit_trust(
    doc: &mut toml_edit::DocumentMut,
    current: &[CodexHook],
    stale: &[CodexHook],
) -> Result<(usize, usize)> {
    use toml_edit::{value, Item, Table};
    let implicit = || {
        let mut table = Table::new();
        table.set_implicit(true);
        Item::Table(table)
    };
    let hooks_existed = doc.contains_key("hooks");
    let Some(hooks) = doc.entry("hooks").or_insert_with(implicit).as_table_mut() else {
        bail!("\"hooks\" is not a table; fix it by hand, then try again");
    };
    let state_existed = hooks.contains_key("state");
    let Some(state) = hooks.entry("state").or_insert_with(implicit).as_table_mut() else {
        bail!("\"hooks.state\" is not a table; fix it by hand, then try again");
    };
    let mut untrusted = 0;
    for old in stale {
        if current.iter().any(|hook| hook.key == old.key) {
            continue;
        }
        if let Some(Item::Table(entry)) = state.get_mut(&old.key) {
            if entry.remove("trusted_hash").is_some() {
                untrusted += 1;
            }
            if entry.is_empty() {
                state.remove(&old.key);
            }
        }
    }
    let mut trusted = 0;
    for hook in current {
        let Some(entry) = state
            .entry(&hook.key)
            .or_insert_with(|| Item::Table(Table::new()))
            .as_table_mut()
        else {
            bail!("\"hooks.state\".\"{}\" is not a table", hook.key);
        };
        if entry.get("trusted_hash").and_then(Item::as_str) != Some(hook.hash.as_str()) {
            entry.insert("trusted_hash", value(hook.hash.as_str()));
            trusted += 1;
        }
    }
    // Tables this edit created and left empty go again.
    if state.is_empty() && !state_existed {
        hooks.remove("state");
    }
    if hooks.is_empty() && !hooks_existed {
        doc.remove("hooks");
    }
    if untrusted > 0 {
        if let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_mut) {
            if hooks
                .get("state")
                .and_then(Item::as_table)
                .is_some_and(Table::is_empty)
            {
                hooks.remove("state");
            }
            if hooks.is_empty() {
                doc.remove("hooks");
            }
        }
    }
    Ok((trusted, untrusted))
}

/// Codex's user `config.toml`.
pub fn codex_config_file() -> Option<PathBuf> {
    crate::config::paths::agent_config_dir(Agent::Codex).map(|dir| dir.join("config.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::{backups, hook_block_as, merge_as, remove, run_as};
    use serde_json::json;

    const BIN: &str = "/usr/bin/loopgate";

    fn prefix(agent: Agent) -> String {
        command_prefix(Path::new(BIN), false, agent).unwrap()
    }

    fn handler(command: &str) -> Value {
        json!({"type": "command", "command": command, "timeout": 3})
    }

    #[test]
    fn the_hook_commands_follow_the_contract() {
        assert_eq!(prefix(Agent::Claude), BIN);
        assert_eq!(prefix(Agent::Codex), "/usr/bin/loopgate --agent codex");
        assert_eq!(
            command_prefix(Path::new(BIN), true, Agent::Gemini).unwrap(),
            "/usr/bin/loopgate --observe --agent gemini"
        );
        assert_eq!(
            crate::setup::command_agent("'/a b/loopgate' --observe --agent qwen stop").as_deref(),
            Some("qwen")
        );
        assert_eq!(crate::setup::command_agent("loopgate stop"), None);
    }

    #[test]
    fn each_cli_gets_its_own_shape() {
        let codex = hook_block_as(&prefix(Agent::Codex), &format(Agent::Codex));
        assert_eq!(
            codex["PreToolUse"],
            json!([{"matcher": "*", "hooks": [{"type": "command", "command": "/usr/bin/loopgate --agent codex pre-tool-use", "timeout": 10}]}])
        );
        assert_eq!(
            codex["Stop"],
            json!([{"hooks": [{"type": "command", "command": "/usr/bin/loopgate --agent codex stop", "timeout": 10}]}])
        );
        // Codex takes an integer timeout only.
        assert!(codex["Stop"][0]["hooks"][0]["timeout"].is_u64());
        let events = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            events(&codex),
            [
                "PreToolUse",
                "PostToolUse",
                "Stop",
                "SubagentStop",
                "UserPromptSubmit"
            ]
        );

        let gemini = hook_block_as(&prefix(Agent::Gemini), &format(Agent::Gemini));
        assert_eq!(
            events(&gemini),
            ["BeforeTool", "AfterTool", "AfterAgent", "BeforeAgent"]
        );
        // Milliseconds.
        assert_eq!(gemini["BeforeTool"][0]["hooks"][0]["timeout"], 10000);
        assert_eq!(gemini["BeforeTool"][0]["matcher"], "*");
        assert!(gemini["AfterAgent"][0].get("matcher").is_none());
        assert_eq!(
            gemini["AfterAgent"][0]["hooks"][0]["command"],
            "/usr/bin/loopgate --agent gemini stop"
        );

        let qwen = hook_block_as(&prefix(Agent::Qwen), &format(Agent::Qwen));
        assert_eq!(
            events(&qwen),
            [
                "PreToolUse",
                "PostToolUse",
                "PostToolUseFailure",
                "Stop",
                "SubagentStop",
                "UserPromptSubmit"
            ]
        );
        assert_eq!(qwen["PostToolUseFailure"][0]["hooks"][0]["timeout"], 10);

        let copilot = hook_block_as(&prefix(Agent::Copilot), &format(Agent::Copilot));
        assert_eq!(
            events(&copilot),
            [
                "preToolUse",
                "postToolUse",
                "postToolUseFailure",
                "agentStop",
                "subagentStop",
                "userPromptSubmitted",
                "permissionRequest"
            ]
        );
        assert_eq!(
            copilot["agentStop"],
            json!([{"type": "command", "bash": "/usr/bin/loopgate --agent copilot stop", "timeoutSec": 10}])
        );
    }

    #[test]
    fn merge_keeps_foreign_hooks_and_keys_is_idempotent_and_uninstall_restores() {
        for agent in [Agent::Codex, Agent::Gemini, Agent::Qwen, Agent::Copilot] {
            let f = format(agent);
            let (first_event, ..) = f.hooks[0];
            let foreign = if f.flat {
                json!({"type": "command", "bash": "audit.sh", "timeoutSec": 5})
            } else {
                json!({"matcher": "Bash", "hooks": [handler("audit.sh")]})
            };
            let user = json!({
                "model": "x",
                "hooks": {first_event: [foreign.clone()], "SessionStart": [{"hooks": [handler("hi.sh")]}]},
            });
            let mut settings = user.clone();
            assert!(
                merge_as(&mut settings, &prefix(agent), &f).unwrap(),
                "{agent:?}"
            );
            assert_eq!(settings["model"], "x");
            assert_eq!(
                settings["hooks"]["SessionStart"],
                user["hooks"]["SessionStart"]
            );
            assert_eq!(settings["hooks"][first_event][0], foreign, "{agent:?}");
            let ours = hook_block_as(&prefix(agent), &f);
            assert_eq!(settings["hooks"][first_event][1], ours[first_event][0]);
            for &(event, ..) in f.hooks {
                assert_eq!(
                    settings["hooks"][event].as_array().unwrap().last(),
                    ours[event].as_array().unwrap().last(),
                    "{agent:?} {event}"
                );
            }
            let once = settings.clone();
            assert!(!merge_as(&mut settings, &prefix(agent), &f).unwrap());
            assert_eq!(settings, once);
            // Another binary: replaced in place, not added.
            let mut moved = once.clone();
            let other = command_prefix(Path::new("/opt/loopgate"), true, agent).unwrap();
            assert!(merge_as(&mut moved, &other, &f).unwrap());
            assert_eq!(moved["hooks"][first_event].as_array().unwrap().len(), 2);
            assert!(remove(&mut settings).unwrap());
            assert_eq!(settings, user, "{agent:?}");
        }
    }

    fn setup_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path().join(".codex").join("hooks.json");
        let config = dir.path().join(".codex").join("config.toml");
        (dir, hooks, config)
    }

    #[test]
    fn the_copilot_file_has_version_1_and_goes_when_only_loopgate_was_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hooks").join("loopgate.json");
        let f = format(Agent::Copilot);
        run_as(&path, &prefix(Agent::Copilot), false, &f).unwrap();
        let v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v.as_object().unwrap().keys().next().unwrap(), "version");
        assert_eq!(
            v,
            json!({"version": 1, "hooks": hook_block_as(&prefix(Agent::Copilot), &f)})
        );
        let summary = run_as(&path, &prefix(Agent::Copilot), true, &f).unwrap();
        assert!(summary.contains("held only loopgate's hooks"), "{summary}");
        assert!(!path.exists());
        assert_eq!(
            backups(&path).len(),
            1,
            "only \"no file\" before setup: an uninstall keeps its copy in the state dir"
        );

        // A hand-added hook of someone else's keeps the file.
        fs::write(
            &path,
            r#"{"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "audit.sh"}]}}"#,
        )
        .unwrap();
        run_as(&path, &prefix(Agent::Copilot), false, &f).unwrap();
        run_as(&path, &prefix(Agent::Copilot), true, &f).unwrap();
        let v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "audit.sh"}]}})
        );
    }

    /// What `codex app-server` `hooks/list` reported as `currentHash` (Codex 0.169.0) for these
    /// hooks in a `hooks.json`.
    #[test]
    fn the_codex_hash_is_the_one_codex_computes() {
        let block = hook_block_as(&prefix(Agent::Codex), &format(Agent::Codex));
        let hash = |event: &str| {
            let group = &block[event][0];
            codex_hook_hash(
                &codex_event_label(event),
                group.get("matcher").and_then(Value::as_str),
                &group["hooks"][0],
            )
        };
        for (event, expected) in [
            (
                "PreToolUse",
                "sha256:b5d09a826e3b778a9d2d179b517be73334c6d7c0aff97f2622a81fa6ad7cbf2f",
            ),
            (
                "PostToolUse",
                "sha256:df1c5b790023b33000ee053d60719c0d9cc37b52ad52669ddc3e2b95667cc2b3",
            ),
            (
                "UserPromptSubmit",
                "sha256:fb52324823ac9793a19a21ffa4d276ad72c9532e05d81404e77a139193df017a",
            ),
            (
                "SubagentStop",
                "sha256:f882d249628fdcc522c6d7a12ff862a04a8cd85ac328ab8e1cfe97779f457548",
            ),
            (
                "Stop",
                "sha256:699535bba7a949e46e1fc6d485b70f6b103603ea27998df45f7dfe80d83d44ec",
            ),
        ] {
            assert_eq!(hash(event), expected, "{event}");
        }
        assert_eq!(codex_event_label("UserPromptSubmit"), "user_prompt_submit");
        // The matcher is part of the hash, except where Codex ignores it.
        let h = &block["PreToolUse"][0]["hooks"][0];
        assert_ne!(
            codex_hook_hash("pre_tool_use", Some("*"), h),
            codex_hook_hash("pre_tool_use", None, h)
        );
        assert_eq!(
            codex_hook_hash("stop", Some("*"), h),
            codex_hook_hash("stop", None, h)
        );
    }

    #[test]
    fn codex_trust_is_written_kept_in_line_and_removed_leaving_the_rest_of_config_toml() {
        let (dir, hooks, config) = setup_dir();
        fs::create_dir_all(hooks.parent().unwrap()).unwrap();
        let mine = "# my settings\nmodel = \"gpt-5.5\"  # keep\n\n[hooks.state.\"/elsewhere/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:abc\"\n";
        fs::write(&config, mine).unwrap();
        // A foreign PreToolUse group first: loopgate's is the second group there.
        fs::write(&hooks, r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]}}"#).unwrap();
        let user = Some(hooks.as_path());
        let out = run(
            Agent::Codex,
            &hooks,
            &prefix(Agent::Codex),
            false,
            user,
            Some(&config),
        )
        .unwrap();
        assert!(
            out.summary.contains("trusted 5 hooks in"),
            "{}",
            out.summary
        );
        assert!(out.notes.is_empty(), "the user file needs no project trust");
        let text = fs::read_to_string(&config).unwrap();
        assert!(text.starts_with(mine), "{text}");
        let table: toml::Table = text.parse().unwrap();
        let state = table["hooks"]["state"].as_table().unwrap();
        let ours = codex_hooks_in(&hooks).unwrap();
        assert_eq!(ours.len(), 5);
        let source = crate::config::paths::lexical(&std::path::absolute(&hooks).unwrap());
        let pre = ours.iter().find(|h| h.event == "PreToolUse").unwrap();
        assert_eq!(pre.key, format!("{}:pre_tool_use:1:0", source.display()));
        for hook in &ours {
            assert_eq!(
                state[&hook.key]["trusted_hash"].as_str(),
                Some(hook.hash.as_str())
            );
        }
        assert_eq!(backups(&config).len(), 1);
        let _ = dir;

        // Nothing changes: nothing written.
        let out = run(
            Agent::Codex,
            &hooks,
            &prefix(Agent::Codex),
            false,
            user,
            Some(&config),
        )
        .unwrap();
        assert!(
            out.summary.contains("already up to date") && !out.summary.contains("trusted"),
            "{}",
            out.summary
        );
        assert_eq!(backups(&config).len(), 1);

        // Another command: the hash follows.
        let other = command_prefix(Path::new("/opt/loopgate"), true, Agent::Codex).unwrap();
        let out = run(Agent::Codex, &hooks, &other, false, user, Some(&config)).unwrap();
        assert!(out.summary.contains("trusted 5 hooks"), "{}", out.summary);
        let table: toml::Table = fs::read_to_string(&config).unwrap().parse().unwrap();
        for hook in codex_hooks_in(&hooks).unwrap() {
            assert_eq!(
                table["hooks"]["state"][&hook.key]["trusted_hash"].as_str(),
                Some(hook.hash.as_str())
            );
        }

        // Uninstall: the trust goes, the rest stays as it was.
        let out = run(Agent::Codex, &hooks, &other, true, user, Some(&config)).unwrap();
        assert!(
            out.summary.contains("removed the trust of 5 hooks"),
            "{}",
            out.summary
        );
        assert_eq!(fs::read_to_string(&config).unwrap(), mine);
    }

    #[test]
    fn restoring_a_codex_file_brings_its_trust_along() {
        let (dir, hooks, config) = setup_dir();
        let user = Some(hooks.as_path());
        // A binary that exists: restore refuses hooks that call one that is gone.
        let bin = dir.path().join("loopgate");
        fs::write(&bin, "").unwrap();
        let prefix = command_prefix(&bin, false, Agent::Codex).unwrap();
        run(Agent::Codex, &hooks, &prefix, false, user, Some(&config)).unwrap();
        let wired = fs::read_to_string(&hooks).unwrap();
        run(Agent::Codex, &hooks, &prefix, true, user, Some(&config)).unwrap();
        assert!(!config.exists(), "it held only the trust loopgate wrote");
        crate::setup::leftovers::clear(&hooks);
        let kept = crate::setup::leftovers::save_for_restore(dir.path(), &hooks, &wired).unwrap();
        let summary = restore(Agent::Codex, &hooks, None, Some(&kept), Some(&config)).unwrap();
        assert!(summary.contains("trusted 5 hooks"), "{summary}");
        let table: toml::Table = fs::read_to_string(&config).unwrap().parse().unwrap();
        assert_eq!(table["hooks"]["state"].as_table().unwrap().len(), 5);
    }

    #[test]
    fn a_config_toml_that_does_not_parse_is_left_alone() {
        let (_dir, hooks, config) = setup_dir();
        fs::create_dir_all(config.parent().unwrap()).unwrap();
        fs::write(&config, "model = \n").unwrap();
        let err = run(
            Agent::Codex,
            &hooks,
            &prefix(Agent::Codex),
            false,
            None,
            Some(&config),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("is not valid TOML"), "{err:#}");
        assert_eq!(fs::read_to_string(&config).unwrap(), "model = \n");
    }

    #[test]
    fn a_project_file_says_what_the_cli_needs_to_run_it() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("home/.gemini/settings.json");
        let project = dir.path().join("proj/.gemini/settings.json");
        let out = run(
            Agent::Gemini,
            &project,
            &prefix(Agent::Gemini),
            false,
            Some(&user),
            None,
        )
        .unwrap();
        assert!(
            out.notes[0].contains("GEMINI_CLI_TRUST_WORKSPACE=true"),
            "{:?}",
            out.notes
        );
        let out = run(
            Agent::Gemini,
            &user,
            &prefix(Agent::Gemini),
            false,
            Some(&user),
            None,
        )
        .unwrap();
        assert!(out.notes.is_empty());
        let copilot = dir.path().join("proj/.github/hooks/loopgate.json");
        let out = run(
            Agent::Copilot,
            &copilot,
            &prefix(Agent::Copilot),
            false,
            None,
            None,
        )
        .unwrap();
        assert!(out.notes[0].contains("--trust-folder"), "{:?}", out.notes);
    }
}
