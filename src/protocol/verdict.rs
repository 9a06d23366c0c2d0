//! Verdicts are data: every detector returns what it saw and what it would do, and only the
//! render layer turns the winning verdict into Claude Code's JSON.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a verdict asks for, weakest first: the strongest one decides the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Tell the model (additionalContext) and the human (systemMessage); the call proceeds.
    Warn,
    /// Refuse this tool call (PreToolUse) or the end of the turn (Stop).
    Deny,
    /// Put the decision in front of the person (PreToolUse `ask`).
    Ask,
    /// End the run: nobody is attending and guidance has failed.
    Halt,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Warn => "warn",
            Action::Deny => "deny",
            Action::Ask => "ask",
            Action::Halt => "halt",
        }
    }
}

/// The design's grading of how long a loop has run (seed 001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    /// low 3–4, medium 5–6, high 7–9, critical 10+ repetitions.
    pub fn of_count(n: u32) -> Severity {
        match n {
            0..=4 => Severity::Low,
            5..=6 => Severity::Medium,
            7..=9 => Severity::High,
            _ => Severity::Critical,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub detector: &'static str,
    pub action: Action,
    pub severity: Severity,
    /// What the model reads: what was observed and what to do instead.
    pub reason: String,
    /// Counts and keys behind the decision, for the event log.
    pub evidence: Map<String, Value>,
    /// A warning that a loop is under way, as opposed to an advisory hint: it counts as an
    /// intervention for the escalation ladder and the Stop gate, as every denial does.
    pub loop_warning: bool,
}

impl Verdict {
    pub fn new(detector: &'static str, action: Action, severity: Severity, reason: String) -> Self {
        Verdict {
            detector,
            action,
            severity,
            reason,
            evidence: Map::new(),
            loop_warning: false,
        }
    }

    /// A verdict on a prompt past a loop bound: refused unless a person is known to attend the
    /// session ([`refuses_prompt`]), else it goes ahead and only the person is told (`attended`
    /// in the evidence: true, false, or null when the CLI does not say).
    pub fn on_prompt(detector: &'static str, attended: Option<bool>, reason: String) -> Self {
        let action = if refuses_prompt(attended) {
            Action::Deny
        } else {
            Action::Warn
        };
        Verdict::new(detector, action, Severity::Critical, reason).with("attended", attended)
    }

    pub fn loop_warning(mut self) -> Self {
        self.loop_warning = true;
        self
    }

    /// Denials, and warnings that a loop is under way, are interventions; advisory hints are not.
    pub fn is_intervention(&self) -> bool {
        self.action >= Action::Deny || self.loop_warning
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.evidence.insert(key.to_string(), value.into());
        self
    }
}

/// Whether a prompt past a loop bound (the breaker open, the session's ceiling, an outer loop's
/// identical sessions) is refused: unless a person is known to attend. Only Claude Code says
/// (`CLAUDE_CODE_SESSION_ATTENDED`); elsewhere a headless run of an outer loop and a person at
/// the keyboard look alike, and the loop left to go round is what costs, while a person whose
/// prompt is refused is told the way out.
pub fn refuses_prompt(attended: Option<bool>) -> bool {
    attended != Some(true)
}

/// The verdict that decides the answer: strongest action, then highest severity; the first
/// detector wins ties so the order detectors run in is the tie-break.
pub fn strongest(verdicts: &[Verdict]) -> Option<&Verdict> {
    strongest_at(verdicts).map(|i| &verdicts[i])
}

/// [`strongest`], to add to the deciding verdict's evidence.
pub fn strongest_mut(verdicts: &mut [Verdict]) -> Option<&mut Verdict> {
    strongest_at(verdicts).map(|i| &mut verdicts[i])
}

fn strongest_at(verdicts: &[Verdict]) -> Option<usize> {
    verdicts
        .iter()
        .enumerate()
        .max_by_key(|(i, v)| (v.action, v.severity, std::cmp::Reverse(*i)))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_follows_the_design_grades() {
        assert_eq!(Severity::of_count(3), Severity::Low);
        assert_eq!(Severity::of_count(6), Severity::Medium);
        assert_eq!(Severity::of_count(9), Severity::High);
        assert_eq!(Severity::of_count(10), Severity::Critical);
    }

    #[test]
    fn strongest_action_wins_then_first_detector() {
        let w = Verdict::new("a", Action::Warn, Severity::Critical, "w".into());
        let d1 = Verdict::new("b", Action::Deny, Severity::Low, "d1".into());
        let d2 = Verdict::new("c", Action::Deny, Severity::Low, "d2".into());
        assert_eq!(strongest(&[w.clone(), d1, d2]).unwrap().reason, "d1");
        assert_eq!(strongest(&[w]).unwrap().detector, "a");
        assert!(strongest(&[]).is_none());
    }
}
