//! The last steps of a judged call: the decisions and notices into the event log, then the
//! answer in the CLI's dialect with what the person must hear.

use super::session::Session;
use super::{lock_wait, Call, Done, Told};
use crate::config::{self, Mode};
use crate::protocol::exit::Exit;
use crate::protocol::payload::{clip, Payload};
use crate::protocol::verdict::{strongest, Verdict};
use crate::store::events;

/// One JSON line per verdict and per notice into the event log (the lock is still held).
pub(super) fn log(
    call: &Call,
    session: &Session,
    verdicts: &[Verdict],
    cfg: &config::Config,
    told: &mut Told,
) {
    let meta = events::Meta {
        payload: call.payload,
        event: call.event,
        now_ms: call.now_ms,
        enforced: cfg.mode == Mode::Enforce,
        preview: cfg.log.preview.then(|| preview(call.payload)).flatten(),
        config: Some(cfg),
    };
    let mut lines: Vec<_> = verdicts.iter().map(|v| events::line(&meta, v)).collect();
    lines.extend(told.notices.iter().map(|n| notice_line(&meta, n)));
    if let Some(n) = &session.rewired {
        let mut line = notice_line(&meta, n);
        line["detector"] = "guard".into();
        lines.push(line);
    }
    told.notices.extend(session.rewired.clone());
    if let Some(s) = &session.store {
        if let Err(e) = events::append(s.dir(), &lines, &cfg.log, lock_wait(cfg)) {
            told.problems.push(format!("{e:#}"));
        }
    }
}

/// Releases the session, sweeps old files at a session's first call, and answers: the strongest
/// verdict in the CLI's dialect (enforce mode only), with the notices and, once per session, the
/// configuration's problems as a `systemMessage`.
pub(super) fn answer(
    call: &Call,
    session: Session,
    verdicts: &[Verdict],
    cfg: &config::Config,
    told: Told,
) -> Done {
    let Told {
        mut problems,
        config_problems,
        notices,
        halt,
        budget,
    } = told;
    let notify = !config_problems.is_empty()
        && session.store.as_ref().is_none_or(|s| {
            crate::store::notice::first_time(
                s.dir(),
                &call.payload.session_id,
                &config_problems.join("\n"),
            )
        });
    // Files only pile up as sessions start, so a session's first call is when housekeeping
    // looks at its stamp; the calls after it skip even that `stat`.
    let first_call = session.lock().is_some_and(|l| !l.session_known());
    let Session {
        store, held, tells, ..
    } = session;
    drop(held);
    // After the lock is released: a slow receiver holds no other call of the session.
    if cfg.notify.wanted() {
        let dir = store.as_ref().map(|s| s.dir());
        problems.extend(notices_out(
            call,
            cfg,
            dir,
            halt.as_ref(),
            budget.as_ref(),
            &tells,
            verdicts,
        ));
    }
    if let Some(s) = store.as_ref().filter(|_| first_call) {
        crate::store::gc::maybe_sweep(s.dir(), &cfg.housekeeping);
    }
    let answer = if cfg.mode == Mode::Enforce {
        strongest(verdicts).and_then(|v| {
            crate::protocol::dialect::answer(call.agent, call.event, call.expected, v)
        })
    } else {
        None
    };
    let mut stdout = with_notices(answer, &notices);
    if !notices.is_empty() {
        // Also on stderr, for logs that keep it; exit 0 keeps the answer (and the notice) valid.
        problems.extend(notices);
    }
    if notify {
        let message = crate::store::notice::config_message(&config_problems);
        stdout = Some(crate::store::notice::with_system_message(stdout, &message));
    }
    Done {
        stdout,
        problems,
        exit: Exit::Ok,
    }
}

