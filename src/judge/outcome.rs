//! What a call returned, reduced to what means something: volatile noise (timestamps, durations,
//! PIDs, temp paths, ids) is masked before hashing, so "the same result again" is judged on content.
//! OpenClaw's result hashing was defeated by exactly that noise (research notes §3.1).

use crate::util::canon::{text_key, write_canonical, Digest16};
use serde_json::Value;

/// Above this, only a prefix is normalised and the rest is hashed raw: masking is for noise in
/// ordinary output, and a megabyte of it is already unambiguous.
const NORMALISE_LIMIT: usize = 1 << 20;

/// Answers shorter than this ("0", "none", "no matches") say too little for "different questions,
/// same answer" to mean anything.
const RICH_ANSWER: usize = 24;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Digest of the normalised result, `None` when the result carries no information.
    pub digest: Option<Digest16>,
    /// Digest of the result's shape: numbers and ids masked too, so answers that differ only in
    /// a counter, an id or a percentage compare equal (at a more tolerant threshold).
    pub shape: Option<Digest16>,
    /// Long enough that two different questions getting it back is telling (not "0" or "none").
    pub rich: bool,
    /// For a failure, how it is expected to behave on retry, classified once from the full text.
    pub error_class: Option<ErrorClass>,
    /// Short normalised text, for messages.
    pub preview: String,
}

impl Outcome {
    pub fn is_trivial(&self) -> bool {
        self.digest.is_none()
    }

    pub fn failed(&self) -> bool {
        self.error_class.is_some()
    }
}

/// Outcome of a call that ran successfully (PostToolUse).
pub fn of_success(tool: &str, response: Option<&Value>) -> Outcome {
    of_command_success(tool, response, &[], &[])
}

/// [`of_success`] of a shell command: without the lines its literal echoes printed (`echoed`, the
/// model's own labels, `noise::without_literal_echoes`), and compared without the command's own
/// `words` where the answer says them back ([`answer`]).
pub fn of_command_success(
    tool: &str,
    response: Option<&Value>,
    echoed: &[String],
    words: &[&str],
) -> Outcome {
    answer(&success_text(tool, response), false, echoed, words)
}

/// [`of_failure`] of a shell command, as [`of_command_success`].
pub fn of_command_failure(error: &str, echoed: &[String], words: &[&str]) -> Outcome {
    answer(error, true, echoed, words)
}

/// An answer that differs only where it repeats the question's own words (`--tag alpha` →
/// `tag alpha rejected`, `--tag beta` → `tag beta rejected`) is the same answer: its digests are
/// taken with those words masked, where what is left still says something. What the model is
/// shown (the preview) keeps them.
fn answer(raw: &str, failed: bool, echoed: &[String], words: &[&str]) -> Outcome {
    let unlabelled = crate::judge::noise::without_lines(raw, echoed);
    let text = unlabelled.as_deref().unwrap_or(raw);
    let norm = normalised(text);
    let shown = build_normalised(text, &norm, failed);
    // On the normalised text: masking first keeps a word inside a masked temp path masked.
    let Some(plain) = crate::judge::noise::without_words(&norm, words) else {
        return shown;
    };
    if plain.trim().len() < RICH_ANSWER {
        return shown;
    }
    let (digest, shape, _) = digests(&plain, failed);
    Outcome {
        digest,
        shape,
        ..shown
    }
}

fn success_text(tool: &str, response: Option<&Value>) -> String {
    match (tool, response) {
        (_, None) => String::new(),
        ("Bash", Some(r)) => bash_text(r),
        ("Read", Some(r)) => r
            .pointer("/file/content")
            .and_then(Value::as_str)
            .map(|c| {
                let start = r
                    .pointer("/file/startLine")
                    .and_then(Value::as_u64)
                    .unwrap_or(1);
                format!("@{start}\n{c}")
            })
            .unwrap_or_else(|| canonical_text(r)),
        ("Grep" | "Glob", Some(r)) if r.is_object() => search_text(r),
        ("WebSearch", Some(r)) if r.is_object() => {
            let links = links_text(r);
            if links.is_empty() {
                canonical_text(&strip_volatile(r))
            } else {
                links
            }
        }
        // Edits are judged by success: their response echoes the input, which says nothing new.
        ("Edit" | "MultiEdit" | "Write" | "NotebookEdit", Some(_)) => "ok".to_string(),
        (_, Some(Value::String(s))) => s.clone(),
        (_, Some(r)) => canonical_text(&strip_volatile(r)),
    }
}

