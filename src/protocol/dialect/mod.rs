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
    /// OpenCode, through loopgate's plugin (it runs no hook commands)
    #[value(name = "opencode")]
    OpenCode,
    /// Kilo CLI (OpenCode's core, the same plugin API), through loopgate's plugin
    Kilo,
}

impl Agent {
    pub const ALL: [Agent; 7] = [
        Agent::Claude,
        Agent::Codex,
        Agent::Gemini,
        Agent::Qwen,
        Agent::Copilot,
        Agent::OpenCode,
        Agent::Kilo,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Qwen => "qwen",
            Agent::Copilot => "copilot",
            Agent::OpenCode => "opencode",
            Agent::Kilo => "kilo",
        }
    }

    /// OpenCode and Kilo CLI run no hook command: loopgate's plugin runs the binary and carries
    /// out its answer (`docs/opencode-observed.md`), so both speak the plugin's dialect.
    pub fn is_plugin(self) -> bool {
        matches!(self, Agent::OpenCode | Agent::Kilo)
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
            Agent::OpenCode => "OpenCode",
            Agent::Kilo => "Kilo CLI",
        }
    }
}

mod input;
mod output;
mod patch;

pub use input::{automatic_prompt, canonical_call, recorded_answer, shaped};
pub use output::answer;

use crate::protocol::payload::{Event, Payload};
use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// A hook call, read in its CLI's dialect.
pub enum Read {
    Judge {
        agent: Agent,
        payload: Box<Payload>,
        event: Event,
    },
    /// Nothing loopgate acts on (see [`input::translate`]); the answer is empty.
    Skip(Agent),
}

impl Read {
    pub fn agent(&self) -> Agent {
        match self {
            Read::Judge { agent, .. } | Read::Skip(agent) => *agent,
        }
    }
}

/// What a CLI can and cannot do that changes how the engine acts (the detectors stay the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// It reports each model turn's calls together after they ran (Claude Code's PostToolBatch).
    /// Without it a model turn is the calls between one answer and the next call.
    pub batch_event: bool,
    /// A call that fails before it runs gets a PreToolUse and then nothing at all (Codex: a patch
    /// that does not apply, a command that cannot start), so the same call again means the
    /// earlier one failed.
    pub silent_failures: bool,
    /// It can end the run mid-turn: Claude Code at a PostToolBatch, Gemini before a tool. Without
    /// it the ladder's last stage is a standing denial for the rest of the turn.
    pub halt: bool,
    /// Where a turn that reached the loop ceiling is ended.
    pub turn_end: TurnEnd,
    /// It lets hooks block the turn's end again and again, and honours a Stop answer that ends it
    /// (`continue: false`) over another hook's block: Claude Code, Codex and Gemini CLI
    /// (observed, `docs/stop-hook-loops.md`). loopgate ends another hook's endless Stop blocks there.
    pub stop_end: bool,
}

/// The strongest channel a CLI honours to end a turn, each observed with the real CLI
/// (`docs/agents.md`, "Ending a turn").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// At the model turn's batch event: Claude Code's PostToolBatch `decision: block` stops the
    /// run at once.
    Batch,
    /// Before the tool: Gemini's BeforeTool `continue: false` ends the run; OpenCode's and Kilo's
    /// plugin aborts the session from `tool.execute.before` (observed: no model request follows).
    BeforeTool,
    /// At the hook before the next model request: Qwen Code fires UserPromptSubmit (empty
    /// prompt) before every model request, and a block there ends the run with no request. The
    /// dialect reads that call as the model turn's batch event.
    NextRequest,
    /// At the permission hook: Copilot CLI ignores `continue: false` everywhere, but its
    /// permissionRequest hook's deny with `interrupt: true` ends the run at once (observed). It
    /// fires only for a shell or write call that preToolUse let through, so once the turn is
    /// over such a call is let through to it, where the hook was seen firing in the session.
    Permission,
    /// Nowhere: Codex honours no answer that ends a run mid-turn, so every later call of the
    /// turn is refused.
    Refusals,
}

impl Agent {
    pub fn caps(self) -> Caps {
        Caps {
            batch_event: self == Agent::Claude,
            silent_failures: self == Agent::Codex,
            halt: matches!(
                self,
                Agent::Claude | Agent::Gemini | Agent::OpenCode | Agent::Kilo
            ),
            turn_end: match self {
                Agent::Claude => TurnEnd::Batch,
                Agent::Gemini | Agent::OpenCode | Agent::Kilo => TurnEnd::BeforeTool,
                Agent::Qwen => TurnEnd::NextRequest,
                Agent::Copilot => TurnEnd::Permission,
                Agent::Codex => TurnEnd::Refusals,
            },
            stop_end: matches!(self, Agent::Claude | Agent::Codex | Agent::Gemini),
        }
    }

    /// The exit code of a call that fails open. Copilot reads exit 1 from a preToolUse hook as a
    /// denial (observed), so there a failure exits 0 with its one stderr line.
    pub fn fail_open_code(self) -> u8 {
        match self {
            Agent::Copilot => 0,
            _ => 1,
        }
    }

