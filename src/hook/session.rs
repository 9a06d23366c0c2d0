//! The session a judged call works on: the state dir (repaired, or a private fallback), the
//! session's lock (or, while another process holds it, that holder's journal), and the state,
//! with every repair or loss told to the person.

use super::{lock_wait, state_dir, Call};
use crate::cli::Cli;
use crate::config;
use crate::judge::state::SessionState;
use crate::protocol::payload::clip;
use crate::store::{Busy, Held, SessionLock, Store};
use anyhow::{Context, Result};

/// The store, and the session's lock or the busy holder's journal; either may be missing, and
/// the call is judged all the same.
pub(super) struct Session {
    pub store: Option<Store>,
    pub held: Option<Held>,
    /// The saved state could not be read or moved aside: it is not written over either.
    pub unreadable: bool,
    /// At the session's first call: an agent changed the CLI's hook files.
    pub rewired: Option<String>,
    /// What the defence noticed at this call (switched off, weakened, reset), for the notice.
    pub tells: Vec<Tell>,
    /// The state read was put back from an earlier copy: the calls since are counted again
    /// from the transcript ([`super::recount`]).
    pub put_back: bool,
}

/// One thing the defence noticed, as the out-of-band notice names it.
pub(super) struct Tell {
    /// `switched_off`, `weakened` or `reset`.
    pub kind: &'static str,
    /// What noticed it: `hook_files`, `state_restored`, `state_lost`, `config_loosened`.
    pub code: &'static str,
    pub text: String,
}

impl Session {
    pub fn lock(&self) -> Option<&SessionLock> {
        match &self.held {
            Some(Held::Locked(l)) => Some(l),
            _ => None,
        }
    }

    pub fn busy(&self) -> Option<&Busy> {
        match &self.held {
            Some(Held::Busy(b)) => Some(b),
            _ => None,
        }
    }
}

/// Opens the session: no usable store does not stop the judgement, the guard and the detectors
/// answer on a fresh in-memory state (and the person is told).
pub(super) fn open(
    call: &Call,
    cfg: &config::Config,
    env_ignored: &[String],
    notices: &mut Vec<String>,
) -> (Session, SessionState) {
    let store = open_store(call.cli, notices);
    let session_id = &call.payload.session_id;
    let held = store
        .as_ref()
        .and_then(|s| hold(s, session_id, cfg, notices));
    let mut session = Session {
        store,
        held,
        unreadable: false,
        rewired: None,
        tells: Vec::new(),
        put_back: false,
    };
    let lock = session.lock();
    let mut tells = Vec::new();
    if let Some(q) = lock.and_then(|l| l.healed.as_ref()) {
        notices.push(format!(
            "the session's lock file was {} and has been moved to {}; a fresh one was made",
            q.why,
            q.path.display()
        ));
    }
    let mut unreadable = false;
    let (loaded, quarantined) = match (&session.store, lock) {
        (Some(s), Some(l)) => s.load(l).unwrap_or_else(|e| {
            // What could not be read or moved aside is not written over either.
            notices.push(format!(
                "{e:#}; this call was judged on a fresh state and not recorded"
            ));
            unreadable = true;
            (None, None)
        }),
        (Some(s), None) => (Store::peek(&s.state_path(session_id)), None),
        (None, _) => (None, None),
    };
    if let Some(l) = lock {
        // What FileChanged noticed since the last call (its own answer is shown nowhere).
        notices.extend(crate::defence::wiring::take_pending(l.state_path()));
    }
    // A session's first call: did an agent change the CLI's hook files, or loopgate's files in
    // any host? (never on later calls)
    let rewired = lock.filter(|l| !l.session_known()).and_then(|_| {
        let wiring = crate::defence::wiring_check::session_notice(
            call.agent,
            call.project_dir,
            call.cli.plugin.as_deref(),
        );
        let hosts = session.store.as_ref().and_then(|s| host_files(s, call));
        match (wiring, hosts) {
            (Some(w), Some(h)) => Some(format!("{w}. {h}")),
            (w, h) => w.or(h),
        }
    });
    if let Some(q) = &quarantined {
        notices.push(format!(
            "session state was unusable ({}) and has been moved to {}; loop counts start again \
             from zero",
            q.why,
            q.path.display()
        ));
    }
    let known = lock.is_some_and(|l| l.session_known());
    if let (Some(s), Some(_), false, None) = (&session.store, lock, known, &quarantined) {
        let lost = super::forgotten::told(call, s.dir(), &Store::stem(session_id));
        tell(&mut tells, "reset", "state_lost", &lost);
        notices.extend(lost);
    }
    // Another session's state in its place is told as such by `state_of`, not as a put-back.
    let ours = loaded
        .as_ref()
        .is_some_and(|s| s.session == clip(session_id, 128));
    let mut state = state_of(loaded, quarantined.is_none() && known, call, notices);
    let mut was_put_back = false;
    if let Some(l) = lock {
        let put_back = lock
            .filter(|_| ours)
            .and_then(put_back)
            .or_else(|| restored(&mut state, l));
        tell(&mut tells, "reset", "state_restored", &put_back);
        was_put_back = put_back.is_some();
        notices.extend(put_back);
    }
    if lock.is_some() {
        let loosened = config_loosened(&mut state, cfg, call.cli.observe);
        tell(&mut tells, "weakened", "config_loosened", &loosened);
        notices.extend(loosened);
    }
    if let (Some(s), Some(_)) = (&session.store, lock) {
        let ignored = env_ignored_once(s, session_id, env_ignored);
        tell(&mut tells, "weakened", "env_ignored", &ignored);
        notices.extend(ignored);
    }
    session.unreadable = unreadable;
    session.put_back = was_put_back;
    tell(&mut tells, "switched_off", "hook_files", &rewired);
    session.rewired = rewired;
    session.tells = tells;
    (session, state)
}

