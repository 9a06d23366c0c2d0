//! `loopgate doctor`: checks the installation and explains what to fix — the binary on PATH and
//! the one the hooks call, the hooks wired for every event exactly once across every place
//! Claude Code reads them from (user, project and local settings, managed settings, an enabled
//! plugin), the config, the state directory, Claude Code's version, and the project's git status;
//! then, for each other agent CLI whose config dir exists or whose binary is on PATH, that its
//! hook file wires loopgate for every event of that CLI (right subcommands and `--agent`), that
//! the binary those hooks call runs, and for Codex that the hooks are trusted.
//! One line per check, ✓ or ✗ with the fix; exit 1 when any check fails.

use crate::config::sources::Loaded;
use crate::protocol::dialect::Agent;
use crate::setup::{self, HOOKS};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Fail,
    /// Worth knowing, not a failure (nothing to check, or nothing found to check against).
    Info,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn ok(name: &'static str, detail: String) -> Check {
    Check {
        name,
        status: Status::Ok,
        detail,
        fix: None,
    }
}

fn fail(name: &'static str, detail: String, fix: impl Into<String>) -> Check {
    Check {
        name,
        status: Status::Fail,
        detail,
        fix: Some(fix.into()),
    }
}

fn info(name: &'static str, detail: String) -> Check {
    Check {
        name,
        status: Status::Info,
        detail,
        fix: None,
    }
}

/// What the checks look at.
pub struct Inputs<'a> {
    pub loaded: &'a Loaded,
    pub state_dir: Result<PathBuf, String>,
    pub project: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub managed_dir: PathBuf,
    /// The other agent CLIs and their config dirs (`~/.codex` or `$CODEX_HOME`, …).
    pub agents: Vec<(Agent, PathBuf)>,
    pub path_var: Option<std::ffi::OsString>,
    /// `LOOPGATE_BIN`: the binary the Agent SDK helpers run, when set.
    pub sdk_bin: Option<std::ffi::OsString>,
    /// The npm install's copy of the binary, where the helpers look next.
    pub sdk_stable_bin: Option<PathBuf>,
}

/// Prints the checks; returns whether all passed.
pub fn run(inputs: &Inputs, as_json: bool) -> anyhow::Result<bool> {
    let checks = checks(inputs);
    let all_ok = checks.iter().all(|c| c.status != Status::Fail);
    let mut out = std::io::stdout().lock();
    if as_json {
        let doc = serde_json::json!({"ok": all_ok, "checks": checks});
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        for c in &checks {
            let mark = match c.status {
                Status::Ok => "✓",
                Status::Fail => "✗",
                Status::Info => "·",
            };
            match &c.fix {
                Some(fix) => writeln!(out, "{mark} {}: {} — fix: {fix}", c.name, c.detail)?,
                None => writeln!(out, "{mark} {}: {}", c.name, c.detail)?,
            }
        }
        if all_ok {
            writeln!(out, "all checks passed")?;
        } else {
            let n = checks.iter().filter(|c| c.status == Status::Fail).count();
            writeln!(out, "{n} check{} failed", if n == 1 { "" } else { "s" })?;
        }
    }
    Ok(all_ok)
}

pub fn checks(inp: &Inputs) -> Vec<Check> {
    let wiring = wiring(inp);
    let others: Vec<Check> = inp
        .agents
        .iter()
        .filter_map(|(agent, dir)| agent_hooks(*agent, dir, inp))
        .collect();
    let mut out = vec![binary_on_path(inp)];
    out.extend(hooks_binary(&wiring, inp));
    out.extend(pinned_binary(&wiring));
    out.extend(managed_install(&wiring));
    // loopgate used with other CLIs only: no Claude Code here is not a failure.
    let no_claude = wiring.handlers.is_empty()
        && !inp
            .home
            .as_ref()
            .is_some_and(|h| h.join(".claude").is_dir())
        && find_in_path("claude", inp.path_var.as_deref()).is_none()
        && others.iter().any(|c| c.status == Status::Ok);
    if no_claude {
        out.push(info(
            "hooks wired once",
            "Claude Code is not installed here (no ~/.claude, no `claude` on PATH); its hooks are not checked".into(),
        ));
    } else {
        out.push(hooks_wired(&wiring));
    }
    out.extend(wiring.disabled.iter().map(|file| {
        fail(
            "hooks enabled",
            format!(
                "disableAllHooks is true in {}: no hook runs",
                file.display()
            ),
            format!("remove \"disableAllHooks\" from {}", file.display()),
        )
    }));
    out.extend(wiring.unreadable.iter().map(|(file, why)| {
        fail(
            "settings readable",
            format!("{} cannot be read: {why}", file.display()),
            "fix the JSON by hand (Claude Code ignores a file it cannot parse)",
        )
    }));
    out.push(config(inp.loaded));
    out.extend(slash_command(&wiring, inp));
    out.push(mode(&wiring, inp));
    out.push(state_dir(&inp.state_dir));
    out.extend(hook_environment(inp));
    out.extend(allowed_changes(&inp.state_dir));
    out.push(claude_version(inp));
    out.push(git(inp.project.as_deref()));
    out.push(agent_sdk(&wiring, inp));
    out.extend(others);
    out
}

