//! Canonical hashing: the same call must hash the same whatever order its keys came in.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Write;

/// A short, stable digest: 16 bytes of SHA-256 is plenty to tell calls, answers and states apart in
/// one session. Raw bytes in the state (compact and cheap to compare), hex wherever people read it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Digest16(pub [u8; 16]);

impl Digest16 {
    pub fn of(bytes: &[u8]) -> Digest16 {
        Digest16::from_hash(&Sha256::digest(bytes))
    }

    fn from_hash(full: &[u8]) -> Digest16 {
        let mut d = [0u8; 16];
        d.copy_from_slice(&full[..16]);
        Digest16(d)
    }

    /// A digest of several parts, each length-prefixed so ("ab","c") and ("a","bc") differ.
    pub fn of_parts(parts: &[&[u8]]) -> Digest16 {
        let mut h = Sha256::new();
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
        }
        Digest16::from_hash(&h.finalize())
    }

    pub fn hex(&self) -> String {
        hex16(&self.0)
    }

    /// The first 8 hex digits: enough for a person to match two events by eye.
    pub fn short(&self) -> String {
        hex16(&self.0)[..8].to_string()
    }
}

impl std::fmt::Debug for Digest16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex())
    }
}

impl std::fmt::Display for Digest16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex())
    }
}

impl serde::Serialize for Digest16 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.hex())
        } else {
            s.serialize_bytes(&self.0)
        }
    }
}

impl<'de> serde::Deserialize<'de> for Digest16 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Digest16;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("16 bytes or 32 hex digits")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Digest16, E> {
                <[u8; 16]>::try_from(v)
                    .map(Digest16)
                    .map_err(|_| E::invalid_length(v.len(), &self))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Digest16, E> {
                let b = v.as_bytes();
                if b.len() != 32 {
                    return Err(E::invalid_length(b.len(), &self));
                }
                let mut d = [0u8; 16];
                for (i, pair) in b.chunks(2).enumerate() {
                    let s = std::str::from_utf8(pair).map_err(E::custom)?;
                    d[i] = u8::from_str_radix(s, 16).map_err(E::custom)?;
                }
                Ok(Digest16(d))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Digest16, A::Error> {
                let mut d = [0u8; 16];
                for (i, slot) in d.iter_mut().enumerate() {
                    *slot = a
                        .next_element()?
                        .ok_or_else(|| serde::de::Error::invalid_length(i, &self))?;
                }
                Ok(Digest16(d))
            }
        }
        if d.is_human_readable() {
            d.deserialize_str(V)
        } else {
            d.deserialize_bytes(V)
        }
    }
}

/// Hash of a tool call: the tool name plus its input as JSON with recursively sorted keys.
///
/// A shell command's `description` is the model's commentary, not the call: the same command
/// with a reworded description is the same call.
///
/// A question asked again with only a fresh temp name, a timestamp, a UUID, a shell comment, a
/// literal `echo` label, a commit message or the way its output is shown (`2>&1`, `| tail`)
/// changed is the same question ([`crate::judge::noise::mask_input`], [`crate::judge::noise::command_as_asked`]);
/// not in what a Write or an Edit puts in a file, which is judged by the state it leaves.
pub fn call_key(tool: &str, input: &Value) -> Digest16 {
    let mut h = HashWriter(Sha256::new());
    h.0.update(tool.as_bytes());
    h.0.update([0u8]);
    let mask = !matches!(
        crate::judge::ledger::ToolClass::of(tool),
        crate::judge::ledger::ToolClass::Write | crate::judge::ledger::ToolClass::Edit
    );
    match input {
        Value::Object(m) if matches!(tool, "Bash" | "PowerShell") => {
            let mut m = m.clone();
            m.remove("description");
            if let Some(Value::String(cmd)) = m.get_mut("command") {
                if let Some((asked, _)) = crate::judge::noise::command_as_asked(cmd) {
                    *cmd = asked;
                }
            }
            write_json(&Value::Object(m), &mut h, mask);
        }
        _ => write_json(input, &mut h, mask),
    }
    Digest16::from_hash(&h.0.finalize())
}

/// Hash of arbitrary text (an already-normalised outcome).
pub fn text_key(text: &str) -> String {
    hex16(&Sha256::digest(text.as_bytes()))
}

/// The first 16 bytes of a digest as lowercase hex.
pub fn hex16(bytes: &[u8]) -> String {
    // By table: through `write!` each byte cost ~450 instructions, and every call makes a few.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(32);
    for &b in &bytes[..16] {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// Streams canonical JSON into a writer: object keys sorted at every depth, no whitespace.
/// Written by hand (not via `serde_json::to_writer`) so the ordering holds whether or not
/// serde_json's `preserve_order` feature is on somewhere in the dependency graph.
pub fn write_canonical<W: Write>(v: &Value, w: &mut W) {
    write_json(v, w, false);
}

/// [`write_canonical`], with `mask` every string's volatile fragments masked.
fn write_json<W: Write>(v: &Value, w: &mut W, mask: bool) {
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
                write_json(&map[k], w, mask);
            }
            let _ = w.write_all(b"}");
        }
        Value::Array(items) => {
            let _ = w.write_all(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    let _ = w.write_all(b",");
                }
                write_json(item, w, mask);
            }
            let _ = w.write_all(b"]");
        }
        Value::String(text) if mask => {
            let masked = crate::judge::noise::mask_input(text);
            let _ = serde_json::to_writer(&mut *w, masked.as_deref().unwrap_or(text));
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
    fn a_reworded_description_is_the_same_shell_call() {
        assert_eq!(
            call_key(
                "Bash",
                &json!({"command": "npm test", "description": "run tests"})
            ),
            call_key(
                "Bash",
                &json!({"command": "npm test", "description": "again"})
            )
        );
        assert_ne!(
            call_key("Other", &json!({"q": 1, "description": "a"})),
            call_key("Other", &json!({"q": 1, "description": "b"}))
        );
    }

    #[test]
    fn digests_read_back_in_both_encodings() {
        let d = Digest16::of(b"abc");
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, format!("\"{}\"", d.hex()));
        assert_eq!(serde_json::from_str::<Digest16>(&json).unwrap(), d);
        assert!(serde_json::from_str::<Digest16>("\"abcd\"").is_err());
        assert_ne!(
            Digest16::of_parts(&[b"ab", b"c"]),
            Digest16::of_parts(&[b"a", b"bc"])
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
