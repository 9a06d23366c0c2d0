//! An interactive `claude` in a private tmux server: what a person types reaches the CLI as
//! keystrokes, and what they would see is read off the screen. For the one route `claude -p`
//! cannot play: a person's own slash command (issue 30's sanction).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Terminal {
    socket: String,
}

impl Terminal {
    /// Starts `script` (see `Scenario::interactive_script`) in a new tmux server of its own.
    /// Fails when tmux is missing, unless skips were asked for (then `None`).
    pub fn start(name: &str, script: &Path) -> Option<Terminal> {
        if Command::new("tmux").arg("-V").output().is_err() {
            if super::claude_cli::skips_allowed() {
                eprintln!("SKIP e2e {name}: tmux is not installed");
                return None;
            }
            panic!("e2e {name}: needs tmux (LOOPGATE_E2E_SKIP=1 skips it)");
        }
        let t = Terminal {
            socket: format!("lg-e2e-{name}-{}", std::process::id()),
        };
        let status = t
            .tmux(&["-f", "/dev/null"])
            .args(["new-session", "-d", "-s", "main", "-x", "250", "-y", "80"])
            .arg(format!("{}; sleep 600", script.display()))
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed");
        Some(t)
    }

    fn tmux(&self, head: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-L").arg(&self.socket).args(head);
        c.stdin(Stdio::null());
        c
    }

    /// Types `text` and Enter, as a person would.
    pub fn type_line(&self, text: &str) {
        let _ = self
            .tmux(&[])
            .args(["send-keys", "-t", "main", "-l", text])
            .status();
        std::thread::sleep(Duration::from_millis(500));
        let _ = self
            .tmux(&[])
            .args(["send-keys", "-t", "main", "Enter"])
            .status();
    }

    /// Presses Escape: a person declining Claude Code's permission dialog.
    pub fn press_escape(&self) {
        let _ = self
            .tmux(&[])
            .args(["send-keys", "-t", "main", "Escape"])
            .status();
    }

    /// The screen and its scroll-back, with every run of whitespace one space: the CLI wraps
    /// long lines at the terminal's width.
    pub fn screen(&self) -> String {
        let out = self
            .tmux(&[])
            .args(["capture-pane", "-p", "-J", "-S", "-2000", "-t", "main"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Waits until `ready` holds, checking every 200 ms; whether it did within `limit`.
    pub fn wait(&self, limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if ready() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        ready()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.tmux(&[]).arg("kill-server").status();
    }
}
