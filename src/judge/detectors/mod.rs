//! Detectors are pure functions of the observation ledger, the world state and the call or answer
//! in front of them; none of them keeps a counter of its own or renders hook JSON. The registry
//! below is the whole list: the engine runs every entry, and the policy (the strongest verdict)
//! picks the answer. Adding a detector is one file and one line here.

pub mod breaker;
pub mod ceiling;
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
use crate::judge::ledger::{Entry, Ledger, World};
use crate::protocol::tool::ToolClass;
use crate::protocol::verdict::Verdict;
use crate::util::canon::Digest16;
use serde_json::Value;

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
}

/// Judges a call before it runs.
pub type BeforeCall = fn(&View, &Call) -> Option<Verdict>;
/// Judges an answer just added to the ledger (the last entry).
pub type AfterAnswer = fn(&View, &Entry) -> Option<Verdict>;

/// Every detector that can refuse a call, by name.
pub const BEFORE_CALL: &[(&str, BeforeCall)] = &[
    (repeat::NAME, repeat::check),
    (environment::NAME, environment::check),
    (stagnation::NAME, stagnation::check),
];

/// Every detector that reads answers, by name.
pub const AFTER_ANSWER: &[(&str, AfterAnswer)] = &[
    (repeat::NAME, repeat::on_answer),
    (stagnation::NAME, stagnation::on_answer),
    (cycle::NAME, cycle::on_answer),
    (failures::NAME, failures::on_answer),
];

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
