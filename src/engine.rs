//! The decision pipeline for one hook call: update the session state with what happened, ask the
//! detectors, and return their verdicts. No I/O but the worktree fingerprint, so replay and tests
//! drive it in-process.

use crate::canon::call_key;
use crate::config::{Config, Mode};
use crate::detectors::{
    breaker, changed_files, circular, dedup, describe, failures, gate, guard, identical_failure,
    is_edit_tool, matrix, modification, paralysis, patterns, poll, progress, rate,
};
use crate::git::{Stamp, Worktree};
use crate::outcome;
use crate::payload::{BatchCall, Event, Payload};
use crate::redact;
use crate::state::{Call, CallStatus, DecisionNote, SessionState, Turn, MAIN_AGENT};
use crate::verdict::{strongest, Action, Severity, Verdict};
use serde_json::Value;
use std::path::Path;

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
}

impl Ctx<'_> {
    pub fn enforced(&self) -> bool {
        self.config.mode == Mode::Enforce
    }

    /// The worktree's stamp (time, HEAD, index stat): cheap, no scan.
    fn stamp(&self) -> Option<String> {
        self.worktree.stamp(self.project_dir?)
    }

    /// Whether the worktree changed since `stamp` (a bounded walk; `None`: cannot tell).
    fn changed_since(&self, stamp: &str) -> Option<bool> {
        self.worktree.changed_since(self.project_dir?, stamp)
    }
}

/// Updates `state` for this hook call and returns every verdict, strongest last-decided by
/// [`strongest`].
pub fn handle(state: &mut SessionState, p: &Payload, event: Event, ctx: &Ctx) -> Vec<Verdict> {
    state.updated_ms = state.updated_ms.max(ctx.now_ms);
    let mut verdicts = match event {
        Event::UserPromptSubmit => {
            start_turn(state, p.prompt_id.clone(), ctx, true);
            Vec::new()
        }
        Event::PreToolUse => {
            follow_turn(state, p, ctx, true);
            pre_tool_use(state, p, ctx)
        }
        Event::PostToolUse | Event::PostToolUseFailure => {
            follow_turn(state, p, ctx, false);
            post_tool_use(state, p, event == Event::PostToolUse, ctx)
        }
        Event::PostToolBatch => {
            follow_turn(state, p, ctx, false);
            post_tool_batch(state, p, ctx)
        }
        Event::Stop => {
            follow_turn(state, p, ctx, false);
            stop(state, p, ctx)
        }
        Event::SubagentStop => {
            // The subagent is done: its loop state has nothing left to protect.
            state.agents.remove(p.agent());
            Vec::new()
        }
    };
    if matches!(
        event,
        Event::PreToolUse | Event::PostToolUse | Event::PostToolUseFailure | Event::PostToolBatch
    ) {
        ladder(state, p, event, &mut verdicts, ctx);
    }
    if let Some(v) = strongest(&verdicts) {
        account(state, p, event, v, ctx);
    }
    if event == Event::PostToolBatch && p.agent() == MAIN_AGENT {
        state.turn.batches += 1;
    }
    verdicts
}

/// Stage 3 of the ladder: when a turn's interventions have not broken the loop, the next one goes
/// to the human. Attended, a PreToolUse `ask` puts it in front of them; unattended, the looping
/// call is denied and the turn's PostToolBatch ends the run (`decision: block` stops it at once,
/// where `continue: false` would still let the tool run).
fn ladder(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    verdicts: &mut Vec<Verdict>,
    ctx: &Ctx,
) {
    let cfg = &ctx.config.ladder;
    if !cfg.enabled || p.agent() != MAIN_AGENT {
        return;
    }
    let unattended = ctx.attended == Some(false);
    if let Some(reason) = state.turn.escalation.clone() {
        let delivered = match (event, unattended) {
            (Event::PreToolUse, false) => Some(Action::Ask),
            (Event::PostToolBatch, true) => Some(Action::Halt),
            _ => None,
        };
        if let Some(action) = delivered {
            state.turn.escalation = None;
            verdicts
                .push(Verdict::new(ESCALATION, action, Severity::Critical, reason).loop_warning());
            return;
        }
    }
    let Some(v) = strongest(verdicts) else {
        return;
    };
    if !is_intervention(event, v) || state.turn.interventions < cfg.escalate_after.max(1) {
        return;
    }
    let reason = format!(
        "loopgate: {} interventions in this turn have not broken the loop, so it goes to the user now. Latest: {}",
        state.turn.interventions,
        v.reason
            .trim_start_matches("LOOP_DETECTED (loopgate): ")
            .trim_start_matches("loopgate: ")
    );
    // Re-arm: the next escalation needs as many failed interventions again.
    state.turn.interventions = 0;
    state.turn.escalations += 1;
    state.totals.escalations += 1;
    let action = match (event, unattended) {
        (Event::PreToolUse, false) => Action::Ask,
        (Event::PostToolBatch, true) => Action::Halt,
        (Event::PreToolUse, true) => {
            state.turn.escalation = Some(reason.clone());
            Action::Deny
        }
        _ => {
            state.turn.escalation = Some(reason.clone());
            Action::Warn
        }
    };
    verdicts.push(
        Verdict::new(ESCALATION, action, Severity::Critical, reason)
            .loop_warning()
            .with("stage", 3)
            .with("attended", !unattended)
            .with("escalated_from", v.detector),
    );
}

