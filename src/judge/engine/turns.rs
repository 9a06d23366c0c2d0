//! Turns: where one starts (a prompt, a new `prompt_id`, a model turn on CLIs with no batch
//! event), what it was (its signature), and whether it made progress when it ends.

use super::Ctx;
use crate::judge::ceiling;
use crate::judge::detectors::{self, breaker, progress, Gates, Prompt};
use crate::judge::state::{SessionState, Turn, TurnSig, MAX_TURNS};
use crate::platform::git::Stamp;
use crate::protocol::payload::{Payload, MAIN_AGENT};
use crate::protocol::verdict::{Action, Verdict};
use crate::util::canon::Digest16;

/// Where no batch event marks a model turn's end (every CLI but Claude Code), a call made after
/// an answer, with nothing of the same model turn still running, starts the next model turn.
pub(super) fn follow_model_turn(state: &mut SessionState, p: &Payload) {
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

/// A new prompt: the turn before it is judged first, then the prompt is refused while the circuit
/// is OPEN (an outer loop's next iteration then costs nothing), otherwise a new turn starts.
pub(super) fn user_prompt(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
    let baseline = baseline(ctx, true);
    let main = p.agent() == MAIN_AGENT;
    if main {
        end_turn(state, baseline.as_deref(), ctx);
    }
    let digest = prompt_digest(p);
    let refeed = digest.is_some_and(|d| state.failed_prompts.contains(&d));
    let prompt = Prompt {
        session: &state.session,
        main,
        now_ms: ctx.now_ms,
        config: ctx.config,
        attended: ctx.attended,
        refeed,
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
    // Past the session's ceiling a re-fed prompt is refused; new words or a person known to
    // attend are told instead.
    let told = ceiling::on_prompt(&state.ceiling, ctx.attended, refeed, &state.session);
    if let Some(v) = told.as_ref().filter(|v| v.action >= Action::Deny) {
        return vec![v.clone()];
    }
    begin_turn(state, p.prompt_id.clone(), digest, baseline, ctx);
    told.into_iter().chain(judged).collect()
}

pub fn prompt_digest(p: &Payload) -> Option<Digest16> {
    p.prompt
        .as_deref()
        .map(|t| Digest16::of(t.trim().as_bytes()))
}

/// Starts a new turn when the main agent's prompt changes (UserPromptSubmit, or a new `prompt_id`
/// when that hook was not installed). Subagents share the prompt and never start turns.
pub(super) fn follow_turn(
    state: &mut SessionState,
    p: &Payload,
    ctx: &Ctx,
    may_take_baseline: bool,
) {
    if p.agent() != MAIN_AGENT {
        return;
    }
    if p.prompt_id.is_some() && p.prompt_id != state.turn.prompt_id {
        start_turn(state, p.prompt_id.clone(), None, ctx, may_take_baseline);
    }
}

pub(super) fn start_turn(
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
pub(super) fn baseline(ctx: &Ctx, take: bool) -> Option<String> {
    if take && progress::may_act(ctx.attended, &ctx.config.progress) {
        ctx.stamp()
    } else {
        None
    }
}

pub(super) fn begin_turn(
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
/// the work never seen before (or the worktree moved since its baseline); no progress only on the
/// evidence that arms the Stop gate — the gate said so, an edit failed, or the agent walked into
/// a refusal or an escalation — never for a turn that answered, read, checked or talked. A turn
/// that repeats an earlier one exactly counts as each copy of it.
pub(super) fn end_turn(state: &mut SessionState, now_fingerprint: Option<&str>, ctx: &Ctx) {
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
    // The same prompt given again and the same failing calls answered the same way, with no new
    // state: an outer loop going round. A turn of answers, reads or passing checks never is.
    let repeated_failure = identical > 1 && state.turn.prompt.is_some() && turn_failed(state);
    let t = &state.turn;
    let tried_and_failed = t.progress == Some(false)
        || t.edit_failures > 0
        || t.interventions > 0
        || t.hard_interventions > 0
        || repeated_failure;
    let no_progress = !progress && tried_and_failed;
    if let (true, Some(prompt)) = (tried_and_failed, t.prompt) {
        breaker::remember_failed_prompt(&mut state.failed_prompts, prompt);
    }
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

/// Whether a call of the main agent failed in the current turn.
fn turn_failed(state: &SessionState) -> bool {
    let turn = state.turn.number;
    state.agents.get(MAIN_AGENT).is_some_and(|a| {
        a.ledger
            .entries
            .iter()
            .any(|e| e.turn == turn && e.status.failed())
    })
}

/// Whether the turn so far made progress: the Stop gate said so, or it ended in a state of the
/// work never seen before. Progress is where the turn ended, not what it passed through: a turn
/// back at the state it started from (a file written and deleted again) changed nothing.
pub fn turn_progress(state: &SessionState) -> bool {
    let t = &state.turn;
    t.progress == Some(true)
        || (state.world.novel_states > t.start_novel && state.world.id != t.start_world)
}