/// Claude Agent SDK apps (docs/agent-sdk.md). What an app loads is in its code, which doctor
/// cannot see, so this says which apps the settings hooks reach (those whose `settingSources`
/// include the layer holding them; the SDK's default loads every layer) and which binary the
/// in-code helpers would run. It fails only when `LOOPGATE_BIN` names a binary that does not
/// run: whoever set it means the helpers to use it, and they would let every call through.
fn agent_sdk(w: &Wiring, inp: &Inputs) -> Check {
    const NAME: &str = "Agent SDK apps";
    let mut layers: Vec<&str> = Vec::new();
    for h in w.handlers.iter().filter(|h| h.event == "PreToolUse") {
        let layer = if h.plugin {
            "a plugin"
        } else if h.managed.is_some() {
            "managed settings"
        } else if h.source.starts_with("user settings") {
            "'user'"
        } else if h.source.starts_with("project settings") {
            "'project'"
        } else {
            "'local'"
        };
        if !layers.contains(&layer) {
            layers.push(layer);
        }
    }
    let sources: Vec<&str> = layers
        .iter()
        .copied()
        .filter(|l| l.starts_with('\''))
        .collect();
    let mut settings = if sources.is_empty() {
        "no user, project or local settings hooks for SDK apps to load".to_string()
    } else {
        format!(
            "apps whose settingSources include {} (the SDK's default loads all) run the settings \
             hooks",
            sources.join(" or ")
        )
    };
    for other in layers.iter().filter(|l| !l.starts_with('\'')) {
        settings.push_str(&format!(
            "; hooks from {other} are not observed with the SDK"
        ));
    }
    let helpers = if sources.is_empty() {
        "SDK apps need loopgate/agent-sdk (npm) or loopgate_agent_sdk (Python)"
    } else {
        "apps that load none of them (settingSources: []) need loopgate/agent-sdk (npm) or \
         loopgate_agent_sdk (Python)"
    };
    let exe = format!("loopgate{}", std::env::consts::EXE_SUFFIX);
    let (bin, how) = match &inp.sdk_bin {
        Some(set) => (Some(PathBuf::from(set)), "LOOPGATE_BIN"),
        None => match inp.sdk_stable_bin.as_ref().filter(|p| is_executable(p)) {
            Some(p) => (Some(p.clone()), "the npm install's copy"),
            None => (find_in_path(&exe, inp.path_var.as_deref()), "PATH"),
        },
    };
    match bin.map(|p| (version_of(&p), p)) {
        Some((Some(v), p)) => ok(
            NAME,
            format!(
                "{settings}; {helpers}, whose callbacks would run {} ({v}, from {how})",
                p.display()
            ),
        ),
        Some((None, p)) if inp.sdk_bin.is_some() => fail(
            NAME,
            format!(
                "LOOPGATE_BIN is {}, which does not run (`--version` failed): the Agent SDK \
                 helpers would let every call through",
                p.display()
            ),
            "point LOOPGATE_BIN at the loopgate binary, or unset it",
        ),
        _ => info(
            NAME,
            format!(
                "{settings}; {helpers}, which would find no loopgate binary to run \
                 (LOOPGATE_BIN, the npm install's copy, PATH) and let every call through"
            ),
        ),
    }
}

/// The check's name for an agent CLI's hooks.
fn agent_check_name(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "hooks wired once",
        Agent::Codex => "Codex CLI hooks",
        Agent::Gemini => "Gemini CLI hooks",
        Agent::Qwen => "Qwen Code hooks",
        Agent::Copilot => "Copilot CLI hooks",
        Agent::OpenCode => "OpenCode plugin",
        Agent::Kilo => "Kilo CLI plugin",
    }
}

/// The program an agent CLI is run as.
fn agent_program(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "claude",
        Agent::Codex => "codex",
        Agent::Gemini => "gemini",
        Agent::Qwen => "qwen",
        Agent::Copilot => "copilot",
        Agent::OpenCode => "opencode",
        Agent::Kilo => "kilo",
    }
}