pub const ESCALATION: &str = "escalation";

/// Starts a new turn when the main agent's prompt changes (UserPromptSubmit, or a new `prompt_id`
/// when that hook was not installed). Subagents share the prompt and never start turns.
fn follow_turn(state: &mut SessionState, p: &Payload, ctx: &Ctx, may_take_baseline: bool) {
    if p.agent() != MAIN_AGENT {
        return;
    }
    if p.prompt_id.is_some() && p.prompt_id != state.turn.prompt_id {
        start_turn(state, p.prompt_id.clone(), ctx, may_take_baseline);
    }
}

fn start_turn(state: &mut SessionState, prompt_id: Option<String>, ctx: &Ctx, take_baseline: bool) {
    // Only a stamp (time, HEAD, index stat), never a scan; and only where the Stop gate can act.
    let baseline = if take_baseline && progress::may_act(ctx.attended, &ctx.config.progress) {
        ctx.stamp()
    } else {
        None
    };
    end_turn(state, baseline.as_deref(), ctx);
    state.turn = Turn {
        prompt_id,
        number: state.turn.number + 1,
        started_ms: ctx.now_ms,
        baseline,
        ..Turn::default()
    };
    // The user said something new: every earlier streak ends here.
    for agent in state.agents.values_mut() {
        agent.epoch += 1;
        agent.blocked = None;
        agent.same_tool_run = 0;
        matrix::reset_streaks(agent);
        failures::on_success(agent);
    }
}

/// Judges the turn that just ended for the circuit breaker: progress when the Stop gate saw it or
/// the worktree moved since its baseline; no progress when the Stop gate said so, or when the turn
/// needed a denial or an escalation and nothing moved.
fn end_turn(state: &mut SessionState, now_fingerprint: Option<&str>, ctx: &Ctx) {
    let t = &state.turn;
    if t.number == 0 {
        return;
    }
    // HEAD or the index moved (a commit, `git add`); file changes the tools made count through
    // `changes`, and the Stop gate's own judgement through `progress`. No walk at the prompt.
    let moved = match (t.baseline.as_deref(), now_fingerprint) {
        (Some(a), Some(b)) => match (Stamp::decode(a), Stamp::decode(b)) {
            (Some(a), Some(b)) => a.git_moved(&b),
            _ => a != b,
        },
        _ => false,
    };
    let progress = t.progress == Some(true) || moved || t.changes > 0;
    let no_progress = !progress && (t.progress == Some(false) || t.hard_interventions > 0);
    if t.interventions + t.hard_interventions > 0 {
        state.totals.turns_with_interventions += 1;
        if progress {
            state.totals.intervened_turns_with_progress += 1;
        }
    }
    breaker::end_turn(
        &mut state.breaker,
        progress,
        no_progress,
        ctx.now_ms,
        &ctx.config.breaker,
    );
}

