//! `loopgate completions <shell>` and `loopgate man`: generated from the clap definition, so they
//! never drift from the real options.

use crate::cli::Cli;
use anyhow::Result;
use clap::CommandFactory;
use std::io::Write;

pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut Cli::command(), "loopgate", &mut out);
    out.flush()?;
    Ok(())
}

pub fn man() -> Result<()> {
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    out.flush()?;
    Ok(())
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
        let mut buf = Vec::new();
        clap_mangen::Man::new(Cli::command())
            .render(&mut buf)
            .unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH loopgate"),
            "{text}"
        );
        assert!(text.contains("Examples:"));
    }
}