/// At a session's first call: loopgate's files in other hosts (a plugin, an Agent SDK helper's
/// copy) changed since they were recorded, and the helper that runs this call, if it names
/// itself, checked against the copy this binary ships.
fn host_files(store: &Store, call: &Call) -> Option<String> {
    let dir = store.dir();
    let mut problems: Vec<String> = call
        .cli
        .sdk
        .as_deref()
        .and_then(|f| crate::defence::host_files::sdk_copy(dir, f))
        .into_iter()
        .collect();
    // The helper's own copy is told once, by what it is now.
    let own = (!problems.is_empty())
        .then(|| call.cli.sdk.as_deref().map(crate::config::paths::lexical))
        .flatten();
    problems.extend(
        crate::defence::host_files::problems(dir)
            .into_iter()
            .filter(|p| {
                own.as_ref()
                    .is_none_or(|o| !p.contains(&*o.to_string_lossy()))
            }),
    );
    crate::defence::host_files::notice(&problems)
}

/// The session's lock, or the busy holder's journal to record in; neither when locking failed.
fn hold(
    store: &Store,
    session_id: &str,
    cfg: &config::Config,
    notices: &mut Vec<String>,
) -> Option<Held> {
    match store.lock_or_busy(&Store::stem(session_id), lock_wait(cfg)) {
        Ok(h) => Some(h),
        Err(e) => {
            notices.push(format!(
                "{e:#}; this call was judged on a read-only copy of the session state and \
                 not recorded"
            ));
            None
        }
    }
}

/// How far past loopgate's last write of a state its file's change time may run before that
/// change is someone else's: well beyond a file system's drift from the system clock, which each
/// session measures, and its timestamps' coarseness.
const RESTORED_AFTER_MS: i64 = 5_000;

