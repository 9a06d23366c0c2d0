//! A scripted stand-in for the Anthropic Messages API, so the real Claude Code CLI can run
//! offline and every byte the "model" is sent back can be inspected.
//!
//! The server is stateless about conversations: each request is routed by its first user message
//! (the `-p` prompt for the main agent, the Agent tool's `prompt` for a subagent), and the turn
//! to play is the number of assistant messages already in its history. Parallel requests from a
//! background subagent, retries and Stop-hook continuations therefore all land on the right turn
//! without the server tracking anything.

use super::http;
use serde_json::{json, Value};
use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What every conversation says once its script has run out, so a run always ends.
pub const FALLBACK_TEXT: &str = "done.";

#[derive(Clone, Debug)]
pub struct ToolCall {
    pub name: String,
    pub input: Value,
}

#[derive(Clone, Debug)]
pub enum Turn {
    /// One assistant message with these tool_use blocks; more than one means parallel calls.
    Tools(Vec<ToolCall>),
    /// A final answer: `stop_reason: end_turn`.
    Text(String),
}

impl Turn {
    pub fn call(call: ToolCall) -> Turn {
        Turn::Tools(vec![call])
    }

    pub fn text(text: &str) -> Turn {
        Turn::Text(text.to_string())
    }
}

pub fn bash(command: &str) -> ToolCall {
    ToolCall {
        name: "Bash".into(),
        input: json!({"command": command, "description": "e2e scripted command"}),
    }
}

pub fn edit(file_path: &str, old_string: &str, new_string: &str) -> ToolCall {
    ToolCall {
        name: "Edit".into(),
        input: json!({"file_path": file_path, "old_string": old_string, "new_string": new_string}),
    }
}

pub fn write(file_path: &str, content: &str) -> ToolCall {
    ToolCall {
        name: "Write".into(),
        input: json!({"file_path": file_path, "content": content}),
    }
}

pub fn read(file_path: &str) -> ToolCall {
    ToolCall {
        name: "Read".into(),
        input: json!({"file_path": file_path}),
    }
}

pub fn agent(description: &str, prompt: &str) -> ToolCall {
    ToolCall {
        name: "Agent".into(),
        input: json!({"description": description, "prompt": prompt, "subagent_type": "general-purpose"}),
    }
}

/// The turns of one conversation (the main agent or one subagent).
#[derive(Clone, Debug)]
struct Conversation {
    label: String,
    /// Text that appears in this conversation's first user message and in no other's.
    marker: String,
    turns: Vec<Turn>,
    /// `(turn, other label, other turn)`: hold this turn back until the other conversation has
    /// asked for its turn, i.e. finished every call before it.
    waits: Vec<(usize, String, usize)>,
    /// Starts at the latest user message carrying the marker rather than at the first one (see
    /// [`Script::prompt`]).
    per_prompt: bool,
    /// `(turn, how long)`: the answer to this turn is held back, as a model thinking before it
    /// polls (see [`Script::delay`]).
    delays: Vec<(usize, Duration)>,
}

#[derive(Clone, Debug, Default)]
pub struct Script {
    conversations: Vec<Conversation>,
    /// `(name, regex)`: before each answer, `{{name}}` is set to group 1 of the regex's last
    /// match in the request body (see [`Script::capture`]).
    captures: Vec<(String, String)>,
}

impl Script {
    /// Adds a conversation. The label `main` is special only in that its tool ids are the
    /// short `toolu_e2e_<turn>_<n>`; every other label is spelled into its ids to keep all
    /// ids of a session unique, as real ones are.
    pub fn conversation(mut self, label: &str, marker: &str, turns: Vec<Turn>) -> Script {
        self.conversations.push(Conversation {
            label: label.into(),
            marker: marker.into(),
            turns,
            waits: Vec::new(),
            per_prompt: false,
            delays: Vec::new(),
        });
        self
    }

    /// Adds a conversation for one prompt of a session fed several (`--input-format
    /// stream-json`, `--resume`): it is routed by the latest user message that carries `marker`,
    /// wherever it sits in the history, and its turn is the number of assistant messages after
    /// that message. Once its turns have run out it says [`FALLBACK_TEXT`], so Stop-hook
    /// continuations end the prompt whatever their number. Conversations added with
    /// [`Script::conversation`] are routed as before.
    pub fn prompt(mut self, label: &str, marker: &str, turns: Vec<Turn>) -> Script {
        self.conversations.push(Conversation {
            label: label.into(),
            marker: marker.into(),
            turns,
            waits: Vec::new(),
            per_prompt: true,
            delays: Vec::new(),
        });
        self
    }

