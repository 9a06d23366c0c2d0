//! A program run with a bound on its time: the out-of-band notice's command, and `curl` for an
//! `https://` webhook. No shell: the program and its arguments are given as they are, so nothing
//! in a notice is ever parsed as a command line.

use std::io::{self, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Runs `argv` with `stdin` written to it and its output discarded, until it exits or
/// `deadline` passes, when it is killed. `Ok(None)`: killed at the deadline.
pub fn run_bounded(
    argv: &[String],
    stdin: &[u8],
    deadline: Instant,
) -> io::Result<Option<ExitStatus>> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no program named"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    quiet(&mut cmd);
    let mut child = cmd.spawn()?;
    if let Some(mut pipe) = child.stdin.take() {
        // A receiver that never reads its input is not waited on: the notice is far smaller
        // than a pipe's buffer, and a closed pipe is its choice.
        let _ = pipe.write_all(stdin);
    }
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// No console window pops up for a program a hook runs on Windows; nothing to do elsewhere.
#[cfg(windows)]
fn quiet(cmd: &mut Command) {
    use std::os::windows::process::CommandExt;
    const CREATE_NO_WINDOW: u32 = 0x0800_0000;
    cmd.creation_flags(CREATE_NO_WINDOW);
}

#[cfg(not(windows))]
fn quiet(_: &mut Command) {}
