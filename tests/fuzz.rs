//! Property-based fuzzing of the built binary: random JSON, mutated real payloads and random bytes
//! against every hook subcommand, and random sequences of valid calls in which loops happen.
//!
//! Whatever the input, what Claude Code sees stays within the protocol: exit 0 with nothing or one
//! accepted JSON answer on stdout, or exit 1 with exactly one `loopgate: ` line on stderr; never
//! exit 2, never a signal, never a hang; and state stays parseable.
//!
//! The default run is short (64 cases per property). `LOOPGATE_FUZZ_CASES=5000` runs longer;
//! `PROPTEST_RNG_SEED` replays a run.

use crate::common::{fixture, Env};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestCaseResult, TestError, TestRunner};
use serde_json::{json, Map, Value};
use std::cell::Cell;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every hook subcommand and the event it answers for.
const HOOKS: [(&str, &str); 8] = [
    ("session-start", "SessionStart"),
    ("pre-tool-use", "PreToolUse"),
    ("post-tool-use", "PostToolUse"),
    ("post-tool-use-failure", "PostToolUseFailure"),
    ("post-tool-batch", "PostToolBatch"),
    ("stop", "Stop"),
    ("subagent-stop", "SubagentStop"),
    ("user-prompt-submit", "UserPromptSubmit"),
];

/// A hook that takes longer than this is hung (Claude Code would wait out its own timeout).
const HUNG: Duration = Duration::from_secs(30);

fn cases(default: u32) -> u32 {
    std::env::var("LOOPGATE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        // Nothing written into the source tree; a failure prints its minimal input instead.
        failure_persistence: None,
        // Every shrink step runs processes: bound the search.
        max_shrink_iters: 2_000,
        max_shrink_time: 300_000,
        ..Config::default()
    })
}

/// Runs a property, failing the test with the minimal input when it does not hold.
fn check<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> TestCaseResult,
) where
    S::Value: fmt::Debug,
{
    let t = Instant::now();
    let result = runner(cases).run(&strategy, test);
    eprintln!(
        "fuzz {name}: {cases} cases in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, input)) => {
            panic!("fuzz {name}: {why}\nminimal failing input: {input:#?}")
        }
        Err(TestError::Abort(why)) => panic!("fuzz {name} aborted: {why}"),
    }
}

/// One stdin, shown as text (escaped, clipped) when a case fails.
#[derive(Clone)]
struct Input {
    how: String,
    bytes: Vec<u8>,
}

impl fmt::Debug for Input {
    /// Escaped bytes with long runs folded (`<'y' x 1048105>`), clipped at 4,000 characters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = String::new();
        let mut rest = &self.bytes[..];
        while let Some(&b) = rest.first() {
            if shown.len() > 4000 {
                shown.push('…');
                break;
            }
            let run = rest.iter().take_while(|&&x| x == b).count();
            let one: String = std::ascii::escape_default(b).map(char::from).collect();
            if run > 8 {
                shown.push_str(&format!("<'{one}' x {run}>"));
            } else {
                (0..run).for_each(|_| shown.push_str(&one));
            }
            rest = &rest[run..];
        }
        write!(f, "{} ({} bytes): b\"{shown}\"", self.how, self.bytes.len())
    }
}

fn json_input(how: &str, v: &Value) -> Input {
    Input {
        how: how.to_string(),
        bytes: v.to_string().into_bytes(),
    }
}

