//! Tamper guard: the agent must not switch loopgate off by itself. Judged on meaning, not on
//! substrings: a Bash command is parsed into simple commands and words ([`shell`]), every path it
//! names is expanded and normalised ([`paths`]), and only what would *change* loopgate's state,
//! its config files, its binary or Claude Code's settings — or run loopgate's own mutating
//! commands — is denied. Reading any of them stays allowed.
//!
//! What it cannot stop: a determined agent with a shell can always find another way (a script it
//! wrote earlier, an interpreter reading its program from a file, a download). The real answer is
//! `loopgate setup --managed`, which Claude Code's user and project settings cannot override.

mod archive;
mod paths;
mod shell;

use crate::config::Guard;
use crate::protocol::verdict::{Action, Severity, Verdict};
pub use paths::Env;
use paths::Op;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use paths::Env as GuardEnv;

pub const NAME: &str = "guard";

/// loopgate's subcommands that change something: setup rewires (or removes) the hooks, reset
/// forgets loop state, continue lifts a halt, and the hook subcommands fed a forged payload rewrite a session's state.
const MUTATING: &[&str] = &[
    "setup",
    "gc",
    "session-start",
    "config-change",
    "file-changed",
    "prompt-expansion",
    "reset",
    "continue",
    "pre-tool-use",
    "post-tool-use",
    "post-tool-use-failure",
    "post-tool-batch",
    "stop",
    "subagent-stop",
    "user-prompt-submit",
    "permission-request",
];

/// Programs that read their arguments and write only to stdout (redirections are judged apart).
const READERS: &[&str] = &[
    "cat",
    "tac",
    "less",
    "more",
    "head",
    "tail",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "ack",
    "wc",
    "ls",
    "stat",
    "file",
    "diff",
    "cmp",
    "comm",
    "jq",
    "yq",
    "bat",
    "uniq",
    "cut",
    "tr",
    "nl",
    "od",
    "xxd",
    "hexdump",
    "strings",
    "sha256sum",
    // Binary inspectors: they read the file they are given (the installed binary included).
    "ldd",
    "objdump",
    "readelf",
    "nm",
    "size",
    "otool",
    "sha1sum",
    "sha512sum",
    "md5sum",
    "b2sum",
    "cksum",
    "readlink",
    "realpath",
    "basename",
    "dirname",
    "test",
    "[",
    "[[",
    "echo",
    "printf",
    "which",
    "type",
    "whereis",
    "du",
    "df",
    "tree",
    "column",
    "fold",
    "fmt",
    "base64",
    "pwd",
    "true",
    "false",
    "id",
    "whoami",
    "date",
    "printenv",
    "sleep",
    "exit",
    "return",
    "cd",
    "pushd",
    "popd",
    "export",
    "declare",
    "typeset",
    "local",
    "readonly",
    "set",
    "unset",
    "source",
    ".",
    "alias",
    "hash",
    "shellcheck",
    "sort",
    "git-log",
];

/// Wrappers that run the rest of their arguments as a command.
const WRAPPERS: &[&str] = &[
    "sudo",
    "doas",
    "env",
    "command",
    "builtin",
    "exec",
    "nohup",
    "nice",
    "ionice",
    "timeout",
    "time",
    "stdbuf",
    "setsid",
    "chronic",
    "xargs",
    "caffeinate",
    "unbuffer",
    "watch",
    "strace",
    "ltrace",
    "flock",
    "chroot",
    "su",
    "runuser",
    "then",
    "do",
    "else",
    "elif",
    "if",
    "while",
    "until",
    "!",
];

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "busybox",
];

const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "osascript",
    "pwsh",
    "tclsh",
    "Rscript",
];

/// Fragments of protected paths, looked for in inline programs (`python -c`, `perl -e` …).
const PATH_FRAGMENTS: &[&str] = &[
    "loopgate.toml",
    "loopgate/config",
    ".claude/settings",
    "settings.json",
    "settings.local.json",
    "managed-settings",
    "state/loopgate",
    "/loopgate",
    "LOOPGATE_",
    "disableAllHooks",
];

/// Signs that an inline program writes, moves or deletes something.
const WRITE_MARKERS: &[&str] = &[
    "'w'", "\"w\"", "'a'", "\"a\"", "'w+'", "\"w+\"", "'wb'", "\"wb\"", "write", "unlink",
    "remove", "rename", "rmtree", "rmdir", "chmod", "chown", "symlink", "replace", "truncate",
    "dump(", "copy", "move", "rmSync", "rm(", "print >", "open(>", "open(my", "system", "exec",
    "spawn", "rm ", ">",
];

/// Files that set the environment of the next session: `LOOPGATE_*` written there would reach
/// every hook.
const STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".envrc",
    "environment",
    ".pam_environment",
    "config.fish",
];

/// Judges one tool call; `env` is built only for the tools the guard reads.
pub fn check(tool: &str, input: &Value, env: impl FnOnce() -> Env, cfg: &Guard) -> Option<Verdict> {
    let relevant = matches!(
        tool,
        "Bash" | "Edit" | "MultiEdit" | "Write" | "NotebookEdit" | "apply_patch"
    ) || tool.starts_with("mcp__");
    if !cfg.enabled || !relevant {
        return None;
    }
    let finding = judge(tool, input, &env())?;
    Some(
        Verdict::new(
            NAME,
            Action::Deny,
            Severity::High,
            format!(
                "loopgate: {finding}. Changing loopgate's configuration, state, binary or Claude Code's \
                 settings is reserved to the user; reading them is fine. If loopgate is in your way, \
                 say so and ask the user to adjust it."
            ),
        )
        .with("finding", finding),
    )
}

/// Why the call would disable or bypass loopgate, if it would.
pub fn judge(tool: &str, input: &Value, env: &Env) -> Option<String> {
    let field = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or("");
    match tool {
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => {
            let raw = [field("file_path"), field("notebook_path")].concat();
            if raw.is_empty() {
                return None;
            }
            let content = [
                field("content"),
                field("new_string"),
                field("new_source"),
                &input
                    .get("edits")
                    .map(|e| e.to_string())
                    .unwrap_or_default(),
            ]
            .concat();
            let path = env.absolute(&env.expand(&raw, &HashMap::new()), &env.cwd);
            let finding = write_finding(env, &path, Op::Write, tool, Some(&content))?;
            if tool != "NotebookEdit"
                && project_settings(env, &path)
                && !touches_loopgate(input, &path, &content)
                && !hides_status_line(env, &content)
            {
                return None;
            }
            Some(finding)
        }
        "Bash" => Bash::new(env).line(field("command")),
        "apply_patch" => patch(field("command"), env),
        t if t.starts_with("mcp__") => mcp(t, input, env),
        _ => None,
    }
}

/// A project's own `.claude/settings*.json`, as opposed to the user's (`~/.claude`) or managed
/// settings. Agents edit their project's settings as ordinary work (a project that builds Claude
/// Code integrations adds hooks there), so only a change that touches loopgate or hooks as a whole
/// is a disabling route; the user's and managed settings stay reserved to the user.
fn project_settings(env: &Env, path: &Path) -> bool {
    let dir = path.parent();
    let in_home = env.home.is_some() && dir.and_then(Path::parent) == env.home.as_deref();
    match paths::name_rule(path) {
        Some(paths::Kind::Settings) => {
            dir.and_then(Path::file_name) == Some(std::ffi::OsStr::new(".claude")) && !in_home
        }
        // The other CLIs' project files (`.gemini/settings.json`, `.codex/hooks.json` …) alike.
        Some(paths::Kind::AgentHooks) => {
            !in_home && !path.components().any(|c| c.as_os_str() == ".copilot")
        }
        _ => false,
    }
}

