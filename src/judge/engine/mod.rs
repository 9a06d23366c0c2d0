//! The decision pipeline for one hook call: fold what happened into the observation ledger and the
//! world state, run every registered detector on them, and return the verdicts. No I/O but reading
//! the files a call changed and the worktree check at Stop, so replay and tests drive it in-process.

mod batches;
mod calls;
mod changes;
mod policy;
mod stop_gate;
mod turns;
mod waiting;

use crate::config::{Config, Mode};
use crate::judge::ceiling;
use crate::judge::detectors::{breaker, guard};
use crate::judge::state::SessionState;
use crate::platform::git::Worktree;
pub use crate::protocol::dialect::Caps;
use crate::protocol::payload::{Event, Payload, MAIN_AGENT};
use crate::protocol::verdict::{strongest, Action, Verdict};
use crate::util::canon::Digest16;
use batches::post_tool_batch;
use calls::{close_silent_failure, post_tool_use, pre_tool_use};
use changes::content_digest;
pub use policy::LADDER;
use policy::{account, defiance, is_intervention, ladder};
use serde_json::Value;
use std::path::Path;
use stop_gate::stop;
use turns::{follow_model_turn, follow_turn, user_prompt};
pub use turns::{prompt_digest, turn_progress, turn_signature};

pub struct Ctx<'a> {
    pub config: &'a Config,
    pub now_ms: u64,
    /// `CLAUDE_PROJECT_DIR`: the model's `cd` moves `cwd`, never this.
    pub project_dir: Option<&'a Path>,
    /// `CLAUDE_CODE_SESSION_ATTENDED`, when Claude Code set it.
    pub attended: Option<bool>,
    pub worktree: &'a dyn Worktree,
    /// loopgate's own state directory, which the agent must not touch.
    pub state_dir: Option<&'a Path>,
    /// What the agent CLI can and cannot do (Claude Code's unless another CLI runs the hook).
    pub caps: Caps,
}

impl Ctx<'_> {
    pub fn enforced(&self) -> bool {
        self.config.mode == Mode::Enforce
    }

    /// The worktree's stamp (time, HEAD, index stat): cheap, no scan.
    fn stamp(&self) -> Option<String> {
        self.worktree.stamp(self.project_dir?)
    }

    /// Whether the worktree changed since `stamp` beyond what the turn's tools left in the files
    /// loopgate follows (a bounded walk; `None`: cannot tell).
    fn changed_since(&self, stamp: &str, world: &crate::judge::ledger::World) -> Option<bool> {
        let dir = self.project_dir?;
        // A file holding what the tools left is judged by the state comparison; its content is
        // read only when its change stamp moved in the turn.
        let known: std::collections::HashMap<Digest16, Digest16> = world
            .files
            .iter()
            .map(|(path, f)| (*path, f.content))
            .collect();
        let accounted: crate::platform::git::Accounted = std::sync::Arc::new(move |path: &Path| {
            let key = Digest16::of(path.as_os_str().as_encoded_bytes());
            known.get(&key).is_some_and(|c| content_digest(path) == *c)
        });
        self.worktree.changed_beyond(dir, stamp, accounted)
    }
}

/// Updates `state` for this hook call and returns every verdict; [`strongest`] picks the answer.
pub fn handle(state: &mut SessionState, p: &Payload, event: Event, ctx: &Ctx) -> Vec<Verdict> {
    state.updated_ms = state.updated_ms.max(ctx.now_ms);
    let (mut verdicts, subject) = judge_event(state, p, event, ctx);
    // The person's exemption: the loop rules never judge this call (the guard and a paused
    // session still do).
    if matches!(
        event,
        Event::PreToolUse | Event::PostToolUse | Event::PostToolUseFailure
    ) {
        let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
        if ctx.config.exempt.covers(p.tool(), input) {
            verdicts.retain(|v| v.detector == guard::NAME || v.detector == breaker::NAME);
        }
    }
    let mut defied = 0;
    if matches!(
        event,
        Event::PreToolUse | Event::PostToolUse | Event::PostToolUseFailure | Event::PostToolBatch
    ) {
        defied = weigh(state, p, event, &mut verdicts, subject, ctx);
    }
    if let Some(v) = strongest(&verdicts) {
        account(state, p, event, v, subject, defied > 0, ctx);
    }
    if event == Event::PostToolBatch && p.agent() == MAIN_AGENT {
        state.turn.batches += 1;
    }
    verdicts
}

