//! The events about the CLI's own settings and files, answered apart from the judged calls:
//! SessionStart (the session's files made early, the paths to watch answered), ConfigChange
//! (loopgate's wiring undone is put right, and kept for the person to allow), FileChanged (a
//! watched file changed) and UserPromptExpansion (the person's `/loopgate allow <id>`).

use super::session::open_store;
use super::{lock_wait, Done};
use crate::cli::Cli;
use crate::config::{self, Mode};
use crate::judge::state::SessionState;
use crate::protocol::dialect::Agent;
use crate::protocol::exit::Exit;
use crate::protocol::payload::{clip, Event, Payload};
use crate::store::{events, Store};
use anyhow::{Context, Result};

/// The answer to a settings event, or `None` for an event that is judged.
pub(super) fn answer(
    cli: &Cli,
    agent: Agent,
    payload: &Payload,
    event: Event,
    project_dir: Option<&std::path::Path>,
    cfg: &config::Config,
) -> Option<Result<Done>> {
    match event {
        // Setup wires no SessionStart for the other CLIs; one wired by hand leaves the session's
        // files to its first judged call, which then checks the wiring.
        Event::SessionStart if agent != Agent::Claude => Some(Ok(Done::silent())),
        Event::SessionStart => Some(session_start(cli, payload, cfg).map(|(mut d, told)| {
            d.stdout = start_answer(&watched(cli, project_dir), &told);
            d
        })),
        Event::ConfigChange => Some(config_change(cli, payload, project_dir, cfg)),
        Event::FileChanged => Some(file_changed(cli, payload, project_dir, cfg)),
        Event::UserPromptExpansion => Some(Ok(super::expansion::answer(cli, payload, cfg))),
        _ => None,
    }
}

/// SessionStart makes a new session's lock and state files, so that its first prompt creates none:
/// a file creation costs milliseconds on some filesystems (NFS, a journal-less ext4 after
/// deletions), while a session's start is not waited on. Anything else (a resumed session, a state
/// to move aside, a busy lock, a config problem) is left to the session's next event, which judges
/// and reports it. It answers nothing of its own, since plain stdout would reach the model
/// (observed); for Claude Code the caller answers the paths to watch, which does not.
fn session_start(
    cli: &Cli,
    payload: &Payload,
    cfg: &config::Config,
) -> Result<(Done, Vec<String>)> {
    let session_id = &payload.session_id;
    // The plugin's own files, compared with what this version ships (told at launch).
    let mut told: Vec<String> = crate::defence::plugin_files::session_notice(cli.plugin.as_deref())
        .into_iter()
        .collect();
    // Anything else amiss is left to the session's next event, which judges and tells.
    let Some(store) = open_store(cli, &mut Vec::new()) else {
        return Ok((Done::silent(), told));
    };
    let Ok(lock) = store.lock(session_id, lock_wait(cfg)) else {
        return Ok((Done::silent(), told));
    };
    if lock.session_is_new() && lock.healed.is_none() {
        // A session seen before whose state and lock are gone (a resume after a deletion).
        told.extend(super::forgotten::told_at_start(
            store.dir(),
            &Store::stem(session_id),
            crate::platform::clock::now_ms(),
        ));
        if store
            .save(
                &lock,
                &mut SessionState::new(session_id, crate::platform::clock::now_ms()),
            )
            .is_err()
        {
            return Ok((Done::silent(), told));
        }
        drop(lock);
        crate::store::gc::maybe_sweep(store.dir(), &cfg.housekeeping);
    }
    if !told.is_empty() {
        let lines: Vec<_> = told
            .iter()
            .map(|t| {
                settings_event_line(
                    payload,
                    ("SessionStart", "notice", true),
                    t,
                    serde_json::json!({}),
                )
            })
            .collect();
        let _ = events::append(store.dir(), &lines, &cfg.log, lock_wait(cfg));
    }
    Ok((Done::silent(), told))
}

/// SessionStart's answer: the paths to watch, and what the person must hear at launch (a
/// `systemMessage` is shown then and never sent to the model, observed).
fn start_answer(watch: &[std::path::PathBuf], told: &[String]) -> Option<String> {
    let mut answer = crate::defence::wiring::watch_answer(watch);
    if !told.is_empty() {
        let message = crate::judge::redact::mask(&format!("loopgate: {}", told.join("; ")));
        answer["systemMessage"] = message.into();
    }
    (answer != serde_json::json!({})).then(|| answer.to_string())
}

/// The files a Claude Code session watches for FileChanged: the hooks' binary and loopgate's
/// config files (see [`crate::defence::wiring::watch_paths`]).
fn watched(cli: &Cli, project: Option<&std::path::Path>) -> Vec<std::path::PathBuf> {
    crate::defence::wiring::watch_paths(
        std::env::current_exe().ok().as_deref(),
        &config_files(cli, project),
    )
}

fn config_files(cli: &Cli, project: Option<&std::path::Path>) -> Vec<std::path::PathBuf> {
    cli.config
        .clone()
        .into_iter()
        .chain(config::user_config_file())
        .chain(project.map(config::project_config_file))
        .collect()
}

