//! A call before it runs and after it finished: recorded in the ledger (pending, denied, or
//! answered), folded into the world state, and judged by the registry's detectors.

use super::changes::{changes, content_digest, effect, file_path, observe_created, unseen_edit};
use super::waiting::waited;
use super::Ctx;
use crate::judge::call_key::call_key;
use crate::judge::detectors::{self, guard, repeat, script, Answer, Before, Call, Gates, View};
use crate::judge::ledger::{Entry, Pending, Status};
use crate::judge::outcome::{self, ErrorClass, Interruption};
use crate::judge::redact;
use crate::judge::state::SessionState;
use crate::protocol::payload::{Payload, MAIN_AGENT};
use crate::protocol::tool::ToolClass;
use crate::protocol::verdict::{strongest, Action, Verdict};
use crate::util::canon::Digest16;
use serde_json::Value;

/// On a CLI that reports nothing for a call that failed before it ran (Codex), the same call made
/// again while the earlier one is still unanswered means the earlier one failed: it is recorded
/// as a failure, so a retried patch that never applies counts like any other repeated failure.
/// A shell command is different: Codex answers nothing either for one still running when its
/// call returned (`Process running with session ID N`, then polled with `write_stdin`), and a
/// command still running has not failed, nor has a poll of it still waiting. Neither has an
/// outcome the hook can see: it is let go.
pub(super) fn close_silent_failure(state: &mut SessionState, p: &Payload, ctx: &Ctx) {
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    let key = call_key(p.tool(), input);
    let Some(agent) = state.agents.get_mut(p.agent()) else {
        return;
    };
    let Some(at) = agent
        .ledger
        .pending
        .iter()
        .position(|pd| pd.key == key && !pd.denied)
    else {
        return;
    };
    if ToolClass::of(p.tool()) == ToolClass::Shell || crate::judge::wait::polls(p.tool()) {
        agent.ledger.pending.remove(at);
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

pub(super) fn pre_tool_use(
    state: &mut SessionState,
    p: &Payload,
    ctx: &Ctx,
) -> (Digest16, Vec<Verdict>) {
    let tool = p.tool();
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    let key = call_key(tool, input);
    let class = ToolClass::of(tool);
    if class.changes_files() {
        learn_before_change(state, input, p.cwd.as_deref());
    }
    let (verdicts, waited) = before_call(state, p, key, class, ctx);
    let denied = ctx.enforced() && strongest(&verdicts).is_some_and(|v| v.action >= Action::Deny);
    record_call(state, p, key, class, waited, denied, ctx.now_ms);
    state.enforce_agent_cap();
    state.totals.calls += 1;
    if p.agent() == MAIN_AGENT && class.changes_files() {
        state.turn.edit_attempts += 1;
    }
    (key, verdicts)
}

/// Learns what a file held before the agent first changes it, so undoing a change is recognised
/// as coming back, not as something new.
fn learn_before_change(state: &mut SessionState, input: &Value, cwd: Option<&str>) {
    let Some(path) = file_path(input, cwd) else {
        return;
    };
    // Knowing more of the state the turn started from is not a change of it; but a file made or
    // written since the turn began (outside any tool loopgate saw) was not part of that state:
    // what it holds is a change, whoever wrote it.
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

/// Every verdict of the registry's checks before a call, and whether real waiting came before it.
fn before_call(
    state: &mut SessionState,
    p: &Payload,
    key: Digest16,
    class: ToolClass,
    ctx: &Ctx,
) -> (Vec<Verdict>, bool) {
    let (tool, now) = (p.tool(), ctx.now_ms);
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    // A Code Mode script's call: the proxy level judges it (the window and the repeat rule).
    let scripted = p.tool_use_id.as_deref().is_some_and(script::is_script_call);
    let news_ms = state.heed.news_of(&p.agent_key());
    // Other subagents' failures matter only to a call this agent has itself seen fail: the
    // other ledgers are read for that call alone.
    let failed_here = state.agents.get(&p.agent_key()).is_some_and(|a| {
        a.ledger
            .last_answer_of(&key)
            .is_some_and(|e| e.status.failed())
    });
    let elsewhere = failed_here
        .then(|| repeat::Elsewhere::of(&state.agents, &p.agent_key(), &key, state.world.epoch))
        .flatten();
    let agent = state.agents.entry(p.agent_key()).or_default();
    agent.last_seen_ms = agent.last_seen_ms.max(now);
    let waits_itself =
        crate::judge::wait::declared_s(tool, input) >= crate::judge::wait::MIN_WAIT_S;
    let waited = waited(&agent.ledger, &key, waits_itself, now, ctx);
    let guard_env = || guard::env_for(p.cwd.as_deref(), ctx.project_dir, ctx.state_dir);
    let before = Before {
        view: View {
            ledger: &agent.ledger,
            world: &state.world,
            now_ms: now,
            config: ctx.config,
            news_ms,
        },
        call: Call {
            tool,
            input,
            key,
            class,
            waited,
            elsewhere,
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
    let verdicts = detectors::BEFORE_CALL
        .iter()
        .filter_map(|(_, check)| check(&before, &mut gates))
        .collect();
    (verdicts, waited)
}

/// A denied call is recorded as such (it never runs: no Post event will come for it); any other
/// is pending until its answer.
fn record_call(
    state: &mut SessionState,
    p: &Payload,
    key: Digest16,
    class: ToolClass,
    waited: bool,
    denied: bool,
    now: u64,
) {
    let tool = p.tool();
    let input = p.tool_input.as_ref().unwrap_or(&Value::Null);
    let target = compact_str::CompactString::from(redact::target(tool, input));
    let (epoch, turn, batch) = (state.world.epoch, state.turn.number, state.turn.batches);
    let agent = state.agents.entry(p.agent_key()).or_default();
    if !denied {
        agent.ledger.start(Pending {
            id: crate::protocol::payload::stored_id(p.tool_use_id.as_deref().unwrap_or_default()),
            key,
            target,
            start_ms: now,
            epoch,
            waited,
            denied: false,
        });
        return;
    }
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
        epoch,
        epoch_after: epoch,
        novel: false,
        waited,
        sleeps: false,
        under_way: false,
        news: false,
        start_ms: now,
        end_ms: now,
        turn,
        batch,
    });
}

pub(super) fn post_tool_use(
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
pub(super) struct Finished<'a> {
    pub agent: &'a str,
    pub tool: &'a str,
    pub input: &'a Value,
    pub id: &'a str,
    pub cwd: Option<&'a str>,
    pub status: Status,
    pub error: &'a str,
    pub response: Option<&'a Value>,
}

/// Folds a finished call into the ledger and the world state, then asks every detector that
/// reads answers.
pub(super) fn finish(
    state: &mut SessionState,
    f: &Finished,
    ctx: &Ctx,
) -> (Digest16, Vec<Verdict>) {
    let class = ToolClass::of(f.tool);
    let mut result = outcome_of(f);
    // What the call did to the work: the content of every file it changed.
    let mut novel = false;
    if f.status == Status::Ok {
        observe_created(state, f);
        novel = apply_changes(state, f, class, &mut result, ctx.now_ms);
    }
    let key = record_answer(state, f, class, &result, novel, ctx.now_ms);
    if f.status.answered() {
        let ended =
            crate::judge::under_way::poll_outcome(f.tool, f.status.failed(), f.error, f.response);
        if let Some((failed, output)) = ended {
            settle_polled(state, f, failed, &output, ctx.now_ms);
        }
    }
    let verdicts = after_answer(state, f, ctx);
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

/// What the call answered, reduced to what means something: a shell command's answer without
/// its echo labels, compared without its own words.
fn outcome_of(f: &Finished) -> outcome::Outcome {
    let command = match (f.tool, f.input.get("command")) {
        ("Bash", Some(Value::String(cmd))) => cmd.as_str(),
        _ => "",
    };
    let bare = crate::judge::noise::command_as_asked(command);
    let echoed = bare.as_ref().map_or(&[][..], |(_, e)| e.as_slice());
    let words = crate::judge::noise::question_words(bare.as_ref().map_or(command, |(c, _)| c));
    match f.status {
        Status::Ok => outcome::of_command_success(f.tool, f.response, echoed, &words),
        _ if f.status.answered() => outcome::of_command_failure(f.error, echoed, &words),
        _ => outcome::Outcome {
            digest: None,
            shape: None,
            rich: false,
            error_class: None,
            preview: String::new(),
        },
    }
}

/// Applies the files a successful call changed to the world state; returns whether that is a
/// state of the work never seen before. The call's answer becomes the state it left.
fn apply_changes(
    state: &mut SessionState,
    f: &Finished,
    class: ToolClass,
    result: &mut outcome::Outcome,
    now: u64,
) -> bool {
    let mut ch = match changes(f.tool, f.input, f.response, f.cwd) {
        Some(ch) if !ch.is_empty() => ch,
        Some(_) => return false,
        // More files changed than Claude Code listed: assume something new happened.
        None => return state.world.apply_unknown(now),
    };
    if class == ToolClass::Edit {
        unseen_edit(&mut ch, &state.world, f.input);
    }
    let novel = state.world.apply(&ch);
    // A command that wrote files tried to change the work, as an edit does.
    if class == ToolClass::Shell && f.agent == MAIN_AGENT {
        state.turn.edit_attempts += 1;
    }
    // A file change's answer is the state it left the files in; a shell command's is its output
    // and that state together (a silent `echo x > f` did something, and doing the same thing
    // again is a repeat).
    if class.changes_files() {
        let d = effect(&ch, None);
        result.digest = Some(d);
        result.shape = Some(d);
        result.rich = true;
    } else {
        result.digest = Some(effect(&ch, result.digest));
        result.shape = Some(effect(&ch, result.shape));
    }
    novel
}

/// The answer into the agent's ledger, in place of its pending call (or as a call no PreToolUse
/// saw); returns the call's key.
fn record_answer(
    state: &mut SessionState,
    f: &Finished,
    class: ToolClass,
    result: &outcome::Outcome,
    novel: bool,
    now: u64,
) -> Digest16 {
    let (world_epoch, turn, batch) = (state.world.epoch, state.turn.number, state.turn.batches);
    let agent_key = crate::protocol::payload::stored_id(f.agent);
    let agent = state.agents.entry(agent_key.clone()).or_default();
    agent.last_seen_ms = agent.last_seen_ms.max(now);
    let Pending {
        key,
        target,
        start_ms,
        epoch,
        waited,
        ..
    } = take_pending(&mut agent.ledger, f).unwrap_or_else(|| Pending {
        id: Default::default(),
        key: call_key(f.tool, f.input),
        target: redact::target(f.tool, f.input).into(),
        start_ms: now,
        epoch: world_epoch - u32::from(novel),
        waited: false,
        denied: false,
    });
    let failed = f.status.failed();
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
        error_class: result.error_class.filter(|_| failed),
        preview: stored_preview(result, failed),
        epoch,
        epoch_after: world_epoch,
        novel,
        waited,
        sleeps: crate::judge::wait::waited_on_purpose(
            f.tool,
            f.input,
            Some(now.saturating_sub(start_ms)),
        ),
        under_way: f.status == Status::Ok
            && crate::judge::under_way::answer_says(f.tool, f.input, f.response),
        news: false,
        start_ms,
        end_ms: now,
        turn,
        batch,
    };
    entry.news = repeat::is_news(agent.ledger.last_answer_of(&key), &entry);
    let news = entry.news;
    agent.ledger.push(entry);
    if news {
        state.heed.news(&agent_key, now);
    }
    key
}

/// A poll that reports its command's end brings that command's outcome: the agent's latest
/// command whose answer said it was left running takes the poll's answer as its own, so the
/// same long command failing the same way again is a repeat. (Codex needs none of this: it
/// fires the command's own PostToolUse when the process exits, and no hook for its polls.)
fn settle_polled(state: &mut SessionState, f: &Finished, failed: bool, output: &str, now: u64) {
    let status = if failed { Status::Failed } else { Status::Ok };
    let result = &if failed {
        outcome::of_command_failure(output, &[], &[])
    } else {
        let stdout = serde_json::json!({ "stdout": output });
        outcome::of_command_success("Bash", Some(&stdout), &[], &[])
    };
    let error_class = result.error_class.filter(|_| failed);
    let preview = stored_preview(result, failed);
    let ledger = &mut state
        .agents
        .entry(crate::protocol::payload::stored_id(f.agent))
        .or_default()
        .ledger;
    let left_running = ledger.entries.iter().rposition(|e| {
        e.under_way && e.class == ToolClass::Shell && !crate::judge::wait::polls(&e.tool)
    });
    // The command's answer comes now, after its polls: the waiting they did was for this
    // answer, not between this run and the next.
    if let Some(mut e) = left_running.and_then(|at| ledger.entries.remove(at)) {
        e.under_way = false;
        e.status = status;
        e.answer = result.digest;
        e.shape = result.shape;
        e.rich = result.rich;
        e.error_class = error_class;
        e.preview = preview;
        e.end_ms = now;
        ledger.push(e);
    }
}

/// What the ledger keeps of a failure's text for the messages that quote it: its start,
/// secret-masked; nothing for a success.
fn stored_preview(result: &outcome::Outcome, failed: bool) -> String {
    if failed {
        crate::protocol::payload::clip(&redact::mask(&result.preview), 100)
    } else {
        String::new()
    }
}

/// The call's pending record: by its id, or else the oldest pending one of the same call.
fn take_pending(ledger: &mut crate::judge::ledger::Ledger, f: &Finished) -> Option<Pending> {
    ledger
        .take_pending(&crate::protocol::payload::stored_id(f.id), None)
        .or_else(|| ledger.take_pending("", Some(&call_key(f.tool, f.input))))
}

/// Every verdict of the registry's detectors that read answers.
fn after_answer(state: &mut SessionState, f: &Finished, ctx: &Ctx) -> Vec<Verdict> {
    let agent_key = crate::protocol::payload::stored_id(f.agent);
    let news_ms = state.heed.news_of(&agent_key);
    let mut answer = Answer {
        agent: state.agents.entry(agent_key).or_default(),
        world: &state.world,
        now_ms: ctx.now_ms,
        config: ctx.config,
        news_ms,
        tool: f.tool,
        input: f.input,
        status: f.status,
        error: f.error,
        // A script's calls are judged one by one only by the repeat rule (the proxy level).
        scripted: script::is_script_call(f.id),
        project_dir: ctx.project_dir,
    };
    detectors::AFTER_ANSWER
        .iter()
        .filter_map(|(_, after)| after(&mut answer))
        .collect()
}