/// Search results by what was found: no match is an empty (trivial) answer, and the duration
/// field that changes on every call is left out.
fn search_text(r: &Value) -> String {
    let mut text = String::new();
    if let Some(files) = r.get("filenames").and_then(Value::as_array) {
        for f in files.iter().filter_map(Value::as_str) {
            text.push_str(f);
            text.push('\n');
        }
    }
    if let Some(c) = r.get("content").and_then(Value::as_str) {
        text.push_str(c);
    }
    text
}

/// A web search is answered by the pages it found: their links, in any order. The echo of the
/// query, the summary written about them and the result ids differ for every rewording.
fn links_text(r: &Value) -> String {
    fn collect<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(u) = m.get("url").and_then(Value::as_str) {
                    out.push(u);
                }
                m.values().for_each(|v| collect(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let mut urls = Vec::new();
    collect(r.get("results").unwrap_or(r), &mut urls);
    urls.sort_unstable();
    urls.dedup();
    urls.join("\n")
}

/// Keys whose values change on every call without meaning anything.
const VOLATILE_KEYS: &[&str] = &[
    "durationMs",
    "duration_ms",
    "durationSeconds",
    "elapsed",
    "elapsedMs",
    "timestamp",
    "createdAt",
    "updatedAt",
    "requestId",
    "request_id",
];

fn strip_volatile(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !VOLATILE_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), strip_volatile(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_volatile).collect()),
        other => other.clone(),
    }
}

/// Outcome of a failed call (PostToolUseFailure `error`, or a rejected call's batch text).
pub fn of_failure(error: &str) -> Outcome {
    build(error, true)
}

fn bash_text(r: &Value) -> String {
    let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let (out, err) = (field("stdout"), field("stderr"));
    if out.trim().is_empty() && err.trim().is_empty() {
        return String::new();
    }
    format!("{out}\n\u{1}{err}")
}

fn canonical_text(v: &Value) -> String {
    let mut buf = Vec::new();
    write_canonical(v, &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}

fn build(raw: &str, failed: bool) -> Outcome {
    build_normalised(raw, &normalised(raw), failed)
}

/// [`build`] with `raw` already normalised.
fn build_normalised(raw: &str, norm: &str, failed: bool) -> Outcome {
    let error_class = failed.then(|| classify_error(raw));
    let preview = if failed {
        crate::protocol::payload::clip(failing_line(norm), 160)
    } else {
        crate::protocol::payload::clip(norm.trim(), 160)
    };
    let (digest, shape, rich) = digests(norm, failed);
    Outcome {
        digest,
        shape,
        rich,
        error_class,
        preview,
    }
}

/// `raw` normalised, past [`NORMALISE_LIMIT`] with the rest hashed raw.
fn normalised(raw: &str) -> String {
    let cut = floor_char_boundary(raw, NORMALISE_LIMIT);
    let mut norm = normalise(&raw[..cut]);
    if cut < raw.len() {
        norm.push_str(&text_key(&raw[cut..]));
    }
    norm
}

/// The digest and shape digest of a normalised answer, and whether it is substantial.
fn digests(norm: &str, failed: bool) -> (Option<Digest16>, Option<Digest16>, bool) {
    // Success and failure with the same text are different outcomes.
    let tag: &[u8] = if failed { b"E" } else { b"O" };
    let rich = norm.trim().len() >= RICH_ANSWER;
    if is_trivial_text(norm) {
        return (None, None, rich);
    }
    (
        Some(Digest16::of_parts(&[tag, norm.as_bytes()])),
        Some(Digest16::of_parts(&[tag, shape(norm).as_bytes()])),
        rich,
    )
}

/// The line of an error output that says what failed: the first line that names an error
/// (`TypeError: …`, `error[E0308]: …`, `x.c:3: error: …`, `FAIL …`, `fatal: …`), never a warning
/// printed before it (`npm warn Unknown env config …`) or Claude Code's `Exit code N`; else the
/// first other line.
pub fn failing_line(text: &str) -> &str {
    let lines = || {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !is_exit_code(l) && !is_warning(l))
    };
    lines()
        .find(|l| names_an_error(l))
        .or_else(|| lines().next())
        .unwrap_or_else(|| text.trim())
}