    /// Orders two concurrent conversations: `label`'s turn `turn` is answered only once
    /// `other` has requested its turn `other_turn`. A subagent runs in the background, so this
    /// is how a scenario pins down an interleaving.
    pub fn wait(mut self, label: &str, turn: usize, other: &str, other_turn: usize) -> Script {
        let conv = self
            .conversations
            .iter_mut()
            .find(|c| c.label == label)
            .expect("wait on a declared conversation");
        conv.waits.push((turn, other.into(), other_turn));
        self
    }

    /// Holds back `label`'s answer to `turn` for `secs` seconds: the time a model takes before
    /// it polls a background command again.
    pub fn delay(mut self, label: &str, turn: usize, secs: f64) -> Script {
        let conv = self
            .conversations
            .iter_mut()
            .find(|c| c.label == label)
            .expect("delay a declared conversation");
        conv.delays.push((turn, Duration::from_secs_f64(secs)));
        self
    }

    /// Sets `{{name}}` (see [`FakeApi::set_var`]) from every request: group 1 of the last match
    /// of `regex` in its body, for an id or path the CLI made up at run time (a background
    /// command's output file) that a later call names.
    pub fn capture(mut self, name: &str, regex: &str) -> Script {
        self.captures.push((name.into(), regex.into()));
        self
    }

    fn route(&self, first_user_text: &str) -> Option<&Conversation> {
        self.conversations
            .iter()
            .filter(|c| !c.per_prompt)
            .find(|c| first_user_text.contains(&c.marker))
    }

    /// The per-prompt conversation of the latest user message that carries one of their
    /// markers, with its turn (the assistant messages after that message) and how many earlier
    /// user messages carried the same marker (a prompt sent again; its ids must not repeat).
    fn route_prompt(&self, body: &Value) -> Option<(&Conversation, usize, usize)> {
        let messages = body["messages"].as_array()?;
        let carries = |m: &Value, c: &Conversation| {
            m["role"] == "user" && content_text(&m["content"]).contains(&c.marker)
        };
        messages.iter().enumerate().rev().find_map(|(i, m)| {
            let conv = self
                .conversations
                .iter()
                .filter(|c| c.per_prompt)
                .find(|c| carries(m, c))?;
            let turn = messages[i + 1..]
                .iter()
                .filter(|m| m["role"] == "assistant")
                .count();
            let again = messages[..i].iter().filter(|m| carries(m, conv)).count();
            Some((conv, turn, again))
        })
    }
}

/// One `POST /v1/messages` the CLI made, with where the script routed it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The conversation label, or `None` when no marker matched.
    pub conversation: Option<String>,
    /// Index of the turn that was played (assistant messages already in the history).
    pub turn: usize,
    /// For a per-prompt conversation, how many earlier user messages carried its marker: 0 for
    /// its prompt's first sending, n for the prompt sent again n times before.
    pub again: usize,
    pub body: Value,
}

struct Shared {
    script: Script,
    requests: Mutex<Vec<Recorded>>,
    /// Every request line, including side traffic, for diagnostics.
    lines: Mutex<Vec<String>>,
    /// `{{name}}` in a tool call's input is replaced by its value when the turn is played: for a
    /// value known only mid-run (an id loopgate showed the person).
    vars: Mutex<Vec<(String, String)>>,
    stop: AtomicBool,
}

pub struct FakeApi {
    port: u16,
    shared: Arc<Shared>,
}

impl FakeApi {
    pub fn start(script: Script) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake API");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            script,
            requests: Mutex::default(),
            lines: Mutex::default(),
            vars: Mutex::default(),
            stop: AtomicBool::new(false),
        });
        let accept_shared = Arc::clone(&shared);
        thread::spawn(move || accept_loop(listener, accept_shared));
        FakeApi { port, shared }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn request_lines(&self) -> Vec<String> {
        self.shared.lines.lock().unwrap().clone()
    }

    /// Sets `{{name}}` for the tool calls played from now on.
    pub fn set_var(&self, name: &str, value: &str) {
        self.shared
            .vars
            .lock()
            .unwrap()
            .push((format!("{{{{{name}}}}}"), value.to_string()));
    }
}

