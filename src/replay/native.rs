//! The hook payloads a session recorded by another agent CLI would have fired, in Claude Code's
//! shape (the engine's canonical one), built from the steps each format's reader finds in the
//! file ([`super::codex`], [`super::gemini`], [`super::copilot`], [`super::opencode`]).
//!
//! Every call goes through the live hook's own mapping for that CLI
//! ([`crate::protocol::dialect::canonical_call`], [`crate::protocol::dialect::recorded_answer`]), so replay judges
//! a call exactly as the hook would have: the same tool name, input keys and answer text. What a
//! file knows beyond the hook (an exit code the hook never sees) decides success or failure; where
//! the file knows no more than the hook, the hook's own reading of the text decides.
//!
//! Only the events that CLI's hooks fire are played: no PostToolBatch (only Claude Code reports a
//! model turn's calls together; Qwen's empty-prompt UserPromptSubmit before every model request
//! after a tool round is read as one, without its calls, as the live dialect reads it), and a
//! call without an answer in the file gets no Post event.

use super::format::Cli;
use super::transcript::{Converted, ConvertedPayload, ReplayCall};
use crate::protocol::dialect;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::SystemTime;

/// A subagent: its id and type, as the hook names them (`agent_id`, `agent_type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Who {
    pub id: String,
    pub kind: String,
}

/// A call's answer as the file recorded it.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The answer in the shape the CLI's hook gets it: Codex the output text, Gemini and Qwen
    /// `{llmContent, error?}`, Copilot `{resultType, textResultForLlm}`, OpenCode the text.
    pub raw: Value,
    /// `Some` where the file says it (an exit code, an error status); `None` where only the text
    /// can tell, as the live hook must judge it.
    pub failed: Option<bool>,
    /// The person stopped the call while it ran.
    pub interrupted: bool,
}

impl Answer {
    pub fn new(raw: Value, failed: Option<bool>) -> Answer {
        Answer {
            raw,
            failed,
            interrupted: false,
        }
    }
}

/// One thing a session file records, in the order it happened.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// The working directory from here on.
    Cwd(String),
    /// The person's prompt (the main agent's turn starts).
    Prompt {
        text: String,
        prompt_id: Option<String>,
    },
    /// A turn that starts without a prompt of the person's (a subagent's task, a turn the CLI
    /// starts itself); for Codex, the turn id its hooks carry as `prompt_id`.
    Begin {
        who: Option<Who>,
        prompt_id: Option<String>,
    },
    /// The model said something.
    Say { who: Option<Who>, text: String },
    /// The model called a tool (the CLI's own name and input); `cwd`: where it ran, where the
    /// CLI's hook says so (Codex: the call's `workdir`).
    Call {
        who: Option<Who>,
        id: String,
        name: String,
        input: Value,
        cwd: Option<String>,
    },
    /// The call's answer.
    Answer {
        who: Option<Who>,
        id: String,
        answer: Answer,
    },
    /// The call never ran (refused, cancelled): no Post event.
    NoAnswer { who: Option<Who>, id: String },
    /// The next model request goes out (Qwen's hook before it).
    ModelRequest { who: Option<Who> },
    /// The turn ended: Stop (SubagentStop for a subagent).
    End {
        who: Option<Who>,
        last_message: Option<String>,
    },
    /// The person interrupted the turn: no Stop.
    Interrupt { who: Option<Who> },
}

/// A step at the time the file gives it (`None`: the time of the step before).
#[derive(Debug, Clone)]
pub(crate) struct Timed {
    pub at: Option<SystemTime>,
    pub step: Step,
}

impl Timed {
    /// The end of a model turn (`who`: a subagent's, or the main agent's), as an end event
    /// that carries no last message fires it.
    pub(crate) fn end(at: Option<SystemTime>, who: Option<Who>) -> Timed {
        Timed {
            at,
            step: Step::End {
                who,
                last_message: None,
            },
        }
    }
}