/// The event's own judging: every verdict of its moment, and the call it was about (its key).
fn judge_event(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    ctx: &Ctx,
) -> (Vec<Verdict>, Option<Digest16>) {
    match event {
        // Handled before the engine (`hook::settings`).
        Event::SessionStart
        | Event::ConfigChange
        | Event::FileChanged
        | Event::UserPromptExpansion => (Vec::new(), None),
        Event::UserPromptSubmit => (user_prompt(state, p, ctx), None),
        Event::PreToolUse => {
            follow_turn(state, p, ctx, true);
            if !ctx.caps.batch_event {
                follow_model_turn(state, p);
            }
            if ctx.caps.silent_failures {
                close_silent_failure(state, p, ctx);
            }
            let (key, v) = pre_tool_use(state, p, ctx);
            (v, Some(key))
        }
        Event::PostToolUse | Event::PostToolUseFailure if answered_already(state, p) => {
            // Claude Code sends managed settings' hooks a PostToolUse (`tool_response`
            // "Error: …") after the PostToolUseFailure of the same failed call
            // (docs/managed-observed.md): counted as a success, it cleared every failure count.
            (Vec::new(), None)
        }
        Event::PostToolUse | Event::PostToolUseFailure => {
            follow_turn(state, p, ctx, false);
            let (key, v) = post_tool_use(state, p, event == Event::PostToolUse, ctx);
            (v, Some(key))
        }
        Event::PostToolBatch => {
            follow_turn(state, p, ctx, false);
            (post_tool_batch(state, p, ctx), None)
        }
        Event::Stop => {
            follow_turn(state, p, ctx, false);
            (stop(state, p, ctx), None)
        }
        Event::PermissionRequest => {
            let turn = state.turn.number;
            let v = ceiling::on_permission(&mut state.ceiling, turn, &state.session);
            (v.into_iter().collect(), None)
        }
        Event::SubagentStop => {
            // The subagent is done: its loop state has nothing left to protect. Without an id
            // it names no subagent, and the main agent is never the one that stopped.
            if p.agent_id.as_deref().is_some_and(|id| !id.is_empty()) {
                state.agents.remove(&p.agent_key());
            }
            (Vec::new(), None)
        }
    }
}

/// The policy over a tool event's verdicts: a refusal walked into, the ladder's stage 3, and the
/// ceiling. Returns how many refusals the agent walked into with this call.
fn weigh(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    verdicts: &mut Vec<Verdict>,
    subject: Option<Digest16>,
    ctx: &Ctx,
) -> u32 {
    let defied = defiance(state, p, event, verdicts, subject, ctx);
    ladder(state, p, event, verdicts, defied > 0, ctx);
    let refused = strongest(verdicts)
        .filter(|v| is_intervention(event, v))
        .cloned();
    let guarded = verdicts
        .iter()
        .any(|v| v.detector == guard::NAME && v.action >= Action::Deny);
    let at = ceiling::At {
        turn: state.turn.number,
        event,
        main: p.agent() == MAIN_AGENT,
        caps: ctx.caps,
        now_ms: ctx.now_ms,
        session: &state.session,
        tool: p.tool(),
        call: subject,
        guarded,
    };
    verdicts.extend(ceiling::on_tool_event(
        &mut state.ceiling,
        &at,
        refused.as_ref(),
        defied,
        &state.heed,
    ));
    if defied > 0 {
        if let Some(v) = crate::protocol::verdict::strongest_mut(verdicts) {
            v.evidence
                .insert("defied_in_turn".into(), state.ceiling.refusals.into());
        }
    }
    defied
}

