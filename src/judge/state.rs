//! Per-session loop state: what each agent called, what came back, and where the turn stands.
//! Every collection is capped, so a session of any length keeps a state file of bounded size.

use crate::judge::ledger::{Ledger, World};
use crate::protocol::payload::MAIN_AGENT;
use crate::util::canon::Digest16;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

pub const STATE_VERSION: u32 = 2;

/// Agents tracked at once: the main agent and the 20 subagents Claude Code runs at once (with
/// fewer, subagents taking turns evicted one another before any could repeat itself).
pub const MAX_AGENTS: usize = 21;
/// Finished turns remembered for recognising a repeated turn.
pub const MAX_TURNS: usize = 12;
/// Decisions kept for `status`.
pub const MAX_RECENT: usize = 10;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionState {
    pub version: u32,
    /// The session id, clipped, for display only (file names come from its hash).
    pub session: String,
    pub started_ms: u64,
    pub updated_ms: u64,
    pub turn: Turn,
    pub agents: BTreeMap<String, AgentState>,
    pub totals: Totals,
    pub recent: VecDeque<DecisionNote>,
    pub breaker: Breaker,
    /// The content-addressed state of the work, shared by every agent.
    pub world: World,
    /// Signatures of the latest finished turns.
    pub turns: VecDeque<TurnSig>,
    /// The bounds nothing but the person resets. States of formats before 3 end before it, and
    /// decode with its default (`codec`).
    pub ceiling: Ceiling,
    /// What the waiting rules and the ceiling need beyond the ledger. Keep it the last field:
    /// states of formats before 5 end before it, and decode with its default (`codec`).
    pub heed: Heed,
    /// When loopgate last wrote this state. Keep it the last field: states of formats before 7
    /// end before it, and decode with its default (`codec`).
    pub written: Written,
    /// Prompts (digests) of the turns the circuit breaker counted as trying and failing, newest
    /// last: only one of these sent again is an outer loop re-feeding it, the one kind of prompt
    /// an open breaker may refuse. Keep it the last field: states of formats before 8 end before
    /// it, and decode with its default (`codec`).
    pub failed_prompts: VecDeque<Digest16>,
    /// The session's halts: the last one with its evidence, for scripts and the person's
    /// `/loopgate continue`. Keep it the last field: states of formats before 9 end before it,
    /// and decode with its default (`codec`).
    pub halts: Halts,
    /// What the session's loops cost, against the loop budget (`judge::budget`). Keep it the
    /// last field: states of formats before 11 end before it, and decode with its default
    /// (`codec`).
    pub budget: LoopBudget,
    /// Subagents whose record was dropped by this call while it held failing calls (a loop it may
    /// be in): never saved, told to the person by the hook.
    #[serde(skip)]
    pub evicted: Vec<String>,
}

/// The session's halts: the last one, and how many there were. Keep the fields' order: the
/// state's binary format encodes them in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Halts {
    pub last: Option<Halt>,
    pub count: u32,
    /// Stops in a row another hook kept from ending the turn (`judge::halt`).
    pub stop_loop: StopLoop,
}

/// Stops of one turn that came back with nothing done between, after loopgate let the previous
/// one end: another hook blocked them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StopLoop {
    pub turn: u32,
    /// Stops seen in this turn, in a row, with no tool call between.
    pub stops: u32,
    /// Whether loopgate itself blocked the last one (its own gate): then the next is no sign of
    /// another hook.
    pub ours: bool,
    pub first_ms: u64,
    /// The session's call count and its count of new states of the work at the last Stop:
    /// either moving is something done between. (Not the epoch: a re-fed prompt moves that.)
    pub calls: u64,
    pub states: u32,
}

