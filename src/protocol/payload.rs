//! The hook input: one JSON object on stdin, parsed tolerantly (unknown fields ignored) but with the
//! fields each event needs checked, so a malformed call fails open with a clear line.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;

/// Hook events loopgate understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Claude Code's session start, before the first prompt: only a new session's files are
    /// made, so the first prompt creates none.
    SessionStart,
    PreToolUse,
    PostToolUse,
    PostToolUseFailure,
    PostToolBatch,
    Stop,
    SubagentStop,
    UserPromptSubmit,
    /// Claude Code's settings changed on disk: loopgate's wiring is checked (see `wiring`).
    ConfigChange,
    /// A path SessionStart asked Claude Code to watch (the hooks' binary, loopgate's config)
    /// changed: noted for the person (see `wiring::file_changed`); it cannot block.
    FileChanged,
    /// Claude Code expanded a slash command the person typed: `/loopgate allow <id>` keeps a
    /// change ConfigChange undid (see `defence::sanction`).
    UserPromptExpansion,
    /// A call about to ask for permission (Copilot CLI's `permissionRequest`): the one answer
    /// that ends a Copilot run mid-turn, so a turn past the loop ceiling ends there.
    PermissionRequest,
}

impl Event {
    pub fn parse(name: &str) -> Option<Event> {
        Some(match name {
            "SessionStart" => Event::SessionStart,
            "PreToolUse" => Event::PreToolUse,
            "PostToolUse" => Event::PostToolUse,
            "PostToolUseFailure" => Event::PostToolUseFailure,
            "PostToolBatch" => Event::PostToolBatch,
            "Stop" => Event::Stop,
            "SubagentStop" => Event::SubagentStop,
            "UserPromptSubmit" => Event::UserPromptSubmit,
            "ConfigChange" => Event::ConfigChange,
            "FileChanged" => Event::FileChanged,
            "UserPromptExpansion" => Event::UserPromptExpansion,
            "PermissionRequest" | "permissionRequest" => Event::PermissionRequest,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Event::SessionStart => "SessionStart",
            Event::PreToolUse => "PreToolUse",
            Event::PostToolUse => "PostToolUse",
            Event::PostToolUseFailure => "PostToolUseFailure",
            Event::PostToolBatch => "PostToolBatch",
            Event::Stop => "Stop",
            Event::SubagentStop => "SubagentStop",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::ConfigChange => "ConfigChange",
            Event::FileChanged => "FileChanged",
            Event::UserPromptExpansion => "UserPromptExpansion",
            Event::PermissionRequest => "PermissionRequest",
        }
    }

    fn is_tool_event(self) -> bool {
        matches!(
            self,
            Event::PreToolUse | Event::PostToolUse | Event::PostToolUseFailure
        )
    }
}

/// One entry of a PostToolBatch: `tool_response` is the text the model saw.
#[derive(Debug, Clone, Deserialize)]
pub struct BatchCall {
    pub tool_name: String,
    #[serde(default)]
    pub tool_input: Value,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub tool_response: Value,
}

impl BatchCall {
    /// What the call answered, as text (a string, or an array's text blocks joined).
    pub fn response_text(&self) -> String {
        match &self.tool_response {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            Value::Array(items) => items
                .iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        }
    }
}

/// The fields of every hook payload loopgate reads. Everything else is ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Payload {
    pub session_id: String,
    pub hook_event_name: String,
    #[serde(default)]
    pub prompt_id: Option<String>,
    /// The session's transcript: logged with each decision so that `report` can tell what a
    /// loop cost. A hook reads only its end, and only for a call inside a loop (the budget).
    #[serde(default)]
    pub transcript_path: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_input: Option<Value>,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub tool_response: Option<Value>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub is_interrupt: Option<bool>,
    #[serde(default)]
    pub stop_hook_active: Option<bool>,
    /// ConfigChange, FileChanged: the file that changed.
    #[serde(default)]
    pub file_path: Option<String>,
    /// FileChanged: what happened to it (`change`, `add`, `unlink`).
    #[serde(default, rename = "event")]
    pub file_event: Option<String>,
    /// UserPromptExpansion: `slash_command` for a command the person typed.
    #[serde(default)]
    pub expansion_type: Option<String>,
    /// UserPromptExpansion: the command's name, without the slash (`loopgate`).
    #[serde(default)]
    pub command_name: Option<String>,
    /// UserPromptExpansion: where the command is defined (`userSettings` for the one setup
    /// writes in `~/.claude/commands/`; a project's own commands come from elsewhere).
    #[serde(default)]
    pub command_source: Option<String>,
    /// UserPromptExpansion: what followed the command's name (`allow 3f9a2c`).
    #[serde(default)]
    pub command_args: Option<String>,
    /// UserPromptSubmit: what the user asked (only its digest is kept).
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default, deserialize_with = "batch_calls")]
    pub tool_calls: Option<Vec<BatchCall>>,
    /// Marks only other agent CLIs leave (see `dialect::detect`); never read otherwise.
    #[serde(default)]
    turn_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    tool_call_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    tool_result: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    stop_reason: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    parent_agent_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    timestamp: Option<serde::de::IgnoredAny>,
}