/// FileChanged: a watched file changed. It cannot block and its answer is shown nowhere
/// (observed), so what the person must hear is logged, said on stderr, and kept for the
/// session's next hook call to show.
fn file_changed(
    cli: &Cli,
    payload: &Payload,
    project_dir: Option<&std::path::Path>,
    cfg: &config::Config,
) -> Result<Done> {
    let (Some(changed), Some(exe)) = (
        payload.file_path.as_deref().filter(|f| !f.is_empty()),
        std::env::current_exe().ok(),
    ) else {
        return Ok(Done::silent());
    };
    let project = project_dir
        .map(std::path::Path::to_path_buf)
        .or_else(|| payload.cwd.as_deref().map(std::path::PathBuf::from));
    let mode_now = || {
        let mut off = Vec::new();
        if cfg.mode == Mode::Observe {
            off.push("puts loopgate in observe mode (it denies nothing)");
        }
        if !cfg.guard.enabled {
            off.push("switches the tamper guard off");
        }
        (!off.is_empty()).then(|| off.join(" and "))
    };
    let Some(message) = crate::defence::wiring::file_changed(
        std::path::Path::new(changed),
        payload.file_event.as_deref().unwrap_or("change"),
        Some(&exe),
        &config_files(cli, project.as_deref()),
        mode_now,
    ) else {
        return Ok(Done::silent());
    };
    let message = crate::judge::redact::mask(&message);
    let mut notices = Vec::new();
    if let Some(store) = open_store(cli, &mut notices) {
        let _ =
            crate::defence::wiring::keep_pending(&store.state_path(&payload.session_id), &message);
        let line = settings_event_line(
            payload,
            ("FileChanged", "notice", cfg.mode == Mode::Enforce),
            &format!("loopgate: {message}"),
            serde_json::json!({"file_path": clip(changed, 256), "change": payload.file_event.as_deref().map(|e| clip(e, 16))}),
        );
        let _ = events::append(store.dir(), &[line], &cfg.log, lock_wait(cfg));
    }
    let mut problems = vec![message.clone()];
    let dir = cfg
        .notify
        .wanted()
        .then(|| open_store(cli, &mut Vec::new()))
        .flatten();
    problems.extend(super::notify::tell(
        cfg,
        dir.as_ref().map(Store::dir),
        payload,
        ("FileChanged", "weakened", "file_changed"),
        &message,
    ));
    Ok(Done {
        stdout: None,
        problems,
        exit: Exit::Ok,
    })
}

