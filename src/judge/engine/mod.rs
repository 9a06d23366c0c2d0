//! The decision pipeline for one hook call: fold what happened into the observation ledger and the
//! world state, run every registered detector on them, and return the verdicts. No I/O but reading
//! the files a call changed and the worktree check at Stop, so replay and tests drive it in-process.

use crate::config::{Config, Mode};
use crate::judge::call_key::call_key;
use crate::judge::ceiling;
use crate::judge::detectors::{
    self, breaker, guard, progress, repeat, script, Answer, Batch, Before, Call, Gates, Prompt,
    Stop, View,
};
use crate::judge::ledger::{Entry, Pending, Status, ABSENT};
use crate::judge::outcome::{self, ErrorClass, Interruption};
use crate::judge::redact;
use crate::judge::state::{DecisionNote, Defied, SessionState, Standing, Turn, TurnSig, MAX_TURNS};
use crate::platform::git::{Stamp, Worktree};
pub use crate::protocol::dialect::Caps;
use crate::protocol::payload::{Event, Payload, MAIN_AGENT};
use crate::protocol::tool::ToolClass;
use crate::protocol::verdict::{strongest, Action, Severity, Verdict};
use crate::util::canon::Digest16;
use serde_json::Value;
use std::path::{Path, PathBuf};

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
    let mut subject = None;
    let mut verdicts = match event {
        // Handled before the engine (`hook::session_start`, `hook::config_change`).
        Event::SessionStart | Event::ConfigChange | Event::FileChanged => Vec::new(),
        Event::UserPromptSubmit => user_prompt(state, p, ctx),
        Event::PreToolUse => {
            follow_turn(state, p, ctx, true);
            if !ctx.caps.batch_event {
                follow_model_turn(state, p);
            }
            if ctx.caps.silent_failures {
                close_silent_failure(state, p, ctx);
            }
            let (key, v) = pre_tool_use(state, p, ctx);
            subject = Some(key);
            v
        }
        Event::PostToolUse | Event::PostToolUseFailure => {
            follow_turn(state, p, ctx, false);
            let (key, v) = post_tool_use(state, p, event == Event::PostToolUse, ctx);
            subject = Some(key);
            v
        }
        Event::PostToolBatch => {
            follow_turn(state, p, ctx, false);
            post_tool_batch(state, p, ctx)
        }
        Event::Stop => {
            follow_turn(state, p, ctx, false);
            stop(state, p, ctx)
        }
        Event::PermissionRequest => {
            let turn = state.turn.number;
            ceiling::on_permission(&mut state.ceiling, turn, &state.session)
                .into_iter()
                .collect()
        }
        Event::SubagentStop => {
            // The subagent is done: its loop state has nothing left to protect. Without an id
            // it names no subagent, and the main agent is never the one that stopped.
            if p.agent_id.as_deref().is_some_and(|id| !id.is_empty()) {
                state.agents.remove(&p.agent_key());
            }
            Vec::new()
        }
    };
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
        defied = defiance(state, p, event, &verdicts, subject, ctx);
        ladder(state, p, event, &mut verdicts, defied > 0, ctx);
        let refused = strongest(&verdicts)
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
            if let Some(v) = crate::protocol::verdict::strongest_mut(&mut verdicts) {
                v.evidence
                    .insert("defied_in_turn".into(), state.ceiling.refusals.into());
            }
        }
    }
    if let Some(v) = strongest(&verdicts) {
        account(state, p, event, v, subject, defied > 0, ctx);
    }
    if event == Event::PostToolBatch && p.agent() == MAIN_AGENT {
        state.turn.batches += 1;
    }
    verdicts
}

/// Whether the call refused now is one the agent walked into (issue 27): a refusal already
/// stood in this turn and nothing has changed since — no new state of the work, no news from
/// any call, and, where the refused call was a wait, less than the waiting gap of real time.
/// Returns how many refusals this adds to the ceiling's count: the standing one counts too, the
/// first time the agent goes on regardless. A first refusal, a warning or an `ask` adds none.
fn defiance(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    verdicts: &[Verdict],
    subject: Option<Digest16>,
    ctx: &Ctx,
) -> u32 {
    state.heed.follow(state.turn.number);
    // A turn already over is refused whole: nothing more is walked into.
    if state.ceiling.ended && state.ceiling.turn == state.turn.number {
        return 0;
    }
    let refusal = strongest(verdicts).filter(|v| {
        event == Event::PreToolUse
            && matches!(v.action, Action::Deny | Action::Halt)
            && v.detector != ceiling::NAME
    });
    let Some(v) = refusal else {
        return 0;
    };
    let agent = p.agent_key();
    let now = ctx.now_ms;
    let epoch = state.world.epoch;
    let news = state.heed.news_of(&agent);
    let gap_ms = ctx.config.detectors.repeat.waiting_gap_seconds * 1000;
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    let what = detectors::describe(p.tool(), &redact::target(p.tool(), input));
    let wait = state.agents.get(&agent).is_some_and(|a| {
        a.ledger
            .entries
            .back()
            .is_some_and(|e| Some(e.key) == subject && e.status == Status::Denied && e.waited)
    });
    let mut counted = 0;
    if let Some(s) = &state.heed.standing {
        let unchanged = s.agent == agent
            && s.epoch == epoch
            && news <= s.at_ms
            && !(s.wait && now.saturating_sub(s.at_ms) >= gap_ms);
        if unchanged {
            let first = (!s.counted).then(|| Defied {
                at_ms: s.at_ms,
                what: s.what.clone(),
                detector: s.detector.clone(),
            });
            if let Some(d) = first {
                state.heed.note_defied(d);
                counted += 1;
            }
            state.heed.note_defied(Defied {
                at_ms: now,
                what: what.clone(),
                detector: v.detector.to_string(),
            });
            counted += 1;
        }
    }
    state.heed.standing = Some(Standing {
        at_ms: now,
        epoch,
        agent,
        wait,
        counted: counted > 0,
        what,
        detector: v.detector.to_string(),
    });
    counted
}

