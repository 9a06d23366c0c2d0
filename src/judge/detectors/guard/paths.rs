//! What the guard protects, and how a path named by the agent is brought to a form that can be
//! compared with it: `~`, `$HOME`, `$XDG_*` and the other variables expanded, made absolute
//! against the agent's working directory, `.`/`..`/`//` folded, and symlinks resolved where they
//! exist.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a protected path is, for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    State,
    Config,
    Binary,
    Settings,
    /// Another agent CLI's hook or trust file (Codex, Gemini CLI, Qwen Code, Copilot CLI).
    AgentHooks,
}

impl Kind {
    pub fn describe(self) -> &'static str {
        match self {
            Kind::AgentHooks => "an agent CLI's hook or trust file",
            Kind::State => "loopgate's state directory",
            Kind::Config => "a loopgate config file",
            Kind::Binary => "the loopgate binary",
            Kind::Settings => "a Claude Code settings file",
        }
    }
}

/// How a command touches a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Creates, overwrites or edits the file itself (symlinks to it are followed).
    Write,
    /// Deletes, moves, relinks or changes permissions: the path itself, and everything under it,
    /// so a directory holding a protected path counts too (symlinks are not followed).
    Remove,
}

/// The protected paths of this process's environment, and the running binary.
type ProcessPaths = (Vec<(PathBuf, Kind)>, Option<PathBuf>);

/// Everything the guard needs to know about where it runs. Built from the process environment in
/// production ([`Env::from_process`]) and by hand in tests.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub home: Option<PathBuf>,
    /// The agent's working directory (the payload's `cwd`).
    pub cwd: PathBuf,
    /// Variables for `$NAME` expansion, over the process environment when [`Env::process_env`].
    pub vars: HashMap<String, String>,
    /// Variables not in `vars` are read from this process's environment, one by one when asked
    /// for: a hook call never copies the whole environment (dozens of variables in Claude Code).
    pub process_env: bool,
    /// Protected paths given by hand (tests) or by [`Env::protect_defaults`]; see
    /// [`Env::protected`].
    pub protected: Vec<(PathBuf, Kind)>,
    /// The running binary, which `$(which loopgate)` and its like resolve to; see [`Env::exe`].
    pub exe: Option<PathBuf>,
    /// For this process's environment: the project and state dirs the protected paths are
    /// computed from, on first use. Most commands name no path, and then neither the paths
    /// (a score of joins, the config dir) nor the binary's own path (a `readlink`) are needed.
    process: Option<(Option<PathBuf>, Option<PathBuf>)>,
    /// The protected paths and the binary, computed from `process`.
    lazy: std::cell::OnceCell<ProcessPaths>,
    /// The protected paths with symlinks resolved, computed once per call on first use.
    resolved: std::cell::OnceCell<Vec<(PathBuf, Kind)>>,
    /// The `loopgate` programs on `PATH`, symlinks resolved, looked up on first use.
    on_path: std::cell::OnceCell<Vec<PathBuf>>,
    resolver: Resolver,
}

