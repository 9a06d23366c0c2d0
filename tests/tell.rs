//! Issue 37 points 1 and 3 and issue 39's notices, through the binary and both ways: what
//! loopgate is comes from its command line and the person's config file, never from a hook's
//! environment (which a settings file's `env` reaches); loopgate's status line is judged like a
//! handler; and every switch-off, weakening or reset loopgate sees reaches the person's receiver
//! at once.

use crate::common::{Env, Out};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const FAIL: Result<&str, &str> = Err("Exit code 1\ncat: config.yml: No such file or directory");

/// The user config's receiver: a command that appends each notice, one JSON line, to a file.
fn with_receiver(env: Env, extra: &str) -> (Env, PathBuf) {
    let got = env.state.parent().unwrap().join("notices.jsonl");
    let env = env.config(&format!(
        "{extra}[notify]\ncommand = [\"sh\", \"-c\", \"cat >> \\\"$0\\\"; echo >> \\\"$0\\\"\", \"{}\"]\n",
        got.display()
    ));
    (env, got)
}

fn received(got: &Path) -> Vec<Value> {
    std::fs::read_to_string(got)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_kind<'a>(got: &'a [Value], kind: &str, code: &str) -> Vec<&'a Value> {
    got.iter()
        .filter(|n| n["kind"] == kind && n["reason_code"] == code)
        .collect()
}

