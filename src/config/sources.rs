//! Loading the configuration: one schema (the serde structs in [`crate::config`]) for files,
//! environment variables and flags.
//!
//! Each source is parsed to a `toml::Value` on its own and checked against the schema alone:
//! an unknown key, a wrong type or a bad value costs that one setting (named with its file and
//! line, or its variable, and the nearest valid key), never the rest of the file or the other
//! files. A file that is not TOML at all costs that file. The surviving settings are merged leaf
//! by leaf — defaults, then the user file (or the one `--config`/`LOOPGATE_CONFIG` file), the
//! project file, the environment, the flags — recording where each leaf came from; the project
//! file may only tighten (see [`crate::config::tighten`]). The merged value is deserialised once.
//!
//! Hand-written over a layering crate such as `figment` because what is needed beyond plain
//! serde is small (a schema walk, spans for line numbers, a direction check for project files),
//! and figment's errors name neither the nearest key nor the line, and it cannot drop one bad
//! leaf while keeping the rest of its file.

use crate::config::{leaves, project_config_file, Config, Sources};
use crate::platform::bounded;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// Where one setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum Origin {
    Default,
    UserFile {
        file: PathBuf,
        line: usize,
    },
    ProjectFile {
        file: PathBuf,
        line: usize,
    },
    /// The one file named by `--config` or `LOOPGATE_CONFIG` (`via`).
    ConfigFile {
        file: PathBuf,
        line: usize,
        via: String,
    },
    Env {
        var: String,
    },
    Flag {
        flag: String,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => write!(f, "default"),
            Origin::UserFile { file, line } => write!(f, "user file {}:{line}", file.display()),
            Origin::ProjectFile { file, line } => {
                write!(f, "project file {}:{line}", file.display())
            }
            Origin::ConfigFile { file, line, via } => {
                write!(f, "config file ({via}) {}:{line}", file.display())
            }
            Origin::Env { var } => write!(f, "env {var}"),
            Origin::Flag { flag } => write!(f, "flag {flag}"),
        }
    }
}

/// The detector names the log uses: the last part of every table with an `enabled` switch
/// (`[detectors.repeat]` is `repeat`, `[breaker]` is `breaker`).
pub fn detector_names() -> impl Iterator<Item = String> {
    leaves(&schema())
        .into_iter()
        .filter_map(|(p, _)| {
            let table = p.strip_suffix(".enabled")?;
            Some(table.rsplit('.').next().unwrap_or(table).to_string())
        })
        .collect::<Vec<_>>()
        .into_iter()
}

/// The config table (dotted path) that configures the detector logged as `detector`.
pub fn detector_table(detector: &str) -> Option<String> {
    let schema = schema();
    [format!("detectors.{detector}"), detector.to_string()]
        .into_iter()
        .find(|candidate| get(&schema, candidate).is_some_and(Value::is_table))
}

/// The settings of the table that configures `detector`, as JSON (for the event log).
pub fn thresholds(cfg: &Config, detector: &str) -> Option<serde_json::Value> {
    let table = detector_table(detector)?;
    let tree = Value::try_from(cfg).ok()?;
    serde_json::to_value(get(tree.as_table()?, &table)?).ok()
}

/// The schema as a TOML tree: every setting with its default value.
pub fn schema() -> Table {
    match Value::try_from(Config::default()) {
        Ok(Value::Table(t)) => t,
        _ => Table::new(),
    }
}

/// A value at a dotted path.
pub fn get<'a>(t: &'a Table, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut v = t.get(parts.next()?)?;
    for p in parts {
        v = v.as_table()?.get(p)?;
    }
    Some(v)
}

fn set(t: &mut Table, path: &str, value: Value) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap_or_default();
    let mut cur = t;
    for p in parts {
        let entry = cur
            .entry(p.to_string())
            .or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        cur = entry.as_table_mut().expect("made a table above");
    }
    cur.insert(last.to_string(), value);
}

