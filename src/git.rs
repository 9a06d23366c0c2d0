//! Has the worktree changed? A fingerprint of HEAD plus every changed or untracked path (with its
//! size and mtime), read through libgit2 so no `git` process is spawned on the hot path.

use anyhow::{Context, Result};
use git2::{ErrorCode, Repository, StatusOptions};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Source of worktree fingerprints; replay and unit tests use one without git.
pub trait Worktree {
    /// `Ok(None)` when `dir` is not inside a git worktree.
    fn fingerprint(&self, dir: &Path) -> Result<Option<String>>;
}

pub struct Git;

impl Worktree for Git {
    fn fingerprint(&self, dir: &Path) -> Result<Option<String>> {
        fingerprint(dir)
    }
}

/// No git at all (replay): the progress gate never acts.
pub struct NoGit;

impl Worktree for NoGit {
    fn fingerprint(&self, _dir: &Path) -> Result<Option<String>> {
        Ok(None)
    }
}

pub fn fingerprint(dir: &Path) -> Result<Option<String>> {
    let repo = match Repository::discover(dir) {
        Ok(r) => r,
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(e).context("cannot open git repository"),
    };
    let Some(workdir) = repo.workdir().map(Path::to_path_buf) else {
        return Ok(None);
    };
    let mut h = Sha256::new();
    // A new commit is progress even when it leaves the worktree clean.
    if let Some(oid) = repo.head().ok().and_then(|r| r.target()) {
        h.update(oid.as_bytes());
    }
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(true);
    let statuses = repo
        .statuses(Some(&mut opts))
        .context("cannot read git status")?;
    for entry in statuses.iter() {
        let path = entry.path_bytes();
        h.update(path);
        h.update(entry.status().bits().to_le_bytes());
        // Editing an already-modified file leaves its status unchanged; size and mtime do not.
        if let Ok(meta) = std::str::from_utf8(path)
            .map_err(|_| ())
            .and_then(|p| std::fs::symlink_metadata(workdir.join(p)).map_err(|_| ()))
        {
            h.update(meta.len().to_le_bytes());
            if let Ok(m) = meta.modified() {
                let ns = m
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                h.update(ns.to_le_bytes());
            }
        }
        h.update([0u8]);
    }
    let d = h.finalize();
    Ok(Some(crate::canon::hex16(&d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with_commit(dir: &Path) -> Repository {
        let repo = Repository::init(dir).unwrap();
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        commit_all(&repo, "init");
        repo
    }

    fn commit_all(repo: &Repository, msg: &str) {
        let mut idx = repo.index().unwrap();
        idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        idx.write().unwrap();
        let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let parents: Vec<git2::Commit> = repo
            .head()
            .ok()
            .and_then(|h| h.peel_to_commit().ok())
            .into_iter()
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &refs)
            .unwrap();
    }

    #[test]
    fn outside_git_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(fingerprint(d.path()).unwrap(), None);
    }

    #[test]
    fn edits_untracked_files_and_commits_change_it() {
        let d = tempfile::tempdir().unwrap();
        let repo = repo_with_commit(d.path());
        let f0 = fingerprint(d.path()).unwrap().unwrap();
        assert_eq!(
            fingerprint(d.path()).unwrap().unwrap(),
            f0,
            "stable when nothing changes"
        );
        std::fs::write(d.path().join("new.txt"), "n").unwrap();
        let f1 = fingerprint(d.path()).unwrap().unwrap();
        assert_ne!(f1, f0, "untracked file");
        commit_all(&repo, "second");
        let f2 = fingerprint(d.path()).unwrap().unwrap();
        assert_ne!(f2, f1, "commit");
        std::fs::write(d.path().join("a.txt"), "changed\n").unwrap();
        let f3 = fingerprint(d.path()).unwrap().unwrap();
        assert_ne!(f3, f2, "modified file");
        std::fs::write(d.path().join("a.txt"), "changed again, longer\n").unwrap();
        assert_ne!(
            fingerprint(d.path()).unwrap().unwrap(),
            f3,
            "already-modified file edited"
        );
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert!(
            fingerprint(&d.path().join("sub")).unwrap().is_some(),
            "found from a subdir"
        );
    }
}
