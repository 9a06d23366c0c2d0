//! Everything that differs by operating system, behind one API: the rest of loopgate never names
//! an OS. One implementation module per family, chosen by one `cfg` each ([`unix`] for Linux and
//! macOS, [`windows`]); Linux fast paths live inside `unix` beside the portable code they replace,
//! selected by the `loopgate_fast_linux` / `loopgate_fast_start` cfgs that `build.rs` sets. The
//! cargo feature `portable` switches them off, so the tests run the code macOS uses on Linux too.
//!
//! Where the semantics differ, the docs below say so instead of pretending they are the same:
//!
//! | concept | Linux, macOS | Windows |
//! |---|---|---|
//! | owner-only | dirs `0700`, files `0600`, and a state dir owned by someone else or writable by others is refused | files and dirs inherit the ACL of the per-user profile dir they are made in (`%LOCALAPPDATA%`, `%TEMP%`), which grants the user, SYSTEM and Administrators only; loopgate sets no ACL of its own and checks none |
//! | not a symlink | `O_NOFOLLOW`: a symlink is never opened | `FILE_FLAG_OPEN_REPARSE_POINT`: a symlink or junction is opened as itself and then refused |
//! | never block on a FIFO | `O_NONBLOCK` | no FIFOs in the file namespace: a plain open |
//! | change stamp | `ctime`, which no tool can set | last-write time (std exposes no change time), which `touch -d` can set |
//! | file identity | (mtime, size, inode) | (mtime, size, creation time) |
//! | broken pipe | SIGPIPE ignored, a write fails with EPIPE | a write fails with `ERROR_NO_DATA` (no signal exists) |

use std::fs::{File, Metadata};
use std::io;
use std::path::{Path, PathBuf};

pub mod bounded;
pub mod clock;
pub mod git;
pub mod spawn;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

pub mod start;

/// Opens `path` read-write (creating it owner-only when `create`), never through a symlink, never
/// blocking on a FIFO. A symlink in its place is an error, as is anything that is not a file.
pub fn open_private_rw(path: &Path, create: bool) -> io::Result<File> {
    imp::open_private_rw(path, create)
}

/// Waits until stdin has input (or its end) or `timeout` passes; `Ok(false)` on the timeout.
/// Where stdin cannot be waited on (Windows, a descriptor poll refuses), `Ok(true)`: the read
/// itself decides.
pub fn stdin_readable_within(timeout: std::time::Duration) -> io::Result<bool> {
    imp::stdin_readable_within(timeout)
}

/// Whether [`stdin_readable_within`] really waits with a deadline. Where it cannot (Windows
/// pipes), a read past the hook's payload could block for as long as the writer keeps the pipe
/// open, so nothing is read past it there.
pub const STDIN_WAIT_HAS_DEADLINE: bool = imp::STDIN_WAIT_HAS_DEADLINE;

/// Opens `path` for appending (creating it owner-only), with [`open_private_rw`]'s refusals:
/// every write lands at the end of the file, whoever else appends at the same time.
pub fn open_private_append(path: &Path) -> io::Result<File> {
    imp::open_private_append(path)
}

/// Makes a directory of ours owner-only again (`0700`) after someone changed its mode; a no-op
/// where access is an inherited ACL (Windows).
pub fn restore_private_mode(dir: &Path) -> io::Result<()> {
    imp::restore_private_mode(dir)
}

/// Opens `path` read-only, with [`open_private_rw`]'s refusals.
pub fn open_private_read(path: &Path) -> io::Result<File> {
    imp::open_private_read(path)
}

/// Opens `path` for reading without ever waiting for a FIFO's writer.
pub fn open_read_nonblocking(path: &Path) -> io::Result<File> {
    imp::open_read_nonblocking(path)
}

/// Reads exactly `buf.len()` bytes at `offset`.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    imp::read_exact_at(file, buf, offset)
}

/// Writes all of `buf` at `offset`.
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    imp::write_all_at(file, buf, offset)
}

/// Creates `dir` and its missing parents, the new ones owner-only.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    imp::create_private_dir(dir)
}

/// Who owns a file and who may write it, where the OS says so in mode bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    pub uid: u32,
    /// Permission bits (`0o777` mask).
    pub mode: u32,
}

/// The owner and mode of a file, on systems that have them (`None` on Windows, see the table).
pub fn ownership(meta: &Metadata) -> Option<Ownership> {
    imp::ownership(meta)
}

/// This process's effective user id, on systems that have one.
pub fn own_uid() -> Option<u32> {
    imp::own_uid()
}