/// Where no batch event marks a model turn's end (every CLI but Claude Code), a call made after
/// an answer, with nothing of the same model turn still running, starts the next model turn.
fn follow_model_turn(state: &mut SessionState, p: &Payload) {
    if p.agent() != MAIN_AGENT {
        return;
    }
    let Some(agent) = state.agents.get(MAIN_AGENT) else {
        return;
    };
    let Some(last) = agent.ledger.entries.back() else {
        return;
    };
    let answered_since = agent
        .ledger
        .pending
        .iter()
        .all(|pd| pd.start_ms <= last.end_ms);
    if last.turn == state.turn.number && last.batch == state.turn.batches && answered_since {
        state.turn.batches += 1;
    }
}

/// On a CLI that reports nothing for a call that failed before it ran (Codex), the same call made
/// again while the earlier one is still unanswered means the earlier one failed: it is recorded
/// as a failure, so a retried patch that never applies counts like any other repeated failure.
fn close_silent_failure(state: &mut SessionState, p: &Payload, ctx: &Ctx) {
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    let key = call_key(p.tool(), input);
    let unanswered = state.agents.get(p.agent()).is_some_and(|a| {
        a.ledger
            .pending
            .iter()
            .any(|pd| pd.key == key && !pd.denied)
    });
    if !unanswered {
        return;
    }
    let done = Finished {
        agent: p.agent(),
        tool: p.tool(),
        input,
        id: "",
        cwd: p.cwd.as_deref(),
        status: Status::Failed,
        error: "the call got no result: the agent CLI reports nothing for a call that fails \
                before it runs (a patch that does not apply, a command that cannot start)",
        response: None,
    };
    // Its detectors speak at the next answer; this call is judged by the checks before a call.
    let _ = finish(state, &done, ctx);
}

/// Stage 3 of the ladder: when a turn's interventions have not broken the loop, the next one goes
/// to the human. Attended, a PreToolUse `ask` puts it in front of them; unattended, the looping
/// call is denied and the turn's PostToolBatch ends the run (`decision: block` stops it at once,
/// where `continue: false` would still let the tool run). Stage 3 acts beyond the call in front of
/// it, so it needs evidence from two different repeated calls across model turns, never one batch.
fn ladder(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    verdicts: &mut Vec<Verdict>,
    defied: bool,
    ctx: &Ctx,
) {
    let cfg = &ctx.config.ladder;
    if !cfg.enabled || p.agent() != MAIN_AGENT {
        return;
    }
    let unattended = ctx.attended == Some(false);
    if !ctx.caps.halt {
        if state.turn.escalation.is_some() && event == Event::PreToolUse {
            // A CLI that cannot end the run: the turn stays stopped by denying every call, the
            // reason having been said once already.
            verdicts.push(
                Verdict::new(LADDER, Action::Deny, Severity::Critical, STANDING.into())
                    .loop_warning(),
            );
            return;
        }
    } else if let Some(reason) = state.turn.escalation.clone() {
        let delivered = match (event, unattended) {
            (Event::PreToolUse, false) => Some(Action::Ask),
            (Event::PostToolBatch, true) => Some(Action::Halt),
            _ => None,
        };
        if let Some(action) = delivered {
            state.turn.escalation = None;
            verdicts.push(Verdict::new(LADDER, action, Severity::Critical, reason).loop_warning());
            return;
        }
    }
    let Some(v) = strongest(verdicts) else {
        return;
    };
    // Only a refusal the agent walked into escalates: a warning, or one misjudged refusal, never
    // ends a turn.
    if !defied
        || !is_intervention(event, v)
        || state.turn.interventions < cfg.escalate_after.max(1)
        || state.turn.intervened_keys.len() < 2
    {
        return;
    }
    let reason = redact::mask(&format!(
        "loopgate: {} interventions in this turn, on {} different calls, have not broken the loop, so it goes to the user now. Latest: {}",
        state.turn.interventions,
        state.turn.intervened_keys.len(),
        v.reason
            .trim_start_matches("LOOP_DETECTED (loopgate): ")
            .trim_start_matches("loopgate: ")
    ));
    // Re-arm: the next escalation needs as many failed interventions again.
    state.turn.interventions = 0;
    state.turn.intervened_keys.clear();
    state.turn.escalations += 1;
    state.totals.escalations += 1;
    let action = match (event, unattended) {
        _ if !ctx.caps.halt => {
            state.turn.escalation = Some(reason.clone());
            if event == Event::PreToolUse {
                Action::Deny
            } else {
                Action::Warn
            }
        }
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
        Verdict::new(LADDER, action, Severity::Critical, reason)
            .loop_warning()
            .with("stage", 3)
            .with("attended", !unattended)
            .with("escalated_from", v.detector),
    );
}