/// One check for `agent`'s user-level hook file in `dir`, when that CLI is there at all.
fn agent_hooks(agent: Agent, dir: &Path, inp: &Inputs) -> Option<Check> {
    let name = agent_check_name(agent);
    let on_path = find_in_path(agent_program(agent), inp.path_var.as_deref());
    if !dir.is_dir() && on_path.is_none() {
        return None;
    }
    let file = agent_file(agent, dir);
    let shown = file.display();
    let setup_fix = format!("run `loopgate setup --agent {}`", agent.name());
    // Not wired is the person's choice (never installed, or uninstalled), not a fault: said,
    // with how to wire it, and never failed; only wiring that is there and broken fails.
    let unwired = || {
        let detail = match &on_path {
            Some(_) => format!(
                "{} is on PATH; loopgate is not wired to it (no loopgate hook in {shown}; \
                 `loopgate setup --agent {}` wires it)",
                agent.title(),
                agent.name()
            ),
            None => format!(
                "no `{}` on PATH and no loopgate hook in {shown}: not checked",
                agent_program(agent)
            ),
        };
        info(name, detail)
    };
    let text = match crate::platform::bounded::read_text(&file, None, 4 << 20) {
        Ok(Some(t)) => t,
        Ok(None) => return Some(unwired()),
        Err(why) => {
            return Some(fail(
                name,
                format!("{shown} cannot be read: {why}"),
                "fix the file by hand",
            ))
        }
    };
    if agent.is_plugin() {
        return Some(plugin_check(agent, &file, &text, inp));
    }
    let settings: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return Some(fail(
                name,
                format!("{shown} is not valid JSON: {e}"),
                "fix the JSON by hand",
            ))
        }
    };
    let format = setup::agents::format(agent);
    let config = dir.join("config.toml");
    let inspected =
        crate::defence::wiring_check::inspect(agent, &[(file.clone(), settings)], Some(&config));
    let found = inspected.found;
    if found.is_empty() {
        return Some(unwired());
    }
    let mut problems = inspected.problems;
    // The binary the hooks call exists and runs.
    let mut programs: Vec<String> = Vec::new();
    for (_, cmd) in &found {
        if let Some(p) = setup::command_program(cmd) {
            if !programs.contains(&p) {
                programs.push(p);
            }
        }
    }
    let mut ran = Vec::new();
    for program in &programs {
        match program_runs(program, inp) {
            Ok(v) => ran.push(v),
            Err(problem) => problems.push(problem),
        }
    }
    let trust = if agent == Agent::Codex && inspected.codex_trusted {
        format!(", trusted in {}", config.display())
    } else {
        String::new()
    };
    if problems.is_empty() {
        let wired = format!(
            "all {} events in {shown}, {}{trust}",
            format.hooks.len(),
            ran.join(", ")
        );
        // Observe mode is the person's choice, but never a plain ✓: nothing is denied there.
        if found.iter().any(|(_, cmd)| setup::command_observes(cmd)) {
            return Some(info(
                name,
                format!(
                    "{wired}; observe: the hooks run with --observe, so loopgate logs what it \
                     would deny and denies nothing (to enforce: `loopgate setup --agent {}`)",
                    agent.name()
                ),
            ));
        }
        return Some(ok(name, wired));
    }
    Some(fail(
        name,
        problems.join("; "),
        format!("{setup_fix} to rewrite loopgate's entries"),
    ))
}

/// The file that wires loopgate into `agent`, whose config dir is `dir`.
fn agent_file(agent: Agent, dir: &Path) -> PathBuf {
    match agent {
        Agent::Codex => dir.join("hooks.json"),
        Agent::Copilot => dir.join("hooks").join("loopgate.json"),
        Agent::OpenCode | Agent::Kilo => dir.join("plugins").join("loopgate.js"),
        _ => dir.join("settings.json"),
    }
}

/// Whether loopgate runs in observe mode for `agent`: its hooks (or plugin) pass `--observe`.
fn agent_observes(agent: Agent, dir: &Path) -> bool {
    let file = agent_file(agent, dir);
    if agent.is_plugin() {
        return crate::platform::bounded::read_text(&file, None, 4 << 20)
            .ok()
            .flatten()
            .and_then(|text| setup::plugin::command_in(&text))
            .is_some_and(|words| words.iter().any(|w| w == "--observe"));
    }
    setup::observing_hooks_in(&file)
}

/// Whether a program the hooks call runs: `Ok("<program> runs (<version>)")`, else the problem.
fn program_runs(program: &str, inp: &Inputs) -> Result<String, String> {
    let resolved = if program.contains('/') {
        let p = PathBuf::from(program);
        is_executable(&p).then_some(p)
    } else {
        find_in_path(program, inp.path_var.as_deref())
    };
    match resolved.as_deref().map(|p| (p, version_of(p))) {
        None => Err(format!(
            "the hooks call {program}, which does not exist or is not executable"
        )),
        Some((p, None)) => Err(format!(
            "the hooks call {}, which does not run (`--version` failed)",
            p.display()
        )),
        Some((_, Some(v))) => Ok(format!("{program} runs ({v})")),
    }
}

