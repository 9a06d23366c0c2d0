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

use crate::judge::halt::Halts;
use crate::judge::state::{Ceiling, Heed, LoopBudget, PermissionGate, SessionState, Written};
use crate::util::canon::Digest16;

pub const MAGIC: [u8; 4] = *b"LGST";
/// Bumped whenever the body's layout changes incompatibly; files of a format this binary does
/// not read are quarantined. 11 adds the loop budget ([`LoopBudget`]) as the last field; 10 adds the session's halts ([`Halts`]) as the last field; 9 may set
/// the ledger entry's "still under way" bit (the layout of 8, whose files never set it, so 8 is read
/// as 9); 8 adds the prompts of the turns the circuit breaker counted
/// (`failed_prompts`) as the last field; 7 adds when loopgate wrote the state ([`Written`]) as its last
/// field; 6 adds the configuration baseline as [`Heed`]'s last field; 5 adds the session's [`Heed`] as the state's last field; 4 adds the ceiling's [`PermissionGate`] as its last field; 3 adds
/// the session's [`Ceiling`] as the state's last field; 2 writes the ledger's entries as one block
/// ([`crate::judge::ledger::block`]); 1, the same state with entries field by field. 1 to 4 are
/// still read, what they lack taken as its default.
pub const FORMAT: u16 = 11;
/// The first format with the halts, without the loop budget, still read.
const FORMAT_NO_BUDGET: u16 = 10;
/// The first format with an entry's "still under way" bit, without the halts, still read.
const FORMAT_NO_HALTS: u16 = 9;
/// The first format with the breaker's prompts, without the "still under way" bit: the layout of
/// 9, read as 9.
const FORMAT_NO_UNDER_WAY: u16 = 8;
/// The first format with the time of writing, without the breaker's prompts, still read.
const FORMAT_NO_FAILED_PROMPTS: u16 = 7;
/// The first format with the configuration baseline, without [`Written`], still read.
const FORMAT_NO_WRITTEN: u16 = 6;
/// The first format with the session's [`Heed`], without its config baseline, still read.
const FORMAT_NO_CONFIG: u16 = 5;
/// The first format with the ceiling's permission gate, still read.
const FORMAT_NO_HEED: u16 = 4;
/// The first format with a ceiling, still read.
const FORMAT_NO_PERMISSION: u16 = 3;
/// The first format with entries as one block, still read.
const FORMAT_NO_CEILING: u16 = 2;
/// The first format, still read.
const FORMAT_ENTRIES_BY_FIELD: u16 = 1;
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
    encode_as(state, generation, FORMAT)
}