/// A state file written since loopgate last wrote it (an earlier copy put back lowers every loop
/// count to what it was then): told, once, since this call's save makes the two agree again.
/// Each call notes how far the file system's change time runs from the system clock, so a
/// network file system whose server clock differs is not taken for someone else.
fn restored(state: &mut SessionState, lock: &SessionLock) -> Option<String> {
    let changed = lock.state_changed_ms()?;
    let at = state.written.at_ms;
    if at == 0 {
        return None;
    }
    let drift = changed.saturating_sub(i64::try_from(at).ok()?);
    match state.written.skew_ms {
        Some(skew) if drift.saturating_sub(skew) > RESTORED_AFTER_MS => Some(format!(
            "the session's state file was written at {} by something other than loopgate, \
             which last wrote it at {}: an earlier copy put back (or another file) takes the \
             loop counts back to what they were then. If that was not you, `loopgate status` \
             shows the session",
            crate::platform::clock::time_of_day(u64::try_from(changed).unwrap_or(0)),
            crate::platform::clock::time_of_day(at)
        )),
        _ => {
            state.written.skew_ms = Some(drift);
            None
        }
    }
}

/// An earlier copy of the state file put back, however soon after it was taken: the lock file
/// keeps the generation loopgate last saved, out of a copy of the state file's reach. What the
/// copy hides is gone with the file it overwrote (the person is told; this call's save records
/// the generation again, so once).
fn put_back(lock: &SessionLock) -> Option<String> {
    let (found, saved) = lock.put_back()?;
    let when = if found < saved {
        format!("it holds loopgate's update {found} of this session, and loopgate had saved update {saved}")
    } else {
        format!(
            "it was written since loopgate's update {saved} of this session by something else \
             (the lock file's record went back with it)"
        )
    };
    Some(format!(
        "the session's state file was put back from an earlier copy: {when}. If that was not \
         you, something in the session is undoing loopgate's record (`loopgate status` shows \
         the session)"
    ))
}

/// The saved state, or a fresh one when there is none, when it belongs to another session, or
/// when it vanished since the last call (`known`: the session has been seen and no state was
/// moved aside).
fn state_of(
    loaded: Option<SessionState>,
    known: bool,
    call: &Call,
    notices: &mut Vec<String>,
) -> SessionState {
    let session_id = &call.payload.session_id;
    let fresh = || SessionState::new(session_id, call.now_ms);
    match loaded {
        Some(s) if s.session != clip(session_id, 128) => {
            notices.push(
                "the session's state file was replaced by another session's state; it is \
                 ignored and loop counts start again from zero"
                    .into(),
            );
            fresh()
        }
        Some(s) => s,
        None => {
            if known {
                notices.push(
                    "the session's state file vanished since the last call (deleted by a tool?); \
                     loop counts start again from zero"
                        .into(),
                );
            }
            fresh()
        }
    }
}

/// The configuration loosened since the session began, or since the person was last told: a
/// config file made or edited mid-session (one FileChanged may not see) that raises a threshold,
/// switches a detector or the guard off, or exempts a command. Told once; the new configuration
/// is the baseline from then on. A first call only takes the baseline.
fn config_loosened(
    state: &mut SessionState,
    cfg: &config::Config,
    flag_observe: bool,
) -> Option<String> {
    // The common case, the same configuration again, costs one encoding and a comparison.
    let now = postcard::to_allocvec(cfg).ok()?;
    if state.heed.config == now {
        return None;
    }
    let old = postcard::from_bytes::<config::Config>(&state.heed.config).ok();
    // `--observe` on the command line is how the hooks were wired (ConfigChange and the
    // first-call check judge that), not a configuration that changed: the mode stays the one
    // the baseline has.
    let (now, cfg) = match &old {
        Some(o) if flag_observe && o.mode != cfg.mode => {
            let kept = config::Config {
                mode: o.mode,
                ..cfg.clone()
            };
            (
                postcard::to_allocvec(&kept).ok()?,
                std::borrow::Cow::Owned(kept),
            )
        }
        _ => (now, std::borrow::Cow::Borrowed(cfg)),
    };
    if state.heed.config == now {
        return None;
    }
    state.heed.config = now;
    let changes = crate::config::tighten::loosened(&old?, &cfg);
    (!changes.is_empty()).then(|| {
        format!(
            "loopgate's configuration was loosened during this session: {}. If you did not \
             change it, `loopgate config` shows which file each value comes from.",
            changes.join(", ")
        )
    })
}