/// Whether an Edit/MultiEdit/Write of a settings file would disable or rewire loopgate: it
/// mentions loopgate, its variables or `disableAllHooks` in what it removes or writes, or a Write
/// would drop loopgate's hooks from the file as it is now.
fn touches_loopgate(input: &Value, path: &Path, written: &str) -> bool {
    const MARKERS: &[&str] = &["loopgate", "LOOPGATE", "disableAllHooks"];
    let mut removed = input
        .get("old_string")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    for e in input
        .get("edits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        removed.push_str(e.get("old_string").and_then(Value::as_str).unwrap_or(""));
    }
    let replaces_whole = input.get("content").is_some();
    let had_loopgate = replaces_whole && read_small(path).contains("loopgate");
    MARKERS
        .iter()
        .any(|m| written.contains(m) || removed.contains(m))
        || (had_loopgate && !written.contains("loopgate"))
}

/// Whether an Edit/MultiEdit/Write of a project settings file writes a `statusLine` while
/// loopgate's is the user's: the project's would take its place on the status bar (a project
/// layer wins over the user's), which is where the person is told loopgate is off. Removing a
/// project's own `statusLine` shows loopgate's again, and is left alone. Only a write that names
/// the key reads the user's settings.
fn hides_status_line(env: &Env, written: &str) -> bool {
    const KEY: &str = "statusLine";
    if !written.contains(KEY) {
        return false;
    }
    let Some(home) = &env.home else {
        return false;
    };
    serde_json::from_str::<Value>(&read_small(&home.join(".claude").join("settings.json")))
        .ok()
        .and_then(|v| v.get(KEY)?.get("command")?.as_str().map(str::to_owned))
        // Setup's line, or the person's own that shows loopgate's within it.
        .is_some_and(|c| c.contains("loopgate") && c.contains("statusline"))
}

/// A regular file's text, at most 1 MiB; empty for anything else (a FIFO must not block).
fn read_small(path: &Path) -> String {
    use std::io::Read;
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() <= 1 << 20 => {}
        _ => return String::new(),
    }
    let mut text = String::new();
    let _ = std::fs::File::open(path).and_then(|f| f.take(1 << 20).read_to_string(&mut text));
    text
}

/// A finding for a write or removal of `path`, or for `LOOPGATE_*`/`disableAllHooks` written to
/// a file that sets the environment.
fn write_finding(
    env: &Env,
    path: &Path,
    op: Op,
    how: &str,
    content: Option<&str>,
) -> Option<String> {
    let hit = if path.to_string_lossy().contains(['*', '?', '[']) {
        env.glob_hits(path, op)
    } else {
        env.hit(path, op)
    };
    if let Some((kind, p)) = hit {
        return Some(format!(
            "{how} would change {} ({})",
            kind.describe(),
            p.display()
        ));
    }
    let disabling =
        content.is_some_and(|c| c.contains("LOOPGATE_") || c.contains("disableAllHooks"));
    if disabling && startup_file(env, path) {
        return Some(format!(
            "{how} would write LOOPGATE_* or disableAllHooks into {}",
            path.display()
        ));
    }
    None
}

/// A file a shell reads as it starts, where it reads it: the start-up files in the home
/// directory (and fish's in `~/.config/fish`), the system's under `/etc`, and direnv's `.envrc`
/// wherever it is. A file of the same name in the project (a fixture, a doc's example) is read by
/// no shell.
fn startup_file(env: &Env, path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name == ".envrc" {
        return true;
    }
    let dir = path.parent();
    let at_home = env
        .home
        .as_ref()
        .is_some_and(|h| dir == Some(h.as_path()) || dir == Some(h.join(".config/fish").as_path()));
    STARTUP_FILES.contains(&name) && (at_home || path.starts_with("/etc"))
}

/// Codex's `apply_patch` touching several files, deleting or moving one (a patch of one added or
/// updated file arrives as a Write or an Edit): every file it adds, updates, deletes or moves.
fn patch(text: &str, env: &Env) -> Option<String> {
    let mut source: Option<&str> = None;
    for line in text.lines() {
        let (path, op) = if let Some(p) = line.strip_prefix("*** Add File: ") {
            (p, Op::Write)
        } else if let Some(p) = line.strip_prefix("*** Update File: ") {
            source = Some(p);
            (p, Op::Write)
        } else if let Some(p) = line.strip_prefix("*** Delete File: ") {
            (p, Op::Remove)
        } else if let Some(p) = line.strip_prefix("*** Move to: ") {
            // The moved file leaves its old place: that is a removal of it.
            if let Some(f) = source.and_then(|s| {
                let from = env.absolute(&env.expand(s.trim(), &HashMap::new()), &env.cwd);
                write_finding(env, &from, Op::Remove, "apply_patch", None)
            }) {
                return Some(f);
            }
            (p, Op::Write)
        } else {
            continue;
        };
        let path = env.absolute(&env.expand(path.trim(), &HashMap::new()), &env.cwd);
        if let Some(f) = write_finding(env, &path, op, "apply_patch", Some(text)) {
            return Some(f);
        }
    }
    None
}

/// MCP tools: a tool that is not plainly a reader and names a protected path in its input.
fn mcp(tool: &str, input: &Value, env: &Env) -> Option<String> {
    let action = tool
        .rsplit("__")
        .next()
        .unwrap_or(tool)
        .to_ascii_lowercase();
    let changes = [
        "write", "edit", "create", "move", "rename", "delete", "remove", "set", "put", "update",
        "patch", "append", "upload", "chmod", "link", "copy", "save",
    ]
    .iter()
    .any(|w| action.contains(w));
    let reader = !changes
        && [
            "read", "get", "list", "search", "find", "view", "show", "query", "stat", "info",
            "tree", "fetch", "describe",
        ]
        .iter()
        .any(|r| action.starts_with(r) || action.contains(&format!("_{r}")));
    if reader {
        return None;
    }
    let mut strings = Vec::new();
    collect_strings(input, &mut strings, 0);
    let content = strings.join("\n");
    for s in &strings {
        if s.is_empty() || s.len() > 4096 || s.contains('\n') {
            continue;
        }
        let looks_like_path = s.contains('/')
            || s.starts_with('~')
            || s.starts_with('$')
            || s.ends_with(".toml")
            || s.ends_with(".json");
        if !looks_like_path {
            continue;
        }
        let path = env.absolute(&env.expand(s, &HashMap::new()), &env.cwd);
        if let Some(f) = write_finding(env, &path, Op::Remove, tool, Some(&content)) {
            return Some(f);
        }
    }
    None
}

fn collect_strings(v: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 16 || out.len() > 256 {
        return;
    }
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out, depth + 1)),
        Value::Object(m) => m.values().for_each(|x| collect_strings(x, out, depth + 1)),
        _ => {}
    }
}

/// Walks one Bash command line: variables assigned and directories entered along the way are
/// followed, so `f=.claude/loopgate.toml; echo x > $f` and `cd ~/.claude && rm settings.json`
/// are seen for what they do.
struct Bash<'e> {
    env: &'e Env,
    vars: HashMap<String, String>,
    cwd: PathBuf,
    /// Whether each command substitution of the line being judged names loopgate.
    subs: Vec<bool>,
    /// The bodies of those substitutions, for `source <(…)` and `bash <(…)`.
    sub_texts: Vec<String>,
    budget: std::rc::Rc<Budget>,
}

/// Hard limits on one judgement. A command built to exhaust the guard (`a=$a$a` doubled thirty
/// times, thousands of here-documents, substitutions nested without end) is refused with a
/// reason once it passes one: never judged on part of it, never let through, never an abort.
struct Budget {
    /// Characters parsed and expanded so far.
    work: std::cell::Cell<usize>,
    started: std::time::Instant,
    /// The first limit passed, if any.
    over: std::cell::Cell<Option<&'static str>>,
}