/// The session's loop spend (issue 39): tokens and dollars of calls inside a detected loop, the
/// open loop window, and what the person granted. Keep the fields' order: the state's binary
/// format encodes them in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoopBudget {
    /// Spend in loops, this session, all agents.
    pub usd: f64,
    pub tokens: u64,
    /// Model responses counted (each once).
    pub responses: u64,
    /// The open loop window: since when calls are waste, and the world's epoch then (a new
    /// state of the work closes it). `None`: no loop under way.
    pub since_ms: Option<u64>,
    pub epoch: u32,
    pub turn: u32,
    /// The latest model response counted, by its time: nothing at or before it counts again.
    pub counted_ms: u64,
    /// Claude Code's own session cost at the previous loop call, as loopgate's status line
    /// recorded it; the next loop call's dollars are the difference.
    pub live_mark: Option<f64>,
    /// Spend the person let go on by continuing (`/loopgate continue`): the bound counts from it.
    pub forgiven_usd: f64,
    pub forgiven_tokens: u64,
    /// Dollars the person added to this session's bound (`/loopgate budget +N`).
    pub raised_usd: f64,
    /// The day's spend the person let go on for this session (the backstop counts from it).
    pub day_forgiven_usd: f64,
    /// The day (UTC) and its loop spend across every session, as last read from the day ledger.
    pub day: String,
    pub day_usd: f64,
    pub day_tokens: u64,
    /// Warned once per bound: the session's, then the day's (reset by a continue).
    pub warned: bool,
    pub day_warned: bool,
    /// Loop windows opened in this session, and the detectors that opened the latest, for the
    /// halt's evidence.
    pub loops: u32,
    pub detectors: Vec<String>,
}

/// One halt: loopgate ended a turn or a session (`judge::halt` decides and lifts them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Halt {
    pub code: String,
    pub at_ms: u64,
    pub turn: u32,
    /// The hook event that delivered it.
    pub event: String,
    pub detector: String,
    /// What the agent was told, secrets masked.
    pub reason: String,
    /// The deciding verdict's evidence as JSON text (the state's format is not self-describing).
    pub evidence: String,
    /// When the person continued the session after it (`/loopgate continue`).
    pub continued_ms: Option<u64>,
}

impl Halt {
    /// Whether it still stands: not continued since.
    pub fn stands(&self) -> bool {
        self.continued_ms.is_none()
    }

    pub fn evidence_value(&self) -> serde_json::Value {
        serde_json::from_str(&self.evidence).unwrap_or(serde_json::Value::Null)
    }
}

/// When loopgate wrote the state, by the system clock, and how far the file system's change time
/// of its own writes runs from that clock (a network file system's server keeps its own): a
/// state file whose change time runs far beyond was written by something else since, such as an
/// earlier copy put back to lower the loop counts (issue 30).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Written {
    /// 0: not known (a state from before format 7).
    pub at_ms: u64,
    /// The change time of loopgate's previous write minus its `at_ms`; `None` until seen once.
    pub skew_ms: Option<i64>,
}

/// Whether the agent heeds what it was told (issue 27): when each agent last learned something
/// new, and the refusals of the turn it walked into regardless. The ceiling counts only those:
/// one misjudged refusal, or one call refused again while real time passes, never ends a turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Heed {
    /// Per agent key: when it last had news (an answer it had not had before, a new state of
    /// the work, a new prompt). A wait is judged by the time since, however long the ledger.
    pub news_ms: BTreeMap<String, u64>,
    /// The turn `standing` and `defied` belong to.
    pub turn: u32,
    /// The turn's latest refusal: what must change before another refusal is not defiance.
    pub standing: Option<Standing>,
    /// Refusals the agent walked into in that turn, oldest first: the ceiling's evidence.
    pub defied: VecDeque<Defied>,
    /// The configuration in effect when the session began (or was last told of a change), as
    /// its encoding: a later call that finds it loosened tells the person once (issue 30). Must
    /// stay the last field: format 5 states are read by appending its default (`codec`).
    pub config: Vec<u8>,
}

