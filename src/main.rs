//! The process entry.
//!
//! On Linux with glibc (`loopgate_fast_start`, set by `build.rs` unless the `portable` feature
//! is on), loopgate is the C `main` itself (`no_main`), and [`loopgate::platform::start`] does
//! what of Rust's runtime start-up a hook needs. glibc hands the arguments to Rust's
//! `std::env::args` by itself (an `.init_array` entry), which is why this is limited to that
//! target. Everywhere else Rust's runtime starts the process.
#![cfg_attr(all(loopgate_fast_start, not(test)), no_main)]

use loopgate::platform::start;

// Not under `cargo test`, whose harness brings its own `main`.
#[cfg(all(loopgate_fast_start, not(test)))]
#[allow(unsafe_code)] // `no_mangle` is the only way to be the C entry point.
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
    envp: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // First: a stack limit small enough to overflow here still leaves its one line.
    start::report_crashes();
    start::keep_standard_streams_open();
    start::ignore_write_signals();
    // SAFETY: `envp` is the environment block glibc passed `main`, untouched so far.
    loopgate::config::set_process_vars(unsafe { start::loopgate_vars(envp) });
    loopgate::main_entry().code().into()
}

#[cfg(not(all(loopgate_fast_start, not(test))))]
fn main() -> std::process::ExitCode {
    start::report_crashes();
    // Rust's runtime has kept the standard streams open and ignores SIGPIPE; SIGXFSZ is ours.
    start::ignore_write_signals();
    loopgate::main_entry().into()
}