/// Characters parsed and expanded in one judgement (an ordinary command uses a few hundred).
const MAX_WORK: usize = 16 << 20;
/// One word or variable after expansion.
const MAX_WORD: usize = 64 << 10;
/// Shells in shells, substitutions in substitutions.
const MAX_DEPTH: usize = 8;
/// Wall-clock time for one judgement.
const MAX_TIME: std::time::Duration = std::time::Duration::from_secs(1);

impl Budget {
    fn charge(&self, chars: usize) {
        let work = self.work.get().saturating_add(chars);
        self.work.set(work);
        if work > MAX_WORK {
            self.exceed("more than 16 MiB of text to parse and expand");
        } else if (work - chars) >> 12 != work >> 12 && self.started.elapsed() > MAX_TIME {
            // The clock is read once per 4 KiB of work.
            self.exceed("more than a second of judging");
        }
    }

    fn exceed(&self, why: &'static str) {
        if self.over.get().is_none() {
            self.over.set(Some(why));
        }
    }

    fn finding(&self) -> Option<String> {
        self.over.get().map(|why| {
            format!(
                "the command is too complex for loopgate to judge ({why}); it may not run \
                 unjudged: split it into simpler commands"
            )
        })
    }
}

impl<'e> Bash<'e> {
    fn new(env: &'e Env) -> Self {
        Bash {
            env,
            vars: HashMap::new(),
            cwd: env.cwd.clone(),
            subs: Vec::new(),
            sub_texts: Vec::new(),
            budget: std::rc::Rc::new(Budget {
                work: std::cell::Cell::new(0),
                started: std::time::Instant::now(),
                over: std::cell::Cell::new(None),
            }),
        }
    }

    /// The whole command line judged: a clipped one (the hook input keeps the first 4 KiB of a
    /// string past 256 KiB) cannot be, so it is refused.
    fn line(&mut self, line: &str) -> Option<String> {
        if let Some(size) = clipped_size(line) {
            return Some(format!(
                "the command is {size} bytes, more than loopgate judges (256 KiB); it may not run \
                 unjudged: write it to a file with the Write tool and run that"
            ));
        }
        self.script(line, 0)
    }

    fn script(&mut self, line: &str, depth: usize) -> Option<String> {
        if depth > MAX_DEPTH {
            self.budget
                .exceed("shells or substitutions nested more than 8 deep");
            return self.budget.finding();
        }
        self.budget.charge(line.len());
        if let Some(f) = self.budget.finding() {
            return Some(f);
        }
        let parsed = shell::parse(line);
        let mut subs = Vec::new();
        for body in &parsed.substitutions {
            if let Some(f) = self.script(body, depth + 1) {
                return Some(f);
            }
            subs.push(body.contains("loopgate"));
        }
        let outer = std::mem::replace(&mut self.subs, subs);
        let outer_texts = std::mem::replace(&mut self.sub_texts, parsed.substitutions.clone());
        let found = parsed.commands.iter().find_map(|cmd| {
            self.budget.charge(cmd.words.len());
            self.simple(cmd, depth).or_else(|| self.budget.finding())
        });
        self.subs = outer;
        self.sub_texts = outer_texts;
        found
    }

    /// Where `cd d` lands: a relative name not starting with `.` is looked up in `CDPATH`'s
    /// directories first, as the shell does (`CDPATH=~/.local/state cd loopgate`).
    fn cd_target(&self, d: &str) -> PathBuf {
        let plain = self.path(d);
        let relative = !d.starts_with(['/', '.', '~']);
        if let Some(cdpath) = self.vars.get("CDPATH").filter(|_| relative) {
            for entry in cdpath.split(':').filter(|e| !e.is_empty()) {
                let candidate = self.path(entry).join(self.expand(d));
                if candidate.is_dir() {
                    return candidate;
                }
            }
        }
        plain
    }

    fn expand(&self, word: &str) -> String {
        if self.budget.over.get().is_some() {
            return String::new();
        }
        if word.len() > MAX_WORD {
            self.budget.exceed("a word of more than 64 KiB");
            return String::new();
        }
        let out = self.env.expand(word, &self.vars);
        self.budget.charge(out.len());
        if out.len() > MAX_WORD {
            self.budget.exceed("a word expands to more than 64 KiB");
            return String::new();
        }
        out
    }

    fn path(&self, word: &str) -> PathBuf {
        self.env.absolute(&self.expand(word), &self.cwd)
    }

    fn touch(&self, word: &str, op: Op, how: &str, content: Option<&str>) -> Option<String> {
        // `settings.{json,local.json}`: each word bash would make.
        let Some(alternatives) = braces(word, 0) else {
            self.budget.exceed("more than 8 brace groups in one word");
            return self.budget.finding();
        };
        if alternatives.len() > 1 {
            return alternatives
                .iter()
                .find_map(|w| self.touch(w, op, how, content));
        }
        if let Some(n) = shell::substitution_of(word).filter(|n| *word == shell::placeholder(*n)) {
            // `rm "$(which loopgate)"`: the substitution names the binary.
            return self
                .subs
                .get(n)
                .copied()
                .unwrap_or(false)
                .then(|| format!("{how} would change the loopgate binary"));
        }
        if word.is_empty() {
            return None;
        }
        let path = self.path(word);
        if op == Op::Remove && word.ends_with('/') {
            // `rm -rf link/`: the slash makes the command follow a link to the directory.
            if let Some(f) = self
                .env
                .canonical(&path)
                .and_then(|real| write_finding(self.env, &real, op, how, content))
            {
                return Some(f);
            }
        }
        write_finding(self.env, &path, op, how, content)
    }

