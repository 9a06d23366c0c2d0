//! The observation ledger: one record of what each call did and returned, the single source of
//! truth every detector reads. Nothing else counts repeats; a detector is a pure function of the
//! ledger, the world state and the call in front of it.
//!
//! The world state is content-addressed: the digest of every file the agent changed, and the
//! state id is the digest of that map. A change is progress only when it produces a state never
//! seen before in the session — a revert, the same content rewritten or a write then a delete is
//! activity, not progress, and the calls around it stay repeats.

pub mod block;

use crate::judge::outcome::ErrorClass;
use crate::protocol::tool::ToolClass;
use crate::util::canon::Digest16;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Ledger records kept per agent: enough for every window a detector reads (a spaced poll's 20
/// answers with a sleep between each, cycles of period up to 8 seen twice).
pub const MAX_ENTRIES: usize = 96;
/// Calls started and not yet finished (parallel batches are at most a few dozen).
pub const MAX_PENDING: usize = 48;
/// Files whose content the world state tracks; the least recently changed are forgotten.
pub const MAX_FILES: usize = 256;
/// World states remembered as seen.
pub const MAX_SEEN: usize = 256;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
    /// Rejected by Claude Code's input validation before it ran (an Edit whose text is missing).
    Rejected,
    /// The person or plan mode refused it: not a failure, not an answer.
    Refused,
    /// Cancelled (a sibling in the batch failed, or an interrupt): not a failure, not an answer.
    Cancelled,
    /// Denied by loopgate (or another PreToolUse hook): it never ran.
    Denied,
}

impl Status {
    /// An answer the call itself gave: what repeats and same-answer rules compare.
    pub fn answered(self) -> bool {
        matches!(self, Status::Ok | Status::Failed | Status::Rejected)
    }

    pub fn failed(self) -> bool {
        matches!(self, Status::Failed | Status::Rejected)
    }
}

/// One finished (or denied) call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// Call identity: tool + canonical input.
    pub key: Digest16,
    /// A hash of Claude Code's `tool_use_id` (0 when there was none), to recognise a call the
    /// batch event reports again.
    #[serde(default)]
    pub id: u64,
    /// Short strings are kept inline (`CompactString`): decoding a 96-entry ledger on every call
    /// then allocates nothing for the usual tool name and target.
    pub tool: CompactString,
    /// What messages name the call by (`npm test`, a file path), clipped and secret-masked.
    pub target: CompactString,
    pub class: ToolClass,
    pub status: Status,
    /// The normalised answer, `None` when it carried no information (empty output, "ok").
    /// For file changes, the file's content after the call.
    pub answer: Option<Digest16>,
    /// The answer with numbers and ids masked.
    pub shape: Option<Digest16>,
    #[serde(default)]
    pub rich: bool,
    #[serde(default)]
    pub error_class: Option<ErrorClass>,
    /// For a failure, the start of the masked error text, for the message that quotes it.
    #[serde(default)]
    pub preview: String,
    /// Progress epoch when the call started and after its effect was folded in: the epoch moves
    /// only when a state never seen before appears (or the user says something new).
    pub epoch: u32,
    pub epoch_after: u32,
    /// The call produced a new state of the work.
    pub novel: bool,
    /// Real waiting preceded the call: a sleep in it or just before it, or minutes since its
    /// previous answer.
    pub waited: bool,
    /// The call itself waits on purpose (`sleep 30`).
    #[serde(default)]
    pub sleeps: bool,
    /// Its answer said that what it reports on is still under way (a command it left running in
    /// the background, a CI run in progress): no outcome yet, so asking again is a wait. A
    /// command's flag is cleared when a poll brings its outcome. Stored in the sleeps flag's
    /// byte of the entry block; not part of the by-field format 1.
    #[serde(skip)]
    pub under_way: bool,
    /// The answer was news when it came: a first answer with content, or unlike the call's
    /// previous one (judged then, against the ledger of that moment). Stored in the novel flag's
    /// byte of the entry block; not part of the by-field format 1.
    #[serde(skip)]
    pub news: bool,
    pub start_ms: u64,
    pub end_ms: u64,
    pub turn: u32,
    pub batch: u32,
}