fn pre_tool_use(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    let cfg = ctx.config;
    let det = &cfg.detectors;
    let tool = p.tool();
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    let session = state.session.clone();
    let mut verdicts: Vec<Verdict> =
        breaker::check(&mut state.breaker, &session, ctx.now_ms, &cfg.breaker)
            .into_iter()
            .collect();
    verdicts.extend(guard::check(
        tool,
        input,
        ctx.state_dir.and_then(Path::to_str),
        &cfg.guard,
    ));
    let key = call_key(tool, input);
    let target = redact::target(tool, input);
    let poll = det.poll.enabled && poll::is_poll(tool, input);
    let turn = state.turn.number;
    let agent = state.agent_mut(p.agent(), ctx.now_ms);
    if agent.last_tool == tool {
        agent.same_tool_run += 1;
    } else {
        agent.last_tool = tool.to_string();
        agent.same_tool_run = 1;
    }
    let epoch = agent.epoch;
    if det.matrix.enabled {
        verdicts.extend(matrix::check_blocked(agent));
    }
    if !poll {
        verdicts.extend(identical_failure::check(
            agent,
            &key,
            ctx.now_ms,
            &det.identical_failure,
        ));
    }
    verdicts.extend(gate::consecutive(agent, tool, &det.gate));
    verdicts.extend(patterns::check(agent, &key));
    if matches!(tool, "Edit" | "MultiEdit") {
        let path = input.get("file_path").and_then(Value::as_str).unwrap_or("");
        verdicts.extend(modification::check(
            agent,
            path,
            input,
            ctx.now_ms,
            &det.modification,
        ));
    }
    let run = agent.run_mut(&key, tool, &target, ctx.now_ms);
    verdicts.extend(gate::blocked(run, epoch, turn, &det.gate));
    if poll {
        verdicts.extend(poll::check(run, ctx.now_ms, &det.poll));
    } else if !dedup::exempt(&cfg.dedup, tool) {
        verdicts.extend(dedup::check(run, epoch, &cfg.dedup));
    }
    verdicts.extend(rate::on_call(run, ctx.now_ms, &det.rate));
    verdicts.extend(gate::on_call(run, epoch, turn, poll, &det.gate));
    run.total += 1;
    let denied = ctx.enforced() && strongest(&verdicts).is_some_and(|v| v.action >= Action::Deny);
    agent.push_call(Call {
        id: p.tool_use_id.clone().unwrap_or_default(),
        tool: tool.to_string(),
        key,
        target,
        at_ms: ctx.now_ms,
        epoch,
        status: if denied {
            CallStatus::Denied
        } else {
            CallStatus::Pending
        },
        outcome: None,
    });
    state.totals.calls += 1;
    if p.agent() == MAIN_AGENT && is_edit_tool(tool) {
        state.turn.edit_attempts += 1;
    }
    verdicts
}

fn post_tool_use(state: &mut SessionState, p: &Payload, ok: bool, ctx: &Ctx) -> Vec<Verdict> {
    let done = Finished {
        agent: p.agent(),
        tool: p.tool(),
        input: p.tool_input.as_ref().unwrap_or(&Value::Null),
        id: p.tool_use_id.as_deref().unwrap_or(""),
        status: if ok {
            CallStatus::Ok
        } else {
            CallStatus::Failed
        },
        error: p.error.as_deref().unwrap_or(""),
        response: p.tool_response.as_ref(),
        interrupted: p.is_interrupt == Some(true),
    };
    finish(state, &done, ctx)
}

/// A call that finished: ran (ok or failed), or was rejected before it ran.
struct Finished<'a> {
    agent: &'a str,
    tool: &'a str,
    input: &'a Value,
    id: &'a str,
    status: CallStatus,
    error: &'a str,
    response: Option<&'a Value>,
    interrupted: bool,
}

/// Folds a finished call into every detector that judges outcomes.
fn finish(state: &mut SessionState, f: &Finished, ctx: &Ctx) -> Vec<Verdict> {
    let ok = f.status == CallStatus::Ok;
    let (tool, input, error, interrupted) = (f.tool, f.input, f.error, f.interrupted);
    let det = &ctx.config.detectors;
    let response = f.response;
    let result = if ok {
        outcome::of_success(tool, response)
    } else {
        outcome::of_failure(error)
    };
    let poll = det.poll.enabled && poll::is_poll(tool, input);
    let is_main = f.agent == MAIN_AGENT;
    let changed = ok && changed_files(tool, response);
    let turn = state.turn.number;
    let mut verdicts = Vec::new();
    let mut state_changes = false;
    {
        let (agent, key, epoch, target) = finish_call(state, f, &result, ctx);
        let read_only = det.gate.read_only_tools.iter().any(|t| t == tool);
        if let Some(run) = agent.runs.get_mut(&key) {
            verdicts.extend(gate::on_output(run, tool, turn, poll, &det.gate));
            verdicts.extend(paralysis::on_outcome(run, read_only, &det.paralysis));
        }
        if matches!(tool, "Edit" | "MultiEdit")
            && !interrupted
            && (ok || modification::is_miss(error))
        {
            let path = input.get("file_path").and_then(Value::as_str).unwrap_or("");
            verdicts.extend(modification::record(
                agent,
                path,
                input,
                ok,
                ctx.now_ms,
                &det.modification,
            ));
        }
        if !poll {
            verdicts.extend(patterns::on_outcome(agent, &det.patterns));
        }
        if ok && is_edit_tool(tool) {
            verdicts.extend(circular_import(agent, input, ctx));
        }
        if ok {
            failures::on_success(agent);
            identical_failure::on_success(agent, &key);
        } else if !interrupted {
            identical_failure::on_failure(
                agent,
                &key,
                tool,
                &target,
                &result,
                epoch,
                ctx.now_ms,
                &det.identical_failure,
            );
            let mut what = describe(tool, &target);
            if f.status == CallStatus::Rejected {
                what = format!("{what} (rejected: {})", first_line(error));
            }
            verdicts.extend(failures::on_failure(
                agent,
                what,
                ctx.now_ms,
                &ctx.config.failures,
            ));
        }
        // Consecutiveness counts calls that learned nothing: a new result is progress.
        if result
            .digest
            .as_ref()
            .is_some_and(|d| !agent.seen_outcomes.contains(d))
        {
            agent.same_tool_run = 0;
        }
        if !poll && !det.matrix.ignore_tools.iter().any(|t| t == tool) {
            verdicts.extend(matrix::on_outcome(
                agent,
                &key,
                result.digest.as_deref(),
                ctx.now_ms,
                &det.matrix,
            ));
        }
        if changed {
            // A file changed: the next identical call is a new experiment for every count.
            state_changes = true;
            agent.epoch += 1;
            matrix::reset_streaks(agent);
        }
    }
    if !ok {
        state.totals.failures += 1;
    }
    if state_changes {
        state.turn.changes += 1;
    }
    if is_main && is_edit_tool(tool) {
        if ok {
            state.turn.edits_ok += 1;
        } else {
            state.turn.edit_failures += 1;
        }
    }
    verdicts
}