/// ConfigChange: a settings file changed on disk. When the settings now switch loopgate off
/// (hooks unwired, all hooks disabled, loopgate's environment overridden), the files are put
/// right and the change is blocked, so the hooks Claude Code has loaded keep running and the next
/// reload finds loopgate wired again; the person is told, on screen and in the log. See
/// [`crate::defence::wiring`].
fn config_change(
    cli: &Cli,
    payload: &Payload,
    project_dir: Option<&std::path::Path>,
    cfg: &config::Config,
) -> Result<Done> {
    let Some(changed) = payload.file_path.as_deref().filter(|f| !f.is_empty()) else {
        return Ok(Done::silent());
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from);
    let project = project_dir
        .map(std::path::Path::to_path_buf)
        .or_else(|| payload.cwd.as_deref().map(std::path::PathBuf::from));
    let files = crate::defence::wiring::settings_files(home.as_deref(), project.as_deref());
    let prefix = wiring_prefix(cli)?;
    let mut notices = Vec::new();
    let store = open_store(cli, &mut notices);
    let changed = std::path::Path::new(changed);
    let user_settings = files.first().cloned();
    if changed
        .file_name()
        .is_some_and(|n| n == crate::setup::SLASH_COMMAND_FILE)
    {
        // `/loopgate` deleted or edited: put back while loopgate is wired (a command made
        // mid-session can be typed at once, observed), so the person can still allow.
        if prefix.is_some() {
            if let Some(user) = &user_settings {
                if crate::setup::read_json(user).is_ok_and(|v| crate::setup::has_loopgate_hooks(&v))
                {
                    let _ = crate::setup::write_slash_command(user);
                }
            }
        }
        return Ok(Done::silent());
    }
    let checked = crate::defence::wiring::check_change(
        changed,
        &files,
        prefix.as_deref(),
        store.as_ref().map(Store::dir),
    );
    let state_file = store.as_ref().map(|s| s.state_path(&payload.session_id));
    // Told and sent at once, never undone: a stale digest after an upgrade is the person's.
    let pin = prefix
        .as_ref()
        .and_then(|_| std::env::current_exe().ok())
        .and_then(|exe| crate::defence::wiring::pin_rewritten(changed, &exe))
        .filter(|text| {
            store.as_ref().is_none_or(|s| {
                let key = format!("{}\0pin", payload.session_id);
                crate::store::notice::first_time(s.dir(), &key, text)
            })
        });
    let mut pin_problems = Vec::new();
    if let Some(text) = &pin {
        if let (Some(store), Some(state_file)) = (&store, &state_file) {
            let _ = crate::defence::wiring::keep_pending(state_file, text);
            let line = settings_event_line(
                payload,
                ("ConfigChange", "notice", true),
                &format!("loopgate: {text}"),
                serde_json::json!({"file_path": clip(&changed.display().to_string(), 256)}),
            );
            let _ = events::append(store.dir(), &[line], &cfg.log, lock_wait(cfg));
        }
        pin_problems.push(text.clone());
        pin_problems.extend(super::notify::tell(
            cfg,
            store.as_ref().map(Store::dir),
            payload,
            ("ConfigChange", "weakened", "pin_rewritten"),
            text,
        ));
    }
    let Some(mut undone) = checked.undone else {
        if pin.is_some() {
            return Ok(Done {
                stdout: pin.as_ref().map(|t| {
                    serde_json::json!({"systemMessage": format!("loopgate: {t}")}).to_string()
                }),
                problems: pin_problems,
                exit: Exit::Ok,
            });
        }
        // A change the person allowed is told again each time it is loaded: the record of it is
        // a file the agent could have forged.
        if let Some(message) = crate::defence::wiring::allowed_message(&checked.allowed) {
            let message = crate::judge::redact::mask(&message);
            if let (Some(store), Some(state_file)) = (&store, &state_file) {
                let _ = crate::defence::wiring::keep_pending(state_file, unprefixed(&message));
                let line = settings_event_line(
                    payload,
                    ("ConfigChange", "allow", true),
                    &message,
                    serde_json::json!({"file_path": clip(&changed.display().to_string(), 256)}),
                );
                let _ = events::append(store.dir(), &[line], &cfg.log, lock_wait(cfg));
            }
        }
        return Ok(Done::silent());
    };
    if let (Some(store), false) = (&store, undone.kept.is_empty()) {
        undone.id = crate::defence::sanction::keep(
            store.dir(),
            &payload.session_id,
            &undone.problems,
            undone.kept.clone(),
            crate::platform::clock::now_ms(),
        )
        .ok();
    }
    if prefix.is_some() && !undone.repaired.is_empty() {
        if let Some(user) = &user_settings {
            let _ = crate::setup::write_slash_command(user);
        }
    }
    let message = crate::judge::redact::mask(&undone.message());
    if let Some(store) = &store {
        // ConfigChange's own answer is shown nowhere (observed): the session's next hook call
        // tells the person, with the id to allow.
        if let Some(state_file) = &state_file {
            let _ = crate::defence::wiring::keep_pending(state_file, unprefixed(&message));
        }
        let line = settings_event_line(
            payload,
            ("ConfigChange", "deny", true),
            &message,
            serde_json::json!({"file_path": clip(&changed.display().to_string(), 256), "id": undone.id}),
        );
        let _ = events::append(store.dir(), &[line], &cfg.log, lock_wait(cfg));
    }
    let mut problems = pin_problems;
    problems.extend(super::notify::tell(
        cfg,
        store.as_ref().map(Store::dir),
        payload,
        ("ConfigChange", "switched_off", "config_change"),
        &message,
    ));
    Ok(Done {
        stdout: Some(
            serde_json::json!({
                "decision": "block",
                "reason": message,
                "systemMessage": message,
            })
            .to_string(),
        ),
        problems,
        exit: Exit::Ok,
    })
}

/// The command prefix of the hooks this binary runs from the settings, `None` when it runs as
/// Claude Code's plugin: a plugin's hooks live in the plugin, there is no wiring to restore.
pub(super) fn wiring_prefix(cli: &Cli) -> Result<Option<String>> {
    if runs_as_plugin(cli) {
        return Ok(None);
    }
    let exe = std::env::current_exe().context("cannot find loopgate's own binary")?;
    Ok(Some(crate::setup::command_prefix(&exe, cli.observe)?))
}

/// Whether Claude Code runs this binary from loopgate's plugin: its wrapper says so on the
/// command line (`--plugin ROOT`).
pub(super) fn runs_as_plugin(cli: &Cli) -> bool {
    cli.plugin.is_some()
}

/// A kept notice is shown after loopgate's own prefix.
fn unprefixed(message: &str) -> &str {
    message.strip_prefix("loopgate: ").unwrap_or(message)
}

/// The event-log line of a guard decision on a settings or watched file (ConfigChange,
/// FileChanged): `(event, decision, enforced)`, the reason shown, and what changed.
fn settings_event_line(
    payload: &Payload,
    (event, decision, enforced): (&str, &str, bool),
    reason: &str,
    evidence: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "ts": crate::platform::clock::rfc3339(crate::platform::clock::now_ms()),
        "session": clip(&payload.session_id, 128),
        "event": event,
        "detector": "guard",
        "decision": decision,
        "enforced": enforced,
        "severity": "high",
        "reason": reason,
        "evidence": evidence,
    })
}
