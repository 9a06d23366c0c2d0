//! The ceiling nothing resets (issue 22). A denial does not bound what a loop costs: the model
//! answers it with workarounds, each a paid model turn, and an `ask` answered yes or a new prompt
//! starts the softer rules over. So refusals the agent walks into are loop evidence themselves
//! (issue 27: defiance, not misjudgments — a warning, a refusal it heeded, or one call refused
//! again while real time passes never counts; see `engine::defiance`):
//! - past [`TURN_BOUND`] refusals walked into in one turn (a refused call asked again, or
//!   another refused, with nothing changed since), the turn is
//!   ended through the strongest channel the CLI has, and every later call of it is refused;
//! - past [`SESSION_BOUND`] turns so ended, the session's next prompt is refused when nobody is
//!   attending, and the person is told where the session stands when someone is.
//!
//! Only the person's `loopgate reset` lowers the session's count; the bounds are not
//! configurable, so a project file the agent can write cannot raise them.

use crate::judge::state::{Ceiling, Heed};
use crate::protocol::dialect::{Caps, TurnEnd};
use crate::protocol::payload::Event;
use crate::protocol::verdict::{Action, Severity, Verdict};
use crate::util::canon::Digest16;

pub const NAME: &str = "ceiling";

/// Refused calls in one turn that end it.
pub const TURN_BOUND: u32 = 10;
/// Turns ended at the bound after which an unattended session's next prompt is refused.
pub const SESSION_BOUND: u32 = 3;

/// How a CLI ends a turn ([`TurnEnd`]): at the model turn's batch event (Claude Code's
/// PostToolBatch; Qwen's hook before the next model request), before a tool where
/// `continue: false` halts (Gemini), at the permission hook a call let through reaches (Copilot);
/// every later call is refused until then, and for good where nothing ends a run (Codex).
fn end_action(c: &Ceiling, at: &At) -> Option<Action> {
    match (at.event, at.caps.turn_end) {
        (Event::PostToolBatch, TurnEnd::Batch | TurnEnd::NextRequest) => Some(Action::Halt),
        (Event::PreToolUse, TurnEnd::BeforeTool) => Some(Action::Halt),
        (Event::PreToolUse, TurnEnd::Permission) if lets_through(c, at) => Some(Action::Halt),
        (Event::PreToolUse, _) => Some(Action::Deny),
        _ => None,
    }
}

/// Copilot: a call past the ceiling goes on to the permission hook, which ends the run, only
/// where that hook is known to fire for it: seen in this session, for a shell or write call (the
/// kinds it fires for, observed), one call at a time. A call the guard refused is never let
/// through: it must not run even if the hook has stopped firing.
fn lets_through(c: &Ceiling, at: &At) -> bool {
    c.permission.seen
        && c.permission.passed.is_none()
        && at.call.is_some()
        && matches!(at.tool, "Bash" | "Write" | "Edit")
        && !at.guarded
}

/// Where a tool event happened.
#[derive(Clone, Copy)]
pub struct At<'a> {
    pub turn: u32,
    pub event: Event,
    /// The main agent's event: only its batch ends the run; a subagent's calls are refused.
    pub main: bool,
    pub caps: Caps,
    pub now_ms: u64,
    pub session: &'a str,
    /// The tool, under Claude Code's name.
    pub tool: &'a str,
    /// The call's key (tool events).
    pub call: Option<Digest16>,
    /// The guard refused the call: it never runs, whatever the ceiling does.
    pub guarded: bool,
}

