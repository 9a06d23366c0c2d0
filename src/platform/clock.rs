//! Wall-clock time in milliseconds, with a hidden override so tests can move time (forwards or
//! backwards) without sleeping.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> u64 {
    if let Some(ms) = std::env::var("LOOPGATE_CLOCK_MS")
        .ok()
        .filter(|_| !super::start::env_ignored())
        .and_then(|v| v.parse().ok())
    {
        return ms;
    }
    wall_ms()
}

/// The system's clock, never the tests' override: for comparing with the times the file system
/// stamps on files, which come from it too.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `HH:MM:SS UTC` for messages: the model and the human only need the time of day.
pub fn time_of_day(ms: u64) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_millis(ms);
    let s = humantime::format_rfc3339_seconds(t).to_string();
    format!("{} UTC", s.get(11..19).unwrap_or(&s))
}

pub fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats() {
        assert_eq!(super::time_of_day(3_723_000), "01:02:03 UTC");
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
    }
}