    fn simple(&mut self, cmd: &shell::Simple, depth: usize) -> Option<String> {
        let text = cmd.words.join(" ");
        // Redirections first: whatever the program, `> file` writes the file.
        for (op, target) in &cmd.redirs {
            let writes = op.contains('>') && !(op == ">&" && is_descriptor(target));
            if writes {
                if let Some(f) =
                    self.touch(target, Op::Write, &format!("`{op} {target}`"), Some(&text))
                {
                    return Some(f);
                }
            }
        }
        let mut words: Vec<String> = cmd.words.clone();
        // `for f in A B; do … "$f"; done`: the loop's variable holds one of its words, and is
        // judged as the one the guard protects if any is (else the first), never as unset (an
        // empty `$f` read as the working directory refused `mv x "$f"` over GIFs).
        if words.len() >= 3 && words[0] == "for" && words[2] == "in" {
            let items = &words[3..];
            let pick = items
                .iter()
                .find(|w| self.touch(w, Op::Remove, "", None).is_some())
                .or(items.first())
                .map(|w| self.expand(w))
                .unwrap_or_default();
            self.vars.insert(words[1].clone(), pick);
            return None;
        }
        // Leading assignments: remembered for later words. A variable loopgate reads, set for
        // the command, is the agent tampering unless that command is loopgate's own look
        // (`LOOPGATE_DETECTORS__REPEAT__SUCCESS=5 loopgate config`): it reaches no other process.
        let mut loopgate_var: Option<String> = None;
        let tampering = |name: &str| format!("setting {name} changes what loopgate does");
        while let Some(w) = words.first() {
            match assignment(w) {
                Some((name, value)) => {
                    if crate::config::sources::is_loopgate_var(name) {
                        loopgate_var.get_or_insert_with(|| name.to_string());
                    }
                    let v = self.expand(value);
                    self.vars.insert(name.to_string(), v);
                    words.remove(0);
                }
                None => break,
            }
        }
        loop {
            let Some(first) = words.first() else {
                // A bare `LOOPGATE_MODE=observe`: the shell keeps it for what follows.
                return loopgate_var.map(|n| tampering(&n));
            };
            let prog = base_name(&self.expand(first)).to_string();
            if !WRAPPERS.contains(&prog.as_str()) {
                break;
            }
            words.remove(0);
            // Options of the wrapper, and assignments `env` passes on.
            while let Some(w) = words.first() {
                if let Some((name, _)) = assignment(w) {
                    if crate::config::sources::is_loopgate_var(name) {
                        loopgate_var.get_or_insert_with(|| name.to_string());
                    }
                    words.remove(0);
                } else if w.starts_with('-') {
                    let takes_value = matches!(
                        (prog.as_str(), w.as_str()),
                        ("env", "-u" | "-C" | "-S")
                            | ("sudo", "-u" | "-g" | "-C" | "-D")
                            | ("nice", "-n")
                            | ("timeout", "-s" | "-k")
                            | ("xargs", "-I" | "-n" | "-P" | "-L" | "-d" | "-E" | "-s")
                            | ("flock", "-w" | "-E")
                            | ("su" | "runuser", "-c" | "-u")
                    );
                    // A command line of its own: `su -c`, `env -S`, `flock -c`.
                    let runs_line = matches!(
                        (prog.as_str(), w.as_str()),
                        ("su" | "runuser" | "flock", "-c" | "--command")
                            | ("env", "-S" | "--split-string")
                    );
                    if runs_line && words.len() > 1 {
                        if let Some(name) = &loopgate_var {
                            return Some(tampering(name));
                        }
                        let inner = words[1].clone();
                        return self.script(&inner, depth + 1);
                    }
                    if let Some(inner) = w.strip_prefix("--split-string=").or_else(|| {
                        w.strip_prefix("-S")
                            .filter(|s| !s.is_empty() && prog == "env")
                    }) {
                        if let Some(name) = &loopgate_var {
                            return Some(tampering(name));
                        }
                        let inner = inner.to_string();
                        return self.script(&inner, depth + 1);
                    }
                    words.remove(0);
                    if takes_value && !words.is_empty() {
                        words.remove(0);
                    }
                } else if matches!(prog.as_str(), "timeout" | "nice")
                    && w.chars().next().is_some_and(|c| c.is_ascii_digit())
                {
                    words.remove(0);
                } else if prog == "flock" {
                    // The lock file, then the command (or `-c` and a command line).
                    words.remove(0);
                    if matches!(words.first().map(String::as_str), Some("-c" | "--command")) {
                        if let Some(name) = &loopgate_var {
                            return Some(tampering(name));
                        }
                        let inner = words.get(1).cloned().unwrap_or_default();
                        return self.script(&inner, depth + 1);
                    }
                    break;
                } else {
                    break;
                }
            }
        }
        let first = words.first()?.clone();
        let expanded = self.expand(&first);
        let prog = base_name(&expanded).to_string();
        let args: Vec<String> = words[1..].to_vec();
        // Export and declare: `export LOOPGATE_MODE=observe`.
        if matches!(
            prog.as_str(),
            "export" | "declare" | "typeset" | "local" | "readonly" | "set"
        ) {
            for a in &args {
                if let Some((name, value)) = assignment(a) {
                    if crate::config::sources::is_loopgate_var(name) {
                        return Some(tampering(name));
                    }
                    let v = self.expand(value);
                    self.vars.insert(name.to_string(), v);
                }
            }
            return None;
        }
        if matches!(prog.as_str(), "cd" | "pushd") {
            let to = args.iter().find(|a| !a.starts_with('-')).cloned();
            self.cwd = match to {
                Some(d) => self.cd_target(&d),
                None => self.env.home.clone().unwrap_or_else(|| self.cwd.clone()),
            };
            return None;
        }
        // loopgate itself, however it is reached.
        let sub_is_loopgate = shell::substitution_of(&first)
            .is_some_and(|n| self.subs.get(n).copied().unwrap_or(false));
        let is_loopgate = matches!(prog.trim_end_matches(".exe"), "loopgate" | "loopgate-hook")
            || sub_is_loopgate
            || self.is_exe(&expanded);
        let expanded_args: Vec<String> = args.iter().map(|a| self.expand(a)).collect();
        if let Some(f) = loopgate_cli(
            &expanded_args,
            is_loopgate,
            READERS.contains(&prog.as_str()),
        ) {
            return Some(f);
        }
        if let Some(name) = loopgate_var.filter(|_| !is_loopgate) {
            return Some(tampering(&name));
        }
        // Shells and eval run a command line of their own.
        // `source <(echo …)`, `bash <(printf …)`: what the substitution prints is run.
        if matches!(prog.as_str(), "source" | ".") || SHELLS.contains(&prog.as_str()) {
            for n in args.iter().filter_map(|a| shell::substitution_of(a)) {
                let body = self.sub_texts.get(n).cloned().unwrap_or_default();
                let printed: Vec<String> = shell::parse(&body)
                    .commands
                    .iter()
                    .filter_map(shell::echoed_text)
                    .collect();
                if let Some(f) = self.script(&printed.join("\n"), depth + 1) {
                    return Some(f);
                }
            }
        }
        if prog == "eval" {
            return self.script(&args.join(" "), depth + 1);
        }
        if SHELLS.contains(&prog.as_str()) {
            // `busybox sh -c …`: the applet name comes first.
            let skip =
                usize::from(prog == "busybox" && args.first().is_some_and(|a| !a.starts_with('-')));
            let mut it = args.iter().skip(skip);
            while let Some(a) = it.next() {
                if a.starts_with('-') && a.contains('c') && !a.starts_with("--") {
                    return it.next().and_then(|s| self.script(s, depth + 1));
                }
                if !a.starts_with('-') {
                    // A script file: what it does is not in the command line.
                    return None;
                }
            }
            return cmd.stdin.as_deref().and_then(|s| self.script(s, depth + 1));
        }
        if INTERPRETERS.contains(&prog.as_str())
            || prog.starts_with("python")
            || prog.starts_with("perl")
        {
            return self.interpreter(&prog, &args, cmd.stdin.as_deref());
        }
        self.file_ops(&prog, &args, &text, depth)
    }

    fn is_exe(&self, word: &str) -> bool {
        if !word.contains('/') {
            return false;
        }
        let p = self.path(word);
        let same = |e: &Path| {
            p == e
                || self
                    .env
                    .canonical(&p)
                    .zip(self.env.canonical(e))
                    .is_some_and(|(a, b)| a == b)
        };
        self.env.exe().is_some_and(same)
    }

