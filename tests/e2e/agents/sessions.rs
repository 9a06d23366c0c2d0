//! Issue 36, "Proof with the real CLIs": what a person does in one session, per CLI. Each prompt
//! is one headless run, and every run after the first continues the session the way the CLI
//! offers headless (`Scenario::run_next`: `codex exec resume <id>`, `gemini --resume latest`,
//! `qwen --continue`, `copilot --continue`). Assertions are what a user would notice: every
//! prompt reached the model, nothing was refused, the change landed, the command really ran.
//!
//! (a) questions, then a new task; (b) a new instruction after three failed turns (and the same
//! prompt typed again, which goes ahead too: these CLIs never say nobody attends); (c) a long command run the CLI's background
//! way and polled until it finishes, then run again.

use super::clis::Cli;
use super::harness::{Run, Scenario};
use super::script::{call, read, script, shell, text, write};
use serde_json::{json, Value};

/// A command that fails the same way every time and changes nothing; each run leaves a line in
/// `{{SCRATCH}}/attempts`.
const FAILING: &str = "echo tried >> {{SCRATCH}}/attempts; cat config/settings.yml";

/// An event of loopgate refusing something: a call denied, a Stop or prompt blocked, a run ended.
fn refusal(e: &Value) -> bool {
    e["enforced"] == true
        && matches!(
            e["decision"].as_str(),
            Some("deny" | "block" | "ask" | "halt")
        )
}

fn assert_ended_by_itself(run: &Run) {
    assert!(
        !run.timed_out && run.code() == Some(0),
        "the run should end by itself with exit 0\n{}",
        run.summary()
    );
}

/// The prompt reached the model: a request of this run carries its text.
fn assert_reached(run: &Run, prompt: &str) {
    assert!(
        run.model_saw(prompt),
        "the prompt {prompt:?} never reached the model\n{}",
        run.summary()
    );
}

/// Nothing in this run was refused and nothing of loopgate's reached the model.
fn assert_untouched(run: &Run) {
    let refused: Vec<&Value> = run.own_events().iter().filter(|e| refusal(e)).collect();
    assert!(
        refused.is_empty(),
        "refused: {refused:?}\n{}",
        run.summary()
    );
    assert!(!run.model_heard_from_loopgate(), "{}", run.summary());
}

/// (a) Three questions that need no change (one read, one `git status`), each its own prompt of
/// one session, then a task that writes a file: every prompt reaches the model, nothing is
/// refused, and the file is written.
fn questions_then_a_task(cli: Cli) {
    let Some(mut s) = Scenario::new(cli, "questions-then-task") else {
        return;
    };
    s.install(false);
    let questions = [
        "Question one: what is this project?",
        "Question two: what does the README say about size?",
        "Question three: is anything uncommitted?",
    ];
    let scripts = [
        script(
            vec![call(read(cli, "README.md")), text("A tiny demo project.")],
            "That is all.",
        ),
        script(vec![text("It says the project is tiny.")], "That is all."),
        script(
            vec![
                call(shell(cli, "git status --short")),
                text("Nothing is uncommitted."),
            ],
            "That is all.",
        ),
    ];
    for (n, (q, sc)) in questions.iter().zip(&scripts).enumerate() {
        let run = if n == 0 {
            s.run(q, sc)
        } else {
            s.run_next(q, sc)
        };
        assert_ended_by_itself(&run);
        assert_reached(&run, q);
        if n > 0 {
            assert!(
                run.model_saw(questions[0]),
                "run {} did not continue the session (no earlier prompt in its history)\n{}",
                n + 1,
                run.summary()
            );
        }
        assert_untouched(&run);
        if n == 0 {
            assert!(
                run.new_tool_outputs()
                    .iter()
                    .any(|o| o.contains("A tiny project.")),
                "the read ran\n{}",
                run.summary()
            );
        }
    }
    let task = "Now add a CHANGELOG.md that says the first release is out.";
    let run = s.run_next(
        task,
        &script(
            vec![
                call(write(
                    cli,
                    "CHANGELOG.md",
                    "# Changelog\n\nThe first release is out.\n",
                )),
                text("CHANGELOG.md is written."),
            ],
            "Done.",
        ),
    );
    assert_ended_by_itself(&run);
    assert_reached(&run, task);
    assert!(run.model_saw(questions[0]), "{}", run.summary());
    assert_untouched(&run);
    let written = std::fs::read_to_string(s.project.join("CHANGELOG.md")).unwrap_or_default();
    assert!(
        written.contains("The first release is out."),
        "the task's file change landed: {written:?}\n{}",
        run.summary()
    );
}

