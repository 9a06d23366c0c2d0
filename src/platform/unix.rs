//! Linux and macOS. The Linux fast path (`loopgate_fast_linux`) is the `O_PATH` directory handle
//! of [`ChangeProbe`]; everything else here is POSIX and the same on both.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::Ownership;

pub fn open_private_rw(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

pub fn open_private_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

pub fn restore_private_mode(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

pub fn open_private_read(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

pub fn open_read_nonblocking(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    file.read_exact_at(buf, offset)
}

pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    file.write_all_at(buf, offset)
}

pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

pub fn ownership(meta: &Metadata) -> Option<Ownership> {
    Some(Ownership {
        uid: meta.uid(),
        mode: meta.mode() & 0o777,
    })
}

/// `geteuid` through rustix: no `unsafe`, no `/proc` lookup; asked once per process (the state
/// dir, the lock and the state file are each checked against it).
pub fn own_uid() -> Option<u32> {
    static UID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    Some(*UID.get_or_init(|| rustix::process::geteuid().as_raw()))
}

/// `$XDG_RUNTIME_DIR/loopgate` (per user, owner-only by its spec), else `<temp>/loopgate-<uid>`.
pub fn fallback_state_dir() -> PathBuf {
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(run).join("loopgate");
    }
    let uid = own_uid().unwrap_or(0);
    std::env::temp_dir().join(format!("loopgate-{uid}"))
}

pub fn change_ns(meta: &Metadata) -> i128 {
    meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128
}

pub fn identity(meta: &Metadata) -> (i128, u64, u64) {
    (
        meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        meta.size(),
        meta.ino(),
    )
}

pub fn is_executable(meta: &Metadata) -> bool {
    meta.is_file() && meta.mode() & 0o111 != 0
}

pub fn own_binary() -> Option<(PathBuf, bool)> {
    // macOS's `_NSGetExecutablePath` gives the path it was started by, links and all.
    Some((std::env::current_exe().ok()?, cfg!(target_os = "linux")))
}

pub fn world_readable_permissions() -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(0o644))
}

pub fn hook_command_path(bin: &str) -> std::borrow::Cow<'_, str> {
    bin.into()
}

pub fn stack_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Stack).current
}

pub fn special_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_char_device() || ft.is_block_device() {
        Some("a device")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// The portable probe: one `lstat` of the whole path per entry.
#[cfg(not(loopgate_fast_linux))]
#[derive(Default)]
pub struct ChangeProbe;

#[cfg(not(loopgate_fast_linux))]
impl ChangeProbe {
    pub fn change_ns(&mut self, path: &Path) -> Option<i128> {
        std::fs::symlink_metadata(path).ok().map(|m| change_ns(&m))
    }
}

/// The entry's directory, kept open with `O_PATH|O_NOFOLLOW` (nothing read, no symlink followed)
/// while its entries come; each entry is `lstat`ed relative to it.
#[cfg(loopgate_fast_linux)]
#[derive(Default)]
pub struct ChangeProbe(Option<(PathBuf, rustix::fd::OwnedFd)>);

#[cfg(loopgate_fast_linux)]
impl ChangeProbe {
    pub fn change_ns(&mut self, path: &Path) -> Option<i128> {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return std::fs::symlink_metadata(path).ok().map(|m| change_ns(&m));
        };
        if self.0.as_ref().is_none_or(|(p, _)| p != parent) {
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::open(parent, flags, Mode::empty()).ok()?;
            self.0 = Some((parent.to_path_buf(), fd));
        }
        let (_, fd) = self.0.as_ref()?;
        let st = rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        Some(st.st_ctime as i128 * 1_000_000_000 + st.st_ctime_nsec as i128)
    }
}

pub const STDIN_WAIT_HAS_DEADLINE: bool = true;

pub fn stdin_readable_within(timeout: std::time::Duration) -> io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let stdin = std::io::stdin();
    let timeout = Timespec {
        tv_sec: timeout.as_secs() as _,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
    match poll(&mut fds, Some(&timeout)) {
        Ok(0) => Ok(false),
        Ok(_) => Ok(true),
        Err(rustix::io::Errno::INTR) => Err(io::ErrorKind::Interrupted.into()),
        Err(_) => Ok(true),
    }
}

pub const DIGEST_CHECKERS: &[&str] = &[
    "/usr/bin/sha256sum -c --status",
    "/bin/sha256sum -c --status",
    "/usr/bin/shasum -a 256 -c -s",
];

pub fn system_owned(path: &Path) -> super::SystemOwned {
    use super::SystemOwned;
    let Ok(abs) = std::path::absolute(path) else {
        return SystemOwned::No(format!("{} cannot be made absolute", path.display()));
    };
    // The path as named (a link in a user's dir could be swapped) and where it leads.
    let mut chain: Vec<PathBuf> = abs.ancestors().map(Path::to_path_buf).collect();
    if let Ok(real) = std::fs::canonicalize(&abs) {
        chain.extend(real.ancestors().map(Path::to_path_buf));
    }
    for p in &chain {
        let meta = match std::fs::symlink_metadata(p) {
            Ok(m) => m,
            Err(e) => return SystemOwned::No(format!("{} cannot be read: {e}", p.display())),
        };
        if meta.uid() != 0 {
            return SystemOwned::No(format!(
                "{} belongs to uid {}, not root",
                p.display(),
                meta.uid()
            ));
        }
        if meta.file_type().is_symlink() {
            continue; // a link's own mode means nothing; its dir and its target are checked
        }
        let mode = meta.mode();
        let sticky_dir = meta.is_dir() && mode & 0o1000 != 0;
        if sticky_dir {
            continue;
        }
        if mode & 0o002 != 0 {
            return SystemOwned::No(format!(
                "{} is writable by every user (mode {:o})",
                p.display(),
                mode & 0o7777
            ));
        }
        if mode & 0o020 != 0 && meta.gid() != 0 {
            return SystemOwned::No(format!(
                "{} is writable by group {} (mode {:o})",
                p.display(),
                meta.gid(),
                mode & 0o7777
            ));
        }
    }
    SystemOwned::Yes
}

pub fn is_system_owner() -> Option<bool> {
    Some(rustix::process::geteuid().is_root())
}

/// Linux: `/usr/local/lib/loopgate`, the FHS place for a locally installed program's private
/// files, root-owned on every distribution and not on PATH. macOS: beside Claude Code's own
/// managed settings, under `/Library/Application Support`, which Homebrew never takes over (it
/// does take `/usr/local/lib` on Intel Macs).
pub fn system_install_dir() -> PathBuf {
    if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/loopgate")
    } else {
        PathBuf::from("/usr/local/lib/loopgate")
    }
}

/// The dynamic loader's variables that load code into every process started with them, the
/// shell that runs a hook included.
pub fn loader_vars() -> &'static [&'static str] {
    if cfg!(target_os = "macos") {
        &[
            "DYLD_INSERT_LIBRARIES",
            "DYLD_LIBRARY_PATH",
            "DYLD_FRAMEWORK_PATH",
        ]
    } else {
        &["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"]
    }
}

pub fn create_shared_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let missing: Vec<&Path> = dir.ancestors().take_while(|p| !p.exists()).collect();
    for p in missing.into_iter().rev() {
        match std::fs::create_dir(p) {
            Ok(()) => std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn shared_executable_permissions() -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(0o755))
}