    /// Interpreters. An inline program that mentions a protected path and writes anything is
    /// denied; the files handed to an inline program are its input unless it edits in place
    /// (`perl -i`, `gawk -i inplace`) or writes; a script file (or a module we do not know)
    /// handed a protected path may write it, so that is denied too.
    fn interpreter(&mut self, prog: &str, args: &[String], stdin: Option<&str>) -> Option<String> {
        let family = prog.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        let awk = family.ends_with("awk");
        let mut code = String::new();
        let mut files: Vec<&String> = Vec::new();
        let mut expect_code = false;
        let mut in_place = false;
        let mut module: Option<&str> = None;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if expect_code {
                code.push_str(a);
                code.push('\n');
                expect_code = false;
                continue;
            }
            if module.is_some() {
                files.push(a);
                continue;
            }
            let short = a.starts_with('-') && !a.starts_with("--");
            if short
                && matches!(family, "perl" | "ruby")
                && !a.starts_with("-M")
                && !a.starts_with("-I")
            {
                // `-pi`, `-i.bak`, `-pie`: the switches before `e` hold an `i`.
                in_place |= a[1..]
                    .split(['e', 'E'])
                    .next()
                    .is_some_and(|f| f.contains('i'));
            }
            if awk && (a == "-i" || a == "--include") {
                in_place |= it.next().is_some_and(|x| x == "inplace");
                continue;
            }
            if family == "python" && a == "-m" {
                module = it.next().map(String::as_str);
                continue;
            }
            expect_code = match family {
                "perl" | "ruby" if short => a.ends_with('e') || a.ends_with('E'),
                "python" => a == "-c",
                "node" | "nodejs" | "deno" | "bun" => {
                    matches!(a.as_str(), "-e" | "--eval" | "-p" | "--print" | "eval")
                }
                "php" => a == "-r",
                "lua" | "tclsh" | "Rscript" | "osascript" | "pwsh" => {
                    matches!(a.as_str(), "-e" | "-c" | "-Command")
                }
                _ if awk => {
                    if !a.starts_with('-') && code.is_empty() && !args.iter().any(|x| x == "-f") {
                        code.push_str(a);
                        continue;
                    }
                    // `-F:`, `-v x=1`: options, with a value for `-v` and `-F`.
                    if matches!(a.as_str(), "-v" | "-F" | "-f") {
                        if let Some(v) = it.next() {
                            if a == "-f" {
                                files.push(v);
                            }
                        }
                    }
                    false
                }
                _ => false,
            };
            if !expect_code && !a.starts_with('-') {
                files.push(a);
            }
        }
        let how = format!("`{prog}`");
        let written: Vec<&String> = match module {
            // `python -m json.tool IN OUT` reads IN and writes OUT.
            Some("json.tool") => files
                .iter()
                .copied()
                .filter(|f| !f.starts_with('-'))
                .skip(1)
                .collect(),
            Some(_) => files.clone(),
            None if in_place || code.is_empty() => files.clone(),
            None if writes_in(family, &code) => files.clone(),
            None => Vec::new(),
        };
        for f in written {
            if let Some(x) = self.touch(f, Op::Write, &how, None) {
                return Some(x);
            }
        }
        if code.is_empty() && files.is_empty() {
            code = stdin.unwrap_or("").to_string();
        }
        let code = self.expand(&code);
        // `os.system("loopgate reset --all")` and its like: loopgate's own control commands.
        const SPAWNS: &[&str] = &[
            "system",
            "exec",
            "spawn",
            "subprocess",
            "Popen",
            "run(",
            "`",
            "qx",
            "popen",
        ];
        if code.contains("loopgate")
            && SPAWNS.iter().any(|m| code.contains(m))
            && MUTATING.iter().any(|m| {
                code.match_indices(m).any(|(at, _)| {
                    let before = code[..at].trim_end_matches([' ', '\'', '"', ',']);
                    before.ends_with("loopgate")
                })
            })
        {
            return Some(format!(
                "the inline {prog} program runs loopgate's control commands"
            ));
        }
        let names = PATH_FRAGMENTS.iter().find(|f| code.contains(**f));
        match names {
            Some(frag) if writes_in(family, &code) => {
                Some(format!("the inline {prog} program writes and names {frag}"))
            }
            _ => None,
        }
    }

    /// Programs that write, move, delete, link or re-permission their arguments.
    fn file_ops(
        &mut self,
        prog: &str,
        args: &[String],
        text: &str,
        depth: usize,
    ) -> Option<String> {
        let operands: Vec<&String> = operands(args);
        let how = format!("`{prog}`");
        let each = |this: &Self, list: &[&String], op: Op| {
            list.iter()
                .find_map(|w| this.touch(w, op, &how, Some(text)))
        };
        match prog {
            "rm" | "rmdir" | "unlink" | "shred" | "srm" | "trash" | "trash-put" | "gio" => {
                each(self, &operands, Op::Remove)
            }
            "chmod" | "chown" | "chgrp" | "chattr" | "setfacl" | "chflags" => {
                // The first operand is the mode or owner (unless given by --reference); a mode
                // may look like an option (`chmod -x`).
                let symbolic_mode =
                    |a: &str| a.len() > 1 && a[1..].chars().all(|c| "rwxXst".contains(c));
                let by_reference = args.iter().any(|a| a.starts_with("--reference"));
                let mode_as_option =
                    prog == "chmod" && args.iter().any(|a| a.starts_with('-') && symbolic_mode(a));
                let mode_is_operand = !(by_reference || mode_as_option);
                let list: Vec<&String> = operands
                    .iter()
                    .skip(usize::from(mode_is_operand))
                    .copied()
                    .collect();
                each(self, &list, Op::Remove)
            }
            "mv" => {
                let (srcs, dest) = split_dest(args, &operands)?;
                each(self, &srcs, Op::Remove)
                    .or_else(|| self.dest(&srcs, dest, Op::Remove, &how, text))
            }
            "cp" | "install" | "rsync" | "scp" | "ditto" => {
                if prog == "install" && args.iter().any(|a| a == "-d") {
                    return each(self, &operands, Op::Write);
                }
                let (srcs, dest) = split_dest(args, &operands)?;
                // A copy reads its sources, unless rsync is told to delete them once sent.
                if prog == "rsync" && args.iter().any(|a| a == "--remove-source-files") {
                    if let Some(f) = each(self, &srcs, Op::Remove) {
                        return Some(f);
                    }
                }
                self.dest(&srcs, dest, Op::Write, &how, text)
            }
            "ln" | "link" => {
                // A link named like a protected path replaces it; a link to one is a way to
                // write it later under another name.
                each(self, &operands, Op::Remove)
            }
            "tee" | "touch" | "truncate" | "mkfifo" | "mknod" | "mkdir" | "fallocate"
            | "sponge" => {
                let list: Vec<&String> = if prog == "truncate" {
                    operands_skipping(args, &["-s", "--size", "-r", "--reference"])
                } else if prog == "mknod" {
                    operands.iter().take(1).copied().collect()
                } else {
                    operands.clone()
                };
                each(self, &list, Op::Write)
            }
            "dd" => args
                .iter()
                .filter_map(|a| a.strip_prefix("of="))
                .find_map(|p| self.touch(p, Op::Write, &how, Some(text))),
            "sed" | "gsed" => {
                let in_place = args.iter().any(|a| {
                    a.starts_with("-i")
                        || a.starts_with("--in-place")
                        || (a.starts_with('-') && !a.starts_with("--") && a.contains('i'))
                });
                // sed's own `w FILE` (and `s///w FILE`) writes whatever the input.
                if let Some(f) = sed_written_files(args)
                    .iter()
                    .find_map(|w| self.touch(w, Op::Write, &how, Some(text)))
                {
                    return Some(f);
                }
                if !in_place {
                    return None;
                }
                each(self, &operands, Op::Write)
            }
            // Writers that pass for readers.
            "sort" => {
                let mut it = args.iter();
                while let Some(a) = it.next() {
                    let out = match a.as_str() {
                        "-o" | "--output" => it.next().map(String::as_str),
                        _ => a
                            .strip_prefix("--output=")
                            .or_else(|| a.strip_prefix("-o").filter(|o| !o.is_empty())),
                    };
                    if let Some(f) = out.and_then(|o| self.touch(o, Op::Write, &how, Some(text))) {
                        return Some(f);
                    }
                }
                None
            }
            "uniq" => operands
                .get(1)
                .and_then(|out| self.touch(out, Op::Write, &how, Some(text))),
            "yq" if args.iter().any(|a| {
                a == "--inplace" || (a.starts_with('-') && !a.starts_with("--") && a.contains('i'))
            }) =>
            {
                each(self, &operands, Op::Write)
            }
            "curl" | "wget" => {
                let mut it = args.iter();
                while let Some(a) = it.next() {
                    let target = match a.as_str() {
                        "-o" | "--output" | "-O" | "--output-document"
                            if prog == "wget" || a != "-O" =>
                        {
                            it.next()
                        }
                        _ => a
                            .strip_prefix("--output=")
                            .or(a.strip_prefix("--output-document="))
                            .map(|_| a),
                    };
                    if let Some(t) = target {
                        let t = t.rsplit('=').next().unwrap_or(t);
                        if let Some(f) = self.touch(t, Op::Write, &how, Some(text)) {
                            return Some(f);
                        }
                    }
                    // The directory files are saved into: `curl --output-dir`, `wget -P`.
                    let dir = match a.as_str() {
                        "--output-dir" if prog == "curl" => it.clone().next().map(String::as_str),
                        "-P" | "--directory-prefix" if prog == "wget" => {
                            it.clone().next().map(String::as_str)
                        }
                        _ if prog == "curl" => a.strip_prefix("--output-dir="),
                        _ => a
                            .strip_prefix("--directory-prefix=")
                            .or_else(|| a.strip_prefix("-P").filter(|d| !d.is_empty())),
                    };
                    if let Some(f) = dir.and_then(|d| self.touch(d, Op::Remove, &how, Some(text))) {
                        return Some(f);
                    }
                }
                None
            }
            // Archivers by mode: a backup reads what it packs (`tar czf /tmp/x.tgz -C ~/.local/state
            // loopgate`), an extraction writes into its directory, `--remove-files` deletes.
            p if archive::effects(p, args).is_some() => archive::effects(p, args)?
                .iter()
                .find_map(|(w, op)| self.touch(w, *op, &how, Some(text))),
            "find" => self.find(args, &how, depth),
            // The shell's dot-commands: `sqlite3 x.db '.shell rm -rf …'`, `.system …`.
            "sqlite3" | "duckdb" => {
                let lines: Vec<String> = args
                    .iter()
                    .flat_map(|a| a.lines())
                    .filter_map(|l| {
                        let l = l.trim_start();
                        l.strip_prefix(".shell ")
                            .or_else(|| l.strip_prefix(".system "))
                            .map(str::to_string)
                    })
                    .collect();
                lines.iter().find_map(|l| self.script(l, depth + 1))
            }
            "git" => self.git(args, &how, text),
            p if READERS.contains(&p) => None,
            // Debuggers read the program they load; only their write mode patches it.
            "gdb" | "lldb" if !args.iter().any(|a| a.contains("write")) => None,
            _ => {
                // A program we do not know that names a protected path: it may well write it.
                operands.iter().find_map(|w| {
                    let path = self.path(w);
                    self.env.hit(&path, Op::Write).map(|(kind, p)| {
                        format!(
                            "`{prog}` would be handed {} ({})",
                            kind.describe(),
                            p.display()
                        )
                    })
                })
            }
        }
    }

    /// The destination of `cp`/`mv`: the path itself, and what each source becomes inside it.
    fn dest(&self, srcs: &[&String], dest: &str, op: Op, how: &str, text: &str) -> Option<String> {
        if let Some(f) = self.touch(dest, op, how, Some(text)) {
            return Some(f);
        }
        let d = self.path(dest);
        if !(d.is_dir() || dest.ends_with('/') || srcs.len() > 1) {
            return None;
        }
        for s in srcs {
            let name = Path::new(&self.expand(s)).file_name()?.to_os_string();
            if let Some(f) = write_finding(self.env, &d.join(&name), op, how, Some(text)) {
                return Some(f);
            }
        }
        None
    }

    /// `find`: `-delete` and the `-fprint` family change what they reach; a command run by
    /// `-exec` is judged as if handed each protected path the search can reach, so
    /// `-exec grep -l TODO {} +` reads and `-exec rm {} +` deletes.
    fn find(&mut self, args: &[String], how: &str, depth: usize) -> Option<String> {
        let roots: Vec<&String> = args
            .iter()
            .take_while(|a| !a.starts_with('-') && !matches!(a.as_str(), "(" | "!" | ")"))
            .collect();
        let deletes = args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-delete" | "-fprint" | "-fprint0" | "-fprintf" | "-fls"
            )
        });
        let runs = find_commands(args);
        if !deletes && runs.is_empty() {
            return None;
        }
        let names: Vec<&String> = args
            .windows(2)
            .filter(|w| {
                matches!(
                    w[0].as_str(),
                    "-name" | "-iname" | "-path" | "-ipath" | "-wholename" | "-regex"
                )
            })
            .map(|w| &w[1])
            .collect();
        // `-path` patterns are matched against the whole path find prints (`*` crosses `/`).
        let whole: Vec<crate::util::wildcard::Pattern> = args
            .windows(2)
            .filter(|w| matches!(w[0].as_str(), "-path" | "-ipath" | "-wholename"))
            .filter_map(|w| crate::util::wildcard::Pattern::new(&w[1]).ok())
            .collect();
        let default_root = String::from(".");
        let roots = if roots.is_empty() {
            vec![&default_root]
        } else {
            roots
        };
        for r in roots {
            let root = self.path(r);
            // Every protected path under the root, not just the first: a name filter may match
            // only one of them.
            for (kind, p) in self.env.held_by(&root) {
                // With a name filter, only when the filter can match the protected path.
                let printed = |q: &Path| match q.strip_prefix(&root) {
                    Ok(rest) if rest.as_os_str().is_empty() => r.to_string(),
                    Ok(rest) => format!("{}/{}", r.trim_end_matches('/'), rest.display()),
                    Err(_) => q.display().to_string(),
                };
                let by_path = !whole.is_empty()
                    && p.ancestors()
                        .map(Path::to_path_buf)
                        .chain(entries_under(&p, 256))
                        .any(|q| whole.iter().any(|g| g.matches(&printed(&q))));
                let matches = names.is_empty()
                    || by_path
                    || names.iter().any(|n| {
                        let pat = crate::util::wildcard::Pattern::new(n);
                        p.ancestors()
                            .chain([p.as_path()])
                            .filter_map(Path::file_name)
                            .any(|name| {
                                let name = name.to_string_lossy();
                                pat.as_ref().is_ok_and(|g| g.matches(&name))
                                    || name.contains(n.as_str())
                            })
                    });
                if !matches || too_new_for(args, &p) {
                    continue;
                }
                let deletion =
                    || format!("{how} would delete {} ({})", kind.describe(), p.display());
                if deletes {
                    return Some(deletion());
                }
                let found = p.to_string_lossy().into_owned();
                for run in &runs {
                    // A shell or interpreter handed `{}` does what its program says, which
                    // is not in the words: it may write what it is handed.
                    let prog = run.first().map(|w| base_name(w)).unwrap_or("");
                    if SHELLS.contains(&prog) || INTERPRETERS.contains(&prog) || prog == "eval" {
                        return Some(deletion());
                    }
                    let cmd = shell::Simple {
                        words: run.iter().map(|w| w.replace("{}", &found)).collect(),
                        ..Default::default()
                    };
                    if let Some(f) = self.simple(&cmd, depth + 1) {
                        return Some(f);
                    }
                }
            }
        }
        None
    }

    fn git(&mut self, args: &[String], how: &str, text: &str) -> Option<String> {
        // `git -C DIR …` runs in DIR; `-c key=value` is configuration.
        let mut at = 0;
        let mut dir: Option<&String> = None;
        while let Some(a) = args.get(at) {
            match a.as_str() {
                "-C" => {
                    dir = args.get(at + 1);
                    at += 2;
                }
                "-c" => {
                    // `git -c alias.x='!cmd' x`: the alias is a shell command line.
                    let value = args.get(at + 1).map(String::as_str).unwrap_or("");
                    if let Some((_, cmd)) = value
                        .split_once('=')
                        .filter(|(k, _)| k.starts_with("alias."))
                        .and_then(|(k, v)| Some((k, v.strip_prefix('!')?)))
                    {
                        let cmd = cmd.to_string();
                        if let Some(f) = self.script(&cmd, 1) {
                            return Some(f);
                        }
                    }
                    at += 2;
                }
                "--git-dir" | "--work-tree" | "--namespace" => at += 2,
                s if s.starts_with('-') => at += 1,
                _ => break,
            }
        }
        if let Some(d) = dir {
            let mut inner = Bash {
                env: self.env,
                vars: self.vars.clone(),
                cwd: self.path(d),
                subs: self.subs.clone(),
                sub_texts: self.sub_texts.clone(),
                budget: self.budget.clone(),
            };
            return inner.git(&args[at..], how, text);
        }
        let args = &args[at..];
        let sub = args.first()?;
        if !matches!(
            sub.as_str(),
            "checkout"
                | "restore"
                | "rm"
                | "mv"
                | "clean"
                | "stash"
                | "apply"
                | "am"
                | "switch"
                | "reset"
        ) {
            return None;
        }
        // The index alone: `git restore --staged` and `git rm --cached` leave the files as they are.
        let flag = |f: &[&str]| args.iter().any(|a| f.contains(&a.as_str()));
        let index_only = match sub.as_str() {
            "restore" => flag(&["--staged", "-S"]) && !flag(&["--worktree", "-W"]),
            "rm" => flag(&["--cached"]),
            _ => false,
        };
        if index_only {
            return None;
        }
        // Only paths that name a protected file: `git checkout -- .` restores what is committed,
        // which a user's own files are not part of.
        operands(args)
            .iter()
            .skip(1)
            .find_map(|w| self.touch(w, Op::Write, how, Some(text)))
    }
}