/// The batch's calls; entries that are not calls (such as the note [`compact`] leaves where it
/// cut a very long batch) are skipped.
fn batch_calls<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<BatchCall>>, D::Error> {
    let raw: Option<Vec<Value>> = Option::deserialize(d)?;
    Ok(raw.map(|calls| {
        calls
            .into_iter()
            .filter_map(|c| serde_json::from_value(c).ok())
            .collect()
    }))
}

/// What the input is when its first character says it cannot be an object: an array, a string,
/// a number, `true`, `false` or `null`.
fn not_an_object(bytes: &[u8]) -> Option<&'static str> {
    let first = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace() && **b != 0xEF && **b != 0xBB && **b != 0xBF)?;
    Some(match first {
        b'{' => return None,
        b'[' => "a JSON array",
        b'"' => "a JSON string",
        b'-' | b'0'..=b'9' => "a number",
        b't' | b'f' => "a boolean",
        b'n' => "null",
        _ => return None,
    })
}

/// serde's refusal of a payload, in words (no Rust type names).
fn not_a_payload(e: serde_json::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "hook input is not a valid hook JSON object: {}",
        crate::util::words::plain(&e.to_string())
    )
}

impl Payload {
    /// Parses stdin bytes and checks the event has what it needs.
    pub fn parse(bytes: &[u8]) -> Result<(Payload, Event)> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            bail!("empty hook input on stdin (expected one JSON object)");
        }
        if let Some(kind) = not_an_object(bytes) {
            bail!("hook input is {kind}, expected an object (one hook JSON object, {{…}})");
        }
        let p: Payload = serde_json::from_slice(bytes).map_err(not_a_payload)?;
        p.checked()
    }

    /// A payload another agent CLI sent, already turned into Claude Code's shape by its dialect.
    pub fn from_value(v: Value) -> Result<(Payload, Event)> {
        let p: Payload = serde_json::from_value(v).map_err(not_a_payload)?;
        p.checked()
    }

    /// Checks the event has what it needs, and bounds the identifiers that land in the state.
    fn checked(self) -> Result<(Payload, Event)> {
        let p = self;
        let event = Event::parse(&p.hook_event_name).with_context(|| {
            format!("unknown hook_event_name {:?}", clip(&p.hook_event_name, 60))
        })?;
        if p.session_id.is_empty() {
            bail!("hook input has an empty session_id");
        }
        if event.is_tool_event() {
            if p.tool_name.as_deref().unwrap_or("").is_empty() {
                bail!("{} hook input has no tool_name", event.name());
            }
            if !matches!(p.tool_input, Some(Value::Object(_))) {
                bail!("{} hook input has no tool_input object", event.name());
            }
        }
        if event == Event::PostToolBatch && p.tool_calls.is_none() {
            bail!("PostToolBatch hook input has no tool_calls");
        }
        let mut p = p;
        // Identifiers land in the state file: an absurdly long one must not bloat it.
        for field in [
            &mut p.tool_name,
            &mut p.tool_use_id,
            &mut p.prompt_id,
            &mut p.agent_id,
        ]
        .into_iter()
        .flatten()
        {
            bound(field);
        }
        for bc in p.tool_calls.iter_mut().flatten() {
            bound(&mut bc.tool_name);
            if let Some(id) = bc.tool_use_id.as_mut() {
                bound(id);
            }
        }
        Ok((p, event))
    }

    /// Which agent made the call: subagents are tracked apart from the main agent.
    pub fn agent(&self) -> &str {
        match self.agent_id.as_deref() {
            Some(id) if !id.is_empty() => id,
            _ => MAIN_AGENT,
        }
    }

    /// The agent's key in the state and the log: [`stored_id`] of [`Payload::agent`].
    pub fn agent_key(&self) -> String {
        stored_id(self.agent())
    }

    /// A payload of another agent CLI that parsed as Claude Code's.
    pub fn foreign_marks(&self) -> bool {
        self.turn_id.is_some()
            || self.tool_call_id.is_some()
            || self.tool_result.is_some()
            || self.stop_reason.is_some()
            || self.parent_agent_id.is_some()
            || self.timestamp.is_some()
            || self
                .prompt_id
                .as_deref()
                .is_some_and(|p| p.contains("########"))
    }

    pub fn tool(&self) -> &str {
        self.tool_name.as_deref().unwrap_or("")
    }
}