/// What one hook call showed Claude Code.
struct Seen {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(env: &Env, sub: &str, stdin: &[u8]) -> Result<Seen, TestCaseError> {
    let t = Instant::now();
    let o = env
        .command(&[sub])
        .timeout(HUNG)
        .write_stdin(stdin.to_vec())
        .output()
        .map_err(|e| TestCaseError::fail(format!("{sub}: cannot run loopgate: {e}")))?;
    if t.elapsed() >= HUNG {
        return Err(TestCaseError::fail(format!("{sub}: hung for {HUNG:?}")));
    }
    Ok(Seen {
        code: o.status.code(),
        stdout: String::from_utf8(o.stdout)
            .map_err(|e| TestCaseError::fail(format!("{sub}: stdout is not UTF-8: {e}")))?,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    })
}

/// The protocol invariants for one call of the hook for `event`.
fn verify(sub: &str, event: &str, seen: &Seen) -> TestCaseResult {
    let fail = |why: String| {
        Err(TestCaseError::fail(format!(
            "{sub}: {why}; exit {:?}, stdout {:?}, stderr {:?}",
            seen.code, seen.stdout, seen.stderr
        )))
    };
    if let Some(line) = seen.stderr.lines().find(|l| !l.starts_with("loopgate: ")) {
        return fail(format!(
            "a stderr line without the `loopgate: ` prefix: {line:?}"
        ));
    }
    match seen.code {
        None => fail("killed by a signal (a crash)".into()),
        Some(0) => {
            if seen.stdout.is_empty() {
                return Ok(());
            }
            match serde_json::from_str::<Value>(&seen.stdout) {
                Ok(v) => match answer_shape(event, &v) {
                    Ok(()) => Ok(()),
                    Err(why) => fail(format!("an answer Claude Code does not accept: {why}")),
                },
                Err(e) => fail(format!("stdout is not JSON: {e}")),
            }
        }
        Some(1) => {
            if !seen.stdout.is_empty() {
                return fail("exit 1 with an answer on stdout".into());
            }
            if seen.stderr.lines().count() != 1 || !seen.stderr.ends_with('\n') {
                return fail("exit 1 without exactly one stderr line".into());
            }
            Ok(())
        }
        Some(2) => fail("exit 2 (a blocking error that leaks the command line)".into()),
        Some(c) => fail(format!("exit {c}")),
    }
}

/// The answers Claude Code acts on: `hookSpecificOutput` for this event, a `decision: "block"`
/// with a reason, or `continue: false`; plus the common optional fields.
fn answer_shape(event: &str, v: &Value) -> Result<(), String> {
    let o = v.as_object().ok_or("not an object")?;
    for k in o.keys() {
        if ![
            "continue",
            "stopReason",
            "suppressOutput",
            "systemMessage",
            "decision",
            "reason",
            "hookSpecificOutput",
        ]
        .contains(&k.as_str())
        {
            return Err(format!("unknown field {k:?}"));
        }
    }
    let is_str = |k: &str| o.get(k).is_none_or(Value::is_string);
    if !is_str("systemMessage") || !is_str("stopReason") {
        return Err("systemMessage/stopReason not a string".into());
    }
    if let Some(h) = o.get("hookSpecificOutput") {
        if h["hookEventName"] != event {
            return Err(format!("hookEventName {} for {event}", h["hookEventName"]));
        }
        let reason = h["permissionDecisionReason"].is_string();
        let decision = h["permissionDecision"].as_str();
        let context = h["additionalContext"].is_string();
        // SessionStart's paths for FileChanged (tests/e2e/watch_paths.rs: kept from the model).
        let watch = event == "SessionStart"
            && h["watchPaths"]
                .as_array()
                .is_some_and(|ps| !ps.is_empty() && ps.iter().all(Value::is_string));
        return match decision {
            Some("allow" | "deny" | "ask") if event == "PreToolUse" && reason => Ok(()),
            Some(d) => Err(format!(
                "permissionDecision {d:?} (with a reason: {reason})"
            )),
            None if context || watch => Ok(()),
            None => Err("hookSpecificOutput with nothing in it".into()),
        };
    }
    if let Some(d) = o.get("decision") {
        return match (d.as_str(), o.get("reason").and_then(Value::as_str)) {
            (Some("block"), Some(r)) if !r.is_empty() => Ok(()),
            _ => Err("a decision that is not a block with a reason".into()),
        };
    }
    if o.get("continue") == Some(&Value::Bool(false)) {
        return Ok(());
    }
    Err("none of the accepted shapes".into())
}

/// loopgate reads no state file larger than this (two slots, `src/store/mod.rs`), so it must never write one.
const MAX_STATE_BYTES: u64 = 2 * loopgate::store::SLOT;

/// One input against every hook subcommand, in a fresh state dir so a failing case replays alone.
fn all_hooks(input: &Input) -> TestCaseResult {
    let env = Env::new().git();
    for (sub, event) in HOOKS {
        let seen = run(&env, sub, &input.bytes)?;
        verify(sub, event, &seen)?;
    }
    state_is_sound(&env)
}

/// The state a case left behind: nothing moved aside as corrupt, every state file one loopgate
/// will read back (JSON, within its size limit), and `status --json` works.
fn state_is_sound(env: &Env) -> TestCaseResult {
    let fail = |why: String| Err(TestCaseError::fail(why));
    for e in std::fs::read_dir(env.state.join("sessions"))
        .into_iter()
        .flatten()
    {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.contains(".corrupt-") {
            return fail(format!(
                "a state loopgate wrote was moved aside as unreadable: {name}"
            ));
        }
        if !name.ends_with(".state") {
            continue;
        }
        let size = std::fs::metadata(&p).unwrap().len();
        if size > MAX_STATE_BYTES {
            return fail(format!(
                "loopgate wrote a {size}-byte state file, more than the {MAX_STATE_BYTES} it reads back"
            ));
        }
        if loopgate::store::Store::peek(&p).is_none() {
            return fail(format!("{name} does not decode as a state"));
        }
    }
    let status = env.run(&["status", "--json"], b"");
    if status.code != 0 || serde_json::from_str::<Value>(&status.stdout).is_err() {
        return fail(format!(
            "status --json: exit {}, {:?}",
            status.code, status.stderr
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Generators.

/// Short strings: a loaded alphabet, arbitrary printable unicode, any chars (controls, NUL).
fn small_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "", "Bash", "Edit", "Read", "ls", "cargo test", "OK", "ok", "\0", "\u{202e}rtl", "🦀",
            "../../etc/passwd", "/tmp/x", "Exit code 1\nerror: test failed",
            "<tool_use_error>String to replace not found in file.</tool_use_error>",
            "HTTP 503 Service Unavailable", "bash: foo: command not found", "Permission denied",
            "sleep 5", "curl -s http://x", "toolu_1", "a1", "null", "{}", "\\u0000",
        ])
        .prop_map(String::from),
        3 => any::<String>(),
        2 => prop::collection::vec(any::<char>(), 0..24).prop_map(String::from_iter),
        2 => "[a-z0-9 ./-]{0,40}",
    ]
    .boxed()
}

/// Short strings mostly, sometimes huge ones (up to 2 MB).
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        16 => small_text(),
        1 => (0usize..200_000).prop_map(|n| "x".repeat(n)),
        1 => (0usize..700_000).prop_map(|n| "é\0".repeat(n)),
    ]
    .boxed()
}

