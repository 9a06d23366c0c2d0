//! Turns one Claude Code session transcript (the JSONL file Claude Code writes under
//! `~/.claude/projects/`), with the transcripts of its subagents, into the hook payloads Claude
//! Code 2.1.330 would have fired for it, in firing order. Pure: no I/O, never panics, skips lines
//! and shapes it does not know.
//!
//! What is mapped, and how (see `hooks-observed.md` for the real CLI's behaviour):
//! - a real user prompt → `UserPromptSubmit`, with the line's `promptId` or `replay-prompt-<n>`;
//!   tool payloads carry that `prompt_id` until the next prompt;
//! - a `tool_use` block → `PreToolUse`; its `tool_result` → `PostToolUse` (not an error) or
//!   `PostToolUseFailure` (an error);
//! - an Edit/MultiEdit/Write/NotebookEdit rejected by input validation (`<tool_use_error>` text),
//!   or any call failing with `InputValidationError`, fires neither Pre nor Post: the real CLI
//!   validates these before PreToolUse, so only the turn's `PostToolBatch` sees them;
//! - all `tool_use` blocks of one model turn (one `message.id`) → one `PostToolBatch` after their
//!   results, listing the calls in `tool_use` order with the text the model saw;
//! - the end of a turn → `Stop` (`SubagentStop` in a subagent), unless the turn had no model
//!   activity, was interrupted by the user, ended in an API error or was cut off mid-call;
//! - subagent lines (`agentId`, or `isSidechain` chains in old transcripts) add `agent_id` and
//!   `agent_type` to their payloads. They come from three places: `agent_progress` lines in the
//!   main transcript (the subagent's messages as they happened), the subagent's own transcript
//!   (`<session>/subagents/agent-<id>.jsonl`, merged in by timestamp), and old inline sidechains.
//!   A message seen twice (same `uuid`, or the same `tool_use` id) is played once;
//! - a permission refusal ("The user doesn't want to proceed…", also how staying in plan mode is
//!   recorded) fired PreToolUse (it runs before the dialog) and no Post event (the tool never
//!   ran); a plain "No" interrupts the turn (no PostToolBatch, no Stop), a "No" with feedback lets
//!   the turn go on, and the batch carries the refusal text; a refusal with nobody to ask ("Claude
//!   requested permissions to …, but you haven't granted it yet", "… needs approval") is the same
//!   without the interruption;
//! - a call Claude Code cancelled because a parallel sibling failed ("Sibling tool call errored")
//!   fires no Post event either (cancelled calls never do); its PreToolUse fired only if the call
//!   started before the sibling failed, which the transcript shows by order: a `tool_use` streamed
//!   in after the first error of its batch never started. The batch carries the text;
//! - a running call the person interrupted → `PostToolUseFailure` with `is_interrupt: true`, and
//!   the turn ends without PostToolBatch or Stop;
//! - `permission_mode` is the transcript's `permissionMode` when it records one.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};

/// One tool call of the session, in the order the model made them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayCall {
    /// 1-based tool call number in the session.
    pub index: usize,
    pub tool_name: String,
    pub tool_use_id: String,
    /// The subagent that made the call; `None` for the main agent.
    pub agent_id: Option<String>,
}

/// The converted session.
#[derive(Debug, Clone, Default)]
pub struct Converted {
    pub payloads: Vec<ConvertedPayload>,
    /// Distinct tool calls (`tool_use` ids) found in the transcript.
    pub calls: usize,
    /// The session id every payload carries: the transcript's first `sessionId`, else the fallback.
    pub sessions_id: String,
    /// The tool calls themselves, `call_list[i].index == i + 1`.
    pub call_list: Vec<ReplayCall>,
    /// Lines that were not a JSON object (headers, truncated lines, …).
    pub skipped_lines: usize,
}

/// One hook payload, as Claude Code would have written it to the hook's stdin.
#[derive(Debug, Clone)]
pub struct ConvertedPayload {
    /// `hook_event_name`: "PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch",
    /// "UserPromptSubmit", "Stop" or "SubagentStop".
    pub event: &'static str,
    pub payload: Value,
    /// The transcript timestamp of the line that caused the event.
    pub at: Option<SystemTime>,
    /// The call's [`ReplayCall::index`] for PreToolUse / PostToolUse / PostToolUseFailure; for
    /// Stop / SubagentStop, the last call of the turn that ends.
    pub call_index: Option<usize>,
    /// PostToolBatch only: the batch's calls are `call_index..=call_last`.
    pub call_last: Option<usize>,
    /// Stop / SubagentStop only: the transcript shows the turn going on after this Stop (a Stop
    /// hook of the recorded session blocked it), so what followed is in the transcript.
    pub continued: bool,
}

/// What a file holds, judged from its first conversation line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// No `user` / `assistant` line: not a Claude Code transcript.
    NotTranscript,
    /// Not a session file because it cannot be read as one at all (empty, not text, not JSON,
    /// broken JSON), and why; told by [`super::format::inspect`].
    Unreadable(String),
    /// A session's main transcript.
    Session { session_id: Option<String> },
    /// A subagent's own transcript (every line carries `agentId` or `isSidechain`).
    Subagent { session_id: Option<String> },
}

/// Tells a session transcript from a subagent transcript and from a file that is neither, reading
/// only as far as the first conversation line.
pub fn inspect(text: &str) -> Kind {
    for raw in text.lines() {
        let raw = raw.trim();
        if !raw.starts_with('{') {
            continue;
        }
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(raw) else {
            continue;
        };
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
        let session_id = str_field(&obj, "sessionId").map(str::to_string);
        if kind == "progress" && agent_progress(&obj).is_some() {
            return Kind::Session { session_id };
        }
        if (kind == "user" || kind == "assistant")
            && obj.get("message").is_some_and(Value::is_object)
        {
            return if str_field(&obj, "agentId").is_some() || bool_field(&obj, "isSidechain") {
                Kind::Subagent { session_id }
            } else {
                Kind::Session { session_id }
            };
        }
    }
    Kind::NotTranscript
}

/// The inner message and agent id of an `agent_progress` line.
fn agent_progress(obj: &Map<String, Value>) -> Option<(&Map<String, Value>, &str)> {
    let data = obj.get("data")?.as_object()?;
    if data.get("type").and_then(Value::as_str) != Some("agent_progress") {
        return None;
    }
    Some((
        data.get("message")?.as_object()?,
        str_field(data, "agentId")?,
    ))
}

const PERMISSION_MODE: &str = "bypassPermissions";
const AGENT_TYPE: &str = "general-purpose";
/// Tools whose input Claude Code validates against the file before PreToolUse.
const VALIDATED_BEFORE_PRE: &[&str] = &["Edit", "MultiEdit", "Write", "NotebookEdit"];
/// Validation failures of those tools, also in old transcripts that lack the `<tool_use_error>` tag.
const VALIDATION_ERRORS: &[&str] = &[
    "<tool_use_error>",
    "String to replace not found",
    "File has not been read yet",
];
/// Calls Claude Code cancelled because a parallel sibling failed.
const CANCELLATIONS: &[&str] = &["Sibling tool call errored"];
/// The person pressed Esc while the call ran.
const INTERRUPTED: &str = "[Request interrupted by user";
/// A person answered "No" in a permission dialog.
const USER_REJECTIONS: &[&str] = &[
    "The user doesn't want to proceed",
    "The user doesn't want to take this action",
];
/// A permission check refused the call with nobody to ask (`-p`, or a rule): the tool never ran.
fn permission_denied(head: &str) -> bool {
    let first = head.lines().next().unwrap_or("");
    (head.starts_with("Claude requested permissions to") && first.contains("haven't granted it"))
        || (!head.starts_with("Exit code") && first.contains(" needs approval"))
}
/// User texts that are not prompts for the model.
const NOT_A_PROMPT: &[&str] = &[
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "Caveat: The messages below were generated",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
];

