//! The person's escape hatch (issue 27): calls the user config exempts are never judged by the
//! loop rules; a project file cannot exempt anything; `explain` names the exemption that would
//! have let a refused call through.

use crate::common::Env;

const MISSING: &str = "Exit code 1\ncat: config/settings.yml: No such file or directory";

#[test]
fn an_exempted_command_is_never_refused_and_its_twin_still_is() {
    let env = Env::new().config("[exempt]\ncommands = [\"cat config/*\"]\n");
    for n in 0..6 {
        let out = env.bash("cat config/settings.yml", Err(MISSING));
        assert!(!out.denied(), "call {} refused: {}", n + 1, out.stdout);
    }
    // A command the pattern does not cover is judged as ever.
    let env = Env::new().config("[exempt]\ncommands = [\"cat config/*\"]\n");
    let other = "cat settings.yml";
    let err = "Exit code 1\ncat: settings.yml: No such file or directory";
    env.bash(other, Err(err));
    env.bash(other, Err(err));
    assert!(env.bash(other, Err(err)).denied());
}

#[test]
fn an_exempted_tool_is_never_refused() {
    let env = Env::new().config("[exempt]\ntools = [\"Bash\"]\n");
    for _ in 0..6 {
        assert!(!env.bash("cat config/settings.yml", Err(MISSING)).denied());
    }
}

#[test]
fn a_project_file_cannot_exempt_a_call() {
    let env = Env::new().project_config("[exempt]\ncommands = [\"*\"]\n");
    env.bash("cat config/settings.yml", Err(MISSING));
    env.bash("cat config/settings.yml", Err(MISSING));
    assert!(env.bash("cat config/settings.yml", Err(MISSING)).denied());
}

#[test]
fn explain_names_the_exemption_that_would_have_let_the_refused_call_through() {
    let env = Env::new();
    env.bash("cat config/settings.yml", Err(MISSING));
    env.bash("cat config/settings.yml", Err(MISSING));
    assert!(env.bash("cat config/settings.yml", Err(MISSING)).denied());
    let out = env.run(&["explain"], b"");
    assert!(
        out.stdout
            .contains("[exempt]\n    commands = [\"cat config/settings.yml\"]"),
        "{}",
        out.stdout
    );
    // And that exemption, put in the user file, lets the same call through.
    let env = env.config("[exempt]\ncommands = [\"cat config/settings.yml\"]\n");
    assert!(!env.bash("cat config/settings.yml", Err(MISSING)).denied());
    // The exempted call logged nothing: the last decision is still the refusal, and its JSON
    // names the same line.
    let json = env.run(&["explain", "--json"], b"").json();
    assert_eq!(
        json["exemption"], "commands = [\"cat config/settings.yml\"]",
        "{json:#}"
    );
}
