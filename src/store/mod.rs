//! The state directory: one binary state file per session ([`crate::store::codec`]), guarded by a
//! separate lock file that spans the whole read–modify–write.
//!
//! Loop counters are a cache of recent calls, not user data, so a state is written in place, with
//! no fsync, into one of two slots of its file, alternately: slot 0 at offset 0, slot 1 at
//! [`SLOT`]. A writer killed mid-write leaves a slot whose checksum fails and the other slot
//! intact; the reader takes the valid slot with the higher generation. No temp file, no rename
//! (on ext4 a rename over an existing file starts writeback), nothing to clean up. A power loss
//! can cost the last few seconds of counts; a file with no valid slot is moved aside and the
//! session starts fresh — never misread.
//!
//! Every file is opened through [`platform::open_private_rw`]: a symlink, FIFO or device planted in
//! the state dir is refused (and a state path that is one is moved aside), never followed or read.

pub mod budget;
pub mod codec;
pub mod events;
pub mod gc;
pub mod journal;
pub mod lock;
pub mod notice;
pub mod outer_loop;
pub mod resume;
pub mod seen;
use crate::judge::state::SessionState;
use crate::platform;
use anyhow::{anyhow, bail, Context, Result};
use lock::{lock_within, LockBusy};
use std::cell::{Cell, RefCell};
use std::fs::{self, File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where slot 1 starts, and so the largest encoded state (header included) a slot holds.
pub const SLOT: u64 = 256 << 10;
/// A state file larger than two slots cannot be ours: treat it as corrupt.
const MAX_STATE_BYTES: u64 = 2 * SLOT;
/// Extension of session state files.
pub const EXT: &str = "state";

pub struct Store {
    dir: PathBuf,
    /// What [`Store::open`] had to repair on the way (a mode put back, a thing moved aside),
    /// for the caller to tell the person.
    healed: Vec<String>,
}

/// Held for the whole read–modify–write; the OS drops the lock when the process exits, even on a
/// crash, so no stale-lock cleanup is ever needed.
pub struct SessionLock {
    file: File,
    state_path: PathBuf,
    /// A state was saved for this session before (the lock file carries a mark): a missing state
    /// file then means it vanished.
    known: bool,
    /// The lock file's length, which is its mark ([`Mark`]): odd once a state was saved, bit 1
    /// set while a journal waits to be merged ([`crate::store::journal`]), 16 added once the
    /// file holds the generation of the state last saved and the change time of that save. Read by the `stat` the lock takes
    /// anyway, so the common case pays nothing to learn there is no journal.
    mark: Cell<u64>,
    /// The generation read from the state file is older than the one the lock recorded: an
    /// earlier copy of the state was put back (found, recorded).
    put_back: Cell<Option<(u64, u64)>>,
    /// The lock file was not a regular file of ours and was moved aside.
    pub healed: Option<Quarantined>,
    /// The open state file and the slot and generation it was read from.
    state: RefCell<Option<File>>,
    slot: Cell<Option<(u64, u64)>>,
    /// The state file's change time (ms, the file system's clock) when it was read.
    changed_ms: Cell<Option<i64>>,
}

impl SessionLock {
    /// The session's state file (files about the session sit beside it, named by its stem).
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// When the state file read was last written, by whoever wrote it (the file system's change
    /// time, which no tool sets on Unix; the last-write time on Windows).
    pub fn state_changed_ms(&self) -> Option<i64> {
        self.changed_ms.get()
    }

    /// Whether a state was saved for this session by an earlier call.
    pub fn session_known(&self) -> bool {
        self.known
    }

    /// No state was ever saved for this session and none lies in its place, of either format:
    /// one can be written without anything to report or move aside first.
    pub fn session_is_new(&self) -> bool {
        let absent = |p: &Path| fs::symlink_metadata(p).is_err();
        !self.known && absent(&self.state_path) && absent(&legacy_path(&self.state_path))
    }

    /// Calls judged while the lock was held elsewhere wait in the journal to be merged.
    pub fn journal_pending(&self) -> bool {
        Mark(self.mark.get()).journal()
    }

    /// The state read is older than the one loopgate last saved for this session: (the
    /// generation found, the generation saved). A copy of the state file put back cannot hide
    /// it, however soon after the copy, since the generation saved is kept in the lock file.
    pub fn put_back(&self) -> Option<(u64, u64)> {
        self.put_back.get()
    }

    /// The journal beside this session's state.
    pub fn journal_path(&self) -> PathBuf {
        self.state_path.with_extension(crate::store::journal::EXT)
    }

    /// Sets or clears the journal mark (the state is saved: the session is known either way).
    pub fn mark_journal_pending(&self, pending: bool) {
        let len = self.mark.get() & !3 | 1 | u64::from(pending) << 1;
        if self.file.set_len(len).is_ok() {
            self.mark.set(len);
        }
    }
}

/// The session lock was held by another process past the deadline: this call's update goes to
/// the journal instead ([`crate::store::journal`]).
pub struct Busy {
    file: File,
    mark: u64,
    pub waited: Duration,
    state_path: PathBuf,
}

impl Busy {
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    pub fn journal_path(&self) -> PathBuf {
        self.state_path.with_extension(crate::store::journal::EXT)
    }

    /// Marks the lock file so the next holder merges the journal and the next waiter waits only
    /// [`BUSY_WAIT`]. The mark is the file's length: no lock is needed to set it. Read afresh: a
    /// holder may have cleared it since this call found the lock busy.
    pub fn mark_journal(&self) {
        let mark = Mark(self.file.metadata().map_or(self.mark, |m| m.len()));
        if !mark.journal() {
            let _ = self.file.set_len(mark.0 | 2);
        }
    }
}

/// What taking a session lock gave.
pub enum Held {
    Locked(SessionLock),
    Busy(Busy),
}

/// How long a call waits for a lock already found held past the deadline by an earlier call (the
/// journal mark is set and no holder has merged since): long enough for loopgate's own holders,
/// which keep the lock a few milliseconds per call, short enough that a wedged or hostile holder
/// costs each call no more than this. Nothing is lost by giving up: the call goes to the journal.
pub const BUSY_WAIT: Duration = Duration::from_millis(100);

/// Where a state of the first (JSON) format lies beside today's state file.
fn legacy_path(state_path: &Path) -> PathBuf {
    state_path.with_extension("json")
}

/// A state that could not be used was moved here; the caller reports it.
pub struct Quarantined {
    pub path: PathBuf,
    pub why: String,
}

impl Store {
    /// Opens (creating if needed, owner-only) the state directory, repairing nothing: a dir that
    /// someone else owns, that others may write to, or whose `sessions` is not a real directory is
    /// refused. For the commands a person runs (`status`, `doctor`…), which report and change
    /// nothing; a hook call uses [`Store::open_healing`].
    pub fn open(dir: &Path) -> Result<Store> {
        Self::open_with(dir, true, false)
    }

    /// Opens the state directory for a hook call. What an agent can do to it is undone here
    /// rather than refused for ever: a mode that opens it to others or locks us out is put back;
    /// a `sessions` that is a file, a link or another user's, or a state dir that is a file or
    /// another user's, is moved aside (never deleted) and made again. What is left unusable (a
    /// path through a file, a dir we may not rename) is an error: the caller falls back elsewhere.
    pub fn open_healing(dir: &Path) -> Result<Store> {
        Self::open_with(dir, true, true)
    }

    /// [`Store::open_healing`] for a dir that only loopgate ever makes (the private fallback): a
    /// link in its place was planted, and is moved aside like any other bad thing.
    pub fn open_fallback(dir: &Path) -> Result<Store> {
        Self::open_with(dir, false, true)
    }

    fn open_with(dir: &Path, follow: bool, heal: bool) -> Result<Store> {
        let sessions = dir.join("sessions");
        // The common case (both exist and are fine) costs two `stat`s.
        if let Ok(m) = fs::symlink_metadata(&sessions) {
            if m.file_type().is_dir()
                && platform::dir_fault(&m).is_none()
                && if follow {
                    fs::metadata(dir)
                } else {
                    fs::symlink_metadata(dir)
                }
                .is_ok_and(|m| m.is_dir() && platform::dir_fault(&m).is_none())
            {
                return Ok(Store {
                    dir: dir.to_path_buf(),
                    healed: Vec::new(),
                });
            }
        }
        let mut healed = Vec::new();
        if !heal {
            for (d, follow) in [(dir, follow), (sessions.as_path(), false)] {
                if fs::symlink_metadata(d).is_err() {
                    create_private_dir(d)?;
                }
                check_dir(d, follow)?;
            }
        } else {
            heal_dir(dir, follow, &mut healed)?;
            heal_dir(&sessions, false, &mut healed)?;
        }
        Ok(Store {
            dir: dir.to_path_buf(),
            healed,
        })
    }

    /// What opening the store repaired, to be told once (the repair does not happen again).
    pub fn take_healed(&mut self) -> Vec<String> {
        std::mem::take(&mut self.healed)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The platform's state directory for loopgate (see [`crate::config::paths`]).
    pub fn default_dir() -> Option<PathBuf> {
        crate::config::paths::state_dir()
    }

    /// The private per-user fallback when the configured state dir is unusable
    /// ([`platform::fallback_state_dir`]).
    pub fn fallback_dir() -> Option<PathBuf> {
        Some(platform::fallback_state_dir())
    }

    /// Session ids are untrusted: the file name is a hash, so no id can name a path.
    pub fn stem(session_id: &str) -> String {
        crate::util::canon::text_key(session_id)
    }

    fn path(&self, stem: &str, ext: &str) -> PathBuf {
        self.dir.join("sessions").join(format!("{stem}.{ext}"))
    }

    /// Takes the session lock, waiting at most `timeout`: a wedged peer must never hang the agent.
    /// A lock still held at the deadline is a [`LockBusy`] error.
    pub fn lock(&self, session_id: &str, timeout: Duration) -> Result<SessionLock> {
        self.lock_stem(&Self::stem(session_id), timeout)
    }

    pub fn lock_stem(&self, stem: &str, timeout: Duration) -> Result<SessionLock> {
        match self.lock_or_busy(stem, timeout)? {
            Held::Locked(l) => Ok(l),
            Held::Busy(b) => Err(anyhow!(LockBusy(b.waited)).context(format!(
                "session state stayed locked by another process for {} ms",
                b.waited.as_millis()
            ))),
        }
    }

    /// Takes the session lock, or says it is busy (see [`Held`]). A lock file that is not a
    /// regular file of ours (a directory, FIFO, link, another user's file) is moved aside and a
    /// fresh one made: an agent that broke it switched nothing off.
    pub fn lock_or_busy(&self, stem: &str, timeout: Duration) -> Result<Held> {
        let lock_path = self.path(stem, "lock");
        let mut healed = None;
        loop {
            let retry = healed.is_none();
            let file = match open_nofollow(&lock_path, true) {
                Ok(f) => f,
                Err(e) => match fs::symlink_metadata(&lock_path)
                    .ok()
                    .and_then(|m| not_a_file_of_ours(&m))
                {
                    Some(why) if retry => {
                        healed = Some(Quarantined {
                            path: move_aside(&lock_path)?,
                            why,
                        });
                        continue;
                    }
                    _ => {
                        return Err(anyhow!(e)
                            .context(format!("cannot open lock file {}", lock_path.display())))
                    }
                },
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    // Only when contended: a mark left by a call that found the lock busy cuts
                    // the wait (see `BUSY_WAIT`).
                    let meta = file.metadata().with_context(|| {
                        format!("cannot stat lock file {}", lock_path.display())
                    })?;
                    let wait = if Mark(meta.len()).journal() {
                        timeout.min(BUSY_WAIT)
                    } else {
                        timeout
                    };
                    match lock_within(&file, &lock_path, wait, "session state") {
                        Ok(()) => {}
                        Err(e) if e.downcast_ref::<LockBusy>().is_some() => {
                            if let Some(why) = not_a_file_of_ours(&meta).filter(|_| retry) {
                                drop(file);
                                healed = Some(Quarantined {
                                    path: move_aside(&lock_path)?,
                                    why,
                                });
                                continue;
                            }
                            return Ok(Held::Busy(Busy {
                                file,
                                mark: meta.len(),
                                waited: wait,
                                state_path: self.path(stem, EXT),
                            }));
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(TryLockError::Error(e)) => {
                    return Err(anyhow!(e).context(format!("cannot lock {}", lock_path.display())))
                }
            }
            // One `stat`, after the lock: the file's type and owner, and the mark an earlier call
            // may have written while this one waited.
            let meta = file
                .metadata()
                .with_context(|| format!("cannot stat lock file {}", lock_path.display()))?;
            if let Some(why) = not_a_file_of_ours(&meta) {
                if !retry {
                    bail!("lock file {} is {why}", lock_path.display());
                }
                drop(file);
                healed = Some(Quarantined {
                    path: move_aside(&lock_path)?,
                    why,
                });
                continue;
            }
            return Ok(Held::Locked(SessionLock {
                file,
                state_path: self.path(stem, EXT),
                known: Mark(meta.len()).known(),
                mark: Cell::new(meta.len()),
                put_back: Cell::new(None),
                healed,
                state: RefCell::new(None),
                slot: Cell::new(None),
                changed_ms: Cell::new(None),
            }));
        }
    }

    /// Reads the session state. Unusable state is moved aside (never deleted) and `None`
    /// returned, so one bad file costs a session its history, not its agent.
    pub fn load(&self, lock: &SessionLock) -> Result<(Option<SessionState>, Option<Quarantined>)> {
        let path = &lock.state_path;
        let file = match open_nofollow(path, false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((None, self.quarantine_legacy(path)?));
            }
            Err(e) => {
                // A symlink (ELOOP) or something else that is not a plain file: move it aside.
                let why = match fs::symlink_metadata(path) {
                    Ok(m) if m.file_type().is_symlink() => "a symlink",
                    Ok(m) if !m.file_type().is_file() => "not a regular file",
                    _ => return Err(anyhow!(e).context(format!("cannot open {}", path.display()))),
                };
                return Ok((None, Some(quarantine(path, why)?)));
            }
        };
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat {}", path.display()))?;
        let why = if let Some(why) = not_a_file_of_ours(&meta) {
            why
        } else if meta.len() > MAX_STATE_BYTES {
            format!("{} bytes", meta.len())
        } else {
            match read_slots(&file, meta.len()) {
                Ok((slot, generation, state)) => {
                    lock.slot.set(Some((slot, generation)));
                    let mark = Mark(lock.mark.get());
                    let (saved, ctime) = if mark.holds_generation() {
                        saved_record(&lock.file, mark)
                    } else {
                        (None, None)
                    };
                    // Older than loopgate's last save, or written since by anything else (the
                    // file's change time, which no tool sets, is not the one loopgate's own
                    // write left): a copy put back, whether the lock file went back with it or
                    // not, and however soon.
                    let written_since =
                        ctime.is_some_and(|c| c != platform::change_ns(&meta) as i64);
                    if let Some(saved) = saved.filter(|&s| generation < s || written_since) {
                        lock.put_back.set(Some((generation, saved)));
                    }
                    let ms = platform::change_ns(&meta).div_euclid(1_000_000);
                    lock.changed_ms.set(i64::try_from(ms).ok());
                    *lock.state.borrow_mut() = Some(file);
                    return Ok((Some(state), None));
                }
                Err(why) => why,
            }
        };
        drop(file);
        Ok((None, Some(quarantine(path, &why)?)))
    }

    /// A state file of the previous (JSON) format is moved aside whole, never parsed.
    fn quarantine_legacy(&self, path: &Path) -> Result<Option<Quarantined>> {
        let legacy = legacy_path(path);
        if fs::symlink_metadata(&legacy).is_err() {
            return Ok(None);
        }
        let aside = path.with_extension(format!(
            "legacy-json-{}-{}",
            crate::platform::clock::now_ms(),
            std::process::id()
        ));
        fs::rename(&legacy, &aside)
            .with_context(|| format!("cannot move {} aside", legacy.display()))?;
        Ok(Some(Quarantined {
            path: aside,
            why: "a state file from an earlier loopgate version (JSON)".into(),
        }))
    }

    /// Writes the state into the slot it was not read from, in place, without fsync, stamped
    /// with the system clock: every write of loopgate's is its own, so a later change time is
    /// someone else's (`hook::session::restored`).
    pub fn save(&self, lock: &SessionLock, state: &mut SessionState) -> Result<()> {
        state.written.at_ms = crate::platform::clock::wall_ms();
        let (slot, generation) = match lock.slot.get() {
            // No session saves 2^62 times: a generation this high was forged (or is garbage
            // that passed the checksum). Counting on from it would wrap, and the reader would
            // keep taking the high slot for ever, freezing the session. Start again from 1 in
            // the other slot, then overwrite the high one with 2.
            Some((slot, g)) if g >= RESTART_GENERATION => {
                self.write_slot(lock, state, 1 - slot, 1)?;
                (slot, 2)
            }
            Some((slot, g)) => (1 - slot, g + 1),
            None => (0, 1),
        };
        self.write_slot(lock, state, slot, generation)
    }

    fn write_slot(
        &self,
        lock: &SessionLock,
        state: &SessionState,
        slot: u64,
        generation: u64,
    ) -> Result<()> {
        // Secrets never reach the state: every text it keeps from a payload (targets, error
        // previews, decision summaries, an escalation's reason) is masked where it enters.
        let bytes = codec::encode(state, generation)
            .map_err(|e| anyhow!("cannot encode session state: {e}"))?;
        if bytes.len() as u64 > SLOT {
            bail!(
                "session state grew to {} bytes, past its {} KiB slot",
                bytes.len(),
                SLOT >> 10
            );
        }
        let mut held = lock.state.borrow_mut();
        if held.is_none() {
            *held = Some(
                open_nofollow(&lock.state_path, true)
                    .with_context(|| format!("cannot create {}", lock.state_path.display()))?,
            );
        }
        let file = held.as_ref().expect("opened above");
        platform::write_all_at(file, &bytes, slot * SLOT)
            .with_context(|| format!("cannot write {}", lock.state_path.display()))?;
        lock.slot.set(Some((slot, generation)));
        // Record the generation saved and the change time this write left, out of a copy of
        // the state file's reach, so an earlier copy put back is noticed: by its generation
        // when only the state file goes back, by the change time when the lock file goes back
        // with it (the file system sets that time; no copy carries it). After the write: a
        // writer killed mid-write leaves the older slot to be read, and the older generation
        // recorded. One `fstat` on the file already open.
        let ctime = file
            .metadata()
            .map_or(0, |m| platform::change_ns(&m) as i64);
        let mark = Mark(lock.mark.get());
        if !mark.known() || !mark.holds_change_time() {
            // The first save: mark the session as having a state, so a state file that
            // vanishes is noticed, and make room for the record. The length first, the record
            // then, so the mark is never a record's length. Read afresh: a busy call may have
            // marked a journal since.
            let fresh = Mark(lock.file.metadata().map_or(mark.0, |m| m.len()));
            let next = Mark(CHANGE_TIME_HELD | (fresh.0 & 2) | 1);
            if lock.file.set_len(next.0).is_ok() {
                lock.mark.set(next.0);
            }
        }
        let mut record = [0u8; 16];
        record[..8].copy_from_slice(&generation.to_le_bytes());
        record[8..].copy_from_slice(&ctime.to_le_bytes());
        // Written in place, never by length, so a busy call's journal mark (the length) is
        // never written over.
        if Mark(lock.mark.get()).holds_change_time() {
            let _ = platform::write_all_at(&lock.file, &record, 0);
        }
        Ok(())
    }

    /// Session state files, by stem.
    pub fn sessions(&self) -> Vec<(String, PathBuf)> {
        let Ok(rd) = fs::read_dir(self.dir.join("sessions")) else {
            return Vec::new();
        };
        let mut out: Vec<(String, PathBuf)> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == EXT))
            .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
            .collect();
        out.sort();
        out
    }

    /// Reads a state without locking, for display (and for a call that could not get the lock):
    /// a slot being written fails its checksum, and the other slot is read instead.
    pub fn peek(path: &Path) -> Option<SessionState> {
        let file = platform::open_private_read(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() || meta.len() > MAX_STATE_BYTES {
            return None;
        }
        read_slots(&file, meta.len()).ok().map(|(_, _, s)| s)
    }

    /// The state file of a session, for [`Store::peek`].
    pub fn state_path(&self, session_id: &str) -> PathBuf {
        self.path(&Self::stem(session_id), EXT)
    }

    /// [`Store::state_path`] under `dir`, without opening the store (nothing is made or
    /// checked: for a reader that must not write, like the status line).
    pub fn state_path_in(dir: &Path, session_id: &str) -> PathBuf {
        dir.join("sessions")
            .join(format!("{}.{EXT}", Self::stem(session_id)))
    }
}

/// A generation past this is not one a session reached by saving (see [`Store::save`]).
const RESTART_GENERATION: u64 = 1 << 62;

/// The lock file's length as its mark: bit 0, a state was saved; bit 1, a journal waits;
/// [`CHANGE_TIME_HELD`] added, the file's first 16 bytes hold the generation of the state last
/// saved and the change time that save left on the state file (little-endian; a lock file of
/// the previous version holds the generation only, [`GENERATION_HELD`] added). The bits are
/// read by the `stat` every call takes of its lock; the record is read only when a state is
/// loaded, by one `pread` on the lock already open.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Mark(u64);

/// The length a lock file holding a generation has at least (its low bits stay the mark's).
const GENERATION_HELD: u64 = 8;
/// The length a lock file holding the generation and the state's change time has at least.
const CHANGE_TIME_HELD: u64 = 16;

impl Mark {
    fn known(self) -> bool {
        self.0 & 1 == 1
    }

    fn journal(self) -> bool {
        self.0 & 2 == 2
    }

    fn holds_generation(self) -> bool {
        self.0 >= GENERATION_HELD
    }

    fn holds_change_time(self) -> bool {
        self.0 >= CHANGE_TIME_HELD
    }
}

/// The generation of the state last saved and the change time its write left (when the lock
/// file holds one, and not 0: a save killed between the length and the record), by one `pread`.
fn saved_record(lock: &File, mark: Mark) -> (Option<u64>, Option<i64>) {
    let mut b = [0u8; 16];
    let n = if mark.holds_change_time() { 16 } else { 8 };
    if platform::read_exact_at(lock, &mut b[..n], 0).is_err() {
        return (None, None);
    }
    let generation = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let ctime = i64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
    (Some(generation), (ctime != 0).then_some(ctime))
}

/// The valid slot with the highest generation: (slot, generation, state), or why none is valid.
///
/// Only the two headers are read first; then only the newer slot's body (its announced length,
/// not the whole slot) is read and decoded, and the older slot only when the newer one fails its
/// checksum. A call's read costs the size of one state, not of two slots.
fn read_slots(file: &File, len: u64) -> Result<(u64, u64, SessionState), String> {
    let mut first_err = None;
    let mut candidates: Vec<(u64, u64, usize)> = Vec::with_capacity(2);
    for slot in 0..2u64 {
        let start = slot * SLOT;
        if len <= start {
            break;
        }
        let room = (len - start).min(SLOT) as usize;
        let mut head = [0u8; codec::HEADER];
        let n = room.min(codec::HEADER);
        if let Err(e) = platform::read_exact_at(file, &mut head[..n], start) {
            first_err.get_or_insert(e.to_string());
            continue;
        }
        match codec::peek_header(&head[..n]) {
            Ok((g, body)) if codec::HEADER + body <= room => candidates.push((g, slot, body)),
            Ok(_) => {
                first_err.get_or_insert(codec::Bad::Torn.to_string());
            }
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    // Newest first: the older slot is a fallback for a torn newer write.
    candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
    for (_, slot, body) in candidates {
        let mut buf = vec![0u8; codec::HEADER + body];
        if let Err(e) = platform::read_exact_at(file, &mut buf, slot * SLOT) {
            first_err.get_or_insert(e.to_string());
            continue;
        }
        match codec::decode(&buf) {
            Ok((g, state)) => return Ok((slot, g, state)),
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    Err(first_err.unwrap_or_else(|| "empty file".into()))
}

/// Makes `path` a private directory of ours, repairing what an agent could have done to it
/// (see [`Store::open_healing`]); each repair is described in `healed`. `follow`: a link to a good
/// directory is accepted (a state dir the user put elsewhere), not for `sessions`.
fn heal_dir(path: &Path, follow: bool, healed: &mut Vec<String>) -> Result<()> {
    let d = path.display();
    let meta = if follow {
        fs::metadata(path)
    } else {
        fs::symlink_metadata(path)
    };
    let why = match meta {
        Ok(m) if m.is_dir() => match platform::dir_fault(&m) {
            None => return Ok(()),
            Some(platform::DirFault::Mode(mode)) => {
                platform::restore_private_mode(path)
                    .with_context(|| format!("cannot make {d} owner-only again"))?;
                healed.push(format!(
                    "{d} had mode {mode:o}; it was made owner-only (700) again"
                ));
                return check_dir(path, follow);
            }
            Some(platform::DirFault::NotOurs(uid)) => format!("owned by uid {uid}"),
            Some(platform::DirFault::Link) => "a link".to_string(),
        },
        Ok(m) if m.file_type().is_symlink() => "a link".to_string(),
        Ok(m) => platform::special_kind(&m.file_type())
            .unwrap_or("a file")
            .to_string(),
        // A link to nothing: what it names is not ours to create.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            "a dangling link".to_string()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            create_private_dir(path)?;
            return check_dir(path, follow);
        }
        Err(e) => return Err(anyhow!(e).context(format!("cannot use state dir {d}"))),
    };
    let aside = move_aside(path)?;
    healed.push(format!(
        "{d} was {why}, not a private directory of ours; it was moved to {} and made again",
        aside.display()
    ));
    create_private_dir(path)?;
    check_dir(path, follow)
}

/// Whether a repaired (or new) directory is now what it should be: someone may be fighting us.
fn check_dir(path: &Path, follow: bool) -> Result<()> {
    let meta = if follow {
        fs::metadata(path)
    } else {
        fs::symlink_metadata(path)
    }
    .with_context(|| format!("cannot stat {}", path.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a directory", path.display());
    }
    if let Some(why) = platform::unsafe_dir_reason(path, &meta) {
        bail!(why);
    }
    Ok(())
}

/// Renames `path` to a unique name beside it (`<name>.corrupt-<ms>-<pid>`, which housekeeping
/// ages out like a quarantined state), never deleting it.
fn move_aside(path: &Path) -> Result<PathBuf> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".corrupt-{}-{}",
        crate::platform::clock::now_ms(),
        std::process::id()
    ));
    let aside = path.with_file_name(name);
    match fs::rename(path, &aside) {
        Ok(()) => Ok(aside),
        // Another call moved it first.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(aside),
        Err(e) => Err(anyhow!(e).context(format!("cannot move {} aside", path.display()))),
    }
}

/// Why a lock or state file is not a regular file of ours, if it is not.
fn not_a_file_of_ours(meta: &fs::Metadata) -> Option<String> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Some("a link".into());
    }
    if ft.is_dir() {
        return Some("a directory".into());
    }
    if !ft.is_file() {
        return Some(
            platform::special_kind(&ft)
                .unwrap_or("not a regular file")
                .into(),
        );
    }
    let own = platform::ownership(meta)?;
    (Some(own.uid) != platform::own_uid()).then(|| format!("owned by uid {}", own.uid))
}

fn quarantine(path: &Path, why: &str) -> Result<Quarantined> {
    let aside = path.with_extension(format!(
        "corrupt-{}-{}",
        crate::platform::clock::now_ms(),
        std::process::id()
    ));
    fs::rename(path, &aside)
        .with_context(|| format!("cannot move unusable state {} aside", path.display()))?;
    Ok(Quarantined {
        path: aside,
        why: why.to_string(),
    })
}

pub fn create_private_dir(dir: &Path) -> Result<()> {
    platform::create_private_dir(dir)
        .with_context(|| format!("cannot create state dir {}", dir.display()))
}

/// Opens (creating) a file readable by the owner only; a symlink is refused, never followed, and
/// anything but a regular file (a FIFO, a device) is refused before it is read or written.
pub fn open_private(path: &Path) -> std::io::Result<File> {
    let f = open_nofollow(path, true)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(f)
}

/// Read-write (creating it owner-only when `create`), never through a symlink, never blocking on
/// a FIFO.
fn open_nofollow(path: &Path, create: bool) -> std::io::Result<File> {
    platform::open_private_rw(path, create)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("st")).unwrap();
        (d, store)
    }

    fn lock(store: &Store) -> SessionLock {
        store.lock("s", Duration::from_millis(100)).unwrap()
    }

    fn saved(store: &Store, calls: u64) {
        let l = lock(store);
        let (st, q) = store.load(&l).unwrap();
        assert!(q.is_none());
        let mut st = st.unwrap_or_else(|| SessionState::new("s", 0));
        st.totals.calls = calls;
        store.save(&l, &mut st).unwrap();
    }

    fn calls(store: &Store) -> Option<u64> {
        let l = lock(store);
        let (st, q) = store.load(&l).unwrap();
        assert!(q.is_none(), "{}", q.unwrap().why);
        st.map(|s| s.totals.calls)
    }

    #[test]
    fn hostile_ids_stay_inside() {
        for id in ["../../x", "/etc/passwd", "a\0b", &"x".repeat(4096)] {
            let s = Store::stem(id);
            assert_eq!(s.len(), 32);
            assert!(s.chars().all(|c| c.is_ascii_hexdigit()));
        }
    }

    #[test]
    fn corrupt_state_is_moved_aside_not_deleted() {
        let (_d, store) = store();
        let lock = lock(&store);
        fs::write(&lock.state_path, b"{garbage").unwrap();
        let (state, q) = store.load(&lock).unwrap();
        assert!(state.is_none());
        let q = q.expect("quarantined");
        assert_eq!(fs::read(&q.path).unwrap(), b"{garbage");
        assert!(!lock.state_path.exists());
    }

    #[test]
    fn second_lock_times_out_as_busy() {
        let (_d, store) = store();
        let _held = lock(&store);
        let t = std::time::Instant::now();
        let e = store.lock("s", Duration::from_millis(50)).err().unwrap();
        assert!(e.downcast_ref::<LockBusy>().is_some(), "{e:#}");
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    #[cfg(unix)]
    fn round_trip_and_private_modes() {
        let (d, store) = store();
        let lock = lock(&store);
        store.save(&lock, &mut SessionState::new("s", 5)).unwrap();
        let (state, _) = store.load(&lock).unwrap();
        assert_eq!(state.unwrap().started_ms, 5);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d.path().join("st")), 0o700);
        assert_eq!(mode(&lock.state_path), 0o600);
    }

    /// A slot forged at the highest generation does not freeze the session: the next save starts
    /// the count again in both slots, and every later save is read back.
    #[test]
    fn a_generation_at_its_maximum_starts_again_instead_of_freezing() {
        let (_d, store) = store();
        saved(&store, 1);
        let path = lock(&store).state_path.clone();
        let forged = codec::encode(&SessionState::new("s", 0), u64::MAX).unwrap();
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        platform::write_all_at(&f, &forged, SLOT).unwrap();
        assert_eq!(calls(&store), Some(0), "the forged slot is the newest");
        for n in 2..=5 {
            saved(&store, n);
            assert_eq!(calls(&store), Some(n));
        }
    }

    #[test]
    fn slots_alternate_and_a_torn_slot_falls_back_to_the_other() {
        let (_d, store) = store();
        assert_eq!(calls(&store), None);
        for n in 1..=5 {
            saved(&store, n);
            assert_eq!(calls(&store), Some(n));
        }
        // Generation 5 went to slot 0 (1, 3, 5 in slot 0; 2, 4 in slot 1). Tear slot 0 as a
        // writer killed mid-write would: the previous update (4) is read back, not garbage.
        let path = lock(&store).state_path.clone();
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        platform::write_all_at(&f, &[0xff; 8], 30).unwrap();
        assert_eq!(calls(&store), Some(4));
        // The next save goes into the torn slot's twin, never over the good one.
        saved(&store, 6);
        assert_eq!(calls(&store), Some(6));
        assert!(Store::peek(&path).is_some());
    }

    #[test]
    fn a_header_announcing_more_than_its_slot_is_torn_and_the_other_slot_is_read() {
        let (_d, store) = store();
        saved(&store, 1);
        saved(&store, 2);
        saved(&store, 3);
        // Generation 3 is in slot 0: make its header claim a body longer than the slot.
        let path = lock(&store).state_path.clone();
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        platform::write_all_at(&f, &(SLOT as u32).to_le_bytes(), 16).unwrap();
        assert_eq!(
            calls(&store),
            Some(2),
            "the older slot, not a read past the slot"
        );
        // Both headers lying: nothing valid, the file is moved aside.
        platform::write_all_at(&f, &(SLOT as u32).to_le_bytes(), SLOT + 16).unwrap();
        let l = lock(&store);
        let (st, q) = store.load(&l).unwrap();
        assert!(st.is_none());
        assert!(q.expect("quarantined").why.contains("torn"));
    }

    #[test]
    fn torn_and_zeroed_files_are_quarantined_not_misread() {
        let (_d, store) = store();
        saved(&store, 1);
        let path = lock(&store).state_path.clone();
        let good = fs::read(&path).unwrap();
        for bad in [
            good[..good.len() / 2].to_vec(),
            vec![0u8; good.len()],
            vec![0u8; 2 * SLOT as usize],
            Vec::new(),
        ] {
            fs::write(&path, &bad).unwrap();
            let l = lock(&store);
            let (st, q) = store.load(&l).unwrap();
            assert!(st.is_none());
            let q = q.expect("quarantined");
            assert_eq!(fs::read(&q.path).unwrap(), bad, "moved aside byte for byte");
            assert!(!path.exists());
        }
    }

    #[test]
    fn a_json_state_of_the_previous_format_is_moved_aside_whole() {
        let (_d, store) = store();
        let l = lock(&store);
        let legacy = l.state_path.with_extension("json");
        let json = serde_json::to_vec(&SessionState::new("s", 1)).unwrap();
        fs::write(&legacy, &json).unwrap();
        let (st, q) = store.load(&l).unwrap();
        assert!(st.is_none(), "never parsed as a state");
        let q = q.expect("quarantined");
        assert!(q.why.contains("JSON"), "{}", q.why);
        assert_eq!(fs::read(&q.path).unwrap(), json);
        assert!(!legacy.exists());
        assert!(store.sessions().is_empty(), "not listed as a session");
    }

    #[test]
    #[cfg(unix)]
    fn symlinks_and_fifos_are_never_followed_or_read() {
        let (d, store) = store();
        let victim = d.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        let l = lock(&store);
        std::os::unix::fs::symlink(&victim, &l.state_path).unwrap();
        let (st, q) = store.load(&l).unwrap();
        assert!(st.is_none());
        assert!(q.expect("link moved aside").why.contains("symlink"));
        store.save(&l, &mut SessionState::new("s", 1)).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        // A FIFO as the state file: refused without blocking.
        let fifo_dir = tempfile::tempdir().unwrap();
        let fifo = fifo_dir.path().join("f");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(Store::peek(&fifo).is_none());
        assert!(open_private(&fifo).is_err());
        // A symlinked lock file is never followed: it is moved aside and a fresh one made.
        let lock_path = store.path("other", "lock");
        std::os::unix::fs::symlink(&victim, &lock_path).unwrap();
        let l = store.lock_stem("other", Duration::from_millis(50)).unwrap();
        let q = l.healed.as_ref().expect("moved aside");
        assert!(q.why.contains("link"), "{}", q.why);
        assert!(fs::symlink_metadata(&q.path)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(fs::symlink_metadata(&lock_path).unwrap().is_file());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    #[cfg(unix)]
    fn a_state_dir_others_can_write_is_made_private_and_a_bad_sessions_moved_aside() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("st");
        Store::open(&dir).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        for bad in [0o777, 0o000, 0o500] {
            fs::set_permissions(&dir, fs::Permissions::from_mode(bad)).unwrap();
            assert!(Store::open(&dir).is_err(), "a command repairs nothing");
            let mut s = Store::open_healing(&dir).unwrap();
            assert_eq!(mode(&dir), 0o700, "{bad:o}");
            assert!(s.take_healed()[0].contains("owner-only"), "{bad:o}");
            assert!(Store::open(&dir).unwrap().take_healed().is_empty());
        }
        // `sessions` replaced by a file: moved aside, kept, made again.
        fs::remove_dir(dir.join("sessions")).unwrap();
        fs::write(dir.join("sessions"), "kept").unwrap();
        assert!(Store::open(&dir).is_err());
        let mut s = Store::open_healing(&dir).unwrap();
        assert!(dir.join("sessions").is_dir());
        assert!(s.take_healed()[0].contains("moved"));
        let aside = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains("sessions.corrupt-"))
            .unwrap();
        assert_eq!(fs::read(aside).unwrap(), b"kept");
        // Owned by root when we are not root (skipped when the tests run as root).
        if platform::own_uid() != Some(0) {
            assert!(Store::open(Path::new("/")).is_err());
            assert!(Store::open_healing(Path::new("/")).is_err());
        }
    }

    /// The lock file's length records the generation saved: an earlier copy of the state put
    /// back is found on load, and a journal's mark survives the saves that record it.
    #[test]
    fn an_earlier_copy_put_back_is_found_by_the_generation_the_lock_keeps() {
        let (_d, store) = store();
        saved(&store, 1);
        let path = lock(&store).state_path.clone();
        let copy = fs::read(&path).unwrap();
        let put_back = |store: &Store| {
            let l = lock(store);
            store.load(&l).unwrap();
            l.put_back()
        };
        for n in 2..=4 {
            saved(&store, n);
            assert_eq!(put_back(&store), None, "our own saves");
        }
        let l = lock(&store);
        l.mark_journal_pending(true);
        let (st, _) = store.load(&l).unwrap();
        store.save(&l, &mut st.unwrap()).unwrap();
        assert!(l.journal_pending(), "a save keeps the journal's mark");
        l.mark_journal_pending(false);
        // A busy call marks a journal while this holder saves: the save keeps the mark.
        let (st, _) = store.load(&l).unwrap();
        let lock_path = store.path(&Store::stem("s"), "lock");
        let busy = fs::OpenOptions::new().write(true).open(&lock_path).unwrap();
        busy.set_len(fs::metadata(&lock_path).unwrap().len() | 2)
            .unwrap();
        store.save(&l, &mut st.unwrap()).unwrap();
        drop(l);
        assert!(lock(&store).journal_pending(), "the busy call's mark");
        lock(&store).mark_journal_pending(false);
        fs::write(&path, &copy).unwrap();
        let l = lock(&store);
        let (st, _) = store.load(&l).unwrap();
        assert_eq!(st.map(|s| s.totals.calls), Some(1));
        assert_eq!(l.put_back(), Some((1, 6)));
        assert!(l.session_known() && !l.journal_pending());
        drop(l);
        saved(&store, 2);
        assert!(
            lock(&store).put_back().is_none(),
            "told once: the save records again"
        );
    }

    /// The state and its lock file put back together (a copy of the whole `sessions` dir):
    /// the generations agree, the change time the lock recorded does not.
    #[test]
    fn a_state_put_back_with_its_lock_file_is_found_by_the_change_time() {
        let (_d, store) = store();
        saved(&store, 1);
        let state = lock(&store).state_path.clone();
        let lock_path = store.path(&Store::stem("s"), "lock");
        let copies = (fs::read(&state).unwrap(), fs::read(&lock_path).unwrap());
        saved(&store, 2);
        let l = lock(&store);
        store.load(&l).unwrap();
        assert_eq!(l.put_back(), None, "our own saves");
        drop(l);
        // Past the file system's clock tick, so the put-back's change time is its own.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&state, &copies.0).unwrap();
        fs::write(&lock_path, &copies.1).unwrap();
        let l = lock(&store);
        let (st, _) = store.load(&l).unwrap();
        assert_eq!(st.map(|s| s.totals.calls), Some(1));
        assert_eq!(
            l.put_back(),
            Some((1, 1)),
            "found, though the lock went back too"
        );
        let (st, _) = store.load(&l).unwrap();
        store.save(&l, &mut st.unwrap()).unwrap();
        drop(l);
        let l = lock(&store);
        store.load(&l).unwrap();
        assert_eq!(l.put_back(), None, "told once: the save records again");
    }

    #[test]
    fn a_vanished_state_is_noticed_by_the_lock_mark() {
        let (_d, store) = store();
        assert!(!lock(&store).session_known());
        saved(&store, 1);
        let l = lock(&store);
        assert!(l.session_known());
        fs::remove_file(&l.state_path).unwrap();
        let (st, q) = store.load(&l).unwrap();
        assert!(st.is_none() && q.is_none() && l.session_known());
    }
}