/// Converts one transcript. `fallback_session_id` is used when no line has a `sessionId`.
pub fn convert(text: &str, fallback_session_id: &str) -> Converted {
    convert_group(text, &[], fallback_session_id)
}

/// The JSON object lines of a file, and how many lines were not one.
fn parse_lines(text: &str) -> (Vec<Value>, usize) {
    let mut skipped = 0;
    let mut lines = Vec::new();
    for raw in text.lines() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        match super::native::line_records(raw) {
            Some(records) if records.iter().all(Value::is_object) => lines.extend(records),
            _ => skipped += 1,
        }
    }
    (lines, skipped)
}

/// Milliseconds since the epoch of a line's `timestamp`.
fn line_ms(line: &Value) -> Option<u64> {
    let t = parse_time(line.get("timestamp")?.as_str()?)?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(d.as_millis()).ok()
}

/// Merges the files' lines into one timeline: each file keeps its own order, and between files
/// the earlier timestamp goes first (a line without one keeps the time of the line before it;
/// ties go to the earlier file, the main transcript first).
fn merge(files: Vec<Vec<Value>>) -> Vec<Value> {
    let keyed: Vec<Vec<(u64, Value)>> = files
        .into_iter()
        .map(|lines| {
            let mut last = 0;
            lines
                .into_iter()
                .map(|l| {
                    last = line_ms(&l).unwrap_or(last);
                    (last, l)
                })
                .collect()
        })
        .collect();
    super::merge_by_key(keyed)
}

/// Converts a session's main transcript together with its subagents' own transcripts (`main` may
/// be empty when only subagent transcripts are at hand).
pub fn convert_group(main: &str, subagents: &[&str], fallback_session_id: &str) -> Converted {
    let mut skipped_lines = 0;
    let mut files = Vec::with_capacity(subagents.len() + 1);
    for text in std::iter::once(main).chain(subagents.iter().copied()) {
        let (lines, skipped) = parse_lines(text);
        skipped_lines += skipped;
        files.push(lines);
    }
    let session_id = files
        .iter()
        .flatten()
        .filter_map(|l| l.get("sessionId").and_then(Value::as_str))
        .find(|s| !s.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| {
            if fallback_session_id.is_empty() {
                "replay".to_string()
            } else {
                fallback_session_id.to_string()
            }
        });
    let lines = if files.len() == 1 {
        files.pop().unwrap_or_default()
    } else {
        merge(files)
    };

    let mut conv = Conv::new(session_id);
    for line in &lines {
        conv.line(line);
    }
    conv.finish();

    Converted {
        payloads: conv.out.into_iter().flatten().collect(),
        calls: conv.call_list.len(),
        sessions_id: conv.session_id,
        call_list: conv.call_list,
        skipped_lines,
    }
}

/// How a tool_result maps to hook events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// PreToolUse, PostToolUse.
    Success,
    /// PreToolUse, PostToolUseFailure.
    Failure,
    /// Denied by a hook or by the person: PreToolUse only, as the real CLI fires no PostToolUse*
    /// for a hook deny or a "No" in the dialog (`hooks-observed.md`).
    Denied { by_user: bool },
    /// Rejected by input validation before PreToolUse: only the PostToolBatch entry.
    Rejected,
    /// Cancelled because a parallel sibling failed: no Post event; PreToolUse only if it started.
    Cancelled,
}

fn classify(tool: &str, is_error: bool, text: &str) -> Outcome {
    if !is_error {
        return Outcome::Success;
    }
    let head = text.trim_start();
    if CANCELLATIONS.iter().any(|m| head.contains(m)) {
        return Outcome::Cancelled;
    }
    if (VALIDATED_BEFORE_PRE.contains(&tool) && VALIDATION_ERRORS.iter().any(|m| head.contains(m)))
        || head.contains("<tool_use_error>InputValidationError")
    {
        return Outcome::Rejected;
    }
    if USER_REJECTIONS.iter().any(|m| head.starts_with(m)) {
        return Outcome::Denied { by_user: true };
    }
    if head.contains("hook error") || permission_denied(head) {
        return Outcome::Denied { by_user: false };
    }
    Outcome::Failure
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// A new prompt, or a stop-hook continuation.
    Normal,
    /// "[Request interrupted by user…]": no Stop, and no batch for unfinished calls.
    Interrupted,
    /// End of the transcript.
    Eof,
}

struct Turn {
    prompt_id: String,
    activity: bool,
    last_text: String,
    last_at: Option<SystemTime>,
    stop_hook_active: bool,
    api_error: bool,
    open_calls: HashSet<String>,
    /// The turn's last tool call, named by the Stop that ends it.
    last_call: Option<usize>,
}

struct Batch {
    key: String,
    call_ids: Vec<String>,
    last_at: Option<SystemTime>,
    /// A call of the batch was refused or interrupted by the person: if the turn is then
    /// interrupted, the real CLI fires no batch.
    aborted: bool,
    /// Where the batch's first failure landed in the output: a sibling cancelled after it whose
    /// PreToolUse comes later never started.
    first_error_slot: Option<usize>,
}

struct PendingPrompt {
    text: String,
    prompt_id: Option<String>,
    at: Option<SystemTime>,
}

/// The main agent (index 0) or one subagent.
#[derive(Default)]
struct Thread {
    agent_id: Option<String>,
    turn: Option<Turn>,
    batch: Option<Batch>,
    /// A slash command: a prompt only if the model answers it.
    pending_command: Option<PendingPrompt>,
    /// Subagents: the prompt that started the current turn (matched against a Task's input).
    root_prompt: Option<String>,
}

struct Call {
    index: usize,
    name: String,
    input: Value,
    thread: usize,
    prompt_id: String,
    pre_slot: usize,
    at: Option<SystemTime>,
    /// The tool_result content, once seen: the batch's `tool_response`.
    response: Option<Value>,
}

struct Conv {
    out: Vec<Option<ConvertedPayload>>,
    session_id: String,
    cwd: String,
    synthetic_prompts: usize,
    threads: Vec<Thread>,
    by_agent: HashMap<String, usize>,
    by_uuid: HashMap<String, usize>,
    calls: HashMap<String, Call>,
    call_list: Vec<ReplayCall>,
    /// `uuid`s of the conversation lines played: progress lines and subagent transcripts repeat them.
    seen_lines: HashSet<String>,
    permission_mode: String,
    /// A subagent's `agent_type`: the `subagent_type` of the Task call that started it, when a
    /// progress line names that call.
    agent_types: HashMap<String, String>,
}

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn bool_field(obj: &Map<String, Value>, key: &str) -> bool {
    obj.get(key).and_then(Value::as_bool).unwrap_or(false)
}

pub(crate) fn parse_time(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s).ok()
}