/// The name of a decision as the event log and `status` show it.
pub fn decision_name(event: Event, action: Action) -> &'static str {
    match (event, action) {
        (
            Event::Stop | Event::SubagentStop | Event::PostToolBatch | Event::UserPromptSubmit,
            Action::Deny | Action::Halt,
        ) => "block",
        (_, a) => a.name(),
    }
}

/// Whether this Post event reports on a call whose answer is already in its agent's ledger, and
/// not in flight again under the same id. The ordinary Post event finds its call pending and
/// stops there, before the ledger is searched.
fn answered_already(state: &SessionState, p: &Payload) -> bool {
    let id = p.tool_use_id.as_deref().unwrap_or("");
    state.agents.get(&p.agent_key()).is_some_and(|a| {
        a.ledger
            .pending_by_id(&crate::protocol::payload::stored_id(id))
            .is_none()
            && a.ledger.finished(id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(event: &str, extra: Value) -> Payload {
        let mut v = json!({"session_id": "s", "hook_event_name": event, "prompt_id": "p"});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Payload::parse(v.to_string().as_bytes()).unwrap().0
    }

    /// However long a session of ordinary work runs, with every subagent slot in use and the
    /// longest targets, the state stays bounded.
    #[test]
    fn state_stays_bounded_however_long_the_session() {
        let config = Config::default();
        let ctx = Ctx {
            config: &config,
            now_ms: 0,
            project_dir: None,
            attended: None,
            worktree: &crate::platform::git::NoGit,
            state_dir: None,
            caps: crate::protocol::dialect::Agent::Claude.caps(),
        };
        let mut state = SessionState::new("s", 0);
        let long = "x".repeat(4000);
        // Past every cap (96 entries for each of 21 agents, 48 pending calls each, 256 files),
        // with ids and targets of thousands of characters: 28 subagents take turns, more than
        // Claude Code's 20 at once.
        for i in 0..2_500u64 {
            let ctx = Ctx {
                now_ms: i * 1000,
                ..ctx
            };
            let agent = if i % 3 == 0 {
                "main".to_string()
            } else {
                format!("sub-{}-{}", "y".repeat(200), i % 29)
            };
            let (tool, input) = match i % 4 {
                0 => (
                    "Write",
                    json!({"file_path": format!("/p/f{i}.txt"), "content": format!("v{i}")}),
                ),
                1 => ("Read", json!({"file_path": format!("/p/{long}{i}")})),
                2 => ("Grep", json!({"pattern": format!("{long}{i}")})),
                _ => ("Bash", json!({"command": format!("{long} {i}")})),
            };
            // Every fifth call made by a Code Mode script: the proxy level's window stays bounded.
            let id = if i % 5 == 0 {
                format!("toolu_cc_{long}{i:020}")
            } else {
                format!("toolu_{long}{i:020}")
            };
            let mut extra = json!({"tool_name": tool, "tool_input": input, "tool_use_id": id});
            if agent != "main" {
                extra["agent_id"] = json!(agent);
            }
            handle(
                &mut state,
                &payload("PreToolUse", extra.clone()),
                Event::PreToolUse,
                &ctx,
            );
            // One call in five never gets its PostToolUse (denied, interrupted): it stays pending.
            if i % 5 != 4 {
                extra["tool_response"] =
                    json!({"stdout": format!("answer {i} {long}"), "stderr": ""});
                handle(
                    &mut state,
                    &payload("PostToolUse", extra),
                    Event::PostToolUse,
                    &ctx,
                );
            }
        }
        let encoded = crate::store::codec::encode(&state, 1).unwrap().len();
        eprintln!("state after 2,500 calls: {} KiB encoded", encoded >> 10);
        assert_eq!(state.agents.len(), crate::judge::state::MAX_AGENTS);
        assert!(state.ceiling.script_calls.len() <= 256);
        // The store's slot, with room to spare for what a later version adds.
        assert!(
            encoded as u64 <= crate::store::SLOT / 2,
            "state is {} KiB encoded",
            encoded >> 10
        );
    }
}