impl Env {
    pub fn from_process(
        cwd: Option<&str>,
        project: Option<&Path>,
        state_dir: Option<&Path>,
    ) -> Env {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()));
        let cwd = cwd
            .filter(|c| !c.is_empty())
            .map(PathBuf::from)
            .or_else(|| project.map(Path::to_path_buf))
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        Env {
            home,
            cwd,
            process_env: true,
            process: Some((
                project.map(Path::to_path_buf),
                state_dir.map(Path::to_path_buf),
            )),
            ..Default::default()
        }
    }

    /// What the guard protects: the paths given, or for this process's environment every
    /// default, the user's config file, the default state dir and the running binary.
    pub fn protected(&self) -> &[(PathBuf, Kind)] {
        match &self.process {
            None => &self.protected,
            Some(_) => &self.process_paths().0,
        }
    }

    /// The running binary (for this process's environment, asked of the OS on first use).
    pub fn exe(&self) -> Option<&Path> {
        match &self.process {
            None => self.exe.as_deref(),
            Some(_) => self.process_paths().1.as_deref(),
        }
    }

    fn process_paths(&self) -> &ProcessPaths {
        self.lazy.get_or_init(|| {
            let (project, state_dir) = self.process.clone().unwrap_or_default();
            let mut p = self.default_protected(project.as_deref(), state_dir.as_deref());
            if let Some(user) = crate::config::user_config_file() {
                p.push((user, Kind::Config));
            }
            if let Some(d) = crate::config::paths::state_dir() {
                p.push((d, Kind::State));
            }
            let exe = crate::platform::own_binary().map(|(e, canonical)| {
                if canonical {
                    // Resolving it again would `readlink` each of its directories for nothing.
                    let mut known = self.resolver.known.borrow_mut();
                    known.reserve(64);
                    known.insert(key(&e).to_vec(), Some(e.clone()));
                }
                e
            });
            if let Some(e) = &exe {
                p.push((e.clone(), Kind::Binary));
            }
            // The project is usually the working directory too: its paths once. A few dozen
            // short paths: comparing bytes costs less than hashing each into a set.
            let mut kept: Vec<(PathBuf, Kind)> = Vec::with_capacity(p.len());
            for (path, kind) in p {
                if !kept.iter().any(|(k, _)| key(k) == key(&path)) {
                    kept.push((path, kind));
                }
            }
            (kept, exe)
        })
    }

    /// Adds the protected paths every environment has (see [`Env::default_protected`]).
    pub fn protect_defaults(&mut self, project: Option<&Path>, state_dir: Option<&Path>) {
        let p = self.default_protected(project, state_dir);
        self.protected.extend(p);
    }

    /// The protected paths every environment has: the state dir(s), the config files, Claude
    /// Code's settings (user, project, local, managed).
    fn default_protected(
        &self,
        project: Option<&Path>,
        state_dir: Option<&Path>,
    ) -> Vec<(PathBuf, Kind)> {
        let var = |k: &str| self.var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let mut p: Vec<(PathBuf, Kind)> = Vec::new();
        if let Some(d) = state_dir {
            p.push((d.to_path_buf(), Kind::State));
        }
        if let Some(d) = var("LOOPGATE_STATE_DIR") {
            p.push((d, Kind::State));
        }
        if let Some(d) = var("XDG_STATE_HOME") {
            p.push((d.join("loopgate"), Kind::State));
        }
        if let Some(f) = var("LOOPGATE_CONFIG") {
            p.push((f, Kind::Config));
        }
        if let Some(d) = var("XDG_CONFIG_HOME") {
            p.push((d.join("loopgate"), Kind::Config));
        }
        if let Some(d) = var("CLAUDE_CONFIG_DIR") {
            p.push((d.join("settings.json"), Kind::Settings));
            p.push((d.join("settings.local.json"), Kind::Settings));
        }
        if let Some(d) = var("CODEX_HOME") {
            p.push((d.join("hooks.json"), Kind::AgentHooks));
            p.push((d.join("config.toml"), Kind::AgentHooks));
        }
        if let Some(h) = &self.home {
            for f in AGENT_FILES {
                p.push((h.join(f), Kind::AgentHooks));
            }
            p.push((h.join(".local/state/loopgate"), Kind::State));
            p.push((h.join(".config/loopgate"), Kind::Config));
            p.push((h.join(".claude/settings.json"), Kind::Settings));
            p.push((h.join(".claude/settings.local.json"), Kind::Settings));
            p.push((h.join(".local/bin/loopgate"), Kind::Binary));
            p.push((h.join(".cargo/bin/loopgate"), Kind::Binary));
        }
        for root in project.into_iter().chain([self.cwd.as_path()]) {
            p.push((root.join(".claude/loopgate.toml"), Kind::Config));
            p.push((root.join(".claude/settings.json"), Kind::Settings));
            p.push((root.join(".claude/settings.local.json"), Kind::Settings));
        }
        // Managed settings: the one directory Claude Code reads on this OS.
        p.push((crate::config::paths::claude_managed_dir(), Kind::Settings));
        p
    }

    /// Expands `~`, `$NAME` and `${NAME}` (from `local`, then the environment). Unknown variables
    /// expand to nothing, as in the shell.
    pub fn expand(&self, word: &str, local: &HashMap<String, String>) -> String {
        let mut out = String::new();
        let rest = if word == "~" || word.starts_with("~/") {
            match &self.home {
                Some(h) => {
                    out.push_str(&h.to_string_lossy());
                    &word[1..]
                }
                None => word,
            }
        } else {
            word
        };
        let chars: Vec<char> = rest.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] != '$' {
                out.push(chars[i]);
                i += 1;
                continue;
            }
            let (name, next) = if chars.get(i + 1) == Some(&'{') {
                let end = chars[i..]
                    .iter()
                    .position(|&c| c == '}')
                    .map(|p| i + p)
                    .unwrap_or(chars.len());
                let inner: String = chars[(i + 2).min(end)..end].iter().collect();
                // `${X:-default}` and its like: the name is what comes before the operator.
                let name: String = inner
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let op = &inner[name.len()..];
                // `:-`/`-` use a default, `:=`/`=` assign it too (the same word here), `:+`/`+`
                // use the alternative when set.
                let default = [":-", "-", ":=", "="]
                    .iter()
                    .find_map(|o| op.strip_prefix(o));
                if let Some(default) = default {
                    let set = self.lookup(&name, local).filter(|v| !v.is_empty());
                    out.push_str(&set.unwrap_or_else(|| self.expand(default, local)));
                    i = end + 1;
                    continue;
                }
                if let Some(alt) = op.strip_prefix(":+").or(op.strip_prefix('+')) {
                    if self.lookup(&name, local).is_some_and(|v| !v.is_empty()) {
                        out.push_str(&self.expand(alt, local));
                    }
                    i = end + 1;
                    continue;
                }
                (name, end + 1)
            } else {
                let name: String = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                let n = name.chars().count();
                (name, i + 1 + n)
            };
            if name.is_empty() {
                out.push('$');
                i += 1;
                continue;
            }
            out.push_str(&self.lookup(&name, local).unwrap_or_default());
            i = next;
        }
        out
    }

    fn lookup(&self, name: &str, local: &HashMap<String, String>) -> Option<String> {
        local
            .get(name)
            .cloned()
            .or_else(|| (name == "PWD").then(|| self.cwd.to_string_lossy().into_owned()))
            .or_else(|| {
                (name == "HOME")
                    .then(|| self.home.as_ref().map(|h| h.to_string_lossy().into_owned()))
                    .flatten()
            })
            .or_else(|| self.var(name))
    }

    fn var(&self, name: &str) -> Option<String> {
        // `$_` is the shell's last argument (PowerShell's pipeline item), never what the hook's
        // own environment holds under `_`: the path of the program that started it, loopgate.
        if name == "_" {
            return None;
        }
        self.vars.get(name).cloned().or_else(|| {
            self.process_env
                .then(|| std::env::var_os(name))
                .flatten()
                .map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// An absolute, lexically normal path for `word` (already expanded), relative to `cwd`.
    pub fn absolute(&self, word: &str, cwd: &Path) -> PathBuf {
        lexical(&cwd.join(word))
    }

    /// Whether touching `path` this way reaches something protected; returns what.
    pub fn hit(&self, path: &Path, op: Op) -> Option<(Kind, PathBuf)> {
        let mut forms = vec![path.to_path_buf(), self.resolver.resolve_parent(path)];
        if op == Op::Write {
            forms.push(self.resolver.resolve(path));
        }
        for f in &forms {
            if let Some(k) = name_rule(f).filter(|_| !self.fixture(f)) {
                return Some((k, f.clone()));
            }
        }
        if binary_name(path) {
            if let Some(b) = self.installed_binary(&forms) {
                return Some((Kind::Binary, b));
            }
        }
        let resolved = self.resolved.get_or_init(|| {
            self.protected()
                .iter()
                .map(|(p, k)| (self.resolver.resolve(p), *k))
                .collect()
        });
        for (pf, kind) in self.protected().iter().chain(resolved) {
            for f in &forms {
                let inside = under(f, pf);
                let holds = op == Op::Remove && under(pf, f);
                if inside || holds {
                    return Some((*kind, pf.clone()));
                }
            }
        }
        None
    }

    /// Whether a file named like an agent CLI's settings is one no CLI of this session reads: its
    /// CLI directory (`.claude`, `.gemini`, `.github/hooks` …) sits strictly inside the project or
    /// the working directory and not on the way to the working directory (a CLI reads its
    /// project's files at the directory it starts in). A fixture or an example that shows a
    /// setting (`tests/fixtures/p/.claude/settings.json`) is the project's own file; the same
    /// name at the project's root, at home or anywhere outside the project is not.
    fn fixture(&self, path: &Path) -> bool {
        let Some(dir) = path.parent() else {
            return false;
        };
        let cli_dir = if dir.file_name().is_some_and(|n| n == "hooks") {
            dir.parent()
        } else {
            Some(dir)
        };
        let Some(base) = cli_dir.and_then(Path::parent) else {
            return false;
        };
        let project = self.process.as_ref().and_then(|(p, _)| p.as_deref());
        let inside = [Some(self.cwd.as_path()), project]
            .into_iter()
            .flatten()
            .any(|root| key(base) != key(root) && under(base, root));
        inside && !under(&self.cwd, base)
    }

    /// `path` (absolute, lexical) with its symlinks resolved, if it exists.
    pub fn canonical(&self, path: &Path) -> Option<PathBuf> {
        self.resolver.existing(path, 0)
    }

    /// The binary on `PATH` (what running `loopgate` starts) that one of `forms` is, if any.
    /// Looked up only for a path named like the binary, so most calls never walk `PATH`.
    fn installed_binary(&self, forms: &[PathBuf]) -> Option<PathBuf> {
        let on_path = self.on_path.get_or_init(|| {
            let Some(dirs) = self.var("PATH") else {
                return Vec::new();
            };
            std::env::split_paths(&dirs)
                .flat_map(|d| [d.join("loopgate"), d.join("loopgate-hook")])
                .filter(|b| b.is_file())
                .map(|b| self.resolver.resolve(&b))
                .collect()
        });
        forms
            .iter()
            .find(|f| {
                on_path
                    .iter()
                    .any(|b| b == *f || self.resolver.resolve(f) == *b)
            })
            .cloned()
    }

    /// Every protected path at or under `dir` (for `find`, whose name filters pick among them).
    pub fn held_by(&self, dir: &Path) -> Vec<(Kind, PathBuf)> {
        let forms = [dir.to_path_buf(), self.resolver.resolve(dir)];
        self.protected()
            .iter()
            .filter(|(p, _)| {
                forms
                    .iter()
                    .any(|f| p.starts_with(f) || self.resolver.resolve(p).starts_with(f))
            })
            .map(|(p, k)| (*k, p.clone()))
            .collect()
    }

    /// For a word with glob characters: the protected paths (and, for removals, the directories
    /// holding them) it can match. Dot files match only a literal dot, as in the shell.
    pub fn glob_hits(&self, pattern: &Path, op: Op) -> Option<(Kind, PathBuf)> {
        let pat = crate::util::wildcard::Pattern::new(&pattern.to_string_lossy()).ok()?;
        let opts = crate::util::wildcard::Options::PATH;
        // The directories the word names before its first wildcard: a word inside a protected
        // directory (`rm -rf {state}/*`) reaches what is in it, whether or not it exists now.
        let literal: PathBuf = pattern
            .components()
            .take_while(|c| !c.as_os_str().to_string_lossy().contains(['*', '?', '[']))
            .collect();
        for (p, kind) in self.protected() {
            if literal.parent().is_some() && literal.starts_with(p) {
                return Some((*kind, p.clone()));
            }
            let mut candidates: Vec<&Path> = vec![p.as_path()];
            if op == Op::Remove {
                candidates.extend(p.ancestors().skip(1));
            }
            if candidates
                .iter()
                .any(|c| pat.matches_with(&c.to_string_lossy(), opts))
            {
                return Some((*kind, p.clone()));
            }
        }
        // A loopgate.toml or settings file anywhere; `*` does not match `.claude`, as in bash.
        let name = pattern.file_name()?.to_string_lossy().into_owned();
        let names = ["loopgate.toml", "settings.json", "settings.local.json"];
        let parent_is_claude = pattern.parent().and_then(Path::file_name).is_some_and(|n| {
            crate::util::wildcard::Pattern::new(&n.to_string_lossy())
                .is_ok_and(|g| g.matches_with(".claude", opts))
        });
        names
            .iter()
            .any(|n| {
                parent_is_claude
                    && crate::util::wildcard::Pattern::new(&name)
                        .is_ok_and(|g| g.matches_with(n, opts))
            })
            .then(|| (Kind::Config, pattern.to_path_buf()))
    }
}

/// The other agent CLIs' hook and trust files, under the home directory (see `setup::agents`).
const AGENT_FILES: &[&str] = &[
    ".codex/hooks.json",
    ".codex/config.toml",
    ".gemini/settings.json",
    ".qwen/settings.json",
    ".copilot/hooks",
];

/// Paths protected wherever they are: any `.claude/loopgate.toml`, any `.claude/settings*.json`, the
/// managed-settings files, every agent CLI's hook files in a project (`.codex/hooks.json`,
/// `.gemini/settings.json`, `.qwen/settings.json`, `.github/hooks/*.json`), and OpenCode's and
/// Kilo CLI's `plugins/loopgate.js`, the user's or a project's.
pub(super) fn name_rule(path: &Path) -> Option<Kind> {
    let name = path.file_name()?.to_str()?;
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("");
    // loopgate reads a project's `.claude/loopgate.toml`, no other: `examples/loopgate.toml` or
    // a test fixture of that name is the project's own file (a `--config` path is judged with
    // the wiring). A directory the guard could not name (an unset variable) may be `.claude`.
    let unknown_dir = parent.is_empty()
        || parent.contains(['$', '`', '*', '?', '[', '{'])
        || parent.contains("__lg_sub_");
    let project_config = name == "loopgate.toml" && (parent == ".claude" || unknown_dir);
    if project_config || (parent == "loopgate" && name == "config.toml") {
        return Some(Kind::Config);
    }
    let agent_file = match parent {
        ".codex" => matches!(name, "hooks.json" | "config.toml"),
        ".gemini" | ".qwen" => name.starts_with("settings") && name.ends_with(".json"),
        "hooks" => {
            name.ends_with(".json")
                && path
                    .parent()
                    .and_then(Path::parent)
                    .and_then(Path::file_name)
                    .is_some_and(|g| g == ".github" || g == ".copilot")
        }
        // OpenCode's and Kilo CLI's plugin folders: loopgate's plugin is their hook path.
        "plugins" => {
            name == "loopgate.js"
                && path
                    .parent()
                    .and_then(Path::parent)
                    .and_then(Path::file_name)
                    .is_some_and(|g| {
                        matches!(
                            g.to_str(),
                            Some("opencode" | "kilo" | ".opencode" | ".kilo")
                        )
                    })
        }
        _ => false,
    };
    if agent_file {
        return Some(Kind::AgentHooks);
    }
    if (parent == ".claude" && name.starts_with("settings") && name.ends_with(".json"))
        || name.starts_with("managed-settings")
        || path
            .components()
            .any(|c| c.as_os_str() == "managed-settings.d")
    {
        return Some(Kind::Settings);
    }
    None
}

/// Whether a file name is one loopgate's binary goes by. Such a name is the binary only where
/// the path is the installed one (see [`Env::hit`]): a crate, a branch, a docker tag or a build
/// output called `loopgate` is someone's work, not loopgate.
fn binary_name(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "loopgate" || n == "loopgate-hook")
}

pub use crate::config::paths::lexical;

/// Symlink resolution for one call, each path prefix looked up once: the protected paths share
/// most of their directories (home, the project, `.claude`), so resolving all of them costs one
/// `readlink` per distinct directory instead of one per component of each path (`cargo test`
/// made ~175 before).
#[derive(Debug, Clone, Default)]
struct Resolver {
    /// Lexical path (its bytes) → its canonical form, `None` when it does not exist.
    known: std::cell::RefCell<HashMap<Vec<u8>, Option<PathBuf>, Fnv>>,
}

/// FNV-1a over a path's bytes: a few dozen short keys per call, where `Path`'s own hash
/// (component by component, through SipHash) cost more than the lookups it saved.
type Fnv = std::hash::BuildHasherDefault<FnvHasher>;

#[derive(Default)]
struct FnvHasher(u64);

impl std::hash::Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Symlinks followed in one resolution, as the kernel's limit.
const MAX_HOPS: u32 = 40;
/// Longer paths are left to the OS (which refuses them) and not remembered.
const MAX_CACHED_PATH: usize = 4096;

/// `path.starts_with(dir)` for absolute, normalised paths, on their bytes: `Path::starts_with`
/// parses both into components, and the guard compares dozens of pairs per call.
fn under(path: &Path, dir: &Path) -> bool {
    let (p, d) = (key(path), key(dir));
    let sep = |b: u8| std::path::is_separator(char::from(b));
    p.starts_with(d) && (p.len() == d.len() || sep(p[d.len()]) || d.last().is_some_and(|&b| sep(b)))
}

fn key(p: &Path) -> &[u8] {
    p.as_os_str().as_encoded_bytes()
}

impl Resolver {
    /// Resolves an absolute, lexical `path`: the canonical form of its longest existing prefix,
    /// and the components after that prefix (empty when all of it exists). Starts from the
    /// nearest ancestor already resolved in this call, so paths sharing directories cost one
    /// lookup and at most a `readlink` each. The path is parsed once, front to back; its
    /// prefixes are looked up as slices of its bytes (a call resolves a few dozen paths, and
    /// climbing with `parent()` and growing a `PathBuf` per level cost more than the lookups).
    fn walk<'p>(&self, path: &'p Path, hops: u32) -> (PathBuf, Vec<&'p std::ffi::OsStr>) {
        use std::path::Component;
        let bytes = key(path);
        let sep = |b: u8| std::path::is_separator(char::from(b));
        // Each named component, with the length of the path up to its end.
        let mut names: Vec<(&'p std::ffi::OsStr, usize)> = Vec::with_capacity(16);
        let mut root = PathBuf::new();
        let mut end = 0;
        for c in path.components() {
            if !matches!(c, Component::RootDir) {
                while end < bytes.len() && sep(bytes[end]) {
                    end += 1;
                }
            }
            end += c.as_os_str().len();
            match c {
                Component::Prefix(_) | Component::RootDir => root.push(c),
                _ => names.push((c.as_os_str(), end)),
            }
        }
        let root_end = names.first().map_or(end, |(n, e)| e - n.len());
        // Climb to the nearest ancestor known to exist (or the root, as it is).
        let mut from = names.len();
        let mut canon = {
            let known = self.known.borrow();
            loop {
                let upto = from.checked_sub(1).map_or(root_end, |k| names[k].1);
                if let Some(Some(c)) = known.get(&bytes[..upto]) {
                    break c.clone();
                }
                if from == 0 {
                    break root;
                }
                from -= 1;
            }
        };
        for (k, &(name, upto)) in names.iter().enumerate().skip(from) {
            // Known prefixes are copied into `canon`'s own buffer, not cloned into a new one.
            let cached = self.known.borrow().get(&bytes[..upto]).map(|v| match v {
                Some(c) => {
                    canon.clone_from(c);
                    true
                }
                None => false,
            });
            let found = match cached {
                Some(found) => found,
                None => {
                    canon.push(name);
                    let found = match std::fs::read_link(&canon) {
                        Ok(target) if hops < MAX_HOPS => {
                            canon.pop();
                            let to = lexical(&canon.join(target));
                            match self.existing(&to, hops + 1) {
                                Some(c) => {
                                    canon = c;
                                    true
                                }
                                None => false,
                            }
                        }
                        Ok(_) => {
                            canon.pop();
                            false
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => true,
                        Err(_) => {
                            canon.pop();
                            false
                        }
                    };
                    let mut known = self.known.borrow_mut();
                    if known.capacity() == 0 {
                        // The protected paths' prefixes fill a few dozen entries: one
                        // allocation instead of growing (and rehashing) four times.
                        known.reserve(64);
                    }
                    known.insert(bytes[..upto].to_vec(), found.then(|| canon.clone()));
                    found
                }
            };
            if !found {
                return (canon, names[k..].iter().map(|(n, _)| *n).collect());
            }
        }
        (canon, Vec::new())
    }

    /// The canonical form of an absolute, lexical `path`, or `None` when it does not exist.
    fn existing(&self, path: &Path, hops: u32) -> Option<PathBuf> {
        if path.as_os_str().len() > MAX_CACHED_PATH {
            return std::fs::canonicalize(path).ok();
        }
        let (canon, rest) = self.walk(path, hops);
        rest.is_empty().then_some(canon)
    }

    /// The path with every symlink resolved, as far as it exists; the rest as written.
    fn resolve(&self, path: &Path) -> PathBuf {
        if path.as_os_str().len() > MAX_CACHED_PATH {
            return path.to_path_buf();
        }
        let (mut out, rest) = self.walk(path, 0);
        out.extend(rest);
        out
    }

    /// The path with its directories' symlinks resolved, the last component as written.
    fn resolve_parent(&self, path: &Path) -> PathBuf {
        match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => self.resolve(parent).join(name),
            _ => path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_folds_dots_and_slashes() {
        assert_eq!(lexical(Path::new("/a/./b//c/../d")), Path::new("/a/b/d"));
    }

    #[test]
    fn expansion_follows_the_shell() {
        let env = Env {
            home: Some("/h".into()),
            cwd: "/p".into(),
            vars: HashMap::from([("XDG_STATE_HOME".to_string(), "/h/st".to_string())]),
            ..Default::default()
        };
        let local = HashMap::from([("f".to_string(), "x.toml".to_string())]);
        assert_eq!(env.expand("~/.claude", &local), "/h/.claude");
        assert_eq!(env.expand("$HOME/a/${f}", &local), "/h/a/x.toml");
        assert_eq!(
            env.expand("${XDG_STATE_HOME:-/d}/loopgate", &local),
            "/h/st/loopgate"
        );
        assert_eq!(env.expand("${NOPE:-$HOME/.local}/x", &local), "/h/.local/x");
        assert_eq!(env.expand("$UNSET/x", &local), "/x");
        assert_eq!(env.expand("a$", &local), "a$");
    }
}
