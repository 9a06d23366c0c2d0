//! JSON as JavaScript's `JSON.parse` reads it, which is how Claude Code reads its settings
//! files. Three things it accepts that serde_json refuses: a lone surrogate escape
//! (`"\ud800"`, kept by JavaScript as a string unit of its own), a number too large for a
//! double (`1e400` is `Infinity`) and nesting of any depth (serde_json stops at 128). A file
//! loopgate skipped for these was a file whose `disableAllHooks` Claude Code applied unseen.
//!
//! One pass over the text rewrites the first two into forms serde_json takes (the replacement
//! character U+FFFD, the largest finite double with the sign kept) and measures the depth; the
//! text is then parsed with serde_json's recursion limit lifted, up to [`MAX_DEPTH`]. Deeper is
//! refused with a reason: the caller counts a file it cannot read as one that switches loopgate
//! off, never as one to skip.

use serde::Deserialize;
use serde_json::Value;

/// Nesting parsed: serde_json recurses once per level, and a thread's stack holds a few
/// thousand levels; Claude Code's settings are a handful deep.
pub const MAX_DEPTH: usize = 1000;

/// Parses `text` as `JSON.parse` would, or says why it cannot.
pub fn parse(text: &str) -> Result<Value, String> {
    let (fixed, depth) = normalise(text);
    if depth > MAX_DEPTH {
        return Err(format!(
            "it is nested {depth} deep, past the {MAX_DEPTH} loopgate reads"
        ));
    }
    let mut de = serde_json::Deserializer::from_str(&fixed);
    de.disable_recursion_limit();
    let v = Value::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// The text with lone surrogate escapes and overflowing numbers rewritten, and its deepest
/// nesting.
fn normalise(text: &str) -> (String, usize) {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut i = 0;
    let mut last = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' && b.get(i + 1) == Some(&b'u') {
                        let unit = hex4(b, i + 2);
                        let paired = match unit {
                            Some(0xD800..=0xDBFF) => {
                                b.get(i + 6) == Some(&b'\\')
                                    && b.get(i + 7) == Some(&b'u')
                                    && matches!(hex4(b, i + 8), Some(0xDC00..=0xDFFF))
                            }
                            _ => false,
                        };
                        if paired {
                            i += 12;
                            continue;
                        }
                        if matches!(unit, Some(0xD800..=0xDFFF)) {
                            out.push_str(&text[last..i]);
                            out.push_str("\\ufffd");
                            i += 6;
                            last = i;
                            continue;
                        }
                    }
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                let number = &text[start..i];
                if number.parse::<f64>().is_ok_and(f64::is_infinite) {
                    out.push_str(&text[last..start]);
                    if number.starts_with('-') {
                        out.push('-');
                    }
                    out.push_str("1.7976931348623157e308");
                    last = i;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[last.min(text.len())..]);
    (out, deepest)
}

fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let s = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_javascript_accepts_is_read() {
        let v = parse(r#"{"a": "x\ud800y", "disableAllHooks": true}"#).unwrap();
        assert_eq!(v["disableAllHooks"], true);
        assert_eq!(v["a"], "x\u{fffd}y");
        let v = parse(r#"{"ok": "\ud83d\ude00", "lone": "\udc00"}"#).unwrap();
        assert_eq!(v["ok"], "😀");
        assert_eq!(v["lone"], "\u{fffd}");
        let v = parse(r#"{"t": 1e400, "u": -1E999, "z": 0e99999, "s": "1e400"}"#).unwrap();
        assert_eq!(v["t"].as_f64(), Some(f64::MAX));
        assert_eq!(v["u"].as_f64(), Some(-f64::MAX));
        assert_eq!(v["s"], "1e400");
        let deep = format!(
            "{{\"x\": {}1{}, \"disableAllHooks\": 1}}",
            "[".repeat(130),
            "]".repeat(130)
        );
        assert_eq!(parse(&deep).unwrap()["disableAllHooks"], 1);
    }

    #[test]
    fn what_it_cannot_read_is_said() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(parse(&deep).unwrap_err().contains("nested"));
        assert!(parse("{\"a\": }").is_err());
        assert!(parse("{} x").is_err());
        // An escaped quote does not end a string.
        assert_eq!(parse(r#"{"a": "\"[[[", "b": 1}"#).unwrap()["b"], 1);
    }
}