    /// The project the session works in, from the variable the CLI sets for its hooks. Codex sets
    /// none, and its payload's `cwd` follows the tool's working directory; its hooks run in the
    /// session's directory (observed), so that is the project.
    pub fn project_dir(self) -> Option<PathBuf> {
        let vars: &[&str] = match self {
            Agent::Claude => &["CLAUDE_PROJECT_DIR"],
            Agent::Codex => &[],
            Agent::Gemini => &["GEMINI_PROJECT_DIR", "CLAUDE_PROJECT_DIR"],
            Agent::Qwen => &["QWEN_PROJECT_DIR", "CLAUDE_PROJECT_DIR"],
            Agent::Copilot => &["COPILOT_PROJECT_DIR", "CLAUDE_PROJECT_DIR"],
            Agent::OpenCode | Agent::Kilo => &[],
        };
        // Codex runs its hooks in the session's directory (observed), and loopgate's plugin runs
        // the binary in the directory OpenCode gives plugins: either is the project.
        if matches!(self, Agent::Codex | Agent::OpenCode | Agent::Kilo) {
            return std::env::current_dir().ok();
        }
        vars.iter().find_map(|v| {
            std::env::var_os(v)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
    }
}

/// Reads one hook call. With `--agent` the dialect is the one named; without it Claude Code's
/// payload is parsed as before, and only a payload that is not Claude Code's (or carries another
/// CLI's marks) is read again in the dialect it shows.
pub fn read(flag: Option<Agent>, expected: Event, bytes: &[u8]) -> Result<Read> {
    let (agent, map) = match flag {
        Some(Agent::Claude) => return claude(expected, Payload::parse(bytes)),
        Some(a) => (a, object(bytes)?),
        None => match Payload::parse(bytes) {
            Ok((p, e)) if !p.foreign_marks() => return claude(expected, Ok((p, e))),
            parsed => match object(bytes).ok().and_then(|m| Some((detect(&m)?, m))) {
                Some(found) => found,
                None => return claude(expected, parsed),
            },
        },
    };
    match input::translate(agent, expected, map) {
        input::Translated::Skip => Ok(Read::Skip(agent)),
        input::Translated::Judge(v) => {
            let (payload, event) =
                Payload::from_value(v).with_context(|| format!("{} hook input", agent.title()))?;
            let fits = event == expected
                || (expected == Event::PostToolUse && event == Event::PostToolUseFailure)
                || (expected == Event::UserPromptSubmit && event == Event::PostToolBatch)
                || (expected == Event::Stop && event == Event::SubagentStop);
            if !fits {
                bail!(
                    "the {} hook got a {} payload from {}; check the hook wiring (`loopgate doctor`)",
                    expected.name(),
                    event.name(),
                    agent.title()
                );
            }
            Ok(Read::Judge {
                agent,
                payload: Box::new(payload),
                event,
            })
        }
    }
}

fn object(bytes: &[u8]) -> Result<Map<String, Value>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        bail!("empty hook input on stdin (expected one JSON object)");
    }
    match serde_json::from_slice(bytes).context("hook input is not a valid hook JSON object")? {
        Value::Object(map) => Ok(map),
        _ => bail!("hook input is not a JSON object"),
    }
}

fn claude(expected: Event, parsed: Result<(Payload, Event)>) -> Result<Read> {
    let (payload, event) = parsed?;
    if event != expected {
        bail!(
            "the {} hook got a {} payload; check the hook wiring in settings.json",
            expected.name(),
            event.name()
        );
    }
    Ok(Read::Judge {
        agent: Agent::Claude,
        payload: Box::new(payload),
        event,
    })
}

/// The CLI a payload comes from, by the marks only it leaves (observed fixtures): Gemini's event
/// names, Copilot's camelCase or `tool_result`, Codex's `turn_id`, Qwen's `tool_call_id` and
/// `########` prompt ids. `None`: Claude Code's, or nobody's.
fn detect(m: &Map<String, Value>) -> Option<Agent> {
    let has = |k: &str| m.contains_key(k);
    let event = m.get("hook_event_name").and_then(Value::as_str);
    if matches!(
        event,
        Some("BeforeTool" | "AfterTool" | "AfterAgent" | "BeforeAgent")
    ) {
        return Some(Agent::Gemini);
    }
    let copilot_env = std::env::var_os("COPILOT_CLI").is_some_and(|v| v == "1");
    if (event.is_none() && has("sessionId"))
        || has("tool_result")
        || has("stop_reason")
        || has("parent_agent_id")
        || (copilot_env && has("timestamp"))
    {
        return Some(Agent::Copilot);
    }
    if has("turn_id") {
        return Some(Agent::Codex);
    }
    let qwen_prompt = m
        .get("prompt_id")
        .and_then(Value::as_str)
        .is_some_and(|p| p.contains("########"));
    if has("tool_call_id") || qwen_prompt {
        return Some(Agent::Qwen);
    }
    // Claude Code sends no timestamp; Copilot's PascalCase dialect is left, which carries no
    // prompt id (Qwen's always does).
    if has("timestamp") && !has("prompt_id") {
        return Some(Agent::Copilot);
    }
    None
}
