//! `loopgate setup`: wires the hooks into a Claude Code settings file (install.sh calls this),
//! or with `--agent <cli>` into another agent CLI's hook file; removes them, or restores the file
//! from one of its backups.

use crate::protocol::dialect::Agent;
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use std::path::{Path, PathBuf};

pub struct Options<'a> {
    /// The agent CLI whose hook file is edited.
    pub agent: Agent,
    pub settings: Option<&'a Path>,
    pub bin: Option<&'a Path>,
    pub observe: bool,
    pub uninstall: bool,
    /// `Some(None)`: restore the newest backup; `Some(Some(path))`: that backup.
    pub restore: Option<Option<&'a Path>>,
    /// Only print the binaries the hook file's loopgate hooks call.
    pub show_bin: bool,
    pub json: bool,
    /// `Some(dir)`: install into Claude Code's managed-settings drop-in under `dir` instead of a
    /// settings file (`setup --managed [--managed-dir DIR]`).
    pub managed: Option<PathBuf>,
    /// Where the hooks keep their state: a change the person allowed to this settings file is
    /// forgotten there when setup wires it again (see `defence::sanction`).
    pub state_dir: Option<PathBuf>,
    /// `setup --managed --install-dir DIR`: where the hooks' binary is copied
    /// [default: `platform::system_install_dir`].
    pub install_dir: Option<&'a Path>,
}

pub fn run(o: &Options) -> Result<()> {
    if let Some(dir) = &o.managed {
        return managed(o, dir);
    }
    let user_file = crate::config::paths::agent_hook_file(o.agent);
    let settings: PathBuf = match o.settings {
        Some(p) => p.to_path_buf(),
        None => user_file
            .clone()
            .with_context(|| crate::config::paths::NO_HOME.to_string())?,
    };
    if o.show_bin {
        let programs = if o.agent.is_plugin() {
            crate::setup::plugin::programs_in(&settings)?
        } else {
            crate::setup::hooked_programs_in(&settings)?
        };
        for program in programs {
            println!("{program}");
        }
        return Ok(());
    }
    let codex_config = crate::setup::agents::codex_config_file();
    // What an uninstall takes out of the hook file, kept for `--restore` (see `setup::leftovers`).
    let wired_before = (o.uninstall && !o.agent.is_plugin())
        .then(|| std::fs::read_to_string(&settings).ok())
        .flatten()
        .filter(|_| {
            crate::setup::read_json(&settings).is_ok_and(|v| crate::setup::has_loopgate_hooks(&v))
        });
    let outcome = if o.agent.is_plugin() {
        if o.restore.is_some() {
            bail!(
                "--restore edits a hook file; {} has loopgate's plugin instead, which `setup --agent {}` rewrites",
                o.agent.title(),
                o.agent.name()
            );
        }
        let bin = match o.bin {
            Some(b) => resolve_bin(b)?,
            None => std::env::current_exe().context("cannot find this executable's path")?,
        };
        crate::setup::plugin::run(o.agent, &settings, &bin, o.observe, o.uninstall)?
    } else if let Some(backup) = o.restore {
        crate::setup::agents::Outcome {
            summary: crate::setup::agents::restore(
                o.agent,
                &settings,
                backup,
                o.state_dir
                    .as_deref()
                    .and_then(|dir| crate::setup::leftovers::saved_for_restore(dir, &settings))
                    .as_deref(),
                codex_config.as_deref(),
            )?,
            notes: Vec::new(),
        }
    } else {
        let bin = match o.bin {
            Some(b) => resolve_bin(b)?,
            None => std::env::current_exe().context("cannot find this executable's path")?,
        };
        let prefix = crate::setup::agents::command_prefix(&bin, o.observe, o.agent)?;
        crate::setup::agents::run(
            o.agent,
            &settings,
            &prefix,
            o.uninstall,
            user_file.as_deref(),
            codex_config.as_deref(),
        )?
    };
    let mut summary = outcome.summary.clone();
    let mut notes = outcome.notes.clone();
    if o.agent == Agent::Claude {
        let had = crate::setup::slash_command_path(&settings).is_some_and(|p| p.is_file());
        notes.extend(slash_command(o, &settings));
        let has = crate::setup::slash_command_path(&settings).is_some_and(|p| p.is_file());
        if has && !had {
            summary = put_back_slash_command(&summary, &settings);
        }
    }
    if o.observe && !o.uninstall && o.restore.is_none() {
        summary.push_str(&format!(
            "; observe mode: loopgate logs what it would deny in {} and denies nothing \
             (`loopgate setup{}` without --observe enforces)",
            o.agent.title(),
            if o.agent == Agent::Claude {
                String::new()
            } else {
                format!(" --agent {}", o.agent.name())
            }
        ));
    }
    if o.uninstall {
        summary.push_str(&leave_nothing(
            o,
            &settings,
            codex_config.as_deref(),
            wired_before,
        ));
    }
    if o.json {
        let backups: Vec<String> = crate::setup::backups(&settings)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let mut doc = serde_json::json!({
            "settings": settings.display().to_string(),
            "summary": summary,
            "backups": backups,
        });
        if o.agent != Agent::Claude {
            doc["agent"] = o.agent.name().into();
        }
        if o.agent != Agent::Claude || !notes.is_empty() {
            doc["notes"] = notes.clone().into();
        }
        println!("{doc}");
    } else {
        println!("{summary}");
        for note in &notes {
            println!("note: {note}");
        }
    }
    Ok(())
}