/// The records of a JSON-lines session file, blank lines left out: `None` for a line that is
/// not JSON (the caller counts it as skipped).
pub(crate) fn json_lines(text: &str) -> impl Iterator<Item = Option<Value>> + '_ {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .flat_map(|l| match line_records(l) {
            Some(records) => records.into_iter().map(Some).collect(),
            None => vec![None],
        })
}

/// The JSON values of one line: one, or several written without a newline between them (seen
/// in Entire's copies of Claude Code transcripts: a `summary` record glued to the line before);
/// `None` when any of it is not JSON.
pub(crate) fn line_records(line: &str) -> Option<Vec<Value>> {
    let mut out = Vec::with_capacity(1);
    for v in serde_json::Deserializer::from_str(line).into_iter::<Value>() {
        out.push(v.ok()?);
    }
    Some(out)
}

/// Milliseconds since the epoch as a time.
pub(crate) fn from_ms(ms: u64) -> SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)
}

/// The files' steps as one timeline: each file keeps its own order, and between files the
/// earlier time goes first (ties to the earlier file, the main session first).
fn merge(files: Vec<Vec<Timed>>) -> Vec<Timed> {
    if files.len() == 1 {
        return files.into_iter().next().unwrap_or_default();
    }
    let keyed: Vec<Vec<(Option<SystemTime>, Timed)>> = files
        .into_iter()
        .map(|steps| {
            let mut last = None;
            steps
                .into_iter()
                .map(|s| {
                    last = s.at.or(last);
                    (last, s)
                })
                .collect()
        })
        .collect();
    super::merge_by_key(keyed)
}

struct Open {
    index: usize,
    cwd: Option<String>,
    tool: String,
    input: Value,
    prompt_id: Option<String>,
    at: Option<SystemTime>,
}

#[derive(Default)]
struct Turn {
    prompt_id: Option<String>,
    /// The model answered in this turn (said something or called a tool).
    activity: bool,
    last_text: String,
    last_at: Option<SystemTime>,
    last_call: Option<usize>,
    /// Calls made since the last model request (Qwen's batch event).
    calls_since_request: bool,
}

struct Builder {
    cli: Cli,
    session_id: String,
    cwd: String,
    out: Vec<ConvertedPayload>,
    call_list: Vec<ReplayCall>,
    /// Open calls by (agent key, call id).
    open: HashMap<(String, String), Open>,
    turns: HashMap<String, Turn>,
    prompts: usize,
}

fn key(who: &Option<Who>) -> String {
    who.as_ref().map(|w| w.id.clone()).unwrap_or_default()
}

