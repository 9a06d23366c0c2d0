//! The layering of `src/` (docs/architecture.md), read from the code itself: every `crate::` path
//! in shipped code (comments and test modules left out) is an import. A layer may use its own
//! modules and the layers below it, never one above; and no modules may use each other in a
//! circle, inside a layer or across layers. Run alone with `cargo test --test integration layers`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers of `src/`, lowest first: the same order as `lib.rs` and docs/architecture.md.
const LAYERS: &[&str] = &[
    "util", "platform", "protocol", "cli", "config", "judge", "store", "setup", "defence",
    "replay", "hook", "cmd",
];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every shipped source file as (its unit, its code): the unit is `layer::module` for a file or
/// folder inside a layer, `layer` for the layer's own `mod.rs`.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for layer in LAYERS {
        walk(&src.join(layer), &mut |path| {
            let rel = path.strip_prefix(src.join(layer)).unwrap();
            let first = rel.components().next().unwrap().as_os_str();
            let first = first.to_str().unwrap().trim_end_matches(".rs");
            let unit = if first == "mod" {
                layer.to_string()
            } else {
                format!("{layer}::{first}")
            };
            out.push((unit, code_of(&std::fs::read_to_string(path).unwrap())));
        });
    }
    out
}

fn walk(dir: &Path, each: &mut dyn FnMut(&Path)) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, each);
        } else if p.extension().is_some_and(|e| e == "rs") {
            each(&p);
        }
    }
}

/// The code that ships: without the test module and without comments (doc links name modules
/// without using them).
fn code_of(text: &str) -> String {
    let shipped = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    shipped
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The units a piece of code uses, given every unit there is.
fn uses(code: &str, units: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let layer = ident(rest);
        if !LAYERS.contains(&layer) {
            continue;
        }
        let after = &rest[layer.len()..];
        let mut children = Vec::new();
        if let Some(group) = after.strip_prefix("::{") {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            children.extend(body.split(',').map(|item| ident(item.trim()).to_string()));
        } else if let Some(child) = after.strip_prefix("::") {
            children.push(ident(child).to_string());
        }
        let mut named = false;
        for c in children {
            let unit = format!("{layer}::{c}");
            if units.contains(&unit) {
                out.insert(unit);
                named = true;
            }
        }
        if !named {
            out.insert(layer.to_string());
        }
    }
    out
}

fn graph() -> Graph {
    let files = sources();
    let units: BTreeSet<String> = files.iter().map(|(u, _)| u.clone()).collect();
    let mut g = Graph::new();
    for (unit, code) in &files {
        let used = uses(code, &units);
        let entry = g.entry(unit.clone()).or_default();
        entry.extend(used.into_iter().filter(|u| u != unit));
    }
    g
}

fn layer_of(unit: &str) -> usize {
    let layer = unit.split("::").next().unwrap();
    LAYERS.iter().position(|l| *l == layer).unwrap()
}

/// Tarjan's strongly connected components with more than one unit: each is a circle.
fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn every_layer_uses_only_itself_and_the_layers_below() {
    let g = graph();
    let upward: Vec<String> = g
        .iter()
        .flat_map(|(from, to)| {
            to.iter()
                .filter(|t| layer_of(t) > layer_of(from))
                .map(move |t| format!("{from} -> {t}"))
        })
        .collect();
    assert!(
        upward.is_empty(),
        "imports from a lower layer to a higher one ({}):\n{}",
        LAYERS.join(" < "),
        upward.join("\n")
    );
}

#[test]
fn no_modules_use_each_other_in_a_circle() {
    let g = graph();
    let found = circles(&g);
    let told: Vec<String> = found
        .iter()
        .map(|c| {
            let pairs: Vec<String> = c
                .iter()
                .flat_map(|a| c.iter().map(move |b| (a, b)))
                .filter(|(a, b)| a < b && g[*a].contains(*b) && g[*b].contains(*a))
                .map(|(a, b)| format!("  {a} <-> {b}"))
                .collect();
            format!("circle: {}\n{}", c.join(", "), pairs.join("\n"))
        })
        .collect();
    assert!(found.is_empty(), "{}", told.join("\n"));
}

#[test]
fn the_check_sees_a_circle_and_an_upward_import() {
    // The checker itself: a made-up pair of modules that use each other, one from below.
    let units: BTreeSet<String> = ["store::journal", "store::lock", "judge::wait"]
        .map(String::from)
        .into();
    let mut g = Graph::new();
    g.insert(
        "store::journal".into(),
        uses("use crate::store::lock::x; use crate::judge::wait;", &units),
    );
    g.insert(
        "store::lock".into(),
        uses("crate::store::{journal, gc}", &units),
    );
    g.insert(
        "judge::wait".into(),
        uses("crate::util::canon::hex16()", &units),
    );
    assert_eq!(
        circles(&g),
        vec![vec![
            "store::journal".to_string(),
            "store::lock".to_string()
        ]]
    );
    assert!(layer_of("store::lock") > layer_of("judge::wait"));
    assert!(g["store::journal"].contains("judge::wait"));
    assert_eq!(g["judge::wait"], BTreeSet::from(["util".to_string()]));
    assert!(code_of("/// [`crate::store`]\nfn a() {}")
        .find("crate::")
        .is_none());
}

#[test]
fn every_folder_of_src_is_a_layer_of_the_list() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut listed: Vec<String> = LAYERS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        found, listed,
        "a folder of src/ that is no layer, or the reverse"
    );
    let top: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    let mut top = top;
    top.sort();
    assert_eq!(
        top,
        ["lib.rs", "main.rs"],
        "src/ holds only lib.rs and main.rs"
    );
}