fn is_exit_code(l: &str) -> bool {
    l.strip_prefix("Exit code ")
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_warning(l: &str) -> bool {
    let lower = l.to_ascii_lowercase();
    let head = lower.strip_prefix("npm ").unwrap_or(&lower);
    head.starts_with("warn") || head.starts_with("(node:") || head.starts_with("deprecat")
}

fn names_an_error(l: &str) -> bool {
    let lower = l.to_ascii_lowercase();
    let starts = |w: &str| lower.starts_with(w);
    // `TypeError: …`, `java.lang.IllegalStateException: …`, `E   AssertionError: …`.
    let first_word = l
        .strip_prefix("E ")
        .map_or(l, str::trim_start)
        .split([':', ' ', '('])
        .next()
        .unwrap_or("");
    starts("error")
        || starts("fatal")
        || starts("fail")
        || starts("panic")
        || lower.contains("panicked at")
        || lower.contains(": error")
        || lower.contains("] error")
        || first_word.ends_with("Error")
        || first_word.ends_with("Exception")
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Empty or a bare acknowledgement: such results tell the agent nothing, so repeating them is not
/// "the same answer again".
fn is_trivial_text(norm: &str) -> bool {
    let t = norm.trim_matches(|c: char| c.is_whitespace() || c == '\u{1}' || c == '.' || c == '!');
    t.is_empty()
        || ["ok", "done", "success", "true", "null", "{}", "[]", "\"\""]
            .iter()
            .any(|w| t.eq_ignore_ascii_case(w))
}

/// Masks volatile fragments (timestamps, durations and test-runner timings, ids, PIDs, retry
/// counters, temp paths, ids inside URLs); everything else is kept verbatim. A hand-written
/// scanner ([`crate::judge::noise`]), checked against the regex it replaced by a property test.
pub fn normalise(text: &str) -> String {
    crate::judge::noise::mask(text)
}

/// The shape of already-normalised text: every remaining number and id masked as well (a
/// hex-looking word with a digit, and every digit run, become `#`), so "45% done, 3 of 8" and
/// "60% done, 5 of 8" are one shape. Used only for the tolerant comparison, never for identity.
pub fn shape(norm: &str) -> String {
    crate::judge::noise::shape(norm)
}

/// How a failure is expected to behave on retry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    Transient,
    Deterministic,
    #[default]
    Unknown,
    /// The machine lacks what the command needs (a compiler, a JDK, a tool on PATH, a signing
    /// key): deterministic, and no edit of the project's files can fix it.
    Environment,
}

impl ErrorClass {
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Deterministic => "deterministic",
            ErrorClass::Unknown => "unknown",
            ErrorClass::Environment => "environment",
        }
    }

    /// Retrying it unchanged fails the same way, however long one waits.
    pub fn deterministic(self) -> bool {
        matches!(self, ErrorClass::Deterministic | ErrorClass::Environment)
    }
}

