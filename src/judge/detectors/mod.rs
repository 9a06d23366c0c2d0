//! Detectors are pure functions of the observation ledger, the world state and the call or answer
//! in front of them; none of them keeps a counter of its own or renders hook JSON. The registry
//! below is the whole list, by the moment each judges (a prompt, a call, an answer, a batch, a
//! turn's end): the engine runs every entry, and the policy (the strongest verdict, then the
//! ladder and the ceiling in `judge::ceiling`) picks the answer. Adding a detector is one file
//! and one line here.

pub mod breaker;
pub mod circular;
pub mod cycle;
pub mod environment;
pub mod failures;
pub mod guard;
pub mod modification;
pub mod progress;
pub mod repeat;
pub mod script;
pub mod stagnation;

use crate::config::Config;
use crate::judge::ledger::{Entry, Ledger, Status, World};
use crate::judge::redact;
use crate::judge::state::{AgentState, Breaker, Ceiling, Turn};
use crate::protocol::payload::BatchCall;
use crate::protocol::tool::ToolClass;
use crate::protocol::verdict::Verdict;
use crate::util::canon::Digest16;
use serde_json::Value;
use std::path::Path;

/// What a detector sees: one agent's ledger and the session's world state.
pub struct View<'a> {
    pub ledger: &'a Ledger,
    pub world: &'a World,
    pub now_ms: u64,
    pub config: &'a Config,
    /// When this agent last had news (`state::Heed`): how long a wait has gone unanswered.
    pub news_ms: u64,
}

/// A call about to run (PreToolUse).
pub struct Call<'a> {
    pub tool: &'a str,
    pub input: &'a Value,
    pub key: Digest16,
    pub class: ToolClass,
    /// Real waiting came before it (a sleep in it or just before it, or minutes of quiet).
    pub waited: bool,
    /// Its latest failures by the session's other agents, in this state of the work: a command
    /// failing the same way is one loop whichever subagent retries it.
    pub elsewhere: Option<repeat::Elsewhere>,
}

/// The session-wide records a detector may move on: the circuit breaker, and the ceiling's
/// record of a Code Mode script's calls and steps.
pub struct Gates<'a> {
    pub breaker: &'a mut Breaker,
    pub ceiling: &'a mut Ceiling,
}

/// Before a call runs: the calling agent, its ledger and the world, and the call.
pub struct Before<'a> {
    pub view: View<'a>,
    pub call: Call<'a>,
    pub agent: &'a AgentState,
    pub session: &'a str,
    /// Made by a Code Mode script: judged one by one only by the repeat rule and the script
    /// window (the proxy level).
    pub scripted: bool,
    /// The paths the guard protects, worked out only when a call needs them.
    pub guard_env: &'a dyn Fn() -> guard::Env,
}

/// After an answer: the agent whose ledger ends with it, the world, and the call answered.
pub struct Answer<'a> {
    pub agent: &'a mut AgentState,
    pub world: &'a World,
    pub now_ms: u64,
    pub config: &'a Config,
    pub news_ms: u64,
    pub tool: &'a str,
    pub input: &'a Value,
    pub status: Status,
    pub error: &'a str,
    pub scripted: bool,
    /// `CLAUDE_PROJECT_DIR`, the root the circular-import rule reads sources under.
    pub project_dir: Option<&'a Path>,
}

impl Answer<'_> {
    pub fn view(&self) -> View<'_> {
        View {
            ledger: &self.agent.ledger,
            world: self.world,
            now_ms: self.now_ms,
            config: self.config,
            news_ms: self.news_ms,
        }
    }

    /// The answer being judged: the last entry of the agent's ledger.
    pub fn latest(&self) -> &Entry {
        self.agent
            .ledger
            .entries
            .back()
            .expect("the answer was recorded before the detectors run")
    }
}

/// A prompt about to start a turn (UserPromptSubmit).
pub struct Prompt<'a> {
    pub session: &'a str,
    /// The main agent's prompt (a subagent's starts no turn).
    pub main: bool,
    pub now_ms: u64,
    pub config: &'a Config,
    /// `CLAUDE_CODE_SESSION_ATTENDED`, when the CLI said.
    pub attended: Option<bool>,
    /// The prompt is one an earlier turn that tried and failed was given: an outer loop may be
    /// re-feeding it. Every other prompt is new words, never refused.
    pub refeed: bool,
}

/// A model turn's calls, all listed at once (PostToolBatch).
pub struct Batch<'a> {
    pub calls: &'a [BatchCall],
    pub main: bool,
    pub turn: u32,
    /// The state of the work after the batch.
    pub world: Digest16,
}