pub const LADDER: &str = "ladder";

/// Every call after the ladder's last stage, on a CLI that cannot end the run.
const STANDING: &str = "loopgate: tool calls stay paused for the rest of this turn: the loop was \
    escalated (see the earlier loopgate message). Stop calling tools; tell the user what you tried \
    and what blocks you.";

/// A new prompt: the turn before it is judged first, then the prompt is refused while the circuit
/// is OPEN (an outer loop's next iteration then costs nothing), otherwise a new turn starts.
fn user_prompt(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    let baseline = baseline(ctx, true);
    let main = p.agent() == MAIN_AGENT;
    if main {
        end_turn(state, baseline.as_deref(), ctx);
    }
    let prompt = Prompt {
        session: &state.session,
        main,
        now_ms: ctx.now_ms,
        config: ctx.config,
        attended: ctx.attended,
    };
    let mut gates = Gates {
        breaker: &mut state.breaker,
        ceiling: &mut state.ceiling,
    };
    let judged: Vec<Verdict> = detectors::AT_PROMPT
        .iter()
        .filter_map(|(_, at)| at(&prompt, &mut gates))
        .collect();
    // A refused prompt starts no turn.
    if let Some(v) = judged.iter().find(|v| v.action >= Action::Deny) {
        return vec![v.clone()];
    }
    // Past the session's ceiling a prompt is refused; a person known to attend is told instead.
    let told = ceiling::on_prompt(&state.ceiling, ctx.attended, &state.session);
    if let Some(v) = told.as_ref().filter(|v| v.action >= Action::Deny) {
        return vec![v.clone()];
    }
    begin_turn(state, p.prompt_id.clone(), prompt_digest(p), baseline, ctx);
    told.into_iter().chain(judged).collect()
}

pub fn prompt_digest(p: &Payload) -> Option<Digest16> {
    p.prompt
        .as_deref()
        .map(|t| Digest16::of(t.trim().as_bytes()))
}

/// Starts a new turn when the main agent's prompt changes (UserPromptSubmit, or a new `prompt_id`
/// when that hook was not installed). Subagents share the prompt and never start turns.
fn follow_turn(state: &mut SessionState, p: &Payload, ctx: &Ctx, may_take_baseline: bool) {
    if p.agent() != MAIN_AGENT {
        return;
    }
    if p.prompt_id.is_some() && p.prompt_id != state.turn.prompt_id {
        start_turn(state, p.prompt_id.clone(), None, ctx, may_take_baseline);
    }
}

fn start_turn(
    state: &mut SessionState,
    prompt_id: Option<String>,
    prompt: Option<Digest16>,
    ctx: &Ctx,
    take_baseline: bool,
) {
    let baseline = baseline(ctx, take_baseline);
    end_turn(state, baseline.as_deref(), ctx);
    begin_turn(state, prompt_id, prompt, baseline, ctx);
}

/// The turn's worktree stamp (time, HEAD, index stat; no scan), only where the Stop gate can act.
fn baseline(ctx: &Ctx, take: bool) -> Option<String> {
    if take && progress::may_act(ctx.attended, &ctx.config.progress) {
        ctx.stamp()
    } else {
        None
    }
}

fn begin_turn(
    state: &mut SessionState,
    prompt_id: Option<String>,
    prompt: Option<Digest16>,
    baseline: Option<String>,
    ctx: &Ctx,
) {
    // The user said something new: every earlier streak ends here.
    state.world.new_prompt();
    state.heed.news(MAIN_AGENT, ctx.now_ms);
    state.turn = Turn {
        prompt_id,
        number: state.turn.number + 1,
        started_ms: ctx.now_ms,
        baseline,
        start_world: state.world.id,
        start_novel: state.world.novel_states,
        prompt,
        ..Turn::default()
    };
}

/// What the turn was: its prompt, what it asked and got back, and the state it ended in. The same
/// signature twice with no new state is an outer loop going round.
pub fn turn_signature(state: &SessionState) -> Digest16 {
    let t = &state.turn;
    let mut pairs: Vec<[u8; 33]> = state
        .agents
        .get(MAIN_AGENT)
        .map(|a| {
            a.ledger
                .entries
                .iter()
                .filter(|e| e.turn == t.number && e.status.answered())
                .map(|e| {
                    let mut b = [0u8; 33];
                    b[..16].copy_from_slice(&e.key.0);
                    // A failure is the same answer up to numbers (a count, a line, a port).
                    let said = if e.status.failed() { e.shape } else { e.answer };
                    b[16..32].copy_from_slice(&said.or(e.answer).unwrap_or_default().0);
                    b[32] = u8::from(e.status.failed());
                    b
                })
                .collect()
        })
        .unwrap_or_default();
    pairs.sort_unstable();
    pairs.dedup();
    let mut parts: Vec<&[u8]> = vec![
        t.prompt.as_ref().map_or(&[][..], |d| &d.0[..]),
        &state.world.id.0,
    ];
    parts.extend(pairs.iter().map(|b| &b[..]));
    Digest16::of_parts(&parts)
}

