//! The out-of-band notice (issue 39): when loopgate ends a turn or a session, or sees itself
//! switched off, weakened or reset, the person's own receiver hears it at once — a program run
//! with the notice as JSON on stdin, and/or a webhook it is POSTed to.
//!
//! It runs only at those moments and only when the user config names a receiver, so an ordinary
//! call pays nothing (the config is read on every call anyway). It is bounded: every receiver
//! runs at once and all of them together get `notify.timeout_ms` (at most
//! [`crate::config::MAX_NOTIFY_MS`]), after which the call goes on; a receiver that hangs, is
//! down or fails costs no more, and what happened is one line in `events.jsonl`.
//!
//! The webhook: `http://` is a plain HTTP/1.1 POST over `std::net::TcpStream` (no crate, no
//! start-up cost); `https://` runs `curl` (on every supported OS, Windows 10 included), so no
//! TLS stack is linked into a binary that starts on every tool call.

use crate::config::{Notify, MAX_NOTIFY_MS};
use crate::platform::clock::rfc3339;
use crate::protocol::payload::clip;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// What a notice is about; `kind` is stable, scripts compare it.
pub struct Notice<'a> {
    /// `halt`, `budget` (the loop budget's warning), `switched_off`, `weakened` or `reset`.
    pub kind: &'static str,
    /// The halt's reason code, or the tell's (`config_change`, `file_changed`, …).
    pub code: &'a str,
    pub session: &'a str,
    pub project: Option<&'a std::path::Path>,
    pub cli: &'a str,
    pub reason: &'a str,
    pub evidence: Value,
    pub resume: String,
    pub at_ms: u64,
}

impl Notice<'_> {
    /// The JSON every receiver gets, secrets masked.
    pub fn body(&self) -> Value {
        let mut v = json!({
            "loopgate": "notice",
            "version": 1,
            "kind": self.kind,
            "reason_code": self.code,
            "at": rfc3339(self.at_ms),
            "session": clip(self.session, 128),
            "project": self.project.map(|p| p.display().to_string()),
            "cli": self.cli,
            "reason": self.reason,
            "evidence": self.evidence,
            "resume": self.resume,
        });
        crate::judge::redact::mask_value(&mut v);
        v
    }
}

/// How one receiver took a notice.
pub struct Outcome {
    pub receiver: &'static str,
    pub ok: bool,
    pub ms: u64,
    pub detail: String,
}

/// Sends `notice` to every receiver `cfg` names, together, within its bound. Nothing named:
/// nothing done, nothing returned.
pub fn send(cfg: &Notify, notice: &Notice) -> Vec<Outcome> {
    if !cfg.wanted() {
        return Vec::new();
    }
    let bound = Duration::from_millis(cfg.timeout_ms.clamp(1, MAX_NOTIFY_MS));
    let start = Instant::now();
    let deadline = start + bound;
    let body = notice.body().to_string().into_bytes();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut waiting = Vec::new();
    if !cfg.command.is_empty() {
        let (tx, argv, body) = (tx.clone(), cfg.command.clone(), body.clone());
        waiting.push("command");
        std::thread::spawn(move || {
            let r = crate::platform::spawn::run_bounded(&argv, &body, deadline);
            let _ = tx.send(("command", command_result(r)));
        });
    }
    if !cfg.webhook.is_empty() {
        let (tx, url) = (tx.clone(), cfg.webhook.clone());
        waiting.push("webhook");
        std::thread::spawn(move || {
            let _ = tx.send(("webhook", post(&url, &body, deadline)));
        });
    }
    drop(tx);
    let mut out = Vec::new();
    while !waiting.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        // A receiver's own bound is the deadline too; the margin lets it say why it stopped.
        let Ok((receiver, result)) = rx.recv_timeout(left + Duration::from_millis(50)) else {
            break;
        };
        waiting.retain(|r| *r != receiver);
        out.push(outcome(receiver, start, result));
    }
    for receiver in waiting {
        out.push(outcome(
            receiver,
            start,
            Err(format!("no answer within {} ms", bound.as_millis())),
        ));
    }
    out
}

fn outcome(receiver: &'static str, start: Instant, result: Result<String, String>) -> Outcome {
    let ms = start.elapsed().as_millis() as u64;
    let (ok, detail) = match result {
        Ok(d) => (true, d),
        Err(d) => (false, d),
    };
    Outcome {
        receiver,
        ok,
        ms,
        detail: clip(&crate::judge::redact::mask(&detail), 200),
    }
}

fn command_result(r: std::io::Result<Option<std::process::ExitStatus>>) -> Result<String, String> {
    match r {
        Ok(Some(s)) if s.success() => Ok("exit 0".into()),
        Ok(Some(s)) => Err(format!("the command failed ({s})")),
        Ok(None) => Err("the command did not finish in time and was stopped".into()),
        Err(e) => Err(format!("the command could not run: {e}")),
    }
}