/// One failed turn: the same failing command 4 times (loopgate denies by the 3rd, the 4th walks
/// into the refusal), then an answer; nothing changes. 4 is below Gemini's and Qwen's own
/// consecutive-call guards.
fn failed_turn(cli: Cli) -> Value {
    let mut turns = vec![call(shell(cli, FAILING)); 4];
    turns.push(text("I could not fix the settings file."));
    script(turns, "The settings file does not exist.")
}

/// Three failed turns of one session (prompts 1–3; `same` makes them one prompt typed three
/// times), each stepped in on by loopgate with nothing changed. Returns the scenario, ready for
/// the 4th prompt.
fn three_failed_turns(cli: Cli, name: &str, prompts: [&str; 3]) -> Option<Scenario> {
    let mut s = Scenario::new(cli, name)?;
    s.install(false);
    for (n, prompt) in prompts.iter().enumerate() {
        let run = if n == 0 {
            s.run(prompt, &failed_turn(cli))
        } else {
            s.run_next(prompt, &failed_turn(cli))
        };
        assert_ended_by_itself(&run);
        assert_reached(&run, prompt);
        assert!(
            run.own_events()
                .iter()
                .any(|e| e["decision"] == "deny" && e["enforced"] == true),
            "failed turn {} was not stepped in on\n{}",
            n + 1,
            run.summary()
        );
    }
    Some(s)
}

/// (b) Three turns that failed, then the person types a new, different instruction: it reaches
/// the model and its tool calls run (a file is written and read back). Before issue 36 the
/// breaker opened after the third failed turn and refused any next prompt of a session nobody
/// was known to attend (none of these CLIs says), so this fails there.
fn new_instruction_after_failed_turns(cli: Cli) {
    let Some(s) = three_failed_turns(
        cli,
        "new-instruction",
        [
            "Turn one: fix the settings file.",
            "Turn two: fix the settings file, please.",
            "Turn three: the settings file still needs fixing.",
        ],
    ) else {
        return;
    };
    let before = s.scratch_lines("attempts");
    let instruction = "Forget the settings. Write a NOTES.md that says hello.";
    let run = s.run_next(
        instruction,
        &script(
            vec![
                call(write(cli, "NOTES.md", "hello\n")),
                call(shell(cli, "echo ran >> {{SCRATCH}}/new; cat NOTES.md")),
                text("NOTES.md says hello."),
            ],
            "Done.",
        ),
    );
    assert_reached(&run, instruction);
    assert_ended_by_itself(&run);
    let outputs = run.new_tool_outputs();
    assert_eq!(
        outputs.len(),
        2,
        "the new instruction's two calls\n{}",
        run.summary()
    );
    assert!(
        outputs
            .iter()
            .all(|o| !o.contains("loopgate:") && !o.contains("(loopgate)")),
        "a call of the new instruction was refused\n{}",
        run.summary()
    );
    assert_eq!(
        std::fs::read_to_string(s.project.join("NOTES.md"))
            .unwrap_or_default()
            .trim(),
        "hello",
        "the new instruction's change landed\n{}",
        run.summary()
    );
    assert_eq!(s.scratch_lines("new"), 1, "{}", run.summary());
    assert_eq!(
        s.scratch_lines("attempts"),
        before,
        "the old failing command was not run again"
    );
}