/// [`encode`] with the header's format given (tests write the previous format with it).
fn encode_as(state: &SessionState, generation: u64, format: u16) -> Result<Vec<u8>, String> {
    let mut buf = Vec::with_capacity(16 << 10);
    buf.resize(HEADER, 0);
    let mut buf = postcard::to_extend(state, buf).map_err(|e| e.to_string())?;
    let len = u32::try_from(buf.len() - HEADER).map_err(|_| "state too large".to_string())?;
    buf[0..4].copy_from_slice(&MAGIC);
    buf[4..6].copy_from_slice(&format.to_le_bytes());
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
    if !matches!(
        format,
        FORMAT
            | FORMAT_NO_BUDGET
            | FORMAT_NO_HALTS
            | FORMAT_NO_UNDER_WAY
            | FORMAT_NO_FAILED_PROMPTS
            | FORMAT_NO_WRITTEN
            | FORMAT_NO_CONFIG
            | FORMAT_NO_HEED
            | FORMAT_NO_PERMISSION
            | FORMAT_NO_CEILING
            | FORMAT_ENTRIES_BY_FIELD
    ) {
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
    let _by_field = (bytes[4..6] == FORMAT_ENTRIES_BY_FIELD.to_le_bytes())
        .then(crate::judge::ledger::block::LegacyEntries::new);
    let format = u16::from_le_bytes([bytes[4], bytes[5]]);
    let state = if format == FORMAT {
        postcard::from_bytes(body)
    } else {
        // What each older format lacks is last, so an older body followed by its default's
        // encoding is the same state with that part empty.
        let no_prompts = || postcard::to_extend(&Vec::<Digest16>::new(), Vec::new());
        let no_halts = format == FORMAT_NO_HALTS || format == FORMAT_NO_UNDER_WAY;
        let no_budget = format == FORMAT_NO_BUDGET;
        let tail = if no_budget || no_halts {
            Ok(Vec::new())
        } else if format == FORMAT_NO_FAILED_PROMPTS {
            no_prompts()
        } else if format == FORMAT_NO_WRITTEN {
            Ok(Vec::new())
        } else if format == FORMAT_NO_CONFIG {
            postcard::to_extend(&Vec::<u8>::new(), Vec::new())
        } else {
            if format == FORMAT_NO_HEED {
                Ok(Vec::new())
            } else if format == FORMAT_NO_PERMISSION {
                postcard::to_extend(&PermissionGate::default(), Vec::new())
            } else {
                postcard::to_extend(&Ceiling::default(), Vec::new())
            }
            .and_then(|t| postcard::to_extend(&Heed::default(), t))
        }
        .and_then(|t| {
            if no_budget || no_halts || format == FORMAT_NO_FAILED_PROMPTS {
                Ok(t)
            } else {
                postcard::to_extend(&Written::default(), t)
                    .and_then(|t| postcard::to_extend(&Vec::<Digest16>::new(), t))
            }
        })
        .and_then(|t| {
            if no_budget {
                Ok(t)
            } else {
                postcard::to_extend(&Halts::default(), t)
            }
        })
        .and_then(|t| postcard::to_extend(&LoopBudget::default(), t))
        .map_err(|e| Bad::Body(e.to_string()))?;
        let mut whole = body.to_vec();
        whole.extend(tail);
        postcard::from_bytes(&whole)
    }
    .map_err(|e| Bad::Body(e.to_string()))?;
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
    use crate::judge::state::*;
    use crate::util::canon::Digest16;

    /// A state the engine built from a realistic mix of events (successes, failures, a rejected
    /// edit, a subagent, repeats that draw verdicts), with the turn's optional fields set, so a
    /// field postcard would silently drop shows up as a round-trip difference.
    pub fn full_state() -> SessionState {
        use crate::judge::engine::{handle, Ctx};
        use crate::protocol::payload::Payload;
        use serde_json::json;
        let cfg = crate::config::Config::default();
        let mut s = SessionState::new("sess-1", 1_000);
        let events = [
            json!({"hook_event_name": "UserPromptSubmit", "prompt": "fix it", "prompt_id": "p1"}),
            json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": "t1", "prompt_id": "p1"}),
            json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": "t1", "error": "Exit code 2\nmake: *** no rule", "prompt_id": "p1"}),
            json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t2", "prompt_id": "p1", "agent_id": "sub1"}),
            json!({"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t2", "tool_response": {"stdout": "a b 12:00:01", "stderr": ""}, "prompt_id": "p1", "agent_id": "sub1"}),
            json!({"hook_event_name": "PostToolBatch", "prompt_id": "p1", "tool_calls": [{"tool_name": "Edit", "tool_input": {"file_path": "/x/a.rs", "old_string": "a", "new_string": "b"}, "tool_use_id": "t3", "tool_response": "<tool_use_error>String to replace not found in file.</tool_use_error>"}]}),
        ];
        let mut all = Vec::new();
        all.extend(events.iter().cloned());
        for i in 0..4 {
            all.push(json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": format!("r{i}"), "prompt_id": "p1"}));
            all.push(json!({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": format!("r{i}"), "error": "Exit code 2", "prompt_id": "p1"}));
        }
        all.push(json!({"hook_event_name": "Stop", "stop_hook_active": false, "prompt_id": "p1"}));
        for (n, mut e) in all.into_iter().enumerate() {
            e["session_id"] = json!("sess-1");
            let (p, event) = Payload::parse(e.to_string().as_bytes()).unwrap();
            let ctx = Ctx {
                config: &cfg,
                now_ms: 1_000 + n as u64 * 500,
                project_dir: None,
                attended: Some(false),
                worktree: &crate::platform::git::NoGit,
                state_dir: None,
                caps: crate::protocol::dialect::Agent::Claude.caps(),
            };
            handle(&mut s, &p, event, &ctx);
        }
        s.turn.baseline = Some("b".into());
        s.turn.progress = Some(false);
        s.turn.escalation = Some("e".into());
        s.turn.last_intervention_batch = Some(2);
        s.ceiling.refusals = 4;
        s.ceiling.ended_turns = 1;
        s.ceiling.permission.seen = true;
        s.ceiling.permission.passed = Some(Digest16::of(b"p"));
        s.ceiling.script_calls.push_back((Digest16::of(b"k"), 7));
        s.heed.news("main", 42);
        s.heed.turn = 1;
        s.heed.standing = Some(Standing {
            at_ms: 3,
            epoch: 2,
            agent: "main".into(),
            wait: true,
            counted: true,
            what: "Bash `make`".into(),
            detector: "repeat".into(),
        });
        s.heed.note_defied(Defied {
            at_ms: 3,
            what: "Bash `make`".into(),
            detector: "repeat".into(),
        });
        s.breaker.state = BreakerState::HalfOpen;
        s.breaker.history.push_back(Transition {
            at_ms: 1,
            from: "CLOSED".into(),
            to: "OPEN".into(),
            reason: "r".into(),
        });
        s.budget = LoopBudget {
            usd: 0.5,
            since_ms: Some(3),
            live_mark: Some(0.25),
            day: "2026-11-28".into(),
            detectors: vec!["repeat".into()],
            ..LoopBudget::default()
        };
        let main = &s.agents[crate::protocol::payload::MAIN_AGENT];
        assert!(
            main.ledger
                .entries
                .iter()
                .any(|e| e.error_class.is_some() && !e.preview.is_empty()),
            "the fixture exercises failures"
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
        let mut next = bytes.clone();
        next[4..6].copy_from_slice(&(FORMAT + 1).to_le_bytes());
        assert_eq!(decode(&next).err(), Some(Bad::Format(FORMAT + 1)));
    }

    /// `s` as an older `format` wrote it: its encoding without the last `tail` bytes.
    /// `s` encoded as `format`, without the `tail` bytes of what that format lacks before
    /// [`Written`] (which every older format lacks).
    fn older(s: &SessionState, format: u16, tail: usize) -> Vec<u8> {
        assert_eq!(s.written, Written::default(), "no older format has it");
        assert!(s.failed_prompts.is_empty(), "no older format has them");
        assert_eq!(s.halts, Halts::default(), "no older format has them");
        let written = postcard::to_allocvec(&Written::default()).unwrap().len()
            + 1
            + halts_len()
            + budget_len();
        cut(s, format, tail + written)
    }

    /// A format-2 state (written before the ceiling existed) is its body without the last field.
    #[test]
    fn a_format_two_state_without_the_ceiling_is_still_read() {
        let mut s = full_state();
        s.halts = Halts::default();
        s.budget = LoopBudget::default();
        s.failed_prompts.clear();
        s.ceiling = Ceiling::default();
        s.heed = Heed::default();
        let tail = postcard::to_allocvec(&Ceiling::default()).unwrap().len() + heed_len();
        let mut old = older(&s, FORMAT_NO_CEILING, tail);
        let (g, back) = decode(&old).unwrap();
        assert_eq!(g, 9);
        assert!(
            same(&s, &back),
            "a format-2 state decodes to the same state"
        );
        // The same bytes labelled as the current format lack a field: an error, never a misread
        // state.
        old[4..6].copy_from_slice(&FORMAT.to_le_bytes());
        let crc = checksum(&old[..20], &old[HEADER..]);
        old[20..24].copy_from_slice(&crc.to_le_bytes());
        assert!(decode(&old).is_err());
    }

    /// A format-3 state (written before Copilot's permission hook was used) keeps its ceiling,
    /// and knows nothing of the hook: no call is let past the ceiling on its word.
    #[test]
    fn a_format_three_state_keeps_its_ceiling_without_the_permission_gate() {
        let mut s = full_state();
        s.halts = Halts::default();
        s.budget = LoopBudget::default();
        s.failed_prompts.clear();
        s.ceiling.permission = PermissionGate::default();
        s.heed = Heed::default();
        assert_eq!(s.ceiling.ended_turns, 1);
        let tail = postcard::to_allocvec(&PermissionGate::default())
            .unwrap()
            .len()
            + heed_len();
        let old = older(&s, FORMAT_NO_PERMISSION, tail);
        let (_, back) = decode(&old).unwrap();
        assert!(
            same(&s, &back),
            "a format-3 state decodes to the same state"
        );
        assert_eq!(back.ceiling.ended_turns, 1);
        assert!(!back.ceiling.permission.seen);
    }

    fn heed_len() -> usize {
        postcard::to_allocvec(&Heed::default()).unwrap().len()
    }

    /// A format-4 state (written before refusals were judged by whether the agent heeded them)
    /// keeps everything it had, and starts with nothing standing.
    #[test]
    fn a_format_four_state_is_read_with_nothing_standing() {
        let mut s = full_state();
        s.halts = Halts::default();
        s.budget = LoopBudget::default();
        s.failed_prompts.clear();
        s.heed = Heed::default();
        let old = older(&s, FORMAT_NO_HEED, heed_len());
        let (_, back) = decode(&old).unwrap();
        assert!(
            same(&s, &back),
            "a format-4 state decodes to the same state"
        );
        assert!(back.ceiling.permission.seen && back.heed.standing.is_none());
    }

    /// A format-6 state (written before loopgate noted when it wrote it) is read whole, with no
    /// time of writing: the next call judges nothing from it and notes one.
    #[test]
    fn a_format_six_state_is_read_without_a_time_of_writing() {
        let mut s = full_state();
        s.halts = Halts::default();
        s.budget = LoopBudget::default();
        s.failed_prompts.clear();
        s.failed_prompts.clear();
        let old = older(&s, FORMAT_NO_WRITTEN, 0);
        let (_, back) = decode(&old).unwrap();
        assert!(
            same(&s, &back),
            "a format-6 state decodes to the same state"
        );
        assert_eq!(back.written, Written::default());
        let mut now = s.clone();
        now.written = Written {
            at_ms: 1_700_000_000_000,
            skew_ms: Some(-3),
        };
        let (_, back) = decode(&encode(&now, 1).unwrap()).unwrap();
        assert_eq!(back.written, now.written);
    }

    /// A format-7 state (written before the breaker kept its turns' prompts) is read whole; its
    /// breaker knows no prompt to refuse, so every prompt goes ahead until a turn is counted.
    #[test]
    fn a_format_seven_state_is_read_without_the_breakers_prompts() {
        let mut s = full_state();
        s.halts = Halts::default();
        s.budget = LoopBudget::default();
        s.failed_prompts.clear();
        s.written = Written {
            at_ms: 1_700_000_000_000,
            skew_ms: Some(-3),
        };
        let old = cut(&s, FORMAT_NO_FAILED_PROMPTS, 1 + halts_len() + budget_len());
        let (_, back) = decode(&old).unwrap();
        assert!(
            same(&s, &back),
            "a format-7 state decodes to the same state"
        );
        let mut now = s.clone();
        now.failed_prompts.push_back(Digest16::of(b"make it pass"));
        let (_, back) = decode(&encode(&now, 1).unwrap()).unwrap();
        assert_eq!(back.failed_prompts, now.failed_prompts);
    }

    /// `s` encoded as `format`, without its last `tail` bytes: what that format lacks.
    fn cut(s: &SessionState, format: u16, tail: usize) -> Vec<u8> {
        let mut old = encode_as(s, 9, format).unwrap();
        old.truncate(old.len() - tail);
        let len = (old.len() - HEADER) as u32;
        old[16..20].copy_from_slice(&len.to_le_bytes());
        let crc = checksum(&old[..20], &old[HEADER..]);
        old[20..24].copy_from_slice(&crc.to_le_bytes());
        old
    }

    fn halts_len() -> usize {
        postcard::to_allocvec(&Halts::default()).unwrap().len()
    }

    fn budget_len() -> usize {
        postcard::to_allocvec(&LoopBudget::default()).unwrap().len()
    }

    /// A format-10 state (written before the loop budget) is read whole, with no loop spend.
    #[test]
    fn a_format_ten_state_is_read_without_loop_spend() {
        let mut s = full_state();
        s.budget = LoopBudget::default();
        let old = cut(&s, FORMAT_NO_BUDGET, budget_len());
        let (_, back) = decode(&old).unwrap();
        assert!(
            same(&s, &back),
            "a format-10 state decodes to the same state"
        );
        let mut now = s.clone();
        now.budget.usd = 1.5;
        now.budget.since_ms = Some(7);
        now.budget.detectors.push("repeat".into());
        let (_, back) = decode(&encode(&now, 1).unwrap()).unwrap();
        assert_eq!(back.budget, now.budget);
    }

    /// A format-9 or format-8 state (written before halts were kept) is read whole, with no
    /// halt: `loopgate halted` says the session was not halted, and its next halt is its first.
    #[test]
    fn a_format_nine_or_eight_state_is_read_without_halts() {
        let mut s = full_state();
        s.halts = Halts::default();
        s.budget = LoopBudget::default();
        for format in [FORMAT_NO_HALTS, FORMAT_NO_UNDER_WAY] {
            let old = cut(&s, format, halts_len() + budget_len());
            let (_, back) = decode(&old).unwrap();
            assert!(
                same(&s, &back),
                "a format-{format} state decodes to the same state"
            );
        }
        let mut now = s.clone();
        now.halts.count = 2;
        now.halts.last = Some(crate::judge::halt::Halt {
            code: "turn_ceiling".into(),
            continued_ms: Some(5),
            ..Default::default()
        });
        let (_, back) = decode(&encode(&now, 1).unwrap()).unwrap();
        assert_eq!(back.halts, now.halts);
    }

    /// A format-5 state (written before the configuration baseline) keeps what it heeded and
    /// has no baseline: the next call takes the configuration in effect as it.
    #[test]
    fn a_format_five_state_is_read_without_a_config_baseline() {
        let mut s = full_state();
        s.halts = Halts::default();
        s.budget = LoopBudget::default();
        s.failed_prompts.clear();
        s.heed.turn = 3;
        s.heed.config = Vec::new();
        let old = older(&s, FORMAT_NO_CONFIG, 1);
        let (_, back) = decode(&old).unwrap();
        assert!(
            same(&s, &back),
            "a format-5 state decodes to the same state"
        );
        assert_eq!(back.heed.turn, 3);
        assert!(back.heed.config.is_empty());
    }

    #[test]
    fn the_previous_format_with_entries_field_by_field_is_still_read() {
        let s = full_state();
        let old = {
            let _by_field = crate::judge::ledger::block::LegacyEntries::new();
            encode_as(&s, 7, FORMAT_ENTRIES_BY_FIELD).unwrap()
        };
        let new = encode(&s, 7).unwrap();
        assert_ne!(
            old[HEADER..],
            new[HEADER..],
            "the two formats lay entries out differently"
        );
        let (g, back) = decode(&old).unwrap();
        assert_eq!(g, 7);
        assert!(
            same(&s, &back),
            "a format-1 state decodes to the same state"
        );
        // Read as the new format, the old body is an error (caught by the format, not misread).
        let mut relabelled = old.clone();
        relabelled[4..6].copy_from_slice(&FORMAT.to_le_bytes());
        let crc = checksum(&relabelled[..20], &relabelled[HEADER..]);
        relabelled[20..24].copy_from_slice(&crc.to_le_bytes());
        assert!(decode(&relabelled).is_err());
    }
}
