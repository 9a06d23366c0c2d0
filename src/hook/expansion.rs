//! UserPromptExpansion: the person typed `/loopgate …` at the prompt. `/loopgate allow <id>` keeps a
//! settings change ConfigChange undid; nothing of `/loopgate` ever reaches the model. Why only
//! the person can cause this event: [`crate::defence::sanction`].

use super::session::open_store;
use super::{lock_wait, Done};
use crate::cli::Cli;
use crate::config;
use crate::defence::sanction;
use crate::protocol::exit::Exit;
use crate::protocol::payload::{clip, Payload};
use crate::store::events;
use crate::store::resume::Continued;

/// The answer to the person's `/loopgate …`; silent for any other command.
pub(super) fn answer(cli: &Cli, payload: &Payload, cfg: &config::Config) -> Done {
    if payload.expansion_type.as_deref() != Some("slash_command") {
        return Done::silent();
    }
    // Which `/loopgate` is loopgate's own: setup's in `~/.claude/commands/` (source
    // `userSettings`), or the plugin's, known by its namespaced name (source `plugin`); both
    // observed. A project's `.claude/commands/` is the agent's to write: a `/loopgate` from there
    // keeps nothing, and the person is told why.
    let (ours, source) = match super::settings::runs_as_plugin(cli) {
        true => ("loopgate:loopgate", "plugin"),
        false => ("loopgate", "userSettings"),
    };
    if payload.command_name.as_deref() != Some(ours) {
        return Done::silent();
    }
    if let Some(from) = payload.command_source.as_deref().filter(|s| *s != source) {
        return block(format!(
            "loopgate: this /{ours} is not loopgate's own command (it comes from {}, not \
             {source}): nothing was kept. If a project defines /{ours}, remove that file",
            clip(from, 64)
        ));
    }
    let args = payload.command_args.as_deref().unwrap_or("");
    if args.trim() == "continue" {
        return continue_here(cli, payload, None);
    }
    if let Some(n) = budget_raise(args) {
        return continue_here(cli, payload, Some(n));
    }
    let Some(id) = sanction::allow_id(args) else {
        return block(
            "loopgate: `/loopgate continue` continues this session after loopgate halted it; \
             `/loopgate budget +5` raises its loop budget by $5; `/loopgate allow <id>` keeps a settings change loopgate undid (the id is in \
             loopgate's message about it)"
                .into(),
        );
    };
    let mut notices = Vec::new();
    let Some(store) = open_store(cli, &mut notices) else {
        return block(format!(
            "loopgate: cannot open its state dir ({}); nothing was kept",
            notices.join("; ")
        ));
    };
    let now = crate::platform::clock::now_ms();
    let (decision, message) = match sanction::allow(store.dir(), id, &payload.session_id, now) {
        Err(refused) => ("deny", format!("loopgate: {}", refused.message(id))),
        Ok(p) => match sanction::apply(store.dir(), &p, now) {
            Ok(()) => ("allow", kept_message(cli, &p)),
            Err(e) => (
                "deny",
                format!("loopgate: could not keep change {id}: {e:#}"),
            ),
        },
    };
    let message = crate::judge::redact::mask(&message);
    let line = serde_json::json!({
        "ts": crate::platform::clock::rfc3339(now),
        "session": clip(&payload.session_id, 128),
        "event": "UserPromptExpansion",
        "detector": "guard",
        "decision": decision,
        "enforced": true,
        "severity": "high",
        "reason": message,
        "evidence": {"command": clip(args, 64), "command_name": payload.command_name.as_deref().map(|n| clip(n, 64)), "command_source": payload.command_source.as_deref().map(|n| clip(n, 64))},
    });
    let _ = events::append(store.dir(), &[line], &cfg.log, lock_wait(cfg));
    // A change kept switches loopgate off from now on: the person's receiver hears it at once,
    // whoever typed the command (the receiver cannot tell).
    if decision == "allow" {
        if let Some(failed) = super::notify::tell(
            cfg,
            Some(store.dir()),
            payload,
            ("UserPromptExpansion", "switched_off", "allowed"),
            &message,
        ) {
            super::say(&failed);
        }
    }
    block(message)
}

/// What was kept, judged from the files as written now: the pending record's own words could
/// be anyone's.
fn kept_message(cli: &Cli, p: &sanction::Pending) -> String {
    let prefix = super::settings::wiring_prefix(cli).ok().flatten();
    let files: Vec<String> = p
        .files
        .iter()
        .map(|k| {
            let v = match crate::defence::settings_file::read(&k.file) {
                crate::defence::settings_file::Settings::Json(_, v) => v,
                _ => serde_json::Value::Object(serde_json::Map::new()),
            };
            let does = crate::defence::wiring::effects(&v, prefix.as_deref());
            if does.is_empty() {
                k.file.display().to_string()
            } else {
                format!("{} ({})", k.file.display(), does.join("; "))
            }
        })
        .collect();
    format!(
        "loopgate: kept your change {}: {}. Claude Code loads it now; `loopgate setup` wires \
         loopgate again",
        p.id,
        files.join(", ")
    )
}

/// Blocking keeps the command from the model; the reason is shown to the person on screen
/// (observed: a blocked expansion's `systemMessage` is not).
fn block(reason: String) -> Done {
    Done {
        stdout: Some(serde_json::json!({"decision": "block", "reason": reason}).to_string()),
        problems: Vec::new(),
        exit: Exit::Ok,
    }
}

/// `/loopgate budget +N` (or `budget N`): the dollars to add to this session's loop budget.
fn budget_raise(args: &str) -> Option<f64> {
    let rest = args.trim().strip_prefix("budget")?.trim();
    rest.trim_start_matches('+')
        .trim_start_matches('$')
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n > 0.0)
}

/// `/loopgate continue`: the person continues this session after a halt, keeping what loopgate
/// knows of it. Only the person can type it (see [`crate::defence::sanction`]); the agent's
/// `loopgate continue` is refused by the guard.
fn continue_here(cli: &Cli, payload: &Payload, raise: Option<f64>) -> Done {
    let mut notices = Vec::new();
    let Some(store) = open_store(cli, &mut notices) else {
        return block(format!(
            "loopgate: cannot open its state dir ({}); nothing was continued",
            notices.join("; ")
        ));
    };
    let stem = crate::store::Store::stem(&payload.session_id);
    let now = crate::platform::clock::now_ms();
    let wait = std::time::Duration::from_millis(crate::config::MAX_LOCK_WAIT_MS);
    let raised = raise
        .map(|n| format!("loopgate: this session's loop budget is ${n:.2} higher. "))
        .unwrap_or_default();
    let message =
        match crate::store::resume::continue_stem(&store, &stem, now, wait, raise) {
            Ok((Continued::Halt(h), _)) => format!(
            "{}this session continues after its halt ({}): the loop counts that stopped it are \
             lifted, what loopgate knows of the session is kept. Send your next prompt.",
            if raised.is_empty() { "loopgate: " } else { &raised },
            h.code
        ),
            Ok((Continued::Nothing, _)) if raise.is_some() => raised.trim_end().to_string(),
            Ok((Continued::Nothing, _)) => {
                "loopgate: this session is not halted: nothing to continue".into()
            }
            Err(e) => format!("loopgate: could not continue this session: {e:#}"),
        };
    block(message)
}