fn any_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        small_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
    .boxed()
}

const FIELDS: &[&str] = &[
    "session_id",
    "hook_event_name",
    "tool_name",
    "tool_input",
    "tool_response",
    "tool_use_id",
    "tool_calls",
    "error",
    "is_interrupt",
    "agent_id",
    "prompt_id",
    "stop_hook_active",
    "cwd",
    "prompt",
    "command",
    "file_path",
    "stdout",
    "stderr",
    "bashEditDiff",
];

fn key() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(FIELDS).prop_map(String::from),
        1 => any::<String>(),
    ]
    .boxed()
}

/// Right type from a small alphabet most of the time, anything at all otherwise.
fn field<S: Strategy<Value = Value> + 'static>(good: S) -> BoxedStrategy<Option<Value>> {
    prop::option::weighted(0.8, prop_oneof![6 => good, 1 => any_json()]).boxed()
}

fn names(v: &[&'static str]) -> BoxedStrategy<Value> {
    prop::sample::select(v.to_vec())
        .prop_map(Value::from)
        .boxed()
}

fn tool_input() -> BoxedStrategy<Value> {
    prop::collection::vec(
        (
            prop::sample::select(vec![
                "command",
                "description",
                "file_path",
                "old_string",
                "new_string",
                "content",
                "pattern",
                "url",
                "replace_all",
                "edits",
            ]),
            prop_oneof![3 => text().prop_map(Value::String), 1 => any_json()],
        ),
        0..5,
    )
    .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
    .boxed()
}

fn tool_response() -> BoxedStrategy<Value> {
    prop_oneof![
        text().prop_map(Value::String),
        (text(), text(), any::<bool>()).prop_map(
            |(o, e, i)| json!({"stdout": o, "stderr": e, "interrupted": i, "isImage": false})
        ),
        (text(), text())
            .prop_map(|(p, s)| json!({"filePath": p, "oldString": "a", "newString": s})),
        (text(), any_json()).prop_map(|(o, d)| json!({"stdout": o, "bashEditDiff": d})),
        any_json(),
    ]
    .boxed()
}

const TOOLS: &[&str] = &[
    "Bash",
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "Read",
    "Grep",
    "Glob",
    "WebFetch",
    "TodoWrite",
    "Agent",
    "BashOutput",
    "mcp__srv__tool",
    "",
];

const EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Stop",
    "SubagentStop",
    "UserPromptSubmit",
    "SessionStart",
    "SessionEnd",
    "Notification",
    "pretooluse",
];