/// What is wrong with a directory that should hold our state, by what can be done about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirFault {
    /// A link: it could point anywhere.
    Link,
    /// Another user's: state there could be swapped under us, and we cannot take it back.
    NotOurs(u32),
    /// Ours, but others may write to it (mode `0o022`) or we may not use it (`chmod 000`): the
    /// mode can be put back.
    Mode(u32),
}

/// What is wrong with `meta` (a directory's own metadata) as a state dir, if anything. Nothing
/// on systems without mode bits (see the table).
pub fn dir_fault(meta: &Metadata) -> Option<DirFault> {
    if meta.file_type().is_symlink() {
        return Some(DirFault::Link);
    }
    let own = ownership(meta)?;
    let uid = own_uid()?;
    if own.uid != uid {
        return Some(DirFault::NotOurs(own.uid));
    }
    (own.mode & 0o022 != 0 || own.mode & 0o700 != 0o700).then_some(DirFault::Mode(own.mode))
}

/// Why state kept in `dir` could be swapped under us or cannot be used, if so: it belongs to
/// another user, others may write to it, it is not usable by us, or it is a link. `meta` is the
/// dir's own metadata.
pub fn unsafe_dir_reason(dir: &Path, meta: &Metadata) -> Option<String> {
    let d = dir.display();
    Some(match dir_fault(meta)? {
        DirFault::Link => format!("state dir {d} is a link"),
        DirFault::NotOurs(uid) => format!("state dir {d} belongs to uid {uid}, not to us"),
        DirFault::Mode(mode) if mode & 0o022 != 0 => {
            format!("state dir {d} is writable by others (mode {mode:o})")
        }
        DirFault::Mode(mode) => format!("state dir {d} is not usable by us (mode {mode:o})"),
    })
}

/// The private per-user place state goes when the configured state dir cannot be used.
pub fn fallback_state_dir() -> PathBuf {
    imp::fallback_state_dir()
}

/// When the file's content or metadata last changed, in nanoseconds since the epoch: `ctime` on
/// Unix, which no tool can set; the last-write time on Windows (see the table).
pub fn change_ns(meta: &Metadata) -> i128 {
    imp::change_ns(meta)
}

/// What tells one version of a file from the next without reading it: `(mtime ns, size, id)`,
/// the id being the inode on Unix and the creation time on Windows.
pub fn identity(meta: &Metadata) -> (i128, u64, u64) {
    imp::identity(meta)
}

/// Whether `meta` is a file this user could run.
pub fn is_executable(meta: &Metadata) -> bool {
    imp::is_executable(meta)
}

/// The running binary's path, and whether the OS gives it with every symlink already resolved
/// (Linux: the kernel's `/proc/self/exe`), so that nobody needs to resolve it again.
pub fn own_binary() -> Option<(PathBuf, bool)> {
    imp::own_binary()
}

/// Permissions for a file every local user reads and only its owner writes (managed settings);
/// `None` where the OS expresses that through inherited ACLs instead.
pub fn world_readable_permissions() -> Option<std::fs::Permissions> {
    imp::world_readable_permissions()
}

/// Whether only the system's owner can change a file: root on Linux and macOS, Administrators
/// and SYSTEM on Windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemOwned {
    Yes,
    /// Someone else could replace or change it; the reason names the path and who.
    No(String),
    /// This OS's permissions are not read here (Windows ACLs); the text says what to check.
    Unknown(String),
}

/// Whether `path`, every directory above it, and (for a link) where it leads, can be changed by
/// the system's owner only. Unix: each must belong to root and be writable neither by everyone
/// (a sticky directory such as `/tmp` excepted: others cannot rename what root owns in it) nor
/// by a group other than root's. Windows: [`SystemOwned::Unknown`], ACLs are not read.
pub fn system_owned(path: &Path) -> SystemOwned {
    imp::system_owned(path)
}

/// Whether this process runs with the system owner's rights (root), where the OS says so
/// without asking it to try (`None` on Windows: an elevated process is known by what it may
/// write).
pub fn is_system_owner() -> Option<bool> {
    imp::is_system_owner()
}

/// Where `setup --managed` copies the hooks' binary: a directory only the system's owner may
/// write, outside any user's reach (see docs/install.md for why each).
/// The dynamic loader's variables that load code into a process (`LD_PRELOAD`…): a managed
/// install sets them empty for every hook (`setup::ManagedLocks`).
pub fn loader_vars() -> &'static [&'static str] {
    imp::loader_vars()
}

