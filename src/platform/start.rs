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

/// Set by `--ignore-env` (a managed install's hooks): the process then takes no `LOOPGATE_*`
/// variable from its environment, which the user's settings and shell reach.
static IGNORE_ENV: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This process takes no `LOOPGATE_*` variable from its environment (`--ignore-env`).
pub fn ignore_env() {
    IGNORE_ENV.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`ignore_env`] was called.
pub fn env_ignored() -> bool {
    IGNORE_ENV.load(std::sync::atomic::Ordering::Relaxed)
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

/// What a crash leaves for the person: one line, as every other failure does, and the exit that
/// lets the call proceed. Without it a stack overflow or a bad memory access ended the process
/// with no word at all (the C entry skips the part of Rust's start-up that prints one) or with
/// Rust's two lines.
const CRASH_LINE: &[u8] = b"loopgate: internal error: it crashed (a stack overflow or a bad \
memory access); the call proceeds unjudged\n";

/// The exit code of a crash: the agent CLI's fail-open code (see `protocol::exit`).
static CRASH_EXIT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);

/// Sets the code a crash exits with, as `protocol::exit::fail_open_with` does for other failures.
pub fn crash_exit_with(code: u8) {
    CRASH_EXIT.store(code, std::sync::atomic::Ordering::Relaxed);
}

/// Makes a crash (SIGSEGV, SIGBUS; on Windows a stack overflow or an access violation) say its
/// one line and exit with the fail-open code, on this thread and any that calls
/// [`report_crashes_on_this_thread`].
pub fn report_crashes() {
    #[cfg(windows)]
    // SAFETY: both calls only record a handler; the handlers call `GetStdHandle`, `WriteFile` and
    // `ExitProcess`, which need no lock a crashed thread could hold.
    unsafe {
        use windows_sys::Win32::System::Diagnostics::Debug as debug;
        // A stack overflow first (Rust's own handler would print its two lines and abort); an
        // access violation only when nothing else handles it (some system code handles its own).
        debug::AddVectoredExceptionHandler(1, Some(on_stack_overflow));
        debug::SetUnhandledExceptionFilter(Some(on_unhandled));
    }
    #[cfg(unix)]
    // SAFETY: a zeroed `sigaction` is a valid value (no flags, empty mask once `sigemptyset`
    // has run); the handler only calls async-signal-safe functions (`write`, `_exit`).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_crash as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        for signal in [libc::SIGSEGV, libc::SIGBUS] {
            libc::sigaction(signal, &sa, std::ptr::null_mut());
        }
        // The starting thread's stack for the handler is static (zero pages, nothing to map).
        alternate_stack((&raw mut MAIN_ALT_STACK).cast());
    }
}

/// The handler's stack on the thread that calls [`report_crashes`]; other threads map their own.
#[cfg(unix)]
static mut MAIN_ALT_STACK: [u8; ALT_STACK] = [0; ALT_STACK];

/// Enough for the handler, which only writes a line and exits.
#[cfg(unix)]
const ALT_STACK: usize = 64 << 10;

/// Runs the crash handler on `stack` (of [`ALT_STACK`] bytes) on this thread.
///
/// # Safety
/// `stack` must stay valid, and used by nothing else, for the rest of the process.
#[cfg(unix)]
unsafe fn alternate_stack(stack: *mut libc::c_void) {
    let alt = libc::stack_t {
        ss_sp: stack,
        ss_flags: 0,
        ss_size: ALT_STACK,
    };
    // SAFETY: as the caller promises; `sigaltstack` only records the range.
    unsafe { libc::sigaltstack(&alt, std::ptr::null_mut()) };
}

/// A stack of its own for the crash handler on this thread (a stack overflow leaves none to run
/// it on): mapped, never touched until a crash. For threads started after [`report_crashes`].
pub fn report_crashes_on_this_thread() {
    #[cfg(unix)]
    // SAFETY: `mmap` of fresh anonymous memory has no preconditions; the mapping is never
    // unmapped, so the alternate stack outlives the thread that uses it.
    unsafe {
        let stack = libc::mmap(
            std::ptr::null_mut(),
            ALT_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANON,
            -1,
            0,
        );
        if stack != libc::MAP_FAILED {
            alternate_stack(stack);
        }
    }
}

#[cfg(windows)]
unsafe extern "system" fn on_stack_overflow(
    info: *mut windows_sys::Win32::System::Diagnostics::Debug::EXCEPTION_POINTERS,
) -> i32 {
    use windows_sys::Win32::Foundation::EXCEPTION_STACK_OVERFLOW;
    // SAFETY: Windows passes a valid record for the exception being dispatched.
    let code = unsafe { (*(*info).ExceptionRecord).ExceptionCode };
    if code == EXCEPTION_STACK_OVERFLOW {
        crash_said_windows();
    }
    windows_sys::Win32::System::Diagnostics::Debug::EXCEPTION_CONTINUE_SEARCH
}

#[cfg(windows)]
unsafe extern "system" fn on_unhandled(
    _info: *const windows_sys::Win32::System::Diagnostics::Debug::EXCEPTION_POINTERS,
) -> i32 {
    crash_said_windows()
}

/// The crash line on stderr, then the fail-open exit.
#[cfg(windows)]
fn crash_said_windows() -> ! {
    use windows_sys::Win32::System::Console::{GetStdHandle, STD_ERROR_HANDLE};
    let mut written = 0u32;
    // SAFETY: a handle from `GetStdHandle` (possibly invalid: `WriteFile` then fails) and a
    // static buffer; `ExitProcess` does not return.
    unsafe {
        windows_sys::Win32::Storage::FileSystem::WriteFile(
            GetStdHandle(STD_ERROR_HANDLE),
            CRASH_LINE.as_ptr(),
            CRASH_LINE.len() as u32,
            &mut written,
            std::ptr::null_mut(),
        );
        windows_sys::Win32::System::Threading::ExitProcess(
            CRASH_EXIT.load(std::sync::atomic::Ordering::Relaxed).into(),
        )
    }
}

#[cfg(unix)]
extern "C" fn on_crash(_signal: libc::c_int) {
    // SAFETY: `write` and `_exit` are async-signal-safe; the line is static.
    unsafe {
        libc::write(2, CRASH_LINE.as_ptr().cast(), CRASH_LINE.len());
        libc::_exit(CRASH_EXIT.load(std::sync::atomic::Ordering::Relaxed).into());
    }
}