/// Whether loopgate's command line changes something: a mutating subcommand when the program is
/// loopgate, or (for a copy under another name) one of loopgate's mutating subcommands together
/// with flags only loopgate has.
/// loopgate's subcommands that change nothing (`help` included); with [`MUTATING`], every one
/// it has: a word that is none of them is not one the guard could read.
const READ_ONLY_SUBCOMMANDS: &[&str] = &[
    "status",
    "halted",
    "statusline",
    "report",
    "explain",
    "config",
    "doctor",
    "replay",
    "completions",
    "man",
    "demo",
    "help",
];

fn loopgate_cli(args: &[String], is_loopgate: bool, reader: bool) -> Option<String> {
    let mut sub: Option<&str> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if matches!(a.as_str(), "--state-dir" | "--config") {
            it.next();
            continue;
        }
        if !a.starts_with('-') {
            sub = Some(a);
            break;
        }
    }
    if is_loopgate {
        // loopgate's own parser says what the words are: `gc --dry-run` only looks.
        use clap::Parser;
        match crate::cli::Cli::try_parse_from(
            std::iter::once("loopgate").chain(args.iter().map(String::as_str)),
        ) {
            Ok(cli) => {
                return cli.command.changes_something().then(|| {
                    format!(
                        "`loopgate {}` is loopgate's own control command",
                        cli.command.name()
                    )
                })
            }
            Err(e)
                if !matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp
                        | clap::error::ErrorKind::DisplayVersion
                        | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                ) => {}
            Err(_) => return None,
        }
        // A subcommand the words do not spell (`$(printf 'res%s' et)`, `"${arr[@]}"`, `$x`
        // bound at run time) may be any of them: judged as the control commands it may be.
        if sub.is_some_and(|s| !READ_ONLY_SUBCOMMANDS.contains(&s) && !MUTATING.contains(&s)) {
            return Some(
                "`loopgate` with its subcommand computed at run time may be any of loopgate's \
                 control commands"
                    .to_string(),
            );
        }
        return sub
            .filter(|s| MUTATING.contains(s))
            .map(|s| format!("`loopgate {s}` is loopgate's own control command"));
    }
    if reader {
        return None;
    }
    let has = |flags: &[&str]| {
        args.iter().any(|a| {
            flags
                .iter()
                .any(|f| a == f || a.starts_with(&format!("{f}=")))
        })
    };
    let word = |w: &str| args.iter().any(|a| a == w);
    let renamed = if word("reset") && has(&["--all", "--session"]) {
        Some("reset")
    } else if word("continue") && has(&["--session", "--latest"]) {
        Some("continue")
    } else if word("setup")
        && has(&[
            "--uninstall",
            "--settings",
            "--bin",
            "--managed",
            "--observe",
            "--config",
            "--state-dir",
        ])
    {
        Some("setup")
    } else {
        sub.filter(|s| MUTATING.contains(s) && s.contains('-'))
    };
    renamed.map(|s| format!("`{s} …` is loopgate's own control command, under another name"))
}