/// POSTs `body` to `url` before `deadline`: `http://` itself, `https://` through `curl`.
fn post(url: &str, body: &[u8], deadline: Instant) -> Result<String, String> {
    if url.starts_with("https://") {
        let secs = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
            .max(0.1);
        let argv: Vec<String> = [
            "curl",
            "--silent",
            "--show-error",
            "--fail",
            "--max-time",
            &format!("{secs:.1}"),
            "--header",
            "Content-Type: application/json",
            "--data-binary",
            "@-",
            url,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        return command_result(crate::platform::spawn::run_bounded(&argv, body, deadline));
    }
    let rest = url
        .strip_prefix("http://")
        .ok_or("the webhook is neither http:// nor https://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let addr = if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| "no answer in time".to_string())
    };
    let addrs: Vec<_> = std::net::ToSocketAddrs::to_socket_addrs(&addr)
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let mut last = format!("{host} has no address");
    for a in addrs {
        let mut s = match std::net::TcpStream::connect_timeout(&a, left()?) {
            Ok(s) => s,
            Err(e) => {
                last = format!("cannot connect to {host}: {e}");
                continue;
            }
        };
        let io = |e: std::io::Error| format!("{host}: {e}");
        s.set_write_timeout(Some(left()?)).map_err(io)?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nUser-Agent: loopgate/{}\r\nConnection: close\r\n\r\n",
            body.len(),
            env!("CARGO_PKG_VERSION")
        );
        s.write_all(head.as_bytes()).map_err(io)?;
        s.write_all(body).map_err(io)?;
        s.set_read_timeout(Some(left()?)).map_err(io)?;
        let mut status = [0u8; 12];
        s.read_exact(&mut status).map_err(io)?;
        let line = String::from_utf8_lossy(&status).to_string();
        return match line.get(9..12) {
            Some(code) if code.starts_with('2') => Ok(format!("HTTP {code}")),
            Some(code) => Err(format!("{host} answered HTTP {code}")),
            None => Err(format!("{host} did not answer HTTP")),
        };
    }
    Err(last)
}

/// One event-log line per receiver: what it was told and how it took it.
pub fn log_lines(notice: &Notice, event: &str, outcomes: &[Outcome]) -> Vec<Value> {
    outcomes
        .iter()
        .map(|o| {
            json!({
                "ts": rfc3339(crate::platform::clock::now_ms()),
                "session": clip(notice.session, 128),
                "event": event,
                "detector": "notify",
                "decision": if o.ok { "notice_sent" } else { "notice_failed" },
                "enforced": true,
                "severity": if o.ok { "info" } else { "high" },
                "reason": format!("{} notice ({}) to the {}: {}", notice.kind, notice.code, o.receiver, o.detail),
                "evidence": {"receiver": o.receiver, "ok": o.ok, "ms": o.ms, "kind": notice.kind, "reason_code": notice.code},
            })
        })
        .collect()
}

/// The stderr line for receivers that failed: the call went on, the person should know.
pub fn failures(outcomes: &[Outcome]) -> Option<String> {
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.ok)
        .map(|o| format!("the notice to the {} failed ({})", o.receiver, o.detail))
        .collect();
    (!failed.is_empty()).then(|| failed.join("; "))
}

/// Sends a notice and logs how it went into the event log in `dir`; the failures, if any, as one
/// line for stderr.
pub fn deliver(
    cfg: &crate::config::Config,
    dir: Option<&std::path::Path>,
    event: &str,
    notice: &Notice,
) -> Option<String> {
    let outcomes = send(&cfg.notify, notice);
    if outcomes.is_empty() {
        return None;
    }
    if let Some(dir) = dir {
        let lines = log_lines(notice, event, &outcomes);
        let _ = crate::store::events::append(dir, &lines, &cfg.log, super::lock_wait(cfg));
    }
    failures(&outcomes)
}

/// A defence tell answered apart from the judged calls (ConfigChange, FileChanged: Claude Code's
/// events), sent at once.
pub(super) fn tell(
    cfg: &crate::config::Config,
    dir: Option<&std::path::Path>,
    payload: &crate::protocol::payload::Payload,
    (event, kind, code): (&str, &'static str, &str),
    text: &str,
) -> Option<String> {
    if !cfg.notify.wanted() {
        return None;
    }
    let project = crate::protocol::dialect::Agent::Claude
        .project_dir()
        .or_else(|| payload.cwd.as_deref().map(std::path::PathBuf::from));
    let notice = Notice {
        kind,
        code,
        session: &payload.session_id,
        project: project.as_deref(),
        cli: crate::protocol::dialect::Agent::Claude.name(),
        reason: text,
        evidence: json!({"file_path": payload.file_path.as_deref().map(|f| clip(f, 256))}),
        resume: "nothing to resume: loopgate told what it saw; `loopgate doctor` checks the \
                 installation"
            .into(),
        at_ms: crate::platform::clock::now_ms(),
    };
    deliver(cfg, dir, event, &notice)
}
