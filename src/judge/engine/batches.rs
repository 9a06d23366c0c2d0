//! PostToolBatch: a model turn's calls listed once, the ones no tool hook finished recorded, and
//! the batch judged as a whole.

use super::calls::{finish, Finished};
use super::Ctx;
use crate::judge::detectors::{self, Batch, Gates};
use crate::judge::ledger::Status;
use crate::judge::outcome::{self, Interruption};
use crate::judge::state::SessionState;
use crate::protocol::payload::{Payload, MAIN_AGENT};
use crate::protocol::tool::ToolClass;
use crate::protocol::verdict::Verdict;

/// PostToolBatch lists every call of the model turn once. Calls no tool hook finished were
/// denied by a hook, cancelled, refused, or rejected by Claude Code before they ran (an Edit whose
/// `old_string` is missing): only the last are failures.
pub(super) fn post_tool_batch(state: &mut SessionState, p: &Payload, ctx: &Ctx) -> Vec<Verdict> {
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
