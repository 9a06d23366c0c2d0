//! Has the worktree changed since the turn began? Without a whole-tree scan where it can be
//! avoided, and never able to hang.
//!
//! At `user-prompt-submit` a [`Stamp`] records only the time, HEAD (the `HEAD` file, the ref it
//! names and `packed-refs`'s stat) and the index's stat — a few small reads, no index parse, no
//! `git` process. At a Stop that must judge: HEAD or the index changed → progress; else the
//! project is walked honouring `.gitignore` (and `.git/info/exclude`, the global excludes),
//! stopping at the first entry whose change stamp ([`crate::platform::change_ns`]: ctime on Unix) is
//! after the stamp (two walker threads, each entry
//! `lstat`ed relative to its open directory). The walk runs on a helper thread
//! under a deadline and an entry budget: a 200,000-file tree, a FIFO where a file is expected, or
//! a network mount cannot hang the hook, and every error or limit answers "cannot tell", which
//! the gate reads as "do not block". `.git/index` is only ever `lstat`ed, never opened, and git
//! config (`core.worktree`) is never read: the walk covers `CLAUDE_PROJECT_DIR`.
//!
//! ctime, not mtime: tools can set mtime (`touch -d`, `cp -p`), nobody can set ctime. A deleted
//! file changes its directory's ctime.

use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Source of worktree stamps; replay and unit tests use one without git.
pub trait Worktree {
    /// The encoded [`Stamp`] of the repository holding `dir`; `None` outside git.
    fn stamp(&self, dir: &Path) -> Option<String>;
    /// Whether anything under `dir` changed since `stamp` was taken; `None` when that cannot be
    /// told (not git, an error, a limit reached).
    fn changed_since(&self, dir: &Path, stamp: &str) -> Option<bool>;
    /// [`Worktree::changed_since`], judging by content: a file whose content is what the turn's
    /// tools left in it (`accounted`) is left to the engine's comparison of states, and a
    /// directory counts only when a file git tracks in it is gone.
    fn changed_beyond(&self, dir: &Path, stamp: &str, accounted: Accounted) -> Option<bool> {
        let _ = accounted;
        self.changed_since(dir, stamp)
    }
}

/// Whether a file's content is what the turn's own tools left in it (their effect on the work is
/// judged by comparing the state the turn ended in with the one it began in, not by the walk).
pub type Accounted = std::sync::Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// Whether the file at `path` was modified after the worktree stamp `stamp` was taken (a file
/// made since then too); `false` when either cannot be read.
pub fn modified_since(path: &Path, stamp: &str) -> bool {
    let Some(stamp) = Stamp::decode(stamp) else {
        return false;
    };
    let Ok(modified) = std::fs::metadata(path).and_then(|m| m.modified()) else {
        return false;
    };
    modified
        .duration_since(std::time::UNIX_EPOCH)
        .is_ok_and(|d| d.as_nanos() > stamp.at_ns)
}

pub struct Git;

impl Worktree for Git {
    fn stamp(&self, dir: &Path) -> Option<String> {
        Stamp::take(dir).map(|s| s.encode())
    }

    fn changed_since(&self, dir: &Path, stamp: &str) -> Option<bool> {
        changed_since(dir, &Stamp::decode(stamp)?, &Limits::default(), None)
    }

    fn changed_beyond(&self, dir: &Path, stamp: &str, accounted: Accounted) -> Option<bool> {
        changed_since(
            dir,
            &Stamp::decode(stamp)?,
            &Limits::default(),
            Some(accounted),
        )
    }
}

/// No git at all (replay): the progress gate never acts.
pub struct NoGit;

impl Worktree for NoGit {
    fn stamp(&self, _dir: &Path) -> Option<String> {
        None
    }

    fn changed_since(&self, _dir: &Path, _stamp: &str) -> Option<bool> {
        None
    }
}

/// What a turn's start looked like: when, HEAD, and the index's stat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// Wall-clock nanoseconds since the epoch.
    pub at_ns: u128,
    /// Digest of `HEAD`, the ref it names, and `packed-refs`'s stat.
    pub head: [u8; 16],
    /// `(mtime ns, size, inode)` of `.git/index`, zeros when there is none.
    pub index: (i128, u64, u64),
}

/// How far a Stop's walk may go before it answers "cannot tell".
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_entries: usize,
    pub max_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: 200_000,
            max_time: Duration::from_millis(1500),
        }
    }
}