/// A hook-shaped object: the fields loopgate reads, each present or not, mostly well typed.
fn payload() -> BoxedStrategy<Value> {
    let batch_call = (
        field(names(TOOLS)),
        field(tool_input()),
        field(names(&["toolu_1", "toolu_2"])),
        field(tool_response()),
    )
        .prop_map(|(n, i, id, r)| {
            let mut o = Map::new();
            for (k, v) in [
                ("tool_name", n),
                ("tool_input", i),
                ("tool_use_id", id),
                ("tool_response", r),
            ] {
                if let Some(v) = v {
                    o.insert(k.into(), v);
                }
            }
            Value::Object(o)
        });
    let first = (
        field(names(&["s1", "s2", "fuzz-session"])),
        field(names(EVENTS)),
        field(names(TOOLS)),
        field(tool_input()),
        field(tool_response()),
        field(names(&["toolu_1", "toolu_2", "toolu_3"])),
        field(prop::collection::vec(batch_call, 0..4).prop_map(Value::Array)),
    );
    let second = (
        field(text().prop_map(Value::String)),
        field(any::<bool>().prop_map(Value::Bool)),
        field(names(&["a1", "a2", ""])),
        field(names(&["p1", "p2"])),
        field(any::<bool>().prop_map(Value::Bool)),
        prop::collection::vec((key(), any_json()), 0..3),
    );
    (first, second)
        .prop_map(
            |((s, e, n, i, r, id, calls), (err, intr, agent, prompt, active, extra))| {
                let mut o = Map::new();
                for (k, v) in extra {
                    o.insert(k, v);
                }
                for (k, v) in [
                    ("session_id", s),
                    ("hook_event_name", e),
                    ("tool_name", n),
                    ("tool_input", i),
                    ("tool_response", r),
                    ("tool_use_id", id),
                    ("tool_calls", calls),
                    ("error", err),
                    ("is_interrupt", intr),
                    ("agent_id", agent),
                    ("prompt_id", prompt),
                    ("stop_hook_active", active),
                ] {
                    if let Some(v) = v {
                        o.insert(k.into(), v);
                    }
                }
                Value::Object(o)
            },
        )
        .boxed()
}

/// The real payloads captured from Claude Code, in name order.
fn fixtures() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(!names.is_empty());
    names
        .into_iter()
        .map(|n| (n.clone(), fixture(&n)))
        .collect()
}