/// A refusal the agent has been told of.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Standing {
    pub at_ms: u64,
    /// The world's epoch then: a new state of the work clears it.
    pub epoch: u32,
    pub agent: String,
    /// The refused call was a wait: real time passing is itself what changes.
    pub wait: bool,
    /// Already counted as defied (the first refusal counts once the agent walks into another).
    pub counted: bool,
    pub what: String,
    pub detector: String,
}

/// One refusal the agent walked into.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Defied {
    pub at_ms: u64,
    pub what: String,
    pub detector: String,
}

/// Evidence kept per turn.
pub const MAX_DEFIED: usize = 12;

impl Heed {
    /// Follows the main agent's turn: a new turn starts with nothing standing.
    pub fn follow(&mut self, turn: u32) {
        if self.turn != turn {
            self.turn = turn;
            self.standing = None;
            self.defied.clear();
        }
    }

    pub fn news_of(&self, agent: &str) -> u64 {
        self.news_ms.get(agent).copied().unwrap_or(0)
    }

    /// The agent learned something new at `now_ms`. Agents forgotten are forgotten here too
    /// ([`SessionState::enforce_agent_cap`]).
    pub fn news(&mut self, agent: &str, now_ms: u64) {
        let t = self.news_ms.entry(agent.to_string()).or_default();
        *t = (*t).max(now_ms);
    }

    pub fn note_defied(&mut self, d: Defied) {
        if self.defied.len() >= MAX_DEFIED {
            self.defied.pop_front();
        }
        self.defied.push_back(d);
    }
}

/// Refused calls are loop evidence themselves (issue 22): past a bound in one turn the turn is
/// ended, and past a bound of such turns the session's next unattended prompt is refused. No
/// `ask` answered yes, cooldown, new prompt or agent-run command lowers `ended_turns`; only
/// `loopgate reset` by the person does.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Ceiling {
    /// The turn `refusals`, `ended` and `halted` count for.
    pub turn: u32,
    /// Calls refused (denied, asked about, warned about as a loop) in that turn.
    pub refusals: u32,
    /// That turn reached the bound: every later call of it is refused, and it is ended.
    pub ended: bool,
    /// The end of that turn was delivered (a batch block, or a halt before a tool).
    pub halted: bool,
    /// Turns of this session ended at the bound.
    pub ended_turns: u32,
    pub last_ended_ms: u64,
    /// Recent calls made by Code Mode scripts, `(call key, time)`, for the proxy level's window.
    pub script_calls: VecDeque<(Digest16, u64)>,
    /// Script steps of the turn, `(turn, signature of its calls and results)`.
    pub script_steps: VecDeque<(u32, Digest16)>,
    /// Copilot CLI's permission hook, the one channel that ends its run mid-turn. Must stay the
    /// last field: format 3 states are read by appending its default (`codec`).
    pub permission: PermissionGate,
}

/// What loopgate knows of a CLI's permission hook in this session (Copilot CLI only).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PermissionGate {
    /// The hook fired in this session: it is wired, and a shell or write call let past
    /// PreToolUse reaches it. Until then no call past the ceiling is let through.
    pub seen: bool,
    /// The call let past PreToolUse so the permission hook ends the run (its call key); a result
    /// for it with no permission call in between means the hook no longer fires.
    pub passed: Option<Digest16>,
}

impl Ceiling {
    /// Follows the main agent's turn: a new turn starts its count from zero, never the session's.
    pub fn follow(&mut self, turn: u32) {
        if self.turn != turn {
            self.turn = turn;
            self.refusals = 0;
            self.ended = false;
            self.halted = false;
            if self.permission.passed.is_some() {
                // The call let through to the permission hook never reached it.
                self.permission = PermissionGate::default();
            }
        }
    }
}