/// After a source file changed: a new import cycle through it is named once.
fn circular_import(
    agent: &mut crate::state::AgentState,
    input: &Value,
    ctx: &Ctx,
) -> Option<Verdict> {
    let project = ctx.project_dir?;
    let file = input
        .get("file_path")
        .or_else(|| input.get("notebook_path"))
        .and_then(Value::as_str)?;
    let (named, verdict) =
        circular::check(project, Path::new(file), &ctx.config.detectors.circular)?;
    if agent.cycles_named.iter().any(|c| *c == named) {
        return None;
    }
    if agent.cycles_named.len() >= 16 {
        agent.cycles_named.pop_front();
    }
    agent.cycles_named.push_back(named);
    Some(verdict)
}

/// Marks the call finished and folds its outcome into its identity's streak. Returns the agent,
/// the call's identity, the epoch it started in, and its target.
fn finish_call<'s>(
    state: &'s mut SessionState,
    f: &Finished,
    result: &outcome::Outcome,
    ctx: &Ctx,
) -> (&'s mut crate::state::AgentState, String, u64, String) {
    let (tool, input, id, status) = (f.tool, f.input, f.id, f.status);
    let agent = state.agent_mut(f.agent, ctx.now_ms);
    // Hash the input only when the id cannot find the call (hashing a large Write is not free).
    let found = agent
        .find_call(id, "")
        .map(|c| (c.key.clone(), c.epoch, c.target.clone()));
    let (key, epoch, target) = match found {
        Some(f) => f,
        None => {
            let key = call_key(tool, input);
            match agent.find_call("", &key) {
                Some(c) => (key, c.epoch, c.target.clone()),
                None => {
                    let target = redact::target(tool, input);
                    agent.push_call(Call {
                        id: id.to_string(),
                        tool: tool.to_string(),
                        key: key.clone(),
                        target: target.clone(),
                        at_ms: ctx.now_ms,
                        epoch: agent.epoch,
                        status: CallStatus::Pending,
                        outcome: None,
                    });
                    (key, agent.epoch, target)
                }
            }
        }
    };
    if let Some(c) = agent.find_call(id, &key) {
        c.status = status;
        c.outcome = result.digest.clone();
    }
    let run = agent.run_mut(&key, tool, &target, ctx.now_ms);
    dedup::record(run, result, epoch, ctx.now_ms);
    (agent, key, epoch, target)
}