/// Judges the turn that just ended for the circuit breaker: progress when it produced a state of
/// the work never seen before (or the worktree moved since its baseline); no progress when the
/// Stop gate said so, when it needed a denial or an escalation, or when it repeated an earlier
/// turn exactly — even a turn that only ran the tests and reported, if it is the same again.
fn end_turn(state: &mut SessionState, now_fingerprint: Option<&str>, ctx: &Ctx) {
    let t = &state.turn;
    if t.number == 0 || t.ended {
        return;
    }
    state.turn.ended = true;
    let t = &state.turn;
    // HEAD or the index moved (a commit, `git add`); file changes the tools made count through
    // the turn's own signals, and the Stop gate's judgement through `progress`. No walk here.
    let moved = match (t.baseline.as_deref(), now_fingerprint) {
        (Some(a), Some(b)) => match (Stamp::decode(a), Stamp::decode(b)) {
            (Some(a), Some(b)) => a.git_moved(&b),
            _ => a != b,
        },
        _ => false,
    };
    let progress = moved || turn_progress(state);
    let signature = turn_signature(state);
    // The same turn again with no new state is a loop, and so was each earlier copy of it: the
    // n-th identical turn stands for n turns without progress (the 3rd opens the circuit).
    let identical = 1 + state
        .turns
        .iter()
        .filter(|s| s.signature == signature)
        .count() as u32;
    let t = &state.turn;
    let no_progress =
        !progress && (t.progress == Some(false) || t.hard_interventions > 0 || identical > 1);
    if t.interventions + t.hard_interventions > 0 {
        state.totals.turns_with_interventions += 1;
        if progress {
            state.totals.intervened_turns_with_progress += 1;
        }
    }
    if state.turns.len() >= MAX_TURNS {
        state.turns.pop_front();
    }
    state.turns.push_back(TurnSig {
        number: t.number,
        signature,
        ended_ms: ctx.now_ms,
    });
    breaker::end_turn(
        &mut state.breaker,
        progress,
        no_progress.then_some(identical),
        ctx.now_ms,
        &ctx.config.breaker,
    );
}

/// Whether the turn so far made progress: the Stop gate said so, or it ended in a state of the
/// work never seen before. Progress is where the turn ended, not what it passed through: a turn
/// back at the state it started from (a file written and deleted again) changed nothing.
pub fn turn_progress(state: &SessionState) -> bool {
    let t = &state.turn;
    t.progress == Some(true)
        || (state.world.novel_states > t.start_novel && state.world.id != t.start_world)
}

/// Did real waiting come before this call: it waits on purpose itself (`sleep 3 && curl`, a
/// blocking read of a background task), its previous answer came from a call that waited (a poll
/// that blocked for 30 s), a call that waited ran since then, or minutes of quiet passed. For a
/// failure that has not changed, minutes spent on other calls are a detour, not waiting (the
/// warning must not be forgotten after it).
fn waited(
    ledger: &crate::judge::ledger::Ledger,
    key: &Digest16,
    waits_itself: bool,
    now_ms: u64,
    ctx: &Ctx,
) -> bool {
    if waits_itself {
        return true;
    }
    let gap = ctx.config.detectors.repeat.waiting_gap_seconds;
    let Some(prev) = ledger.last_answer_of(key) else {
        return false;
    };
    if prev.sleeps {
        return true;
    }
    let failing = prev.status.failed();
    let mut since = ledger
        .entries
        .iter()
        .rev()
        .take_while(|e| e.end_ms >= prev.end_ms && e.key != *key)
        .peekable();
    let quiet = since.peek().is_none();
    let gap_passed = now_ms.saturating_sub(prev.end_ms) >= gap * 1000;
    (gap_passed && (quiet || !failing)) || since.any(|e| e.sleeps)
}