/// `turn` with the variables set so far filled into its tool calls' inputs.
fn fill_vars(turn: Turn, shared: &Shared) -> Turn {
    let vars = shared.vars.lock().unwrap().clone();
    match turn {
        Turn::Tools(calls) if !vars.is_empty() => Turn::Tools(
            calls
                .into_iter()
                .map(|mut c| {
                    let mut text = c.input.to_string();
                    for (k, v) in &vars {
                        text = text.replace(k, v);
                    }
                    c.input = serde_json::from_str(&text).unwrap_or(c.input);
                    c
                })
                .collect(),
        ),
        other => other,
    }
}

/// The script's captures, taken from a request body: the latest value wins.
fn capture_vars(body: &Value, shared: &Shared) {
    if shared.script.captures.is_empty() {
        return;
    }
    let text = body.to_string();
    for (name, pattern) in &shared.script.captures {
        let re = regex::Regex::new(pattern).expect("a capture's regex");
        let found = re
            .captures_iter(&text)
            .filter_map(|c| c.get(1))
            .last()
            .map(|m| m.as_str().to_string());
        if let Some(value) = found {
            let key = format!("{{{{{name}}}}}");
            let mut vars = shared.vars.lock().unwrap();
            vars.retain(|(k, _)| *k != key);
            vars.push((key, value));
        }
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // accept() has no timeout; one throwaway connection wakes it so the thread can exit.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let shared = Arc::clone(&shared);
        thread::spawn(move || serve_connection(stream, &shared));
    }
}

fn serve_connection(stream: TcpStream, shared: &Shared) {
    // A connection the CLI forgot must not keep a thread alive past the test.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Ok(Some(req)) = http::read_request(&mut reader, &mut writer) {
        shared.lines.lock().unwrap().push(format!(
            "{} {} ({})",
            req.method,
            req.target,
            body_framing(&req)
        ));
        let kept = if req.method == "POST" && req.target.starts_with("/v1/messages") {
            answer_messages(&mut writer, &req, shared)
        } else {
            // HEAD /api/hello and any other side traffic: an empty success.
            http::respond(&mut writer, &req, "200 OK", &[], b"")
        };
        if !matches!(kept, Ok(true)) {
            return;
        }
    }
}

/// How the request body was framed, for the request log: the CLI's HTTP client could switch
/// between `Content-Length` and chunked, and the log shows which one it used.
fn body_framing(req: &http::Request) -> String {
    match (
        req.header("transfer-encoding"),
        req.header("content-length"),
    ) {
        (Some(te), _) => format!("transfer-encoding: {te}, {} bytes", req.body.len()),
        (None, Some(len)) => format!("content-length: {len}"),
        (None, None) => "no body".into(),
    }
}

fn answer_messages(
    writer: &mut TcpStream,
    req: &http::Request,
    shared: &Shared,
) -> std::io::Result<bool> {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let (conversation, turn, again) = match shared.script.route_prompt(&body) {
        Some((c, turn, again)) => (Some(c), turn, again),
        None => (
            shared.script.route(&first_user_text(&body)),
            assistant_count(&body),
            0,
        ),
    };
    let played = conversation
        .and_then(|c| c.turns.get(turn).cloned())
        .unwrap_or_else(|| Turn::text(FALLBACK_TEXT));
    capture_vars(&body, shared);
    let played = fill_vars(played, shared);
    let label = conversation.map(|c| c.label.clone());
    if let Some(c) = conversation {
        wait_for_others(shared, c, turn);
        if let Some((_, pause)) = c.delays.iter().find(|d| d.0 == turn) {
            thread::sleep(*pause);
        }
    }
    let model = body["model"].as_str().unwrap_or("claude-e2e").to_string();
    let stream = body["stream"].as_bool().unwrap_or(false);
    shared.requests.lock().unwrap().push(Recorded {
        conversation: label.clone(),
        turn,
        again,
        body,
    });
    let reply = Reply {
        id_prefix: match (label.as_deref(), again) {
            (Some(l), 1..) => id_prefix(Some(&format!("{l}x{again}")), turn),
            _ => id_prefix(label.as_deref(), turn),
        },
        model,
        turn: played,
    };
    if stream {
        let headers = [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
        ];
        http::respond(writer, req, "200 OK", &headers, reply.sse().as_bytes())
    } else {
        let headers = [("content-type", "application/json")];
        http::respond(
            writer,
            req,
            "200 OK",
            &headers,
            reply.message().to_string().as_bytes(),
        )
    }
}

