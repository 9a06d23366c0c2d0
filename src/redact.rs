//! Short previews of tool input for messages, state and the event log, with secrets masked:
//! the log must never become a second copy of the user's credentials.

use regex::Regex;
use serde_json::Value;
use std::sync::OnceLock;

const PREVIEW_CHARS: usize = 80;

fn secrets() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"(?i)(?P<kv>\b(?:authorization|proxy-authorization|x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd|pwd)\b\s*[:=]\s*(?:bearer\s+|basic\s+)?)[^\s'\x22&]+",
            r"|(?P<bearer>\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}",
            r"|\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|AKIA[0-9A-Z]{16}|xox[abpors]-[A-Za-z0-9-]{8,}|AIza[0-9A-Za-z_-]{20,}|hf_[A-Za-z0-9]{16,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,})",
            r"|(?P<url>[a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@",
        ))
        .expect("secret pattern compiles")
    })
}

/// Fragments every alternative of the secret pattern contains (compared in lower case): a text
/// with none of them cannot match, and skipping the pattern spares most hook calls its compile
/// time, which is most of what a PreToolUse call costs.
const TRIGGERS: &[&str] = &[
    "auth", "key", "token", "secret", "pass", "pwd", "bearer", "sk-", "gh", "akia", "xox", "aiza",
    "hf_", "eyj", "://",
];

fn might_hold_secret(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    TRIGGERS.iter().any(|t| lower.contains(t))
}

/// Replaces anything that looks like a credential with `***`, keeping the key name for context.
pub fn mask(text: &str) -> String {
    if !might_hold_secret(text) {
        return text.to_string();
    }
    secrets()
        .replace_all(text, |c: &regex::Captures| {
            for keep in ["kv", "bearer"] {
                if let Some(m) = c.name(keep) {
                    return format!("{}***", m.as_str());
                }
            }
            if let Some(m) = c.name("url") {
                return format!("{}***@", m.as_str());
            }
            "***".to_string()
        })
        .into_owned()
}

/// What the call was about, in a few words: the command, the path or the pattern.
pub fn target(tool: &str, input: &Value) -> String {
    let field = |k: &str| input.get(k).and_then(Value::as_str);
    let raw = match tool {
        "Bash" => field("command"),
        "Grep" | "Glob" => field("pattern"),
        "WebFetch" => field("url"),
        "WebSearch" => field("query"),
        "Task" | "Agent" => field("description"),
        _ => None,
    }
    .or_else(|| field("file_path"))
    .or_else(|| field("notebook_path"))
    .or_else(|| field("path"))
    .or_else(|| field("command"))
    .or_else(|| field("url"));
    let text = match raw {
        Some(s) => s.to_string(),
        None => {
            let mut buf = Vec::new();
            crate::canon::write_canonical(input, &mut buf);
            String::from_utf8_lossy(&buf[..buf.len().min(4 * PREVIEW_CHARS)]).into_owned()
        }
    };
    // Mask before clipping, so a clipped secret cannot slip past the pattern.
    crate::payload::clip(&mask(&text), PREVIEW_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_masked() {
        let cases = [
            (
                "curl -H 'Authorization: Bearer abcdefghijklmnop' x",
                "abcdefghijklmnop",
            ),
            (
                "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuv",
                "abcdefghijklmnopqrstuv",
            ),
            ("mysql --password=hunter2hunter2 db", "hunter2hunter2"),
            (
                "git clone https://user:s3cr3tpass@github.com/x/y",
                "s3cr3tpass",
            ),
            (
                "echo ghp_abcdefghijklmnopqrstuvwxyz012345",
                "ghp_abcdefghijklmnopqrstuvwxyz012345",
            ),
            ("token=abc123def456 ./run", "abc123def456"),
        ];
        for (text, secret) in cases {
            let m = mask(text);
            assert!(!m.contains(secret), "{text} -> {m}");
            assert!(m.contains("***"), "{m}");
        }
        assert_eq!(mask("cargo test --release"), "cargo test --release");
        assert!(!might_hold_secret("npm test -- --watch=false"));
    }

    #[test]
    fn target_picks_the_meaningful_field() {
        assert_eq!(
            target("Bash", &json!({"command": "npm test", "description": "d"})),
            "npm test"
        );
        assert_eq!(
            target("Edit", &json!({"file_path": "/p/a.rs", "old_string": "x"})),
            "/p/a.rs"
        );
        assert!(target("mcp__x__y", &json!({"q": 1})).contains("\"q\":1"));
    }
}