impl Stamp {
    /// Takes the stamp of the repository holding `dir` (`None` outside git or on an error).
    pub fn take(dir: &Path) -> Option<Stamp> {
        let at_ns = wall_now_ns();
        let git_dir = find_git_dir(dir)?;
        Some(Stamp {
            at_ns,
            head: head_digest(&git_dir),
            index: index_stat(&git_dir),
        })
    }
}

/// The fine wall clock. A file's ctime is never later than the moment it was written, whether the
/// kernel stamped it from its coarse clock (up to a tick behind) or, with multigrain timestamps
/// (Linux 6.13+, measured here: most files written right after a stat carry a ctime beyond the
/// coarse clock), from the fine one: so nothing written before the stamp counts as a change.
/// What is written in the first tick after it may carry a coarse ctime at or before the stamp and
/// is missed; a model turn is many ticks long, and a missed change only matters to a turn that
/// changed nothing else. (std's clock, through libc: rustix's own vDSO lookup reads past the
/// vDSO under valgrind and kills the process there, which left the benchmark's instruction
/// counts of a prompt cut short.)
fn wall_now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl Stamp {
    /// HEAD moved or the index was written (`git add`, a commit, a checkout).
    pub fn git_moved(&self, now: &Stamp) -> bool {
        self.head != now.head || self.index != now.index
    }

    pub fn encode(&self) -> String {
        let (m, s, i) = self.index;
        format!(
            "g1:{}:{}:{m}:{s}:{i}",
            self.at_ns,
            crate::util::canon::hex16(&self.head)
        )
    }

    pub fn decode(text: &str) -> Option<Stamp> {
        let mut it = text.strip_prefix("g1:")?.split(':');
        let at_ns = it.next()?.parse().ok()?;
        let hex = it.next()?;
        let mut head = [0u8; 16];
        if hex.len() != 32 {
            return None;
        }
        for (k, b) in head.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * k..2 * k + 2)?, 16).ok()?;
        }
        let index = (
            it.next()?.parse().ok()?,
            it.next()?.parse().ok()?,
            it.next()?.parse().ok()?,
        );
        Some(Stamp { at_ns, head, index })
    }
}

/// Whether anything under `dir` changed since `stamp`: HEAD or the index first, then a bounded
/// walk that stops at the first changed entry. `None` when it cannot be told.
///
/// With `accounted`, the walk judges by content: a file the turn's tools left as they said is
/// no change of its own (created and deleted again, edited and reverted: the engine compares the
/// states), and a directory whose change stamp moved counts only when a file git tracks in it is
/// gone (an entry added is found as itself; a file created and deleted in the turn only moved
/// the directory's stamp).
pub fn changed_since(
    dir: &Path,
    stamp: &Stamp,
    limits: &Limits,
    accounted: Option<Accounted>,
) -> Option<bool> {
    let now = Stamp::take(dir)?;
    if stamp.git_moved(&now) {
        return Some(true);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let (root, at, lim) = (dir.to_path_buf(), stamp.at_ns, *limits);
    // On a helper thread: a hang inside the walk (a FIFO `.gitignore`, a dead mount) costs the
    // deadline, not the hook. The thread is left behind; the process exits soon after.
    std::thread::Builder::new()
        .name("loopgate-walk".into())
        .spawn(move || {
            let _ = tx.send(walk(&root, at, &lim, accounted.as_ref()));
        })
        .ok()?;
    rx.recv_timeout(limits.max_time).ok().flatten()
}

/// Directories whose change stamp moved, set aside while the walk looks for a changed file.
const MAX_MOVED_DIRS: usize = 64;

/// Whether a file git tracks in one of `dirs` is gone (deleted, renamed away). `None` when the
/// index cannot be read.
fn tracked_file_gone(root: &Path, dirs: &[PathBuf]) -> Option<bool> {
    let (workdir, git_dir) = find_repo(root)?;
    let index = git2::Index::open(&git_dir.join("index")).ok()?;
    let gone = index.iter().any(|e| {
        let Ok(rel) = std::str::from_utf8(&e.path) else {
            return false;
        };
        let path = workdir.join(rel);
        path.parent().is_some_and(|d| dirs.iter().any(|m| m == d))
            && std::fs::symlink_metadata(&path).is_err()
    });
    Some(gone)
}

/// Whether any of `paths` (files a turn's tools touched) changed since `stamp`: a cheap check
/// before a walk. Missing files count as changed (deleted).
pub fn paths_changed_since<'a>(paths: impl IntoIterator<Item = &'a Path>, stamp: &Stamp) -> bool {
    paths
        .into_iter()
        .any(|p| match std::fs::symlink_metadata(p) {
            Ok(m) => ctime_ns(&m) > stamp.at_ns as i128,
            Err(_) => true,
        })
}