/// The other side of (b): the same prompt, typed three times and failed three times, typed a 4th
/// time. None of these CLIs says whether a person attends, and a person typing the same words
/// again is not refused (issue 36; only Claude Code's headless runs, which say nobody attends,
/// have it refused: `e2e::sessions::e2e_the_same_prompt_fed_again_after_three_failed_turns_is_refused`):
/// it reaches the model, and loopgate tells the person where the session stands (the breaker's
/// `warn` at the prompt).
fn same_prompt_again_goes_ahead(cli: Cli) {
    let prompt = "Fix the settings file.";
    let Some(s) = three_failed_turns(cli, "same-prompt-again", [prompt; 3]) else {
        return;
    };
    let run = s.run_next(prompt, &failed_turn(cli));
    assert!(!run.timed_out, "{}", run.summary());
    assert_reached(&run, prompt);
    assert!(
        run.own_events().iter().any(|e| e["detector"] == "breaker"
            && e["event"] == "UserPromptSubmit"
            && e["decision"] == "warn"),
        "the person is told where the session stands\n{}",
        run.summary()
    );
}

/// The long command: a few seconds of steps, then `build done` and a line in
/// `{{SCRATCH}}/long-runs` once it ran to its end. The steps are spelled out: Gemini refuses
/// `$(seq …)` ("Command injection detected: command substitution syntax"). `'build' 'done'` is
/// quoted apart so that only the output says `build done`, not the command echoed back.
fn long_command(secs: u32) -> String {
    let steps: Vec<String> = (1..=secs).map(|i| i.to_string()).collect();
    format!(
        "for i in {}; do echo step $i; sleep 1; done; echo 'build' 'done'; \
         echo run >> {{{{SCRATCH}}}}/long-runs",
        steps.join(" ")
    )
}

/// A polling turn: `fake_llm.py` plays it again until the conversation shows `done` for the
/// `n`-th time (the n-th run finished), at most `max` times.
fn poll_until(poll: Value, done: &str, n: u32, max: u32) -> Value {
    let mut turn = call(poll);
    turn["until"] = json!({"match": done, "count": n, "max": max});
    turn
}

/// The CLI's way to start a long command and poll it until it finishes, as model turns: the
/// start, then the poll, played until its output says the command finished. `n` numbers the run.
fn start_and_poll(cli: Cli, n: u32) -> Vec<Value> {
    match cli {
        // `exec_command` answers "Process running with session ID N" after `yield_time_ms`;
        // `write_stdin` with no chars polls it, each empty poll waiting at least 5 s (observed),
        // returning early when the process exits ("Process exited with code 0").
        Cli::Codex => {
            let poll = json!({"name": "write_stdin", "args": {
                "session_id": {"$capture": r"session ID (\d+)", "type": "int"},
                "chars": "", "yield_time_ms": 1500}});
            vec![
                call(json!({"name": "exec_command",
                            "args": {"cmd": long_command(12), "yield_time_ms": 500}})),
                poll_until(poll, "Process exited with code 0", n, 6),
            ]
        }
        // `is_background` answers "Command moved to background (PID: N)";
        // `read_background_output` shows its log after `delay_ms`. At most 4 polls: Gemini stops
        // a 5th identical call itself.
        Cli::Gemini => {
            let poll = json!({"name": "read_background_output", "args": {
                "pid": {"$capture": r"\(PID: (\d+)\)", "type": "int"}, "delay_ms": 2000}});
            vec![
                call(json!({"name": "run_shell_command", "args": {
                    "command": long_command(6), "description": "long build",
                    "is_background": true}})),
                poll_until(poll, "build done", n, 4),
            ]
        }
        // `is_background` answers with the task's output and status files ("Read the status
        // file (status: running|completed|failed|cancelled)"); Qwen has no poll tool of its own
        // (its `monitor` streams events), so the polls read the status file, 2 s apart (the
        // fake model takes its time). At most 4: Qwen stops a 5th identical call itself.
        Cli::Qwen => {
            let poll = json!({"name": "read_file", "args": {
                "file_path": {"$capture": r"status file: ([^\s\\]+?\.status)"}}});
            let mut poll = poll_until(poll, r"status\W+completed", n, 4);
            poll["delay_s"] = json!(2);
            vec![
                call(json!({"name": "run_shell_command", "args": {
                    "command": long_command(6), "description": "long build",
                    "is_background": true}})),
                poll,
            ]
        }
        // `bash` in async mode with a shell id the model picks; `read_bash` waits `delay`
        // seconds and reads it ("<shellId: … completed with exit code 0>" once it ended).
        Cli::Copilot => {
            let id = format!("build{n}");
            let poll = json!({"name": "read_bash", "args": {"shellId": id, "delay": 2}});
            vec![
                call(json!({"name": "bash", "args": {
                    "command": long_command(6), "description": "long build",
                    "mode": "async", "shellId": id}})),
                poll_until(poll, "completed with exit code 0", n, 6),
            ]
        }
        Cli::OpenCode | Cli::Kilo => unreachable!("not in issue 36"),
    }
}