/// Longest identifier kept as it is; a longer one becomes a prefix plus a digest of the whole, so
/// distinct ids stay distinct.
const MAX_ID: usize = 200;

fn bound(s: &mut String) {
    if s.len() <= MAX_ID {
        return;
    }
    let mut cut = MAX_ID / 2;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    *s = format!("{}…{}", &s[..cut], crate::util::canon::text_key(s));
}

/// An id (an agent's, a tool call's) as stored: itself up to 64 characters; a longer one
/// becomes its first 31 characters and a hash of the whole, so two long ids sharing a prefix
/// stay apart (clipping made two agents one) and the state keeps a bounded size.
pub fn stored_id(id: &str) -> String {
    if id.chars().count() <= 64 {
        return clip(id, 64);
    }
    let head: String = clip(id, 31).chars().take(31).collect();
    format!("{head}#{}", crate::util::canon::text_key(id))
}

/// The id of the session's own agent, as against its subagents (which each carry an `agent_id`).
pub const MAIN_AGENT: &str = "main";

/// Shortens untrusted text for messages and logs, on a char boundary.
pub fn clip(s: &str, max_chars: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max_chars)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().nth(max_chars).is_some() {
        out.push('…');
    }
    out
}

/// Reading stdin without materialising what is not needed. A hook payload may carry a tool
/// result of tens of megabytes; loopgate needs its identity, not its bytes. [`read_compact`]
/// streams the input once and writes compact JSON in which
/// - every string longer than a cap (256 KiB, less as the output fills) becomes its first bytes
///   (4 KiB at most) plus the length and SHA-256 of its raw bytes, so equal results still
///   compare equal;
/// - a container keeps its first [`MAX_CHILDREN`] children (fewer once [`MAX_TOKENS`] values
///   have been kept); the rest becomes one string naming how many were left out and their hash.
///
/// Peak memory is then the compact output plus its parse, whatever the input: a few MiB.
pub mod compact {
    use anyhow::{bail, Result};
    use sha2::{Digest, Sha256};
    use std::io::Read;

    /// Children kept per array or object.
    pub const MAX_CHILDREN: u32 = 1024;
    /// Values (strings, containers, scalars) kept in all.
    pub const MAX_TOKENS: u64 = 50_000;
    /// Strings share this much output: each may take a sixteenth of what is left, so together
    /// they never exceed it (beyond a floor of [`MIN_STRING_CAP`] each).
    const STRING_BUDGET: usize = 8 << 20;
    /// Output past this (only a pathological input gets there: a number of megabytes) is not a
    /// payload loopgate can judge.
    pub const MAX_OUTPUT: usize = 16 << 20;
    /// Deeper containers are kept as a note with their digest (as elided members are): the
    /// parser's own limit is 128, and a call nested past it was not judged at all.
    const MAX_DEPTH: usize = 64;
    const STRING_CAP: usize = 256 << 10;
    const MIN_STRING_CAP: usize = 64;
    const PREFIX: usize = 4 << 10;

    #[derive(Clone, Copy, PartialEq)]
    enum Kind {
        Object,
        Array,
    }