fn ctime_ns(m: &std::fs::Metadata) -> i128 {
    crate::platform::change_ns(m)
}

/// The walk's answer so far, shared by its threads: the first to know sets it, the rest stop.
const UNDECIDED: u8 = 0;
const CHANGED: u8 = 1;
const CANNOT_TELL: u8 = 2;

/// Two threads walk the tree (one `lstat` per entry is most of the cost, and waits on the
/// kernel), stopping at the first entry changed since the stamp, the first error, or a limit.
fn walk(root: &Path, at_ns: u128, limits: &Limits, accounted: Option<&Accounted>) -> Option<bool> {
    use ignore::WalkState;
    use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::Relaxed};
    let deadline = Instant::now() + limits.max_time;
    let at = at_ns as i128;
    let verdict = AtomicU8::new(UNDECIDED);
    let seen = AtomicUsize::new(0);
    let moved_dirs = std::sync::Mutex::new(Vec::<PathBuf>::new());
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .ignore(false)
        .parents(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .same_file_system(true)
        .filter_entry(|e| e.file_name() != ".git")
        .threads(2)
        .build_parallel()
        .run(|| {
            let (verdict, seen, moved_dirs) = (&verdict, &seen, &moved_dirs);
            let mut probe = crate::platform::ChangeProbe::default();
            Box::new(move |entry| {
                if verdict.load(Relaxed) != UNDECIDED {
                    return WalkState::Quit;
                }
                let n = seen.fetch_add(1, Relaxed);
                let found =
                    if n >= limits.max_entries || (n % 256 == 0 && Instant::now() >= deadline) {
                        CANNOT_TELL
                    } else {
                        // An unreadable entry cannot be judged unchanged.
                        let Ok(e) = entry else {
                            return quit_with(verdict, CANNOT_TELL);
                        };
                        match probe.change_ns(e.path()) {
                            Some(ctime) if ctime > at => match accounted {
                                None => CHANGED,
                                Some(acc) => match by_content(&e, acc, moved_dirs) {
                                    Some(found) => found,
                                    None => return WalkState::Continue,
                                },
                            },
                            Some(_) => return WalkState::Continue,
                            None => CANNOT_TELL,
                        }
                    };
                quit_with(verdict, found)
            })
        });
    match verdict.into_inner() {
        UNDECIDED => {
            let dirs = moved_dirs.into_inner().ok()?;
            if dirs.is_empty() {
                Some(false)
            } else {
                tracked_file_gone(root, &dirs)
            }
        }
        CHANGED => Some(true),
        _ => None,
    }
}

fn quit_with(verdict: &std::sync::atomic::AtomicU8, found: u8) -> ignore::WalkState {
    use std::sync::atomic::Ordering::Relaxed;
    let _ = verdict.compare_exchange(UNDECIDED, found, Relaxed, Relaxed);
    ignore::WalkState::Quit
}

/// An entry whose change stamp moved, judged by content: `None` when it is no change of its own
/// (a file holding what the turn's tools left; a directory, set aside for [`tracked_file_gone`]).
fn by_content(
    e: &ignore::DirEntry,
    accounted: &Accounted,
    moved_dirs: &std::sync::Mutex<Vec<PathBuf>>,
) -> Option<u8> {
    match e.file_type() {
        Some(t) if t.is_dir() => {
            let mut dirs = moved_dirs.lock().ok()?;
            if dirs.len() >= MAX_MOVED_DIRS {
                // Too much moved to account for: that is a change.
                return Some(CHANGED);
            }
            dirs.push(e.path().to_path_buf());
            None
        }
        Some(t) if t.is_file() && accounted(e.path()) => None,
        _ => Some(CHANGED),
    }
}

/// The git dir of the repository holding `dir`: a `.git` directory, or the one a `.git` file
/// (`gitdir: …`, worktrees and submodules) names.
fn find_git_dir(dir: &Path) -> Option<PathBuf> {
    find_repo(dir).map(|(_, git_dir)| git_dir)
}