/// Judges one tool event after every other verdict: counts the `defied` refusals it adds (the
/// agent walked into a refusal, `engine::defiance`; `refused` is the deciding verdict), and once
/// the turn is over refuses and ends it, `heed` holding the evidence.
pub fn on_tool_event(
    c: &mut Ceiling,
    at: &At,
    refused: Option<&Verdict>,
    defied: u32,
    heed: &Heed,
) -> Option<Verdict> {
    let At {
        turn,
        event,
        main,
        now_ms,
        session,
        ..
    } = *at;
    c.follow(turn);
    if matches!(event, Event::PostToolUse | Event::PostToolUseFailure)
        && c.permission.passed.is_some()
        && c.permission.passed == at.call
    {
        // The call let through ran without a permission call: the hook no longer fires (unwired,
        // or a CLI that skips it), so no call is let through again in this session.
        c.permission = Default::default();
    }
    if c.ended {
        let action = end_action(c, at)?;
        if event == Event::PostToolBatch && !main {
            return None;
        }
        deliver(c, at, action);
        return Some(
            Verdict::new(NAME, action, Severity::Critical, over(c, session))
                .loop_warning()
                .with("refusals_in_turn", c.refusals),
        );
    }
    let latest = refused?;
    if defied == 0 {
        return None;
    }
    c.refusals += defied;
    if c.refusals < TURN_BOUND {
        return None;
    }
    c.ended = true;
    c.ended_turns += 1;
    c.last_ended_ms = now_ms;
    let action = match end_action(c, at) {
        Some(Action::Halt) if event == Event::PostToolBatch && !main => Action::Warn,
        Some(a) => a,
        // After a call ran: said now, refused from the next call, ended at the batch.
        None => Action::Warn,
    };
    deliver(c, at, action);
    let latest = latest
        .reason
        .trim_start_matches("LOOP_DETECTED (loopgate): ")
        .trim_start_matches("loopgate: ");
    let reason = format!(
        "loopgate: {} refused calls in this turn were made again regardless, with nothing \
         changed between ({}), so the turn ends here: refusals did not stop the loop. Stop \
         calling tools; tell the user what you tried and what blocks you. This session has \
         ended {} of {} turns this way{}. Latest: {latest}",
        c.refusals,
        evidence(heed),
        c.ended_turns,
        SESSION_BOUND,
        session_consequence(c, session),
    );
    Some(
        Verdict::new(
            NAME,
            action,
            Severity::Critical,
            crate::judge::redact::mask(&reason),
        )
        .loop_warning()
        .with("refusals_in_turn", c.refusals)
        .with("ended_turns", c.ended_turns),
    )
}

/// Notes a halt: the turn's end where the CLI ends it on this answer; on Copilot the call goes
/// on to the permission hook, which ends it ([`on_permission`]).
fn deliver(c: &mut Ceiling, at: &At, action: Action) {
    if action != Action::Halt {
        return;
    }
    if at.caps.turn_end == TurnEnd::Permission {
        c.permission.passed = at.call;
    } else {
        c.halted = true;
    }
}

fn session_consequence(c: &Ceiling, session: &str) -> String {
    if c.ended_turns >= SESSION_BOUND {
        format!(
            "; an unattended run's next prompt will be refused until the user runs \
             `loopgate reset --session {session}`"
        )
    } else {
        String::new()
    }
}

/// What the agent walked into, most repeated first: `Bash `pytest` (repeat) 8 times, …`.
pub fn evidence(heed: &Heed) -> String {
    let mut seen: Vec<(String, u32)> = Vec::new();
    for d in &heed.defied {
        let name = format!("{} ({})", d.what, d.detector);
        match seen.iter_mut().find(|(n, _)| *n == name) {
            Some((_, k)) => *k += 1,
            None => seen.push((name, 1)),
        }
    }
    seen.sort_by_key(|s| std::cmp::Reverse(s.1));
    let parts: Vec<String> = seen
        .iter()
        .take(3)
        .map(|(n, k)| format!("{n} {k} time{}", if *k == 1 { "" } else { "s" }))
        .collect();
    crate::judge::redact::mask(&parts.join(", "))
}

/// Every call after the turn's end, and its batch: short, the reason having been given.
fn over(c: &Ceiling, session: &str) -> String {
    format!(
        "loopgate: this turn is over: {} refused calls in it were made again regardless. Stop \
         calling tools; tell the user what you tried and what blocks you{}.",
        c.refusals,
        session_consequence(c, session)
    )
}

/// Copilot's permission hook, for a call PreToolUse let through (or any call, once a turn is
/// over): the hook is seen to fire, and a turn past the ceiling ends here, the call refused with
/// `interrupt` (`Halt`). Nothing else is said: the person's own permission rules go on.
pub fn on_permission(c: &mut Ceiling, turn: u32, session: &str) -> Option<Verdict> {
    c.follow(turn);
    c.permission.seen = true;
    c.permission.passed = None;
    if !c.ended {
        return None;
    }
    c.halted = true;
    let reason = format!(
        "loopgate ended this run: {} refused calls in this turn were made again regardless, \
         and refusals did not stop the loop. `loopgate status --session {session}` shows what was \
         refused{}.",
        c.refusals,
        session_consequence(c, session),
    );
    Some(
        Verdict::new(NAME, Action::Halt, Severity::Critical, reason)
            .loop_warning()
            .with("refusals_in_turn", c.refusals),
    )
}

