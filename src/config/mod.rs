//! Configuration: defaults from the designs, overridden by the user file, the project file, the
//! environment and flags, in that order (later wins).

pub mod paths;
pub mod sources;
pub mod tighten;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Enforce,
    Observe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// Only when no person is attending (`CLAUDE_CODE_SESSION_ATTENDED=0`).
    Unattended,
    Always,
}

/// The longest wait for the session lock whatever the config says: a hook must stay fast even
/// when another process holds the lock on purpose. Past it the call is judged without saving.
pub const MAX_LOCK_WAIT_MS: u64 = 5000;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub mode: Mode,
    /// How long a hook waits for the session lock before failing open.
    pub lock_timeout_ms: u64,
    pub failures: Failures,
    pub progress: Progress,
    pub log: Log,
    pub detectors: Detectors,
    pub ladder: Ladder,
    pub breaker: BreakerCfg,
    pub guard: Guard,
    pub housekeeping: Housekeeping,
    pub exempt: Exempt,
    pub notify: Notify,
    pub budget: Budget,
}

/// The loop budget (issue 39): what loops may cost, in dollars (and optionally tokens), per
/// session and per day across every CLI. Only loop spend counts (calls inside a detected loop,
/// and after a warning the agent ignored), never ordinary work. A project file may only tighten
/// it; the prices and the estimate are the user's (`config::tighten`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    pub enabled: bool,
    /// Loop spend of one session, in US dollars, at which it pauses and asks.
    pub session_usd: f64,
    /// Loop spend of the day (UTC) across every session and CLI: the backstop.
    pub day_usd: f64,
    /// The same bounds in tokens; 0: not used.
    pub session_tokens: u64,
    pub day_tokens: u64,
    /// The fraction of a bound at which the agent and the person are warned.
    pub warn_at: f64,
    /// Where a CLI records no usage loopgate can read (Gemini, Qwen, Copilot, OpenCode, Kilo):
    /// the tokens one loop call is taken to cost, priced as `estimate_model`.
    pub estimate_input_tokens: u64,
    pub estimate_output_tokens: u64,
    pub estimate_model: String,
    /// Prices by model id prefix, in US dollars per million tokens, over the built-in table.
    pub prices: BudgetPrices,
}

/// `[budget.prices]`: model id prefix → price.
pub type BudgetPrices = std::collections::BTreeMap<String, Price>;

/// A model's list price, US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            enabled: true,
            session_usd: 5.0,
            day_usd: 20.0,
            session_tokens: 0,
            day_tokens: 0,
            warn_at: 0.8,
            estimate_input_tokens: 30_000,
            estimate_output_tokens: 500,
            estimate_model: "gemini-2.5-pro".into(),
            prices: BudgetPrices::new(),
        }
    }
}

/// The out-of-band notice (issue 39): what loopgate runs when it ends a turn or a session, or
/// sees itself switched off, weakened or reset. Only the user file, `--config` or the
/// environment may set it: a project file the agent can write must not send the person's
/// notices elsewhere, or silence them.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Notify {
    /// A program and its arguments (no shell), run with the notice as JSON on stdin.
    pub command: Vec<String>,
    /// An `http://` or `https://` URL the notice is POSTed to as JSON.
    pub webhook: String,
    /// How long a notice may take, all receivers together; capped at [`MAX_NOTIFY_MS`].
    pub timeout_ms: u64,
}

/// The longest a notice may hold a hook call: well under every CLI's hook timeout.
pub const MAX_NOTIFY_MS: u64 = 5000;

impl Default for Notify {
    fn default() -> Self {
        Notify {
            command: Vec::new(),
            webhook: String::new(),
            timeout_ms: 2000,
        }
    }
}

impl Notify {
    /// Whether any receiver is named: without one a notice costs nothing.
    pub fn wanted(&self) -> bool {
        !self.command.is_empty() || !self.webhook.is_empty()
    }
}

