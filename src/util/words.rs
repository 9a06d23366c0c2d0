//! Messages in a person's words: counts with the right plural, and serde's type names
//! (`expected u32`, `struct Payload`) said as what to write instead.

/// `1 file`, `2 files`: `word` is the singular; the plural adds `s` (or `es` after s, x, ch, sh).
pub fn count(n: impl Into<u64>, word: &str) -> String {
    let n = n.into();
    if n == 1 {
        return format!("1 {word}");
    }
    let es = ["s", "x", "ch", "sh"].iter().any(|e| word.ends_with(e));
    format!("{n} {word}{}", if es { "es" } else { "s" })
}

/// A serde error message with Rust's type names replaced by what they mean to a person writing
/// a config file or a hook payload.
pub fn plain(msg: &str) -> String {
    const NAMES: [(&str, &str); 16] = [
        // serde_json on text that is not JSON at all.
        ("expected ident", "not JSON"),
        ("expected value", "not JSON"),
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number of 0 or more"),
        ("expected usize", "expected a whole number of 0 or more"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a table"),
        ("invalid type: ", ""),
        ("invalid value: ", ""),
        ("floating point ", "the number "),
    ];
    let mut out = msg.to_string();
    for (from, to) in NAMES {
        out = out.replace(from, to);
    }
    // `expected struct Payload`, `expected enum Mode`: the shape, not the Rust name.
    for (kind, shape) in [
        ("struct ", "an object"),
        ("enum ", "one of the names listed"),
    ] {
        while let Some(i) = out.find(&format!("expected {kind}")) {
            let start = i + "expected ".len();
            let end = out[start + kind.len()..]
                .find(|c: char| !c.is_alphanumeric() && c != '_')
                .map_or(out.len(), |e| start + kind.len() + e);
            out.replace_range(start..end, shape);
        }
    }
    out.replace("integer `", "the number `")
        .replace("string \"", "the text \"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals() {
        assert_eq!(count(1u32, "file"), "1 file");
        assert_eq!(count(0u32, "session"), "0 sessions");
        assert_eq!(count(2u32, "match"), "2 matches");
    }

    #[test]
    fn serde_names_become_words() {
        assert_eq!(
            plain("invalid type: floating point `3.5`, expected u32"),
            "the number `3.5`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            plain("invalid type: integer `0`, expected struct Payload at line 1 column 1"),
            "the number `0`, expected an object at line 1 column 1"
        );
        assert_eq!(
            plain("expected ident at line 1 column 2"),
            "not JSON at line 1 column 2"
        );
        assert_eq!(
            plain("invalid value: integer `-1`, expected u32"),
            "the number `-1`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            plain("invalid value: integer `99999999999`, expected u32"),
            "the number `99999999999`, expected a whole number from 0 to 4294967295",
            "a number too large is told its range, not that it should be 0 or more"
        );
    }
}