/// OpenCode's and Kilo's check: loopgate's plugin in the CLI's plugin folder, running a binary
/// that runs in that CLI's dialect.
fn plugin_check(agent: Agent, file: &Path, text: &str, inp: &Inputs) -> Check {
    let name = agent_check_name(agent);
    let shown = file.display();
    let setup_fix = format!("run `loopgate setup --agent {}`", agent.name());
    let Some(command) = setup::plugin::command_in(text) else {
        return fail(
            name,
            format!("{shown} is not loopgate's plugin as setup writes it"),
            setup_fix,
        );
    };
    let dialect = command
        .windows(2)
        .any(|w| w[0] == "--agent" && w[1] == agent.name());
    if !dialect {
        return fail(
            name,
            format!(
                "the plugin in {shown} does not run loopgate with --agent {}",
                agent.name()
            ),
            setup_fix,
        );
    }
    match program_runs(&command[0], inp) {
        // Observe mode is the person's choice, but never a plain ✓: nothing is denied there.
        Ok(ran) if command.iter().any(|w| w == "--observe") => info(
            name,
            format!(
                "plugin {shown}, {ran}; observe: the plugin runs loopgate with --observe, so it \
                 logs what it would deny and denies nothing (to enforce: `loopgate setup --agent {}`)",
                agent.name()
            ),
        ),
        Ok(ran) => ok(name, format!("plugin {shown}, {ran}")),
        Err(problem) => fail(name, problem, format!("{setup_fix} to rewrite the plugin")),
    }
}

/// The first line `<program> --version` prints, if it runs and exits 0 within 5 s.
fn version_of(program: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let mut text = String::new();
    if let Some(mut so) = child.stdout.take() {
        use std::io::Read;
        let _ = so.by_ref().take(4096).read_to_string(&mut text);
    }
    status
        .success()
        .then(|| text.lines().next().unwrap_or("").trim().to_string())
}

fn find_in_path(name: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|meta| crate::platform::is_executable(&meta))
}

fn binary_on_path(inp: &Inputs) -> Check {
    let me = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into());
    match find_in_path("loopgate", inp.path_var.as_deref()) {
        Some(p) => ok(
            "binary on PATH",
            format!(
                "{} (this is {me}, version {})",
                p.display(),
                crate::cli::VERSION
            ),
        ),
        None => fail(
            "binary on PATH",
            format!("no loopgate on PATH (this is {me})"),
            "run ./install.sh, or add the directory holding loopgate to PATH",
        ),
    }
}

/// One loopgate hook handler found somewhere.
struct Handler {
    event: String,
    command: String,
    /// "user settings /home/u/.claude/settings.json", "plugin loopgate@market", …
    source: String,
    plugin: bool,
    /// The managed-settings file it is in, if it is in one.
    managed: Option<PathBuf>,
}

#[derive(Default)]
struct Wiring {
    handlers: Vec<Handler>,
    disabled: Vec<PathBuf>,
    unreadable: Vec<(PathBuf, String)>,
}

fn wiring(inp: &Inputs) -> Wiring {
    let mut w = Wiring::default();
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    if let Some(home) = &inp.home {
        files.push((
            "user settings".into(),
            home.join(".claude").join("settings.json"),
        ));
    }
    if let Some(p) = &inp.project {
        files.push((
            "project settings".into(),
            p.join(".claude").join("settings.json"),
        ));
        files.push((
            "local settings".into(),
            p.join(".claude").join("settings.local.json"),
        ));
    }
    files.push((
        "managed settings".into(),
        inp.managed_dir.join("managed-settings.json"),
    ));
    if let Ok(rd) = std::fs::read_dir(inp.managed_dir.join("managed-settings.d")) {
        let mut drop_ins: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        drop_ins.sort();
        files.extend(drop_ins.into_iter().map(|p| ("managed settings".into(), p)));
    }
    let mut plugins: BTreeMap<String, bool> = BTreeMap::new();
    for (label, file) in files {
        let text = match crate::platform::bounded::read_text(&file, None, 4 << 20) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(why) => {
                w.unreadable.push((file, why));
                continue;
            }
        };
        let settings: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                w.unreadable.push((file, e.to_string()));
                continue;
            }
        };
        let managed = label == "managed settings";
        if !managed && settings["disableAllHooks"] == Value::Bool(true) {
            w.disabled.push(file.clone());
        }
        if let Some(map) = settings["enabledPlugins"].as_object() {
            for (name, on) in map {
                if name.split('@').next() == Some("loopgate") {
                    // Later (narrower) settings win, as Claude Code's precedence has it.
                    plugins.insert(name.clone(), on.as_bool().unwrap_or(false));
                }
            }
        }
        let Some(hooks) = settings["hooks"].as_object() else {
            continue;
        };
        for (event, groups) in hooks {
            for group in groups.as_array().into_iter().flatten() {
                for h in group["hooks"].as_array().into_iter().flatten() {
                    let Some(cmd) = h["command"].as_str() else {
                        continue;
                    };
                    if setup::is_loopgate_command(cmd) {
                        w.handlers.push(Handler {
                            event: event.clone(),
                            command: cmd.to_string(),
                            source: format!("{label} {}", file.display()),
                            plugin: false,
                            managed: managed.then(|| file.clone()),
                        });
                    }
                }
            }
        }
    }
    for (name, on) in plugins {
        if !on {
            continue;
        }
        for &(event, sub, _) in HOOKS {
            w.handlers.push(Handler {
                event: event.into(),
                command: format!("{} {sub}", setup::PLUGIN_COMMAND_PREFIX),
                source: format!("plugin {name}"),
                plugin: true,
                managed: None,
            });
        }
    }
    w
}