/// Blocks (bounded) until the conversations this turn waits for got far enough. A wait that
/// never resolves gives up after a while and plays the turn anyway, so the scenario's
/// assertions, not a hang, report the surprise.
fn wait_for_others(shared: &Shared, conv: &Conversation, turn: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for (_, other, other_turn) in conv.waits.iter().filter(|w| w.0 == turn) {
        while std::time::Instant::now() < deadline {
            let reached = shared.requests.lock().unwrap().iter().any(|r| {
                r.conversation.as_deref() == Some(other.as_str()) && r.turn >= *other_turn
            });
            if reached {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

fn id_prefix(label: Option<&str>, turn: usize) -> String {
    match label {
        Some("main") => format!("{turn}"),
        Some(other) => format!("{other}_{turn}"),
        None => format!("unrouted_{turn}"),
    }
}

/// The text of the first user message: the prompt plus whatever context the CLI put around it.
pub fn first_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .map(|m| content_text(&m["content"]))
        .unwrap_or_default()
}

/// All text in a message `content`, whether it is a plain string or a list of blocks.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn assistant_count(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
        .unwrap_or(0)
}

/// One scripted assistant message, rendered as SSE or as a plain JSON message.
struct Reply {
    id_prefix: String,
    model: String,
    turn: Turn,
}

impl Reply {
    fn tool_id(&self, n: usize) -> String {
        format!("toolu_e2e_{}_{n}", self.id_prefix)
    }

    fn stop_reason(&self) -> &'static str {
        match self.turn {
            Turn::Tools(_) => "tool_use",
            Turn::Text(_) => "end_turn",
        }
    }

    fn blocks(&self) -> Vec<Value> {
        match &self.turn {
            Turn::Text(t) => vec![json!({"type": "text", "text": t})],
            Turn::Tools(calls) => calls
                .iter()
                .enumerate()
                .map(|(n, c)| {
                    json!({"type": "tool_use", "id": self.tool_id(n), "name": c.name, "input": c.input})
                })
                .collect(),
        }
    }

    fn message(&self) -> Value {
        json!({
            "id": format!("msg_e2e_{}", self.id_prefix),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.blocks(),
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 20,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        })
    }

    /// The event sequence the real API streams: message_start, then per block a start, deltas
    /// (text split in two, tool input as `input_json_delta` fragments) and a stop, then
    /// message_delta with the stop reason and usage, then message_stop.
    fn sse(&self) -> String {
        let mut out = String::new();
        let mut start = self.message();
        start["content"] = json!([]);
        start["stop_reason"] = Value::Null;
        start["usage"]["output_tokens"] = json!(1);
        event(&mut out, json!({"type": "message_start", "message": start}));
        event(&mut out, json!({"type": "ping"}));
        for (index, block) in self.blocks().into_iter().enumerate() {
            block_events(&mut out, index, &block);
        }
        event(
            &mut out,
            json!({"type": "message_delta",
                   "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
                   "usage": {"output_tokens": 20}}),
        );
        event(&mut out, json!({"type": "message_stop"}));
        out
    }
}

fn block_events(out: &mut String, index: usize, block: &Value) {
    let (empty, deltas) = if block["type"] == "text" {
        let text = block["text"].as_str().unwrap_or_default();
        let (a, b) = split_half(text);
        let deltas = [a, b]
            .iter()
            .map(|t| json!({"type": "text_delta", "text": t}))
            .collect::<Vec<_>>();
        (json!({"type": "text", "text": ""}), deltas)
    } else {
        let input = block["input"].to_string();
        let (a, b) = split_half(&input);
        let deltas = ["", a, b]
            .iter()
            .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
            .collect::<Vec<_>>();
        let mut empty = block.clone();
        empty["input"] = json!({});
        (empty, deltas)
    };
    event(
        out,
        json!({"type": "content_block_start", "index": index, "content_block": empty}),
    );
    for delta in deltas {
        event(
            out,
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }
    event(out, json!({"type": "content_block_stop", "index": index}));
}

/// Splits at a char boundary near the middle, so deltas really arrive in pieces.
fn split_half(s: &str) -> (&str, &str) {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid += 1;
    }
    s.split_at(mid)
}

fn event(out: &mut String, data: Value) {
    let name = data["type"].as_str().unwrap_or("message").to_string();
    out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
}