/// Classifies an error text (seed 002): transient failures deserve retries, deterministic ones do not.
pub fn classify_error(error: &str) -> ErrorClass {
    let e = error.to_ascii_lowercase();
    const TRANSIENT: &[&str] = &[
        "rate limit",
        "rate-limit",
        "429",
        "too many requests",
        "timed out",
        "timeout",
        "connection reset",
        "connection refused",
        "econnreset",
        "econnrefused",
        "network",
        "temporarily unavailable",
        "service unavailable",
        " 500 ",
        " 502",
        " 503",
        " 504",
        "bad gateway",
        "gateway timeout",
        "overloaded",
        // The file moved under the agent (a teammate, a formatter): reading it again fixes it.
        "has not been read yet",
        "modified since read",
        "has been unexpectedly modified",
    ];
    const DETERMINISTIC: &[&str] = &[
        "missing required",
        "required parameter",
        "invalid parameter",
        "invalid argument",
        "invalid input",
        "typeerror",
        "type error",
        "validation",
        "inputvalidationerror",
        "file not found",
        "no such file",
        "does not exist",
        "permission denied",
        "command not found",
        "syntaxerror",
        "syntax error",
        "string to replace not found",
        "not found in file",
        "modulenotfounderror",
        "cannot find module",
    ];
    // A missing program is missing however the text around it reads (a command named
    // `timeout …`, Qwen's `Command:` header echoing it): waiting never installs it.
    if is_environment(&e) {
        ErrorClass::Environment
    } else if TRANSIENT.iter().any(|p| e.contains(p)) {
        ErrorClass::Transient
    } else if DETERMINISTIC.iter().any(|p| e.contains(p))
        || edit_missed(error)
        || refused_arguments(&e)
    {
        ErrorClass::Deterministic
    } else {
        ErrorClass::Unknown
    }
}

/// An edit that failed because the text it was to replace is not in the file, in each CLI's
/// words: Claude Code's, Gemini's `replace`, Qwen's `edit`, Copilot's `edit`, Codex's patch.
/// The same file unchanged gives the same answer to any retry of it.
pub fn edit_missed(error: &str) -> bool {
    const MISSED: &[&str] = &[
        // Claude Code.
        "string to replace not found",
        "not found in file",
        // Gemini CLI and Qwen Code (`Failed to edit, 0 occurrences found for old_string …`).
        "0 occurrences found for old_string",
        "could not find an exact match for",
        "could not find the string to replace",
        // Codex's apply_patch.
        "failed to find expected lines",
        "failed to find context",
    ];
    let head = error[..floor_char_boundary(error, 600)].to_ascii_lowercase();
    // Copilot's `edit` says only this (observed): the whole answer, never a line of output.
    head.trim() == "no match found" || MISSED.iter().any(|m| head.contains(m))
}

/// A tool that refused its own arguments before anything ran (`questions must be an array`,
/// `only one task can be in_progress`, a header over its length limit): the same arguments are
/// refused the same way every time. Only where no program ran (the text carries no exit code),
/// so a command's own output that says "must be" is never read as one.
fn refused_arguments(e: &str) -> bool {
    const REFUSALS: &[&str] = &[
        "must be an array",
        "must be an object",
        "must be a string",
        "must be a number",
        "must be a boolean",
        "must be one of",
        "must be at most",
        "must be at least",
        "must be less than",
        "must not exceed",
        "must not be empty",
        "must have required property",
        "must not have additional properties",
        "must not be longer than",
        // JSON-schema (ajv) wording, as Gemini CLI and Qwen Code validate tool arguments.
        "must be array",
        "must be object",
        "must be string",
        "must be equal to one of",
        "must not have more than",
        "must not have fewer than",
        "characters or less",
        "characters or fewer",
        "exceeds the maximum length",
        "exceeds maximum length",
        "is too long",
        "only one task can be",
        "params must",
        "invalid params",
        "invalid arguments",
    ];
    let ran = e.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("exit code") || l.starts_with("<exited with exit code")
    });
    !ran && REFUSALS.iter().any(|r| e.contains(r))
}