fn is_descriptor(target: &str) -> bool {
    target == "-" || target.chars().all(|c| c.is_ascii_digit())
}

fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let name = name.strip_suffix('+').unwrap_or(name);
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some((name, value))
}

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The commands `find` runs: the words after each `-exec`, `-execdir`, `-ok` or `-okdir`, up to
/// its closing `;` or `+`.
fn find_commands(args: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            out.push(
                it.by_ref()
                    .take_while(|w| !matches!(w.as_str(), ";" | "+"))
                    .cloned()
                    .collect(),
            );
        }
    }
    out
}

/// Up to `max` paths inside the directory `dir`, two levels deep (what `find -path` may pick
/// inside a protected directory: the state's `sessions/…`); none when `dir` is not one.
fn entries_under(dir: &Path, max: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    for _level in 0..2 {
        let mut next = Vec::new();
        for d in &dirs {
            let Ok(rd) = std::fs::read_dir(d) else {
                continue;
            };
            for e in rd.flatten().take(max.saturating_sub(out.len())) {
                let path = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    next.push(path.clone());
                }
                out.push(path);
            }
        }
        dirs = next;
    }
    out
}

/// Whether `find`'s age test leaves the protected file `p` out, as it is now: `find . -mtime +30
/// -delete` (a clean-up of old files) does not reach a config edited this month, nor one that
/// does not exist (made by the same command, it would be new). Only for a regular file (a
/// directory's own time says nothing of the files in it) and only when the age test is not
/// under `-o` or `!`, where it no longer narrows the match.
fn too_new_for(args: &[String], p: &Path) -> bool {
    if args
        .iter()
        .any(|a| matches!(a.as_str(), "-o" | "-or" | "!" | "-not" | ","))
    {
        return false;
    }
    // `+N`: more than N whole units old; find leaves younger files alone.
    let older_than: Vec<u64> = args
        .windows(2)
        .filter_map(|w| {
            let unit = match w[0].as_str() {
                "-mtime" => 86_400,
                "-mmin" => 60,
                _ => return None,
            };
            let n = w[1].strip_prefix('+')?.parse::<u64>().ok()?;
            Some(n.saturating_add(1).saturating_mul(unit))
        })
        .collect();
    let Some(&min_age) = older_than.iter().max() else {
        return false;
    };
    match std::fs::metadata(p) {
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        Ok(meta) if meta.is_file() => meta.modified().ok().is_some_and(|m| {
            let age = std::time::SystemTime::now()
                .duration_since(m)
                .unwrap_or_default();
            age.as_secs() < min_age
        }),
        Ok(_) => false,
    }
}

/// Whether an inline program has a sign of writing, moving or deleting something. awk compares
/// with `>`, so there only output redirections of `print`, pipes and `system` count.
fn writes_in(family: &str, code: &str) -> bool {
    if family.ends_with("awk") {
        return code.contains("system")
            || code.contains('|')
            || code.split([';', '{', '}', '\n']).any(|statement| {
                let s = statement.trim_start();
                s.starts_with("print") && s.contains('>')
            });
    }
    // A dump to the standard streams prints (`json.dump(d, sys.stdout, indent=2)`): those
    // streams taken out, a `dump(` left over still writes somewhere else.
    let shown = code
        .replace("sys.stdout.write", "")
        .replace("sys.stderr.write", "");
    let to_streams = shown.matches("sys.stdout").count() + shown.matches("sys.stderr").count();
    let dumps = shown.matches("dump(").count();
    WRITE_MARKERS.iter().any(|m| {
        if *m == "dump(" {
            dumps > to_streams
        } else {
            shown.contains(m)
        }
    })
}