/// The text the model saw: a string, or the text blocks of an array joined by newlines.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| {
                if b.get("type").and_then(Value::as_str) == Some("text") {
                    b.get("text").and_then(Value::as_str)
                } else {
                    None
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// `/name args` from a `<command-name>` wrapper.
fn command_prompt(text: &str) -> String {
    let tag = |name: &str| -> String {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        text.find(&open)
            .map(|i| &text[i + open.len()..])
            .and_then(|rest| rest.find(&close).map(|j| rest[..j].trim().to_string()))
            .unwrap_or_default()
    };
    let mut name = tag("command-name");
    if name.is_empty() {
        name = format!("/{}", tag("command-message"));
    }
    let args = tag("command-args");
    if args.is_empty() {
        name
    } else {
        format!("{name} {args}")
    }
}

fn is_command(text: &str) -> bool {
    text.starts_with("<command-name>")
        || text.starts_with("<command-message>")
        || (text.len() < 2000 && text.contains("<command-name>"))
}

impl Conv {
    fn new(session_id: String) -> Conv {
        Conv {
            out: Vec::new(),
            session_id,
            cwd: String::new(),
            synthetic_prompts: 0,
            threads: vec![Thread::default()],
            by_agent: HashMap::new(),
            by_uuid: HashMap::new(),
            calls: HashMap::new(),
            call_list: Vec::new(),
            seen_lines: HashSet::new(),
            permission_mode: PERMISSION_MODE.to_string(),
            agent_types: HashMap::new(),
        }
    }

    fn push(
        &mut self,
        event: &'static str,
        payload: Map<String, Value>,
        at: Option<SystemTime>,
        call_index: Option<usize>,
    ) -> usize {
        self.out.push(Some(ConvertedPayload {
            event,
            payload: Value::Object(payload),
            at,
            call_index,
            call_last: None,
            continued: false,
        }));
        self.out.len() - 1
    }

    /// Fields shared by the tool events, Stop and SubagentStop.
    fn base(&self, thread: usize, prompt_id: &str, event: &str) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("session_id".into(), json!(self.session_id));
        m.insert("transcript_path".into(), json!(""));
        m.insert("cwd".into(), json!(self.cwd));
        m.insert("prompt_id".into(), json!(prompt_id));
        m.insert("permission_mode".into(), json!(self.permission_mode));
        if let Some(agent) = &self.threads[thread].agent_id {
            let kind = self
                .agent_types
                .get(agent)
                .map_or(AGENT_TYPE, String::as_str);
            m.insert("agent_id".into(), json!(agent));
            m.insert("agent_type".into(), json!(kind));
        }
        m.insert("hook_event_name".into(), json!(event));
        m
    }

    fn next_prompt_id(&mut self, from_line: Option<&str>) -> String {
        self.synthetic_prompts += 1;
        match from_line {
            Some(id) => id.to_string(),
            None => format!("replay-prompt-{}", self.synthetic_prompts),
        }
    }

    fn new_thread(&mut self, agent_id: String) -> usize {
        self.threads.push(Thread {
            agent_id: Some(agent_id),
            ..Thread::default()
        });
        self.threads.len() - 1
    }

    /// Main agent (0) or the subagent a line belongs to.
    fn thread_for(&mut self, obj: &Map<String, Value>) -> usize {
        let uuid = str_field(obj, "uuid");
        let idx = if let Some(agent) = str_field(obj, "agentId") {
            match self.by_agent.get(agent) {
                Some(&i) => i,
                None => {
                    let i = self.new_thread(agent.to_string());
                    self.by_agent.insert(agent.to_string(), i);
                    i
                }
            }
        } else if bool_field(obj, "isSidechain") {
            // Old transcripts write subagents inline: follow the parentUuid chain.
            match str_field(obj, "parentUuid").and_then(|p| self.by_uuid.get(p)) {
                Some(&i) => i,
                None => {
                    let n = self.threads.len();
                    self.new_thread(format!("sidechain-{n}"))
                }
            }
        } else {
            0
        };
        if idx != 0 {
            if let Some(u) = uuid {
                self.by_uuid.insert(u.to_string(), idx);
            }
        }
        idx
    }

    fn line(&mut self, line: &Value) {
        let Some(obj) = line.as_object() else { return };
        if let Some(cwd) = str_field(obj, "cwd") {
            self.cwd = cwd.to_string();
        }
        if let Some(mode) = str_field(obj, "permissionMode") {
            self.permission_mode = mode.to_string();
        }
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "progress" {
            // A subagent's message as it happened, wrapped in the main transcript.
            if let Some((inner, agent)) = agent_progress(obj) {
                let started_by =
                    str_field(obj, "parentToolUseID").and_then(|id| self.calls.get(id));
                if let Some(kind) = started_by
                    .and_then(|c| c.input.get("subagent_type"))
                    .and_then(Value::as_str)
                    .filter(|k| !k.is_empty())
                {
                    self.agent_types.insert(agent.to_string(), kind.to_string());
                }
                let mut l = inner.clone();
                l.insert("agentId".into(), json!(agent));
                l.insert("isSidechain".into(), json!(true));
                for key in ["sessionId", "cwd", "timestamp"] {
                    if !l.contains_key(key) {
                        if let Some(v) = obj.get(key) {
                            l.insert(key.into(), v.clone());
                        }
                    }
                }
                self.line(&Value::Object(l));
            }
            return;
        }
        if kind == "system" && str_field(obj, "subtype") == Some("compact_boundary") {
            // Calls left open by a compaction never get their result: let the turn end normally.
            for thread in &mut self.threads {
                if let Some(turn) = thread.turn.as_mut() {
                    turn.open_calls.clear();
                }
            }
            return;
        }
        if kind != "user" && kind != "assistant" {
            return;
        }
        let Some(message) = obj.get("message").and_then(Value::as_object) else {
            return;
        };
        if let Some(uuid) = str_field(obj, "uuid") {
            if !self.seen_lines.insert(uuid.to_string()) {
                return; // already played from a progress line or the other transcript
            }
        }
        let at = str_field(obj, "timestamp").and_then(parse_time);
        let thread = self.thread_for(obj);
        if kind == "assistant" {
            self.assistant(thread, obj, message, at);
        } else {
            self.user(thread, obj, message, at);
        }
    }

    fn start_turn(&mut self, thread: usize, prompt_id: String) {
        self.threads[thread].turn = Some(Turn {
            prompt_id,
            activity: false,
            last_text: String::new(),
            last_at: None,
            stop_hook_active: false,
            api_error: false,
            open_calls: HashSet::new(),
            last_call: None,
        });
    }

    /// A turn for model activity that no prompt line opened (a slash command the model answers,
    /// a transcript that starts mid-session, a subagent whose prompt line is missing).
    fn ensure_turn(&mut self, thread: usize) {
        if self.threads[thread].turn.is_some() {
            return;
        }
        if thread == 0 {
            match self.threads[0].pending_command.take() {
                Some(p) => self.prompt(p.text, p.prompt_id.as_deref(), p.at),
                None => {
                    let id = self.next_prompt_id(None);
                    self.start_turn(0, id);
                }
            }
        } else {
            let id = self.subagent_prompt_id(None);
            self.start_turn(thread, id);
        }
    }

    /// Subagent tool hooks carry the parent's prompt_id; a lone subagent transcript gets its own.
    fn subagent_prompt_id(&mut self, from_line: Option<&str>) -> String {
        match &self.threads[0].turn {
            Some(t) => t.prompt_id.clone(),
            None => self.next_prompt_id(from_line),
        }
    }

    fn prompt(&mut self, text: String, line_prompt_id: Option<&str>, at: Option<SystemTime>) {
        let prompt_id = self.next_prompt_id(line_prompt_id);
        let mut m = Map::new();
        m.insert("session_id".into(), json!(self.session_id));
        m.insert("transcript_path".into(), json!(""));
        m.insert("cwd".into(), json!(self.cwd));
        m.insert("prompt_id".into(), json!(prompt_id));
        m.insert("permission_mode".into(), json!(self.permission_mode));
        m.insert("hook_event_name".into(), json!("UserPromptSubmit"));
        m.insert("prompt".into(), json!(text));
        self.push("UserPromptSubmit", m, at, None);
        self.start_turn(0, prompt_id);
        if let Some(turn) = self.threads[0].turn.as_mut() {
            turn.last_at = at;
        }
    }

    fn assistant(
        &mut self,
        thread: usize,
        obj: &Map<String, Value>,
        message: &Map<String, Value>,
        at: Option<SystemTime>,
    ) {
        let api_error = bool_field(obj, "isApiErrorMessage");
        let synthetic = message.get("model").and_then(Value::as_str) == Some("<synthetic>");
        if synthetic && !api_error {
            // "No response requested." and the like: no model call happened.
            return;
        }
        let key = str_field(message, "id")
            .or_else(|| str_field(obj, "uuid"))
            .map(str::to_string)
            .unwrap_or_else(|| format!("line-{}", self.out.len()));
        if self.threads[thread]
            .batch
            .as_ref()
            .is_some_and(|b| b.key != key)
        {
            self.flush_batch(thread);
        }
        self.ensure_turn(thread);
        if let Some(turn) = self.threads[thread].turn.as_mut() {
            turn.activity = true;
            turn.api_error = api_error;
            turn.last_at = at.or(turn.last_at);
        }
        match message.get("content") {
            Some(Value::String(s)) => self.note_text(thread, s),
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(s) = block.get("text").and_then(Value::as_str) {
                                self.note_text(thread, s);
                            }
                        }
                        Some("tool_use") => self.tool_use(thread, &key, block, at),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    fn note_text(&mut self, thread: usize, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        if let Some(turn) = self.threads[thread].turn.as_mut() {
            turn.last_text = text.to_string();
        }
    }

    fn tool_use(&mut self, thread: usize, key: &str, block: &Value, at: Option<SystemTime>) {
        let Some(id) = block
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            return;
        };
        let Some(name) = block
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            return;
        };
        if self.calls.contains_key(id) {
            return; // resumed or forked sessions repeat blocks
        }
        let input = match block.get("input") {
            Some(v @ Value::Object(_)) => v.clone(),
            _ => json!({}),
        };
        let prompt_id = self.threads[thread]
            .turn
            .as_ref()
            .map(|t| t.prompt_id.clone())
            .unwrap_or_default();
        let index = self.call_list.len() + 1;
        self.call_list.push(ReplayCall {
            index,
            tool_name: name.to_string(),
            tool_use_id: id.to_string(),
            agent_id: self.threads[thread].agent_id.clone(),
        });
        let mut m = self.base(thread, &prompt_id, "PreToolUse");
        m.insert("tool_name".into(), json!(name));
        m.insert("tool_input".into(), input.clone());
        m.insert("tool_use_id".into(), json!(id));
        let pre_slot = self.push("PreToolUse", m, at, Some(index));
        let th = &mut self.threads[thread];
        th.batch
            .get_or_insert_with(|| Batch {
                key: key.to_string(),
                call_ids: Vec::new(),
                last_at: None,
                aborted: false,
                first_error_slot: None,
            })
            .call_ids
            .push(id.to_string());
        if let Some(turn) = th.turn.as_mut() {
            turn.open_calls.insert(id.to_string());
            turn.last_call = Some(index);
        }
        self.calls.insert(
            id.to_string(),
            Call {
                index,
                name: name.to_string(),
                input,
                thread,
                prompt_id,
                pre_slot,
                at,
                response: None,
            },
        );
    }

    fn user(
        &mut self,
        thread: usize,
        obj: &Map<String, Value>,
        message: &Map<String, Value>,
        at: Option<SystemTime>,
    ) {
        let content = message.get("content");
        if let Some(Value::Array(blocks)) = content {
            let results: Vec<&Value> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .collect();
            if !results.is_empty() {
                // `toolUseResult` belongs to the line's only tool_result.
                let structured = obj.get("toolUseResult").filter(|_| results.len() == 1);
                for block in results {
                    self.tool_result(block, structured, at);
                }
                let interrupted = blocks.iter().any(|b| {
                    b.get("type").and_then(Value::as_str) == Some("text")
                        && b.get("text")
                            .and_then(Value::as_str)
                            .is_some_and(|t| t.trim_start().starts_with("[Request interrupted"))
                });
                if interrupted {
                    self.end_turn(thread, End::Interrupted);
                }
                return;
            }
        }
        let text = match content {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Array(_)) => result_text(v),
            _ => return,
        };
        let head = text.trim_start();
        if bool_field(obj, "isMeta") {
            if head.starts_with("Stop hook feedback") {
                self.stop_hook_continues(thread);
            }
            return;
        }
        if bool_field(obj, "isCompactSummary") || bool_field(obj, "isVisibleInTranscriptOnly") {
            return;
        }
        if head.starts_with("[Request interrupted") {
            self.end_turn(thread, End::Interrupted);
            return;
        }
        if NOT_A_PROMPT.iter().any(|p| head.starts_with(p)) {
            return;
        }
        let line_prompt_id = str_field(obj, "promptId");
        if thread != 0 {
            // The prompt a subagent was started (or continued) with: no UserPromptSubmit.
            self.end_turn(thread, End::Normal);
            let id = self.subagent_prompt_id(line_prompt_id);
            self.start_turn(thread, id);
            self.threads[thread].root_prompt = Some(text);
            return;
        }
        self.end_turn(0, End::Normal);
        if is_command(head) {
            let text = command_prompt(head);
            self.threads[0].pending_command = Some(PendingPrompt {
                text,
                prompt_id: line_prompt_id.map(str::to_string),
                at,
            });
            return;
        }
        self.threads[0].pending_command = None;
        self.prompt(text, line_prompt_id, at);
    }

    fn tool_result(&mut self, block: &Value, structured: Option<&Value>, at: Option<SystemTime>) {
        let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
            return;
        };
        let Some(call) = self.calls.get(id) else {
            return; // no tool_use for it in this file
        };
        if call.response.is_some() {
            return; // repeated block
        }
        let thread = call.thread;
        let content = match block.get("content") {
            None | Some(Value::Null) => json!(""),
            Some(v) => v.clone(),
        };
        let text = result_text(&content);
        let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
        let outcome = classify(&call.name, is_error, &text);
        let (index, name, input, prompt_id, pre_slot, started) = (
            call.index,
            call.name.clone(),
            call.input.clone(),
            call.prompt_id.clone(),
            call.pre_slot,
            call.at,
        );

        // A subagent run in the foreground ends before its Task result is written (a background
        // one has only been launched when its result comes back).
        let launched = structured.is_some_and(|s| {
            s.get("isAsync").and_then(Value::as_bool) == Some(true)
                || s.get("status").and_then(Value::as_str) == Some("async_launched")
        });
        if let Some(p) = input
            .get("prompt")
            .and_then(Value::as_str)
            .filter(|_| !launched)
        {
            for t in 1..self.threads.len() {
                if self.threads[t].turn.is_some()
                    && self.threads[t].root_prompt.as_deref() == Some(p)
                {
                    self.end_turn(t, End::Normal);
                }
            }
        }

        let duration = match (started, at) {
            (Some(a), Some(b)) => b.duration_since(a).ok(),
            _ => None,
        };
        let duration_ms = |m: &mut Map<String, Value>, d: Option<Duration>| {
            if let Some(d) = d {
                m.insert(
                    "duration_ms".into(),
                    json!(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                );
            }
        };
        match outcome {
            Outcome::Success => {
                let response = match structured {
                    Some(v @ (Value::Object(_) | Value::Array(_))) => v.clone(),
                    _ if name == "Bash" => json!({ "stdout": text }),
                    _ => json!(text),
                };
                let mut m = self.base(thread, &prompt_id, "PostToolUse");
                m.insert("tool_name".into(), json!(name));
                m.insert("tool_input".into(), input);
                m.insert("tool_response".into(), response);
                m.insert("tool_use_id".into(), json!(id));
                duration_ms(&mut m, duration);
                self.push("PostToolUse", m, at, Some(index));
            }
            Outcome::Denied { .. } => {}
            Outcome::Cancelled => {
                let first_error = self.threads[thread]
                    .batch
                    .as_ref()
                    .filter(|b| b.call_ids.iter().any(|c| c == id))
                    .and_then(|b| b.first_error_slot);
                if first_error.is_some_and(|e| pre_slot > e) {
                    // Streamed in after its sibling failed: it never started.
                    if let Some(slot) = self.out.get_mut(pre_slot) {
                        *slot = None;
                    }
                }
            }
            Outcome::Failure => {
                let interrupt = structured
                    .and_then(|s| s.get("interrupted"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                    || text.contains(INTERRUPTED);
                let mut m = self.base(thread, &prompt_id, "PostToolUseFailure");
                m.insert("tool_name".into(), json!(name));
                m.insert("tool_input".into(), input);
                m.insert("tool_use_id".into(), json!(id));
                m.insert("error".into(), json!(text));
                m.insert("is_interrupt".into(), json!(interrupt));
                duration_ms(&mut m, duration);
                self.push("PostToolUseFailure", m, at, Some(index));
            }
            Outcome::Rejected => {
                if let Some(slot) = self.out.get_mut(pre_slot) {
                    *slot = None;
                }
            }
        }

        if let Some(call) = self.calls.get_mut(id) {
            call.response = Some(content);
        }
        // Payloads after this slot came after the failure (the Post just written, or the last
        // payload before a rejected call).
        let failed_at = matches!(outcome, Outcome::Failure | Outcome::Rejected)
            .then(|| self.out.len().saturating_sub(1));
        let interrupted = outcome == Outcome::Failure && text.contains(INTERRUPTED);
        let th = &mut self.threads[thread];
        if let Some(batch) = th.batch.as_mut() {
            if batch.call_ids.iter().any(|c| c == id) {
                batch.last_at = at.or(batch.last_at);
                if outcome == (Outcome::Denied { by_user: true }) || interrupted {
                    batch.aborted = true;
                }
                if batch.first_error_slot.is_none() {
                    batch.first_error_slot = failed_at;
                }
            }
        }
        if let Some(turn) = th.turn.as_mut() {
            turn.open_calls.remove(id);
            turn.last_at = at.or(turn.last_at);
        }
    }

    fn flush_batch(&mut self, thread: usize) {
        let Some(batch) = self.threads[thread].batch.take() else {
            return;
        };
        let mut prompt_id = None;
        let mut entries = Vec::new();
        let (mut first, mut last) = (None, None);
        for id in &batch.call_ids {
            let Some(call) = self.calls.get(id) else {
                continue;
            };
            let Some(response) = &call.response else {
                continue; // never answered (cut-off transcript)
            };
            prompt_id.get_or_insert_with(|| call.prompt_id.clone());
            first = first.or(Some(call.index));
            last = Some(call.index);
            entries.push(json!({
                "tool_name": call.name,
                "tool_input": call.input,
                "tool_use_id": id,
                "tool_response": response,
            }));
        }
        let Some(prompt_id) = prompt_id else {
            return;
        };
        let mut m = self.base(thread, &prompt_id, "PostToolBatch");
        m.insert("tool_calls".into(), Value::Array(entries));
        let slot = self.push("PostToolBatch", m, batch.last_at, first);
        if let Some(Some(p)) = self.out.get_mut(slot) {
            p.call_last = last;
        }
    }

    /// A Stop hook blocked: Stop fired, then the model went on in the same turn.
    fn stop_hook_continues(&mut self, thread: usize) {
        self.flush_batch(thread);
        let Some(turn) = self.threads[thread].turn.as_ref() else {
            return;
        };
        if turn.activity && turn.open_calls.is_empty() {
            if let Some(slot) = self.emit_stop(thread) {
                if let Some(Some(p)) = self.out.get_mut(slot) {
                    p.continued = true;
                }
            }
        }
        if let Some(turn) = self.threads[thread].turn.as_mut() {
            turn.stop_hook_active = true;
        }
    }

    fn end_turn(&mut self, thread: usize, end: End) {
        if end == End::Interrupted {
            let unfinished = self.threads[thread].batch.as_ref().is_some_and(|b| {
                b.aborted
                    || b.call_ids
                        .iter()
                        .any(|id| self.calls.get(id).is_some_and(|c| c.response.is_none()))
            });
            if unfinished {
                self.threads[thread].batch = None;
            }
        }
        self.flush_batch(thread);
        let stop = match &self.threads[thread].turn {
            Some(turn) => {
                end != End::Interrupted
                    && turn.activity
                    && !turn.api_error
                    && turn.open_calls.is_empty()
            }
            None => false,
        };
        if stop {
            self.emit_stop(thread);
        }
        self.threads[thread].turn = None;
        self.threads[thread].root_prompt = None;
    }

    fn emit_stop(&mut self, thread: usize) -> Option<usize> {
        let turn = self.threads[thread].turn.as_ref()?;
        let (prompt_id, active, last, at, last_call) = (
            turn.prompt_id.clone(),
            turn.stop_hook_active,
            turn.last_text.clone(),
            turn.last_at,
            turn.last_call,
        );
        let event = if thread == 0 { "Stop" } else { "SubagentStop" };
        let mut m = self.base(thread, &prompt_id, event);
        m.insert("stop_hook_active".into(), json!(active));
        if thread != 0 {
            m.insert("agent_transcript_path".into(), json!(""));
        }
        m.insert("last_assistant_message".into(), json!(last));
        m.insert("background_tasks".into(), json!([]));
        m.insert("session_crons".into(), json!([]));
        Some(self.push(event, m, at, last_call))
    }

    fn finish(&mut self) {
        for t in 1..self.threads.len() {
            self.end_turn(t, End::Eof);
        }
        self.end_turn(0, End::Eof);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = r#""sessionId":"s1","cwd":"/p","isSidechain":false"#;

    fn prompt(text: &str, ts: &str) -> String {
        format!(
            r#"{{{S},"type":"user","timestamp":"{ts}","message":{{"role":"user","content":{}}}}}"#,
            json!(text)
        )
    }

    fn tool_use(msg: &str, id: &str, name: &str, input: Value) -> String {
        format!(
            r#"{{{S},"type":"assistant","timestamp":"2026-02-10T22:58:00.000Z","message":{{"id":"{msg}","role":"assistant","content":[{{"type":"tool_use","id":"{id}","name":"{name}","input":{input}}}]}}}}"#
        )
    }

    fn text(msg: &str, t: &str) -> String {
        format!(
            r#"{{{S},"type":"assistant","message":{{"id":"{msg}","role":"assistant","content":[{{"type":"text","text":{}}}]}}}}"#,
            json!(t)
        )
    }

    fn result(id: &str, content: Value, is_error: bool, tur: Option<Value>) -> String {
        let tur = tur
            .map(|v| format!(r#","toolUseResult":{v}"#))
            .unwrap_or_default();
        format!(
            r#"{{{S},"type":"user","timestamp":"2026-02-10T22:58:01.500Z","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{id}","content":{content},"is_error":{is_error}}}]}}{tur}}}"#
        )
    }

    fn events(c: &Converted) -> Vec<&str> {
        c.payloads.iter().map(|p| p.event).collect()
    }

    #[test]
    fn bash_success_and_failure() {
        let t = [
            prompt("run it", "2026-02-10T22:57:54.764Z"),
            tool_use("m1", "t1", "Bash", json!({"command": "echo hi"})),
            result(
                "t1",
                json!("hi"),
                false,
                Some(json!({"stdout": "hi", "stderr": "", "interrupted": false})),
            ),
            tool_use("m2", "t2", "Bash", json!({"command": "exit 1"})),
            result(
                "t2",
                json!([{"type": "text", "text": "Exit code 1"}]),
                true,
                None,
            ),
            text("m3", "All done."),
        ]
        .join("\n");
        let c = convert(&t, "fallback");
        assert_eq!(
            events(&c),
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "PostToolBatch",
                "PreToolUse",
                "PostToolUseFailure",
                "PostToolBatch",
                "Stop"
            ]
        );
        assert_eq!(c.calls, 2);
        assert_eq!(c.sessions_id, "s1");
        let pre = &c.payloads[1].payload;
        assert_eq!(pre["session_id"], "s1");
        assert_eq!(pre["cwd"], "/p");
        assert_eq!(pre["prompt_id"], "replay-prompt-1");
        assert_eq!(pre["permission_mode"], "bypassPermissions");
        assert_eq!(pre["tool_input"]["command"], "echo hi");
        assert_eq!(pre["tool_use_id"], "t1");
        assert!(pre.get("agent_id").is_none());
        assert_eq!(c.payloads[1].call_index, Some(1));
        let post = &c.payloads[2].payload;
        assert_eq!(post["tool_response"]["stdout"], "hi");
        assert_eq!(post["duration_ms"], 1500);
        assert_eq!(
            c.payloads[3].payload["tool_calls"][0]["tool_response"],
            "hi"
        );
        let fail = &c.payloads[5].payload;
        assert_eq!(fail["error"], "Exit code 1");
        assert_eq!(fail["is_interrupt"], false);
        assert_eq!(c.payloads[5].call_index, Some(2));
        let stop = &c.payloads[7].payload;
        assert_eq!(stop["stop_hook_active"], false);
        assert_eq!(stop["last_assistant_message"], "All done.");
        assert!(c.payloads[0].at.is_some());
        // Without toolUseResult, Bash gets {"stdout": text}, other tools the text.
        let t = [
            tool_use("m1", "t1", "Bash", json!({"command": "ls"})),
            result("t1", json!("a\nb"), false, None),
            tool_use("m2", "t2", "Glob", json!({"pattern": "*"})),
            result("t2", json!("x.rs"), false, None),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            c.payloads[1].payload["tool_response"],
            json!({"stdout": "a\nb"})
        );
        assert_eq!(c.payloads[4].payload["tool_response"], json!("x.rs"));
    }

    #[test]
    fn parallel_batch_of_three() {
        let t = [
            prompt("read", "2026-02-10T22:57:54.764Z"),
            text("m1", "Reading three files."),
            tool_use("m1", "a", "Read", json!({"file_path": "/p/a"})),
            tool_use("m1", "b", "Read", json!({"file_path": "/p/b"})),
            tool_use("m1", "c", "Read", json!({"file_path": "/p/c"})),
            result("b", json!("2"), false, None),
            result("c", json!("File does not exist."), true, None),
            result("a", json!("1"), false, None),
            text("m2", "Done."),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PreToolUse",
                "PreToolUse",
                "PostToolUse",
                "PostToolUseFailure",
                "PostToolUse",
                "PostToolBatch",
                "Stop"
            ]
        );
        let batch = &c.payloads[7].payload["tool_calls"];
        let ids: Vec<&str> = (0..3)
            .map(|i| batch[i]["tool_use_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(batch[2]["tool_response"], "File does not exist.");
        assert_eq!(c.call_list[2].tool_use_id, "c");
        assert_eq!(c.call_list[2].index, 3);
        assert_eq!(
            (c.payloads[7].call_index, c.payloads[7].call_last),
            (Some(1), Some(3))
        );
    }

    #[test]
    fn rejected_edit_only_in_batch() {
        let err =
            "<tool_use_error>String to replace not found in file.\nString: x</tool_use_error>";
        let t = [
            prompt("edit", "2026-02-10T22:57:54.764Z"),
            tool_use(
                "m1",
                "e1",
                "Edit",
                json!({"file_path": "/p/r", "old_string": "x", "new_string": "y"}),
            ),
            result("e1", json!(err), true, None),
            tool_use(
                "m2",
                "e2",
                "Edit",
                json!({"file_path": "/p/r", "old_string": "x", "new_string": "y"}),
            ),
            result("e2", json!(err), true, None),
            text("m3", "Cannot."),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            ["UserPromptSubmit", "PostToolBatch", "PostToolBatch", "Stop"]
        );
        assert_eq!(c.calls, 2);
        let entry = &c.payloads[1].payload["tool_calls"][0];
        assert_eq!(entry["tool_name"], "Edit");
        assert_eq!(entry["tool_use_id"], "e1");
        assert_eq!(entry["tool_response"], err);
        // A Read failing with <tool_use_error> still goes through Pre and Failure.
        let t = [
            tool_use("m1", "r1", "Read", json!({"file_path": "/p/none"})),
            result(
                "r1",
                json!("<tool_use_error>File does not exist.</tool_use_error>"),
                true,
                None,
            ),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            ["PreToolUse", "PostToolUseFailure", "PostToolBatch", "Stop"]
        );
    }

    #[test]
    fn two_prompts_get_ids_and_stops() {
        let mut first = prompt("one", "2026-02-10T22:57:54.764Z");
        first.insert_str(first.len() - 1, r#","promptId":"p-real""#);
        let t = [
            first,
            tool_use("m1", "t1", "Bash", json!({"command": "ls"})),
            result("t1", json!("x"), false, None),
            text("m2", "First answer."),
            prompt(
                "<command-name>/mcp</command-name>",
                "2026-02-10T22:59:00.000Z",
            ),
            prompt(
                "<local-command-stdout>ok</local-command-stdout>",
                "2026-02-10T22:59:00.000Z",
            ),
            prompt("two", "2026-02-10T22:59:22.893Z"),
            tool_use("m3", "t2", "Bash", json!({"command": "pwd"})),
            result("t2", json!("/p"), false, None),
            text("m4", "Second answer."),
            prompt("three, unanswered", "2026-02-10T23:00:00.000Z"),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "PostToolBatch",
                "Stop",
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "PostToolBatch",
                "Stop",
                "UserPromptSubmit"
            ]
        );
        let p = |i: usize| {
            c.payloads[i].payload["prompt_id"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(p(0), "p-real");
        assert_eq!(p(1), "p-real");
        assert_eq!(p(4), "p-real");
        assert_eq!(
            c.payloads[4].payload["last_assistant_message"],
            "First answer."
        );
        let second = p(5);
        assert!(second.starts_with("replay-prompt-"));
        assert_ne!(second, "p-real");
        assert_eq!(p(6), second);
        assert_eq!(p(9), second);
        assert_eq!(c.payloads[5].payload["prompt"], "two");
        assert_ne!(p(10), second);
    }

    #[test]
    fn interrupted_turn_and_cut_off_call() {
        let t = [
            prompt("go", "2026-02-10T22:57:54.764Z"),
            tool_use("m1", "t1", "Bash", json!({"command": "sleep 99"})),
            result("t1", json!("The user doesn't want to proceed with this tool use. The tool use was rejected."), true, None),
            prompt("[Request interrupted by user for tool use]", "2026-02-10T22:58:02.000Z"),
            prompt("again", "2026-02-10T22:58:03.000Z"),
            tool_use("m2", "t2", "Bash", json!({"command": "sleep 1"})),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            [
                "UserPromptSubmit",
                "PreToolUse",
                "UserPromptSubmit",
                "PreToolUse"
            ]
        );
    }

    #[test]
    fn compaction_closes_calls_left_open() {
        let t = [
            prompt("go", "2026-02-10T22:57:54.764Z"),
            tool_use("m1", "t1", "Bash", json!({"command": "make"})),
            format!(r#"{{{S},"type":"system","subtype":"compact_boundary"}}"#),
            tool_use("m2", "t2", "Bash", json!({"command": "make"})),
            result("t2", json!("ok"), false, None),
            text("m3", "Built."),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PreToolUse",
                "PostToolUse",
                "PostToolBatch",
                "Stop"
            ]
        );
    }

    #[test]
    fn subagent_lines() {
        let line = |body: &str| {
            format!(
                r#"{{"sessionId":"parent","cwd":"/p","isSidechain":true,"agentId":"a1",{body}}}"#
            )
        };
        let t = [
            line(r#""type":"user","message":{"role":"user","content":"Search the code."}"#),
            line(r#""type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"s1","name":"Grep","input":{"pattern":"x"}}]}"#),
            line(r#""type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"s1","content":"a.rs"}]}"#),
            line(r#""type":"assistant","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"Found it."}]}"#),
            "not json at all".to_string(),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            ["PreToolUse", "PostToolUse", "PostToolBatch", "SubagentStop"]
        );
        assert_eq!(c.skipped_lines, 1);
        assert_eq!(c.sessions_id, "parent");
        for p in &c.payloads {
            assert_eq!(p.payload["agent_id"], "a1");
            assert_eq!(p.payload["agent_type"], "general-purpose");
            assert_eq!(p.payload["prompt_id"], c.payloads[0].payload["prompt_id"]);
        }
        assert_eq!(c.payloads[3].payload["last_assistant_message"], "Found it.");
    }

    #[test]
    fn inline_sidechain_ends_before_task_result() {
        let side = |body: &str, uuid: &str, parent: &str| {
            format!(
                r#"{{"sessionId":"s","isSidechain":true,"uuid":"{uuid}","parentUuid":{parent},{body}}}"#
            )
        };
        let t = [
            prompt("delegate", "2026-02-10T22:57:54.764Z"),
            tool_use("m1", "task", "Task", json!({"prompt": "Look around.", "description": "d"})),
            side(r#""type":"user","message":{"role":"user","content":"Look around."}"#, "u1", "null"),
            side(r#""type":"assistant","message":{"id":"sm1","role":"assistant","content":[{"type":"tool_use","id":"ls","name":"LS","input":{"path":"/p"}}]}"#, "u2", r#""u1""#),
            side(r#""type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"ls","content":"a"}]}"#, "u3", r#""u2""#),
            side(r#""type":"assistant","message":{"id":"sm2","role":"assistant","content":[{"type":"text","text":"Report."}]}"#, "u4", r#""u3""#),
            result("task", json!([{"type": "text", "text": "Report."}]), false, None),
            text("m2", "Done."),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PreToolUse",
                "PostToolUse",
                "PostToolBatch",
                "SubagentStop",
                "PostToolUse",
                "PostToolBatch",
                "Stop"
            ]
        );
        let main_prompt = &c.payloads[0].payload["prompt_id"];
        assert_eq!(&c.payloads[2].payload["prompt_id"], main_prompt);
        assert!(c.payloads[2].payload["agent_id"].is_string());
        assert!(c.payloads[1].payload.get("agent_id").is_none());
        // The batch keeps the array content the model saw.
        assert!(c.payloads[7].payload["tool_calls"][0]["tool_response"].is_array());
    }

    #[test]
    fn stop_hook_block_gives_two_stops() {
        let mut feedback = prompt("Stop hook feedback: not yet", "2026-02-10T22:58:05.000Z");
        feedback.insert_str(feedback.len() - 1, r#","isMeta":true"#);
        let t = [
            prompt("go", "2026-02-10T22:57:54.764Z"),
            text("m1", "First."),
            feedback,
            text("m2", "Second."),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(events(&c), ["UserPromptSubmit", "Stop", "Stop"]);
        assert!(c.payloads[1].continued);
        assert!(!c.payloads[2].continued);
        assert_eq!(c.payloads[1].payload["stop_hook_active"], false);
        assert_eq!(c.payloads[2].payload["stop_hook_active"], true);
        assert_eq!(c.payloads[2].payload["last_assistant_message"], "Second.");
    }

    /// A line of subagent `a1` as Claude Code writes it in the subagent's own transcript.
    fn sub(uuid: &str, ts: &str, body: &str) -> String {
        format!(
            r#"{{"sessionId":"s1","cwd":"/p","isSidechain":true,"agentId":"a1","uuid":"{uuid}","timestamp":"{ts}",{body}}}"#
        )
    }

    /// The same message wrapped in an `agent_progress` line of the main transcript.
    fn progress(uuid: &str, ts: &str, body: &str) -> String {
        format!(
            r#"{{{S},"type":"progress","uuid":"p-{uuid}","timestamp":"{ts}","data":{{"type":"agent_progress","agentId":"a1","prompt":"Search.","message":{{"uuid":"{uuid}","timestamp":"{ts}",{body}}}}}}}"#
        )
    }

    const SUB_PROMPT: &str = r#""type":"user","message":{"role":"user","content":"Search."}"#;
    const SUB_GREP: &str = r#""type":"assistant","message":{"id":"sm1","role":"assistant","content":[{"type":"tool_use","id":"g1","name":"Grep","input":{"pattern":"x"}}]}"#;
    const SUB_RESULT: &str = r#""type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"g1","content":"a.rs"}]}"#;
    const SUB_TEXT: &str = r#""type":"assistant","message":{"id":"sm2","role":"assistant","content":[{"type":"text","text":"Found it."}]}"#;

    fn main_with_task(middle: &[String]) -> String {
        let mut lines = vec![
            prompt("delegate", "2026-02-10T22:57:54.764Z"),
            tool_use(
                "m1",
                "task",
                "Task",
                json!({"prompt": "Search.", "description": "d"}),
            ),
        ];
        lines.extend(middle.iter().cloned());
        let mut done = result(
            "task",
            json!([{"type": "text", "text": "Found it."}]),
            false,
            None,
        );
        done = done.replace("22:58:01.500Z", "22:58:09.000Z");
        lines.push(done);
        lines.push(text("m2", "Done."));
        lines.join("\n")
    }

    const SUBAGENT_EVENTS: [&str; 9] = [
        "UserPromptSubmit",
        "PreToolUse",
        "PreToolUse",
        "PostToolUse",
        "PostToolBatch",
        "SubagentStop",
        "PostToolUse",
        "PostToolBatch",
        "Stop",
    ];

    #[test]
    fn progress_lines_are_subagent_calls() {
        let t = main_with_task(&[
            progress("u1", "2026-02-10T22:58:02.000Z", SUB_PROMPT),
            progress("u2", "2026-02-10T22:58:03.000Z", SUB_GREP),
            progress("u3", "2026-02-10T22:58:04.000Z", SUB_RESULT),
            progress("u4", "2026-02-10T22:58:05.000Z", SUB_TEXT),
        ]);
        let c = convert(&t, "fb");
        assert_eq!(events(&c), SUBAGENT_EVENTS);
        assert_eq!(c.calls, 2);
        assert_eq!(c.call_list[1].agent_id.as_deref(), Some("a1"));
        assert_eq!(c.call_list[0].agent_id, None);
        let grep = &c.payloads[2].payload;
        assert_eq!(grep["agent_id"], "a1");
        assert_eq!(grep["agent_type"], "general-purpose");
        assert_eq!(grep["session_id"], "s1");
        assert_eq!(grep["prompt_id"], c.payloads[0].payload["prompt_id"]);
        // The subagent's own time, not the parent's.
        let at = |i: usize| c.payloads[i].at.unwrap();
        assert_eq!(at(2), parse_time("2026-02-10T22:58:03.000Z").unwrap());
        assert_eq!(c.payloads[5].payload["last_assistant_message"], "Found it.");
        assert_eq!(c.payloads[5].call_index, Some(2));
    }

    #[test]
    fn subagent_transcript_is_merged_by_time_and_played_once() {
        let sub_file = [
            sub("u1", "2026-02-10T22:58:02.000Z", SUB_PROMPT),
            sub("u2", "2026-02-10T22:58:03.000Z", SUB_GREP),
            sub("u3", "2026-02-10T22:58:04.000Z", SUB_RESULT),
            sub("u4", "2026-02-10T22:58:05.000Z", SUB_TEXT),
        ]
        .join("\n");
        // Only the subagent's own transcript has its calls.
        let c = convert_group(&main_with_task(&[]), &[&sub_file], "fb");
        assert_eq!(events(&c), SUBAGENT_EVENTS);
        assert_eq!(c.calls, 2);
        // Both the progress lines and the subagent's transcript: each message once.
        let t = main_with_task(&[
            progress("u1", "2026-02-10T22:58:02.000Z", SUB_PROMPT),
            progress("u2", "2026-02-10T22:58:03.000Z", SUB_GREP),
            progress("u3", "2026-02-10T22:58:04.000Z", SUB_RESULT),
            progress("u4", "2026-02-10T22:58:05.000Z", SUB_TEXT),
        ]);
        let c = convert_group(&t, &[&sub_file], "fb");
        assert_eq!(events(&c), SUBAGENT_EVENTS);
        assert_eq!(c.calls, 2);
        // A subagent transcript alone.
        let c = convert_group("", &[&sub_file], "fb");
        assert_eq!(
            events(&c),
            ["PreToolUse", "PostToolUse", "PostToolBatch", "SubagentStop"]
        );
        assert_eq!(c.sessions_id, "s1");
    }

    #[test]
    fn background_subagent_outlives_its_launch() {
        let launched = result(
            "task",
            json!("Async agent launched successfully."),
            false,
            Some(json!({"isAsync": true, "status": "async_launched", "agentId": "a1"})),
        );
        let t = [
            prompt("delegate", "2026-02-10T22:57:54.764Z"),
            tool_use(
                "m1",
                "task",
                "Task",
                json!({"prompt": "Search.", "description": "d"}),
            ),
            progress("u1", "2026-02-10T22:58:01.000Z", SUB_PROMPT),
            launched,
            progress("u2", "2026-02-10T22:58:03.000Z", SUB_GREP),
            progress("u3", "2026-02-10T22:58:04.000Z", SUB_RESULT),
            progress("u4", "2026-02-10T22:58:05.000Z", SUB_TEXT),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        // One subagent turn: its Grep is not cut off by the launch result.
        let stops = events(&c).iter().filter(|e| **e == "SubagentStop").count();
        assert_eq!(stops, 1);
        assert_eq!(c.calls, 2);
    }

    #[test]
    fn sibling_cancellation_fires_no_post() {
        let err = "<tool_use_error>Sibling tool call errored</tool_use_error>";
        let t = [
            prompt("check", "2026-02-10T22:57:54.764Z"),
            tool_use("m1", "early", "Read", json!({"file_path": "/p/a"})),
            tool_use("m1", "bad", "Bash", json!({"command": "false"})),
            result("bad", json!("Exit code 1"), true, None),
            tool_use(
                "m1",
                "late",
                "Edit",
                json!({"file_path": "/p/b", "old_string": "x", "new_string": "y"}),
            ),
            result("late", json!(err), true, None),
            result("early", json!(err), true, None),
            text("m2", "One failed."),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PreToolUse",
                "PostToolUseFailure",
                "PostToolBatch",
                "Stop"
            ]
        );
        // The call that started before the failure had its PreToolUse; the one streamed in after
        // it never started. Both are in the batch with the text the model saw.
        assert_eq!(c.payloads[1].payload["tool_use_id"], "early");
        assert_eq!(c.payloads[2].payload["tool_use_id"], "bad");
        let batch = &c.payloads[4].payload["tool_calls"];
        assert_eq!(batch.as_array().unwrap().len(), 3);
        assert_eq!(batch[0]["tool_response"], err);
        assert_eq!(batch[2]["tool_use_id"], "late");
        assert_eq!(batch[2]["tool_response"], err);
        assert_eq!(c.calls, 3);
    }

    #[test]
    fn refusal_with_feedback_goes_on_in_the_turn() {
        let refusal = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\nnot like that";
        let t = [
            prompt("fix", "2026-02-10T22:57:54.764Z"),
            tool_use("m1", "e1", "ExitPlanMode", json!({"plan": "p"})),
            result(
                "e1",
                json!(refusal),
                true,
                Some(json!(format!("Error: {refusal}"))),
            ),
            text("m2", "Understood."),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            ["UserPromptSubmit", "PreToolUse", "PostToolBatch", "Stop"]
        );
        assert_eq!(
            c.payloads[2].payload["tool_calls"][0]["tool_response"],
            refusal
        );
    }

    #[test]
    fn permission_denied_without_a_person_fires_no_post() {
        let denied = "Claude requested permissions to write to /p/CLAUDE.md, but you haven't granted it yet.";
        let t = [
            prompt("write it", "2026-02-10T22:57:54.764Z"),
            tool_use("m1", "w1", "Bash", json!({"command": "touch /p/x"})),
            result(
                "w1",
                json!("touch in '/p/x' needs approval. Ask the user."),
                true,
                None,
            ),
            tool_use(
                "m2",
                "w2",
                "Write",
                json!({"file_path": "/p/CLAUDE.md", "content": "x"}),
            ),
            result("w2", json!(denied), true, None),
            tool_use("m3", "w3", "Bash", json!({"command": "grep approval log"})),
            result(
                "w3",
                json!("Exit code 1\nrun needs approval first"),
                true,
                None,
            ),
            text("m4", "I need permission."),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolBatch",
                "PreToolUse",
                "PostToolBatch",
                "PreToolUse",
                "PostToolUseFailure",
                "PostToolBatch",
                "Stop"
            ]
        );
        assert_eq!(
            c.payloads[4].payload["tool_calls"][0]["tool_response"],
            denied
        );
    }

    #[test]
    fn interrupted_call_fails_as_an_interrupt_and_ends_the_turn() {
        let t = [
            prompt("test", "2026-02-10T22:57:54.764Z"),
            tool_use("m1", "t1", "Bash", json!({"command": "go test ./..."})),
            result(
                "t1",
                json!("Exit code 137\n[Request interrupted by user for tool use]\n=== RUN   TestX"),
                true,
                None,
            ),
            prompt(
                "[Request interrupted by user for tool use]",
                "2026-02-10T22:58:02.000Z",
            ),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(
            events(&c),
            ["UserPromptSubmit", "PreToolUse", "PostToolUseFailure"]
        );
        assert_eq!(c.payloads[2].payload["is_interrupt"], true);
    }

    #[test]
    fn permission_mode_follows_the_transcript() {
        let mut p = prompt("go", "2026-02-10T22:57:54.764Z");
        p.insert_str(p.len() - 1, r#","permissionMode":"plan""#);
        let t = [
            p,
            tool_use("m1", "t1", "Read", json!({"file_path": "/p/a"})),
        ]
        .join("\n");
        let c = convert(&t, "fb");
        assert_eq!(c.payloads[0].payload["permission_mode"], "plan");
        assert_eq!(c.payloads[1].payload["permission_mode"], "plan");
    }

    #[test]
    fn inspect_tells_transcripts_apart() {
        assert_eq!(
            inspect(&prompt("go", "2026-02-10T22:57:54.764Z")),
            Kind::Session {
                session_id: Some("s1".into())
            }
        );
        assert_eq!(
            inspect(&sub("u1", "2026-02-10T22:58:02.000Z", SUB_PROMPT)),
            Kind::Subagent {
                session_id: Some("s1".into())
            }
        );
        assert_eq!(
            inspect(r#"{"type":"summary","summary":"x"}"#),
            Kind::NotTranscript
        );
        assert_eq!(inspect("{\"a\":1}\nnot json\n"), Kind::NotTranscript);
        assert_eq!(inspect(""), Kind::NotTranscript);
    }

    #[test]
    fn never_panics_on_odd_lines() {
        let t = r#"
// header
[1,2]
{"type":"assistant"}
{"type":"assistant","message":{"content":[{"type":"tool_use"}]}}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"x","name":"Bash","input":"ls"}]}}
{"type":"user","message":{"content":[{"type":"tool_result"},{"type":"tool_result","tool_use_id":"nope"},{"type":"tool_result","tool_use_id":"x","content":null,"is_error":"yes"}]}}
{"type":"user","message":{"content":42}}
{"type":"user","timestamp":"not a time","message":{"content":"<command-message>x"}}
{"type":"system","subtype":"stop_hook_summary"}
"#;
        let c = convert(t, "");
        assert_eq!(c.sessions_id, "replay");
        assert_eq!(c.skipped_lines, 2);
        assert_eq!(c.calls, 1);
        assert_eq!(c.payloads[0].payload["tool_input"], json!({}));
        assert_eq!(
            c.payloads[1].payload["tool_response"],
            json!({"stdout": ""})
        );
    }
}
