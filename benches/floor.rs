//! The floor a hook binary cannot beat: a minimal Rust program that reads its stdin to the end and
//! exits. `cargo bench --bench latency` compiles it with the release profile's settings and the
//! same linking as the loopgate binary it measures (static, non-PIE on x86_64 Linux).
use std::io::Read;

fn main() {
    let mut buf = Vec::new();
    let _ = std::io::stdin().lock().read_to_end(&mut buf);
}