/// The hook's environment tried to loosen loopgate (observe mode, another state dir or config
/// file, a threshold raised): ignored on every call, told once per session (and again if what
/// it sets changes).
fn env_ignored_once(store: &Store, session_id: &str, ignored: &[String]) -> Option<String> {
    if ignored.is_empty() {
        return None;
    }
    // Masked only once it is to be told: the masks cost ten times an ordinary call, and the
    // variable stays set on every call of the session (the notice file keeps a digest only).
    let key = format!("{session_id}\0env");
    if !crate::store::notice::first_time(store.dir(), &key, &ignored.join("\0")) {
        return None;
    }
    Some(crate::judge::redact::mask(&format!(
        "the hook's environment sets {}, which would loosen loopgate or move its state: ignored, \
         since a settings file's `env` or a shell start-up file can put it there. loopgate goes \
         on as its hook command and your config file say; to change that, use the user config \
         file or the hook command's --observe, --state-dir or --config (`loopgate doctor`)",
        ignored.join(", ")
    )))
}

/// The configured state dir (repaired if an agent broke it, see [`Store::open_healing`]), or the private
/// per-user fallback (with a notice) when it cannot be used, or none: then the call is judged on
/// a fresh in-memory state and the person is told. Repairs are told once (they do not recur).
pub(super) fn open_store(cli: &Cli, notices: &mut Vec<String>) -> Option<Store> {
    let opened = state_dir(cli).and_then(|dir| Store::open_healing(&dir));
    let (mut store, e) = match opened {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(e)),
    };
    if let Some(e) = e {
        let configured = state_dir(cli).ok();
        match open_fallback(configured.as_deref()) {
            Ok(s) => {
                notices.push(format!(
                    "the state dir is unusable ({e:#}); using the private fallback {} until it \
                     is repaired",
                    s.dir().display()
                ));
                store = Some(s);
            }
            Err(f) => notices.push(format!(
                "the state dir is unusable ({e:#}) and so is every private fallback ({f:#}); \
                 this call was judged on a fresh in-memory state and not recorded"
            )),
        }
    }
    if let Some(s) = store.as_mut() {
        notices.extend(
            s.take_healed()
                .into_iter()
                .map(|h| format!("the state dir was repaired: {h}")),
        );
    }
    store
}

/// The private fallback, repaired like the state dir; when an agent (or another user) poisoned it
/// beyond repair, the next of a few fixed alternatives beside it, so the state still persists
/// from call to call.
fn open_fallback(configured: Option<&std::path::Path>) -> Result<Store> {
    let base = Store::fallback_dir().context("no private fallback dir on this system")?;
    let mut last = None;
    for n in 1..=FALLBACKS {
        let dir = match n {
            1 => base.clone(),
            n => {
                let mut name = base.file_name().unwrap_or_default().to_os_string();
                name.push(format!(".{n}"));
                base.with_file_name(name)
            }
        };
        if Some(dir.as_path()) == configured {
            continue;
        }
        match Store::open_fallback(&dir) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no fallback dir")))
}

/// How many private fallback dirs are tried (`loopgate-<uid>`, then `.2`, `.3`).
const FALLBACKS: usize = 3;

fn tell<'a>(
    tells: &mut Vec<Tell>,
    kind: &'static str,
    code: &'static str,
    texts: impl IntoIterator<Item = &'a String>,
) {
    tells.extend(texts.into_iter().map(|t| Tell {
        kind,
        code,
        text: t.clone(),
    }));
}
