//! The binary session-state encoding: a fixed header (magic, format version, generation, length,
//! CRC-32) in front of a `postcard` body of the serde-derived [`SessionState`].
//!
//! `postcard` is compact (varints, no field names, byte arrays as bytes) and generic over whatever
//! fields the state ends up with; the header makes a torn, zeroed or foreign file fail to decode
//! instead of being misread. postcard is not self-describing, so the state's serde attributes must
//! encode every field unconditionally (no `skip_serializing_if`, no `flatten`): the round-trip
//! tests below catch a field that would be dropped.
//!
//! Header, little endian, [`HEADER`] bytes:
//! `magic "LGST"` · `format u16` · `reserved u16 = 0` · `generation u64` · `body length u32` ·
//! `crc32 u32` over the first 20 header bytes and the body.

use crate::state::SessionState;

pub const MAGIC: [u8; 4] = *b"LGST";
/// Bumped whenever the body's layout changes incompatibly; older files are then quarantined.
pub const FORMAT: u16 = 1;
pub const HEADER: usize = 24;

/// Why bytes are not a usable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// Too short for a header, or the header is not ours (zeroed, JSON, another file).
    NotOurs,
    /// Ours, but from a format this binary does not read.
    Format(u16),
    /// The body is shorter than the header says: a torn write.
    Torn,
    /// The checksum does not match: a torn or damaged write.
    Checksum,
    /// The checksum matches but the body does not decode (a state layout change without a
    /// format bump).
    Body(String),
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bad::NotOurs => write!(f, "not a loopgate state (no header)"),
            Bad::Format(v) => write!(f, "state format {v}, this loopgate reads {FORMAT}"),
            Bad::Torn => write!(f, "torn write (shorter than its header says)"),
            Bad::Checksum => write!(f, "checksum mismatch"),
            Bad::Body(e) => write!(f, "undecodable body: {e}"),
        }
    }
}

/// Encodes `state` as generation `generation`, header included, ready to be written at once.
pub fn encode(state: &SessionState, generation: u64) -> Result<Vec<u8>, String> {
    let mut buf = Vec::with_capacity(16 << 10);
    buf.resize(HEADER, 0);
    let mut buf = postcard::to_extend(state, buf).map_err(|e| e.to_string())?;
    let len = u32::try_from(buf.len() - HEADER).map_err(|_| "state too large".to_string())?;
    buf[0..4].copy_from_slice(&MAGIC);
    buf[4..6].copy_from_slice(&FORMAT.to_le_bytes());
    buf[6..8].copy_from_slice(&0u16.to_le_bytes());
    buf[8..16].copy_from_slice(&generation.to_le_bytes());
    buf[16..20].copy_from_slice(&len.to_le_bytes());
    let crc = checksum(&buf[..20], &buf[HEADER..]);
    buf[20..24].copy_from_slice(&crc.to_le_bytes());
    Ok(buf)
}

/// The generation and body length a header announces, after checking magic and format only.
pub fn peek_header(bytes: &[u8]) -> Result<(u64, usize), Bad> {
    if bytes.len() < HEADER || bytes[0..4] != MAGIC {
        return Err(Bad::NotOurs);
    }
    let format = u16::from_le_bytes([bytes[4], bytes[5]]);
    if format != FORMAT {
        return Err(Bad::Format(format));
    }
    let generation = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as usize;
    // Generation 0 is never written: a zeroed-but-for-the-magic header is not a state.
    if generation == 0 {
        return Err(Bad::NotOurs);
    }
    Ok((generation, len))
}

/// Decodes one encoded state (trailing bytes after the body are ignored: slots are reused).
pub fn decode(bytes: &[u8]) -> Result<(u64, SessionState), Bad> {
    let (generation, len) = peek_header(bytes)?;
    let body = bytes.get(HEADER..HEADER + len).ok_or(Bad::Torn)?;
    let want = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
    if checksum(&bytes[..20], body) != want {
        return Err(Bad::Checksum);
    }
    let state = postcard::from_bytes(body).map_err(|e| Bad::Body(e.to_string()))?;
    Ok((generation, state))
}