#[derive(Debug, Clone)]
enum Mutation {
    Drop(usize),
    Replace(usize, Value),
    Huge(usize, usize),
    Text(usize, String),
    Nul(usize),
    Nest(usize, usize),
    Insert(usize, String, Value),
    Event(&'static str),
}

fn mutation() -> BoxedStrategy<Mutation> {
    let at = any::<usize>();
    prop_oneof![
        2 => at.prop_map(Mutation::Drop),
        3 => (at, any_json()).prop_map(|(a, v)| Mutation::Replace(a, v)),
        1 => (at, 0usize..3_000_000).prop_map(|(a, n)| Mutation::Huge(a, n)),
        2 => (at, any::<String>()).prop_map(|(a, s)| Mutation::Text(a, s)),
        1 => at.prop_map(Mutation::Nul),
        1 => (at, 1usize..300).prop_map(|(a, d)| Mutation::Nest(a, d)),
        2 => (at, key(), any_json()).prop_map(|(a, k, v)| Mutation::Insert(a, k, v)),
        1 => prop::sample::select(EVENTS).prop_map(Mutation::Event),
    ]
    .boxed()
}

/// Paths (object keys, array indices) to every value in `v`, the root first.
fn paths(v: &Value, here: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(here.clone());
    match v {
        Value::Object(o) => {
            for (k, c) in o {
                here.push(Value::String(k.clone()));
                paths(c, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                here.push(Value::from(i));
                paths(c, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(v, |v, seg| match seg {
        Value::String(k) => &mut v[k.as_str()],
        _ => &mut v[seg.as_u64().unwrap() as usize],
    })
}

fn mutate(mut v: Value, muts: &[Mutation]) -> Value {
    for m in muts {
        let mut all = Vec::new();
        paths(&v, &mut Vec::new(), &mut all);
        let pick = |i: usize| all[i % all.len()].clone();
        match m {
            Mutation::Drop(i) => {
                let p = pick(*i);
                if let Some((last, parent)) = p.split_last() {
                    match (at_path(&mut v, parent), last) {
                        (Value::Object(o), Value::String(k)) => {
                            o.shift_remove(k);
                        }
                        (Value::Array(a), n) => {
                            a.remove(n.as_u64().unwrap() as usize);
                        }
                        _ => {}
                    }
                }
            }
            Mutation::Replace(i, new) => *at_path(&mut v, &pick(*i)) = new.clone(),
            Mutation::Huge(i, n) => *at_path(&mut v, &pick(*i)) = Value::String("y".repeat(*n)),
            Mutation::Text(i, s) => *at_path(&mut v, &pick(*i)) = Value::String(s.clone()),
            Mutation::Nul(i) => {
                let slot = at_path(&mut v, &pick(*i));
                let s = slot.as_str().unwrap_or("x").to_string();
                *slot = Value::String(format!("{s}\0{s}\0"));
            }
            Mutation::Nest(i, depth) => {
                let slot = at_path(&mut v, &pick(*i));
                let mut inner = slot.take();
                for d in 0..*depth {
                    inner = if d % 2 == 0 {
                        json!([inner])
                    } else {
                        json!({"k": inner})
                    };
                }
                *slot = inner;
            }
            Mutation::Insert(i, k, new) => {
                if let Value::Object(o) = at_path(&mut v, &pick(*i)) {
                    o.insert(k.clone(), new.clone());
                }
            }
            Mutation::Event(e) => {
                if let Value::Object(o) = &mut v {
                    o.insert("hook_event_name".into(), Value::from(*e));
                }
            }
        }
    }
    v
}

/// Compact or pretty. serde_json's writer has no depth limit, so nesting past its reader's limit
/// (128) reaches loopgate, which must refuse it with one line, not crash.
fn serialise(v: &Value, pretty: bool) -> Vec<u8> {
    if pretty {
        serde_json::to_vec_pretty(v).unwrap()
    } else {
        serde_json::to_vec(v).unwrap()
    }
}

#[derive(Debug, Clone)]
enum ByteEdit {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Duplicate(usize, usize),
}

fn byte_edit() -> BoxedStrategy<ByteEdit> {
    let at = any::<usize>();
    prop_oneof![
        at.prop_map(ByteEdit::Truncate),
        (at, any::<u8>()).prop_map(|(a, b)| ByteEdit::Flip(a, b)),
        (at, prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(a, b)| ByteEdit::Insert(a, b)),
        (at, 1usize..64).prop_map(|(a, n)| ByteEdit::Duplicate(a, n)),
    ]
    .boxed()
}

fn edit_bytes(mut b: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
    for e in edits {
        let len = b.len().max(1);
        match e {
            ByteEdit::Truncate(at) => b.truncate(at % len),
            ByteEdit::Flip(at, x) => {
                if !b.is_empty() {
                    b[at % len] ^= x | 1;
                }
            }
            ByteEdit::Insert(at, bytes) => {
                let at = at % (b.len() + 1);
                b.splice(at..at, bytes.iter().copied());
            }
            ByteEdit::Duplicate(at, n) => {
                let at = at % len;
                let end = (at + n).min(b.len());
                let chunk = b.get(at..end).unwrap_or_default().to_vec();
                b.splice(at..at, chunk);
            }
        }
    }
    b
}

// ---------------------------------------------------------------------------------------------
// Single inputs against every hook subcommand.

#[test]
fn random_json_values_never_break_the_protocol() {
    let strategy = prop_oneof![
        3 => payload().prop_map(|v| json_input("hook-shaped object", &v)),
        1 => any_json().prop_map(|v| json_input("any JSON value", &v)),
    ];
    check("random JSON", cases(64), strategy, |input| {
        all_hooks(&input)
    });
}

#[test]
fn mutated_real_payloads_never_break_the_protocol() {
    let fx = fixtures();
    let n = fx.len();
    let strategy = (0..n, prop::collection::vec(mutation(), 1..5), any::<bool>()).prop_map(
        move |(i, muts, pretty)| {
            let (name, v) = &fx[i];
            Input {
                how: format!("{name} with {muts:?}"),
                bytes: serialise(&mutate(v.clone(), &muts), pretty),
            }
        },
    );
    check("mutated fixtures", cases(64), strategy, |input| {
        all_hooks(&input)
    });
}

#[test]
fn random_bytes_never_break_the_protocol() {
    let fx = fixtures();
    let n = fx.len();
    let strategy = prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..2048).prop_map(|b| Input {
            how: "random bytes".into(),
            bytes: b,
        }),
        2 => (0..n, prop::collection::vec(byte_edit(), 1..8)).prop_map(move |(i, edits)| {
            let (name, v) = &fx[i];
            Input {
                how: format!("{name} bytes with {edits:?}"),
                bytes: edit_bytes(serialise(v, i % 2 == 0), &edits),
            }
        }),
    ];
    check("random bytes", cases(64), strategy, |input| {
        all_hooks(&input)
    });
}

/// What the fuzzer found (minimal input: a PreToolUse whose `tool_name` is 1.4 MB): an accepted
/// payload makes loopgate write a state file it refuses to read back, so the next call moves the
/// session's state aside and fails open. Long `tool_use_id`s do the same over a few calls.
#[test]
fn oversized_ids_never_cost_a_session_its_state() {
    let env = Env::new();
    assert!(env.bash("echo seed", Ok("x")).is_silent_allow());
    let out = env.pre(&"y".repeat(1_400_000), json!({}), "big-name");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let next = env.pre("Bash", json!({"command": "ls"}), "after-big-name");
    assert!(next.is_silent_allow(), "{}", next.stderr);

    let env = Env::new();
    let long = "t".repeat(1_100_000);
    for k in 0..4 {
        let out = env.pre(
            "Bash",
            json!({"command": format!("echo {k}")}),
            &format!("{long}{k}"),
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let next = env.pre("Bash", json!({"command": "ls"}), "after-long-ids");
    // Five Bash calls in a row may draw the advisory hint; what matters is the state survived.
    assert!(next.code == 0 && !next.denied(), "{}", next.stderr);
    assert!(state_is_sound(&env).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Sequences of valid calls, from alphabets small enough that loops happen.

const COMMANDS: &[&str] = &["cargo test", "ls", "make", "sleep 5", "git status"];
const OUTPUTS: &[&str] = &["", "ok", "3 passed", "error: x", "build 1", "build 2"];
const ERRORS: &[&str] = &[
    "Exit code 1\nerror: test failed, 3 failures",
    "bash: foo: command not found",
    "HTTP 503 Service Unavailable",
    "Exit code 101",
];
const FILES: &[&str] = &["src/a.rs", "src/b.rs", "README.md"];

#[derive(Debug, Clone)]
enum Step {
    Bash {
        cmd: usize,
        out: Result<usize, usize>,
        subagent: bool,
    },
    Edit {
        file: usize,
        ok: bool,
    },
    Rejected {
        file: usize,
    },
    Read {
        file: usize,
    },
    Batch,
    Prompt,
    Stop {
        active: bool,
    },
    SubagentStop,
    /// Moves the clock by this many ms, backwards too.
    Clock(i64),
    /// The last Bash step this many times more: how loops look.
    Again(usize),
}

fn step() -> BoxedStrategy<Step> {
    let result = prop_oneof![
        (0..OUTPUTS.len()).prop_map(Ok),
        (0..ERRORS.len()).prop_map(Err),
    ];
    prop_oneof![
        10 => (0..COMMANDS.len(), result, prop::bool::weighted(0.2))
            .prop_map(|(cmd, out, subagent)| Step::Bash { cmd, out, subagent }),
        2 => (0..FILES.len(), prop::bool::weighted(0.7)).prop_map(|(file, ok)| Step::Edit { file, ok }),
        1 => (0..FILES.len()).prop_map(|file| Step::Rejected { file }),
        2 => (0..FILES.len()).prop_map(|file| Step::Read { file }),
        2 => Just(Step::Batch),
        1 => Just(Step::Prompt),
        2 => any::<bool>().prop_map(|active| Step::Stop { active }),
        1 => Just(Step::SubagentStop),
        1 => prop_oneof![-3 * 3_600_000i64..0, 0..600_000i64].prop_map(Step::Clock),
        4 => (1usize..8).prop_map(Step::Again),
    ]
    .boxed()
}

/// Drives one sequence, checking every answer; returns (steps played, denials, warnings, stop
/// blocks).
fn play(steps: &[Step]) -> Result<(u32, u32, u32, u32), TestCaseError> {
    let mut last_bash = None;
    let steps: Vec<&Step> = steps
        .iter()
        .flat_map(|s| match s {
            Step::Again(k) => vec![last_bash; *k].into_iter().flatten().collect(),
            Step::Bash { .. } => {
                last_bash = Some(s);
                vec![s]
            }
            s => vec![s],
        })
        .collect();
    let mut env = Env::new().git();
    let mut clock: u64 = 1_800_000_000_000;
    let mut n = 0u32;
    let mut batch: Vec<Value> = Vec::new();
    let mut tally = (0, 0, 0);
    let call = |env: &Env, sub: &str, event: &str, p: Value, tally: &mut (u32, u32, u32)| {
        let seen = run(env, sub, p.to_string().as_bytes())?;
        verify(sub, event, &seen)?;
        if seen.code != Some(0) {
            return Err(TestCaseError::fail(format!(
                "{sub} failed open on a valid payload: {}",
                seen.stderr
            )));
        }
        let v: Value = serde_json::from_str(&seen.stdout).unwrap_or(Value::Null);
        let denied = v["hookSpecificOutput"]["permissionDecision"] == "deny";
        if denied {
            tally.0 += 1;
        } else if v["decision"] == "block" {
            tally.2 += 1;
        } else if !seen.stdout.is_empty() {
            tally.1 += 1;
        }
        Ok::<bool, TestCaseError>(denied)
    };
    for &s in &steps {
        clock = clock.wrapping_add(250);
        env.vars.retain(|(k, _)| k != "LOOPGATE_CLOCK_MS");
        env.vars
            .push(("LOOPGATE_CLOCK_MS".into(), clock.to_string()));
        n += 1;
        let id = format!("toolu_seq_{n}");
        match s {
            Step::Bash { cmd, out, subagent } => {
                let input = json!({"command": COMMANDS[*cmd], "description": "run"});
                let mut pre = env.base(
                    "PreToolUse",
                    json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id}),
                );
                if *subagent {
                    pre["agent_id"] = json!("a1");
                }
                if call(&env, "pre-tool-use", "PreToolUse", pre.clone(), &mut tally)? {
                    continue;
                }
                let (sub, event, mut post) = match out {
                    Ok(o) => (
                        "post-tool-use",
                        "PostToolUse",
                        env.base(
                            "PostToolUse",
                            json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id,
                                   "tool_response": {"stdout": OUTPUTS[*o], "stderr": "", "interrupted": false, "isImage": false}}),
                        ),
                    ),
                    Err(e) => (
                        "post-tool-use-failure",
                        "PostToolUseFailure",
                        env.base(
                            "PostToolUseFailure",
                            json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id,
                                   "error": ERRORS[*e], "is_interrupt": false}),
                        ),
                    ),
                };
                if *subagent {
                    post["agent_id"] = json!("a1");
                }
                call(&env, sub, event, post, &mut tally)?;
                let response = match out {
                    Ok(o) => json!(OUTPUTS[*o]),
                    Err(e) => json!(ERRORS[*e]),
                };
                batch.push(json!({"tool_name": "Bash", "tool_input": input, "tool_use_id": id, "tool_response": response}));
            }
            Step::Edit { file, ok } => {
                let path = env.project.join(FILES[*file]);
                let input = json!({"file_path": path, "old_string": "a", "new_string": format!("v{n}"), "replace_all": false});
                let pre = env.base(
                    "PreToolUse",
                    json!({"tool_name": "Edit", "tool_input": input, "tool_use_id": id}),
                );
                if call(&env, "pre-tool-use", "PreToolUse", pre, &mut tally)? {
                    continue;
                }
                if *ok {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, format!("v{n}\n")).unwrap();
                    let post = env.base(
                        "PostToolUse",
                        json!({"tool_name": "Edit", "tool_input": input, "tool_use_id": id,
                               "tool_response": {"filePath": path, "oldString": "a", "newString": format!("v{n}")}}),
                    );
                    call(&env, "post-tool-use", "PostToolUse", post, &mut tally)?;
                } else {
                    let post = env.base(
                        "PostToolUseFailure",
                        json!({"tool_name": "Edit", "tool_input": input, "tool_use_id": id,
                               "error": "File has not been read yet. Read it first before writing to it.", "is_interrupt": false}),
                    );
                    call(
                        &env,
                        "post-tool-use-failure",
                        "PostToolUseFailure",
                        post,
                        &mut tally,
                    )?;
                }
            }
            Step::Rejected { file } => {
                let input = json!({"replace_all": false, "file_path": env.project.join(FILES[*file]), "old_string": "zzz", "new_string": "x"});
                batch.push(json!({"tool_name": "Edit", "tool_input": input, "tool_use_id": id,
                    "tool_response": "<tool_use_error>String to replace not found in file.\nString: zzz</tool_use_error>"}));
            }
            Step::Read { file } => {
                let path = env.project.join(FILES[*file]);
                let input = json!({"file_path": path});
                let pre = env.base(
                    "PreToolUse",
                    json!({"tool_name": "Read", "tool_input": input, "tool_use_id": id}),
                );
                if call(&env, "pre-tool-use", "PreToolUse", pre, &mut tally)? {
                    continue;
                }
                let content = std::fs::read_to_string(&path).unwrap_or_default();
                let post = env.base(
                    "PostToolUse",
                    json!({"tool_name": "Read", "tool_input": input, "tool_use_id": id,
                           "tool_response": {"type": "text", "file": {"filePath": path, "content": content}}}),
                );
                call(&env, "post-tool-use", "PostToolUse", post, &mut tally)?;
            }
            Step::Batch => {
                let p = env.base(
                    "PostToolBatch",
                    json!({"tool_calls": std::mem::take(&mut batch)}),
                );
                call(&env, "post-tool-batch", "PostToolBatch", p, &mut tally)?;
            }
            Step::Prompt => {
                env.prompt = format!("prompt-{n}");
                let p = env.base("UserPromptSubmit", json!({"prompt": "try again"}));
                call(
                    &env,
                    "user-prompt-submit",
                    "UserPromptSubmit",
                    p,
                    &mut tally,
                )?;
            }
            Step::Stop { active } => {
                let p = env.base(
                    "Stop",
                    json!({"stop_hook_active": active, "last_assistant_message": "Done.", "background_tasks": []}),
                );
                call(&env, "stop", "Stop", p, &mut tally)?;
            }
            Step::SubagentStop => {
                let p = env.base(
                    "SubagentStop",
                    json!({"stop_hook_active": false, "agent_id": "a1", "last_assistant_message": "Sub done."}),
                );
                call(&env, "subagent-stop", "SubagentStop", p, &mut tally)?;
            }
            Step::Clock(d) => clock = clock.saturating_add_signed(*d),
            Step::Again(_) => unreachable!("expanded above"),
        }
    }
    // The state the sequence left behind is whole and readable.
    state_is_sound(&env)?;
    Ok((steps.len() as u32, tally.0, tally.1, tally.2))
}

#[test]
fn random_sequences_of_valid_calls_keep_the_protocol_and_the_state() {
    let totals = Cell::new((0u32, 0u32, 0u32, 0u32));
    check(
        "sequences",
        cases(16),
        prop::collection::vec(step(), 1..40),
        |steps| {
            let (n, d, w, b) = play(&steps)?;
            let (t, dd, ww, bb) = totals.get();
            totals.set((t + n, dd + d, ww + w, bb + b));
            Ok(())
        },
    );
    let (steps, d, w, b) = totals.get();
    eprintln!("fuzz sequences: {steps} steps, {d} denials, {w} warnings, {b} stop blocks");
}