impl Entry {
    pub fn id_of(tool_use_id: &str) -> u64 {
        if tool_use_id.is_empty() {
            return 0;
        }
        let d = Digest16::of(tool_use_id.as_bytes());
        u64::from_le_bytes(d.0[..8].try_into().expect("8 bytes"))
    }
}

/// A call whose PreToolUse was seen and whose answer has not come yet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub id: String,
    pub key: Digest16,
    pub target: CompactString,
    pub start_ms: u64,
    pub epoch: u32,
    pub waited: bool,
    pub denied: bool,
}

/// The agent's ledger and its calls in flight.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Ledger {
    #[serde(with = "crate::judge::ledger::block")]
    pub entries: VecDeque<Entry>,
    pub pending: VecDeque<Pending>,
}

impl Ledger {
    pub fn push(&mut self, e: Entry) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back(e);
    }

    pub fn start(&mut self, p: Pending) {
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back(p);
    }

    /// The pending call a Post event reports on: by `tool_use_id`, else the oldest pending call
    /// with the same identity (payloads without ids).
    pub fn take_pending(&mut self, id: &str, key: Option<&Digest16>) -> Option<Pending> {
        let at = if !id.is_empty() {
            self.pending.iter().position(|p| p.id == id)
        } else {
            let key = key?;
            self.pending.iter().position(|p| &p.key == key && !p.denied)
        }?;
        self.pending.remove(at)
    }

    pub fn pending_by_id(&self, id: &str) -> Option<&Pending> {
        (!id.is_empty())
            .then(|| self.pending.iter().find(|p| p.id == id))
            .flatten()
    }

    /// Entries that gave an answer, newest first.
    pub fn answers(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().rev().filter(|e| e.status.answered())
    }

    /// Whether the call with this `tool_use_id` is already in the ledger.
    pub fn finished(&self, tool_use_id: &str) -> bool {
        let id = Entry::id_of(tool_use_id);
        id != 0 && self.entries.iter().rev().any(|e| e.id == id)
    }

    pub fn last_answer_of(&self, key: &Digest16) -> Option<&Entry> {
        self.answers().find(|e| &e.key == key)
    }
}

/// The content-addressed state of the work, shared by every agent of the session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct World {
    /// Path digest → content digest (a deleted file has the digest of nothing, [`ABSENT`]).
    pub files: BTreeMap<Digest16, FileState>,
    /// The current state id: the digest of `files`.
    pub id: Digest16,
    pub seen: VecDeque<Digest16>,
    /// Moves with every state never seen before and every new prompt.
    pub epoch: u32,
    /// New states seen so far (for the turn and breaker accounting).
    pub novel_states: u32,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct FileState {
    pub content: Digest16,
    /// Order of the latest change, for forgetting the least recently changed file.
    pub seq: u64,
}

/// What a file is when it is not there.
pub const ABSENT: Digest16 = Digest16([0; 16]);

impl World {
    /// Folds the contents of changed files into the state. Returns whether the resulting state
    /// is new to the session (and then moves the epoch).
    pub fn apply(&mut self, changes: &[(Digest16, Digest16)]) -> bool {
        if changes.is_empty() {
            return false;
        }
        if self.seen.is_empty() {
            // The state before loopgate saw any change is a state too: coming back to it is not new.
            self.id = self.state_id();
            self.remember(self.id);
        }
        let seq = self.files.values().map(|f| f.seq).max().unwrap_or(0) + 1;
        for (path, content) in changes {
            self.files.insert(
                *path,
                FileState {
                    content: *content,
                    seq,
                },
            );
        }
        while self.files.len() > MAX_FILES {
            if let Some(oldest) = self
                .files
                .iter()
                .min_by_key(|(_, f)| f.seq)
                .map(|(k, _)| *k)
            {
                self.files.remove(&oldest);
            }
        }
        self.id = self.state_id();
        let novel = !self.seen.contains(&self.id);
        if novel {
            self.remember(self.id);
            self.epoch += 1;
            self.novel_states += 1;
        }
        novel
    }

