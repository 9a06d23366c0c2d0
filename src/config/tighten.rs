//! A project file (`.claude/loopgate.toml`) is written by whoever can write the repository —
//! including the agent loopgate watches — so it may only make loopgate stricter: lower a
//! threshold, switch a detector on, shorten an exemption list. It may never set observe mode,
//! switch a detector off, raise a threshold, or touch the lock timeout, the log or housekeeping.
//!
//! Each setting's direction is decided here, in one small table keyed by the setting's path (or
//! the last part of it), with defaults by value type for settings the table does not name:
//! numbers are thresholds (lower is stricter), `enabled` switches are stricter on, lists are
//! exemptions (a subset is stricter), and any other string or boolean is the user's alone.

use toml::Value;

/// How a setting may move when a project file sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A threshold: the project may lower it (the detectors clamp a value too low to mean
    /// anything, so 0 is simply the strictest).
    Lower,
    /// A window or an allowance where a larger value watches more: the project may raise it.
    Higher,
    /// A bound where 0 means "not used": the project may set one where none is, or lower it,
    /// never to 0.
    LowerUnlessUnset,
    /// A switch the project may turn on, never off.
    OnOnly,
    /// Named values, strictest first: the project may move towards the front.
    Order(&'static [&'static str]),
    /// A list of exemptions: the project may drop entries, never add any.
    Subset,
    /// Only the user may set it (user file, `--config`, environment, flags).
    UserOnly,
}

/// Settings named explicitly: a full path, or `*.name` for the last part of any path, or
/// `name.*` for a whole table. The first match wins.
const TABLE: &[(&str, Rule)] = &[
    ("mode", Rule::Order(&["enforce", "observe"])),
    ("lock_timeout_ms", Rule::UserOnly),
    ("log.*", Rule::UserOnly),
    ("housekeeping.*", Rule::UserOnly),
    ("exempt.*", Rule::UserOnly),
    ("notify.*", Rule::UserOnly),
    // The figures the budget is priced with: a project could only make a loop look cheaper.
    ("budget.prices.*", Rule::UserOnly),
    ("budget.estimate_model", Rule::UserOnly),
    ("budget.estimate_input_tokens", Rule::Higher),
    ("budget.estimate_output_tokens", Rule::Higher),
    ("budget.session_tokens", Rule::LowerUnlessUnset),
    ("budget.day_tokens", Rule::LowerUnlessUnset),
    ("progress.when", Rule::Order(&["always", "unattended"])),
    ("*.enabled", Rule::OnOnly),
    ("*.rust", Rule::OnOnly),
    ("*.max_blocks", Rule::Higher),
    ("*.max_files", Rule::Higher),
    ("*.max_period", Rule::Higher),
    ("*.prune_after_minutes", Rule::Higher),
    ("*.window_seconds", Rule::Higher),
    ("*.window_minutes", Rule::Higher),
    ("*.cooldown_minutes", Rule::Higher),
    ("*.waiting_gap_seconds", Rule::Higher),
];

/// The rule for the setting at `path` whose value is `v`.
pub fn rule(path: &str, v: &Value) -> Rule {
    let last = path.rsplit('.').next().unwrap_or(path);
    for &(pat, rule) in TABLE {
        let hit = if let Some(name) = pat.strip_prefix("*.") {
            name == last
        } else if let Some(table) = pat.strip_suffix(".*") {
            path.starts_with(table) && path[table.len()..].starts_with('.')
        } else {
            pat == path
        };
        if hit {
            return rule;
        }
    }
    match v {
        Value::Integer(_) | Value::Float(_) => Rule::Lower,
        Value::Array(_) => Rule::Subset,
        _ => Rule::UserOnly,
    }
}

/// Whether moving the setting at `path` from `current` to `wanted` keeps or tightens it. `Err`
/// says, in words for the person, which way the project file may move it.
/// The settings `new` loosens against `old` (a threshold raised, a detector or the guard
/// switched off, observe mode, an exemption added), as `path old → new`, by the same rules a
/// project file is held to.
pub fn loosened(old: &crate::config::Config, new: &crate::config::Config) -> Vec<String> {
    let (Ok(Value::Table(old)), Ok(Value::Table(new))) =
        (Value::try_from(old), Value::try_from(new))
    else {
        return Vec::new();
    };
    let before: std::collections::BTreeMap<String, &Value> =
        crate::config::leaves(&old).into_iter().collect();
    crate::config::leaves(&new)
        .into_iter()
        .filter_map(|(path, now)| {
            let was = before.get(&path).copied();
            if was == Some(now) {
                return None;
            }
            check(&path, was, now).err()?;
            Some(match was {
                Some(w) => format!("{path} {w} → {now}"),
                None => format!("{path} = {now}"),
            })
        })
        .collect()
}