fn checksum(header: &[u8], body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(body);
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::*;

    /// A state with every optional field set and every collection non-empty, so a field that
    /// postcard would silently drop shows up as a round-trip difference.
    pub fn full_state() -> SessionState {
        let mut s = SessionState::new("sess-1", 7);
        s.updated_ms = 9;
        s.turn = Turn {
            prompt_id: Some("p".into()),
            number: 3,
            baseline: Some("b".into()),
            progress: Some(false),
            escalation: Some("e".into()),
            last_intervention_batch: Some(2),
            ..Turn::default()
        };
        s.breaker.history.push_back(Transition {
            at_ms: 1,
            from: "CLOSED".into(),
            to: "OPEN".into(),
            reason: "r".into(),
        });
        s.breaker.state = BreakerState::HalfOpen;
        s.recent.push_back(DecisionNote {
            summary: "x".into(),
            ..DecisionNote::default()
        });
        let a = s.agent_mut(MAIN_AGENT, 5);
        a.push_call(Call {
            id: "t1".into(),
            tool: "Bash".into(),
            key: "k".into(),
            target: "ls".into(),
            at_ms: 4,
            epoch: 1,
            status: CallStatus::Failed,
            outcome: Some("o".into()),
        });
        a.push_call(Call {
            id: "t2".into(),
            tool: "Bash".into(),
            key: "k2".into(),
            target: "ls".into(),
            at_ms: 5,
            epoch: 1,
            status: CallStatus::Pending,
            outcome: None,
        });
        let r = a.run_mut("k", "Bash", "ls", 4);
        r.blocked_turn = Some(3);
        r.blocked_reason = "because".into();
        r.outcome = Some("o".into());
        r.recent_ms.push_back(4);
        a.run_mut("k2", "Bash", "ls", 5);
        a.blocked = Some(StickyBlock {
            detector: "d".into(),
            reason: "r".into(),
            since_ms: 1,
        });
        a.pattern_next = Some(PatternMark::default());
        a.edits.push_back(EditRec {
            path: "f".into(),
            lines: vec![1, 2],
            at_ms: 1,
            ok: true,
        });
        a.failure_sigs.insert(
            "k".into(),
            FailureSig {
                class: crate::outcome::ErrorClass::Transient,
                ..FailureSig::default()
            },
        );
        s
    }

    fn same(a: &SessionState, b: &SessionState) -> bool {
        serde_json::to_value(a).unwrap() == serde_json::to_value(b).unwrap()
    }

    #[test]
    fn round_trips_every_field() {
        for s in [full_state(), SessionState::default()] {
            let bytes = encode(&s, 42).unwrap();
            let (g, back) = decode(&bytes).unwrap();
            assert_eq!(g, 42);
            assert!(
                same(&s, &back),
                "a field did not survive the binary encoding"
            );
        }
    }

    #[test]
    fn much_smaller_than_json() {
        let s = full_state();
        let bin = encode(&s, 1).unwrap().len();
        let json = serde_json::to_vec(&s).unwrap().len();
        assert!(bin * 2 < json, "binary {bin} bytes vs JSON {json}");
    }

    #[test]
    fn torn_zeroed_flipped_and_foreign_bytes_never_decode() {
        let bytes = encode(&full_state(), 3).unwrap();
        // Every truncation, including a header cut short.
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "truncated at {cut} decoded");
        }
        // Zeroed, whole or from any point on (a page that never reached the disk).
        assert!(matches!(decode(&vec![0u8; bytes.len()]), Err(Bad::NotOurs)));
        for from in (HEADER..bytes.len()).step_by(7) {
            let mut z = bytes.clone();
            z[from..].fill(0);
            assert!(decode(&z).is_err(), "zeroed from {from} decoded");
        }
        // Any single flipped bit.
        for i in 0..bytes.len() {
            let mut f = bytes.clone();
            f[i] ^= 0x10;
            assert!(decode(&f).is_err(), "flipped byte {i} decoded");
        }
        // The previous format: JSON.
        let json = serde_json::to_vec(&full_state()).unwrap();
        assert!(matches!(decode(&json), Err(Bad::NotOurs)));
        // A future format.
        let mut v2 = bytes.clone();
        v2[4] = 2;
        assert!(matches!(decode(&v2), Err(Bad::Format(2))));
    }
}