/// The turn about to end (Stop).
pub struct Stop<'a> {
    pub config: &'a Config,
    pub attended: Option<bool>,
    /// The CLI's `stop_hook_active`: this Stop follows one the gate blocked.
    pub active: bool,
    /// Whether the worktree changed since a stamp beyond what the turn's tools left (`None`:
    /// cannot tell); the costliest question a call can ask, so asked only when needed.
    pub changed: &'a dyn Fn(&str) -> Option<bool>,
}

/// Judges a call before it runs.
pub type BeforeCall = fn(&Before, &mut Gates) -> Option<Verdict>;
/// Judges an answer just added to the ledger.
pub type AfterAnswer = fn(&mut Answer) -> Option<Verdict>;
/// Judges a prompt before its turn starts; a refusal keeps the turn from starting.
pub type AtPrompt = fn(&Prompt, &mut Gates) -> Option<Verdict>;
/// Judges a model turn's batch of calls as a whole.
pub type AfterBatch = fn(&Batch, &mut Gates) -> Option<Verdict>;
/// Judges whether the turn may end; a verdict blocks the Stop.
pub type AtStop = fn(&mut Turn, &Stop) -> Option<Verdict>;

/// Every detector that can refuse a call, by name, in the order their verdicts are weighed
/// (the first of two equally strong verdicts decides).
pub const BEFORE_CALL: &[(&str, BeforeCall)] = &[
    (breaker::NAME, |b, g| {
        breaker::check(g.breaker, b.session, b.view.now_ms, &b.view.config.breaker)
    }),
    (guard::NAME, |b, _| {
        guard::check(
            b.call.tool,
            b.call.input,
            || (b.guard_env)(),
            &b.view.config.guard,
        )
    }),
    (script::NAME, |b, g| {
        let what = || describe(b.call.tool, &redact::target(b.call.tool, b.call.input));
        b.scripted
            .then(|| script::window(g.ceiling, b.call.key, b.view.now_ms, &what()))
            .flatten()
    }),
    (repeat::NAME, |b, _| repeat::check(&b.view, &b.call)),
    (environment::NAME, |b, _| {
        (!b.scripted)
            .then(|| environment::check(&b.view, &b.call))
            .flatten()
    }),
    (stagnation::NAME, |b, _| {
        (!b.scripted)
            .then(|| stagnation::check(&b.view, &b.call))
            .flatten()
    }),
    (modification::NAME, |b, _| {
        if b.scripted {
            return None;
        }
        if let Some(v) = modification::missed_edits(&b.view, &b.call) {
            return Some(v);
        }
        if !matches!(b.call.tool, "Edit" | "MultiEdit") {
            return None;
        }
        let path = b.call.input.get("file_path").and_then(Value::as_str);
        modification::check(
            b.agent,
            path.unwrap_or(""),
            b.call.input,
            b.view.now_ms,
            &b.view.config.detectors.modification,
        )
    }),
];

/// Every detector that reads answers, by name, in the order their verdicts are weighed.
pub const AFTER_ANSWER: &[(&str, AfterAnswer)] = &[
    (repeat::NAME, |a| repeat::on_answer(&a.view(), a.latest())),
    (stagnation::NAME, |a| {
        (!a.scripted)
            .then(|| stagnation::on_answer(&a.view(), a.latest()))
            .flatten()
    }),
    (cycle::NAME, |a| {
        (!a.scripted)
            .then(|| cycle::on_answer(&a.view(), a.latest()))
            .flatten()
    }),
    (failures::NAME, |a| {
        (!a.scripted)
            .then(|| failures::on_answer(&a.view(), a.latest()))
            .flatten()
    }),
    (modification::NAME, modification::on_answer),
    (circular::NAME, circular::on_answer),
];

/// Every detector that judges a prompt.
pub const AT_PROMPT: &[(&str, AtPrompt)] = &[(breaker::NAME, breaker::at_prompt)];

/// Every detector that judges a batch of calls as a whole.
pub const AFTER_BATCH: &[(&str, AfterBatch)] = &[(script::NAME, script::after_batch)];

/// Every detector that judges a turn's end (the Stop gate).
pub const AT_STOP: &[(&str, AtStop)] = &[(progress::NAME, progress::at_stop)];

/// `Bash \`npm test\`` or `Edit src/a.rs`: how messages name a call.
pub fn describe(tool: &str, target: &str) -> String {
    if target.is_empty() {
        tool.to_string()
    } else if tool == "Bash" {
        format!("Bash `{target}`")
    } else {
        format!("{tool} {target}")
    }
}