fn pre_tool_use(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> (Digest16, Vec<Verdict>) {
    let cfg = ctx.config;
    let tool = p.tool();
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    let key = call_key(tool, input);
    let class = ToolClass::of(tool);
    // Learn what a file held before the agent first changes it, so undoing a change is
    // recognised as coming back, not as something new.
    if class.changes_files() {
        if let Some(path) = file_path(input, p.cwd.as_deref()) {
            // Knowing more of the state the turn started from is not a change of it; but a file
            // made or written since the turn began (outside any tool loopgate saw) was not part
            // of that state: what it holds is a change, whoever wrote it.
            let at_start = state.world.id == state.turn.start_world;
            let since_start = state
                .turn
                .baseline
                .as_deref()
                .is_some_and(|b| crate::platform::git::modified_since(&path, b));
            state.world.observe_before(
                Digest16::of(path.as_os_str().as_encoded_bytes()),
                content_digest(&path),
            );
            if at_start && !since_start {
                state.turn.start_world = state.world.id;
            }
        }
    }
    let now = ctx.now_ms;
    // A Code Mode script's call: the proxy level judges it (the window and the repeat rule).
    let scripted = p.tool_use_id.as_deref().is_some_and(script::is_script_call);
    let world = &state.world;
    let news_ms = state.heed.news_of(&p.agent_key());
    let agent = state.agents.entry(p.agent_key()).or_default();
    agent.last_seen_ms = agent.last_seen_ms.max(now);
    let waits_itself =
        crate::judge::wait::declared_s(tool, input) >= crate::judge::wait::MIN_WAIT_S;
    let waited = waited(&agent.ledger, &key, waits_itself, now, ctx);
    let guard_env = || guard::env_for(p.cwd.as_deref(), ctx.project_dir, ctx.state_dir);
    let before = Before {
        view: View {
            ledger: &agent.ledger,
            world,
            now_ms: now,
            config: cfg,
            news_ms,
        },
        call: Call {
            tool,
            input,
            key,
            class,
            waited,
        },
        agent,
        session: &state.session,
        scripted,
        guard_env: &guard_env,
    };
    let mut gates = Gates {
        breaker: &mut state.breaker,
        ceiling: &mut state.ceiling,
    };
    let verdicts: Vec<Verdict> = detectors::BEFORE_CALL
        .iter()
        .filter_map(|(_, check)| check(&before, &mut gates))
        .collect();
    let denied = ctx.enforced() && strongest(&verdicts).is_some_and(|v| v.action >= Action::Deny);
    let target = compact_str::CompactString::from(redact::target(tool, input));
    if denied {
        // It never runs: no Post event will come for it.
        agent.ledger.push(Entry {
            key,
            id: Entry::id_of(p.tool_use_id.as_deref().unwrap_or("")),
            tool: crate::protocol::payload::clip(tool, 64).into(),
            target,
            class,
            status: Status::Denied,
            answer: None,
            shape: None,
            rich: false,
            error_class: None,
            preview: String::new(),
            epoch: world.epoch,
            epoch_after: world.epoch,
            novel: false,
            waited,
            sleeps: false,
            news: false,
            start_ms: now,
            end_ms: now,
            turn: state.turn.number,
            batch: state.turn.batches,
        });
    } else {
        agent.ledger.start(Pending {
            id: crate::protocol::payload::stored_id(p.tool_use_id.as_deref().unwrap_or_default()),
            key,
            target,
            start_ms: now,
            epoch: world.epoch,
            waited,
            denied: false,
        });
    }
    state.enforce_agent_cap();
    state.totals.calls += 1;
    if p.agent() == MAIN_AGENT && class.changes_files() {
        state.turn.edit_attempts += 1;
    }
    (key, verdicts)
}

fn post_tool_use(
    state: &mut SessionState,
    p: &Payload,
    ok: bool,
    ctx: &Ctx,
) -> (Digest16, Vec<Verdict>) {
    let error = p.error.as_deref().unwrap_or("");
    let status = if ok {
        Status::Ok
    } else if p.is_interrupt == Some(true) {
        Status::Cancelled
    } else {
        match outcome::interruption(error) {
            Some(Interruption::Cancelled) => Status::Cancelled,
            Some(Interruption::Refused) => Status::Refused,
            None => Status::Failed,
        }
    };
    let done = Finished {
        agent: p.agent(),
        tool: p.tool(),
        input: p.tool_input.as_ref().unwrap_or(&Value::Null),
        id: p.tool_use_id.as_deref().unwrap_or(""),
        cwd: p.cwd.as_deref(),
        status,
        error,
        response: p.tool_response.as_ref(),
    };
    finish(state, &done, ctx)
}

/// A call that finished: ran (ok or failed), was rejected before it ran, or was cancelled.
struct Finished<'a> {
    agent: &'a str,
    tool: &'a str,
    input: &'a Value,
    id: &'a str,
    cwd: Option<&'a str>,
    status: Status,
    error: &'a str,
    response: Option<&'a Value>,
}