/// The person's escape hatch (issue 27): calls the loop rules never judge, such as a poller they
/// trust. Only the user file, `--config` or the environment may set it: a project file the agent
/// can write cannot exempt its own calls.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Exempt {
    /// Shell commands, as glob patterns over the whole command (`*` matches anything):
    /// `"./scripts/wait-for-worker.sh*"`.
    pub commands: Vec<String>,
    /// Tools, by the name `loopgate status` shows (Claude Code's name for another CLI's tool):
    /// `"TaskOutput"`, `"mcp__worker__status"`.
    pub tools: Vec<String>,
}

impl Exempt {
    /// Whether an exemption covers this call.
    pub fn covers(&self, tool: &str, input: &serde_json::Value) -> bool {
        if self.tools.iter().any(|t| t == tool) {
            return true;
        }
        if self.commands.is_empty()
            || crate::protocol::tool::ToolClass::of(tool) != crate::protocol::tool::ToolClass::Shell
        {
            return false;
        }
        let Some(cmd) = input.get("command").and_then(serde_json::Value::as_str) else {
            return false;
        };
        let cmd = cmd.trim();
        self.commands
            .iter()
            .any(|p| crate::util::wildcard::Pattern::new(p).is_ok_and(|g| g.matches(cmd)))
    }
}

/// Old files in the state directory, removed now and then by a hook call and by `loopgate gc`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Housekeeping {
    /// Sessions, locks, quarantined and temp files untouched this long are removed.
    pub max_age_days: u64,
    /// Quarantined (unreadable) state files kept at most, newest first, whatever their age.
    pub max_quarantined: usize,
}

impl Default for Housekeeping {
    fn default() -> Self {
        Housekeeping {
            max_age_days: 7,
            max_quarantined: 20,
        }
    }
}

/// The tamper guard. Only the user file, `--config` or the environment can turn it off: a
/// `[guard]` table in the project file is ignored, since the agent can write that file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Guard {
    pub enabled: bool,
}

impl Default for Guard {
    fn default() -> Self {
        Guard { enabled: true }
    }
}

/// The escalation ladder: guidance, then denial, then the human.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Ladder {
    pub enabled: bool,
    /// Interventions in one turn after which the next loop goes to the human (stage 3).
    pub escalate_after: u32,
}

impl Default for Ladder {
    fn default() -> Self {
        Ladder {
            enabled: true,
            escalate_after: 3,
        }
    }
}

/// Ralph's circuit breaker across turns.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerCfg {
    pub enabled: bool,
    pub half_open_after: u32,
    pub open_after: u32,
    pub cooldown_minutes: u64,
}

impl Default for BreakerCfg {
    fn default() -> Self {
        BreakerCfg {
            enabled: true,
            half_open_after: 2,
            open_after: 3,
            cooldown_minutes: 30,
        }
    }
}

/// The outcome-aware detectors, each under `[detectors.<name>]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Detectors {
    pub repeat: Repeat,
    pub stagnation: Stagnation,
    pub cycle: Cycle,
    pub modification: Modification,
    pub circular: Circular,
}

/// The repeat rule: the same call, the same answer, no new state between. Budgets are repeats
/// allowed after the first answer; the next identical call is refused.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Repeat {
    pub enabled: bool,
    /// Failing calls, by error class (seed 002).
    pub transient: u32,
    pub deterministic: u32,
    pub unknown: u32,
    /// Successful calls (seed 003's dedup: 3).
    pub success: u32,
    /// Read-only tools: re-reading after a compaction is ordinary (seed 004: 4).
    pub read_only: u32,
    /// A spaced poll (real waiting between checks) is stopped once its answer has not changed
    /// for this many answers and this many minutes.
    pub waiting_answers: u32,
    pub waiting_minutes: u64,
    /// A failing poll (a call that waits, then fails the same way) is warned about once past its
    /// class budget and refused once the same failure has lasted this long: a service that
    /// takes a minute or two to come up is ordinary.
    pub failing_poll_minutes: u64,
    /// The same environment error (a missing compiler, JDK, program or signing key) this many
    /// times from one call, with edits of the project between and nothing else that could have
    /// changed the machine, and the next identical call is refused: an edit cannot fix it.
    pub environment_failures: u32,
    /// Quiet between a call's answer and its next start that counts as real waiting.
    pub waiting_gap_seconds: u64,
    /// After this long without an answer, one more identical call is let through.
    pub cooldown_minutes: u64,
}

