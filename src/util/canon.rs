//! Canonical hashing: the same JSON must hash the same whatever order its keys came in.

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
    write_json(v, w, None);
}

/// A string's masked form, or `None` when masking changes nothing in it.
pub type Mask = fn(&str) -> Option<String>;

/// [`write_canonical`], with every string passed through `mask` first.
pub fn write_canonical_masked<W: Write>(v: &Value, w: &mut W, mask: Mask) {
    write_json(v, w, Some(mask));
}

fn write_json<W: Write>(v: &Value, w: &mut W, mask: Option<Mask>) {
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
        Value::String(text) if mask.is_some() => {
            let masked = mask.and_then(|m| m(text));
            let _ = serde_json::to_writer(&mut *w, masked.as_deref().unwrap_or(text));
        }
        scalar => {
            let _ = serde_json::to_writer(&mut *w, scalar);
        }
    }
}

/// A SHA-256 that canonical JSON can be streamed into, ending in a [`Digest16`].
pub struct Hasher(Sha256);

impl Hasher {
    pub fn new() -> Hasher {
        Hasher(Sha256::new())
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(self) -> Digest16 {
        Digest16::from_hash(&self.0.finalize())
    }
}

impl Default for Hasher {
    fn default() -> Hasher {
        Hasher::new()
    }
}

impl Write for Hasher {
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