/// Folds a finished call into the ledger and the world state, then asks every detector that
/// reads answers.
fn finish(state: &mut SessionState, f: &Finished, ctx: &Ctx) -> (Digest16, Vec<Verdict>) {
    let now = ctx.now_ms;
    let class = ToolClass::of(f.tool);
    let answered = f.status.answered();
    // A shell command's answer without its echo labels, compared without its own words.
    let command = match (f.tool, f.input.get("command")) {
        ("Bash", Some(Value::String(cmd))) => cmd.as_str(),
        _ => "",
    };
    let bare = crate::judge::noise::command_as_asked(command);
    let echoed = bare.as_ref().map_or(&[][..], |(_, e)| e.as_slice());
    let words = crate::judge::noise::question_words(bare.as_ref().map_or(command, |(c, _)| c));
    let mut result = match f.status {
        Status::Ok => outcome::of_command_success(f.tool, f.response, echoed, &words),
        _ if answered => outcome::of_command_failure(f.error, echoed, &words),
        _ => outcome::Outcome {
            digest: None,
            shape: None,
            rich: false,
            error_class: None,
            preview: String::new(),
        },
    };
    // What the call did to the work: the content of every file it changed.
    let mut novel = false;
    if f.status == Status::Ok {
        observe_created(state, f);
    }
    if f.status == Status::Ok {
        match changes(f.tool, f.input, f.response, f.cwd) {
            Some(mut ch) if !ch.is_empty() => {
                if class == ToolClass::Edit {
                    unseen_edit(&mut ch, &state.world, f.input);
                }
                novel = state.world.apply(&ch);
                // A command that wrote files tried to change the work, as an edit does.
                if class == ToolClass::Shell && f.agent == MAIN_AGENT {
                    state.turn.edit_attempts += 1;
                }
                // A file change's answer is the state it left the files in; a shell command's
                // is its output and that state together (a silent `echo x > f` did something,
                // and doing the same thing again is a repeat).
                if class.changes_files() {
                    let d = effect(&ch, None);
                    result.digest = Some(d);
                    result.shape = Some(d);
                    result.rich = true;
                } else {
                    result.digest = Some(effect(&ch, result.digest));
                    result.shape = Some(effect(&ch, result.shape));
                }
            }
            Some(_) => {}
            // More files changed than Claude Code listed: assume something new happened.
            None => novel = state.world.apply_unknown(now),
        }
    }
    let world_epoch = state.world.epoch;
    let turn = state.turn.number;
    let batch = state.turn.batches;
    let agent = state
        .agents
        .entry(crate::protocol::payload::stored_id(f.agent))
        .or_default();
    agent.last_seen_ms = agent.last_seen_ms.max(now);
    let pending = agent
        .ledger
        .take_pending(&crate::protocol::payload::stored_id(f.id), None)
        .or_else(|| {
            let key = call_key(f.tool, f.input);
            agent.ledger.take_pending("", Some(&key))
        });
    let (key, target, start_ms, epoch, waited) = match pending {
        Some(pd) => (pd.key, pd.target, pd.start_ms, pd.epoch, pd.waited),
        None => (
            call_key(f.tool, f.input),
            redact::target(f.tool, f.input).into(),
            now,
            world_epoch - u32::from(novel),
            false,
        ),
    };
    let preview = if f.status.failed() {
        crate::protocol::payload::clip(&redact::mask(&result.preview), 100)
    } else {
        String::new()
    };
    let mut entry = Entry {
        key,
        id: Entry::id_of(f.id),
        tool: crate::protocol::payload::clip(f.tool, 64).into(),
        target,
        class,
        status: f.status,
        answer: result.digest,
        shape: result.shape,
        rich: result.rich,
        error_class: result.error_class.filter(|_| f.status.failed()),
        preview,
        epoch,
        epoch_after: world_epoch,
        novel,
        waited,
        sleeps: crate::judge::wait::waited_on_purpose(
            f.tool,
            f.input,
            Some(now.saturating_sub(start_ms)),
        ),
        news: false,
        start_ms,
        end_ms: now,
        turn,
        batch,
    };
    entry.news = repeat::is_news(agent.ledger.last_answer_of(&key), &entry);
    let agent_key = crate::protocol::payload::stored_id(f.agent);
    if entry.news {
        state.heed.news(&agent_key, now);
    }
    agent.ledger.push(entry);
    let mut answer = Answer {
        agent,
        world: &state.world,
        now_ms: now,
        config: ctx.config,
        news_ms: state.heed.news_of(&agent_key),
        tool: f.tool,
        input: f.input,
        status: f.status,
        error: f.error,
        // A script's calls are judged one by one only by the repeat rule (the proxy level).
        scripted: script::is_script_call(f.id),
        project_dir: ctx.project_dir,
    };
    let verdicts: Vec<Verdict> = detectors::AFTER_ANSWER
        .iter()
        .filter_map(|(_, after)| after(&mut answer))
        .collect();
    if f.status.failed() {
        state.totals.failures += 1;
    }
    if novel {
        state.turn.changes += 1;
    }
    if f.agent == MAIN_AGENT && class.changes_files() {
        if f.status == Status::Ok {
            state.turn.edits_ok += 1;
        } else if f.status.failed() && result.error_class != Some(ErrorClass::Transient) {
            // A stale read ("has not been read yet", "modified since read") says the world moved,
            // not that the agent cannot make its change: it is no sign of trying and failing.
            state.turn.edit_failures += 1;
        }
    }
    state.enforce_agent_cap();
    (key, verdicts)
}