pub fn check(path: &str, current: Option<&Value>, wanted: &Value) -> Result<(), String> {
    let rule = rule(path, wanted);
    let Some(current) = current else {
        return match rule {
            Rule::UserOnly => Err("only the user file may set it".into()),
            _ => Ok(()),
        };
    };
    if current == wanted && rule != Rule::UserOnly {
        return Ok(());
    }
    let num = |v: &Value| v.as_integer().map(|i| i as f64).or_else(|| v.as_float());
    match rule {
        Rule::Lower => match (num(current), num(wanted)) {
            (Some(c), Some(w)) if w <= c => Ok(()),
            _ => Err(format!(
                "it may only lower this threshold ({current} in effect)"
            )),
        },
        Rule::LowerUnlessUnset => match (num(current), num(wanted)) {
            (Some(c), Some(w)) if w > 0.0 && (c == 0.0 || w <= c) => Ok(()),
            _ => Err(format!(
                "it may only set this bound where none is, or lower it, never to 0 ({current} in effect)"
            )),
        },
        Rule::Higher => match (num(current), num(wanted)) {
            (Some(c), Some(w)) if w >= c => Ok(()),
            _ => Err(format!(
                "it may only raise this value ({current} in effect)"
            )),
        },
        Rule::OnOnly => match wanted.as_bool() {
            Some(true) => Ok(()),
            _ => Err("it may switch this on, never off".into()),
        },
        Rule::Order(order) => {
            let at = |v: &Value| v.as_str().and_then(|s| order.iter().position(|o| *o == s));
            match (at(current), at(wanted)) {
                (Some(c), Some(w)) if w <= c => Ok(()),
                _ => Err(format!(
                    "it may only make this stricter ({} is strictest; {current} in effect)",
                    order[0]
                )),
            }
        }
        Rule::Subset => match (current.as_array(), wanted.as_array()) {
            (Some(c), Some(w)) if w.iter().all(|x| c.contains(x)) => Ok(()),
            _ => Err("it may only remove entries from this list, not add any".into()),
        },
        Rule::UserOnly => Err("only the user file, --config or the environment may set it".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Value {
        format!("x = {s}").parse::<toml::Table>().unwrap()["x"].clone()
    }

    #[test]
    fn a_token_bound_may_be_set_or_lowered_never_switched_off() {
        let p = "budget.session_tokens";
        assert!(
            check(p, Some(&v("0")), &v("1000")).is_ok(),
            "set where none is"
        );
        assert!(check(p, Some(&v("1000")), &v("500")).is_ok(), "lowered");
        assert!(check(p, Some(&v("1000")), &v("0")).is_err(), "never off");
        assert!(
            check(p, Some(&v("1000")), &v("2000")).is_err(),
            "never raised"
        );
        assert!(check("budget.prices.gpt-5.input", None, &v("0.0")).is_err());
    }

    #[test]
    fn loosening_is_named_and_tightening_is_not() {
        use crate::config::{Config, Mode};
        let old = Config::default();
        let mut new = old.clone();
        new.detectors.repeat.success = 9;
        new.detectors.stagnation.deny_at = 4;
        new.guard.enabled = false;
        new.mode = Mode::Observe;
        let changes = loosened(&old, &new);
        assert!(
            changes.contains(&"detectors.repeat.success 3 → 9".to_string()),
            "{changes:?}"
        );
        assert!(
            changes.iter().any(|c| c.starts_with("guard.enabled")),
            "{changes:?}"
        );
        assert!(changes.iter().any(|c| c.starts_with("mode")), "{changes:?}");
        assert!(
            !changes.iter().any(|c| c.contains("deny_at")),
            "a lower threshold is stricter: {changes:?}"
        );
        assert!(loosened(&old, &old).is_empty());
        // The baseline survives its encoding in the state.
        let bytes = postcard::to_allocvec(&new).unwrap();
        let back: Config = postcard::from_bytes(&bytes).unwrap();
        assert!(loosened(&new, &back).is_empty() && loosened(&back, &new).is_empty());
    }

    #[test]
    fn project_files_only_tighten() {
        let ok = [
            ("detectors.repeat.success", "3", "2"),
            ("detectors.repeat.success", "3", "3"),
            ("detectors.repeat.success", "3", "0"),
            ("detectors.repeat.enabled", "false", "true"),
            ("mode", "\"observe\"", "\"enforce\""),
            ("progress.when", "\"unattended\"", "\"always\""),
            ("detectors.rate.window_seconds", "60", "120"),
            (
                "detectors.stagnation.ignore_tools",
                "[\"Read\", \"Grep\"]",
                "[\"Read\"]",
            ),
            ("detectors.repeat.cooldown_minutes", "10", "20"),
            ("detectors.circular.rust", "false", "true"),
        ];
        for (path, cur, want) in ok {
            assert_eq!(check(path, Some(&v(cur)), &v(want)), Ok(()), "{path}");
        }
        let refused = [
            ("detectors.repeat.success", "3", "9"),
            ("detectors.repeat.enabled", "true", "false"),
            ("detectors.repeat.waiting_gap_seconds", "60", "5"),
            ("guard.enabled", "true", "false"),
            ("mode", "\"enforce\"", "\"observe\""),
            ("lock_timeout_ms", "2000", "60000"),
            ("lock_timeout_ms", "2000", "100"),
            ("log.preview", "true", "false"),
            ("housekeeping.max_age_days", "7", "1"),
            ("detectors.rate.window_seconds", "60", "1"),
            (
                "detectors.stagnation.ignore_tools",
                "[\"Read\"]",
                "[\"Read\", \"Bash\"]",
            ),
            ("progress.when", "\"always\"", "\"unattended\""),
        ];
        for (path, cur, want) in refused {
            assert!(check(path, Some(&v(cur)), &v(want)).is_err(), "{path}");
        }
    }
}