impl Default for Repeat {
    fn default() -> Self {
        Repeat {
            enabled: true,
            transient: 3,
            deterministic: 1,
            unknown: 2,
            success: 3,
            read_only: 4,
            waiting_answers: 20,
            waiting_minutes: 30,
            failing_poll_minutes: 5,
            environment_failures: 3,
            waiting_gap_seconds: 60,
            cooldown_minutes: 10,
        }
    }
}

/// Different calls, the same substantial answer, no new state between (seed 000's "stuck").
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Stagnation {
    pub enabled: bool,
    pub warn_at: u32,
    pub deny_at: u32,
    pub cooldown_minutes: u64,
    /// Bookkeeping tools whose identical answers say nothing about progress.
    pub ignore_tools: Vec<String>,
}

impl Default for Stagnation {
    fn default() -> Self {
        Stagnation {
            enabled: true,
            warn_at: 5,
            deny_at: 8,
            cooldown_minutes: 10,
            ignore_tools: [
                "TodoWrite",
                "TaskCreate",
                "TaskUpdate",
                "TaskList",
                "TaskGet",
                "ExitPlanMode",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// Cycles of calls with the same answers and no new state (seed 001): named once, never denied.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cycle {
    pub enabled: bool,
    pub max_period: usize,
}

impl Default for Cycle {
    fn default() -> Self {
        Cycle {
            enabled: true,
            max_period: 8,
        }
    }
}

/// Modification loops (seed 001): the same code edited again and again.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Modification {
    pub enabled: bool,
    /// Edits of the same code in one file within the window.
    pub max_edits: u32,
    pub window_minutes: u64,
    /// The same Edit rejected this many times ("String to replace not found").
    pub max_rejected: u32,
}

impl Default for Modification {
    fn default() -> Self {
        Modification {
            enabled: true,
            max_edits: 4,
            window_minutes: 5,
            max_rejected: 2,
        }
    }
}

/// Circular dependencies (seed 001): imports among project files forming a cycle.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Circular {
    pub enabled: bool,
    /// Files read at most while following imports from the edited file.
    pub max_files: usize,
    /// Rust module cycles are legal; follow `mod`/`use crate::` only when asked.
    pub rust: bool,
}

impl Default for Circular {
    fn default() -> Self {
        Circular {
            enabled: true,
            max_files: 200,
            rust: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Failures {
    pub enabled: bool,
    pub warn_after: u32,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Progress {
    pub enabled: bool,
    pub max_blocks: u32,
    pub when: When,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Log {
    /// Keep a short, secret-masked preview of the call in each event.
    pub preview: bool,
    /// events.jsonl is rotated to events.jsonl.1 past this size.
    pub max_bytes: u64,
    /// Rotated generations kept (events.jsonl.1 … events.jsonl.N).
    pub generations: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Enforce,
            lock_timeout_ms: 2000,
            failures: Failures::default(),
            progress: Progress::default(),
            log: Log::default(),
            detectors: Detectors::default(),
            ladder: Ladder::default(),
            breaker: BreakerCfg::default(),
            guard: Guard::default(),
            housekeeping: Housekeeping::default(),
            exempt: Exempt::default(),
            notify: Notify::default(),
            budget: Budget::default(),
        }
    }
}

impl Default for Failures {
    fn default() -> Self {
        Failures {
            enabled: true,
            warn_after: 5,
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            enabled: true,
            max_blocks: 2,
            when: When::Unattended,
        }
    }
}

impl Default for Log {
    fn default() -> Self {
        Log {
            preview: true,
            max_bytes: 8 << 20,
            generations: 3,
        }
    }
}

/// Where configuration comes from, gathered once per process. The loading machinery (bounded
/// reads, validation against this schema, provenance, tighten-only project files) lives in
/// [`crate::config::sources`]; this file keeps the schema.
#[derive(Debug, Default, Clone)]
pub struct Sources<'a> {
    pub flag_file: Option<&'a Path>,
    pub flag_observe: bool,
    pub env_file: Option<PathBuf>,
    pub env_mode: Option<String>,
    pub project_dir: Option<&'a Path>,
    pub user_file: Option<PathBuf>,
    /// Other `LOOPGATE_*` variables naming settings (`LOOPGATE_DEDUP__MAX_IDENTICAL=5`).
    pub env: Vec<(String, String)>,
    /// Fill in [`sources::Loaded::origins`] and [`sources::Loaded::effective`] (a hook call does not need them
    /// and skips the work).
    pub provenance: bool,
    /// A hook process: its environment is not the person's alone (a settings file's `env` and
    /// a shell start-up file reach it), so it may only tighten loopgate, as a project file may;
    /// what would loosen it is ignored and named in [`sources::Loaded::env_ignored`].
    pub hook: bool,
    /// Variables already set aside for a hook (`LOOPGATE_CONFIG`), as `NAME=value`.
    pub ignored: Vec<String>,
}

impl<'a> Sources<'a> {
    /// The sources of this process: its environment, the user file, and the given flags.
    pub fn from_process(
        flag_file: Option<&'a Path>,
        flag_observe: bool,
        project_dir: Option<&'a Path>,
    ) -> Sources<'a> {
        let env = loopgate_vars();
        let get = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        Sources {
            flag_file,
            flag_observe,
            env_file: get("LOOPGATE_CONFIG").map(PathBuf::from),
            env_mode: get("LOOPGATE_MODE"),
            project_dir,
            user_file: user_config_file(),
            env: env
                .iter()
                .filter(|(k, _)| k != "LOOPGATE_MODE" && k != "LOOPGATE_CONFIG")
                .cloned()
                .collect(),
            provenance: false,
            hook: false,
            ignored: Vec::new(),
        }
    }

    /// The sources of a hook process: the command line and the user file decide what loopgate
    /// is; its environment may only tighten it. `LOOPGATE_CONFIG` is not read (a file named
    /// there replaces the user's and the project's, so it could loosen anything).
    pub fn for_hook(
        flag_file: Option<&'a Path>,
        flag_observe: bool,
        project_dir: Option<&'a Path>,
    ) -> Sources<'a> {
        let mut s = Sources::from_process(flag_file, flag_observe, project_dir);
        s.hook = true;
        if let Some(f) = s.env_file.take() {
            s.ignored.push(format!("LOOPGATE_CONFIG={}", f.display()));
        }
        s
    }
}

/// The `LOOPGATE_*` variables the process started with, when its entry point read them from the
/// environment block in place (`main.rs`); set once, before anything reads them.
static PROCESS_VARS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

/// Called once by the entry point with what [`crate::platform::start::loopgate_pair`] kept of its environment block.
pub fn set_process_vars(vars: Vec<(String, String)>) {
    let _ = PROCESS_VARS.set(vars);
}

/// This process's `LOOPGATE_*` variables (names and values that are UTF-8): as the entry point
/// found them, or else (tests, other platforms) through `std::env::vars_os`.
pub fn loopgate_vars() -> Vec<(String, String)> {
    if crate::platform::start::env_ignored() {
        return Vec::new();
    }
    if let Some(vars) = PROCESS_VARS.get() {
        return vars.clone();
    }
    std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut entry = k.into_encoded_bytes();
            entry.push(b'=');
            entry.extend_from_slice(v.as_encoded_bytes());
            crate::platform::start::loopgate_pair(&entry)
        })
        .collect()
}

