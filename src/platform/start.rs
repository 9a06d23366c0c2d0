//! Process start-up: what of Rust's runtime start-up a hook needs, for the C entry point that
//! Linux/glibc builds use instead of it (`loopgate_fast_start`, see `main.rs`). Rust's own start-up
//! reads `/proc/self/maps` to place a stack guard and maps a signal stack: ~40 K instructions and
//! a dozen syscalls, a tenth of a hook call, paid by every tool call. Elsewhere (macOS, musl,
//! Windows, the `portable` feature) Rust's runtime starts the process and only
//! [`ignore_write_signals`] runs.
//!
//! With `main.rs`, the crate's only unsafe code: the few libc calls that have no safe std
//! equivalent.
#![allow(unsafe_code)]

/// A write past a file-size limit (`ulimit -f`) must fail with EFBIG, and a write to a pipe whose
/// reader went away with EPIPE, each handled like any write error, not as a silent death by
/// signal. What Rust's runtime does for SIGPIPE, extended to SIGXFSZ. Children that
/// `loopgate doctor` starts get SIGPIPE back by default (std's spawn resets it); an ignored
/// SIGXFSZ they keep, which only turns the same limit into an error for them too. Windows has
/// neither signal: a write to a closed pipe already fails.
pub fn ignore_write_signals() {
    #[cfg(unix)]
    for signal in [libc::SIGPIPE, libc::SIGXFSZ] {
        // SAFETY: SIG_IGN installs no code; nothing else in this single-threaded start-up is
        // changing dispositions.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
}

/// A standard stream the parent left closed must not become the next file opened: the state
/// file would then receive the answer meant for stdout. Each closed one of fds 0–2 is reopened on
/// `/dev/null`, which lands on the lowest free descriptor: what Rust's runtime does at start-up,
/// and in the usual case one `poll`.
#[cfg(loopgate_fast_start)]
pub fn keep_standard_streams_open() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is a valid array of three `pollfd`, and a zero timeout never blocks.
    let polled = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } != -1;
    for fd in fds {
        let closed = if polled {
            fd.revents & libc::POLLNVAL != 0
        } else {
            // poll can fail (a sandbox without it, ENOMEM); ask fd by fd instead.
            // SAFETY: F_GETFD only reads the descriptor's flags.
            let flags = unsafe { libc::fcntl(fd.fd, libc::F_GETFD) };
            flags == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
        };
        if closed {
            // SAFETY: a NUL-terminated path; the descriptor is meant to stay open for the
            // process's life, so it is not owned by anything that would close it.
            if unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) } == -1 {
                return;
            }
        }
    }
}

/// The `LOOPGATE_*` entries (UTF-8 names and values) of the environment block `execve` gave the
/// process, read in place. A hook inherits Claude Code's whole environment, often a hundred
/// variables or more: `std::env::vars_os` copies every one (two allocations each), and reading
/// `/proc/self/environ` costs six syscalls; here only the few matching entries are copied.
///
/// # Safety
/// `envp` is null or the NULL-terminated array of NUL-terminated strings glibc passed `main`,
/// and nothing has changed the environment since.
#[cfg(loopgate_fast_start)]
pub unsafe fn loopgate_vars(envp: *const *const std::ffi::c_char) -> Vec<(String, String)> {
    let mut vars = Vec::new();
    if envp.is_null() {
        return vars;
    }
    for i in 0.. {
        // SAFETY: the caller's contract: a NULL-terminated array, read up to its NULL.
        let entry = unsafe { *envp.add(i) };
        if entry.is_null() {
            break;
        }
        // SAFETY: as above, `entry` is a NUL-terminated string that outlives this call.
        let entry = unsafe { std::ffi::CStr::from_ptr(entry) }.to_bytes();
        if let Some(pair) = loopgate_pair(entry) {
            vars.push(pair);
        }
    }
    vars
}

/// One environment entry (`NAME=value`) as a name and a value, if it is a `LOOPGATE_*` variable
/// and both are UTF-8.
pub fn loopgate_pair(entry: &[u8]) -> Option<(String, String)> {
    if !entry.starts_with(b"LOOPGATE_") {
        return None;
    }
    // A plain scan: memchr's dispatch set-up costs more than these few bytes.
    let eq = entry.iter().position(|&b| b == b'=')?;
    Some((
        String::from_utf8(entry[..eq].to_vec()).ok()?,
        String::from_utf8(entry[eq + 1..].to_vec()).ok()?,
    ))
}