fn told(out: &Out) -> String {
    serde_json::from_str::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["systemMessage"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The hooks run with the state dir on their command line, as setup writes them, whatever the
/// environment says.
fn wired_to_its_state(mut env: Env) -> Env {
    env.hook_options = vec!["--state-dir".into(), env.state.display().to_string()];
    env
}

/// A prompt and six identical failing calls: how many were refused, and what each told.
/// What the prompt and each call told comes with them (the session's first call tells).
fn six_failures(env: &mut Env) -> (usize, Vec<String>) {
    let prompt = env.new_prompt("p-1");
    let outs: Vec<Out> = (0..6).map(|_| env.bash("cat config.yml", FAIL)).collect();
    (
        outs.iter().filter(|o| o.denied()).count(),
        std::iter::once(&prompt).chain(&outs).map(told).collect(),
    )
}

fn user_settings(env: &Env) -> PathBuf {
    env.state.parent().unwrap().join(".claude/settings.json")
}

fn setup(env: &Env) -> PathBuf {
    let user = user_settings(env);
    let out = env.run(&["setup", "--settings", user.to_str().unwrap()], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    user
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn config_change(env: &Env, file: &Path) -> Out {
    let p = env.base(
        "ConfigChange",
        json!({"source": "local_settings", "file_path": file}),
    );
    env.hook("config-change", &p)
}

fn is_ours(status_line: &Value) -> bool {
    status_line["command"]
        .as_str()
        .is_some_and(|c| c.contains("loopgate statusline"))
}

#[test]
fn a_loosening_environment_is_ignored_in_a_hook_and_told_once() {
    let (env, got) = with_receiver(Env::new(), "");
    let elsewhere = env.state.parent().unwrap().join("an-empty-state-dir");
    let mut env = wired_to_its_state(env)
        .var("LOOPGATE_MODE", "observe")
        .var("LOOPGATE_STATE_DIR", elsewhere.to_str().unwrap())
        .var("LOOPGATE_DETECTORS__REPEAT__DETERMINISTIC", "50")
        .var("LOOPGATE_GUARD__ENABLED", "false");
    let (refused, said) = six_failures(&mut env);
    assert!(refused > 0, "still enforcing, at the person's thresholds");
    let first = said
        .iter()
        .find(|s| s.contains("hook's environment"))
        .expect("told");
    for var in [
        "LOOPGATE_MODE=observe",
        "LOOPGATE_STATE_DIR=",
        "LOOPGATE_DETECTORS__REPEAT__DETERMINISTIC=50",
        "LOOPGATE_GUARD__ENABLED=false",
    ] {
        assert!(first.contains(var), "{var} not named: {first}");
    }
    assert_eq!(
        said.iter()
            .filter(|s| s.contains("hook's environment"))
            .count(),
        1,
        "told once: {said:#?}"
    );
    assert!(!elsewhere.exists(), "the state stays where it was");
    // The guard is on: the agent's switch-off is refused.
    assert!(env
        .pre(
            "Bash",
            json!({"command": "loopgate setup --uninstall"}),
            "g1"
        )
        .denied());
    let got = received(&got);
    assert_eq!(
        of_kind(&got, "weakened", "env_ignored").len(),
        1,
        "{got:#?}"
    );
    // The status line shows it was told.
    let state = env.state.display().to_string();
    let line = env
        .run(
            &["statusline", "--state-dir", &state],
            br#"{"session_id": "sess-1"}"#,
        )
        .stdout;
    assert!(line.contains("told"), "{line}");
}

#[test]
fn the_persons_own_config_and_flags_still_decide_and_the_environment_may_tighten() {
    // The person's config file puts loopgate in observe mode: nothing refused, nothing told.
    let (env, got) = with_receiver(Env::new(), "mode = \"observe\"\n");
    let mut env = wired_to_its_state(env);
    let (refused, said) = six_failures(&mut env);
    assert_eq!(refused, 0);
    assert!(said.iter().all(|s| !s.contains("environment")), "{said:#?}");
    assert!(received(&got).is_empty());
    // The environment tightens it back to enforce: honoured, untold.
    let (env, got) = with_receiver(Env::new(), "mode = \"observe\"\n");
    let mut env = wired_to_its_state(env).var("LOOPGATE_MODE", "enforce");
    let (refused, said) = six_failures(&mut env);
    assert!(refused > 0);
    assert!(said.iter().all(|s| !s.contains("environment")), "{said:#?}");
    assert!(received(&got).is_empty());
    // The hook command's own --observe and --state-dir.
    let other = Env::new();
    let dir = other.state.parent().unwrap().join("chosen");
    let mut env = other.observe();
    env.hook_options
        .extend(["--state-dir".into(), dir.display().to_string()]);
    let (refused, _) = six_failures(&mut env);
    assert_eq!(refused, 0);
    assert!(
        dir.join("sessions").is_dir(),
        "the flag's state dir is used"
    );
}

#[test]
fn loopgate_disable_switches_a_hook_off_tells_the_session_once_and_notifies() {
    let (env, got) = with_receiver(Env::new(), "");
    let mut env = env.var("LOOPGATE_DISABLE", "1");
    let (refused, said) = six_failures(&mut env);
    assert_eq!(refused, 0, "the person's kill switch is honoured");
    let at_first = said
        .iter()
        .filter(|s| s.contains("LOOPGATE_DISABLE is set"))
        .count();
    assert_eq!(at_first, 1, "{said:#?}");
    let got = received(&got);
    let off = of_kind(&got, "switched_off", "disabled_by_env");
    assert_eq!(off.len(), 1, "{got:#?}");
    assert_eq!(off[0]["session"], "sess-1");
    // Switched on again: no notice, loops refused.
    let (env, got) = with_receiver(Env::new(), "");
    let mut env = env.var("LOOPGATE_DISABLE", "0");
    assert!(six_failures(&mut env).0 > 0);
    assert!(received(&got).is_empty());
}

#[test]
fn a_reset_is_a_notice_whoever_runs_it() {
    let (mut env, got) = with_receiver(Env::new(), "");
    // Nothing recorded yet: nothing reset, nothing sent.
    assert_eq!(env.run(&["reset", "--all"], b"").code, 0);
    assert!(received(&got).is_empty());
    env.new_prompt("p-1");
    env.bash("ls", Ok("README.md"));
    assert!(received(&got).is_empty(), "ordinary work sends nothing");
    let out = env.run(&["reset", "--all"], b"");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let got = received(&got);
    let reset = of_kind(&got, "reset", "loopgate_reset");
    assert_eq!(reset.len(), 1, "{got:#?}");
    assert_eq!(reset[0]["evidence"]["sessions"], json!(["sess-1"]));
}

#[test]
fn an_agents_refused_switch_off_is_a_notice_and_ordinary_reads_are_not() {
    let (mut env, got) = with_receiver(Env::new(), "");
    env.new_prompt("p-1");
    for harmless in ["loopgate status", "grep LOOPGATE_MODE src/", "ls"] {
        assert!(!env.bash(harmless, Ok("")).denied(), "{harmless}");
    }
    assert!(received(&got).is_empty());
    for route in ["loopgate setup --uninstall", "export LOOPGATE_DISABLE=1"] {
        assert!(
            env.pre("Bash", json!({"command": route}), &env.id())
                .denied(),
            "{route}"
        );
    }
    let got = received(&got);
    let refused = of_kind(&got, "weakened", "guard_refused");
    assert_eq!(refused.len(), 2, "{got:#?}");
    assert!(refused[0]["reason"].as_str().unwrap().contains("loopgate"));
}

#[test]
fn a_project_status_line_in_place_of_loopgates_is_undone_told_and_the_person_may_keep_it() {
    let (env, got) = with_receiver(Env::new(), "");
    let user = setup(&env);
    assert!(is_ours(&read(&user)["statusLine"]));
    let local = env.project.join(".claude/settings.local.json");
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();

    // An ordinary project change: left alone.
    std::fs::write(&local, r#"{"permissions": {"allow": ["Bash(ls)"]}}"#).unwrap();
    assert!(config_change(&env, &local).is_silent_allow());

    // A status line of the project's own, which would hide loopgate's ✗ OFF.
    let hides = json!({"statusLine": {"type": "command", "command": "echo 'loopgate ✓'"}});
    std::fs::write(&local, hides.to_string()).unwrap();
    let out = config_change(&env, &local);
    let v = out.json();
    assert_eq!(v["decision"], "block", "{}", out.stdout);
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.contains("statusLine"), "{reason}");
    assert_eq!(v["systemMessage"], v["reason"], "told in the same answer");
    assert!(read(&local).get("statusLine").is_none(), "undone");
    assert!(is_ours(&read(&user)["statusLine"]));
    let notified = received(&got);
    assert_eq!(
        of_kind(&notified, "switched_off", "config_change").len(),
        1,
        "{notified:#?}"
    );

    // The person keeps it: the change goes back in place and stays.
    let id = reason
        .split("/loopgate allow ")
        .nth(1)
        .map(|rest| rest[..6].to_string())
        .unwrap();
    let said = crate::sanction::typed(&env, &env.session, &format!("allow {id}"));
    assert!(
        said.stdout.contains(&format!("kept your change {id}")),
        "{}",
        said.stdout
    );
    assert_eq!(read(&local)["statusLine"], hides["statusLine"]);
    let notified = received(&got);
    assert_eq!(
        of_kind(&notified, "switched_off", "allowed").len(),
        1,
        "the change kept goes out too: {notified:#?}"
    );
    assert!(!config_change(&env, &local).stdout.contains("\"block\""));
}

#[test]
fn loopgates_own_status_line_rewritten_in_place_is_put_back() {
    let env = Env::new();
    let user = setup(&env);
    let mut v = read(&user);
    let ours = v["statusLine"].clone();
    v["statusLine"] =
        json!({"type": "command", "command": "loopgate statusline | sed 's/OFF/ok/'"});
    std::fs::write(&user, v.to_string()).unwrap();
    let out = config_change(&env, &user);
    assert_eq!(out.json()["decision"], "block", "{}", out.stdout);
    assert_eq!(read(&user)["statusLine"], ours);
    // Taken out altogether: put back too.
    let mut v = read(&user);
    v.as_object_mut().unwrap().remove("statusLine");
    std::fs::write(&user, v.to_string()).unwrap();
    assert_eq!(config_change(&env, &user).json()["decision"], "block");
    assert_eq!(read(&user)["statusLine"], ours);
}

#[test]
fn a_status_line_of_the_persons_own_is_never_judged() {
    // setup keeps the person's own status line; loopgate's was never installed.
    let env = Env::new();
    let user = user_settings(&env);
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    let mine = json!({"type": "command", "command": "my-prompt-line"});
    std::fs::write(&user, json!({"statusLine": mine}).to_string()).unwrap();
    setup(&env);
    assert_eq!(read(&user)["statusLine"], mine);
    let local = env.project.join(".claude/settings.local.json");
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    let other = json!({"statusLine": {"type": "command", "command": "another"}});
    std::fs::write(&local, other.to_string()).unwrap();
    assert!(config_change(&env, &local).is_silent_allow());
    let mut v = read(&user);
    v["statusLine"] = json!({"type": "command", "command": "my-new-line"});
    std::fs::write(&user, v.to_string()).unwrap();
    assert!(config_change(&env, &user).is_silent_allow());
    // Nor does the guard refuse writing one into the project.
    let write = json!({"file_path": local, "content": other.to_string()});
    assert!(!env.pre("Write", write, "w1").denied());
}

#[test]
fn the_guard_refuses_an_agents_project_status_line_while_loopgates_is_installed() {
    let env = Env::new();
    setup(&env);
    let local = env.project.join(".claude/settings.local.json");
    let hide = json!({"statusLine": {"type": "command", "command": "echo ok"}}).to_string();
    let write = json!({"file_path": local, "content": hide});
    assert!(env.pre("Write", write, "w1").denied());
    let ordinary = json!({"permissions": {"allow": ["Bash(npm test)"]}}).to_string();
    let write = json!({"file_path": local, "content": ordinary});
    assert!(!env.pre("Write", write, "w2").denied());
}

/// The `https://` webhook goes through curl, which trusts the CA bundle its environment names
/// (`CURL_CA_BUNDLE`): a local TLS receiver with a self-signed certificate hears the notice when
/// the person trusts it, and not otherwise.
#[cfg(unix)]
#[test]
fn an_https_webhook_hears_the_notice_through_curl() {
    use std::io::BufRead;
    let tools = ["openssl", "curl", "python3"];
    if tools.iter().any(|t| {
        std::process::Command::new(t)
            .arg("--version")
            .output()
            .is_err()
    }) {
        eprintln!("skipped: needs {tools:?}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, body) = (
        dir.path().join("cert.pem"),
        dir.path().join("key.pem"),
        dir.path().join("body.json"),
    );
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    const SERVER: &str = r#"
import http.server, ssl, sys
cert, key, out = sys.argv[1:4]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        data = self.rfile.read(int(self.headers["Content-Length"]))
        open(out, "ab").write(data + b"\n")
        self.send_response(204); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(cert, key)
s.socket = c.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let mut server = std::process::Command::new("python3")
        .arg("-c")
        .arg(SERVER)
        .args([&cert, &key, &body])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let url = format!("https://127.0.0.1:{}/hook", port.trim());
    for trusted in [false, true] {
        let mut env = Env::new().config(&format!("[notify]\nwebhook = \"{url}\"\n"));
        if trusted {
            env = env.var("CURL_CA_BUNDLE", cert.to_str().unwrap());
        }
        env.new_prompt("p-1");
        env.bash("ls", Ok("README.md"));
        let out = env.run(&["reset", "--all"], b"");
        let sent: Vec<Value> = env
            .events()
            .into_iter()
            .filter(|e| e["detector"] == "notify")
            .collect();
        assert_eq!(sent.len(), 1, "{sent:#?}");
        if trusted {
            assert_eq!(sent[0]["decision"], "notice_sent", "{}", out.stderr);
            let got: Value = serde_json::from_str(
                std::fs::read_to_string(&body)
                    .unwrap()
                    .lines()
                    .next()
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(got["kind"], "reset");
        } else {
            assert_eq!(sent[0]["decision"], "notice_failed");
            assert!(!body.exists(), "an untrusted certificate is refused");
            assert!(
                out.stderr.contains("the notice to the webhook failed"),
                "{}",
                out.stderr
            );
        }
    }
    let _ = server.kill();
    let _ = server.wait();
}

/// The binary's outside check: the digest pinned in the settings rewritten while the installed
/// binary still runs is told and sent at once (the first step of a binary-and-digest rewrite);
/// setup's own rewrite, which pins the running binary, is not.
#[cfg(unix)]
#[test]
fn a_pinned_digest_rewritten_is_told_and_sent_at_once() {
    let (env, got) = with_receiver(Env::new(), "");
    let user = setup(&env);
    let text = std::fs::read_to_string(&user).unwrap();
    let digest = text
        .split("echo '")
        .nth(1)
        .map(|rest| rest[..64].to_string())
        .unwrap();
    // setup again: the same digest, nothing to tell.
    setup(&env);
    assert!(config_change(&env, &user).is_silent_allow());
    std::fs::write(&user, text.replace(&digest, &"0".repeat(64))).unwrap();
    let out = config_change(&env, &user);
    assert!(
        out.json()["systemMessage"]
            .as_str()
            .unwrap()
            .contains("no longer the running binary's"),
        "{}",
        out.stdout
    );
    let got = received(&got);
    assert_eq!(
        of_kind(&got, "weakened", "pin_rewritten").len(),
        1,
        "{got:#?}"
    );
}
