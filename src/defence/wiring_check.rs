//! Loopgate's wiring in the hook files of the CLIs that have no blockable `ConfigChange` (Codex,
//! Gemini, Qwen, Copilot). `loopgate doctor` reads one user-level file with [`inspect`]; a
//! session's first judged call reads the user- and project-level files the same way
//! ([`session_notice`]) and tells the person when loopgate's wiring is no longer whole: an event
//! unwired, hooks switched off, loopgate's environment overridden, Codex's trust dropped. An agent
//! may have changed the files in an earlier session; this is where the person hears of it.
//!
//! A CLI whose hooks are switched off entirely never calls loopgate, so nothing here can report
//! that: `loopgate doctor` does.

use crate::protocol::dialect::Agent;
use crate::setup;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The largest hook file read (doctor's bound too).
const MAX_FILE: u64 = 4 << 20;

/// What a CLI's hook files say about loopgate's wiring.
#[derive(Debug, Default)]
pub struct Inspected {
    /// (event, command) of every loopgate handler.
    pub found: Vec<(String, String)>,
    /// What is wrong, for the person.
    pub problems: Vec<String>,
    /// Codex: every loopgate hook trusted in `config.toml`.
    pub codex_trusted: bool,
}

/// Loopgate's wiring for `agent` across `files` (each path with its parsed JSON): events not
/// wired or wired twice, handlers that run the wrong subcommand or dialect, switches that turn
/// hooks off, `LOOPGATE_*`/`HOME`/`XDG_*` set for hooks, and for Codex the hooks' trust in
/// `codex_config` (Codex's user `config.toml`).
pub fn inspect(agent: Agent, files: &[(PathBuf, Value)], codex_config: Option<&Path>) -> Inspected {
    let format = setup::agents::format(agent);
    let mut out = Inspected::default();
    for (file, settings) in files {
        for (event, items) in settings["hooks"].as_object().into_iter().flatten() {
            for item in items.as_array().into_iter().flatten() {
                // Nested `{matcher, hooks: [...]}` groups, or Copilot's flat handlers.
                let handlers: Vec<&Value> = match item.get("hooks").and_then(Value::as_array) {
                    Some(hs) => hs.iter().collect(),
                    None => vec![item],
                };
                for h in handlers {
                    let Some(cmd) =
                        setup::handler_command(h).filter(|c| setup::is_loopgate_command(c))
                    else {
                        continue;
                    };
                    out.found.push((event.clone(), cmd.to_string()));
                    for key in crate::defence::wiring::env_overrides(h) {
                        out.problems.push(format!(
                            "{event} in {} sets {key} for loopgate",
                            file.display()
                        ));
                    }
                }
            }
        }
        out.problems.extend(switched_off(file, settings));
    }
    let mut problems = Vec::new();
    let mut missing = Vec::new();
    // With no loopgate hook in these files, the calls come from a file not read here: its
    // events cannot be judged, only the switches and env the files hold.
    let known = if out.found.is_empty() {
        &[][..]
    } else {
        format.hooks
    };
    for &(event, sub, _) in known {
        let hs: Vec<&String> = out
            .found
            .iter()
            .filter(|(e, _)| e == event)
            .map(|(_, c)| c)
            .collect();
        match hs.len() {
            0 => missing.push(event),
            1 => {}
            n => problems.push(format!("{event} is wired {n} times")),
        }
        for cmd in hs {
            if cmd.split_whitespace().last() != Some(sub) {
                problems.push(format!("{event} runs `{cmd}`"));
            }
            if setup::command_agent(cmd).as_deref() != Some(agent.name()) {
                problems.push(format!(
                    "{event} runs `{cmd}`, without `--agent {}`",
                    agent.name()
                ));
            }
        }
    }
    for (event, _) in &out.found {
        if !format.hooks.iter().any(|&(e, _, _)| e == event) {
            problems.push(format!(
                "{event} (not an event loopgate uses with {})",
                agent.title()
            ));
        }
    }
    if !missing.is_empty() {
        problems.insert(0, format!("not wired: {}", missing.join(", ")));
    }
    // Handlers edited in place (a matcher, a shorter timeout, `--config`, a redirection, a key
    // setup never writes), judged against what setup writes for the program they run.
    if let Some(prefix) = expected_prefix(agent, &out.found) {
        for (file, settings) in files {
            for d in setup::handler_drift(settings, &prefix, &format) {
                problems.push(format!("{d} in {}", file.display()));
            }
        }
    }
    problems.append(&mut out.problems);
    out.problems = problems;
    if let (Agent::Codex, Some(config)) = (agent, codex_config) {
        let untrusted = codex_untrusted(files, config);
        out.codex_trusted = untrusted.is_empty();
        if !untrusted.is_empty() {
            out.problems.push(format!(
                "not trusted in {} (Codex skips them silently): {}",
                config.display(),
                untrusted.join(", ")
            ));
        }
        out.problems.extend(codex_features_off(config));
    }
    out
}

/// The command prefix setup writes for the program loopgate's first handler runs (observing if
/// it observes): what every handler should run. `None` for a plugin or with no handler.
fn expected_prefix(agent: Agent, found: &[(String, String)]) -> Option<String> {
    if agent.is_plugin() {
        return None;
    }
    let (_, first) = found.first()?;
    let program = setup::command_program(first)?;
    setup::agents::command_prefix(Path::new(&program), setup::command_observes(first), agent).ok()
}

/// A hook file's own switches that stop its hooks, or all hooks, from running, and `env` it
/// sets for every hook.
fn switched_off(file: &Path, settings: &Value) -> Vec<String> {
    let shown = file.display();
    let mut found = Vec::new();
    if settings
        .get("disableAllHooks")
        .is_some_and(|v| v != &Value::Bool(false))
    {
        found.push(format!("{shown} sets disableAllHooks"));
    }
    // Gemini CLI's (and Qwen Code's) `hooksConfig`: `enabled: false` stops every hook,
    // `disabled` names hooks not to run.
    let config = settings.get("hooksConfig");
    if config.and_then(|c| c.get("enabled")) == Some(&Value::Bool(false)) {
        found.push(format!("{shown} sets hooksConfig.enabled to false"));
    }
    let disabled = config.and_then(|c| c.get("disabled"));
    if disabled.is_some_and(|d| d.to_string().contains("loopgate")) {
        found.push(format!("{shown} lists loopgate in hooksConfig.disabled"));
    }
    // Older Gemini CLI switches inside `hooks` itself.
    for (switch, off) in [("enabled", false), ("disabled", true)] {
        if settings["hooks"].get(switch) == Some(&Value::Bool(off)) {
            found.push(format!("{shown} sets hooks.{switch} to {off}"));
        }
    }
    for key in crate::defence::wiring::env_overrides(settings) {
        found.push(format!("{shown} sets {key} for every hook"));
    }
    found
}

/// The events of loopgate's Codex hooks that `config.toml` does not trust (or has disabled).
fn codex_untrusted(files: &[(PathBuf, Value)], config: &Path) -> Vec<String> {
    let table = codex_table(config);
    let state = table.get("hooks").and_then(|v| v.get("state"));
    files
        .iter()
        .flat_map(|(file, settings)| setup::agents::codex_hooks(file, settings))
        .filter(|h| {
            let entry = state.and_then(|s| s.get(&h.key));
            let hash = entry
                .and_then(|s| s.get("trusted_hash"))
                .and_then(|v| v.as_str());
            let enabled = entry
                .and_then(|s| s.get("enabled"))
                .and_then(|v| v.as_bool());
            hash != Some(h.hash.as_str()) || enabled == Some(false)
        })
        .map(|h| h.event)
        .collect()
}

/// Codex's `config.toml` as a table (empty when missing or not TOML).
fn codex_table(config: &Path) -> toml::Table {
    std::fs::read_to_string(config)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_default()
}

/// A `[features]` switch for hooks set to false in Codex's `config.toml`.
fn codex_features_off(config: &Path) -> Vec<String> {
    let table = codex_table(config);
    let Some(features) = table.get("features").and_then(|f| f.as_table()) else {
        return Vec::new();
    };
    features
        .iter()
        .filter(|(k, v)| k.contains("hook") && v.as_bool() == Some(false))
        .map(|(k, _)| format!("{} sets features.{k} = false", config.display()))
        .collect()
}

/// Reads a hook file as doctor does: `Ok(None)` when it does not exist.
pub fn read_hook_file(file: &Path) -> Result<Option<Value>, String> {
    let Some(text) = crate::platform::bounded::read_text(file, None, MAX_FILE)? else {
        return Ok(None);
    };
    let text = text.trim_start_matches('\u{feff}');
    if text.trim().is_empty() {
        return Ok(Some(Value::Object(Default::default())));
    }
    serde_json::from_str(text)
        .map(Some)
        .map_err(|e| format!("not valid JSON: {e}"))
}

/// The hook files `agent` reads loopgate's hooks from: the user-level ones, then the project's.
fn hook_files(agent: Agent, project: Option<&Path>) -> Vec<PathBuf> {
    let json_in = |dir: PathBuf| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        files
    };
    let user = crate::config::paths::agent_config_dir(agent);
    let mut files = Vec::new();
    match agent {
        Agent::Claude => {}
        // Copilot CLI reads every `*.json` in its hooks dirs.
        Agent::Copilot => {
            files.extend(user.map(|d| json_in(d.join("hooks"))).unwrap_or_default());
            files.extend(
                project
                    .map(|p| json_in(p.join(".github/hooks")))
                    .unwrap_or_default(),
            );
        }
        _ => {
            let (name, dir) = match agent {
                Agent::Codex => ("hooks.json", ".codex"),
                Agent::Gemini => ("settings.json", ".gemini"),
                _ => ("settings.json", ".qwen"),
            };
            files.extend(user.map(|d| d.join(name)));
            files.extend(project.map(|p| p.join(dir).join(name)));
        }
    }
    files
}

