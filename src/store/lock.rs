//! Locks with a deadline: a wedged peer holding the session's lock, the journal's or the event
//! log's must never hang the agent.

use anyhow::{anyhow, Result};
use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

/// The lock was not ours within the deadline: the caller may judge without saving.
#[derive(Debug)]
pub struct LockBusy(pub Duration);

impl std::fmt::Display for LockBusy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "session state stayed locked by another process for {} ms",
            self.0.as_millis()
        )
    }
}

impl std::error::Error for LockBusy {}

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
                    return Err(anyhow!(LockBusy(timeout)).context(format!(
                        "{what} stayed locked by another process for {} ms",
                        timeout.as_millis()
                    )));
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
