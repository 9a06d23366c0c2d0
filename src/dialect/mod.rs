//! Dialects at the edge, one engine inside. Each agent CLI that runs hook commands sends its own
//! payload shape and obeys its own answer shape (`../shared/agents/*/hooks-observed.md`). An input
//! dialect turns a payload into the Claude-shaped hook event the engine reads (Claude Code's tool
//! names and input keys are loopgate's canonical ones); an output dialect renders a verdict into the
//! JSON and exit code that CLI acts on. The detectors never know which CLI they serve.

use clap::ValueEnum;

/// The agent CLI a hook call comes from: `--agent NAME` on the hook command, else detected from the
/// payload and environment, else Claude Code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Agent {
    /// Claude Code (the default)
    Claude,
    /// OpenAI Codex CLI
    Codex,
    /// Google Gemini CLI
    Gemini,
    /// Qwen Code
    Qwen,
    /// GitHub Copilot CLI
    Copilot,
}

impl Agent {
    pub const ALL: [Agent; 5] = [
        Agent::Claude,
        Agent::Codex,
        Agent::Gemini,
        Agent::Qwen,
        Agent::Copilot,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Qwen => "qwen",
            Agent::Copilot => "copilot",
        }
    }

    pub fn parse(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.name() == name)
    }

    /// What people call it.
    pub fn title(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Codex => "Codex CLI",
            Agent::Gemini => "Gemini CLI",
            Agent::Qwen => "Qwen Code",
            Agent::Copilot => "Copilot CLI",
        }
    }
}
