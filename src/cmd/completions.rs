//! `loopgate completions <shell>` and `loopgate man`: generated from the clap definition, so they
//! never drift from the real options.

use crate::cli::Cli;
use anyhow::Result;
use clap::CommandFactory;
use std::io::Write;

pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    // Generated into memory first: clap_complete panics on a write error, such as a reader that
    // closed the pipe (`loopgate completions bash | head`), where a write error ends quietly.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "loopgate", &mut buf);
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(())
}

pub fn man() -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(&man_page()?)?;
    out.flush()?;
    Ok(())
}

/// One page for the whole tool: clap_mangen's sections, with every subcommand's own help in a
/// COMMANDS section instead of references to `loopgate-<command>(1)` pages nobody installs.
pub fn man_page() -> Result<Vec<u8>> {
    let mut cmd = Cli::command();
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    writeln!(buf, ".SH COMMANDS")?;
    for sub in cmd.get_subcommands_mut() {
        let name = sub.get_name().to_string();
        if name == "help" {
            continue;
        }
        writeln!(buf, ".SS \"loopgate {name}\"")?;
        writeln!(buf, ".nf")?;
        for line in sub.render_help().to_string().lines() {
            let line = line.replace('\\', "\\e");
            let line = if line.starts_with(['.', '\'']) {
                format!("\\&{line}")
            } else {
                line
            };
            writeln!(buf, "{line}")?;
        }
        writeln!(buf, ".fi")?;
    }
    man.render_extra_section(&mut buf)?;
    man.render_version_section(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_and_man_page_generate() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "loopgate", &mut buf);
            let text = String::from_utf8(buf).unwrap();
            assert!(
                text.contains("doctor") && text.contains("pre-tool-use"),
                "{shell}"
            );
        }
        let text = String::from_utf8(man_page().unwrap()).unwrap();
        assert!(!text.contains("loopgate\\-status(1)"), "{text}");
        assert!(text.contains(".SS \"loopgate status\""), "{text}");
        assert!(
            text.starts_with(".ie") || text.contains(".TH loopgate"),
            "{text}"
        );
        assert!(text.contains("Examples:"));
    }
}
