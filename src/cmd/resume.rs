//! `loopgate continue`: the person continues a session loopgate halted, from outside it (the
//! CLIs without `/loopgate`); what loopgate knows of the session is kept, unlike `reset`.

use crate::store::resume::{continue_stem, Continued};
use crate::store::Store;
use anyhow::Result;
use std::time::Duration;

pub fn run(store: &Store, session: Option<&str>, timeout: Duration, as_json: bool) -> Result<()> {
    let (stem, state) = super::halted::pick(store, session)?;
    let now = crate::platform::clock::now_ms();
    let (done, problem) = continue_stem(store, &stem, now, timeout)?;
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
            serde_json::json!({"session": state.session, "continued": code.is_some(), "reason_code": code})
        );
    } else {
        match code {
            Some(c) => println!(
                "loopgate: session {} continues after its halt ({c}); what loopgate knows of it is kept",
                state.session
            ),
            None => println!(
                "loopgate: session {} is not halted: nothing to continue",
                state.session
            ),
        }
    }
    Ok(())
}
