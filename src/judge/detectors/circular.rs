//! Circular dependencies (seed 001): after an Edit or Write of a source file, the imports among
//! project files are followed from that file; a path that comes back to it is a cycle, named in a
//! warning. Python (`import`, `from … import`) and JavaScript/TypeScript (relative `import`,
//! `export … from`, `require`) by default, where a cycle breaks at run time. Rust (`mod`,
//! `use crate::`) on request: cycles among Rust modules are legal and common, so flagging them by
//! default would only be noise.

use crate::config::Circular;
use crate::protocol::verdict::{Action, Severity, Verdict};
use regex::Regex;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub const NAME: &str = "circular";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    Script,
    Rust,
}

fn lang(path: &Path, cfg: &Circular) -> Option<Lang> {
    match path.extension()?.to_str()? {
        "py" => Some(Lang::Python),
        "js" | "jsx" | "ts" | "tsx" | "mjs" | "cjs" => Some(Lang::Script),
        "rs" if cfg.rust => Some(Lang::Rust),
        _ => None,
    }
}

fn patterns(l: Lang) -> &'static Regex {
    static PY: OnceLock<Regex> = OnceLock::new();
    static JS: OnceLock<Regex> = OnceLock::new();
    static RS: OnceLock<Regex> = OnceLock::new();
    match l {
        Lang::Python => PY.get_or_init(|| {
            Regex::new(r"(?m)^\s*(?:from\s+(?P<from>\.*[\w.]*)\s+import\s+(?P<names>[\w, ]+)|import\s+(?P<mods>[\w., ]+))")
                .expect("python import pattern")
        }),
        Lang::Script => JS.get_or_init(|| {
            Regex::new(r#"(?:import|export)[^'"`;]*?from\s*['"](?P<a>\.[^'"]+)['"]|import\s*['"](?P<b>\.[^'"]+)['"]|require\(\s*['"](?P<c>\.[^'"]+)['"]\s*\)"#)
                .expect("script import pattern")
        }),
        Lang::Rust => RS.get_or_init(|| {
            Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?(?:mod\s+(?P<m>\w+)\s*;|use\s+crate::(?P<u>\w+))")
                .expect("rust module pattern")
        }),
    }
}

fn existing(candidates: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    candidates
        .into_iter()
        .map(|p| crate::config::paths::lexical(&p))
        .find(|p| p.is_file())
}

fn python_module(root: &Path, base: &Path, dots: usize, module: &str) -> Option<PathBuf> {
    let start = if dots == 0 {
        root.to_path_buf()
    } else {
        let mut b = base.to_path_buf();
        for _ in 1..dots {
            b = b.parent()?.to_path_buf();
        }
        b
    };
    let rel: PathBuf = module.split('.').filter(|s| !s.is_empty()).collect();
    existing([
        start.join(&rel).with_extension("py"),
        start.join(&rel).join("__init__.py"),
    ])
}

