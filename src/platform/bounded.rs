//! Bounded, typed reads of small text files loopgate does not control (config files): regular
//! files only — never a FIFO, a device or a directory — at most [`MAX_CONFIG_BYTES`], and for a
//! file inside a project, no symlink that leads out of it. A committed `.claude/loopgate.toml`
//! that is a symlink to `/dev/zero`, a FIFO or a huge file costs one stat and one line.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

/// A config file larger than this is not a config file.
pub const MAX_CONFIG_BYTES: u64 = 64 << 10;

/// Reads `path` as UTF-8 text under the rules above. `Ok(None)` when it does not exist; `Err`
/// with a short reason (no path: the caller names the file) otherwise.
pub fn read_text(path: &Path, inside: Option<&Path>, max: u64) -> Result<Option<String>, String> {
    match read_bytes(path, inside, max)? {
        None => Ok(None),
        Some(buf) => String::from_utf8(buf)
            .map(Some)
            .map_err(|_| "is not UTF-8 text".to_string()),
    }
}

/// [`read_text`]'s bytes, whatever their encoding.
pub fn read_bytes(path: &Path, inside: Option<&Path>, max: u64) -> Result<Option<Vec<u8>>, String> {
    let link = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if link.file_type().is_symlink() {
        if let Some(root) = inside {
            let target = fs::canonicalize(path).map_err(|e| format!("broken symlink ({e})"))?;
            let root = fs::canonicalize(root).map_err(|e| e.to_string())?;
            if !target.starts_with(&root) {
                return Err(format!(
                    "is a symlink out of the project (to {}); refused",
                    target.display()
                ));
            }
        }
    }
    let meta = fs::metadata(path).map_err(|e| e.to_string())?;
    check_meta(&meta, max)?;
    // Never waits for a FIFO swapped in after the check.
    let file = crate::platform::open_read_nonblocking(path).map_err(|e| e.to_string())?;
    // The path may have been swapped between the stat and the open: judge what was opened.
    check_meta(&file.metadata().map_err(|e| e.to_string())?, max)?;
    let mut buf = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    if buf.len() as u64 > max {
        return Err(format!("is larger than {} KiB; refused", max >> 10));
    }
    Ok(Some(buf))
}

fn check_meta(meta: &fs::Metadata, max: u64) -> Result<(), String> {
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(format!(
            "is not a regular file ({}); refused",
            kind(&ft).unwrap_or("special file")
        ));
    }
    if meta.len() > max {
        return Err(format!(
            "is {} bytes, more than the {} KiB a config file may have; refused",
            meta.len(),
            max >> 10
        ));
    }
    Ok(())
}

fn kind(ft: &fs::FileType) -> Option<&'static str> {
    if ft.is_dir() {
        return Some("a directory");
    }
    crate::platform::special_kind(ft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_is_none_and_small_is_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.toml");
        assert_eq!(read_text(&p, None, 100), Ok(None));
        fs::write(&p, "x = 1\n").unwrap();
        assert_eq!(read_text(&p, None, 100), Ok(Some("x = 1\n".into())));
        fs::write(&p, "x".repeat(101)).unwrap();
        assert!(read_text(&p, None, 100).unwrap_err().contains("more than"));
        assert!(read_text(d.path(), None, 100)
            .unwrap_err()
            .contains("directory"));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_of_the_project_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let proj = d.path().join("proj");
        fs::create_dir_all(&proj).unwrap();
        let outside = d.path().join("outside.toml");
        fs::write(&outside, "x = 1\n").unwrap();
        let link = proj.join("l.toml");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert!(read_text(&link, Some(&proj), 100)
            .unwrap_err()
            .contains("out of the project"));
        assert!(read_text(&link, None, 100).unwrap().is_some());
        let inside = proj.join("in.toml");
        fs::write(&inside, "y = 2\n").unwrap();
        let link2 = proj.join("l2.toml");
        std::os::unix::fs::symlink(&inside, &link2).unwrap();
        assert!(read_text(&link2, Some(&proj), 100).unwrap().is_some());
        let dev = proj.join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &dev).unwrap();
        assert!(read_text(&dev, None, 100).unwrap_err().contains("device"));
    }
}