/// At a new prompt: past the session bound, the prompt of a turn that tried and failed, sent
/// again (`refeed`) where the CLI says nobody attends, is refused (`Deny`, nothing is sent to
/// the model). New words, or words that may be a person's, go ahead with the person told
/// (`Warn`).
pub fn on_prompt(
    c: &Ceiling,
    attended: Option<bool>,
    refeed: bool,
    session: &str,
) -> Option<Verdict> {
    if c.ended_turns < SESSION_BOUND {
        return None;
    }
    // As the breaker: only where the CLI says nobody attends is the same prompt again a script's.
    let refused = refeed && attended == Some(false);
    let attended = if refused { attended } else { Some(true) };
    let reason = if refused {
        format!(
            "loopgate: {} turns of this session ended at the loop ceiling ({TURN_BOUND} refused \
             calls each), so this prompt was not sent to the model: another turn would loop \
             again at a cost. The way out: the user runs `loopgate reset --session {session}` \
             after looking at what blocks the work (`loopgate status --session {session}`).",
            c.ended_turns
        )
    } else {
        format!(
            "loopgate: {} turns of this session already ended at the loop ceiling ({TURN_BOUND} \
             refused calls each); this prompt goes ahead because it is new or you typed it. \
             `loopgate status --session {session}` shows what was refused; \
             `loopgate reset --session {session}` clears the count.",
            c.ended_turns
        )
    };
    Some(Verdict::on_prompt(NAME, attended, reason).with("ended_turns", c.ended_turns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::dialect::Agent;

    fn at(turn: u32, event: Event, agent: Agent) -> At<'static> {
        At {
            turn,
            event,
            main: true,
            caps: agent.caps(),
            now_ms: 0,
            session: "s",
            tool: "Bash",
            call: Some(Digest16::of(b"cat config/settings.yml")),
            guarded: false,
        }
    }

    fn refused() -> Verdict {
        Verdict::new(
            "repeat",
            Action::Deny,
            Severity::Low,
            "loopgate: same.".into(),
        )
    }

    #[test]
    fn the_turn_ends_at_the_bound_and_only_a_new_turn_counts_again() {
        let h = Heed::default();
        let claude = Agent::Claude;
        let mut c = Ceiling::default();
        let r = refused();
        for _ in 1..TURN_BOUND {
            let v = on_tool_event(&mut c, &at(1, Event::PreToolUse, claude), Some(&r), 1, &h);
            assert!(v.is_none());
        }
        let v = on_tool_event(&mut c, &at(1, Event::PreToolUse, claude), Some(&r), 1, &h).unwrap();
        assert_eq!(v.action, Action::Deny);
        // A call that would have been allowed is refused now, and the batch ends the run once.
        let v = on_tool_event(&mut c, &at(1, Event::PreToolUse, claude), None, 0, &h).unwrap();
        assert_eq!(v.action, Action::Deny);
        let b = on_tool_event(&mut c, &at(1, Event::PostToolBatch, claude), None, 0, &h);
        assert_eq!(b.unwrap().action, Action::Halt);
        assert_eq!(c.ended_turns, 1);
        assert!(on_tool_event(&mut c, &at(2, Event::PreToolUse, claude), None, 0, &h).is_none());
        assert_eq!(c.refusals, 0);
        assert_eq!(
            c.ended_turns, 1,
            "a new turn never lowers the session's count"
        );
    }

    #[test]
    fn gemini_halts_before_the_tool_and_codex_refuses_every_call() {
        let h = Heed::default();
        let r = refused();
        for (agent, want) in [(Agent::Gemini, Action::Halt), (Agent::Codex, Action::Deny)] {
            let mut c = Ceiling {
                refusals: TURN_BOUND - 1,
                ..Ceiling::default()
            };
            let v = on_tool_event(&mut c, &at(0, Event::PreToolUse, agent), Some(&r), 1, &h);
            assert_eq!(v.unwrap().action, want, "{agent:?}");
        }
    }

    #[test]
    fn qwen_refuses_the_call_and_ends_the_turn_before_the_next_model_request() {
        let h = Heed::default();
        let qwen = Agent::Qwen;
        let mut c = Ceiling {
            refusals: TURN_BOUND - 1,
            ..Ceiling::default()
        };
        let v = on_tool_event(
            &mut c,
            &at(0, Event::PreToolUse, qwen),
            Some(&refused()),
            1,
            &h,
        );
        assert_eq!(v.unwrap().action, Action::Deny);
        let b = on_tool_event(&mut c, &at(0, Event::PostToolBatch, qwen), None, 0, &h);
        assert_eq!(b.unwrap().action, Action::Halt);
        // Where nothing ends a run, the batch says nothing and the calls stay refused.
        let mut c = Ceiling {
            refusals: TURN_BOUND,
            ended: true,
            ..Ceiling::default()
        };
        let codex = Agent::Codex;
        assert!(on_tool_event(&mut c, &at(0, Event::PostToolBatch, codex), None, 0, &h).is_none());
        let v = on_tool_event(&mut c, &at(0, Event::PreToolUse, codex), None, 0, &h);
        assert_eq!(v.unwrap().action, Action::Deny);
    }

    #[test]
    fn copilot_lets_a_shell_call_through_to_the_permission_hook_which_ends_the_run() {
        let h = Heed::default();
        let copilot = Agent::Copilot;
        let past = || Ceiling {
            refusals: TURN_BOUND - 1,
            ..Ceiling::default()
        };
        // Before the permission hook was seen firing, nothing is let through: an install made
        // before it was wired keeps refusing.
        let mut c = past();
        let v = on_tool_event(
            &mut c,
            &at(0, Event::PreToolUse, copilot),
            Some(&refused()),
            1,
            &h,
        );
        assert_eq!(v.unwrap().action, Action::Deny);
        assert!(c.permission.passed.is_none());

        // Seen: the call that reaches the ceiling goes on to the permission hook, which refuses
        // it with `interrupt` and the run ends.
        let mut c = past();
        assert!(on_permission(&mut c, 0, "s").is_none(), "below the ceiling");
        assert!(c.permission.seen);
        let v = on_tool_event(
            &mut c,
            &at(0, Event::PreToolUse, copilot),
            Some(&refused()),
            1,
            &h,
        );
        assert_eq!(v.unwrap().action, Action::Halt);
        assert!(c.permission.passed.is_some() && !c.halted);
        // A second call meanwhile is refused: one call at a time is let through.
        let v = on_tool_event(&mut c, &at(0, Event::PreToolUse, copilot), None, 0, &h);
        assert_eq!(v.unwrap().action, Action::Deny);
        let v = on_permission(&mut c, 0, "s").unwrap();
        assert_eq!(v.action, Action::Halt);
        assert!(c.halted && c.permission.passed.is_none());

        // A read (no permission asked for it) and a call the guard refused are never let
        // through.
        let mut c = past();
        c.permission.seen = true;
        let mut read = at(0, Event::PreToolUse, copilot);
        read.tool = "Read";
        let v = on_tool_event(&mut c, &read, Some(&refused()), 1, &h);
        assert_eq!(v.unwrap().action, Action::Deny);
        let mut guarded = at(0, Event::PreToolUse, copilot);
        guarded.guarded = true;
        let v = on_tool_event(&mut c, &guarded, None, 0, &h);
        assert_eq!(v.unwrap().action, Action::Deny);
    }

    #[test]
    fn a_call_let_through_that_ran_without_the_permission_hook_stops_the_letting_through() {
        let h = Heed::default();
        let copilot = Agent::Copilot;
        let mut c = Ceiling {
            refusals: TURN_BOUND,
            ended: true,
            ..Ceiling::default()
        };
        c.permission.seen = true;
        let v = on_tool_event(&mut c, &at(0, Event::PreToolUse, copilot), None, 0, &h);
        assert_eq!(v.unwrap().action, Action::Halt);
        // Its result comes with no permission call before it: the hook is gone.
        on_tool_event(&mut c, &at(0, Event::PostToolUse, copilot), None, 0, &h);
        assert!(!c.permission.seen);
        let v = on_tool_event(&mut c, &at(0, Event::PreToolUse, copilot), None, 0, &h);
        assert_eq!(v.unwrap().action, Action::Deny, "refused again from now on");
    }

    #[test]
    fn past_the_session_bound_only_a_refed_prompt_is_refused_unless_a_person_is_known_to_attend() {
        let c = Ceiling {
            ended_turns: SESSION_BOUND,
            ..Ceiling::default()
        };
        assert_eq!(
            on_prompt(&c, Some(false), true, "s").unwrap().action,
            Action::Deny
        );
        assert_eq!(
            on_prompt(&c, Some(true), true, "s").unwrap().action,
            Action::Warn
        );
        assert_eq!(
            on_prompt(&c, None, true, "s").unwrap().action,
            Action::Warn,
            "a CLI that never says who attends: the same words may be a person's, told"
        );
        for attended in [None, Some(false), Some(true)] {
            assert_eq!(
                on_prompt(&c, attended, false, "s").unwrap().action,
                Action::Warn,
                "new words always go ahead, told"
            );
        }
        let below = Ceiling {
            ended_turns: SESSION_BOUND - 1,
            ..Ceiling::default()
        };
        assert!(on_prompt(&below, Some(false), true, "s").is_none());
    }
}