impl Builder {
    fn base(&self, who: &Option<Who>, prompt_id: Option<&str>, event: &str) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("session_id".into(), json!(self.session_id));
        m.insert("transcript_path".into(), json!(""));
        m.insert("cwd".into(), json!(self.cwd));
        if let Some(p) = prompt_id {
            m.insert("prompt_id".into(), json!(p));
        }
        if let Some(w) = who {
            m.insert("agent_id".into(), json!(w.id));
            m.insert("agent_type".into(), json!(w.kind));
        }
        m.insert("hook_event_name".into(), json!(event));
        m
    }

    fn push(
        &mut self,
        event: &'static str,
        m: Map<String, Value>,
        at: Option<SystemTime>,
        call: Option<usize>,
    ) {
        self.out.push(ConvertedPayload {
            event,
            payload: Value::Object(m),
            at,
            call_index: call,
            call_last: None,
            continued: false,
        });
    }

    fn turn(&mut self, who: &Option<Who>) -> &mut Turn {
        self.turns.entry(key(who)).or_default()
    }

    fn step(&mut self, t: Timed) {
        let at = t.at;
        match t.step {
            Step::Cwd(cwd) => self.cwd = cwd,
            Step::Prompt { text, prompt_id } => self.prompt(text, prompt_id, at),
            Step::Begin { who, prompt_id } => {
                let turn = self.turn(&who);
                if prompt_id.is_some() {
                    turn.prompt_id = prompt_id;
                }
                turn.last_at = at.or(turn.last_at);
            }
            Step::Say { who, text } => {
                let turn = self.turn(&who);
                turn.activity = true;
                turn.last_at = at.or(turn.last_at);
                if !text.trim().is_empty() {
                    turn.last_text = text;
                }
            }
            Step::Call {
                who,
                id,
                name,
                input,
                cwd,
            } => self.call(who, id, &name, input, cwd, at),
            Step::Answer { who, id, answer } => self.answer(who, id, answer, at),
            Step::NoAnswer { who, id } => {
                self.open.remove(&(key(&who), id));
            }
            Step::ModelRequest { who } => self.model_request(who, at),
            Step::End { who, last_message } => self.end(who, last_message, at),
            Step::Interrupt { who } => {
                let k = key(&who);
                self.turns.remove(&k);
                self.open.retain(|(a, _), _| *a != k);
            }
        }
    }

    fn prompt(&mut self, text: String, prompt_id: Option<String>, at: Option<SystemTime>) {
        // Gemini's and Qwen's own "Please continue." (their next-speaker check) is no new prompt
        // from a person: the live hook starts no turn for it either.
        if crate::protocol::dialect::automatic_prompt(self.cli.agent(), &text) {
            return;
        }
        // A prompt while the model is still at work in the main turn (the file does not show its
        // end) ends that turn as the CLI's next prompt would.
        if self.turns.get("").is_some_and(|t| t.activity) {
            self.end(None, None, at);
        }
        self.prompts += 1;
        let prompt_id = prompt_id.or_else(|| {
            // Qwen's hooks carry `<session>########<n>`; the others' none.
            (self.cli == Cli::Qwen)
                .then(|| format!("{}########{}", self.session_id, self.prompts - 1))
        });
        let mut m = self.base(&None, prompt_id.as_deref(), "UserPromptSubmit");
        m.insert("prompt".into(), json!(text));
        self.push("UserPromptSubmit", m, at, None);
        self.turns.insert(
            String::new(),
            Turn {
                prompt_id,
                last_at: at,
                ..Turn::default()
            },
        );
    }

    fn map_call(&self, name: &str, input: Value) -> (String, Value) {
        // Hooks read an object; a bare value (Copilot's patch text) is kept under a key.
        let input = match input {
            v @ Value::Object(_) => v,
            Value::Null => json!({}),
            Value::String(s) if name == "apply_patch" => json!({ "command": s }),
            other => json!({ "input": other }),
        };
        dialect::canonical_call(self.cli.agent(), name, input)
    }

    fn call(
        &mut self,
        who: Option<Who>,
        id: String,
        name: &str,
        input: Value,
        cwd: Option<String>,
        at: Option<SystemTime>,
    ) {
        let k = (key(&who), id.clone());
        if self.open.contains_key(&k) || name.is_empty() {
            return;
        }
        let (tool, input) = self.map_call(name, input);
        let index = self.call_list.len() + 1;
        self.call_list.push(ReplayCall {
            index,
            tool_name: tool.clone(),
            tool_use_id: id.clone(),
            agent_id: who.as_ref().map(|w| w.id.clone()),
        });
        let turn = self.turn(&who);
        turn.activity = true;
        turn.last_call = Some(index);
        turn.calls_since_request = true;
        turn.last_at = at.or(turn.last_at);
        let prompt_id = turn.prompt_id.clone();
        let mut m = self.base(&who, prompt_id.as_deref(), "PreToolUse");
        if let Some(cwd) = &cwd {
            m.insert("cwd".into(), json!(cwd));
        }
        m.insert("tool_name".into(), json!(tool));
        m.insert("tool_input".into(), input.clone());
        if self.cli.call_ids() {
            m.insert("tool_use_id".into(), json!(id));
        }
        self.push("PreToolUse", m, at, Some(index));
        self.open.insert(
            k,
            Open {
                index,
                cwd,
                tool,
                input,
                prompt_id,
                at,
            },
        );
    }

    fn map_answer(&self, tool: &str, a: &Answer) -> Result<Value, String> {
        dialect::recorded_answer(self.cli.agent(), tool, &a.raw, a.failed)
    }

    fn answer(&mut self, who: Option<Who>, id: String, a: Answer, at: Option<SystemTime>) {
        let Some(call) = self.open.remove(&(key(&who), id.clone())) else {
            return; // no call for it in this file, or answered already
        };
        let at = match (at, call.at) {
            (Some(end), Some(start)) => Some(end.max(start)),
            (end, start) => end.or(start),
        };
        let duration = match (at, call.at) {
            (Some(end), Some(start)) => end.duration_since(start).ok(),
            _ => None,
        };
        let response = self.map_answer(&call.tool, &a);
        let event = if response.is_ok() {
            "PostToolUse"
        } else {
            "PostToolUseFailure"
        };
        let mut m = self.base(&who, call.prompt_id.as_deref(), event);
        if let Some(cwd) = &call.cwd {
            m.insert("cwd".into(), json!(cwd));
        }
        m.insert("tool_name".into(), json!(call.tool));
        m.insert("tool_input".into(), call.input);
        if self.cli.call_ids() {
            m.insert("tool_use_id".into(), json!(id));
        }
        match response {
            Ok(r) => {
                m.insert("tool_response".into(), r);
            }
            Err(e) => {
                m.insert("error".into(), json!(e));
                m.insert("is_interrupt".into(), json!(a.interrupted));
            }
        }
        if let Some(d) = duration {
            m.insert(
                "duration_ms".into(),
                json!(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            );
        }
        self.push(event, m, at, Some(call.index));
        let turn = self.turn(&who);
        turn.last_at = at.or(turn.last_at);
    }

    /// Qwen fires UserPromptSubmit with an empty prompt before every model request after a tool
    /// round; its dialect reads that as the model turn's end, a batch event without the calls.
    fn model_request(&mut self, who: Option<Who>, at: Option<SystemTime>) {
        if self.cli != Cli::Qwen || who.is_some() {
            return;
        }
        let Some(turn) = self.turns.get_mut("") else {
            return;
        };
        if !turn.calls_since_request {
            return;
        }
        turn.calls_since_request = false;
        let prompt_id = turn.prompt_id.clone();
        let mut m = self.base(&None, prompt_id.as_deref(), "PostToolBatch");
        m.insert("tool_calls".into(), json!([]));
        self.push("PostToolBatch", m, at, None);
    }

    fn end(&mut self, who: Option<Who>, last_message: Option<String>, at: Option<SystemTime>) {
        let k = key(&who);
        let Some(turn) = self.turns.remove(&k) else {
            return;
        };
        self.open.retain(|(a, _), _| *a != k);
        if !turn.activity {
            return;
        }
        let event = if who.is_some() {
            "SubagentStop"
        } else {
            "Stop"
        };
        let mut m = self.base(&who, turn.prompt_id.as_deref(), event);
        m.insert("stop_hook_active".into(), json!(false));
        let last = last_message
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(turn.last_text);
        m.insert("last_assistant_message".into(), json!(last));
        self.push(event, m, at.or(turn.last_at), turn.last_call);
    }
}