    struct Frame {
        kind: Kind,
        children: u32,
    }

    struct Str {
        buf: Vec<u8>,
        len: u64,
        cap: usize,
        hash: Option<Sha256>,
        escape: bool,
    }

    struct Skip {
        kind: Kind,
        depth: usize,
        in_string: bool,
        escape: bool,
        elided: u64,
        bytes: u64,
        hash: Sha256,
        /// A whole value too deep to keep, not the rest of a container's members.
        nested: bool,
    }

    #[derive(Default)]
    pub struct Compactor {
        pub out: Vec<u8>,
        stack: Vec<Frame>,
        string: Option<Str>,
        skip: Option<Skip>,
        tokens: u64,
        /// One complete top-level value has been read; what follows is not looked at.
        pub done: bool,
    }

    /// Streams `r` (at most `cap` bytes) into compact JSON.
    pub fn read_compact(r: impl Read, cap: u64) -> Result<Vec<u8>> {
        read_compact_with(r, cap, || Ok(()))
    }

    /// Streams `r` (at most `cap` bytes) into compact JSON, stopping as soon as one complete JSON
    /// value has arrived: a CLI that leaves stdin open after writing the payload does not keep
    /// the hook waiting for an end of input. `ready` is asked before each read and fails when
    /// the input is too slow in coming (see [`stdin_ready`]).
    pub fn read_compact_with(
        mut r: impl Read,
        cap: u64,
        mut ready: impl FnMut() -> Result<()>,
    ) -> Result<Vec<u8>> {
        const CHUNK: usize = 16 << 10;
        let mut c = Compactor::default();
        // At least stdin's own buffer (8 KiB), so its lock hands every read straight to the
        // descriptor: bytes held back in that buffer would be invisible to `ready`'s poll.
        let mut buf = vec![0u8; CHUNK];
        let mut total = 0u64;
        while !c.done {
            ready()?;
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(anyhow::Error::new(e).context("cannot read hook input from stdin"))
                }
            };
            total += n as u64;
            if total > cap {
                bail!("hook input is larger than {} MiB; not judged", cap >> 20);
            }
            c.feed(&buf[..n])?;
        }
        c.finish();
        Ok(c.out)
    }

    /// How long a hook waits for the rest of its input once the object is complete.
    const DRAIN_DEADLINE: std::time::Duration = std::time::Duration::from_millis(200);

    /// Reads stdin on to its end after the object: a writer that sends the trailing newline
    /// after the object (or anything else) must not meet a closed pipe. What follows is not
    /// judged; a writer that keeps the pipe open is waited for only briefly, and at most `cap`
    /// more bytes are read.
    pub fn drain_stdin(cap: u64) {
        use std::io::Read;
        if !crate::platform::STDIN_WAIT_HAS_DEADLINE {
            return;
        }
        let until = std::time::Instant::now() + DRAIN_DEADLINE;
        // Small: it is zeroed on every call, and what follows the payload is a newline or two.
        let mut buf = [0u8; 256];
        let mut total = 0u64;
        let mut stdin = std::io::stdin().lock();
        while total <= cap {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if !matches!(crate::platform::stdin_readable_within(left), Ok(true)) {
                return;
            }
            match stdin.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => total += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    }

    /// How long a hook waits for its input to be complete: Claude Code writes a payload at
    /// once, so only a stuck or hostile writer ever meets this.
    pub const STDIN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

    /// Waits until stdin has input (or its end), failing once `deadline` has passed.
    pub fn stdin_ready(deadline: std::time::Instant) -> Result<()> {
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match crate::platform::stdin_readable_within(left) {
                Ok(true) => return Ok(()),
                Ok(false) => bail!(
                    "hook input was not complete within {} s; not judged",
                    STDIN_DEADLINE.as_secs()
                ),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Ok(()),
            }
        }
    }

    impl Compactor {
        pub fn feed(&mut self, mut input: &[u8]) -> Result<()> {
            while !input.is_empty() && !self.done {
                let used = if self.skip.is_some() {
                    self.skipping(input)
                } else if self.string.is_some() {
                    self.in_string(input)
                } else {
                    self.structural(input)?
                };
                input = &input[used..];
            }
            if self.out.len() > MAX_OUTPUT {
                bail!(
                    "hook input holds more structure than loopgate judges (over {} MiB kept); not judged",
                    MAX_OUTPUT >> 20
                );
            }
            Ok(())
        }

        /// Strings and skips cut short by the end of the input are left open: the parser then
        /// reports the input as truncated.
        pub fn finish(&mut self) {
            if let Some(s) = self.string.take() {
                self.out.push(b'"');
                self.out.extend_from_slice(&s.buf);
            }
        }

        fn structural(&mut self, input: &[u8]) -> Result<usize> {
            for (i, &b) in input.iter().enumerate() {
                match b {
                    b'"' => {
                        self.tokens += 1;
                        let room = STRING_BUDGET.saturating_sub(self.out.len()) / 16;
                        self.string = Some(Str {
                            buf: Vec::new(),
                            len: 0,
                            cap: room.clamp(MIN_STRING_CAP, STRING_CAP),
                            hash: None,
                            escape: false,
                        });
                        return Ok(i + 1);
                    }
                    b'{' | b'[' => {
                        self.tokens += 1;
                        if self.stack.len() >= MAX_DEPTH {
                            let mut hash = Sha256::new();
                            hash.update([b]);
                            self.skip = Some(Skip {
                                kind: if b == b'{' { Kind::Object } else { Kind::Array },
                                depth: 0,
                                in_string: false,
                                escape: false,
                                elided: 0,
                                bytes: 1,
                                hash,
                                nested: true,
                            });
                            return Ok(i + 1);
                        }
                        let kind = if b == b'{' { Kind::Object } else { Kind::Array };
                        self.stack.push(Frame { kind, children: 0 });
                        self.out.push(b);
                    }
                    b'}' | b']' => {
                        self.stack.pop();
                        self.out.push(b);
                        if self.stack.is_empty() {
                            self.done = true;
                            return Ok(i + 1);
                        }
                    }
                    b',' => {
                        let full = self.tokens >= MAX_TOKENS;
                        if let Some(f) = self.stack.last_mut() {
                            f.children += 1;
                            if f.children >= MAX_CHILDREN || full {
                                self.skip = Some(Skip {
                                    kind: f.kind,
                                    depth: 0,
                                    in_string: false,
                                    escape: false,
                                    elided: 1,
                                    bytes: 0,
                                    hash: Sha256::new(),
                                    nested: false,
                                });
                                return Ok(i + 1);
                            }
                        }
                        self.tokens += 1;
                        self.out.push(b);
                    }
                    b' ' | b'\t' | b'\n' | b'\r' => {}
                    _ => self.out.push(b),
                }
            }
            Ok(input.len())
        }

        fn in_string(&mut self, input: &[u8]) -> usize {
            let s = self.string.as_mut().expect("in a string");
            let mut i = 0;
            while i < input.len() {
                if s.escape {
                    s.escape = false;
                    i += 1;
                    continue;
                }
                match memchr::memchr2(b'"', b'\\', &input[i..]) {
                    Some(off) if input[i + off] == b'\\' => {
                        s.escape = true;
                        i += off + 1;
                    }
                    Some(off) => {
                        Self::take(s, &input[..i + off]);
                        let s = self.string.take().expect("in a string");
                        self.close_string(s);
                        return i + off + 1;
                    }
                    None => {
                        i = input.len();
                    }
                }
            }
            // The chunk ends inside the string; an escape may straddle the boundary.
            Self::take(s, input);
            input.len()
        }

        /// Appends raw string bytes: kept while under the cap, hashed from then on.
        fn take(s: &mut Str, bytes: &[u8]) {
            s.len += bytes.len() as u64;
            if let Some(h) = s.hash.as_mut() {
                h.update(bytes);
                return;
            }
            s.buf.extend_from_slice(bytes);
            if s.buf.len() > s.cap {
                let mut h = Sha256::new();
                h.update(&s.buf);
                s.hash = Some(h);
                s.buf.truncate(safe_cut(&s.buf, PREFIX.min(s.cap)));
                s.buf.shrink_to_fit();
            }
        }

        fn close_string(&mut self, s: Str) {
            self.out.push(b'"');
            match s.hash {
                None => self.out.extend_from_slice(&s.buf),
                Some(h) => {
                    let cut = safe_cut(&s.buf, PREFIX.min(s.cap));
                    self.out.extend_from_slice(&s.buf[..cut]);
                    let note = format!(
                        "…[loopgate: {} bytes, sha256 {}]",
                        s.len,
                        crate::util::canon::hex16(&h.finalize())
                    );
                    self.out.extend_from_slice(note.as_bytes());
                }
            }
            self.out.push(b'"');
        }

        fn skipping(&mut self, input: &[u8]) -> usize {
            let k = self.skip.as_mut().expect("skipping");
            let mut i = 0;
            while i < input.len() {
                let b = input[i];
                if k.in_string {
                    if k.escape {
                        k.escape = false;
                        i += 1;
                    } else {
                        // Jump to the next quote or backslash: skipped data is mostly strings.
                        match memchr::memchr2(b'"', b'\\', &input[i..]) {
                            Some(off) => {
                                if input[i + off] == b'"' {
                                    k.in_string = false;
                                } else {
                                    k.escape = true;
                                }
                                i += off + 1;
                            }
                            None => i = input.len(),
                        }
                    }
                    continue;
                }
                let at = i;
                i += 1;
                match b {
                    b'"' => k.in_string = true,
                    b'{' | b'[' => k.depth += 1,
                    b'}' | b']' if k.depth > 0 => k.depth -= 1,
                    b'}' | b']' => {
                        k.hash.update(&input[..at]);
                        k.bytes += at as u64;
                        let k = self.skip.take().expect("skipping");
                        if k.nested {
                            let mut hash = k.hash;
                            hash.update([b]);
                            let note = format!(
                                "[loopgate: nested deeper than {MAX_DEPTH}, {} bytes, sha256 {}]",
                                k.bytes + 1,
                                crate::util::canon::hex16(&hash.finalize())
                            );
                            let quoted = serde_json::to_string(&note).unwrap_or_default();
                            self.out.extend_from_slice(quoted.as_bytes());
                            return at + 1;
                        }
                        let note = format!(
                            "[loopgate: {} more {} left out, {} bytes, sha256 {}]",
                            k.elided,
                            if k.kind == Kind::Array {
                                "elements"
                            } else {
                                "members"
                            },
                            k.bytes,
                            crate::util::canon::hex16(&k.hash.finalize())
                        );
                        let quoted = serde_json::to_string(&note).unwrap_or_default();
                        if k.kind == Kind::Array {
                            self.out.push(b',');
                            self.out.extend_from_slice(quoted.as_bytes());
                        } else {
                            self.out.extend_from_slice(b",\"loopgate_elided\":");
                            self.out.extend_from_slice(quoted.as_bytes());
                        }
                        self.out.push(b);
                        self.stack.pop();
                        return at + 1;
                    }
                    b',' if k.depth == 0 => k.elided += 1,
                    _ => {}
                }
            }
            k.hash.update(input);
            k.bytes += input.len() as u64;
            input.len()
        }
    }

    /// The longest prefix of raw JSON string bytes, at most `max`, that ends neither inside an
    /// escape sequence nor inside a UTF-8 character.
    fn safe_cut(raw: &[u8], max: usize) -> usize {
        let max = max.min(raw.len());
        let mut i = 0;
        let mut last_safe = 0;
        while i < max {
            last_safe = i;
            if raw[i] == b'\\' {
                i += if raw.get(i + 1) == Some(&b'u') { 6 } else { 2 };
            } else {
                i += 1;
            }
        }
        if i == max {
            last_safe = max;
        }
        while last_safe > 0 && last_safe < raw.len() && (raw[last_safe] & 0xC0) == 0x80 {
            last_safe -= 1;
        }
        last_safe
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::Value;

        fn compact(text: &str, chunk: usize) -> Value {
            let mut c = Compactor::default();
            for part in text.as_bytes().chunks(chunk) {
                c.feed(part).unwrap();
            }
            c.finish();
            serde_json::from_slice(&c.out)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&c.out)))
        }

        #[test]
        fn small_payloads_pass_unchanged() {
            let v =
                serde_json::json!({"a": "x \" y \\ z \u{e9}", "b": [1, 2.5, true, null], "c": {}});
            for chunk in [1, 3, 1000] {
                assert_eq!(compact(&v.to_string(), chunk), v);
                assert_eq!(
                    compact(&serde_json::to_string_pretty(&v).unwrap(), chunk),
                    v
                );
            }
        }

        #[test]
        fn big_strings_become_prefix_and_digest() {
            let big = "é\\\"".repeat(200_000);
            let text = serde_json::json!({"r": big, "k": 1}).to_string();
            let a = compact(&text, 7);
            let s = a["r"].as_str().unwrap();
            assert!(
                s.len() < 5000 && s.contains("sha256") && s.starts_with("é\\\""),
                "{}",
                &s[..50]
            );
            assert_eq!(a["k"], 1);
            assert_eq!(compact(&text, 4096), a, "chunking changes nothing");
            let other = serde_json::json!({"r": format!("{big}x"), "k": 1}).to_string();
            assert_ne!(
                compact(&other, 4096)["r"],
                a["r"],
                "different contents stay different"
            );
        }

        #[test]
        fn long_containers_are_cut() {
            let arr: Vec<u32> = (0..5000).collect();
            let objs: serde_json::Map<String, Value> = (0..3000)
                .map(|i| (format!("k{i}"), Value::from(i)))
                .collect();
            let v = compact(
                &serde_json::json!({"a": arr, "o": objs, "z": 1}).to_string(),
                100,
            );
            let a = v["a"].as_array().unwrap();
            assert_eq!(a.len(), MAX_CHILDREN as usize + 1);
            assert!(a
                .last()
                .unwrap()
                .as_str()
                .unwrap()
                .contains("more elements"));
            assert!(v["o"]["loopgate_elided"]
                .as_str()
                .unwrap()
                .contains("more members"));
            assert_eq!(v["z"], 1);
        }

        #[test]
        fn depth_is_bounded() {
            // Nested past what is kept: the deep part becomes a note with its digest, so the
            // call is still judged and two different deep inputs still differ.
            let deep = |leaf: &str| {
                format!(
                    "{{\"a\":{}{leaf}{},\"z\":1}}",
                    "[".repeat(5000),
                    "]".repeat(5000)
                )
            };
            let a = compact(&deep("1"), 7);
            let b = compact(&deep("2"), 4096);
            assert_eq!(a["z"], 1);
            assert!(a.to_string().contains("nested deeper than"), "{a}");
            assert_ne!(a, b);
            assert_eq!(compact(&deep("1"), 4096), a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_cannot_be_a_hook_call() {
        for bad in [
            &b""[..],
            b"   \n",
            b"not json",
            b"[1,2]",
            b"{}",
            b"{\"session_id\":5,\"hook_event_name\":\"Stop\"}",
            b"{\"session_id\":\"s\",\"hook_event_name\":\"Nope\"}",
            b"{\"session_id\":\"s\",\"hook_event_name\":\"PreToolUse\"}",
            b"{\"session_id\":\"s\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":\"x\"}",
            b"{\"session_id\":\"s\",\"hook_event_name\":\"PostToolBatch\"}",
            b"\xff\xfe{}",
        ] {
            assert!(Payload::parse(bad).is_err(), "accepted {:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn ignores_unknown_fields_and_reads_agent() {
        let (p, e) = Payload::parse(
            br#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"agent_id":"a1","future":{"x":1}}"#,
        )
        .unwrap();
        assert_eq!(e, Event::PreToolUse);
        assert_eq!(p.agent(), "a1");
    }

    #[test]
    fn huge_identifiers_are_bounded_and_stay_distinct() {
        let make = |c: char| {
            let name: String = std::iter::repeat_n(c, 1 << 20).collect();
            format!(
                r#"{{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"{name}","tool_input":{{}},"tool_use_id":"{name}","prompt_id":"{name}"}}"#
            )
        };
        let (a, _) = Payload::parse(make('y').as_bytes()).unwrap();
        let (b, _) = Payload::parse(make('z').as_bytes()).unwrap();
        assert!(a.tool().len() < 300 && a.prompt_id.as_ref().unwrap().len() < 300);
        assert_ne!(a.tool(), b.tool());
    }

    #[test]
    fn clip_marks_cut_and_strips_controls() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdef", 3), "abc…");
    }
}