/// (c) A long command started the CLI's background way and polled until it finishes, then run
/// and polled again: nothing is refused, and the command really ran to its end both times.
fn long_command_polled(cli: Cli) {
    let Some(mut s) = Scenario::new(cli, "long-command") else {
        return;
    };
    s.install(false);
    let mut turns = start_and_poll(cli, 1);
    turns.extend(start_and_poll(cli, 2));
    turns.push(text("The build finished, twice."));
    let prompt = "Run the long build and tell me when it is done; then run it once more.";
    let run = s.run(prompt, &script(turns, "Done."));
    assert_ended_by_itself(&run);
    assert_untouched(&run);
    let outputs = run.tool_outputs();
    let starts = 2;
    assert!(
        outputs.len() >= starts + 2 * 2,
        "two starts, each polled at least twice\n{}",
        run.summary()
    );
    assert_eq!(
        s.scratch_lines("long-runs"),
        2,
        "the long command ran to its end twice\n{}",
        run.summary()
    );
    if cli == Cli::Codex {
        let running = outputs
            .iter()
            .filter(|o| o.contains("Process running with session ID"))
            .count();
        let exited = outputs
            .iter()
            .filter(|o| o.contains("Process exited with code 0"))
            .count();
        assert!(
            running >= 4 && exited == 2,
            "polled while running, then saw it exit, twice\n{}",
            run.summary()
        );
    }
}

macro_rules! per_cli {
    ($scenario:ident: $($cli:ident => $test:ident),+ $(,)?) => {
        $(
            #[test]
            fn $test() {
                $scenario(Cli::$cli);
            }
        )+
    };
}

per_cli!(questions_then_a_task:
    Codex => e2e_codex_questions_then_a_new_task,
    Gemini => e2e_gemini_questions_then_a_new_task,
    Qwen => e2e_qwen_questions_then_a_new_task,
    Copilot => e2e_copilot_questions_then_a_new_task,
);

per_cli!(new_instruction_after_failed_turns:
    Codex => e2e_codex_new_instruction_after_three_failed_turns,
    Gemini => e2e_gemini_new_instruction_after_three_failed_turns,
    Qwen => e2e_qwen_new_instruction_after_three_failed_turns,
    Copilot => e2e_copilot_new_instruction_after_three_failed_turns,
);

per_cli!(same_prompt_again_goes_ahead:
    Codex => e2e_codex_same_prompt_typed_again_after_three_failed_turns_goes_ahead,
    Gemini => e2e_gemini_same_prompt_typed_again_after_three_failed_turns_goes_ahead,
    Qwen => e2e_qwen_same_prompt_typed_again_after_three_failed_turns_goes_ahead,
    Copilot => e2e_copilot_same_prompt_typed_again_after_three_failed_turns_goes_ahead,
);

per_cli!(long_command_polled:
    Codex => e2e_codex_long_command_polled_until_it_finishes,
    Gemini => e2e_gemini_long_command_polled_until_it_finishes,
    Qwen => e2e_qwen_long_command_polled_until_it_finishes,
    Copilot => e2e_copilot_long_command_polled_until_it_finishes,
);
