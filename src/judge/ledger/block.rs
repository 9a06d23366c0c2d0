//! The ledger's entries in the binary state: one byte block of fixed-layout records instead of
//! one serde visitor call per field.
//!
//! Every hook call decodes and re-encodes its agent's whole ledger (up to 96 entries of twenty
//! fields), so in a long session that was most of a call's work: ~0.2 M instructions through
//! postcard's generic field-by-field path. Each entry is now written as its fixed fields
//! (little endian, options as a flag byte and 16 bytes) followed by its three strings, each with
//! a `u16` length, all in one `bytes` value: decoding is a walk over one slice.
//!
//! Human-readable formats (JSON, for tests and tools) keep the derived form of [`Entry`]. State
//! format 1 (before this block) is still read: [`codec`](crate::store::codec) decodes it with
//! [`LegacyEntries`] in force.

use crate::judge::ledger::{Entry, Status};
use crate::judge::outcome::ErrorClass;
use crate::protocol::tool::ToolClass;
use crate::util::canon::Digest16;
use compact_str::CompactString;
use serde::de::{Error as _, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::Cell;
use std::collections::VecDeque;

thread_local! {
    static LEGACY: Cell<bool> = const { Cell::new(false) };
}

/// While alive, entries are (de)serialized in format 1's form: a sequence of derived entries.
pub struct LegacyEntries(bool);

impl LegacyEntries {
    pub fn new() -> LegacyEntries {
        LegacyEntries(LEGACY.with(|l| l.replace(true)))
    }
}

impl Default for LegacyEntries {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for LegacyEntries {
    fn drop(&mut self) {
        LEGACY.with(|l| l.set(self.0));
    }
}

fn legacy() -> bool {
    LEGACY.with(Cell::get)
}

pub fn serialize<S: Serializer>(entries: &VecDeque<Entry>, s: S) -> Result<S::Ok, S::Error> {
    if s.is_human_readable() || legacy() {
        return entries.serialize(s);
    }
    let mut out = Vec::with_capacity(entries.len() * 128);
    for e in entries {
        write_entry(&mut out, e);
    }
    s.serialize_bytes(&out)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VecDeque<Entry>, D::Error> {
    if d.is_human_readable() || legacy() {
        return VecDeque::<Entry>::deserialize(d);
    }
    struct Block;
    impl<'de> Visitor<'de> for Block {
        type Value = VecDeque<Entry>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a block of ledger entries")
        }
        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
            read_entries(v).ok_or_else(|| E::custom("malformed ledger entry block"))
        }
        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Self::Value, E> {
            self.visit_bytes(&v)
        }
    }
    d.deserialize_bytes(Block)
        .map_err(|e| D::Error::custom(format!("ledger: {e}")))
}

fn write_entry(out: &mut Vec<u8>, e: &Entry) {
    out.extend_from_slice(&e.key.0);
    out.extend_from_slice(&e.id.to_le_bytes());
    out.push(code(&TOOL_CLASSES, &e.class));
    out.push(code(&STATUSES, &e.status));
    write_digest(out, e.answer);
    write_digest(out, e.shape);
    out.push(u8::from(e.rich));
    out.push(e.error_class.map_or(0, |c| code(&ERROR_CLASSES, &c) + 1));
    out.extend_from_slice(&e.epoch.to_le_bytes());
    out.extend_from_slice(&e.epoch_after.to_le_bytes());
    out.push(u8::from(e.novel) | u8::from(e.news) << 1);
    out.push(u8::from(e.waited));
    out.push(u8::from(e.sleeps) | u8::from(e.under_way) << 1);
    out.extend_from_slice(&e.start_ms.to_le_bytes());
    out.extend_from_slice(&e.end_ms.to_le_bytes());
    out.extend_from_slice(&e.turn.to_le_bytes());
    out.extend_from_slice(&e.batch.to_le_bytes());
    for text in [e.tool.as_str(), e.target.as_str(), e.preview.as_str()] {
        // Texts are clipped where they enter (64, a target's and a preview's few hundred
        // bytes); a longer one is cut at a character boundary rather than mis-encoded.
        let text = clip_to(text, u16::MAX as usize);
        out.extend_from_slice(&(text.len() as u16).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    }
}

fn write_digest(out: &mut Vec<u8>, d: Option<Digest16>) {
    out.push(u8::from(d.is_some()));
    out.extend_from_slice(&d.unwrap_or_default().0);
}

fn clip_to(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn read_entries(mut bytes: &[u8]) -> Option<VecDeque<Entry>> {
    let mut out = VecDeque::with_capacity(crate::judge::ledger::MAX_ENTRIES);
    while !bytes.is_empty() {
        out.push_back(read_entry(&mut bytes)?);
    }
    Some(out)
}

fn read_entry(b: &mut &[u8]) -> Option<Entry> {
    let key = Digest16(take(b)?);
    let id = u64::from_le_bytes(take(b)?);
    let class = of(&TOOL_CLASSES, byte(b)?)?;
    let status = of(&STATUSES, byte(b)?)?;
    let answer = read_digest(b)?;
    let shape = read_digest(b)?;
    let rich = flag(b)?;
    let error_class = match byte(b)? {
        0 => None,
        c => Some(of(&ERROR_CLASSES, c - 1)?),
    };
    let epoch = u32::from_le_bytes(take(b)?);
    let epoch_after = u32::from_le_bytes(take(b)?);
    let (novel, news) = match byte(b)? {
        n @ 0..=3 => (n & 1 != 0, n & 2 != 0),
        _ => return None,
    };
    let waited = flag(b)?;
    let (sleeps, under_way) = match byte(b)? {
        n @ 0..=3 => (n & 1 != 0, n & 2 != 0),
        _ => return None,
    };
    let start_ms = u64::from_le_bytes(take(b)?);
    let end_ms = u64::from_le_bytes(take(b)?);
    let turn = u32::from_le_bytes(take(b)?);
    let batch = u32::from_le_bytes(take(b)?);
    let tool = CompactString::from(text(b)?);
    let target = CompactString::from(text(b)?);
    let preview = text(b)?.to_string();
    Some(Entry {
        key,
        id,
        tool,
        target,
        class,
        status,
        answer,
        shape,
        rich,
        error_class,
        preview,
        epoch,
        epoch_after,
        novel,
        waited,
        sleeps,
        news,
        under_way,
        start_ms,
        end_ms,
        turn,
        batch,
    })
}

fn take<const N: usize>(b: &mut &[u8]) -> Option<[u8; N]> {
    let (head, rest) = b.split_first_chunk::<N>()?;
    *b = rest;
    Some(*head)
}

fn byte(b: &mut &[u8]) -> Option<u8> {
    take::<1>(b).map(|[x]| x)
}

fn flag(b: &mut &[u8]) -> Option<bool> {
    match byte(b)? {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

fn read_digest(b: &mut &[u8]) -> Option<Option<Digest16>> {
    let present = flag(b)?;
    let d = Digest16(take(b)?);
    Some(present.then_some(d))
}

fn text<'a>(b: &mut &'a [u8]) -> Option<&'a str> {
    let len = u16::from_le_bytes(take(b)?) as usize;
    if b.len() < len {
        return None;
    }
    let (s, rest) = b.split_at(len);
    *b = rest;
    std::str::from_utf8(s).ok()
}

// Each enum's code is its place in one table, written out here rather than taken from the
// declaration order, so reordering an enum cannot silently change the state format.
const TOOL_CLASSES: [ToolClass; 6] = [
    ToolClass::Shell,
    ToolClass::Write,
    ToolClass::Edit,
    ToolClass::Read,
    ToolClass::Search,
    ToolClass::Other,
];
const STATUSES: [Status; 6] = [
    Status::Ok,
    Status::Failed,
    Status::Rejected,
    Status::Refused,
    Status::Cancelled,
    Status::Denied,
];
/// Code 0 is "none".
const ERROR_CLASSES: [ErrorClass; 4] = [
    ErrorClass::Transient,
    ErrorClass::Deterministic,
    ErrorClass::Unknown,
    ErrorClass::Environment,
];

fn code<T: PartialEq>(table: &[T], v: &T) -> u8 {
    table
        .iter()
        .position(|x| x == v)
        .expect("every variant is in its table") as u8
}

fn of<T: Copy>(table: &[T], c: u8) -> Option<T> {
    table.get(usize::from(c)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u32) -> Entry {
        Entry {
            key: Digest16([n as u8; 16]),
            id: u64::from(n) * 7,
            tool: "Bash".into(),
            target: format!("npm test -- --grep case-{n} and a target longer than 24").into(),
            class: [ToolClass::Shell, ToolClass::Other][n as usize % 2],
            status: [Status::Ok, Status::Failed, Status::Denied][n as usize % 3],
            answer: n.is_multiple_of(2).then_some(Digest16([1; 16])),
            shape: None,
            rich: n.is_multiple_of(3),
            error_class: [None, Some(ErrorClass::Transient), Some(ErrorClass::Unknown)]
                [n as usize % 3],
            preview: if n % 2 == 1 {
                "Error: ✗ failed".into()
            } else {
                String::new()
            },
            epoch: n,
            epoch_after: n + 1,
            novel: n.is_multiple_of(4),
            waited: n.is_multiple_of(5),
            sleeps: n.is_multiple_of(6),
            under_way: n.is_multiple_of(7),
            news: false,
            start_ms: 1_700_000_000_000 + u64::from(n),
            end_ms: 1_700_000_000_500 + u64::from(n),
            turn: n / 10,
            batch: n,
        }
    }

    fn json(e: &VecDeque<Entry>) -> serde_json::Value {
        serde_json::to_value(e).unwrap()
    }

    #[test]
    fn a_block_round_trips_every_field() {
        let entries: VecDeque<Entry> = (0..40).map(entry).collect();
        let mut block = Vec::new();
        entries.iter().for_each(|e| write_entry(&mut block, e));
        assert_eq!(json(&read_entries(&block).unwrap()), json(&entries));
    }

    #[test]
    fn enum_codes_stay_what_written_files_hold() {
        // Written files depend on these codes: a reordered table would misread them.
        let mut block = Vec::new();
        write_entry(&mut block, &entry(1));
        // key 16, id 8, then class and status; error class after both digests and `rich`.
        assert_eq!((block[24], block[25]), (5, 1), "Other, Failed");
        assert_eq!(block[26 + 17 + 17 + 1], 1, "Transient");
    }

    #[test]
    fn a_cut_or_garbled_block_is_an_error_not_a_misread() {
        let entries: VecDeque<Entry> = (0..3).map(entry).collect();
        let mut block = Vec::new();
        let mut ends = Vec::new();
        for e in &entries {
            write_entry(&mut block, e);
            ends.push(block.len());
        }
        for cut in (1..block.len()).filter(|c| !ends.contains(c)) {
            assert!(read_entries(&block[..cut]).is_none(), "cut at {cut}");
        }
        let mut bad = block.clone();
        bad[16 + 8] = 9; // the first entry's tool class
        assert!(read_entries(&bad).is_none());
    }
}
