//! `loopgate reset`: clears loop state so a denied call may run again; config and log stay.

use crate::store::Store;
use anyhow::{bail, Result};
use std::time::Duration;

pub fn run(
    store: &Store,
    session: Option<&str>,
    all: bool,
    lock_timeout: Duration,
    as_json: bool,
) -> Result<()> {
    let stems: Vec<String> = if all {
        store.sessions().into_iter().map(|(stem, _)| stem).collect()
    } else {
        let Some(id) = session else {
            bail!("name a session with --session ID, or use --all");
        };
        let stem = Store::stem(id);
        if !store.sessions().iter().any(|(s, _)| *s == stem) {
            bail!("no state for session {id:?} in {}", store.dir().display());
        }
        vec![stem]
    };
    let mut done = 0;
    for stem in &stems {
        let lock = store.lock_stem(stem, lock_timeout)?;
        if let (Some(mut state), _) = store.load(&lock)? {
            state.reset_loops();
            store.save(&lock, &state)?;
            done += 1;
        }
    }
    if as_json {
        println!("{}", serde_json::json!({"reset": done}));
    } else {
        println!(
            "loopgate: reset {done} session{}",
            if done == 1 { "" } else { "s" }
        );
    }
    Ok(())
}
