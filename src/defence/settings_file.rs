//! One of Claude Code's settings files, read as Claude Code reads it: JSON as JavaScript's
//! `JSON.parse` takes it ([`crate::util::js_json`]), invalid UTF-8 replaced as Node's `utf8`
//! decoding does. A file loopgate cannot read that way — a FIFO, a device, a directory, one
//! past [`MAX_BYTES`], JSON nested past what loopgate parses, text that is not JSON — is said to
//! be so, so that the caller counts it as one that switches loopgate off instead of skipping it.
//! Every read is bounded: never a wait on a FIFO, never more than [`MAX_BYTES`].

use serde_json::{Map, Value};
use std::path::Path;

/// A settings file larger than this is not one a person wrote.
pub const MAX_BYTES: u64 = 4 << 20;

/// What a settings file holds.
#[derive(Debug)]
pub enum Settings {
    /// No file: nothing set.
    Missing,
    /// Its text and its JSON (an empty file is `{}`).
    Json(String, Value),
    /// Why loopgate cannot read it as Claude Code would.
    Unreadable(String),
}

pub fn read(path: &Path) -> Settings {
    match crate::platform::bounded::read_bytes(path, None, MAX_BYTES) {
        Ok(None) => Settings::Missing,
        Err(why) => Settings::Unreadable(why),
        Ok(Some(bytes)) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            match parse(&text) {
                Ok(v) => Settings::Json(text, v),
                Err(why) => Settings::Unreadable(why),
            }
        }
    }
}

/// A settings file's JSON from its text (empty is `{}`); it must be an object.
pub fn parse(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match crate::util::js_json::parse(text.trim_start_matches('\u{feff}')) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err("it is not a JSON object".into()),
        Err(e) => Err(format!("it is not JSON Claude Code reads ({e})")),
    }
}