/// Changes the person allowed with `/loopgate allow <id>` that still switch loopgate off. Told
/// every time: the record that lets them stand is a file an agent could have written.
fn allowed_changes(dir: &Result<PathBuf, String>) -> Vec<Check> {
    let Ok(dir) = dir else { return Vec::new() };
    crate::defence::sanction::in_effect(dir)
        .into_iter()
        .map(|a| {
            fail(
                "no allowed switch-off",
                format!(
                    "{} switches loopgate off, allowed by /loopgate allow {} at {}",
                    a.file.display(),
                    a.id,
                    crate::defence::sanction::when(&a)
                ),
                "if you did not type that, run `loopgate setup` to wire loopgate again",
            )
        })
        .collect()
}

fn hooks_wired(w: &Wiring) -> Check {
    let mut missing = Vec::new();
    let mut twice = Vec::new();
    let mut wrong = Vec::new();
    let mut sources: Vec<&str> = Vec::new();
    for &(event, sub, _) in HOOKS {
        let hs: Vec<&Handler> = w.handlers.iter().filter(|h| h.event == event).collect();
        // Claude Code runs an identical command from several settings files once; a plugin's
        // copy stays separate.
        let mut distinct: Vec<&Handler> = Vec::new();
        for h in &hs {
            if h.plugin || !distinct.iter().any(|d| !d.plugin && d.command == h.command) {
                distinct.push(h);
            }
        }
        for h in &distinct {
            if !sources.contains(&h.source.as_str()) {
                sources.push(&h.source);
            }
            if setup::pin::inner(&h.command).split_whitespace().last() != Some(sub) {
                wrong.push(format!("{event} runs `{}`", h.command));
            }
        }
        match distinct.len() {
            0 => missing.push(event),
            1 => {}
            n => twice.push(format!(
                "{event} {n} times ({})",
                distinct
                    .iter()
                    .map(|h| h.source.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    // Events loopgate does not use.
    for h in &w.handlers {
        if !HOOKS.iter().any(|&(e, _, _)| e == h.event) {
            wrong.push(format!("{} (not an event loopgate uses)", h.event));
        }
    }
    if missing.is_empty() && twice.is_empty() && wrong.is_empty() {
        return ok(
            "hooks wired once",
            format!("all {} events, from {}", HOOKS.len(), sources.join(", ")),
        );
    }
    let mut problems = Vec::new();
    let mut fixes = Vec::new();
    if missing.len() == HOOKS.len() {
        problems.push("no loopgate hook is wired anywhere".to_string());
        fixes.push("run ./install.sh or `loopgate setup`".to_string());
    } else if !missing.is_empty() {
        problems.push(format!("not wired: {}", missing.join(", ")));
        fixes.push("run `loopgate setup` again to wire every event".to_string());
    }
    if !twice.is_empty() {
        problems.push(format!(
            "wired more than once, so every call counts double: {}",
            twice.join("; ")
        ));
        fixes.push(
            "keep one: `loopgate setup --uninstall --settings FILE` for a settings file, or disable the plugin with /plugin"
                .to_string(),
        );
    }
    if !wrong.is_empty() {
        problems.push(format!("miswired: {}", wrong.join("; ")));
        fixes.push("run `loopgate setup` to rewrite loopgate's entries".to_string());
    }
    fail("hooks wired once", problems.join("; "), fixes.join("; "))
}

fn hooks_binary(w: &Wiring, inp: &Inputs) -> Vec<Check> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for h in w.handlers.iter().filter(|h| !h.plugin) {
        let Some(program) = setup::command_program(&h.command) else {
            continue;
        };
        if seen.contains(&program) || program.contains("${") {
            continue;
        }
        seen.push(program.clone());
        let resolved = if program.contains('/') {
            let p = PathBuf::from(&program);
            is_executable(&p).then_some(p)
        } else {
            find_in_path(&program, inp.path_var.as_deref())
        };
        out.push(match resolved {
            Some(p) => ok(
                "binary the hooks call",
                format!("{program} ({})", p.display()),
            ),
            None => fail(
                "binary the hooks call",
                format!(
                    "the hooks in {} call {program}, which does not exist or is not executable",
                    h.source
                ),
                "run ./install.sh again, or `loopgate setup --bin /path/to/loopgate`",
            ),
        });
    }
    out
}

/// Whether the binary the session start's check names is still the one setup installed: the
/// shell makes this check at each session start (`setup/pin.rs`); doctor makes it too, for the
/// person who runs it from another copy. Settings with no such check are told why.
fn pinned_binary(w: &Wiring) -> Vec<Check> {
    const NAME: &str = "binary as setup installed";
    let ours: Vec<&Handler> = w
        .handlers
        .iter()
        .filter(|h| !h.plugin && h.managed.is_none())
        .collect();
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for p in ours.iter().filter_map(|h| setup::pin::parse(&h.command)) {
        if seen.contains(&p.path) {
            continue;
        }
        seen.push(p.path);
        out.push(if setup::pin::holds(&p) {
            ok(
                NAME,
                format!(
                    "{} has the SHA-256 setup recorded; `{}` checks it at each session start",
                    p.path,
                    p.checker.split(' ').next().unwrap_or(p.checker)
                ),
            )
        } else {
            fail(
                NAME,
                format!(
                    "{} is missing or is not the binary setup installed (its SHA-256 differs): \
                     loopgate does not judge Claude Code sessions",
                    p.path
                ),
                "if you upgraded loopgate, run `loopgate setup`; if you did not, something \
                 replaced it: reinstall loopgate (./install.sh) and run `loopgate setup`",
            )
        });
    }
    if out.is_empty() && ours.iter().any(|h| h.event == "SessionStart") {
        let why = match crate::platform::system_digest_checker() {
            None => "this system has no digest checker only root can change (docs/security.md)",
            Some(_) => {
                "the settings were written before setup added the check: run `loopgate setup`"
            }
        };
        out.push(info(
            NAME,
            format!("the hooks' binary is checked only by itself: {why}"),
        ));
    }
    out
}

/// A managed install keeps loopgate on only while the agent, running as the user, can change
/// neither the managed hooks nor the binary they run: both, and every directory above them, must
/// be root's alone.
fn managed_install(w: &Wiring) -> Option<Check> {
    use crate::platform::SystemOwned;
    const NAME: &str = "managed install";
    let managed: Vec<(&PathBuf, String)> = w
        .handlers
        .iter()
        .filter_map(|h| Some((h.managed.as_ref()?, setup::command_program(&h.command)?)))
        .collect();
    if managed.is_empty() {
        return None;
    }
    let fix = format!(
        "run `sudo loopgate setup --managed`, which copies the binary to {} and wires the managed hooks to it",
        crate::platform::system_install_dir().display()
    );
    let mut problems = Vec::new();
    let mut unknown = Vec::new();
    let mut checked: Vec<String> = Vec::new();
    for (file, program) in &managed {
        let file_shown = file.display().to_string();
        if !program.contains(['/', '\\']) {
            problems.push(format!(
                "the managed hooks in {file_shown} run `{program}` from PATH, which the user's environment decides"
            ));
            continue;
        }
        for path in [program.clone(), file_shown] {
            if checked.contains(&path) {
                continue;
            }
            match crate::platform::system_owned(Path::new(&path)) {
                SystemOwned::Yes => {}
                SystemOwned::No(why) => problems.push(why),
                SystemOwned::Unknown(what) => unknown.push(what),
            }
            checked.push(path);
        }
    }
    if !problems.is_empty() {
        return Some(fail(
            NAME,
            format!(
                "{}: the agent, running as you, could replace what the managed hooks run",
                problems.join("; ")
            ),
            fix,
        ));
    }
    if !unknown.is_empty() {
        return Some(info(NAME, unknown.join("; ")));
    }
    Some(ok(
        NAME,
        format!(
            "{} and every directory above them are writable by root only",
            checked.join(", ")
        ),
    ))
}

fn config(loaded: &Loaded) -> Check {
    if loaded.problems.is_empty() {
        return ok(
            "config",
            "parses; `loopgate config` shows every value and its source".into(),
        );
    }
    fail(
        "config",
        format!(
            "{} problem{}: {}",
            loaded.problems.len(),
            if loaded.problems.len() == 1 { "" } else { "s" },
            loaded.problems.join("; ")
        ),
        "edit the file and line named (`loopgate config` shows what is in effect)",
    )
}

/// `/loopgate`, the person's command to keep a change loopgate undid (`/loopgate allow <id>`),
/// beside the user settings that wire loopgate: without it that change cannot be kept.
fn slash_command(w: &Wiring, inp: &Inputs) -> Option<Check> {
    let settings = inp.home.as_ref()?.join(".claude").join("settings.json");
    let wired_there = w
        .handlers
        .iter()
        .any(|h| !h.plugin && h.source.starts_with("user settings"));
    if !wired_there {
        return None;
    }
    let file = setup::slash_command_path(&settings)?;
    Some(if file.is_file() {
        ok("/loopgate command", format!("{}", file.display()))
    } else {
        fail(
            "/loopgate command",
            format!(
                "{} is missing: `/loopgate allow <id>` cannot keep a change loopgate undid",
                file.display()
            ),
            "run `loopgate setup` (or ./install.sh) to write it again",
        )
    })
}

/// Enforce or observe, and why, for every CLI loopgate is wired to: the hooks' (or plugin's)
/// `--observe`, or the config's `mode`, which holds for all of them.
fn mode(w: &Wiring, inp: &Inputs) -> Check {
    let loaded = inp.loaded;
    let claude = w
        .handlers
        .iter()
        .find(|h| setup::command_observes(&h.command))
        .map(|h| h.source.as_str());
    let others: Vec<&str> = inp
        .agents
        .iter()
        .filter(|(agent, dir)| agent_observes(*agent, dir))
        .map(|(agent, _)| agent.title())
        .collect();
    let to_enforce = "to enforce: run ./install.sh or `loopgate setup` (with `--agent CLI` for \
                      another CLI) without --observe";
    if loaded.config.mode == crate::config::Mode::Observe {
        return info(
            "mode",
            "observe for every CLI: mode = \"observe\" in the config (`loopgate config` shows \
             where); loopgate logs what it would deny and denies nothing (to enforce: set \
             mode = \"enforce\" there)"
                .into(),
        );
    }
    let mut observing = Vec::new();
    if let Some(source) = claude {
        observing.push(format!(
            "Claude Code (the hooks run with --observe, {source})"
        ));
    }
    if !others.is_empty() {
        observing.push(format!(
            "{} (their hooks run with --observe)",
            others.join(", ")
        ));
    }
    if observing.is_empty() {
        return ok(
            "mode",
            "enforce: loopgate denies a call that repeats a loop".into(),
        );
    }
    info(
        "mode",
        format!(
            "observe for {}: loopgate logs what it would deny there and denies nothing ({to_enforce})",
            observing.join("; ")
        ),
    )
}

/// What of this environment a hook would ignore, were the CLI started from it: in a hook the
/// environment may only tighten loopgate (a settings file's `env` reaches it), so observe mode,
/// another state dir or config file, or a loosened setting set here does not take effect there.
fn hook_environment(inp: &Inputs) -> Option<Check> {
    let mut ignored = crate::config::sources::load(&crate::config::Sources::for_hook(
        None,
        false,
        inp.project.as_deref(),
    ))
    .env_ignored;
    let named = std::env::var_os("LOOPGATE_STATE_DIR").filter(|v| !v.is_empty());
    if let Some(named) = named {
        if crate::config::paths::state_dir().as_deref() != Some(Path::new(&named)) {
            ignored.push(format!(
                "LOOPGATE_STATE_DIR={}",
                Path::new(&named).display()
            ));
        }
    }
    if ignored.is_empty() {
        return None;
    }
    Some(info(
        "hook environment",
        crate::judge::redact::mask(&format!(
            "the hooks ignore {} (in a hook the environment may only tighten loopgate, since a \
             settings file's `env` reaches it; each session that runs with it is told once): \
             put the setting in the user config file {}, or add --observe, --state-dir DIR or \
             --config FILE to the hook commands",
            ignored.join(", "),
            crate::config::user_config_file()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "(no home)".into())
        )),
    ))
}

fn state_dir(dir: &Result<PathBuf, String>) -> Check {
    let dir = match dir {
        Ok(d) => d,
        Err(e) => {
            return fail(
                "state dir",
                e.clone(),
                "set HOME, or add --state-dir DIR to the hook commands",
            )
        }
    };
    let shown = dir.display();
    let fix_write = format!(
        "make {shown} a directory you can write (or add --state-dir DIR to the hook commands); every hook fails open until then"
    );
    if std::fs::symlink_metadata(dir).is_err() {
        // A check creates nothing: the first hook call makes the directory, if it can.
        let parent = dir.ancestors().skip(1).find(|a| a.is_dir());
        let probe = parent.map(|p| p.join(format!(".loopgate-doctor-{}", std::process::id())));
        let writable = probe
            .as_ref()
            .is_some_and(|p| crate::store::open_private(p).is_ok());
        if let Some(p) = &probe {
            let _ = std::fs::remove_file(p);
        }
        return match (parent, writable) {
            (Some(p), true) => ok(
                "state dir",
                format!(
                    "{shown} does not exist yet; the first hook call creates it ({} is writable)",
                    p.display()
                ),
            ),
            _ => fail(
                "state dir",
                format!("{shown} does not exist and cannot be created"),
                fix_write,
            ),
        };
    }
    if let Err(e) = crate::store::Store::open(dir) {
        return fail("state dir", format!("{shown}: {e:#}"), fix_write);
    }
    let probe = dir.join(format!(".doctor-{}", std::process::id()));
    let probe_meta = match crate::store::open_private(&probe).and_then(|f| f.metadata()) {
        Ok(m) => m,
        Err(e) => {
            return fail(
                "state dir",
                format!("{shown} is not writable: {e}"),
                fix_write,
            );
        }
    };
    let _ = std::fs::remove_file(&probe);
    let owners = std::fs::metadata(dir)
        .ok()
        .and_then(|m| crate::platform::ownership(&m))
        .zip(crate::platform::ownership(&probe_meta));
    if let Some((dir_own, probe_own)) = owners {
        if dir_own.uid != probe_own.uid {
            return fail(
                "state dir",
                format!("{shown} belongs to uid {}, not to you", dir_own.uid),
                "use a directory of your own (--state-dir DIR in the hook commands), or chown it",
            );
        }
        let mode = dir_own.mode;
        if mode & 0o077 != 0 {
            return fail(
                "state dir",
                format!("{shown} has mode {mode:03o}: others can read or change loopgate's state"),
                format!("chmod 700 {shown}"),
            );
        }
    }
    ok("state dir", format!("{shown} is writable and private"))
}

fn claude_version(inp: &Inputs) -> Check {
    let Some(claude) = find_in_path("claude", inp.path_var.as_deref()) else {
        return info(
            "Claude Code",
            "`claude` is not on PATH; not checked (loopgate is verified against 2.1.330)".into(),
        );
    };
    let child = Command::new(&claude)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return info(
            "Claude Code",
            format!("{} could not be run", claude.display()),
        );
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return info(
                    "Claude Code",
                    format!("{} --version did not answer in 5 s", claude.display()),
                );
            }
        }
    }
    let mut text = String::new();
    if let Some(mut so) = child.stdout.take() {
        use std::io::Read;
        let _ = so.by_ref().take(4096).read_to_string(&mut text);
    }
    let version = text.lines().next().unwrap_or("").trim().to_string();
    ok(
        "Claude Code",
        format!(
            "{} ({}); loopgate is verified against 2.1.330",
            if version.is_empty() {
                "unknown version"
            } else {
                &version
            },
            claude.display()
        ),
    )
}

