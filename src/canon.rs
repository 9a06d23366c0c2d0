//! Canonical hashing: the same call must hash the same whatever order its keys came in.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Write;

/// A short, stable digest: 16 bytes of SHA-256 as hex is plenty to tell calls apart in one session
/// and keeps state files small.
pub type Digest16 = String;

/// Hash of a tool call: the tool name plus its input as JSON with recursively sorted keys.
pub fn call_key(tool: &str, input: &Value) -> Digest16 {
    let mut h = HashWriter(Sha256::new());
    h.0.update(tool.as_bytes());
    h.0.update([0u8]);
    write_canonical(input, &mut h);
    hex16(&h.0.finalize())
}

/// Hash of arbitrary text (an already-normalised outcome).
pub fn text_key(text: &str) -> Digest16 {
    hex16(&Sha256::digest(text.as_bytes()))
}

/// The first 16 bytes of a digest as lowercase hex.
pub fn hex16(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(32);
    for b in &bytes[..16] {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Streams canonical JSON into a writer: object keys sorted at every depth, no whitespace.
/// Written by hand (not via `serde_json::to_writer`) so the ordering holds whether or not
/// serde_json's `preserve_order` feature is on somewhere in the dependency graph.
pub fn write_canonical<W: Write>(v: &Value, w: &mut W) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            let _ = w.write_all(b"{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    let _ = w.write_all(b",");
                }
                let _ = serde_json::to_writer(&mut *w, k);
                let _ = w.write_all(b":");
                write_canonical(&map[k], w);
            }
            let _ = w.write_all(b"}");
        }
        Value::Array(items) => {
            let _ = w.write_all(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    let _ = w.write_all(b",");
                }
                write_canonical(item, w);
            }
            let _ = w.write_all(b"]");
        }
        scalar => {
            let _ = serde_json::to_writer(&mut *w, scalar);
        }
    }
}

struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_never_matters() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 2, "p": 1}], "x": null}});
        let b: Value =
            serde_json::from_str(r#"{"a":{"x":null,"y":[1,{"p":1,"q":2}]},"b":1}"#).unwrap();
        assert_eq!(call_key("Bash", &a), call_key("Bash", &b));
    }

    #[test]
    fn tool_name_and_values_matter() {
        let a = json!({"command": "ls"});
        assert_ne!(call_key("Bash", &a), call_key("Other", &a));
        assert_ne!(
            call_key("Bash", &a),
            call_key("Bash", &json!({"command": "ls "}))
        );
        // Array order is meaningful (argument lists).
        assert_ne!(
            call_key("T", &json!({"a": [1, 2]})),
            call_key("T", &json!({"a": [2, 1]}))
        );
    }

    #[test]
    fn canonical_text_is_sorted_json() {
        let mut out = Vec::new();
        write_canonical(&json!({"b": "x\"", "a": [true, 1.5]}), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":[true,1.5],"b":"x\""}"#
        );
    }
}