/// The size of a string the hook input clipped (`…[loopgate: N bytes, sha256 …]` at its end).
fn clipped_size(text: &str) -> Option<u64> {
    let rest = text.strip_suffix(']')?;
    let at = rest.rfind("…[loopgate: ")?;
    let (n, tail) = rest[at + "…[loopgate: ".len()..].split_once(" bytes, sha256 ")?;
    (tail.len() == 32 && tail.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// Files sed's scripts write with `w FILE` or the `w` flag of `s///`.
fn sed_written_files(args: &[String]) -> Vec<String> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"(?:^|[;}\n]|/[gpiIme0-9]*)\s*[wW]\s*(\S+)").expect("compiles")
    });
    let mut scripts: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if matches!(a.as_str(), "-e" | "--expression") {
            scripts.extend(it.next().map(String::as_str));
        } else if let Some(e) = a.strip_prefix("--expression=") {
            scripts.push(e);
        }
    }
    if scripts.is_empty() {
        scripts.extend(
            args.iter()
                .find(|a| !a.starts_with('-'))
                .map(String::as_str),
        );
    }
    scripts
        .iter()
        .flat_map(|s| re.captures_iter(s))
        .filter_map(|c| c.get(1).map(|m| m.as_str().to_string()))
        .collect()
}

/// Brace expansion as bash does it for `a{b,c}d` (nested groups included), at most 64 words;
/// `${…}` and a group without a comma stay as written. `None` past 8 groups deep.
fn braces(word: &str, groups: usize) -> Option<Vec<String>> {
    const MAX: usize = 64;
    if groups > 8 {
        return None;
    }
    let b = word.as_bytes();
    let mut open = None;
    let mut depth = 0usize;
    let mut commas = Vec::new();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'{' if open.is_none() && (i == 0 || b[i - 1] != b'$') => {
                open = Some(i);
                depth = 1;
            }
            b'{' if open.is_some() => depth += 1,
            b',' if open.is_some() && depth == 1 => commas.push(i),
            b'}' if open.is_some() => {
                depth -= 1;
                if depth > 0 {
                    continue;
                }
                let start = open.take().unwrap_or(0);
                if commas.is_empty() {
                    continue;
                }
                let (head, tail) = (&word[..start], &word[i + 1..]);
                let mut bounds = vec![start];
                bounds.extend(&commas);
                bounds.push(i);
                let mut out = Vec::new();
                for w in bounds.windows(2) {
                    let alt = format!("{head}{}{tail}", &word[w[0] + 1..w[1]]);
                    for x in braces(&alt, groups + 1)? {
                        if out.len() >= MAX {
                            return Some(out);
                        }
                        out.push(x);
                    }
                }
                return Some(out);
            }
            _ => {}
        }
    }
    Some(vec![word.to_string()])
}

/// Arguments that are not options (everything after `--` counts).
fn operands(args: &[String]) -> Vec<&String> {
    let mut out = Vec::new();
    let mut literal = false;
    for a in args {
        if literal {
            out.push(a);
        } else if a == "--" {
            literal = true;
        } else if !a.starts_with('-') || a == "-" {
            out.push(a);
        }
    }
    out
}

/// Operands, skipping the values of the given options.
fn operands_skipping<'a>(args: &'a [String], valued: &[&str]) -> Vec<&'a String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if valued.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            out.push(a);
        }
    }
    out
}

/// Sources and destination of `cp`/`mv`/`install`, honouring `-t DIR`.
fn split_dest<'a>(
    args: &'a [String],
    operands: &[&'a String],
) -> Option<(Vec<&'a String>, &'a str)> {
    if let Some(i) = args
        .iter()
        .position(|a| a == "-t" || a == "--target-directory")
    {
        let dest = args.get(i + 1)?;
        let srcs = operands.iter().copied().filter(|o| *o != dest).collect();
        return Some((srcs, dest));
    }
    if let Some(t) = args
        .iter()
        .find_map(|a| a.strip_prefix("--target-directory="))
    {
        return Some((operands.to_vec(), t));
    }
    let (dest, srcs) = operands.split_last()?;
    Some((srcs.to_vec(), dest))
}

/// For the engine: the guard's view of where this call runs.
pub fn env_for(cwd: Option<&str>, project: Option<&Path>, state_dir: Option<&Path>) -> Env {
    Env::from_process(cwd, project, state_dir)
}

#[cfg(test)]
mod tests {
    /// Every subcommand loopgate has is either read-only or refused: a new one added to the CLI
    /// without a place here would be refused as "computed at run time".
    #[test]
    fn every_subcommand_is_known() {
        use clap::CommandFactory;
        for c in crate::cli::Cli::command().get_subcommands() {
            let name = c.get_name();
            assert!(
                READ_ONLY_SUBCOMMANDS.contains(&name) || MUTATING.contains(&name),
                "{name}"
            );
        }
    }

    use super::*;
    use serde_json::json;

    pub fn test_env() -> Env {
        let mut env = Env::default();
        env.home = Some("/h".into());
        env.cwd = "/p".into();
        env.exe = Some("/h/.local/bin/loopgate".into());
        env.protect_defaults(
            Some(Path::new("/p")),
            Some(Path::new("/h/.local/state/loopgate")),
        );
        env
    }

    #[test]
    fn a_project_settings_write_is_judged_by_what_it_does_to_loopgate() {
        let d = tempfile::tempdir().unwrap();
        let proj = d.path().join("proj");
        std::fs::create_dir_all(proj.join(".claude")).unwrap();
        let settings = proj.join(".claude/settings.json");
        std::fs::write(
            &settings,
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"command": "loopgate pre-tool-use"}]}]}}"#,
        )
        .unwrap();
        let mut env = test_env();
        env.cwd = proj.clone();
        let cfg = Guard::default();
        let deny = |input: Value| check("Write", &input, || env.clone(), &cfg).is_some();
        let path = settings.to_str().unwrap();
        assert!(
            deny(json!({"file_path": path, "content": "{}"})),
            "drops loopgate's hooks"
        );
        // Rewriting the file that wires loopgate is reserved to the user, even keeping the hooks.
        assert!(deny(
            json!({"file_path": path, "content": r#"{"hooks": {"PreToolUse": [{"hooks": [{"command": "loopgate --observe pre-tool-use"}]}]}}"#})
        ));
        let local = proj.join(".claude/settings.local.json");
        assert!(!deny(
            json!({"file_path": local.to_str().unwrap(), "content": r#"{"permissions": {"allow": ["Bash(npm test)"]}}"#})
        ));
        assert!(deny(
            json!({"file_path": path, "content": r#"{"disableAllHooks": true}"#})
        ));
        assert!(
            check(
                "Write",
                &json!({"file_path": "/h/.claude/settings.json", "content": "{}"}),
                || env.clone(),
                &cfg
            )
            .is_some(),
            "the user's settings stay reserved"
        );
    }

    #[test]
    fn writes_denied_reads_allowed() {
        let env = test_env();
        let cfg = Guard::default();
        let deny = |tool: &str, input: Value| check(tool, &input, || env.clone(), &cfg).is_some();
        assert!(deny(
            "Write",
            json!({"file_path": "/p/.claude/loopgate.toml", "content": "x"})
        ));
        assert!(deny(
            "Bash",
            json!({"command": "echo 'mode=\"observe\"' > .claude/loopgate.toml"})
        ));
        assert!(deny(
            "Bash",
            json!({"command": "rm -rf ~/.local/state/loopgate/sessions"})
        ));
        assert!(!deny(
            "Bash",
            json!({"command": "cat .claude/loopgate.toml"})
        ));
        assert!(!deny("Write", json!({"file_path": "/p/src/main.rs"})));
        assert!(!deny("Bash", json!({"command": "cargo test"})));
        let off = Guard { enabled: false };
        assert!(check(
            "Write",
            &json!({"file_path": "/p/.claude/loopgate.toml"}),
            || env.clone(),
            &off
        )
        .is_none());
    }
}