/// Ralph's circuit breaker across turns: CLOSED → HALF_OPEN → OPEN on turns without progress.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Breaker {
    pub state: BreakerState,
    pub no_progress_turns: u32,
    pub opened_ms: u64,
    pub history: VecDeque<Transition>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BreakerState {
    #[default]
    Closed,
    HalfOpen,
    Open,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Transition {
    pub at_ms: u64,
    pub from: String,
    pub to: String,
    pub reason: String,
}

/// The main agent's current turn: from a user prompt to the Stop that ends it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Turn {
    pub prompt_id: Option<String>,
    pub number: u32,
    pub started_ms: u64,
    /// Worktree fingerprint when the turn began; `None` outside git or before it was taken.
    pub baseline: Option<String>,
    pub edit_attempts: u32,
    pub edit_failures: u32,
    pub edits_ok: u32,
    /// Successful file changes seen through tool events (any agent).
    pub changes: u32,
    /// Model turns in which the agent walked into a refusal (`engine::defiance`): what arms the
    /// Stop gate and the ladder. Warnings and refusals heeded are not counted.
    pub interventions: u32,
    /// Model turns (PostToolBatch events) so far, and the last one loopgate intervened in.
    pub batches: u32,
    pub last_intervention_batch: Option<u32>,
    /// Refusals walked into and escalations (stages 2 and 3) during the turn.
    pub hard_interventions: u32,
    pub stop_blocks: u32,
    /// The Stop gate's judgement of this turn: `Some(true)` progress, `Some(false)` none.
    pub progress: Option<bool>,
    /// An escalation to the human waiting for the next answer that can carry it.
    pub escalation: Option<String>,
    pub escalations: u32,
    /// The world state and how many new states the session had when the turn began.
    pub start_world: Digest16,
    pub start_novel: u32,
    /// Digest of the prompt text, when the prompt was seen (UserPromptSubmit).
    pub prompt: Option<Digest16>,
    /// Calls whose refusal the agent walked into in this turn: the ladder's last stage needs two
    /// different ones across batches, never one batch.
    pub intervened_keys: Vec<Digest16>,
    /// Judged for the breaker already (a refused prompt ends a turn without starting one).
    pub ended: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentState {
    /// What each call did and returned: the one source every detector reads.
    pub ledger: Ledger,
    pub last_seen_ms: u64,
    /// Recent edits, for modification loops (hashed lines, never the code).
    pub edits: VecDeque<EditRec>,
    /// Import cycles already named, so each is reported once.
    pub cycles_named: VecDeque<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EditRec {
    pub path: String,
    /// Hashes of the meaningful lines the edit touched (never the code itself).
    pub lines: Vec<u32>,
    pub at_ms: u64,
    pub ok: bool,
}

/// What a finished turn was, for recognising the same turn again (a Ralph-style outer loop).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TurnSig {
    pub number: u32,
    /// Digest of the prompt, its (call, answer) pairs and the state it ended in.
    pub signature: Digest16,
    pub ended_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    pub calls: u64,
    pub failures: u64,
    pub denials: u64,
    pub warnings: u64,
    pub blocks: u64,
    pub escalations: u64,
    /// Turns in which loopgate intervened, and how many of them still ended with progress.
    pub turns_with_interventions: u64,
    pub intervened_turns_with_progress: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DecisionNote {
    pub at_ms: u64,
    pub agent: String,
    pub event: String,
    pub tool: String,
    pub detector: String,
    pub action: String,
    pub severity: String,
    pub enforced: bool,
    pub summary: String,
}

impl SessionState {
    pub fn new(session_id: &str, now_ms: u64) -> Self {
        SessionState {
            version: STATE_VERSION,
            session: crate::protocol::payload::clip(session_id, 128),
            started_ms: now_ms,
            ..Default::default()
        }
    }

    /// Keeps at most [`MAX_AGENTS`] agents, forgetting the least recently seen subagent first (the
    /// main agent is never evicted), so any number of subagents each keep being judged.
    pub fn enforce_agent_cap(&mut self) {
        while self.agents.len() > MAX_AGENTS {
            // A subagent whose recent calls failed may be in a loop: it is forgotten only after
            // every subagent with nothing failing, so ordinary ones taking turns cannot evict it.
            let victim = self
                .agents
                .iter()
                .filter(|(k, _)| k.as_str() != MAIN_AGENT)
                .min_by_key(|(_, a)| {
                    let failing = a.ledger.answers().any(|e| e.status.failed());
                    (failing, a.last_seen_ms)
                })
                .map(|(k, _)| k.clone());
            let Some(k) = victim else { break };
            if let Some(gone) = self.agents.remove(&k) {
                if gone.ledger.answers().any(|e| e.status.failed()) {
                    self.evicted.push(k);
                }
            }
        }
        let agents = &self.agents;
        self.heed
            .news_ms
            .retain(|k, _| k == MAIN_AGENT || agents.contains_key(k));
    }

    pub fn note(&mut self, note: DecisionNote) {
        if self.recent.len() >= MAX_RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(note);
    }

    /// Whether the session's decisions were all only logged (observe mode): its counts are of
    /// what loopgate would have done, never of refusals.
    pub fn observed(&self) -> bool {
        let mut decisions = self
            .recent
            .iter()
            .filter(|n| n.event != "reset" && n.action != "told")
            .peekable();
        decisions.peek().is_some() && decisions.all(|n| !n.enforced)
    }

    /// Clears loop state (calls, runs, counters, turn signals) but keeps identity and totals.
    pub fn reset_loops(&mut self) {
        self.agents.clear();
        // The person's reset is the one thing that lowers the ceiling.
        self.ceiling = Ceiling::default();
        self.heed = Heed::default();
        self.failed_prompts.clear();
        self.world.new_prompt();
        let turn = std::mem::take(&mut self.turn);
        self.turn = Turn {
            prompt_id: turn.prompt_id,
            number: turn.number,
            started_ms: turn.started_ms,
            baseline: turn.baseline,
            ..Default::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failing subagent outlives any number of ordinary ones taking turns after it.
    #[test]
    fn a_failing_subagent_is_forgotten_after_the_ordinary_ones() {
        let mut s = SessionState::new("s", 0);
        let failed = crate::judge::ledger::Entry {
            key: Default::default(),
            id: 0,
            tool: "Bash".into(),
            target: "make".into(),
            class: crate::protocol::tool::ToolClass::of("Bash"),
            status: crate::judge::ledger::Status::Failed,
            answer: None,
            shape: None,
            rich: false,
            error_class: None,
            preview: String::new(),
            epoch: 0,
            epoch_after: 0,
            novel: false,
            waited: false,
            sleeps: false,
            under_way: false,
            news: false,
            start_ms: 1,
            end_ms: 1,
            turn: 0,
            batch: 0,
        };
        let looping = s.agents.entry("looping".into()).or_default();
        looping.last_seen_ms = 1;
        looping.ledger.push(failed);
        for i in 0..60 {
            s.agents.entry(format!("sub{i}")).or_default().last_seen_ms = 10 + i;
            s.enforce_agent_cap();
        }
        assert!(s.agents.contains_key("looping"));
        assert_eq!(s.agents.len(), MAX_AGENTS);
    }

    #[test]
    fn agents_are_evicted_least_recently_seen_first_never_main() {
        let mut s = SessionState::new("s", 0);
        for (i, name) in std::iter::once(MAIN_AGENT.to_string())
            .chain((0..30).map(|i| format!("sub{i}")))
            .enumerate()
        {
            s.agents.entry(name).or_default().last_seen_ms = i as u64;
            s.enforce_agent_cap();
        }
        assert_eq!(s.agents.len(), MAX_AGENTS);
        assert!(s.agents.contains_key(MAIN_AGENT));
        assert!(
            s.agents.contains_key("sub29"),
            "the newest subagent is kept"
        );
        assert!(
            !s.agents.contains_key("sub0"),
            "the least recently seen is forgotten"
        );
    }
}