/// The program or runtime an environment failure says the machine lacks, lowercased:
/// `javac` for `bash: javac: command not found`, `python` for Windows' `Python was not found`,
/// `pwsh` for Copilot's `pwsh not available`. `None` when the text names none it can read.
pub fn missing_program(error: &str) -> Option<String> {
    let e = error.to_ascii_lowercase();
    if e.contains("pwsh not available")
        || e.contains("pwsh is not available")
        || e.contains("(pwsh) is not available")
    {
        return Some("pwsh".into());
    }
    if e.contains("python was not found") {
        return Some("python".into());
    }
    if let Some(at) = e.find("failed to spawn: `") {
        let rest = &e[at + "failed to spawn: `".len()..];
        if let Some(end) = rest.find('`') {
            return Some(rest[..end].to_string()).filter(|w| !w.is_empty() && !w.contains(' '));
        }
    }
    let clean = |w: &str| {
        let w = w.trim().trim_matches(['\'', '"', '`']);
        let w = w.rsplit(['/', '\\']).next().unwrap_or(w);
        (!w.is_empty() && !w.contains(' ') && w.len() <= 64).then(|| w.to_string())
    };
    for l in e.lines() {
        let l = l.trim();
        if let Some(head) = l
            .strip_suffix(": command not found")
            .or_else(|| l.strip_suffix(": not found"))
        {
            // `bash: line 1: javac`, `sh: 1: javac`, `zsh: javac`.
            if let Some(w) = head.rsplit(": ").next().and_then(clean) {
                return Some(w);
            }
        }
        for marker in [
            " is not recognized as an internal or external command",
            " is not recognized as the name of a cmdlet",
        ] {
            if let Some(at) = l.find(marker) {
                let head = &l[..at];
                let head = head.rsplit(": ").next().unwrap_or(head);
                if let Some(w) = clean(head) {
                    return Some(w);
                }
            }
        }
    }
    None
}

/// An error (lowercased) that says the machine lacks something the command needs: a toolchain,
/// a runtime, a program on PATH, a signing key, disk space. Narrow on purpose: a missing module
/// or file is often the project's own doing, and an edit can fix that.
fn is_environment(e: &str) -> bool {
    const MISSING: &[&str] = &[
        "java_home",
        "no java runtime present",
        "unable to locate a java runtime",
        "command not found",
        "is not recognized as an internal or external command",
        "is not recognized as the name of a cmdlet",
        "c compiler cannot create executables",
        "no acceptable c compiler found",
        "no cmake_c_compiler could be found",
        "no cmake_cxx_compiler could be found",
        "xcrun: error: invalid active developer path",
        "gpg failed to sign the data",
        "no space left on device",
        // Windows' store stub for a Python that is not installed (exit code 9009).
        "python was not found",
        // Copilot CLI's `powershell` tool on a machine without PowerShell 7.
        "pwsh not available",
        "pwsh is not available",
        "(pwsh) is not available",
        // uv: no interpreter, or a program it was told to run that is not there.
        "no interpreter found for python",
        "no python installation found",
        "failed to spawn: `",
    ];
    if MISSING.iter().any(|p| e.contains(p)) {
        return true;
    }
    e.lines().any(|l| {
        let l = l.trim();
        // `error: linker `cc` not found`; dash's `sh: 1: javac: not found`.
        (l.contains("linker `") && l.ends_with("` not found"))
            || ((l.starts_with("sh: ") || l.contains("/sh: ") || l.starts_with("bash: "))
                && l.ends_with(": not found"))
            || (l.starts_with("error: toolchain '") && l.ends_with("is not installed"))
            // cmd.exe's exit status for a command it cannot find.
            || l == "exit code 9009"
            || l == "exit code: 9009"
    })
}

/// How a call that did not run to its own end ended, as Claude Code words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// Cancelled by Claude Code or the user: a sibling in the batch failed, or Ctrl-C.
    Cancelled,
    /// The person (or plan mode) said no: the agent learned a preference, not a failure.
    Refused,
}