/// Plays the steps of a session's files (the main session's first, then its subagents') into
/// the payloads `cli`'s hooks would have received.
pub(crate) fn build(
    cli: Cli,
    session_id: String,
    files: Vec<Vec<Timed>>,
    skipped_lines: usize,
) -> Converted {
    let mut b = Builder {
        cli,
        session_id: if session_id.is_empty() {
            "replay".to_string()
        } else {
            session_id
        },
        cwd: String::new(),
        out: Vec::new(),
        call_list: Vec::new(),
        open: HashMap::new(),
        turns: HashMap::new(),
        prompts: 0,
    };
    for t in merge(files) {
        b.step(t);
    }
    Converted {
        calls: b.call_list.len(),
        payloads: b.out,
        sessions_id: b.session_id,
        call_list: b.call_list,
        skipped_lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Option<SystemTime> {
        Some(from_ms(ms))
    }

    fn t(ms: u64, step: Step) -> Timed {
        Timed { at: at(ms), step }
    }

    #[test]
    fn records_glued_on_one_line_are_each_read() {
        let text = "{\"a\":1}{\"b\":2}\n\n{\"c\":3}\n{\"d\":\n";
        let lines: Vec<Option<Value>> = json_lines(text).collect();
        assert_eq!(
            lines,
            [
                Some(json!({"a": 1})),
                Some(json!({"b": 2})),
                Some(json!({"c": 3})),
                None
            ]
        );
        assert_eq!(line_records("{\"a\":1} x"), None);
    }

    #[test]
    fn steps_become_the_hooks_events_with_the_files_times() {
        let steps = vec![
            t(
                1_000,
                Step::Prompt {
                    text: "go".into(),
                    prompt_id: None,
                },
            ),
            t(
                2_000,
                Step::Call {
                    who: None,
                    id: "c1".into(),
                    name: "run_shell_command".into(),
                    input: json!({"command": "make", "description": "build"}),
                    cwd: None,
                },
            ),
            t(
                9_000,
                Step::Answer {
                    who: None,
                    id: "c1".into(),
                    answer: Answer::new(
                        json!({"llmContent": "Output: boom\nExit Code: 2\nProcess Group PGID: 7"}),
                        None,
                    ),
                },
            ),
            t(9_500, Step::ModelRequest { who: None }),
            t(
                10_000,
                Step::End {
                    who: None,
                    last_message: Some("Done.".into()),
                },
            ),
        ];
        let c = build(Cli::Qwen, "s".into(), vec![steps], 0);
        let events: Vec<&str> = c.payloads.iter().map(|p| p.event).collect();
        assert_eq!(
            events,
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUseFailure",
                "PostToolBatch",
                "Stop"
            ]
        );
        let pre = &c.payloads[1].payload;
        assert_eq!(pre["tool_name"], "Bash");
        assert_eq!(pre["prompt_id"], "s########0");
        let post = &c.payloads[2];
        assert_eq!(post.payload["error"], "Output: boom\nExit Code: 2");
        assert_eq!(post.payload["duration_ms"], 7_000);
        assert_eq!(post.at, at(9_000));
        assert_eq!(c.payloads[4].payload["last_assistant_message"], "Done.");
        assert_eq!(c.payloads[4].call_index, Some(1));
        assert_eq!(c.calls, 1);
    }

    #[test]
    fn files_merge_by_time_and_interrupted_turns_do_not_stop() {
        let who = Some(Who {
            id: "a1".into(),
            kind: "default".into(),
        });
        let main = vec![
            t(
                1_000,
                Step::Prompt {
                    text: "go".into(),
                    prompt_id: Some("t1".into()),
                },
            ),
            t(
                5_000,
                Step::Say {
                    who: None,
                    text: "waiting".into(),
                },
            ),
            t(6_000, Step::Interrupt { who: None }),
        ];
        let sub = vec![
            t(
                2_000,
                Step::Call {
                    who: who.clone(),
                    id: "c1".into(),
                    name: "Bash".into(),
                    input: json!({"command": "ls"}),
                    cwd: Some("/p/sub".into()),
                },
            ),
            t(
                3_000,
                Step::Answer {
                    who: who.clone(),
                    id: "c1".into(),
                    answer: Answer::new(json!("a\n"), Some(false)),
                },
            ),
            t(
                4_000,
                Step::End {
                    who,
                    last_message: None,
                },
            ),
        ];
        let c = build(Cli::Codex, "s".into(), vec![main, sub], 0);
        let events: Vec<&str> = c.payloads.iter().map(|p| p.event).collect();
        assert_eq!(
            events,
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "SubagentStop"
            ]
        );
        assert_eq!(c.payloads[1].payload["agent_id"], "a1");
        assert_eq!(c.payloads[1].payload["tool_use_id"], "c1");
        assert_eq!(c.payloads[1].payload["cwd"], "/p/sub");
        assert_eq!(c.call_list[0].agent_id.as_deref(), Some("a1"));
    }
}