/// The repository holding `dir`: its work tree and its git dir.
fn find_repo(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut d = Some(dir);
    let mut depth = 0;
    while let Some(cur) = d {
        let dot = cur.join(".git");
        if let Ok(m) = std::fs::symlink_metadata(&dot) {
            if m.is_dir() {
                return Some((cur.to_path_buf(), dot));
            }
            if m.is_file() {
                let text = read_small(&dot)?;
                let rel = std::str::from_utf8(&text)
                    .ok()?
                    .trim()
                    .strip_prefix("gitdir:")?
                    .trim()
                    .to_string();
                return Some((cur.to_path_buf(), cur.join(rel)));
            }
        }
        depth += 1;
        if depth > 64 {
            return None;
        }
        d = cur.parent();
    }
    None
}

/// A small regular file's bytes (≤ 4 KiB), never blocking on a FIFO or reading a device.
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let f = crate::platform::open_read_nonblocking(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = Vec::with_capacity(256);
    f.take(4096).read_to_end(&mut buf).ok()?;
    Some(buf)
}

fn head_digest(git_dir: &Path) -> [u8; 16] {
    let mut h = Sha256::new();
    let head = read_small(&git_dir.join("HEAD")).unwrap_or_default();
    h.update(&head);
    h.update([0]);
    // Linked worktrees keep their refs in the common dir.
    let common = read_small(&git_dir.join("commondir"))
        .and_then(|c| String::from_utf8(c).ok())
        .map(|c| git_dir.join(c.trim()))
        .unwrap_or_else(|| git_dir.to_path_buf());
    if let Some(name) = std::str::from_utf8(&head)
        .ok()
        .and_then(|t| t.trim().strip_prefix("ref:"))
        .map(str::trim)
        .filter(|n| !n.split('/').any(|c| c == ".." || c.is_empty()))
    {
        for base in [git_dir, common.as_path()] {
            if let Some(r) = read_small(&base.join(name)) {
                h.update(&r);
                break;
            }
        }
    }
    h.update([0]);
    if let Ok(m) = std::fs::symlink_metadata(common.join("packed-refs")) {
        let (mtime, size, id) = crate::platform::identity(&m);
        h.update(mtime.to_le_bytes());
        h.update(size.to_le_bytes());
        h.update(id.to_le_bytes());
    }
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// `.git/index` is only `lstat`ed: a FIFO there cannot block anything.
fn index_stat(git_dir: &Path) -> (i128, u64, u64) {
    match std::fs::symlink_metadata(git_dir.join("index")) {
        Ok(m) => crate::platform::identity(&m),
        Err(_) => (0, 0, 0),
    }
}

/// Moves a stamp back in time (tests).
#[cfg(test)]
fn backdate(stamp: &mut Stamp, by: Duration) {
    stamp.at_ns -= by.as_nanos();
}

#[cfg(test)]
mod tests {
    use super::*;
    use git2::Repository;

    fn repo_with_commit(dir: &Path) -> Repository {
        let repo = Repository::init(dir).unwrap();
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        std::fs::write(dir.join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::create_dir(dir.join("target")).unwrap();
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

    fn changed(dir: &Path, s: &Stamp) -> Option<bool> {
        changed_since(dir, s, &Limits::default(), None)
    }

    /// Lets the clock move on by more than a kernel tick: file timestamps are coarse, so a
    /// change is told from the stamp only from the next tick on (a model turn is many ticks).
    fn settle() {
        std::thread::sleep(Duration::from_millis(50));
    }

    #[test]
    fn outside_git_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(Stamp::take(d.path()), None);
        assert_eq!(Git.stamp(d.path()), None);
    }

    #[test]
    fn stamps_round_trip_through_text() {
        let d = tempfile::tempdir().unwrap();
        repo_with_commit(d.path());
        let s = Stamp::take(d.path()).unwrap();
        assert_eq!(Stamp::decode(&s.encode()), Some(s.clone()));
        assert_eq!(Stamp::decode("0123abcd"), None, "an old fingerprint");
        assert!(Git.changed_since(d.path(), "garbage").is_none());
    }

    #[test]
    fn new_modified_deleted_files_and_commits_are_changes_ignored_files_are_not() {
        let d = tempfile::tempdir().unwrap();
        let repo = repo_with_commit(d.path());
        settle();
        let s = Stamp::take(d.path()).unwrap();
        settle();
        assert_eq!(changed(d.path(), &s), Some(false), "nothing changed yet");
        // Ignored output (a build dir, a log) is not progress.
        std::fs::write(d.path().join("target/out.bin"), "x").unwrap();
        assert_eq!(changed(d.path(), &s), Some(false), "ignored file");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        settle();
        let s = Stamp::take(d.path()).unwrap();
        settle();
        std::fs::write(d.path().join("sub/new.txt"), "n").unwrap();
        assert_eq!(changed(d.path(), &s), Some(true), "untracked file");
        settle();
        let s = Stamp::take(d.path()).unwrap();
        settle();
        std::fs::write(d.path().join("a.txt"), "changed\n").unwrap();
        assert_eq!(changed(d.path(), &s), Some(true), "modified file");
        settle();
        let s = Stamp::take(d.path()).unwrap();
        settle();
        std::fs::remove_file(d.path().join("sub/new.txt")).unwrap();
        assert_eq!(changed(d.path(), &s), Some(true), "deleted file");
        settle();
        let s = Stamp::take(d.path()).unwrap();
        settle();
        commit_all(&repo, "second");
        let now = Stamp::take(d.path()).unwrap();
        assert!(s.git_moved(&now), "a commit moves HEAD and the index");
        assert_eq!(changed(d.path(), &s), Some(true));
        // Found from a subdirectory too.
        assert!(Stamp::take(&d.path().join("sub")).is_some());
    }

    #[test]
    fn one_change_deep_among_many_unchanged_dirs_is_found_by_the_two_thread_walk() {
        let d = tempfile::tempdir().unwrap();
        repo_with_commit(d.path());
        for a in 0..6 {
            for b in 0..4 {
                let dir = d.path().join(format!("m{a}/s{b}"));
                std::fs::create_dir_all(&dir).unwrap();
                for f in 0..15 {
                    std::fs::write(dir.join(format!("f{f}.txt")), "x").unwrap();
                }
            }
        }
        settle();
        let s = Stamp::take(d.path()).unwrap();
        settle();
        for _ in 0..3 {
            assert_eq!(changed(d.path(), &s), Some(false), "nothing changed");
        }
        // Content rewritten in place (same size): only its ctime tells.
        std::fs::write(d.path().join("m4/s2/f11.txt"), "y").unwrap();
        for _ in 0..3 {
            assert_eq!(
                changed(d.path(), &s),
                Some(true),
                "a file deep down changed"
            );
        }
        // An entry budget smaller than the tree: "cannot tell", never "unchanged".
        settle();
        let s = Stamp::take(d.path()).unwrap();
        let lim = Limits {
            max_entries: 20,
            max_time: Duration::from_secs(5),
        };
        assert_eq!(changed_since(d.path(), &s, &lim, None), None);
    }

    #[test]
    fn touched_paths_are_checked_without_a_walk() {
        let d = tempfile::tempdir().unwrap();
        repo_with_commit(d.path());
        // Files written in the stamp's own kernel tick may read as changed (the gate leans to
        // not blocking): stamp a tick after the set-up, and look a tick later.
        settle();
        let mut s = Stamp::take(d.path()).unwrap();
        let a = d.path().join("a.txt");
        settle();
        assert!(!paths_changed_since([a.as_path()], &s));
        backdate(&mut s, Duration::from_secs(3600));
        assert!(paths_changed_since([a.as_path()], &s));
        assert!(paths_changed_since([d.path().join("gone").as_path()], &s));
    }

    #[test]
    #[cfg(unix)]
    fn a_fifo_index_and_a_huge_tree_cannot_hang_it() {
        use std::os::unix::fs::OpenOptionsExt;
        let d = tempfile::tempdir().unwrap();
        repo_with_commit(d.path());
        let index = d.path().join(".git/index");
        std::fs::remove_file(&index).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(&index)
            .status()
            .unwrap()
            .success());
        // A FIFO .gitignore too: opening it for reading would block forever.
        let gi = d.path().join("sub/.gitignore");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(&gi)
            .status()
            .unwrap()
            .success());
        settle();
        let t = Instant::now();
        let s = Stamp::take(d.path()).expect("the index is only stat'ed");
        let lim = Limits {
            max_entries: 1000,
            max_time: Duration::from_millis(300),
        };
        // Either the walk answers or it gives up at the deadline: "cannot tell" never blocks.
        let r = changed_since(d.path(), &s, &lim, None);
        assert_ne!(r, Some(true), "nothing changed");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        // Release a walk blocked opening the FIFO, then take it away.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&gi);
        std::fs::remove_file(&gi).unwrap();
        // An entry budget: a large tree answers "cannot tell", never a guess.
        for i in 0..50 {
            std::fs::write(d.path().join(format!("f{i}")), "x").unwrap();
        }
        let mut old = s.clone();
        old.at_ns = u128::MAX / 2;
        let tiny = Limits {
            max_entries: 10,
            max_time: Duration::from_secs(5),
        };
        assert_eq!(changed_since(d.path(), &old, &tiny, None), None);
    }
}
