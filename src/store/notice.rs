//! Problems the human must see (a config file that was partly ignored) go out as a
//! `systemMessage` — shown to the person, never sent to the model — once per session, not on
//! every call: a small `sessions/<stem>.notice` file remembers the digest of what was shown, so
//! the same problem is not repeated and a new one is.

use serde_json::Value;
use sha2::Digest;
use std::fs;
use std::io::Write;
use std::path::Path;

fn path(state_dir: &Path, session_id: &str) -> std::path::PathBuf {
    state_dir
        .join("sessions")
        .join(format!("{}.notice", crate::store::Store::stem(session_id)))
}

/// Forgets what was shown under `session_id`, so it is shown again when it recurs.
pub fn forget(state_dir: &Path, session_id: &str) {
    let _ = fs::remove_file(path(state_dir, session_id));
}

/// Whether `text` is new for this session (and remembers it). Called under the session lock.
pub fn first_time(state_dir: &Path, session_id: &str, text: &str) -> bool {
    let path = path(state_dir, session_id);
    let digest: String = sha2::Sha256::digest(text.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let seen = fs::symlink_metadata(&path)
        .ok()
        .filter(|m| m.file_type().is_file() && m.len() <= 64)
        .and_then(|_| fs::read_to_string(&path).ok())
        .is_some_and(|d| d.trim() == digest);
    if seen {
        return false;
    }
    let _ = fs::remove_file(&path);
    if let Ok(mut f) = crate::store::open_private(&path) {
        let _ = f.write_all(digest.as_bytes());
    }
    true
}

/// Adds `message` as the answer's `systemMessage` (after any the answer already has), or makes
/// an answer of it alone.
pub fn with_system_message(answer: Option<String>, message: &str) -> String {
    let mut obj = answer
        .and_then(|a| serde_json::from_str::<Value>(&a).ok())
        .and_then(|v| match v {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .unwrap_or_default();
    let text = match obj.get("systemMessage").and_then(Value::as_str) {
        Some(existing) => format!("{existing}\n{message}"),
        None => message.to_string(),
    };
    obj.insert("systemMessage".into(), Value::String(text));
    Value::Object(obj).to_string()
}

/// The text shown for config problems.
pub fn config_message(problems: &[String]) -> String {
    format!(
        "loopgate: configuration problem{}: {} (run `loopgate doctor`; shown once per session)",
        if problems.len() == 1 { "" } else { "s" },
        crate::protocol::payload::clip(&problems.join("; "), 1500)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_session_per_text() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("sessions")).unwrap();
        assert!(first_time(d.path(), "s1", "bad key"));
        assert!(!first_time(d.path(), "s1", "bad key"));
        assert!(first_time(d.path(), "s2", "bad key"));
        assert!(first_time(d.path(), "s1", "another problem"));
    }

    #[test]
    fn merges_into_an_answer() {
        assert_eq!(with_system_message(None, "m"), r#"{"systemMessage":"m"}"#);
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse"},"systemMessage":"a"}"#;
        let v: Value = serde_json::from_str(&with_system_message(Some(deny.into()), "m")).unwrap();
        assert_eq!(v["systemMessage"], "a\nm");
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    }
}