/// Cancellations and refusals are neither failures nor answers: they say nothing about the
/// call itself (issue: a batch of 10 with one real failure is one failure, not ten).
pub fn interruption(error: &str) -> Option<Interruption> {
    let head = &error[..floor_char_boundary(error, 400)];
    const CANCELLED: &[&str] = &[
        "Sibling tool call errored",
        "[Request interrupted by user",
        "Interrupted by user",
        "The tool call was cancelled",
        "Tool use was cancelled",
    ];
    const REFUSED: &[&str] = &[
        "The user doesn't want to proceed with this tool use",
        "but you haven't granted it yet",
        "The user doesn't want to take this action",
        "User rejected",
        "user rejected",
        "Permission to use",
        "is in plan mode",
        "Plan mode is active",
    ];
    // A command's own output may say anything; a permission prompt nobody could answer is
    // Claude Code's text, never an exit status ("touch in '/p' needs approval").
    let approval = !head.starts_with("Exit code")
        && head
            .lines()
            .next()
            .is_some_and(|l| l.contains(" needs approval"));
    if CANCELLED.iter().any(|m| head.contains(m)) {
        Some(Interruption::Cancelled)
    } else if approval || REFUSED.iter().any(|m| head.contains(m)) {
        Some(Interruption::Refused)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_failure_is_quoted_by_the_line_that_failed() {
        let npm =
            "Exit code 1\nnpm warn Unknown env config \"http-proxy\". This will stop working\n\
                   file:///p/gen.js:12\n  await generate(spec);\n        ^\n\n\
                   TypeError: generate is not a function\n    at main (file:///p/gen.js:12:9)";
        assert_eq!(failing_line(npm), "TypeError: generate is not a function");
        let cargo = "Exit code 101\n   Compiling app v0.1.0\nerror[E0308]: mismatched types\n --> src/main.rs:3:5";
        assert_eq!(failing_line(cargo), "error[E0308]: mismatched types");
        let py = "Traceback (most recent call last):\n  File \"a.py\", line 1\nE   AssertionError: 3 != 4";
        assert_eq!(failing_line(py), "E   AssertionError: 3 != 4");
        // Nothing names an error: the first line that is not the exit code.
        assert_eq!(
            failing_line("Exit code 1\ncat: x: No such file"),
            "cat: x: No such file"
        );
        assert_eq!(
            of_failure(npm).preview,
            "TypeError: generate is not a function"
        );
    }

    use super::*;

    #[test]
    fn cancellations_and_refusals_are_recognised_from_claude_codes_words() {
        use Interruption::*;
        for (text, want) in [
            ("<tool_use_error>Sibling tool call errored</tool_use_error>", Some(Cancelled)),
            ("The user doesn't want to proceed with this tool use. The tool use was rejected", Some(Refused)),
            ("Claude requested permissions to write to /p/CLAUDE.md, but you haven't granted it yet.", Some(Refused)),
            ("touch in '/p/x' needs approval. Ask the user.", Some(Refused)),
            ("Exit code 1\nthe deploy needs approval from ops", None),
            ("Exit code 1\nerror: test failed", None),
        ] {
            assert_eq!(interruption(text), want, "{text}");
        }
    }
    use serde_json::json;

    #[test]
    fn every_clis_failures_are_classed_from_its_own_words() {
        use ErrorClass::*;
        for (text, want) in [
            // The text to replace is not in the file.
            ("Failed to edit, 0 occurrences found for old_string in /p/a.py. No edits made.", Deterministic),
            ("Failed to edit, could not find the string to replace.", Deterministic),
            ("Could not find an exact match for 'old_string' in '/p/README.md'. If previous edits modified the file …", Deterministic),
            ("No match found", Deterministic),
            ("apply_patch verification failed: Failed to find expected lines in /p/a.rs:\nfn a()", Deterministic),
            // A tool refusing its own arguments.
            ("questions must be an array", Deterministic),
            ("only one task can be in_progress at a time", Deterministic),
            ("params/questions/0/header must NOT have more than 12 characters", Deterministic),
            // What the machine lacks.
            ("Exit code 9009\nPython was not found; run without arguments to install from the Microsoft Store", Environment),
            ("Output: \nExit Code: 9009", Environment),
            ("<exited with error: pwsh not available>", Environment),
            ("Command: timeout 60 javac A.java\nOutput: bash: line 1: javac: command not found\nExit Code: 127", Environment),
            ("error: Failed to spawn: `python`\n  Caused by: No such file or directory (os error 2)", Environment),
        ] {
            assert_eq!(classify_error(text), want, "{text}");
        }
        // A program's own output saying "must be" is not a tool refusing its arguments.
        assert_eq!(
            classify_error("Exit code 1\nvalue must be one of: a, b"),
            Unknown
        );
        assert!(!edit_missed(
            "Exit code 1\nNo match found for pattern\nmore"
        ));
    }

    #[test]
    fn the_missing_program_is_read_from_the_error() {
        for (text, want) in [
            ("bash: line 1: javac: command not found", Some("javac")),
            ("sh: 1: javac: not found", Some("javac")),
            ("Output: /bin/bash: mvn: command not found", Some("mvn")),
            (
                "Python was not found; run without arguments to install",
                Some("python"),
            ),
            ("<exited with error: pwsh not available>", Some("pwsh")),
            (
                "'python' is not recognized as an internal or external command,",
                Some("python"),
            ),
            ("error: Failed to spawn: `pytest`", Some("pytest")),
            ("error: could not compile", None),
        ] {
            assert_eq!(missing_program(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn volatile_noise_is_masked() {
        let a = normalise(
            "Done in 1.23s at 2026-11-21T10:00:01Z pid 4242 build 3f9a8c1d /tmp/tmp.Xa12/out",
        );
        let b = normalise(
            "Done in 0.98s at 2026-11-22T11:30:59Z pid 17 build 0be1a7c9 /tmp/tmp.Qq77/out",
        );
        assert_eq!(a, b);
        assert_eq!(
            normalise("uuid 123e4567-e89b-12d3-a456-426614174000 attempt 3"),
            "uuid <uuid> <attempt>"
        );
    }

    #[test]
    fn meaning_is_kept() {
        assert_ne!(normalise("3 tests failed"), normalise("4 tests failed"));
        assert_eq!(normalise("cafe added"), "cafe added");
    }

    #[test]
    fn empty_and_ok_results_are_trivial() {
        assert!(of_success("Bash", Some(&json!({"stdout": "", "stderr": ""}))).is_trivial());
        assert!(of_success("mcp__x", Some(&json!("OK"))).is_trivial());
        assert!(!of_success("Bash", Some(&json!({"stdout": "hello", "stderr": ""}))).is_trivial());
    }

    #[test]
    fn success_and_failure_differ() {
        let ok = of_success("T", Some(&json!("boom")));
        let err = of_failure("boom");
        assert_ne!(ok.digest, err.digest);
    }

    #[test]
    fn error_classes_follow_the_design() {
        assert_eq!(
            classify_error("HTTP 429 Too Many Requests"),
            ErrorClass::Transient
        );
        assert_eq!(
            classify_error("connect ECONNREFUSED 127.0.0.1:3000"),
            ErrorClass::Transient
        );
        assert_eq!(
            classify_error("<tool_use_error>String to replace not found in file."),
            ErrorClass::Deterministic
        );
        assert_eq!(
            classify_error("bash: foo: command not found"),
            ErrorClass::Environment
        );
        for missing in [
            "Exit code 1\nERROR: JAVA_HOME is not set and no 'java' command could be found in your PATH.",
            "The JAVA_HOME environment variable is not defined correctly,\nthis environment variable is needed to run this program",
            "error: linker `cc` not found\n  = note: No such file or directory (os error 2)",
            "sh: 1: javac: not found",
            "error: gpg failed to sign the data\nfatal: failed to write commit object",
            "-- The C compiler identification is unknown\nCMake Error: No CMAKE_C_COMPILER could be found.",
        ] {
            assert_eq!(classify_error(missing), ErrorClass::Environment, "{missing}");
        }
        assert_eq!(
            classify_error("ModuleNotFoundError: No module named 'app.models'"),
            ErrorClass::Deterministic,
            "a module the project names wrongly is the project's to fix"
        );
        assert_eq!(classify_error("Exit code 1\n3 failed"), ErrorClass::Unknown);
        assert_eq!(
            classify_error("File has been modified since read, either by the user or by a linter."),
            ErrorClass::Transient,
            "a stale read is fixed by reading again"
        );
    }
}