/// A setup that found the hooks in place but `/loopgate` gone says it put it back, rather than
/// "already up to date".
fn put_back_slash_command(summary: &str, settings: &Path) -> String {
    if !summary.contains("already up to date") {
        return summary.to_owned();
    }
    format!(
        "{}; put back {}, the /loopgate command, which was missing",
        summary.replace("already up to date", "were up to date"),
        crate::setup::slash_command_path(settings)
            .unwrap_or_default()
            .display()
    )
}

/// After an uninstall: nothing of loopgate's left beside the CLI's files (backups, markers, the
/// folders setup made), what it took out kept in the state dir for `--restore`. Returns what to
/// add to the summary.
fn leave_nothing(
    o: &Options,
    settings: &Path,
    codex_config: Option<&Path>,
    wired_before: Option<String>,
) -> String {
    // config.toml first: the folder setup made holds both.
    if o.agent == Agent::Codex {
        if let Some(config) = codex_config {
            crate::setup::leftovers::clear(config);
        }
    }
    crate::setup::leftovers::clear(settings);
    match (wired_before, &o.state_dir) {
        (Some(text), Some(dir)) => {
            // The exact command: a restore without `--agent` puts back Claude Code's file only.
            let agent = match o.agent {
                Agent::Claude => String::new(),
                other => other
                    .to_possible_value()
                    .map(|v| format!(" --agent {}", v.get_name()))
                    .unwrap_or_default(),
            };
            match crate::setup::leftovers::save_for_restore(dir, settings, &text) {
                Ok(kept) => format!(
                    "; `loopgate setup --restore{agent}` puts them back (from {}, in loopgate's \
                     state dir, which stays)",
                    kept.display()
                ),
                Err(e) => format!("; {e:#}, so `--restore` cannot put them back"),
            }
        }
        _ => String::new(),
    }
}

/// `/loopgate`, the person's command to keep a change loopgate undid, follows the hooks in and
/// out (a restore included); what the person should know about a session running meanwhile.
fn slash_command(o: &Options, settings: &Path) -> Vec<String> {
    let now = crate::setup::read_json(settings).ok();
    let wired = !o.uninstall && now.as_ref().is_some_and(crate::setup::has_loopgate_hooks);
    if let Some(dir) = &o.state_dir {
        // ConfigChange judges the status line like a handler while loopgate's is installed.
        let ours = now
            .as_ref()
            .and_then(|v| v.get("statusLine"))
            .is_some_and(crate::setup::is_our_status_line);
        crate::defence::wiring::note_status_line(dir, wired && ours);
    }
    if !wired {
        crate::setup::remove_slash_command(settings);
        if !o.uninstall || !session_running(o.state_dir.as_deref()) {
            return Vec::new();
        }
        // Nothing written outside a session can be told from the agent's write (see
        // `defence::sanction`), so a running session undoes this like any other unwiring.
        return vec![
            "a Claude Code session running now puts loopgate back and shows an id: type \
             /loopgate allow <id> there to keep this uninstall, or run this again once no session runs"
                .into(),
        ];
    }
    if let Some(dir) = &o.state_dir {
        if o.restore.is_none() {
            crate::defence::sanction::forget(dir, settings);
        }
    }
    match crate::setup::write_slash_command(settings) {
        Ok(_) => Vec::new(),
        Err(e) => vec![format!(
            "cannot write /loopgate beside {} ({e:#}): a change loopgate undoes cannot be kept \
             from a session",
            settings.display()
        )],
    }
}

/// Whether a Claude Code session may be running: this command runs inside one (`CLAUDECODE`),
/// or a session's state changed in the last hour. No hook marks a session's end, so a session
/// idle for longer goes untold.
fn session_running(state_dir: Option<&Path>) -> bool {
    const RECENT: std::time::Duration = std::time::Duration::from_secs(3600);
    if std::env::var_os("CLAUDECODE").is_some_and(|v| v == "1") {
        return true;
    }
    let Some(entries) = state_dir.and_then(|d| std::fs::read_dir(d.join("sessions")).ok()) else {
        return false;
    };
    entries.filter_map(|e| e.ok()).any(|e| {
        e.metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < RECENT)
    })
}