    /// A file's content before it was first changed is unknown to loopgate; if it is known now,
    /// the state id holds it. Files never changed by the agent are not part of the state.
    fn state_id(&self) -> Digest16 {
        let mut parts: Vec<&[u8]> = Vec::with_capacity(self.files.len() * 2);
        for (path, f) in &self.files {
            parts.push(&path.0);
            parts.push(&f.content.0);
        }
        Digest16::of_parts(&parts)
    }

    fn remember(&mut self, id: Digest16) {
        if self.seen.len() >= MAX_SEEN {
            self.seen.pop_front();
        }
        self.seen.push_back(id);
    }

    /// What a file held before the agent first changed it: part of the state the session started
    /// from, so coming back to it is not new.
    pub fn observe_before(&mut self, path: Digest16, content: Digest16) {
        if self.files.contains_key(&path) {
            return;
        }
        if self.seen.is_empty() {
            self.id = self.state_id();
            self.remember(self.id);
        }
        self.files.insert(path, FileState { content, seq: 0 });
        self.id = self.state_id();
        self.remember(self.id);
    }

    /// A change loopgate could not see whole: counted as a new state, since nothing proves it
    /// is not (leaning to "progress" never blocks real work).
    pub fn apply_unknown(&mut self, now_ms: u64) -> bool {
        let marker = Digest16::of(b"\0unknown change");
        self.apply(&[(marker, Digest16::of(&now_ms.to_le_bytes()))])
    }

    /// The user said something new: every earlier streak ends here.
    pub fn new_prompt(&mut self) {
        self.epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Digest16 {
        Digest16::of(s.as_bytes())
    }

    #[test]
    fn only_a_state_never_seen_is_progress() {
        let mut w = World::default();
        let a = d("a.txt");
        assert!(w.apply(&[(a, d("v1"))]), "first content is new");
        assert!(!w.apply(&[(a, d("v1"))]), "the same content rewritten");
        assert!(w.apply(&[(a, d("v2"))]), "new content");
        assert!(!w.apply(&[(a, d("v1"))]), "a revert");
        // Deleting a file loopgate first saw being changed is new once: its content before the
        // session is unknown, so "absent" is not assumed to be where it started.
        assert!(w.apply(&[(a, ABSENT)]), "the first delete");
        let epoch = w.epoch;
        assert!(!w.apply(&[(a, d("v1"))]), "written again after the delete");
        assert!(!w.apply(&[(a, ABSENT)]), "deleted again");
        assert_eq!(w.epoch, epoch);
    }

    #[test]
    fn tool_classes_cover_mcp_queries() {
        assert_eq!(ToolClass::of("mcp__k8s__get_pods"), ToolClass::Read);
        assert_eq!(
            ToolClass::of("mcp__github__create_comment"),
            ToolClass::Other
        );
        assert_eq!(ToolClass::of("TaskList"), ToolClass::Read);
        assert!(ToolClass::of("Grep").read_only());
        assert!(ToolClass::of("MultiEdit").changes_files());
    }

    #[test]
    fn the_ledger_stays_bounded() {
        let mut l = Ledger::default();
        for i in 0..(MAX_ENTRIES * 3) as u64 {
            l.start(Pending {
                id: format!("t{i}"),
                key: d("k"),
                target: CompactString::default(),
                start_ms: i,
                epoch: 0,
                waited: false,
                denied: false,
            });
        }
        assert_eq!(l.pending.len(), MAX_PENDING);
        assert!(l
            .take_pending(&format!("t{}", MAX_ENTRIES * 3 - 1), None)
            .is_some());
    }
}