fn git(project: Option<&Path>) -> Check {
    let Some(project) = project else {
        return info("git", "no project directory".into());
    };
    let repo = match git2::Repository::discover(project) {
        Ok(r) => r,
        Err(e) if e.code() == git2::ErrorCode::NotFound => {
            return info(
                "git",
                format!(
                    "{} is not in a git repository: the Stop gate cannot see progress there, so it never blocks",
                    project.display()
                ),
            )
        }
        Err(e) => {
            return fail(
                "git",
                format!("cannot open the repository at {}: {}", project.display(), e.message()),
                "check the .git directory's permissions (`git status` shows the same error)",
            )
        }
    };
    let index = repo.index().map(|i| i.len());
    let head = repo
        .head()
        .ok()
        .and_then(|h| h.shorthand().map(String::from));
    match index {
        Ok(n) => ok(
            "git",
            format!(
                "{} readable ({}, {n} files in the index)",
                repo.workdir().unwrap_or(repo.path()).display(),
                head.map(|h| format!("on {h}"))
                    .unwrap_or_else(|| "no commit yet".into())
            ),
        ),
        Err(e) => fail(
            "git",
            format!(
                "the index of {} is unreadable: {}",
                project.display(),
                e.message()
            ),
            "run `git status` there and fix what it reports",
        ),
    }
}
