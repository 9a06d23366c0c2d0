//! Issue 9 end to end: progress is a state of the work never seen before. A file written again
//! with the content it already has is the same call with the same answer, however "successful";
//! a parallel batch where one call fails (and any siblings Claude Code cancels) is one failure,
//! never escalated.

use super::expect::*;
use super::fake_api::{bash, edit, write, Script, Turn};
use super::harness::{Install, Scenario};

#[test]
fn e2e_same_content_write_loop_is_stopped() {
    let Some(mut s) = Scenario::new("same-write") else {
        return;
    };
    s.install(Install::Script);
    let file = s.path("notes/status.md");
    let same = Turn::call(write(&file, "# Status\nstill investigating\n"));
    let mut turns = vec![same; 6];
    turns.push(Turn::text("Wrote the status."));
    let prompt = "Write the status note.";
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    assert_clean_exit(&run);

    // Four writes ran (the first created the file, three rewrote it unchanged); the fifth is
    // the same call with the same answer and no new state since: refused, and so is the sixth.
    for t in 0..4 {
        assert_ran(&run, &run.tool_result(&format!("toolu_e2e_{t}_0")));
    }
    for t in 4..6 {
        let reason = assert_denied(&run, &run.tool_result(&format!("toolu_e2e_{t}_0")), "Write");
        assert!(
            reason.contains("has returned the same answer 4 times in a row"),
            "{reason}"
        );
    }
    let denials = run.events_where(|e| e["detector"] == "repeat" && e["decision"] == "deny");
    assert_eq!(denials.len(), 2, "{}", run.summary());
    assert_event_shape(&run);
}

#[test]
fn e2e_parallel_batch_with_one_failure_is_one_failure_and_not_escalated() {
    let Some(mut s) = Scenario::new("one-failure-batch") else {
        return;
    };
    s.install(Install::Script);
    // One Edit Claude Code rejects (its text is not in the file: no tool hook fires, only the
    // batch shows it) among siblings that write. Transcripts of older CLIs show such siblings
    // cancelled ("Sibling tool call errored"); 2.1.330 ran them all in every batch we tried
    // (concurrent sleeps around a failing `ls`, sequential writes, this one), so the scenario
    // suite covers the cancelled delivery and this test whatever 2.1.330 does.
    let batch = Turn::Tools(vec![
        bash("touch one.txt && echo one"),
        edit(&s.path("README.md"), "text that is not there", "x"),
        bash("touch three.txt && echo three"),
        write(&s.path("four.txt"), "four\n"),
    ]);
    let turns = vec![
        batch.clone(),
        Turn::call(bash("mkdir -p no-such-dir && echo made")),
        Turn::text("Recovered."),
    ];
    let prompt = "Inspect the project.";
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    assert_clean_exit(&run);

    let failed = run.tool_result("toolu_e2e_0_1");
    assert!(failed.is_error, "{failed:?}");
    let siblings: Vec<_> = [0, 2, 3]
        .iter()
        .map(|n| run.tool_result(&format!("toolu_e2e_0_{n}")))
        .collect();
    let cancelled = siblings
        .iter()
        .filter(|r| r.content.contains("Sibling tool call errored") || r.content.contains("cancel"))
        .count();
    eprintln!("siblings cancelled by Claude Code: {cancelled} of 3");
    assert_ran(&run, &run.tool_result("toolu_e2e_1_0"));

    // Nothing escalated, nothing warned or denied: one failure, on record as one.
    let interventions = run.events_where(|e| e["decision"] != "allow");
    assert!(interventions.is_empty(), "{}", run.summary());
    let status = s.status_json();
    assert_eq!(status["totals"]["failures"], 1, "{status:#}");
    assert_eq!(status["totals"]["escalations"], 0, "{status:#}");
}

#[test]
fn e2e_shell_write_and_delete_loop_is_stopped() {
    let Some(mut s) = Scenario::new("shell-write-delete") else {
        return;
    };
    s.install(Install::Script);
    let (make, remove) = ("printf 'x' > cache.txt", "rm cache.txt");
    let mut turns = Vec::new();
    for _ in 0..6 {
        turns.push(Turn::call(bash(make)));
        turns.push(Turn::call(bash(remove)));
    }
    turns.push(Turn::text("Cache rebuilt."));
    let prompt = "Rebuild the cache file.";
    let run = s.run(
        prompt,
        Script::default().conversation("main", prompt, turns),
    );
    assert_clean_exit(&run);

    // Silent commands that change files answer with what they left behind (Claude Code's
    // bashEditDiff names the file), so writing the same file again and again is a repeat; going
    // back to a state already seen is no progress. The loop is refused by the 6th write.
    let results: Vec<_> = (0..12)
        .map_while(|t| run.find_tool_result(&format!("toolu_e2e_{t}_0")))
        .collect();
    let first = results
        .iter()
        .position(|r| r.content.contains("hook error"))
        .unwrap_or_else(|| panic!("never refused\n{}", run.summary()));
    assert!(
        first <= 10,
        "refused only at call {}\n{}",
        first + 1,
        run.summary()
    );
    let reason = assert_denied(&run, &results[first], "Bash");
    assert!(reason.contains("has returned the same answer"), "{reason}");
    // Observed with 2.1.330: the first write's bashEditDiff says it `created` the file, so no
    // file is the state the turn started from, and `rm` (reported in bashEditDiff too) goes back
    // to it: the work had exactly one new state, the file (issue 22: undone changes are not
    // progress).
    let status = s.status_json();
    assert_eq!(status["world"]["new_states"], 1, "{status:#}");
}