/// An event-log line for a notice (not a verdict: nothing was denied for it).
fn notice_line(m: &events::Meta, notice: &str) -> serde_json::Value {
    serde_json::json!({
        "ts": crate::platform::clock::rfc3339(m.now_ms),
        "session": clip(&m.payload.session_id, 128),
        "agent": m.payload.agent_key(),
        "prompt_id": m.payload.prompt_id,
        "event": m.event.name(),
        "tool": m.payload.tool_name,
        "detector": "state_store",
        "loop_type": "other",
        "decision": "notice",
        "enforced": m.enforced,
        "severity": "high",
        "reason": format!("loopgate: {notice}"),
    })
}

/// Adds the notices to the answer's `systemMessage` (the human sees it, the model does not), or
/// answers with only a `systemMessage` when there was nothing else to say.
fn with_notices(answer: Option<String>, notices: &[String]) -> Option<String> {
    if notices.is_empty() {
        return answer;
    }
    let text = format!("loopgate: {}", notices.join("; "));
    let mut v = answer
        .and_then(|a| serde_json::from_str::<serde_json::Value>(&a).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    let msg = match v.get("systemMessage").and_then(|m| m.as_str()) {
        Some(m) => format!("{m} | {text}"),
        None => text,
    };
    v["systemMessage"] = serde_json::Value::String(msg);
    Some(v.to_string())
}

fn preview(p: &Payload) -> Option<String> {
    p.tool_input
        .as_ref()
        .map(|i| crate::judge::redact::target(p.tool(), i))
}

/// The out-of-band notices of this call: its halt, and what the defence noticed.
fn notices_out(
    call: &Call,
    cfg: &config::Config,
    dir: Option<&std::path::Path>,
    halt: Option<&crate::judge::halt::Halt>,
    budget: Option<&(String, serde_json::Value)>,
    tells: &[super::session::Tell],
    verdicts: &[Verdict],
) -> Vec<String> {
    let project = call
        .project_dir
        .map(std::path::Path::to_path_buf)
        .or_else(|| call.payload.cwd.as_deref().map(std::path::PathBuf::from));
    let claude = call.agent == crate::protocol::dialect::Agent::Claude;
    let session = &call.payload.session_id;
    let base = |kind, code, reason, evidence| super::notify::Notice {
        kind,
        code,
        session,
        project: project.as_deref(),
        cli: call.agent.name(),
        reason,
        evidence,
        resume: crate::judge::halt::how_to_resume(session, claude),
        at_ms: call.now_ms,
    };
    let mut notices: Vec<super::notify::Notice> = Vec::new();
    if let Some(h) = halt {
        notices.push(base("halt", &h.code, &h.reason, h.evidence_value()));
    }
    if let Some((reason, evidence)) = budget {
        let mut n = base("budget", "budget", reason, evidence.clone());
        n.resume = "nothing to resume yet: the session pauses at the budget; raise it with \
                    `/loopgate budget +N` or `loopgate continue --budget N`"
            .into();
        notices.push(n);
    }
    // An agent's attempt to switch loopgate off, refused by the guard, is a weakening the person
    // hears of at once: the next attempt may take a route the guard does not parse.
    let enforced = cfg.mode == Mode::Enforce;
    for v in verdicts
        .iter()
        .filter(|v| v.detector == crate::judge::detectors::guard::NAME)
        .filter(|v| v.action >= crate::protocol::verdict::Action::Deny)
    {
        let code = if enforced {
            "guard_refused"
        } else {
            "guard_would_refuse"
        };
        let mut n = base(
            "weakened",
            code,
            &v.reason,
            serde_json::Value::Object(v.evidence.clone()),
        );
        n.resume = if enforced {
            "nothing to resume: the attempt was refused; `loopgate report` lists the session's \
             refusals"
        } else {
            "observe mode let it through; `loopgate report` lists what it would have refused"
        }
        .into();
        notices.push(n);
    }
    for t in tells {
        let mut n = base(t.kind, t.code, &t.text, serde_json::Value::Null);
        n.resume = "nothing to resume: loopgate told what it saw; `loopgate doctor` checks the \
                    installation"
            .into();
        notices.push(n);
    }
    notices
        .iter()
        .filter_map(|n| super::notify::deliver(cfg, dir, call.event.name(), n))
        .collect()
}
