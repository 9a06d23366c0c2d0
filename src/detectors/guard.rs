//! Tamper guard: the agent must not switch loopgate off by itself. Writes to loopgate's config
//! files, and shell commands that edit them, reset its state or disable it, are denied unless the
//! user allowed it in their own config (the project file cannot grant this).

use crate::config::Guard;
use crate::verdict::{Action, Severity, Verdict};
use serde_json::Value;

pub const NAME: &str = "guard";

/// Shell fragments that would change what loopgate does.
const SHELL_MARKERS: &[&str] = &[
    "loopgate.toml",
    "LOOPGATE_DISABLE",
    "LOOPGATE_MODE",
    "loopgate reset",
    "loopgate setup",
    "install.sh --uninstall",
];

pub fn check(tool: &str, input: &Value, state_dir: Option<&str>, cfg: &Guard) -> Option<Verdict> {
    if !cfg.enabled {
        return None;
    }
    let field = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or("");
    let hit = match tool {
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => {
            let path = [field("file_path"), field("notebook_path")].concat();
            path.ends_with("loopgate.toml")
                || path.ends_with("loopgate/config.toml")
                || state_dir.is_some_and(|d| !d.is_empty() && path.starts_with(d))
        }
        "Bash" => {
            let cmd = field("command");
            SHELL_MARKERS.iter().any(|m| cmd.contains(m))
                || state_dir.is_some_and(|d| !d.is_empty() && cmd.contains(d))
        }
        _ => false,
    };
    hit.then(|| {
        Verdict::new(
            NAME,
            Action::Deny,
            Severity::High,
            "loopgate: changing loopgate's own configuration or state is reserved to the user. \
             If loopgate is in your way, say so and ask the user to adjust it."
                .to_string(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_and_state_writes_are_denied() {
        let cfg = Guard::default();
        let deny = |tool: &str, input: Value| {
            check(tool, &input, Some("/home/u/.local/state/loopgate"), &cfg).is_some()
        };
        assert!(deny(
            "Write",
            json!({"file_path": "/p/.claude/loopgate.toml", "content": "mode = \"observe\""})
        ));
        assert!(deny(
            "Bash",
            json!({"command": "echo 'mode=\"observe\"' > .claude/loopgate.toml"})
        ));
        assert!(deny(
            "Bash",
            json!({"command": "export LOOPGATE_DISABLE=1"})
        ));
        assert!(deny(
            "Bash",
            json!({"command": "rm -rf /home/u/.local/state/loopgate/sessions"})
        ));
        assert!(!deny("Write", json!({"file_path": "/p/src/main.rs"})));
        assert!(!deny("Bash", json!({"command": "cargo test"})));
        let off = Guard { enabled: false };
        assert!(check(
            "Write",
            &json!({"file_path": "/p/.claude/loopgate.toml"}),
            None,
            &off
        )
        .is_none());
    }
}
