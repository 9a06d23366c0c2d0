//! A real stack overflow under loopgate's crash handler: the tests (`tests/faults.rs`) and
//! `contrib/ci/cross.sh` (under wine) run it to see the one line a crash leaves and its fail-open
//! exit code, on each platform. It is not shipped; loopgate itself has no way to crash on purpose.

fn main() {
    loopgate::platform::start::report_crashes();
    println!("{}", deeper(0));
}

/// Each frame keeps a buffer the optimiser cannot drop, so the recursion reaches the guard page.
fn deeper(n: u64) -> u64 {
    let frame = std::hint::black_box([n as u8; 4096]);
    if std::hint::black_box(n) == u64::MAX {
        return frame[0].into();
    }
    deeper(n + 1) + u64::from(frame[1])
}
