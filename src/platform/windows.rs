//! Windows. What "owner-only", "not a symlink" and the change stamp mean here is in the table of
//! the parent module; each function below does the nearest honest thing.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::windows::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::Ownership;

/// Opens a symlink or junction as itself instead of its target (winbase.h), so it can be
/// recognised and refused rather than followed.
const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;

pub fn open_private_rw(path: &Path, create: bool) -> io::Result<File> {
    refuse_links(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
            .open(path)?,
        path,
    )
}

pub fn open_private_append(path: &Path) -> io::Result<File> {
    refuse_links(
        OpenOptions::new()
            .append(true)
            .create(true)
            .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
            .open(path)?,
        path,
    )
}

/// Access is the ACL inherited from the per-user dir: there is no mode to put back.
pub fn restore_private_mode(_dir: &Path) -> io::Result<()> {
    Ok(())
}

pub fn open_private_read(path: &Path) -> io::Result<File> {
    refuse_links(
        OpenOptions::new()
            .read(true)
            .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
            .open(path)?,
        path,
    )
}

fn refuse_links(file: File, path: &Path) -> io::Result<File> {
    let ft = file.metadata()?.file_type();
    if ft.is_symlink() || !ft.is_file() {
        return Err(io::Error::other(format!(
            "{} is a link or not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// Windows has no FIFOs in the file namespace (named pipes live under `\\.\pipe\`).
pub fn open_read_nonblocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

pub fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.seek_write(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The new dirs inherit the ACL of the per-user dir they are made under.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

pub fn ownership(_meta: &Metadata) -> Option<Ownership> {
    None
}

pub fn own_uid() -> Option<u32> {
    None
}

/// `%TEMP%` is already per user (`%LOCALAPPDATA%\Temp`).
pub fn fallback_state_dir() -> PathBuf {
    std::env::temp_dir().join("loopgate")
}

pub fn change_ns(meta: &Metadata) -> i128 {
    meta.modified().map_or(0, system_time_ns)
}

pub fn identity(meta: &Metadata) -> (i128, u64, u64) {
    let created = meta.created().map_or(0, system_time_ns);
    (change_ns(meta), meta.len(), created as u64)
}

/// Windows decides by extension and ACL, not by a mode bit: any file may be run.
pub fn is_executable(meta: &Metadata) -> bool {
    meta.is_file()
}

pub fn own_binary() -> Option<(PathBuf, bool)> {
    Some((std::env::current_exe().ok()?, false))
}

pub fn world_readable_permissions() -> Option<std::fs::Permissions> {
    None
}

pub fn hook_command_path(bin: &str) -> std::borrow::Cow<'_, str> {
    bin.replace('\\', "/").into()
}

pub fn stack_limit() -> Option<u64> {
    // The main thread's stack is fixed in the executable's header, not set by the caller.
    None
}

pub fn special_kind(_ft: &std::fs::FileType) -> Option<&'static str> {
    None
}

#[derive(Default)]
pub struct ChangeProbe;

impl ChangeProbe {
    pub fn change_ns(&mut self, path: &Path) -> Option<i128> {
        std::fs::symlink_metadata(path).ok().map(|m| change_ns(&m))
    }
}

/// Nanoseconds since the epoch of a `SystemTime`, negative before it.
fn system_time_ns(t: std::time::SystemTime) -> i128 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

pub const STDIN_WAIT_HAS_DEADLINE: bool = false;

pub fn stdin_readable_within(_timeout: std::time::Duration) -> io::Result<bool> {
    // A pipe handle cannot be waited on with a timeout through std: the read decides.
    Ok(true)
}

/// No digest checker ships with Windows that the hook's shell could run unchanged.
pub const DIGEST_CHECKERS: &[&str] = &[];

pub fn system_owned(path: &Path) -> super::SystemOwned {
    super::SystemOwned::Unknown(format!(
        "Windows ACLs are not read: check that only Administrators and SYSTEM may write {} and its folders",
        path.display()
    ))
}

pub fn is_system_owner() -> Option<bool> {
    None
}

/// `%ProgramFiles%\loopgate`: Program Files grants users read and run, Administrators write.
/// Windows has no loader variable that injects code into a process it starts.
pub fn loader_vars() -> &'static [&'static str] {
    &[]
}

pub fn system_install_dir() -> PathBuf {
    std::env::var_os("ProgramFiles")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(r"C:\Program Files"))
        .join("loopgate")
}

pub fn create_shared_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

pub fn shared_executable_permissions() -> Option<std::fs::Permissions> {
    None
}
