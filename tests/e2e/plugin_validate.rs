//! The plugin and marketplace manifests pass the real CLI's `claude plugin validate --strict`.

use super::claude_cli;
use std::process::Command;

fn validate(target: &str) -> (bool, String) {
    let claude = match claude_cli::require() {
        Some(c) => c,
        None => return (true, String::new()),
    };
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(claude)
        .args(["plugin", "validate", "--strict", target])
        .current_dir(claude_cli::repo_root())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.success() && text.contains("Validation passed"),
        text,
    )
}

#[test]
fn plugin_and_marketplace_validate_strictly() {
    for target in [
        ".",
        ".claude-plugin/plugin.json",
        ".claude-plugin/marketplace.json",
    ] {
        let (ok, text) = validate(target);
        assert!(ok, "claude plugin validate --strict {target}:\n{text}");
    }
}
