//! What setup leaves beside a file it wires, and how an uninstall takes it all away again: the
//! person's files as they were before setup, byte for byte, and nothing of loopgate's beside
//! them. What the uninstall took out is kept in loopgate's state dir (which stays, as the README
//! says) so that `setup --restore` can put it back.

use super::{backup_path, backups, NO_FILE_SUFFIX};
use anyhow::{Context, Result};
use std::fs;
use std::path::{Path, PathBuf};

/// The directories that writing `path` would create, outermost first.
pub fn missing_dirs(path: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .filter(|d| !d.as_os_str().is_empty())
        .take_while(|d| !d.exists())
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    dirs
}

/// Records beside `path` that there was no file there before setup wrote it, and the
/// directories it created for it, one a line: the backup `--restore` returns to, and what an
/// uninstall removes.
pub fn mark_created(path: &Path, dirs: &[PathBuf]) -> Result<()> {
    let mut marker = backup_path(path).into_os_string();
    marker.push(NO_FILE_SUFFIX);
    let text: String = dirs.iter().map(|d| format!("{}\n", d.display())).collect();
    fs::write(&marker, text)
        .with_context(|| format!("cannot write the backup {}", Path::new(&marker).display()))
}

/// Whether setup created `path`: its oldest backup records that there was none.
pub fn was_created(path: &Path) -> bool {
    backups(path)
        .first()
        .is_some_and(|b| super::records_no_file(b))
}

/// The person's file as it was before setup first changed it (its oldest backup), when it
/// existed.
pub fn before_setup(path: &Path) -> Option<String> {
    let oldest = backups(path).into_iter().next()?;
    if super::records_no_file(&oldest) {
        return None;
    }
    fs::read_to_string(oldest).ok()
}

/// After an uninstall: removes every backup of `path`, then the directories setup created for
/// it, deepest first, each only when it is empty (what the person put there stays).
pub fn clear(path: &Path) {
    let all = backups(path);
    let created: Vec<PathBuf> = all
        .first()
        .filter(|b| super::records_no_file(b))
        .and_then(|b| fs::read_to_string(b).ok())
        .map(|text| text.lines().map(PathBuf::from).collect())
        .unwrap_or_default();
    for backup in &all {
        let _ = fs::remove_file(backup);
    }
    for (i, dir) in created.iter().enumerate().rev() {
        if fs::remove_dir(dir).is_err() {
            // Not empty: what is left in it may be another file setup created there (OpenCode's
            // and Kilo's plugins share `~/.config`), whose uninstall then removes these too.
            hand_over(dir, &created[..=i]);
            return;
        }
    }
}

/// Adds `dirs` (outermost first) to the folders the first other "no file" record under `dir`
/// lists, so that they go when that file's uninstall empties them.
fn hand_over(dir: &Path, dirs: &[PathBuf]) {
    let Some(marker) = find_marker(dir, 4) else {
        return;
    };
    let listed = fs::read_to_string(&marker).unwrap_or_default();
    let mut text: String = dirs
        .iter()
        .filter(|d| !listed.lines().any(|l| Path::new(l) == d.as_path()))
        .map(|d| format!("{}\n", d.display()))
        .collect();
    text.push_str(&listed);
    let _ = fs::write(&marker, text);
}

fn find_marker(dir: &Path, depth: usize) -> Option<PathBuf> {
    let entries: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    let is_marker = |p: &PathBuf| {
        p.to_str()
            .is_some_and(|s| s.contains(super::BACKUP_SUFFIX) && super::records_no_file(p))
    };
    if let Some(found) = entries.iter().find(|p| p.is_file() && is_marker(p)) {
        return Some(found.clone());
    }
    if depth == 0 {
        return None;
    }
    entries
        .iter()
        .filter(|p| p.is_dir() && !p.is_symlink())
        .find_map(|p| find_marker(p, depth - 1))
}

/// Where an uninstall keeps what it took out of `path`, in the state dir.
fn saved_path(state_dir: &Path, path: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let lexical = crate::config::paths::lexical(&absolute);
    let digest = Sha256::digest(lexical.to_string_lossy().as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    state_dir.join("uninstalled").join(format!("{hex}-{name}"))
}

/// Keeps `text`, what `path` held before an uninstall, for `setup --restore`.
pub fn save_for_restore(state_dir: &Path, path: &Path, text: &str) -> Result<PathBuf> {
    let saved = saved_path(state_dir, path);
    // The state dir may not exist yet (an uninstall before any hook ran): made owner-only, as
    // every hook makes it, or `doctor` would then find it open to others.
    if let Some(dir) = saved.parent() {
        crate::store::create_private_dir(dir)?;
    }
    super::write_atomic(&saved, text.as_bytes(), None)
        .with_context(|| format!("cannot keep a copy in {}", saved.display()))?;
    Ok(saved)
}

/// The copy an uninstall kept of `path`, when there is one.
pub fn saved_for_restore(state_dir: &Path, path: &Path) -> Option<PathBuf> {
    Some(saved_path(state_dir, path)).filter(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dirs_are_the_ones_not_there_yet_outermost_first() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a/b/settings.json");
        assert_eq!(
            missing_dirs(&file),
            vec![dir.path().join("a"), dir.path().join("a/b")]
        );
        fs::create_dir_all(dir.path().join("a/b")).unwrap();
        assert!(missing_dirs(&file).is_empty());
    }

    #[test]
    fn clear_removes_backups_and_only_the_empty_dirs_setup_made() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a/b/settings.json");
        let dirs = missing_dirs(&file);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        mark_created(&file, &dirs).unwrap();
        assert!(was_created(&file));
        fs::write(dir.path().join("a/mine.txt"), "kept").unwrap();
        clear(&file);
        assert!(!dir.path().join("a/b").exists());
        assert!(dir.path().join("a/mine.txt").is_file());
    }

    #[test]
    fn a_shared_folder_goes_with_the_last_file_setup_made_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("config/opencode/plugins/loopgate.js");
        let second = dir.path().join("config/kilo/plugins/loopgate.js");
        for file in [&first, &second] {
            let dirs = missing_dirs(file);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            mark_created(file, &dirs).unwrap();
        }
        clear(&first);
        assert!(dir.path().join("config").is_dir(), "kilo's folder is in it");
        clear(&second);
        assert!(!dir.path().join("config").exists());
    }
}
