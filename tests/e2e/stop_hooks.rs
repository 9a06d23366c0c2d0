//! Issue 39, point 4, with the real Claude Code: another Stop hook that always blocks keeps the
//! model answering (Claude Code itself ends it only after 9 blocks); loopgate ends the turn after
//! 5 such blocks with nothing done between, its `continue: false` winning over the other hook's
//! block. What was observed: `docs/stop-hook-loops.md`.

use super::fake_api::{Script, Turn};
use super::harness::{Install, Scenario};

const PROMPT: &str = "Say done.";

/// The other hook's endless block is ended; `first`: it is listed before loopgate's.
fn ends_another_hooks_endless_block(first: bool) {
    let Some(mut s) = Scenario::new("stop-hook-loop") else {
        return;
    };
    s.install(Install::Script);
    let other = r#"cat > /dev/null; echo '{"decision":"block","reason":"OTHER-HOOK: keep going"}'"#;
    if first {
        s.add_other_hook_first("Stop", other);
    } else {
        s.add_other_hook("Stop", other);
    }
    let script = Script::default().conversation("main", PROMPT, vec![Turn::text("Done.")]);
    let run = s.run(PROMPT, script);
    assert!(!run.timed_out, "{}", run.summary());
    let ended = run.events_where(|e| e["detector"] == "stop_hook_loop" && e["event"] == "Stop");
    assert_eq!(ended.len(), 1, "{}", run.summary());
    assert_eq!(ended[0]["evidence"]["halt"], "stop_hook_loop");
    // The first answer, then one per block loopgate let pass; Claude Code's own cap is 9.
    assert_eq!(run.requests_of("main").len(), 6, "{}", run.summary());
}

#[test]
fn e2e_another_stop_hook_that_always_blocks_is_ended() {
    ends_another_hooks_endless_block(false);
}

/// The order of the Stop hooks in the settings does not change which answer wins.
#[test]
fn e2e_another_stop_hook_listed_first_is_ended_too() {
    ends_another_hooks_endless_block(true);
}