/// PostToolBatch lists every call of the turn once. Calls no tool hook saw were rejected by Claude
/// Code before they ran (an Edit whose `old_string` is missing): they are failed calls too.
fn post_tool_batch(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    let is_main = p.agent() == MAIN_AGENT;
    for bc in p.tool_calls.as_deref().unwrap_or_default() {
        let text = response_text(bc);
        let agent = state.agent_mut(p.agent(), ctx.now_ms);
        let id = bc.tool_use_id.as_deref().unwrap_or("");
        if !id.is_empty() {
            if let Some(c) = agent.find_call(id, "") {
                if c.status == CallStatus::Pending && text.starts_with("PreToolUse:") {
                    c.status = CallStatus::Denied;
                }
                continue;
            }
        }
        if !text.contains("<tool_use_error>") {
            // Unseen but not rejected: a hook of ours was skipped; nothing reliable to record.
            continue;
        }
        // Recorded as PreToolUse would have, then finished like a failure.
        let key = call_key(&bc.tool_name, &bc.tool_input);
        let target = redact::target(&bc.tool_name, &bc.tool_input);
        let epoch = agent.epoch;
        agent
            .run_mut(&key, &bc.tool_name, &target, ctx.now_ms)
            .total += 1;
        agent.push_call(Call {
            id: id.to_string(),
            tool: bc.tool_name.clone(),
            key,
            target,
            at_ms: ctx.now_ms,
            epoch,
            status: CallStatus::Pending,
            outcome: None,
        });
        state.totals.calls += 1;
        if is_main && is_edit_tool(&bc.tool_name) {
            state.turn.edit_attempts += 1;
        }
        let done = Finished {
            agent: p.agent(),
            tool: &bc.tool_name,
            input: &bc.tool_input,
            id,
            status: CallStatus::Rejected,
            error: &text,
            response: None,
            interrupted: false,
        };
        verdicts.extend(finish(state, &done, ctx));
    }
    verdicts
}

fn response_text(bc: &BatchCall) -> String {
    match &bc.tool_response {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn first_line(text: &str) -> String {
    let t = text.trim_start_matches("<tool_use_error>");
    crate::payload::clip(
        t.lines()
            .next()
            .unwrap_or("")
            .trim_end_matches("</tool_use_error>"),
        60,
    )
}

fn stop(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    let cfg = &ctx.config.progress;
    // Under a sticky block or an OPEN breaker the agent was told to summarise and stop: let it.
    if state
        .agents
        .get(MAIN_AGENT)
        .is_some_and(|a| a.blocked.is_some())
        || state.breaker.state == crate::state::BreakerState::Open
    {
        return Vec::new();
    }
    let judgement = progress::judge(&state.turn, ctx.attended, cfg, |base| {
        ctx.changed_since(base)
    });
    let active = p.stop_hook_active == Some(true);
    let verdict = progress::check(&state.turn, active, judgement, cfg);
    match judgement {
        progress::Judgement::Progress => state.turn.progress = Some(true),
        progress::Judgement::NoProgress => state.turn.progress = Some(false),
        _ => {}
    }
    if verdict.is_some() && ctx.enforced() {
        state.turn.stop_blocks += 1;
    }
    verdict.into_iter().collect()
}

/// Counts the deciding verdict and remembers it for `status`.
fn account(state: &mut SessionState, p: &Payload, event: Event, v: &Verdict, ctx: &Ctx) {
    match (event, v.action) {
        (Event::Stop | Event::SubagentStop, _) => state.totals.blocks += 1,
        (_, Action::Warn) => state.totals.warnings += 1,
        _ => state.totals.denials += 1,
    }
    if p.agent() == MAIN_AGENT && is_intervention(event, v) {
        if v.detector == ESCALATION || v.action >= Action::Deny {
            state.turn.hard_interventions += 1;
        }
        // One per model turn: parallel calls denied together are one failed intervention, and the
        // model has not yet seen any of them.
        if v.detector != ESCALATION
            && state.turn.last_intervention_batch != Some(state.turn.batches)
        {
            state.turn.interventions += 1;
            state.turn.last_intervention_batch = Some(state.turn.batches);
        }
    }
    state.note(DecisionNote {
        at_ms: ctx.now_ms,
        agent: crate::payload::clip(p.agent(), 64),
        event: event.name().to_string(),
        tool: p.tool().to_string(),
        detector: v.detector.to_string(),
        action: decision_name(event, v.action).to_string(),
        severity: v.severity.name().to_string(),
        enforced: ctx.enforced(),
        summary: crate::payload::clip(&v.reason, 200),
    });
}

/// Denials and loop warnings are signs the turn was stuck; advisory hints (same tool in a row,
/// consecutive failures) are not: a turn that ran failing tests, or waited for a slow server, and
/// reported is a legitimate end. The Stop gate's own blocks are not interventions in the turn.
fn is_intervention(event: Event, v: &Verdict) -> bool {
    !matches!(event, Event::Stop | Event::SubagentStop) && v.is_intervention()
}

/// The name of a decision as the event log and `status` show it.
pub fn decision_name(event: Event, action: Action) -> &'static str {
    match (event, action) {
        (Event::Stop | Event::SubagentStop | Event::PostToolBatch, Action::Deny | Action::Halt) => {
            "block"
        }
        (_, a) => a.name(),
    }
}