/// `setup --managed`: the hooks in Claude Code's managed settings, running a binary only root
/// can replace. Without root's rights it refuses before touching anything and names the command
/// that has them.
fn managed(o: &Options, dir: &Path) -> Result<()> {
    if o.agent != Agent::Claude {
        bail!(
            "--managed is Claude Code's managed settings; it does not apply to --agent {}",
            o.agent.name()
        );
    }
    if crate::platform::is_system_owner() == Some(false) {
        bail!(
            "setup --managed writes where only root may (the managed settings and the hooks' binary): run `{}`",
            as_root_command()
        );
    }
    if o.uninstall {
        let called = crate::setup::hooked_programs_in(
            &dir.join("managed-settings.d")
                .join(crate::setup::MANAGED_FILE),
        )
        .unwrap_or_default();
        println!("{}", crate::setup::run_managed(dir, "", true)?);
        let ours = o
            .install_dir
            .map(Path::to_path_buf)
            .unwrap_or_else(crate::platform::system_install_dir)
            .join(crate::setup::system_bin_name());
        if called.iter().any(|p| Path::new(p) == ours) && std::fs::remove_file(&ours).is_ok() {
            println!("removed {}", ours.display());
            if let Some(parent) = ours.parent() {
                let _ = std::fs::remove_dir(parent); // only when empty
            }
        }
        return Ok(());
    }
    let src = match o.bin {
        Some(b) => resolve_bin(b)?,
        None => std::env::current_exe().context("cannot find this executable's path")?,
    };
    let bin = crate::setup::install_system_copy(&src, o.install_dir).map_err(|e| {
        if is_permission_denied(&e) {
            // Windows: no rights to ask about beforehand; a refused write says it.
            anyhow::anyhow!(
                "{e:#}: setup --managed needs an elevated prompt (Run as administrator): run `{}` there",
                as_root_command()
            )
        } else {
            e
        }
    })?;
    if bin != src {
        println!("installed {} as {}", src.display(), bin.display());
    }
    let prefix = crate::setup::command_prefix(&bin, o.observe)?;
    println!("{}", crate::setup::run_managed(dir, &prefix, false)?);
    println!(
        "remove loopgate from your own settings (`loopgate setup --uninstall`) so its hooks do not run twice; \
         `loopgate doctor` checks that only root can replace {}",
        bin.display()
    );
    Ok(())
}

fn is_permission_denied(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
    })
}

/// This very command line, run as root: `sudo <this executable> <the same arguments>` (the
/// executable by its full path, which sudo's PATH may not reach).
fn as_root_command() -> String {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "loopgate".into());
    let mut words = vec![crate::setup::shell_quote(&exe)];
    words.extend(
        std::env::args()
            .skip(1)
            .map(|a| crate::setup::shell_quote(&a)),
    );
    let line = words.join(" ");
    if cfg!(windows) {
        line
    } else {
        format!("sudo {line}")
    }
}

/// `--bin` as the hooks will run it: an absolute path to an existing executable file. A bare
/// name is looked up on PATH; a relative path is taken from the current directory. Symlinks
/// are kept, so a link the user manages keeps working after an upgrade.
pub fn resolve_bin(bin: &Path) -> Result<PathBuf> {
    let shown = bin.display();
    let candidate = if bin.components().count() == 1 && !bin.is_absolute() {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(bin))
            .find(|p| p.is_file())
            .with_context(|| format!("--bin {shown}: not found on PATH"))?
    } else {
        std::path::absolute(bin)
            .with_context(|| format!("--bin {shown}: cannot make it absolute"))?
    };
    let meta = std::fs::metadata(&candidate)
        .with_context(|| format!("--bin {shown}: {} does not exist", candidate.display()))?;
    if !meta.is_file() {
        bail!("--bin {shown}: {} is not a file", candidate.display());
    }
    if !crate::platform::is_executable(&meta) {
        bail!("--bin {shown}: {} is not executable", candidate.display());
    }
    Ok(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_must_be_an_existing_executable_and_becomes_absolute() {
        let d = tempfile::tempdir().unwrap();
        assert!(resolve_bin(&d.path().join("missing"))
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        let f = d.path().join("loopgate");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(resolve_bin(&f)
                .unwrap_err()
                .to_string()
                .contains("not executable"));
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(resolve_bin(&f).unwrap(), f);
        assert!(resolve_bin(d.path())
            .unwrap_err()
            .to_string()
            .contains("not a file"));
        let rel = resolve_bin(Path::new("./Cargo.toml"));
        // A relative path is made absolute before it is judged.
        if let Err(e) = rel {
            assert!(e
                .to_string()
                .contains(std::env::current_dir().unwrap().to_str().unwrap()));
        }
    }
}
