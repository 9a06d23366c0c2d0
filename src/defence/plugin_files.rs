//! Claude Code plugin installs keep loopgate's hooks in the plugin's own files, which no
//! ConfigChange watches: an agent may rewrite `hooks/hooks.json` (an event dropped, a matcher
//! that never holds) or the `hooks/loopgate-hook` wrapper (an event skipped) in the plugin's
//! cache. While loopgate still runs, each session's first call compares them with the copies
//! this binary was built with, when the plugin is this binary's version (another version's files
//! differ by right), and tells the person what changed. Files rewritten so that loopgate never
//! runs cannot be told from inside: `docs/security.md` says so.

use std::path::Path;

/// The plugin's files as this version ships them.
const SHIPPED: &[(&str, &str)] = &[
    ("hooks/hooks.json", include_str!("../../hooks/hooks.json")),
    (
        "hooks/loopgate-hook",
        include_str!("../../hooks/loopgate-hook"),
    ),
    (
        "commands/loopgate.md",
        include_str!("../../commands/loopgate.md"),
    ),
];

/// The plugin's files under `root` that differ from the shipped ones (line endings aside: a
/// checkout on Windows may have turned them into CRLF); none when the plugin is another version.
pub fn changed(root: &Path) -> Vec<&'static str> {
    let version = std::fs::read_to_string(root.join(".claude-plugin/plugin.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned));
    if version.as_deref() != Some(env!("CARGO_PKG_VERSION")) {
        return Vec::new();
    }
    SHIPPED
        .iter()
        .filter(|(rel, shipped)| {
            crate::platform::bounded::read_text(&root.join(rel), None, 1 << 20)
                .ok()
                .flatten()
                .is_none_or(|now| now.replace("\r\n", "\n") != shipped.replace("\r\n", "\n"))
        })
        .map(|(rel, _)| *rel)
        .collect()
}

/// What the person must hear at a plugin session's first call, if anything; `root`: the plugin's
/// directory, as its wrapper gave it (`--plugin ROOT`), `None` outside the plugin.
pub fn session_notice(root: Option<&Path>) -> Option<String> {
    let root = root.filter(|r| !r.as_os_str().is_empty())?;
    let changed = changed(root);
    (!changed.is_empty()).then(|| {
        format!(
            "the loopgate plugin's {} in {} differ from what loopgate {} ships: loopgate may not \
             see every call. If you did not change them, reinstall the plugin (/plugin) and run \
             `loopgate doctor`",
            changed.join(", "),
            root.display(),
            env!("CARGO_PKG_VERSION")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_named_and_another_version_is_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let manifest = |v: &str| {
            std::fs::create_dir_all(root.join(".claude-plugin")).unwrap();
            std::fs::write(
                root.join(".claude-plugin/plugin.json"),
                format!(r#"{{"name": "loopgate", "version": "{v}"}}"#),
            )
            .unwrap();
        };
        manifest(env!("CARGO_PKG_VERSION"));
        for (rel, text) in SHIPPED {
            std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
            std::fs::write(root.join(rel), text.replace('\n', "\r\n")).unwrap();
        }
        assert!(changed(root).is_empty(), "as shipped, CRLF or not");
        std::fs::write(root.join("hooks/loopgate-hook"), "#!/bin/sh\nexit 0\n").unwrap();
        assert_eq!(changed(root), ["hooks/loopgate-hook"]);
        std::fs::remove_file(root.join("hooks/hooks.json")).unwrap();
        assert_eq!(changed(root), ["hooks/hooks.json", "hooks/loopgate-hook"]);
        manifest("0.0.1");
        assert!(
            changed(root).is_empty(),
            "another version's files differ by right"
        );
    }
}