/// Largest source file read for imports: a bigger one is not hand-written code.
pub const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// A project source file's text, if it is safe to read: a regular file (no FIFO, device or
/// socket, which could block or never end), at most [`MAX_SOURCE_BYTES`], and — when it is a
/// symlink or under one — resolving inside the project. A committed symlink to `/dev/zero` or
/// `/proc/self/pagemap` is refused, not read.
pub fn read_source(file: &Path, project: &Path) -> Option<String> {
    use std::io::Read;
    let real = std::fs::canonicalize(file).ok()?;
    let root = std::fs::canonicalize(project).ok()?;
    if !real.starts_with(&root) {
        return None;
    }
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_SOURCE_BYTES {
        return None;
    }
    // Never waits for a FIFO swapped in after the check.
    let mut f = crate::platform::open_read_nonblocking(&real).ok()?;
    // The file may have changed since the check: read no more than the cap whatever it is now.
    let mut bytes = Vec::new();
    f.by_ref()
        .take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES || !f.metadata().ok()?.file_type().is_file() {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Project files `file` imports.
fn imports(file: &Path, project: &Path, l: Lang) -> Vec<PathBuf> {
    let Some(text) = read_source(file, project) else {
        return Vec::new();
    };
    let dir = file.parent().unwrap_or(project);
    let mut out = Vec::new();
    for c in patterns(l).captures_iter(&text) {
        match l {
            Lang::Python => {
                let roots = [project.to_path_buf(), project.join("src")];
                if let Some(from) = c.name("from") {
                    let spec = from.as_str();
                    let dots = spec.len() - spec.trim_start_matches('.').len();
                    let module = &spec[dots..];
                    for root in &roots {
                        if let Some(p) = python_module(root, dir, dots, module) {
                            out.push(p);
                            break;
                        }
                        if dots > 0 {
                            break;
                        }
                    }
                    // `from pkg import module`: the names may be modules themselves.
                    for name in c["names"]
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                    {
                        let sub = if module.is_empty() {
                            name.to_string()
                        } else {
                            format!("{module}.{name}")
                        };
                        let found = if dots > 0 {
                            python_module(project, dir, dots, &sub)
                        } else {
                            roots.iter().find_map(|r| python_module(r, dir, 0, &sub))
                        };
                        out.extend(found);
                    }
                } else if let Some(mods) = c.name("mods") {
                    for m in mods.as_str().split(',') {
                        let m = m.split_whitespace().next().unwrap_or("");
                        out.extend(roots.iter().find_map(|r| python_module(r, dir, 0, m)));
                    }
                }
            }
            Lang::Script => {
                let spec = ["a", "b", "c"]
                    .iter()
                    .find_map(|n| c.name(n))
                    .map(|m| m.as_str());
                if let Some(spec) = spec {
                    let base = dir.join(spec);
                    let exts = ["ts", "tsx", "js", "jsx", "mjs", "cjs"];
                    let mut cands = vec![base.clone()];
                    cands.extend(
                        exts.iter()
                            .map(|e| PathBuf::from(format!("{}.{e}", base.display()))),
                    );
                    cands.extend(exts.iter().map(|e| base.join(format!("index.{e}"))));
                    out.extend(existing(cands));
                }
            }
            Lang::Rust => {
                if let Some(m) = c.name("m") {
                    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                    let owner = if matches!(stem, "lib" | "main" | "mod") {
                        dir.to_path_buf()
                    } else {
                        dir.join(stem)
                    };
                    out.extend(existing([
                        owner.join(format!("{}.rs", m.as_str())),
                        owner.join(m.as_str()).join("mod.rs"),
                    ]));
                } else if let Some(u) = c.name("u") {
                    let crate_src = file
                        .ancestors()
                        .find(|a| a.join("Cargo.toml").is_file())
                        .map(|a| a.join("src"));
                    if let Some(src) = crate_src {
                        out.extend(existing([
                            src.join(format!("{}.rs", u.as_str())),
                            src.join(u.as_str()).join("mod.rs"),
                        ]));
                    }
                }
            }
        }
    }
    out.retain(|p| p.starts_with(project) && p != file);
    out.sort();
    out.dedup();
    out
}

/// The shortest import chain from `edited` back to itself, as paths relative to the project.
pub fn find_cycle(project: &Path, edited: &Path, cfg: &Circular) -> Option<Vec<String>> {
    let l = lang(edited, cfg)?;
    let start = edited.to_path_buf();
    let mut parent: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut seen: HashSet<PathBuf> = HashSet::from([start.clone()]);
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    while let Some(f) = queue.pop_front() {
        if seen.len() > cfg.max_files {
            return None;
        }
        for next in imports(&f, project, l) {
            if next == start {
                let mut chain = vec![f.clone()];
                while let Some(p) = parent.get(chain.last()?) {
                    chain.push(p.clone());
                }
                chain.reverse();
                chain.push(start.clone());
                let rel = |p: &PathBuf| p.strip_prefix(project).unwrap_or(p).display().to_string();
                return Some(chain.iter().map(rel).collect());
            }
            if seen.insert(next.clone()) {
                parent.insert(next.clone(), f.clone());
                queue.push_back(next);
            }
        }
    }
    None
}

pub fn check(project: &Path, edited: &Path, cfg: &Circular) -> Option<(String, Verdict)> {
    if !cfg.enabled || !edited.starts_with(project) {
        return None;
    }
    let chain = find_cycle(project, edited, cfg)?;
    let named = chain.join(" → ");
    let reason = format!(
        "loopgate: this change closes a circular import: {named}. Break the cycle before going on: move the shared \
         code into its own module, import lazily where it is used, or invert the dependency — and ask whether the \
         current approach is the right one."
    );
    let verdict =
        Verdict::new(NAME, Action::Warn, Severity::Medium, reason).with("chain", chain.clone());
    Some((named, verdict))
}

/// After a source file changed: a new import cycle through it is named once.
pub fn on_answer(a: &mut super::Answer) -> Option<Verdict> {
    let changed_files = crate::protocol::tool::ToolClass::of(a.tool).changes_files();
    if a.status != crate::judge::ledger::Status::Ok || !changed_files {
        return None;
    }
    let project = a.project_dir?;
    let file = a
        .input
        .get("file_path")
        .or_else(|| a.input.get("notebook_path"))
        .and_then(serde_json::Value::as_str)?;
    let (named, verdict) = check(project, Path::new(file), &a.config.detectors.circular)?;
    let agent = &mut *a.agent;
    if agent.cycles_named.iter().any(|c| *c == named) {
        return None;
    }
    if agent.cycles_named.len() >= 16 {
        agent.cycles_named.pop_front();
    }
    agent.cycles_named.push_back(named);
    Some(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn python_and_script_cycles_are_named() {
        let d = tempfile::tempdir().unwrap();
        let cfg = Circular::default();
        write(d.path(), "app/a.py", "from app.b import helper\n");
        write(d.path(), "app/b.py", "import os\nfrom .c import thing\n");
        let c = write(
            d.path(),
            "app/c.py",
            "from app import a\nfrom app.a import x\n",
        );
        write(d.path(), "app/__init__.py", "");
        let chain = find_cycle(d.path(), &c, &cfg).expect("cycle");
        assert_eq!(chain, ["app/c.py", "app/a.py", "app/b.py", "app/c.py"]);
        write(d.path(), "web/x.ts", "import { y } from './y';\n");
        let y = write(d.path(), "web/y.ts", "const x = require('./x');\n");
        assert_eq!(
            find_cycle(d.path(), &y, &cfg).unwrap(),
            ["web/y.ts", "web/x.ts", "web/y.ts"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn hostile_import_targets_are_refused_not_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        write(
            p,
            "a.py",
            "import zero\nimport fifo\nimport big\nimport outside\n",
        );
        std::os::unix::fs::symlink("/dev/zero", p.join("zero.py")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "o.py", "import a\n");
        std::os::unix::fs::symlink(outside.path().join("o.py"), p.join("outside.py")).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(p.join("fifo.py"))
            .status()
            .unwrap()
            .success());
        let big = std::fs::File::create(p.join("big.py")).unwrap();
        big.set_len(1 << 30).unwrap();
        for name in ["zero.py", "fifo.py", "big.py", "outside.py"] {
            assert!(read_source(&p.join(name), p).is_none(), "{name} was read");
        }
        assert!(read_source(&p.join("a.py"), p).is_some());
        let cfg = Circular::default();
        assert!(find_cycle(p, &p.join("a.py"), &cfg).is_none());
    }

    #[test]
    fn a_tree_of_imports_is_fine_and_rust_is_opt_in() {
        let d = tempfile::tempdir().unwrap();
        let cfg = Circular::default();
        write(d.path(), "a.py", "import b\n");
        let b = write(d.path(), "b.py", "import c\n");
        write(d.path(), "c.py", "import os\n");
        assert!(find_cycle(d.path(), &b, &cfg).is_none());
        write(d.path(), "Cargo.toml", "[package]\n");
        write(d.path(), "src/lib.rs", "mod a;\nmod b;\n");
        write(d.path(), "src/a.rs", "use crate::b::f;\n");
        let rb = write(d.path(), "src/b.rs", "use crate::a::g;\n");
        assert!(find_cycle(d.path(), &rb, &cfg).is_none());
        let rust = Circular { rust: true, ..cfg };
        assert_eq!(
            find_cycle(d.path(), &rb, &rust).unwrap(),
            ["src/b.rs", "src/a.rs", "src/b.rs"]
        );
    }
}
