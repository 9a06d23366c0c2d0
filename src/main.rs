//! The process entry.
//!
//! On Linux with glibc, loopgate is the C `main` itself (`no_main`). Rust's runtime start-up reads
//! `/proc/self/maps` to place a stack guard and maps a signal stack: ~40 K instructions and a dozen
//! syscalls, a tenth of a hook call, paid by every tool call. What of that start-up loopgate needs
//! (open standard streams, EPIPE instead of SIGPIPE, stdout flushed) `main_entry` does itself.
//! glibc hands the arguments to Rust's `std::env::args` by itself (an `.init_array` entry), which
//! is why this is limited to that target.
#![cfg_attr(all(target_os = "linux", target_env = "gnu", not(test)), no_main)]

// Not under `cargo test`, whose harness brings its own `main`.
#[cfg(all(target_os = "linux", target_env = "gnu", not(test)))]
#[allow(unsafe_code)] // `no_mangle` is the only way to be the C entry point; nothing unsafe runs.
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    loopgate::main_entry().code().into()
}

#[cfg(not(all(target_os = "linux", target_env = "gnu", not(test))))]
fn main() -> std::process::ExitCode {
    loopgate::main_entry().into()
}
