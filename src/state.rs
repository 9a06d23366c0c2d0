//! Per-session loop state: what each agent called, what came back, and where the turn stands.
//! Every collection is capped, so a session of any length keeps a state file of bounded size.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

pub const MAIN_AGENT: &str = "main";
pub const STATE_VERSION: u32 = 1;

/// Call records kept per agent: enough for every pattern window (cycles up to 10 × 2).
pub const MAX_CALLS: usize = 64;
/// Distinct call identities kept per agent; the least recently used are forgotten first.
pub const MAX_RUNS: usize = 192;
/// Agents tracked at once (the main agent plus concurrent subagents).
pub const MAX_AGENTS: usize = 4;
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
    /// Denials and loop warnings loopgate gave during the turn.
    pub interventions: u32,
    /// Model turns (PostToolBatch events) so far, and the last one loopgate intervened in.
    pub batches: u32,
    pub last_intervention_batch: Option<u32>,
    /// Denials and escalations (stages 2 and 3) during the turn.
    pub hard_interventions: u32,
    pub stop_blocks: u32,
    /// The Stop gate's judgement of this turn: `Some(true)` progress, `Some(false)` none.
    pub progress: Option<bool>,
    /// An escalation to the human waiting for the next answer that can carry it.
    pub escalation: Option<String>,
    pub escalations: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentState {
    pub calls: VecDeque<Call>,
    pub runs: BTreeMap<String, Run>,
    /// Bumped by every successful file change and every new prompt: a call made in a later epoch
    /// is a new experiment, not a repeat.
    pub epoch: u64,
    pub consecutive_failures: u32,
    pub failure_streak_since_ms: u64,
    /// Summaries of the latest consecutive failures, for the warning text.
    pub failed_calls: VecDeque<String>,
    pub last_seen_ms: u64,
    /// Identical-failure signatures (tool + input + error class), pruned after two hours.
    pub failure_sigs: BTreeMap<String, FailureSig>,
    /// The per-turn gate's consecutiveness: the last tool and how many times in a row.
    pub last_tool: String,
    pub same_tool_run: u32,
    /// The approach/outcome matrix: what this agent has tried and seen, and its two streaks.
    pub seen_approaches: VecDeque<String>,
    pub seen_outcomes: VecDeque<String>,
    pub stagnation: u32,
    pub stuck: u32,
    /// A sticky block: every call is denied until the next prompt or `loopgate reset`.
    pub blocked: Option<StickyBlock>,
    /// Recent edits, for modification loops.
    pub edits: VecDeque<EditRec>,
    /// A repeating pattern seen twice already: its next call is denied (stage 2).
    pub pattern_next: Option<PatternMark>,
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

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PatternMark {
    pub key: String,
    pub reason: String,
    pub epoch: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FailureSig {
    pub key: String,
    pub tool: String,
    pub target: String,
    pub class: crate::outcome::ErrorClass,
    pub error: String,
    pub count: u32,
    pub epoch: u64,
    pub first_ms: u64,
    pub last_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StickyBlock {
    pub detector: String,
    pub reason: String,
    pub since_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Pending,
    Ok,
    Failed,
    /// Denied by a PreToolUse hook: it never ran.
    Denied,
    /// Rejected by Claude Code's input validation before any tool hook fired.
    Rejected,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Call {
    pub id: String,
    pub tool: String,
    pub key: String,
    pub target: String,
    pub at_ms: u64,
    pub epoch: u64,
    pub status: CallStatus,
    #[serde(default)]
    pub outcome: Option<String>,
}

/// Everything known about one call identity (tool + canonical input).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Run {
    pub tool: String,
    pub target: String,
    /// Identical calls in a row that learned nothing: same outcome, same epoch.
    pub count: u32,
    pub outcome: Option<String>,
    pub epoch: u64,
    /// When the current streak of identical calls began.
    pub streak_ms: u64,
    /// Whether the latest outcome was a failure.
    pub failed: bool,
    /// Calls of this identity in the current epoch, whatever they returned (the gate's ceiling).
    pub epoch_calls: u32,
    pub epoch_of_calls: u64,
    /// Start times of the latest calls, for the sliding call-rate window.
    pub recent_ms: VecDeque<u64>,
    /// Blocked by the per-turn gate for the rest of this turn (turn number, reason).
    pub blocked_turn: Option<u32>,
    pub blocked_reason: String,
    /// Every call of this identity in the session (strict mode counts these).
    pub total: u32,
    pub first_ms: u64,
    pub last_ms: u64,
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
            session: crate::payload::clip(session_id, 128),
            started_ms: now_ms,
            ..Default::default()
        }
    }

    /// The agent's state, created on first sight; the least recently seen agent is forgotten when
    /// too many run at once (the main agent is never evicted).
    pub fn agent_mut(&mut self, agent: &str, now_ms: u64) -> &mut AgentState {
        if !self.agents.contains_key(agent) {
            while self.agents.len() >= MAX_AGENTS {
                let victim = self
                    .agents
                    .iter()
                    .filter(|(k, _)| k.as_str() != MAIN_AGENT)
                    .min_by_key(|(_, a)| a.last_seen_ms)
                    .map(|(k, _)| k.clone());
                match victim {
                    Some(k) => self.agents.remove(&k),
                    None => break,
                };
            }
        }
        let key = crate::payload::clip(agent, 64);
        let a = self.agents.entry(key).or_default();
        a.last_seen_ms = a.last_seen_ms.max(now_ms);
        a
    }

    pub fn note(&mut self, note: DecisionNote) {
        if self.recent.len() >= MAX_RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(note);
    }

    /// Clears loop state (calls, runs, counters, turn signals) but keeps identity and totals.
    pub fn reset_loops(&mut self) {
        self.agents.clear();
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

impl AgentState {
    pub fn push_call(&mut self, call: Call) {
        if self.calls.len() >= MAX_CALLS {
            self.calls.pop_front();
        }
        self.calls.push_back(call);
    }

    /// The call a Post event reports on: by `tool_use_id`, else the latest pending call with the
    /// same identity (older payloads without ids).
    pub fn find_call(&mut self, id: &str, key: &str) -> Option<&mut Call> {
        if !id.is_empty() {
            return self.calls.iter_mut().rev().find(|c| c.id == id);
        }
        self.calls
            .iter_mut()
            .rev()
            .find(|c| c.key == key && c.status == CallStatus::Pending)
    }

    pub fn run_mut(&mut self, key: &str, tool: &str, target: &str, now_ms: u64) -> &mut Run {
        if !self.runs.contains_key(key) && self.runs.len() >= MAX_RUNS {
            if let Some(old) = self
                .runs
                .iter()
                .min_by_key(|(_, r)| r.last_ms)
                .map(|(k, _)| k.clone())
            {
                self.runs.remove(&old);
            }
        }
        let r = self.runs.entry(key.to_string()).or_insert_with(|| Run {
            tool: tool.to_string(),
            target: target.to_string(),
            first_ms: now_ms,
            ..Default::default()
        });
        r.last_ms = r.last_ms.max(now_ms);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(i: usize) -> Call {
        Call {
            id: format!("t{i}"),
            tool: "Bash".into(),
            key: format!("k{i}"),
            target: "x".into(),
            at_ms: i as u64,
            epoch: 0,
            status: CallStatus::Pending,
            outcome: None,
        }
    }

    #[test]
    fn collections_stay_bounded() {
        let mut s = SessionState::new("s", 0);
        for i in 0..10 {
            s.agent_mut(&format!("sub{i}"), i);
        }
        s.agent_mut(MAIN_AGENT, 100);
        assert!(s.agents.len() <= MAX_AGENTS);
        assert!(s.agents.contains_key(MAIN_AGENT));
        let a = s.agent_mut(MAIN_AGENT, 100);
        for i in 0..1000 {
            a.push_call(call(i));
            a.run_mut(&format!("k{i}"), "Bash", "x", i as u64);
        }
        assert_eq!(a.calls.len(), MAX_CALLS);
        assert_eq!(a.runs.len(), MAX_RUNS);
        assert!(a.runs.contains_key("k999"), "newest identity kept");
        assert!(!a.runs.contains_key("k0"), "oldest identity forgotten");
    }

    #[test]
    fn find_call_by_id_then_by_pending_key() {
        let mut a = AgentState::default();
        a.push_call(call(1));
        assert!(a.find_call("t1", "zz").is_some());
        assert!(a.find_call("", "k1").is_some());
        assert!(a.find_call("nope", "k1").is_none());
    }
}