fn remove(t: &mut Table, path: &str) {
    match path.split_once('.') {
        None => {
            t.remove(path);
        }
        Some((head, rest)) => {
            if let Some(Value::Table(sub)) = t.get_mut(head) {
                remove(sub, rest);
                if sub.is_empty() {
                    t.remove(head);
                }
            }
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// One source, parsed: its settings and where each came from.
struct Layer {
    table: Table,
    kind: Kind,
    /// The file's text (files only), parsed again for line numbers only when they are needed.
    text: String,
    /// Line of each key path in the file (files only).
    lines: std::cell::OnceCell<HashMap<String, usize>>,
    /// Variable or flag of each key path (environment and flags only).
    names: HashMap<String, String>,
}

#[derive(Clone)]
enum Kind {
    User(PathBuf),
    Project(PathBuf),
    Explicit(PathBuf, String),
    Env,
    Flag,
}

impl Layer {
    fn line(&self, path: &str) -> usize {
        let lines = self.lines.get_or_init(|| {
            let mut lines = HashMap::new();
            if let Ok(spanned) = toml::de::DeTable::parse(&self.text) {
                key_lines(spanned.get_ref(), "", &self.text, &mut lines);
            }
            lines
        });
        let mut p = path;
        loop {
            if let Some(l) = lines.get(p) {
                return *l;
            }
            match p.rsplit_once('.') {
                Some((parent, _)) => p = parent,
                None => return 1,
            }
        }
    }

    fn origin(&self, path: &str) -> Origin {
        let line = self.line(path);
        match &self.kind {
            Kind::User(f) => Origin::UserFile {
                file: f.clone(),
                line,
            },
            Kind::Project(f) => Origin::ProjectFile {
                file: f.clone(),
                line,
            },
            Kind::Explicit(f, via) => Origin::ConfigFile {
                file: f.clone(),
                line,
                via: via.clone(),
            },
            Kind::Env => Origin::Env {
                var: self.names.get(path).cloned().unwrap_or_default(),
            },
            Kind::Flag => Origin::Flag {
                flag: self.names.get(path).cloned().unwrap_or_default(),
            },
        }
    }

    /// How a problem with the setting at `path` names its place: `file:line` or the variable.
    fn place(&self, path: &str) -> String {
        match &self.kind {
            Kind::User(f) | Kind::Project(f) | Kind::Explicit(f, _) => {
                format!("{}:{}", f.display(), self.line(path))
            }
            Kind::Env | Kind::Flag => self.names.get(path).cloned().unwrap_or_default(),
        }
    }
}

pub fn load(src: &Sources) -> Loaded {
    let mut problems = Vec::new();
    let mut missing_explicit = None;

    let mut layers = Vec::new();
    let explicit = match (src.flag_file, &src.env_file) {
        (Some(f), _) => Some((f.to_path_buf(), "--config")),
        (None, Some(f)) => Some((f.clone(), "LOOPGATE_CONFIG")),
        (None, None) => None,
    };
    match explicit {
        Some((file, via)) => {
            match file_layer(
                Kind::Explicit(file.clone(), via.into()),
                None,
                &mut problems,
            ) {
                Some(l) => layers.push(l),
                None if !file.exists() => {
                    problems.push(format!(
                        "config file {} (from {via}) does not exist; the user and project files \
                         are not read while {via} is set, so defaults apply",
                        file.display()
                    ));
                    missing_explicit = Some(file);
                }
                None => {}
            }
        }
        None => {
            if let Some(user) = &src.user_file {
                layers.extend(file_layer(Kind::User(user.clone()), None, &mut problems));
            }
            if let Some(dir) = src.project_dir {
                let file = project_config_file(dir);
                layers.extend(file_layer(Kind::Project(file), Some(dir), &mut problems));
            }
        }
    }
    let env_settings = src.env_mode.is_some()
        || src
            .env
            .iter()
            .any(|(k, _)| !OTHER_VARS.contains(&k.as_str()) || k == "LOOPGATE_DISABLE");
    // The common hook call: no file, no setting in the environment, no flag. Nothing to merge.
    if layers.is_empty() && !env_settings && !src.flag_observe && !src.provenance {
        return Loaded {
            config: Config::default(),
            problems,
            origins: BTreeMap::new(),
            effective: None,
            missing_explicit,
            env_ignored: src.ignored.clone(),
        };
    }

    // Only a user (or --config) file and flags: the file is right almost always, and then one
    // deserialisation of it alone (serde fills in the defaults) is all a hook call needs.
    let project = layers.iter().any(|l| matches!(l.kind, Kind::Project(_)));
    if !env_settings && !src.provenance && !project {
        let mut partial = Table::new();
        for layer in &layers {
            overlay(&mut partial, &layer.table);
        }
        if src.flag_observe {
            partial.insert("mode".into(), Value::String("observe".into()));
        }
        if let Ok(config) = Config::deserialize(Value::Table(partial)) {
            return Loaded {
                config,
                problems,
                origins: BTreeMap::new(),
                effective: None,
                missing_explicit,
                env_ignored: src.ignored.clone(),
            };
        }
    }

    let schema = schema();
    layers.push(env_layer(src, &schema, &mut problems));
    let mut flags = Layer {
        table: Table::new(),
        kind: Kind::Flag,
        text: String::new(),
        lines: std::cell::OnceCell::new(),
        names: HashMap::new(),
    };
    if src.flag_observe {
        flags
            .table
            .insert("mode".into(), Value::String("observe".into()));
        flags.names.insert("mode".into(), "--observe".into());
    }
    layers.push(flags);
    layers.retain(|l| !l.table.is_empty());

    // Unknown keys everywhere; types up front only for the project file, whose settings are
    // then compared with what is in effect. The others are type-checked only if the merged
    // value does not deserialise (the rare case), to keep a hook call cheap.
    for layer in layers.iter_mut() {
        let project = matches!(layer.kind, Kind::Project(_));
        validate(layer, &schema, project, &mut problems);
    }
    let mut merged = schema.clone();
    let mut env_ignored = src.ignored.clone();
    for layer in layers.iter_mut() {
        if let (Kind::Env, true) = (&layer.kind, src.hook) {
            // A hook's environment may only tighten, by the project file's rules.
            for (path, wanted) in leaves(&layer.table.clone()) {
                if crate::config::tighten::check(&path, get(&merged, &path), wanted).is_err() {
                    let var = layer.names.get(&path).cloned().unwrap_or_default();
                    let shown = match wanted {
                        Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    env_ignored.push(format!("{var}={shown}"));
                    remove(&mut layer.table, &path);
                }
            }
        }
        if let Kind::Project(_) = &layer.kind {
            for (path, wanted) in leaves(&layer.table.clone()) {
                if let Err(why) = crate::config::tighten::check(&path, get(&merged, &path), wanted)
                {
                    problems.push(format!(
                        "{}: `{path} = {wanted}` ignored: a project file may only tighten \
                         loopgate, and {why}; set it in the user file {} instead",
                        layer.place(&path),
                        crate::config::user_config_file()
                            .map(|p| p.display().to_string())
                            .unwrap_or_else(|| "(no home)".into()),
                    ));
                    remove(&mut layer.table, &path);
                }
            }
        }
        overlay(&mut merged, &layer.table);
    }
    // The merged tree is kept only when provenance is asked for; a hook call moves it.
    let attempt = if src.provenance {
        Config::deserialize(Value::Table(merged.clone()))
    } else {
        Config::deserialize(Value::Table(std::mem::take(&mut merged)))
    };
    let config = match attempt {
        Ok(c) => c,
        Err(_) => {
            for layer in layers.iter_mut() {
                if !matches!(layer.kind, Kind::Project(_)) {
                    validate(layer, &schema, true, &mut problems);
                }
            }
            merged = schema.clone();
            for layer in &layers {
                overlay(&mut merged, &layer.table);
            }
            match Config::deserialize(Value::Table(merged.clone())) {
                Ok(c) => c,
                Err(e) => {
                    problems.push(format!(
                        "the merged configuration is invalid ({}); using defaults",
                        one_line(e.message())
                    ));
                    Config::default()
                }
            }
        }
    };
    let mut config = config;
    limits(&mut config, &mut merged, &mut problems);
    let mut origins = BTreeMap::new();
    if src.provenance {
        origins.extend(
            leaves(&schema)
                .into_iter()
                .map(|(p, _)| (p, Origin::Default)),
        );
        for layer in &layers {
            for (path, _) in leaves(&layer.table) {
                let origin = layer.origin(&path);
                origins.insert(path, origin);
            }
        }
    }
    Loaded {
        config,
        problems,
        origins,
        effective: Some(merged),
        missing_explicit,
        env_ignored,
    }
}

/// Values serde takes that loopgate cannot honour as written: the value in effect is put in
/// `config` and in `merged` (which `loopgate config` shows), with a problem saying so.
fn limits(config: &mut Config, merged: &mut Table, problems: &mut Vec<String>) {
    let max = crate::config::MAX_LOCK_WAIT_MS;
    if config.lock_timeout_ms > max {
        problems.push(format!(
            "lock_timeout_ms = {}: a hook waits at most {max} ms for the session lock, \
             so {max} is in effect",
            config.lock_timeout_ms
        ));
        config.lock_timeout_ms = max;
        if merged.contains_key("lock_timeout_ms") {
            set(merged, "lock_timeout_ms", Value::Integer(max as i64));
        }
    }
    // 0 or 1 reads as "never" or "at once", but a family is one answer from two calls at the
    // least: said, and the default put in effect, rather than a quiet 2.
    let defaults = crate::config::Stagnation::default();
    for (key, value, default) in [
        (
            "warn_at",
            &mut config.detectors.stagnation.warn_at,
            defaults.warn_at,
        ),
        (
            "deny_at",
            &mut config.detectors.stagnation.deny_at,
            defaults.deny_at,
        ),
    ] {
        if *value < 2 {
            problems.push(format!(
                "detectors.stagnation.{key} = {value}: the least it can be is 2 (two calls with one \
                 answer); to switch the detector off, set detectors.stagnation.enabled = false. \
                 {default} is in effect"
            ));
            *value = default;
            let path = format!("detectors.stagnation.{key}");
            if get(merged, &path).is_some() {
                set(merged, &path, Value::Integer(default as i64));
            }
        }
    }
    budget_limits(&mut config.budget, merged, problems);
    let s = &config.detectors.stagnation;
    if s.enabled && s.warn_at >= s.deny_at {
        problems.push(format!(
            "detectors.stagnation.warn_at = {} is not below deny_at = {}: the refusal comes \
             first, so its warning never shows",
            s.warn_at, s.deny_at
        ));
    }
}

/// A budget's figures that cannot mean what they say (a negative bound, a warning past the
/// bound): the default is put in effect and the person told.
fn budget_limits(b: &mut crate::config::Budget, merged: &mut Table, problems: &mut Vec<String>) {
    let d = crate::config::Budget::default();
    for (key, value, default) in [
        ("session_usd", &mut b.session_usd, d.session_usd),
        ("day_usd", &mut b.day_usd, d.day_usd),
        ("warn_at", &mut b.warn_at, d.warn_at),
    ] {
        let bad = !value.is_finite() || *value < 0.0 || (key == "warn_at" && *value > 1.0);
        if bad {
            problems.push(format!(
                "budget.{key} = {value}: {} ; {default} is in effect",
                if key == "warn_at" {
                    "a fraction of the budget, from 0 to 1"
                } else {
                    "a bound in US dollars cannot be negative"
                }
            ));
            *value = default;
            let path = format!("budget.{key}");
            if get(merged, &path).is_some() {
                set(merged, &path, Value::Float(default));
            }
        }
    }
}

fn overlay(merged: &mut Table, over: &Table) {
    for (path, v) in leaves(over) {
        set(merged, &path, v.clone());
    }
}

/// Reads and parses one config file. A file that cannot be read or is not TOML is reported
/// and skipped whole; a missing file is simply absent.
fn file_layer(kind: Kind, inside: Option<&Path>, problems: &mut Vec<String>) -> Option<Layer> {
    let (file, what) = match &kind {
        Kind::User(f) => (f, "user config"),
        Kind::Project(f) => (f, "project config"),
        Kind::Explicit(f, _) => (f, "config file"),
        Kind::Env | Kind::Flag => return None,
    };
    let text = match bounded::read_text(file, inside, bounded::MAX_CONFIG_BYTES) {
        Ok(Some(t)) => t,
        Ok(None) => return None,
        Err(why) => {
            problems.push(format!("{what} {} {why}; ignored", file.display()));
            return None;
        }
    };
    let table = match text.parse::<Table>() {
        Ok(t) => t,
        Err(e) => {
            let line = e.span().map(|s| line_of(&text, s.start)).unwrap_or(1);
            problems.push(format!(
                "{}:{line}: not valid TOML ({}); the whole file is ignored",
                file.display(),
                one_line(e.message())
            ));
            return None;
        }
    };
    Some(Layer {
        table,
        kind,
        text,
        lines: std::cell::OnceCell::new(),
        names: HashMap::new(),
    })
}

fn key_lines(t: &toml::de::DeTable, prefix: &str, text: &str, out: &mut HashMap<String, usize>) {
    for (k, v) in t {
        let path = join(prefix, k.get_ref());
        out.entry(path.clone())
            .or_insert_with(|| line_of(text, k.span().start));
        if let toml::de::DeValue::Table(sub) = v.get_ref() {
            key_lines(sub, &path, text, out);
        }
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Variables that are loopgate's but name no setting.
const OTHER_VARS: &[&str] = &[
    "LOOPGATE_DISABLE",
    "LOOPGATE_STATE_DIR",
    "LOOPGATE_CONFIG",
    "LOOPGATE_BIN_DIR",
    // The binary the Agent SDK helpers run (docs/agent-sdk.md).
    "LOOPGATE_BIN",
];

/// Whether loopgate reads `name` at all: one of its own variables, or one naming a setting or a
/// table of settings. Test and benchmark knobs share the prefix (`LOOPGATE_E2E_SKIP`,
/// `LOOPGATE_BENCH_RUNS`) and switch nothing; a near miss (`LOOPGATE_DISABLED`) is ignored too.
pub fn is_loopgate_var(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("LOOPGATE_") else {
        return false;
    };
    if OTHER_VARS.contains(&name) {
        return true;
    }
    let top = rest.split("__").next().unwrap_or(rest).to_lowercase();
    schema().contains_key(&top)
}

/// `LOOPGATE_MODE`, `LOOPGATE_LOCK_TIMEOUT_MS`, `LOOPGATE_DEDUP__MAX_IDENTICAL`: the setting's
/// path in capitals after `LOOPGATE_`, tables separated by `__`.
pub fn env_var_for(path: &str) -> String {
    format!("LOOPGATE_{}", path.replace('.', "__").to_uppercase())
}

fn env_layer(src: &Sources, schema: &Table, problems: &mut Vec<String>) -> Layer {
    let mut layer = Layer {
        table: Table::new(),
        kind: Kind::Env,
        text: String::new(),
        lines: std::cell::OnceCell::new(),
        names: HashMap::new(),
    };
    let mut vars: Vec<(String, String)> = src.env.clone();
    if let Some(m) = &src.env_mode {
        vars.push(("LOOPGATE_MODE".into(), m.clone()));
    }
    let all_paths: Vec<String> = leaves(schema).into_iter().map(|(p, _)| p).collect();
    for (var, raw) in vars {
        let Some(rest) = var.strip_prefix("LOOPGATE_") else {
            continue;
        };
        if OTHER_VARS.contains(&var.as_str()) {
            if var == "LOOPGATE_DISABLE" && parse_bool(&raw).is_none() {
                problems.push(format!(
                    "{var}={raw:?} is not a boolean (use 1/true/yes/on or 0/false/no/off); \
                     loopgate stays on"
                ));
            }
            continue;
        }
        let path = rest.to_lowercase().replace("__", ".");
        let is_setting = rest.contains("__") || schema.get(&path).is_some();
        if !is_setting {
            // Test and benchmark knobs share the prefix; warn only about a near miss.
            let known = OTHER_VARS
                .iter()
                .map(|v| v.to_string())
                .chain(all_paths.iter().map(|p| env_var_for(p)));
            if let Some(best) = nearest(&var, known) {
                problems.push(format!(
                    "{var} is not a loopgate variable (did you mean {best}?); ignored"
                ));
            }
            continue;
        }
        let value = match get(schema, &path) {
            None => {
                let hint = nearest(&var, all_paths.iter().map(|p| env_var_for(p)))
                    .map(|b| format!(" (did you mean {b}?)"))
                    .unwrap_or_default();
                problems.push(format!("{var} names no setting{hint}; ignored"));
                continue;
            }
            Some(Value::Table(_)) => {
                problems.push(format!(
                    "{var} names the table [{path}], not a setting; ignored"
                ));
                continue;
            }
            Some(Value::Boolean(_)) => match parse_bool(&raw) {
                Some(b) => Value::Boolean(b),
                None => {
                    problems.push(format!(
                        "{var}={raw:?} is not a boolean (use 1/true/yes/on or 0/false/no/off); ignored"
                    ));
                    continue;
                }
            },
            Some(Value::Integer(_)) => match raw.trim().parse::<i64>() {
                Ok(i) => Value::Integer(i),
                Err(_) => {
                    problems.push(format!("{var}={raw:?} is not a whole number; ignored"));
                    continue;
                }
            },
            Some(Value::Float(_)) => match raw.trim().parse::<f64>() {
                Ok(f) => Value::Float(f),
                Err(_) => {
                    problems.push(format!("{var}={raw:?} is not a number; ignored"));
                    continue;
                }
            },
            Some(Value::Array(_)) => Value::Array(
                raw.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| Value::String(s.to_string()))
                    .collect(),
            ),
            Some(_) => Value::String(raw.trim().to_string()),
        };
        set(&mut layer.table, &path, value);
        layer.names.insert(path, var);
    }
    layer
}

/// `1/true/yes/on` and `0/false/no/off` (any case; empty is off).
pub fn parse_bool(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "" | "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// A boolean environment variable: `Ok(false)` when unset; `Err` with the one-line problem
/// when it holds something that is not a boolean.
pub fn env_flag(name: &str) -> Result<bool, String> {
    match std::env::var(name) {
        Err(_) => Ok(false),
        Ok(v) => parse_bool(&v).ok_or_else(|| {
            format!("{name}={v:?} is not a boolean (use 1/true/yes/on or 0/false/no/off); ignored")
        }),
    }
}

/// Drops every setting of `layer` the schema does not know (and, with `types`, every one it will
/// not take), with a problem each.
fn validate(layer: &mut Layer, schema: &Table, types: bool, problems: &mut Vec<String>) {
    let mut bad: Vec<(String, String)> = Vec::new();
    unknown_keys(&layer.table, schema, schema, "", &mut bad);
    for (path, _) in &bad {
        remove(&mut layer.table, path);
    }
    // One trial for the whole layer; one per leaf only when it fails, to find the culprits.
    if types && trial(schema, &layer.table).is_err() {
        for (path, v) in leaves(&layer.table.clone()) {
            let mut one = Table::new();
            set(&mut one, &path, v.clone());
            if let Err(e) = trial(schema, &one) {
                bad.push((path.clone(), format!("`{path} = {v}`: {e}")));
                remove(&mut layer.table, &path);
            }
        }
    }
    for (path, msg) in bad {
        problems.push(format!("{}: {msg}; ignored", layer.place(&path)));
    }
}

/// Deserialises the schema's defaults overlaid with `over`.
fn trial(schema: &Table, over: &Table) -> Result<(), String> {
    let mut t = schema.clone();
    for (path, v) in leaves(over) {
        set(&mut t, &path, v.clone());
    }
    Config::deserialize(Value::Table(t))
        .map(|_| ())
        .map_err(|e| crate::util::words::plain(&one_line(e.message())))
}

fn unknown_keys(
    t: &Table,
    schema_here: &Table,
    schema: &Table,
    prefix: &str,
    bad: &mut Vec<(String, String)>,
) {
    for (k, v) in t {
        let path = join(prefix, k);
        match (schema_here.get(k), v) {
            (Some(Value::Table(sub)), Value::Table(vt)) => {
                unknown_keys(vt, sub, schema, &path, bad)
            }
            (Some(Value::Table(_)), _) => bad.push((
                path.clone(),
                format!("`{path}` is a table ([{path}]), not a single value"),
            )),
            (Some(_), _) => {}
            (None, _) => {
                let mut one = Table::new();
                set(&mut one, &path, v.clone());
                if trial(schema, &one).is_ok() {
                    continue; // a setting serde takes that the defaults do not show
                }
                let what = if v.is_table() { "table" } else { "key" };
                let hint = hint(schema, schema_here, prefix, k)
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default();
                bad.push((path.clone(), format!("unknown {what} `{path}`{hint}")));
            }
        }
    }
}

/// The nearest valid key for an unknown one: a sibling spelled alike, or the same name
/// elsewhere.
fn hint(schema: &Table, siblings: &Table, prefix: &str, key: &str) -> Option<String> {
    if let Some(best) = nearest(key, siblings.keys().cloned()) {
        return Some(format!("did you mean `{}`?", join(prefix, &best)));
    }
    let mut elsewhere: Vec<String> = Vec::new();
    fn walk(t: &Table, prefix: &str, key: &str, out: &mut Vec<String>) {
        for (k, v) in t {
            let path = join(prefix, k);
            if k == key {
                out.push(path.clone());
            }
            if let Value::Table(sub) = v {
                walk(sub, &path, key, out);
            }
        }
    }
    walk(schema, "", key, &mut elsewhere);
    elsewhere.first().map(|p| format!("did you mean `{p}`?"))
}

/// The candidate closest to `word` in edit distance, if it is close enough to be a typo.
fn nearest(word: &str, candidates: impl Iterator<Item = String>) -> Option<String> {
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .map(|c| (strsim::damerau_levenshtein(word, &c), c))
        .filter(|(d, _)| *d <= limit && *d > 0)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The loaded config, where each value came from, and one line per problem found.
pub struct Loaded {
    pub config: Config,
    pub problems: Vec<String>,
    /// Per leaf (`detectors.repeat.success`), where its value came from (empty when nothing
    /// overrode the defaults and provenance was not asked for).
    pub origins: std::collections::BTreeMap<String, Origin>,
    /// The effective configuration as a TOML tree (what `loopgate config` prints); `None` unless
    /// [`Sources::provenance`] was set (an empty table would cost a hook call a random hash key).
    pub effective: Option<toml::Table>,
    /// An explicit config file (`--config`, `LOOPGATE_CONFIG`) that does not exist.
    pub missing_explicit: Option<PathBuf>,
    /// In a hook ([`Sources::hook`]): the variables of its environment that would have loosened
    /// loopgate, as `NAME=value`, ignored.
    pub env_ignored: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Mode, When};

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn with_files(user: &str, project: &str) -> (tempfile::TempDir, Loaded) {
        let d = tempfile::tempdir().unwrap();
        let user = write(d.path(), "user.toml", user);
        let proj = d.path().join("proj");
        write(&proj, ".claude/loopgate.toml", project);
        let loaded = load(&Sources {
            project_dir: Some(&proj),
            user_file: Some(user),
            ..Default::default()
        });
        (d, loaded)
    }

    #[test]
    fn a_typo_is_named_with_file_line_and_the_nearest_key() {
        let (d, l) = with_files("mode = \"observe\"\n[detectors.repeat]\nsucces = 5\n", "");
        let user = d.path().join("user.toml");
        assert_eq!(
            l.problems,
            [format!(
                "{}:3: unknown key `detectors.repeat.succes` (did you mean `detectors.repeat.success`?); ignored",
                user.display()
            )]
        );
        assert_eq!(l.config.mode, Mode::Observe, "the rest of the file stays");
    }

    #[test]
    fn unknown_tables_and_detector_names_get_a_hint() {
        let (_d, l) = with_files(
            "[detectors.repat]\nsuccess = 2\n[detectors.failures]\nenabled = false\n[detectors.foobar]\nx = 1\n",
            "",
        );
        assert_eq!(l.problems.len(), 3, "{:?}", l.problems);
        assert!(l.problems[0]
            .contains(":1: unknown table `detectors.repat` (did you mean `detectors.repeat`?)"));
        assert!(
            l.problems[1]
                .contains(":3: unknown table `detectors.failures` (did you mean `failures`?)"),
            "{}",
            l.problems[1]
        );
        assert!(l.problems[2].contains(":5: unknown table `detectors.foobar`"));
    }

    #[test]
    fn a_wrong_type_in_the_project_file_costs_only_that_setting() {
        let (d, l) = with_files(
            "mode = \"observe\"\n[progress]\nwhen = \"always\"\n",
            "[failures]\nwarn_after = \"five\"\n[detectors.repeat]\nsuccess = 2\n",
        );
        let proj = d.path().join("proj/.claude/loopgate.toml");
        assert_eq!(l.problems.len(), 1, "{:?}", l.problems);
        assert!(
            l.problems[0].starts_with(&format!(
                "{}:2: `failures.warn_after = \"five\"`: the text \"five\", expected a whole number from 0 to 4294967295",
                proj.display()
            )),
            "{}",
            l.problems[0]
        );
        assert_eq!(l.config.mode, Mode::Observe, "user file honoured");
        assert_eq!(l.config.progress.when, When::Always);
        assert_eq!(
            l.config.detectors.repeat.success, 2,
            "rest of project file honoured"
        );
        assert_eq!(l.config.failures.warn_after, 5);
    }

    #[test]
    fn a_file_that_is_not_toml_costs_only_itself() {
        let (_d, l) = with_files("mode = [broken\n", "[detectors.repeat]\nsuccess = 2\n");
        assert_eq!(l.problems.len(), 1);
        assert!(l.problems[0].contains("user.toml:1: not valid TOML"));
        assert_eq!(l.config.detectors.repeat.success, 2);
    }

    #[test]
    fn project_files_only_tighten() {
        let (_d, l) = with_files(
            "[detectors.repeat]\nsuccess = 5\n",
            "mode = \"observe\"\nlock_timeout_ms = 60000\n[detectors.repeat]\nsuccess = 4\nenabled = false\n[guard]\nenabled = false\n[failures]\nwarn_after = 3\n",
        );
        assert_eq!(l.config.mode, Mode::Enforce);
        assert_eq!(l.config.lock_timeout_ms, 2000);
        assert!(l.config.detectors.repeat.enabled && l.config.guard.enabled);
        assert_eq!(
            l.config.detectors.repeat.success, 4,
            "lower than the user's 5"
        );
        assert_eq!(l.config.failures.warn_after, 3);
        assert_eq!(l.problems.len(), 4, "{:#?}", l.problems);
        assert!(l.problems.iter().all(|p| p.contains("may only tighten")));
        assert!(
            l.problems[0].contains("loopgate.toml:1: `mode = \"observe\"` ignored"),
            "{}",
            l.problems[0]
        );
    }

    #[test]
    fn env_values_are_checked_and_booleans_read_widely() {
        let l = load(&Sources {
            env_mode: Some("obsrve".into()),
            env: vec![
                ("LOOPGATE_DETECTORS__REPEAT__SUCCESS".into(), "6".into()),
                ("LOOPGATE_DETECTORS__REPEAT__ENABLED".into(), "off".into()),
                ("LOOPGATE_DETECTORS__REPEAT__SUCCES".into(), "6".into()),
                ("LOOPGATE_FAILURES__WARN_AFTER".into(), "five".into()),
                ("LOOPGATE_DISABLED".into(), "1".into()),
                ("LOOPGATE_FUZZ_CASES".into(), "100".into()),
            ],
            provenance: true,
            ..Default::default()
        });
        assert_eq!(l.config.detectors.repeat.success, 6);
        assert!(!l.config.detectors.repeat.enabled);
        assert_eq!(
            l.origins["detectors.repeat.success"],
            Origin::Env {
                var: "LOOPGATE_DETECTORS__REPEAT__SUCCESS".into()
            }
        );
        let all = l.problems.join("\n");
        assert_eq!(l.problems.len(), 4, "{all}");
        assert!(all.contains("LOOPGATE_DETECTORS__REPEAT__SUCCES names no setting (did you mean LOOPGATE_DETECTORS__REPEAT__SUCCESS?)"));
        assert!(all.contains("LOOPGATE_FAILURES__WARN_AFTER=\"five\" is not a whole number"));
        assert!(all.contains(
            "LOOPGATE_DISABLED is not a loopgate variable (did you mean LOOPGATE_DISABLE?)"
        ));
        assert!(
            all.contains("LOOPGATE_MODE: `mode = \"obsrve\"`: unknown variant `obsrve`"),
            "{all}"
        );
        for (raw, want) in [
            ("1", true),
            ("TRUE", true),
            ("yes", true),
            ("on", true),
            ("0", false),
            ("off", false),
        ] {
            assert_eq!(parse_bool(raw), Some(want), "{raw}");
        }
        assert_eq!(parse_bool("maybe"), None);
    }

    #[test]
    fn only_the_variables_loopgate_reads_are_its_own() {
        for v in [
            "LOOPGATE_MODE",
            "LOOPGATE_DISABLE",
            "LOOPGATE_STATE_DIR",
            "LOOPGATE_DETECTORS__REPEAT__SUCCESS",
            "LOOPGATE_GUARD__ENABLED",
        ] {
            assert!(is_loopgate_var(v), "{v}");
        }
        for v in [
            "LOOPGATE_E2E_SKIP",
            "LOOPGATE_BENCH_RUNS",
            "LOOPGATE_DISABLED",
            "PATH",
        ] {
            assert!(!is_loopgate_var(v), "{v}");
        }
    }

    #[test]
    fn origins_name_every_source() {
        let d = tempfile::tempdir().unwrap();
        let user = write(d.path(), "user.toml", "\n[detectors.repeat]\nsuccess = 5\n");
        let proj = d.path().join("proj");
        write(
            &proj,
            ".claude/loopgate.toml",
            "[failures]\nwarn_after = 4\n",
        );
        let l = load(&Sources {
            project_dir: Some(&proj),
            user_file: Some(user.clone()),
            flag_observe: true,
            env: vec![("LOOPGATE_LOCK_TIMEOUT_MS".into(), "500".into())],
            provenance: true,
            ..Default::default()
        });
        assert!(l.problems.is_empty(), "{:?}", l.problems);
        assert_eq!(
            l.origins["detectors.repeat.success"].to_string(),
            format!("user file {}:3", user.display())
        );
        assert!(l.origins["failures.warn_after"]
            .to_string()
            .starts_with("project file "));
        assert_eq!(
            l.origins["lock_timeout_ms"].to_string(),
            "env LOOPGATE_LOCK_TIMEOUT_MS"
        );
        assert_eq!(l.origins["mode"].to_string(), "flag --observe");
        assert_eq!(l.origins["progress.when"], Origin::Default);
        assert_eq!(l.config.lock_timeout_ms, 500);
    }

    #[test]
    fn a_missing_explicit_file_is_named() {
        let missing = Path::new("/nonexistent/loopgate.toml");
        let l = load(&Sources {
            flag_file: Some(missing),
            ..Default::default()
        });
        assert_eq!(l.missing_explicit.as_deref(), Some(missing));
        assert_eq!(
            l.problems,
            ["config file /nonexistent/loopgate.toml (from --config) does not exist; the user and project files are not read while --config is set, so defaults apply"]
        );
    }

    #[test]
    fn detector_tables_resolve() {
        assert_eq!(
            detector_table("stagnation").as_deref(),
            Some("detectors.stagnation")
        );
        assert_eq!(detector_table("failures").as_deref(), Some("failures"));
        assert_eq!(detector_table("nonesuch"), None);
        let names: Vec<String> = detector_names().collect();
        for d in ["repeat", "cycle", "breaker", "guard", "ladder", "progress"] {
            assert!(names.iter().any(|n| n == d), "{d} in {names:?}");
            assert!(detector_table(d).is_some(), "{d}");
        }
    }
}