pub fn system_install_dir() -> PathBuf {
    imp::system_install_dir()
}

/// Digest checkers this OS ships, each as the command line that reads `<sha256>  <path>` lines on
/// its stdin and exits 0 only when every file matches: `sha256sum` (Linux), `shasum` (macOS;
/// Linux has it too). None on Windows, where no such tool is part of the system.
pub const DIGEST_CHECKERS: &[&str] = imp::DIGEST_CHECKERS;

/// The first of [`DIGEST_CHECKERS`] present and changeable by the system's owner only: a check
/// the agent's user cannot rewrite (setup pins the hooks' binary with it, `setup/pin.rs`).
pub fn system_digest_checker() -> Option<&'static str> {
    DIGEST_CHECKERS.iter().copied().find(|c| {
        let program = Path::new(c.split(' ').next().unwrap_or(c));
        program.is_file() && system_owned(program) == SystemOwned::Yes
    })
}

/// Creates `dir` and its missing parents for a file every local user runs and only the owner
/// writes: `0755` on Unix (whatever the umask); inherited ACLs on Windows.
pub fn create_shared_dir(dir: &Path) -> io::Result<()> {
    imp::create_shared_dir(dir)
}

/// Permissions for a binary every local user runs and only its owner writes; `None` where the
/// OS expresses that through inherited ACLs.
pub fn shared_executable_permissions() -> Option<std::fs::Permissions> {
    imp::shared_executable_permissions()
}

/// A special file's kind ("a FIFO", "a device", "a socket"), for files that are neither regular
/// files nor directories nor links.
/// The main thread's stack limit in bytes, where the caller sets it (`ulimit -s`); `None` when
/// unlimited or fixed by the executable.
pub fn stack_limit() -> Option<u64> {
    imp::stack_limit()
}

pub fn special_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    imp::special_kind(ft)
}

/// A binary's path as a hook command names it. Claude Code runs a hook command through `sh -c`,
/// on Windows through Git Bash (or PowerShell when Git Bash is missing): forward slashes there,
/// which both read as written (`C:/Users/me/loopgate.exe`), where backslashes would need quoting.
pub fn hook_command_path(bin: &str) -> std::borrow::Cow<'_, str> {
    imp::hook_command_path(bin)
}

/// Reads the change stamp ([`change_ns`]) of entry after entry of a directory walk, without
/// following symlinks. On Linux it keeps the entry's directory open (`O_PATH`) while its entries
/// come, so the kernel resolves one name per entry instead of the whole path.
#[derive(Default)]
pub struct ChangeProbe(imp::ChangeProbe);

impl ChangeProbe {
    pub fn change_ns(&mut self, path: &Path) -> Option<i128> {
        self.0.change_ns(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_is_never_opened_as_state() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = d.path().join("link");
        #[cfg(unix)]
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        #[cfg(windows)]
        if std::os::windows::fs::symlink_file(&victim, &link).is_err() {
            return; // creating symlinks needs a privilege on Windows
        }
        assert!(open_private_rw(&link, true).is_err());
        assert!(open_private_rw(&link, false).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    fn positioned_io_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let f = open_private_rw(&d.path().join("f"), true).unwrap();
        write_all_at(&f, b"world", 6).unwrap();
        write_all_at(&f, b"hello ", 0).unwrap();
        let mut buf = [0u8; 11];
        read_exact_at(&f, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello world");
        let mut short = [0u8; 4];
        assert!(read_exact_at(&f, &mut short, 9).is_err(), "past the end");
    }

    #[test]
    fn a_write_moves_the_change_stamp_and_identity() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "a").unwrap();
        let before = std::fs::symlink_metadata(&p).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&p, "bb").unwrap();
        let after = std::fs::symlink_metadata(&p).unwrap();
        assert!(change_ns(&after) > change_ns(&before));
        assert_ne!(identity(&after), identity(&before));
        let mut probe = ChangeProbe::default();
        assert_eq!(probe.change_ns(&p), Some(change_ns(&after)));
        assert_eq!(probe.change_ns(&d.path().join("missing")), None);
    }

    #[test]
    fn private_dirs_pass_their_own_check() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b");
        create_private_dir(&p).unwrap();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(unsafe_dir_reason(&p, &meta), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(meta.permissions().mode() & 0o777, 0o700);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            assert!(unsafe_dir_reason(&p, &meta)
                .unwrap()
                .contains("writable by others"));
        }
    }
}
