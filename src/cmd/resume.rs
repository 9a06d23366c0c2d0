//! `loopgate continue`: the person continues a session loopgate halted, from outside it (the
//! CLIs without `/loopgate`); what loopgate knows of the session is kept, unlike `reset`.

use crate::store::resume::{continue_stem, Continued};
use crate::store::Store;
use anyhow::Result;
use std::time::Duration;

pub fn run(
    store: &Store,
    session: Option<&str>,
    timeout: Duration,
    as_json: bool,
    raise: Option<f64>,
) -> Result<()> {
    if let Some(n) = raise.filter(|n| !n.is_finite() || *n <= 0.0) {
        anyhow::bail!(
            "--budget {n}: give the dollars to add to the session's loop budget, more than 0"
        );
    }
    let (stem, state) = super::halted::pick(store, session)?;
    let now = crate::platform::clock::now_ms();
    let (done, problem) = continue_stem(store, &stem, now, timeout, raise)?;
    if let Some(p) = problem {
        crate::hook::say(&p);
    }
    let code = match &done {
        Continued::Halt(h) => Some(h.code.clone()),
        Continued::Nothing => None,
    };
    if as_json {
        println!(
            "{}",
            serde_json::json!({"session": state.session, "continued": code.is_some(), "reason_code": code, "budget_raised_usd": raise})
        );
    } else {
        match code {
            Some(c) => println!(
                "loopgate: session {} continues after its halt ({c}); what loopgate knows of it is kept",
                state.session
            ),
            None if raise.is_none() => println!(
                "loopgate: session {} is not halted: nothing to continue",
                state.session
            ),
            None => {}
        }
        if let Some(n) = raise {
            println!(
                "loopgate: session {}'s loop budget is ${n:.2} higher",
                state.session
            );
        }
    }
    Ok(())
}