/// The user config file: `config.toml` in the platform's config directory for loopgate.
pub fn user_config_file() -> Option<PathBuf> {
    crate::config::paths::config_dir().map(|d| d.join("config.toml"))
}

pub fn project_config_file(project_dir: &Path) -> PathBuf {
    project_dir.join(".claude").join("loopgate.toml")
}

/// Every leaf (a value that is not a table) with its dotted path.
pub fn leaves(t: &toml::Table) -> Vec<(String, &toml::Value)> {
    fn walk<'a>(t: &'a toml::Table, prefix: &str, out: &mut Vec<(String, &'a toml::Value)>) {
        for (k, v) in t {
            let path = if prefix.is_empty() {
                k.to_string()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(sub) => walk(sub, &path, out),
                _ => out.push((path, v)),
            }
        }
    }
    let mut out = Vec::new();
    walk(t, "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::sources::load;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn precedence_is_flag_env_project_user_default() {
        let d = tempfile::tempdir().unwrap();
        let user = write(
            d.path(),
            "user.toml",
            "mode = \"observe\"\n[detectors.repeat]\nsuccess = 7\ndeterministic = 2\n",
        );
        let proj = d.path().join("proj");
        write(
            &proj,
            ".claude/loopgate.toml",
            "[detectors.repeat]\nsuccess = 4\n",
        );
        let src = Sources {
            project_dir: Some(&proj),
            user_file: Some(user.clone()),
            ..Default::default()
        };
        let c = load(&src).config;
        assert_eq!(c.detectors.repeat.success, 4, "project over user");
        assert_eq!(
            c.detectors.repeat.deterministic, 2,
            "user key kept when project is silent"
        );
        assert_eq!(c.mode, Mode::Observe);
        let src = Sources {
            env_mode: Some("enforce".into()),
            project_dir: Some(&proj),
            user_file: Some(user),
            ..Default::default()
        };
        assert_eq!(load(&src).config.mode, Mode::Enforce, "env over files");
        let src = Sources {
            flag_observe: true,
            env_mode: Some("enforce".into()),
            ..Default::default()
        };
        assert_eq!(load(&src).config.mode, Mode::Observe, "flag over env");
        assert_eq!(load(&Sources::default()).config.detectors.repeat.success, 3);
    }

    #[test]
    fn the_project_file_cannot_turn_the_guard_off() {
        let d = tempfile::tempdir().unwrap();
        let user = write(d.path(), "user.toml", "[detectors.repeat]\nsuccess = 5\n");
        let proj = d.path().join("proj");
        write(&proj, ".claude/loopgate.toml", "[guard]\nenabled = false\n");
        let src = Sources {
            project_dir: Some(&proj),
            user_file: Some(user.clone()),
            ..Default::default()
        };
        assert!(load(&src).config.guard.enabled);
        std::fs::write(&user, "[guard]\nenabled = false\n").unwrap();
        assert!(!load(&src).config.guard.enabled, "the user may");
    }

    #[test]
    fn bad_file_is_reported_and_defaults_used() {
        let d = tempfile::tempdir().unwrap();
        let bad = write(d.path(), "bad.toml", "mode = [broken\n");
        let loaded = load(&Sources {
            flag_file: Some(&bad),
            ..Default::default()
        });
        assert_eq!(loaded.problems.len(), 1);
        assert!(!loaded.problems[0].contains('\n'));
        assert_eq!(loaded.config.detectors.repeat.success, 3);
        let wrong_type = write(d.path(), "t.toml", "[failures]\nwarn_after = \"five\"\n");
        let loaded = load(&Sources {
            flag_file: Some(&wrong_type),
            ..Default::default()
        });
        assert_eq!(loaded.problems.len(), 1);
        assert_eq!(loaded.config.failures.warn_after, 5);
    }
}
