//! The state directory: one JSON file per session, guarded by a separate lock file that spans the
//! whole read–modify–write, written atomically (temp file, fsync, rename).

use crate::state::SessionState;
use anyhow::{anyhow, bail, Context, Result};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A state file larger than this cannot be ours (they are capped far below): treat it as corrupt.
const MAX_STATE_BYTES: u64 = 4 << 20;

pub struct Store {
    dir: PathBuf,
}

/// Held for the whole read–modify–write; the OS drops the lock when the process exits, even on a
/// crash, so no stale-lock cleanup is ever needed.
pub struct SessionLock {
    _file: File,
    state_path: PathBuf,
}

/// A state that could not be read was moved here; the caller reports it.
pub struct Quarantined(pub PathBuf);

impl Store {
    /// Opens (creating if needed, owner-only) the state directory.
    pub fn open(dir: &Path) -> Result<Store> {
        let sessions = dir.join("sessions");
        if !sessions.is_dir() {
            create_private_dir(dir)?;
            create_private_dir(&sessions)?;
        }
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The platform's state directory for loopgate (see [`crate::paths`]).
    pub fn default_dir() -> Option<PathBuf> {
        crate::paths::state_dir()
    }

    /// Session ids are untrusted: the file name is a hash, so no id can name a path.
    pub fn stem(session_id: &str) -> String {
        crate::canon::text_key(session_id)
    }

    fn path(&self, stem: &str, ext: &str) -> PathBuf {
        self.dir.join("sessions").join(format!("{stem}.{ext}"))
    }

    /// Takes the session lock, waiting at most `timeout`: a wedged peer must never hang the agent.
    pub fn lock(&self, session_id: &str, timeout: Duration) -> Result<SessionLock> {
        self.lock_stem(&Self::stem(session_id), timeout)
    }

    pub fn lock_stem(&self, stem: &str, timeout: Duration) -> Result<SessionLock> {
        let lock_path = self.path(stem, "lock");
        let file = open_private(&lock_path)
            .with_context(|| format!("cannot open lock file {}", lock_path.display()))?;
        lock_within(&file, &lock_path, timeout, "session state")?;
        Ok(SessionLock {
            _file: file,
            state_path: self.path(stem, "json"),
        })
    }

    /// Reads the session state. Unreadable state is moved aside (never deleted) and a fresh one
    /// returned, so one bad file costs a session its history, not its agent.
    pub fn load(&self, lock: &SessionLock) -> Result<(Option<SessionState>, Option<Quarantined>)> {
        let path = &lock.state_path;
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, None)),
            Err(e) => return Err(anyhow!(e).context(format!("cannot stat {}", path.display()))),
        };
        let parsed = if !meta.file_type().is_file() {
            Err("not a regular file".to_string())
        } else if meta.len() > MAX_STATE_BYTES {
            Err(format!("{} bytes", meta.len()))
        } else {
            read_state(path)
        };
        match parsed {
            Ok(state) => Ok((Some(state), None)),
            Err(_) => {
                let aside = path.with_extension(format!(
                    "corrupt-{}-{}",
                    crate::clock::now_ms(),
                    std::process::id()
                ));
                fs::rename(path, &aside).with_context(|| {
                    format!("cannot move unreadable state {} aside", path.display())
                })?;
                Ok((None, Some(Quarantined(aside))))
            }
        }
    }

    pub fn save(&self, lock: &SessionLock, state: &SessionState) -> Result<()> {
        let bytes = crate::redact::masked_json(state).context("cannot serialise state")?;
        write_atomic(&lock.state_path, &bytes)
    }

    /// Session state files, by stem.
    pub fn sessions(&self) -> Vec<(String, PathBuf)> {
        let Ok(rd) = fs::read_dir(self.dir.join("sessions")) else {
            return Vec::new();
        };
        let mut out: Vec<(String, PathBuf)> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
            .collect();
        out.sort();
        out
    }

    /// Reads a state without locking, for display: writes are atomic renames, so a reader sees
    /// either the old or the new file, never half of one.
    pub fn peek(path: &Path) -> Option<SessionState> {
        read_state(path).ok()
    }
}

/// Takes an exclusive lock on `file`, giving up after `timeout`: a wedged peer must never hang
/// the agent.
pub fn lock_within(file: &File, path: &Path, timeout: Duration, what: &str) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    bail!(
                        "{what} stayed locked by another loopgate process for {} ms",
                        timeout.as_millis()
                    );
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(TryLockError::Error(e)) => {
                return Err(anyhow!(e).context(format!("cannot lock {}", path.display())))
            }
        }
    }
}

fn read_state(path: &Path) -> Result<SessionState, String> {
    let mut buf = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut buf))
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&buf).map_err(|e| e.to_string())
}

/// Temp file in the same directory, fsync, rename: a crash leaves the old file or the new one.
/// The rename replaces a symlink at `path` rather than following it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temp file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write state in {}", dir.display()))?;
    tmp.persist(path)
        .map_err(|e| anyhow!(e.error).context(format!("cannot replace {}", path.display())))?;
    Ok(())
}

pub fn create_private_dir(dir: &Path) -> Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)
        .with_context(|| format!("cannot create state dir {}", dir.display()))
}

/// Opens (creating) a file readable by the owner only.
pub fn open_private(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let lock = store.lock("s", Duration::from_millis(100)).unwrap();
        fs::write(&lock.state_path, b"{garbage").unwrap();
        let (state, q) = store.load(&lock).unwrap();
        assert!(state.is_none());
        let q = q.expect("quarantined");
        assert_eq!(fs::read(&q.0).unwrap(), b"{garbage");
        assert!(!lock.state_path.exists());
    }

    #[test]
    fn second_lock_times_out() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let _held = store.lock("s", Duration::from_millis(100)).unwrap();
        let t = Instant::now();
        assert!(store.lock("s", Duration::from_millis(50)).is_err());
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn round_trip_and_private_modes() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("st")).unwrap();
        let lock = store.lock("s", Duration::from_millis(100)).unwrap();
        store.save(&lock, &SessionState::new("s", 5)).unwrap();
        let (state, _) = store.load(&lock).unwrap();
        assert_eq!(state.unwrap().started_ms, 5);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&d.path().join("st")), 0o700);
            assert_eq!(mode(&lock.state_path), 0o600);
        }
    }
}
