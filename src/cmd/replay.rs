//! `loopgate replay <session file | dir>...`: every would-fire decision per session, then a
//! summary by detector. Reads Claude Code transcripts, Codex rollouts, Gemini CLI and Qwen Code
//! chats, Copilot CLI session events and OpenCode exports, each told from its content.
//! Directories are searched recursively (`~/.claude/projects` works); each subagent's file is
//! replayed with its session; a file that is none of these is named on stderr, one line each.

use crate::config::Config;
use crate::replay::format::inspect;
use crate::replay::{collect, plan, replay_session, tally, Cli, SessionReport};
use crate::util::words::count;
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// A file's text; bytes that are not UTF-8 are replaced, so a binary file reads as "not a
/// transcript" rather than stopping the run.
fn read(path: &Path) -> Result<String, String> {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| format!("cannot read: {e}"))
}

pub fn run(paths: &[PathBuf], config: &Config, as_json: bool, blocks_only: bool) -> Result<()> {
    for p in paths {
        if std::fs::symlink_metadata(p).is_err() {
            anyhow::bail!("{}: no such file or directory", p.display());
        }
    }
    let found = collect(paths).context("cannot list the transcripts")?;
    let plan = plan(found, |p| read(p).map(|t| inspect(&t)));
    let bar = if plan.groups.len() > 1 {
        ProgressBar::new(plan.groups.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("replaying {bar:30} {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut reports = Vec::new();
    let mut skipped = plan.skipped;
    for g in &plan.groups {
        bar.set_message(g.label().to_string());
        let main = match &g.main {
            Some(f) => match read(&f.path) {
                Ok(t) => t,
                Err(why) => {
                    skipped.push((f.label.clone(), why));
                    continue;
                }
            },
            None => String::new(),
        };
        let mut subs = Vec::new();
        let mut sub_labels = Vec::new();
        for f in &g.subagents {
            match read(&f.path) {
                Ok(t) => {
                    subs.push(t);
                    sub_labels.push(f.label.clone());
                }
                Err(why) => skipped.push((f.label.clone(), why)),
            }
        }
        let sub_refs: Vec<&str> = subs.iter().map(String::as_str).collect();
        let mut r = replay_session(g.cli, &main, &sub_refs, g.label(), config);
        if g.main.is_some() {
            r.subagent_files = sub_labels;
        } else {
            // Subagent transcripts without their session: the first names the report.
            r.subagent_files = sub_labels.into_iter().skip(1).collect();
        }
        reports.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    for (file, why) in &skipped {
        eprintln!("loopgate replay: skipped {file}: {why}");
    }
    if reports.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!(
            "no transcripts found in {} (Claude Code keeps them as .jsonl files under ~/.claude/projects; Codex under ~/.codex/sessions, Gemini CLI under ~/.gemini/tmp, Qwen Code under ~/.qwen/projects, Copilot CLI under ~/.copilot/session-state; OpenCode's come from `opencode export`)",
            shown.join(", ")
        );
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
        return Ok(());
    }
    for r in &reports {
        if r.skipped_lines > 0 {
            eprintln!(
                "loopgate replay: {}: {} left out (not a record this CLI writes)",
                r.file,
                count(r.skipped_lines as u64, "unreadable line")
            );
        }
        print_session(r, blocks_only);
        print_budget(r, blocks_only);
    }
    print_summary(&reports, skipped.len());
    print_budget_summary(&reports, config);
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
    let with = if r.subagent_files.is_empty() {
        String::new()
    } else {
        format!(
            " + {}",
            count(r.subagent_files.len() as u64, "subagent transcript")
        )
    };
    println!(
        "== {} ({}){with} ({}, {} in subagents): {}, {}",
        r.file,
        r.cli.name(),
        count(r.calls as u64, "call"),
        r.subagent_calls,
        count((r.fired.len() - blocks) as u64, "warning"),
        count(blocks as u64, "would-be block")
    );
    for f in shown {
        let call = match (f.call, f.call_last) {
            (Some(a), Some(b)) if b != a => format!("{a}-{b}"),
            (Some(a), _) => a.to_string(),
            (None, _) => "-".into(),
        };
        // A Stop is judged after the turn's last call; a batch names the calls it closes.
        let at = if f.is_turn_end() {
            "after"
        } else if f.call_last.is_some_and(|l| Some(l) != f.call) {
            "calls"
        } else {
            "call"
        };
        let mut notes = String::new();
        if f.agent != crate::protocol::payload::MAIN_AGENT {
            notes.push_str(" (subagent)");
        }
        if f.continuation {
            notes.push_str(" (the Stop after a block, stop_hook_active)");
        }
        let tool = if f.is_turn_end() { f.event } else { &f.tool };
        let call = format!("{call:>5}");
        println!(
            "  {at:<5} {call:<9} {:<12} {:<20} {:<6} {}{notes}",
            crate::protocol::payload::clip(tool, 12),
            f.detector,
            f.decision,
            // Whole: a clipped reason hides what the agent would have been told.
            f.reason
        );
    }
    for line in crate::replay::cost::describe(&r.loops, "  cost: ") {
        println!("{line}");
    }
}

/// What the loop budget would have done in one session, when its loops cost anything (with
/// `--blocks-only`, only a pause).
fn print_budget(r: &SessionReport, blocks_only: bool) {
    let b = &r.budget;
    if b.would_pause == 0 && (blocks_only || (b.loop_usd <= 0.0 && b.would_warn == 0)) {
        return;
    }
    println!(
        "{}: loop budget: ${:.2} ({} tokens, from the {}) in {}{}{}",
        r.file,
        b.loop_usd,
        b.loop_tokens,
        b.source,
        count(u64::from(b.loops), "loop"),
        if b.would_warn > 0 { ", would warn" } else { "" },
        if b.would_pause > 0 {
            ", WOULD PAUSE"
        } else {
            ""
        }
    );
}

/// The budget over every session replayed.
fn print_budget_summary(reports: &[SessionReport], config: &Config) {
    let b = &config.budget;
    if !b.enabled {
        println!("loop budget: off");
        return;
    }
    let usd: f64 = reports.iter().map(|r| r.budget.loop_usd).sum();
    let with = |f: fn(&SessionReport) -> bool| reports.iter().filter(|r| f(r)).count() as u64;
    println!(
        "loop budget (${:.2} a session, warned at {:.0}%): ${usd:.2} spent in loops (an estimate); {} would warn, {} would pause",
        b.session_usd,
        b.warn_at * 100.0,
        count(with(|r| r.budget.would_warn > 0), "session"),
        count(with(|r| r.budget.would_pause > 0), "session"),
    );
}

fn print_summary(reports: &[SessionReport], skipped: usize) {
    let calls: usize = reports.iter().map(|r| r.calls).sum();
    let sub_calls: usize = reports.iter().map(|r| r.subagent_calls).sum();
    let stops: usize = reports.iter().map(|r| r.stops).sum();
    let all: Vec<_> = reports.iter().flat_map(|r| &r.fired).collect();
    let blocks = all.iter().filter(|f| f.is_block()).count();
    println!();
    println!(
        "sessions {}  calls {} ({} in subagents)  turn ends judged {}  warnings {}  would-be blocks {}  files skipped {}",
        reports.len(),
        calls,
        sub_calls,
        stops,
        all.len() - blocks,
        blocks,
        skipped
    );
    if reports.iter().any(|r| r.cli != Cli::Claude) {
        println!("{}", by_cli(reports));
    }
    println!(
        "{:<22} {:>9} {:>15}",
        "detector", "warnings", "would-be blocks"
    );
    for (d, (w, b)) in tally(reports) {
        println!("{d:<22} {w:>9} {b:>15}");
    }
    let loops: Vec<_> = reports.iter().flat_map(|r| r.loops.clone()).collect();
    println!(
        "\n{}\n  (each loop from its first repeat to its last decision; main transcripts only)",
        crate::replay::cost::total(&loops)
    );
}

/// Sessions, calls and would-be blocks per CLI, in the order of [`Cli`].
fn by_cli(reports: &[SessionReport]) -> String {
    let mut parts = Vec::new();
    for cli in Cli::ALL {
        let mine: Vec<_> = reports.iter().filter(|r| r.cli == cli).collect();
        if mine.is_empty() {
            continue;
        }
        let calls: usize = mine.iter().map(|r| r.calls).sum();
        let blocks = mine
            .iter()
            .flat_map(|r| &r.fired)
            .filter(|f| f.is_block())
            .count();
        parts.push(format!(
            "{} {}, {}, {}",
            cli.name(),
            count(mine.len() as u64, "session"),
            count(calls as u64, "call"),
            count(blocks as u64, "would-be block")
        ));
    }
    format!("by CLI: {}", parts.join("; "))
}