/// A file a shell command created (`bashEditDiff` says `created`) was absent before it: that is
/// part of the state the session started from, so deleting it again goes back, not forward.
fn observe_created(state: &mut SessionState, f: &Finished) {
    let Some(files) = f
        .response
        .and_then(|r| r.pointer("/bashEditDiff/files"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for file in files.iter().take(MAX_BASH_FILES) {
        if file.get("created").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let Some(p) = file.get("filePath").and_then(Value::as_str) else {
            continue;
        };
        let path = absolute(p, f.cwd);
        let at_start = state.world.id == state.turn.start_world;
        state
            .world
            .observe_before(Digest16::of(path.as_os_str().as_encoded_bytes()), ABSENT);
        if at_start {
            state.turn.start_world = state.world.id;
        }
    }
}

/// The digest of what a call left behind: each changed file and its content, and what it said.
fn effect(changes: &[(Digest16, Digest16)], said: Option<Digest16>) -> Digest16 {
    let said = said.unwrap_or_default();
    let mut parts: Vec<&[u8]> = changes
        .iter()
        .flat_map(|(p, c)| [&p.0[..], &c.0[..]])
        .collect();
    parts.push(&said.0);
    Digest16::of_parts(&parts)
}

/// An edit that succeeded on a file loopgate cannot read (replaying a transcript on another
/// machine, or a file already gone again): its content is taken as the earlier content with this
/// edit applied, so successive edits stay different states instead of all looking "absent".
fn unseen_edit(
    ch: &mut [(Digest16, Digest16)],
    world: &crate::judge::ledger::World,
    input: &Value,
) {
    for (path, content) in ch.iter_mut() {
        if *content == ABSENT {
            let before = world.files.get(path).map_or(ABSENT, |f| f.content);
            let mut edit = Vec::new();
            crate::util::canon::write_canonical(input, &mut edit);
            *content = Digest16::of_parts(&[&before.0, &edit]);
        }
    }
}

/// The file a Write/Edit/NotebookEdit names, absolute.
fn file_path(input: &Value, cwd: Option<&str>) -> Option<PathBuf> {
    let p = input
        .get("file_path")
        .or_else(|| input.get("notebook_path"))
        .and_then(Value::as_str)?;
    Some(absolute(p, cwd))
}

fn absolute(p: &str, cwd: Option<&str>) -> PathBuf {
    let path = Path::new(p);
    match cwd {
        Some(c) if path.is_relative() => Path::new(c).join(path),
        _ => path.to_path_buf(),
    }
}

/// Files read whole for their digest; bigger ones are known by size and time.
const MAX_HASHED_FILE: u64 = 16 << 20;
/// Files a single shell command is judged by.
const MAX_BASH_FILES: usize = 32;

/// The content of a file as a digest: [`ABSENT`] when it is not there. Only regular files are
/// read (a FIFO or a device would hang or never end), and only up to a size.
fn content_digest(path: &Path) -> Digest16 {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else {
        return ABSENT;
    };
    if !meta.is_file() {
        return Digest16::of(b"\0not a regular file");
    }
    let stamp = || {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Digest16::of_parts(&[&meta.len().to_le_bytes(), &mtime.to_le_bytes()])
    };
    if meta.len() > MAX_HASHED_FILE {
        return stamp();
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    match std::fs::File::open(path).and_then(|f| f.take(MAX_HASHED_FILE).read_to_end(&mut buf)) {
        Ok(_) => Digest16::of(&buf),
        Err(_) => stamp(),
    }
}

/// What a successful call changed: `(path digest, content digest)` per file. `None` when it
/// changed more than can be known (Claude Code listed only some of the files).
fn changes(
    tool: &str,
    input: &Value,
    response: Option<&Value>,
    cwd: Option<&str>,
) -> Option<Vec<(Digest16, Digest16)>> {
    let key = |p: &Path| Digest16::of(p.as_os_str().as_encoded_bytes());
    match ToolClass::of(tool) {
        ToolClass::Write => {
            let path = file_path(input, cwd)?;
            let content = input.get("content").and_then(Value::as_str).unwrap_or("");
            Some(vec![(key(&path), Digest16::of(content.as_bytes()))])
        }
        ToolClass::Edit => {
            let path = file_path(input, cwd)?;
            Some(vec![(key(&path), content_digest(&path))])
        }
        ToolClass::Shell => {
            let Some(diff) = response.and_then(|r| r.get("bashEditDiff")) else {
                return Some(Vec::new());
            };
            let mut paths: Vec<&str> = diff
                .get("changedFiles")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for f in diff
                .get("files")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(p) = f.get("filePath").and_then(Value::as_str) {
                    if !paths.contains(&p) {
                        paths.push(p);
                    }
                }
            }
            let more = diff.get("moreFiles").and_then(Value::as_u64).unwrap_or(0);
            if more > 0 || paths.len() > MAX_BASH_FILES {
                return None;
            }
            Some(
                paths
                    .into_iter()
                    .map(|p| {
                        let abs = absolute(p, cwd);
                        (key(&abs), content_digest(&abs))
                    })
                    .collect(),
            )
        }
        _ => Some(Vec::new()),
    }
}

/// PostToolBatch lists every call of the model turn once. Calls no tool hook finished were
/// denied by a hook, cancelled, refused, or rejected by Claude Code before they ran (an Edit whose
/// `old_string` is missing): only the last are failures.
fn post_tool_batch(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for bc in p.tool_calls.as_deref().unwrap_or_default() {
        let text = bc.response_text();
        let id = bc.tool_use_id.as_deref().unwrap_or("");
        let agent = state.agents.entry(p.agent_key()).or_default();
        let pending = agent.ledger.pending_by_id(id).is_some();
        let status = if text.starts_with("PreToolUse:") {
            Status::Denied
        } else {
            match outcome::interruption(&text) {
                Some(Interruption::Cancelled) => Status::Cancelled,
                Some(Interruption::Refused) => Status::Refused,
                None if text.contains("<tool_use_error>") && !pending => Status::Rejected,
                // Finished by its own Post event, or nothing reliable to record.
                None => continue,
            }
        };
        if !pending && agent.ledger.finished(id) {
            continue;
        }
        if !pending && status != Status::Rejected {
            // A call no hook saw that did not run: nothing the model learned from it.
            continue;
        }
        if status == Status::Rejected {
            // Recorded as PreToolUse would have, then finished like a failure.
            state.totals.calls += 1;
            if p.agent() == MAIN_AGENT && ToolClass::of(&bc.tool_name).changes_files() {
                state.turn.edit_attempts += 1;
            }
        }
        let done = Finished {
            agent: p.agent(),
            tool: &bc.tool_name,
            input: &bc.tool_input,
            id,
            cwd: p.cwd.as_deref(),
            status,
            error: &text,
            response: None,
        };
        let (_, v) = finish(state, &done, ctx);
        verdicts.extend(v);
    }
    let batch = Batch {
        calls: p.tool_calls.as_deref().unwrap_or_default(),
        main: p.agent() == MAIN_AGENT,
        turn: state.turn.number,
        world: state.world.id,
    };
    let mut gates = Gates {
        breaker: &mut state.breaker,
        ceiling: &mut state.ceiling,
    };
    verdicts.extend(
        detectors::AFTER_BATCH
            .iter()
            .filter_map(|(_, after)| after(&batch, &mut gates)),
    );
    verdicts
}

fn stop(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    // Under an OPEN breaker the agent was told to summarise and stop: let it.
    if state.breaker.state == crate::judge::state::BreakerState::Open {
        end_at_stop(state, ctx);
        return Vec::new();
    }
    // Progress is a state of the work the turn did not start from: a turn whose changes were all
    // undone changed nothing.
    state.turn.changes = u32::from(state.world.id != state.turn.start_world);
    let world = &state.world;
    let changed = |base: &str| ctx.changed_since(base, world);
    let at = Stop {
        config: ctx.config,
        attended: ctx.attended,
        active: p.stop_hook_active == Some(true),
        changed: &changed,
    };
    let verdicts: Vec<Verdict> = detectors::AT_STOP
        .iter()
        .filter_map(|(_, at_stop)| at_stop(&mut state.turn, &at))
        .collect();
    if !verdicts.is_empty() && ctx.enforced() {
        state.turn.stop_blocks += 1;
    } else {
        end_at_stop(state, ctx);
    }
    verdicts
}

/// A Stop that lets the turn end judges it for the circuit breaker there, not at the next
/// prompt: `status` and the next prompt see where the session stands as soon as the turn is over,
/// however long until the next one comes.
fn end_at_stop(state: &mut SessionState, ctx: &Ctx) {
    let now = baseline(ctx, state.turn.baseline.is_some());
    end_turn(state, now.as_deref(), ctx);
}

/// Counts the deciding verdict and remembers it for `status`.
fn account(
    state: &mut SessionState,
    p: &Payload,
    event: Event,
    v: &Verdict,
    subject: Option<Digest16>,
    defied: bool,
    ctx: &Ctx,
) {
    match (event, v.action) {
        (Event::Stop | Event::SubagentStop | Event::UserPromptSubmit, a) if a >= Action::Deny => {
            state.totals.blocks += 1
        }
        (_, Action::Warn) => state.totals.warnings += 1,
        _ => state.totals.denials += 1,
    }
    // What arms the Stop gate, the ladder and the breaker's count of stuck turns is a refusal the
    // agent walked into, or the ladder itself: never a warning, never one refusal it heeded.
    if p.agent() == MAIN_AGENT && is_intervention(event, v) && (defied || v.detector == LADDER) {
        if v.detector == LADDER || v.action >= Action::Deny {
            state.turn.hard_interventions += 1;
        }
        if let Some(key) = subject {
            let keys = &mut state.turn.intervened_keys;
            if !keys.contains(&key) && keys.len() < 8 {
                keys.push(key);
            }
        }
        // One per model turn: parallel calls denied together are one failed intervention, and the
        // model has not yet seen any of them.
        if v.detector != LADDER && state.turn.last_intervention_batch != Some(state.turn.batches) {
            state.turn.interventions += 1;
            state.turn.last_intervention_batch = Some(state.turn.batches);
        }
    }
    state.note(DecisionNote {
        at_ms: ctx.now_ms,
        agent: p.agent_key(),
        event: event.name().to_string(),
        tool: p.tool().to_string(),
        detector: v.detector.to_string(),
        action: decision_name(event, v.action).to_string(),
        severity: v.severity.name().to_string(),
        enforced: ctx.enforced(),
        summary: crate::protocol::payload::clip(&redact::mask(&v.reason), 200),
    });
}

/// Denials and loop warnings are signs the turn was stuck; advisory hints (consecutive failures)
/// are not: a turn that ran failing tests, or waited for a slow server, and reported is a
/// legitimate end. The Stop gate's and the prompt's own blocks are not interventions in the turn.
fn is_intervention(event: Event, v: &Verdict) -> bool {
    !matches!(
        event,
        Event::Stop | Event::SubagentStop | Event::UserPromptSubmit
    ) && v.is_intervention()
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
