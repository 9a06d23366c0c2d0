//! `loopgate replay <transcript.jsonl | dir>...`: every would-fire decision per session, then a
//! summary by detector.

use crate::config::Config;
use crate::replay::{collect, file_label, replay_text, tally, SessionReport};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

pub fn run(paths: &[PathBuf], config: &Config, as_json: bool, blocks_only: bool) -> Result<()> {
    let files = collect(paths).context("cannot list the transcripts")?;
    let bar = if files.len() > 1 {
        ProgressBar::new(files.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("replaying {bar:30} {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut reports = Vec::new();
    for f in &files {
        bar.set_message(file_label(f));
        let text =
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        reports.push(replay_text(&text, &file_label(f), config));
        bar.inc(1);
    }
    bar.finish_and_clear();
    if as_json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
        return Ok(());
    }
    for r in &reports {
        print_session(r, blocks_only);
    }
    print_summary(&reports);
    Ok(())
}

fn print_session(r: &SessionReport, blocks_only: bool) {
    let shown: Vec<_> = r
        .fired
        .iter()
        .filter(|f| !blocks_only || f.is_block())
        .collect();
    if shown.is_empty() {
        return;
    }
    let blocks = r.fired.iter().filter(|f| f.is_block()).count();
    println!(
        "== {} ({} calls): {} warnings, {} would-be blocks",
        r.file,
        r.calls,
        r.fired.len() - blocks,
        blocks
    );
    for f in shown {
        let call = f.call.map(|c| c.to_string()).unwrap_or_else(|| "-".into());
        let agent = if f.agent == crate::state::MAIN_AGENT {
            ""
        } else {
            " (subagent)"
        };
        println!(
            "  call {call:>5}  {:<12} {:<20} {:<6} {}{agent}",
            crate::payload::clip(&f.tool, 12),
            f.detector,
            f.decision,
            crate::payload::clip(&f.reason, 110)
        );
    }
}

fn print_summary(reports: &[SessionReport]) {
    let calls: usize = reports.iter().map(|r| r.calls).sum();
    let all: Vec<_> = reports.iter().flat_map(|r| &r.fired).collect();
    let blocks = all.iter().filter(|f| f.is_block()).count();
    println!();
    println!(
        "sessions {}  calls {}  warnings {}  would-be blocks {}",
        reports.len(),
        calls,
        all.len() - blocks,
        blocks
    );
    println!(
        "{:<22} {:>9} {:>15}",
        "detector", "warnings", "would-be blocks"
    );
    for (d, (w, b)) in tally(reports) {
        println!("{d:<22} {w:>9} {b:>15}");
    }
}
