//! Issue 39, point 4: another Stop hook that always blocks keeps a Codex or Gemini turn going
//! forever (`../shared/agents/codex/hooks-observed.md`: 576 Stop calls in 60 s, no cap of its
//! own). With loopgate beside it, the real CLI ends the turn after loopgate's bound
//! (`STOP_LOOP_BOUND`, 5 blocks in a row with nothing done between): loopgate's `continue:
//! false` wins over the other hook's block. What was observed: `docs/stop-hook-loops.md`.

use super::clis::Cli;
use super::harness::Scenario;
use super::script::{script, text};

/// Blocks of the other hook loopgate lets pass before it ends the turn (`src/judge/halt.rs`).
const BOUND: usize = 5;

/// The other hook's endless block ended after loopgate's bound, on `cli` whose turn-end event is
/// `event`; `first`: the other hook comes before loopgate's in the settings.
fn ends_another_hooks_endless_block(cli: Cli, event: &str, first: bool) {
    let Some(mut s) = Scenario::new(cli, "stop-hook-loop") else {
        return;
    };
    s.install(false);
    let other = r#"cat > /dev/null; echo '{"decision":"block","reason":"OTHER-HOOK: keep going"}'"#;
    if first {
        s.add_other_hook_first(event, other);
    } else {
        s.add_other_hook(event, other);
    }
    let run = s.run("Say done.", &script(vec![text("Done.")], "Done again."));
    assert!(
        !run.timed_out && run.code() == Some(0),
        "the run should end by itself\n{}",
        run.summary()
    );
    let requests = run.main_requests().len();
    let ended = run.events_where(|e| {
        e["detector"] == "stop_hook_loop" && e["decision"] == "block" && e["event"] == "Stop"
    });
    assert_eq!(
        ended.len(),
        1,
        "loopgate ended the turn once\n{}",
        run.summary()
    );
    assert_eq!(ended[0]["evidence"]["halt"], "stop_hook_loop");
    // One request per Stop: the first answer, then one per block loopgate let pass.
    assert_eq!(requests, BOUND + 1, "{}", run.summary());
}

/// Both ways: loopgate's own Stop hook alone never ends a turn that is simply over, and a
/// single block by the other hook followed by the turn's end is left alone.
fn leaves_a_single_block_alone(cli: Cli, event: &str) {
    let Some(mut s) = Scenario::new(cli, "stop-hook-once") else {
        return;
    };
    s.install(false);
    let marker = s.scratch.join("blocked-once");
    s.add_other_hook(
        event,
        &format!(
            r#"cat > /dev/null; if [ -e '{m}' ]; then exit 0; fi; touch '{m}'; echo '{{"decision":"block","reason":"OTHER-HOOK: check once more"}}'"#,
            m = marker.display()
        ),
    );
    let run = s.run(
        "Say done.",
        &script(vec![text("Done."), text("Checked.")], "Done again."),
    );
    assert!(!run.timed_out && run.code() == Some(0), "{}", run.summary());
    assert_eq!(run.main_requests().len(), 2, "{}", run.summary());
    assert!(
        run.events_where(|e| e["detector"] == "stop_hook_loop")
            .is_empty(),
        "{}",
        run.summary()
    );
}

#[test]
fn e2e_codex_another_stop_hook_that_always_blocks_is_ended() {
    ends_another_hooks_endless_block(Cli::Codex, "Stop", false);
}

/// The order of the hooks in `hooks.json` does not change which answer wins.
#[test]
fn e2e_codex_another_stop_hook_listed_first_is_ended_too() {
    ends_another_hooks_endless_block(Cli::Codex, "Stop", true);
}

#[test]
fn e2e_codex_a_stop_hook_that_blocks_once_is_left_alone() {
    leaves_a_single_block_alone(Cli::Codex, "Stop");
}

/// Gemini CLI has no cap of its own on AfterAgent blocks either (17 model requests in 2 s, then
/// it cycles AfterAgent without the model: `../shared/agents/gemini/hooks-observed.md`); it runs
/// the two hooks at once, and loopgate's `continue: false` wins over the other's block.
#[test]
fn e2e_gemini_another_stop_hook_that_always_blocks_is_ended() {
    ends_another_hooks_endless_block(Cli::Gemini, "AfterAgent", false);
}

#[test]
fn e2e_gemini_a_stop_hook_that_blocks_once_is_left_alone() {
    leaves_a_single_block_alone(Cli::Gemini, "AfterAgent");
}
