//! The README's commands work as written from a fresh clone: every command line in its `sh`
//! blocks parses as the CLI (or install.sh, or cargo) takes it, every file it names exists, and
//! every relative link points at a file in the repository.

use clap::Parser;
use loopgate::cli::Cli;
use std::path::Path;

const README: &str = include_str!("../README.md");
/// Where every setting is shown, with its default.
const CONFIG_DOC: &str = include_str!("../docs/configuration.md");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README's ```sh lines, comments and blank lines dropped.
fn commands() -> Vec<String> {
    sh_lines(README)
}

/// Words as `sh` splits them, for the plain quoting the README uses.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, ' ') => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

fn cargo_targets(kind: &str) -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let mut names = Vec::new();
    let mut in_kind = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_kind = line == format!("[[{kind}]]");
        } else if in_kind {
            if let Some(name) = line.strip_prefix("name = ") {
                names.push(name.trim_matches('"').to_string());
            }
        }
    }
    names
}

#[test]
fn every_readme_command_works_as_written() {
    let install = std::fs::read_to_string(root().join("install.sh")).unwrap();
    let commands = commands();
    assert!(commands.len() > 15, "{commands:?}");
    // `a && b` is two commands, each checked.
    let commands: Vec<&str> = commands.iter().flat_map(|l| l.split(" && ")).collect();
    for line in &commands {
        let w = words(line);
        let mut args: Vec<&str> = w.iter().map(String::as_str).collect();
        if args.first() == Some(&"sudo") {
            args.remove(0);
        }
        // `LOOPGATE_X=1 loopgate …`: a variable for that one command.
        while args.first().is_some_and(|a| {
            a.split_once('=')
                .is_some_and(|(k, _)| k.starts_with("LOOPGATE_"))
        }) {
            args.remove(0);
        }
        match args.as_slice() {
            ["loopgate", ..] => {
                let cli = Cli::try_parse_from(&args)
                    .unwrap_or_else(|e| panic!("README: `{line}` does not parse:\n{e}"));
                cli.check_options()
                    .unwrap_or_else(|e| panic!("README: `{line}`: {e}"));
            }
            ["./install.sh", flags @ ..] => {
                let mut flags = flags.iter();
                while let Some(flag) = flags.next() {
                    assert!(
                        install.contains(&format!("        {flag})")),
                        "README: install.sh has no {flag}"
                    );
                    if *flag == "--agent" {
                        let list = flags.next().expect("README: --agent without its CLIs");
                        for name in list.split(',') {
                            let accepted = install.contains(&format!(" {name} |"))
                                || install.contains(&format!("| {name})"));
                            assert!(
                                loopgate::protocol::dialect::Agent::parse(name).is_some()
                                    && accepted,
                                "README: install.sh --agent does not take {name}"
                            );
                        }
                    }
                }
            }
            ["cargo", "test"] | ["cargo", "test", "--lib"] | ["git", "pull"] => {}
            // The npm package another part of the release publishes: the name only.
            ["npm", "i", "-g", "loopgate"] => {}
            ["cargo", "test", "--test", name, ..] => {
                assert!(cargo_targets("test").contains(&name.to_string()), "{line}");
            }
            ["cargo", "bench", "--bench", name] => {
                assert!(cargo_targets("bench").contains(&name.to_string()), "{line}");
            }
            ["otelcol-contrib", "--config", file] => {
                assert!(root().join(file).is_file(), "README: {file} is missing");
            }
            _ => panic!("README: a command this test does not know how to check: `{line}`"),
        }
    }
}

#[test]
fn relative_links_point_at_files() {
    let mut rest = README;
    let mut seen = 0;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find(')').unwrap();
        let target = &rest[..end];
        if !target.starts_with('#') && !target.contains("://") {
            assert!(
                root().join(target).exists(),
                "README links to missing {target}"
            );
            seen += 1;
        }
    }
    assert!(seen >= 2);
}

#[test]
fn the_words_of_a_line_are_split_like_sh() {
    assert_eq!(
        words("loopgate explain 'npm test' --json"),
        ["loopgate", "explain", "npm test", "--json"]
    );
}

#[test]
fn the_readme_config_is_valid_and_the_configuration_doc_complete() {
    for doc in [README, CONFIG_DOC] {
        let start = doc.find("```toml\n").expect("a toml block") + 8;
        let text = &doc[start..start + doc[start..].find("```").unwrap()];
        config_is_valid(text, doc == CONFIG_DOC);
    }
}

/// `text` loads without a problem; `complete`: it shows every setting.
fn config_is_valid(text: &str, complete: bool) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let loaded = loopgate::config::sources::load(&loopgate::config::Sources {
        flag_file: Some(&file),
        provenance: true,
        ..Default::default()
    });
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let shown: toml::Table = text.parse().unwrap();
    if !complete {
        return;
    }
    for (key, _) in loopgate::config::leaves(&loopgate::config::sources::schema()) {
        if key.ends_with("_tools") {
            continue;
        }
        assert!(
            loopgate::config::sources::get(&shown, &key).is_some(),
            "the README's config lacks {key}"
        );
    }
}