/// At a session's first judged call: one message for the person when `agent`'s hook files
/// (user and project) no longer wire loopgate whole, `None` when they do. Claude Code's own
/// `ConfigChange` guards its settings, so it is not checked here.
pub fn session_notice(
    agent: Agent,
    project: Option<&Path>,
    plugin_root: Option<&Path>,
) -> Option<String> {
    if agent == Agent::Claude {
        return super::plugin_files::session_notice(plugin_root);
    }
    if agent.is_plugin() {
        return None;
    }
    let mut problems = Vec::new();
    let mut files = Vec::new();
    for file in &hook_files(agent, project) {
        match read_hook_file(file) {
            Ok(Some(v)) => files.push((file.clone(), v)),
            Ok(None) => {}
            Err(why) => problems.push(format!("{} cannot be read: {why}", file.display())),
        }
    }
    let codex_config =
        crate::config::paths::agent_config_dir(Agent::Codex).map(|d| d.join("config.toml"));
    problems.extend(inspect(agent, &files, codex_config.as_deref()).problems);
    if agent == Agent::Codex {
        if let Some(p) = project {
            problems.extend(codex_features_off(&p.join(".codex/config.toml")));
        }
    }
    if problems.is_empty() {
        return None;
    }
    Some(format!(
        "loopgate's wiring in {}'s hook files is not whole (changed since setup, or set up by an \
         older loopgate): {}. Loopgate may not see every call; `loopgate doctor` shows the \
         wiring and `loopgate setup --agent {}` puts it back",
        agent.title(),
        problems.join("; "),
        agent.name()
    ))
}