/// Every ```text block of the README and docs/ is either output the binary prints today, named by
/// the `<!-- sample: loopgate ARGS -->` line before it and checked line for line by running it
/// offline (a fresh HOME, state dir and config, in the repository), or marked
/// `<!-- sample unchecked: why -->`. The unchecked ones are counted here, so that one more is a
/// decision, not drift.
#[test]
fn every_sample_output_is_what_the_binary_prints() {
    const UNCHECKED: usize = 1; // docs/install.md: what the person types at Claude Code's prompt
    let mut docs = vec![("README.md".to_string(), README.to_string())];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "md") {
            let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
            docs.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    let (mut checked, mut unchecked) = (0, 0);
    for (name, text) in &docs {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if *line != "```text" {
                continue;
            }
            let marker = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .copied()
                .unwrap_or_default();
            let block: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| !l.starts_with("```"))
                .copied()
                .collect();
            if marker.starts_with("<!-- sample unchecked: ") {
                unchecked += 1;
                continue;
            }
            let command = marker
                .strip_prefix("<!-- sample: ")
                .and_then(|m| m.strip_suffix(" -->"))
                .unwrap_or_else(|| {
                    panic!(
                        "{name}:{}: a text block with neither `<!-- sample: loopgate ARGS -->` \
                         nor `<!-- sample unchecked: why -->` before it",
                        i + 1
                    )
                });
            let printed = run_offline(command);
            let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
            for want in block.iter().map(|l| l.trim_end()).filter(|l| !l.is_empty()) {
                assert!(
                    printed.contains(&want),
                    "{name}:{}: `{command}` no longer prints\n{want}\nit prints:\n{}",
                    i + 1,
                    printed.join("\n")
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "README's demo and loop cost samples");
    assert_eq!(unchecked, UNCHECKED, "samples marked unchecked");
}

/// `command` (`loopgate ARGS`) run in the repository with nothing of this machine's.
fn run_offline(command: &str) -> String {
    let w = words(command);
    assert_eq!(w.first().map(String::as_str), Some("loopgate"), "{command}");
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loopgate"))
        .args(&w[1..])
        .current_dir(root())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("xdg"))
        .env("LOOPGATE_STATE_DIR", home.path().join("state"))
        .output()
        .unwrap();
    assert!(out.status.success(), "`{command}` failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A heading said twice in one document (a page's title repeated as its first section) reads
/// as a copy gone wrong and makes two anchors of one name.
#[test]
fn no_document_repeats_a_heading() {
    let mut docs = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "md") {
            docs.push(path);
        }
    }
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        let mut seen = std::collections::HashSet::new();
        let mut fenced = false;
        for line in text.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            if fenced || !line.starts_with('#') {
                continue;
            }
            let title = line.trim_start_matches('#').trim();
            assert!(
                seen.insert(title.to_string()),
                "{}: `{title}` twice",
                doc.display()
            );
        }
    }
}

/// The `loopgate` command lines of docs/*.md and CONTRIBUTING.md parse as written; those that
/// only read (and need nothing of this machine's) run, offline, on a fresh HOME and succeed.
#[test]
fn every_loopgate_command_in_the_docs_parses_and_the_read_only_ones_run() {
    const READ_ONLY: &[&str] = &[
        "demo",
        "status",
        "report",
        "config",
        "completions",
        "man",
        "gc",
    ];
    let mut docs = vec![root().join("CONTRIBUTING.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "md") {
            docs.push(path);
        }
    }
    let (mut parsed, mut ran) = (0, 0);
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for line in sh_lines(&text) {
            for command in line.split(" && ") {
                let w = words(command);
                let mut args: Vec<&str> = w.iter().map(String::as_str).collect();
                while args
                    .first()
                    .is_some_and(|a| *a == "sudo" || a.split_once('=').is_some())
                {
                    args.remove(0);
                }
                match args.first() {
                    Some(first) if *first == "loopgate" || first.ends_with("/loopgate") => {}
                    _ => continue,
                }
                args[0] = "loopgate";
                let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| {
                    panic!("{}: `{command}` does not parse:\n{e}", doc.display())
                });
                cli.check_options()
                    .unwrap_or_else(|e| panic!("{}: `{command}`: {e}", doc.display()));
                parsed += 1;
                let read_only = args.get(1).is_some_and(|sub| READ_ONLY.contains(sub))
                    && (args[1] != "gc" || args.contains(&"--dry-run"));
                if read_only {
                    run_offline(&args.join(" "));
                    ran += 1;
                }
            }
        }
    }
    assert!(parsed >= 20 && ran >= 10, "parsed {parsed}, ran {ran}");
}

/// Lines of the ```sh blocks of `text`, comments and blank lines dropped.
fn sh_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("```") {
            inside = line == "```sh";
            continue;
        }
        let code = match line.find(" #") {
            Some(i) => &line[..i],
            None => line,
        };
        let code = code.trim();
        if inside && !code.is_empty() && !code.starts_with('#') {
            out.push(code.to_string());
        }
    }
    out
}
