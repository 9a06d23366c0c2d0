//! The data-driven scenario suite: every file in `tests/scenarios/` is a sequence of hook calls
//! with the answer expected at each step, run against the built binary.
//!
//! A step is one of:
//! - `{"call": TOOL, "input": {...}, "ok": OUTPUT | "error": TEXT, "expect": E, "post": P, "times": N}`:
//!   PreToolUse, then (unless denied) PostToolUse with `ok` (a string is Bash stdout, an object is
//!   the tool_response) or PostToolUseFailure with `error`. `expect` (Pre) is `allow` (not denied,
//!   the default), `silent`, `deny` or `warn`; `post` is `any` (default), `silent` or `warn`.
//!   `detector` names who must have decided a deny or warn; `reason_has`, a text its answer quotes.
//!   `times` repeats the step; `takes` (seconds) passes between the call's PreToolUse and its
//!   answer.
//!   `input` strings may contain `{n}`, replaced by the repetition number. Each call is its own
//!   model turn, closed by a PostToolBatch as Claude Code does (`batch_expect`, `batch_detector`).
//! - `{"edit": FILE}`: a successful Edit that changes FILE in the project to new content;
//!   `{"edit": FILE, "old": OLD, "content": NEW}` replaces OLD with NEW (the file then holds NEW).
//! - `{"parallel": [CALL, ...], "batch_expect": E}`: one model turn of parallel calls (each CALL
//!   like a call step, or `"cancelled": true` for a sibling Claude Code cancelled).
//! - `{"write": FILE, "content": TEXT, "post": P}`: a Write of FILE in the project, on disk too.
//! - `{"rm": FILE}`: `rm FILE` through Bash, deleting it, with the bashEditDiff naming it.
//! - `{"sh_write": FILE, "content": TEXT}`: a Bash command writing FILE, its bashEditDiff saying
//!   whether it was created.
//! - `{"script": [CALL, ...], "batch_expect": E}`: one Code Mode step, its calls made by a
//!   script (see [`Run::script`]).
//! - `{"rejected_edit": FILE}`: an Edit Claude Code rejected before running (only PostToolBatch).
//! - `{"session": ID}`: the next steps are a new session's, in the same project.
//! - `{"advance": SECONDS}`: moves the clock (every step also advances it by one second, or by
//!   its `every`).
//! - `{"repeat": [STEP, ...], "times": N}`: the steps played N times in order (`{n}`: the round).
//! - `{"outside": FILE, "content": TEXT}`: FILE written in the project by no tool call at all.
//! - `{"batch": true, "expect": E}`: the turn's PostToolBatch (`block` ends an unattended run).
//! - `{"prompt": ID, "text": T, "expect": "block" | "allow" | "tell", "detector": D}`: a new user
//!   prompt (`tell`: it goes ahead and only the person is told, in a `systemMessage`). `{"stop": true, "expect": "block" | "allow"}`: a Stop.
//!
//! Top level: `name`, `why`, optional `config` (TOML for the user config file), `git` (make the
//! project a repository), `env` (extra environment).

use crate::common::{denial_text, Env, Out};
use serde_json::{json, Value};
use std::path::Path;

const START_MS: u64 = 1_790_000_000_000;

struct Run {
    env: Env,
    clock: u64,
    name: String,
}

impl Run {
    fn tick(&mut self, secs: u64) {
        self.clock += secs * 1000;
        self.env.vars.retain(|(k, _)| k != "LOOPGATE_CLOCK_MS");
        self.env
            .vars
            .push(("LOOPGATE_CLOCK_MS".into(), self.clock.to_string()));
    }

    fn step(&mut self, i: usize, step: &Value) -> Result<(), String> {
        let times = step["times"].as_u64().unwrap_or(1);
        if let Some(seq) = step["repeat"].as_array() {
            // A sequence of steps played `times` times (`{n}` is the round).
            for n in 0..times {
                for (j, sub) in seq.iter().enumerate() {
                    self.tick(sub["every"].as_u64().unwrap_or(1));
                    let at = format!("{} step {}.{} (round {})", self.name, i + 1, j + 1, n + 1);
                    self.one(sub, n, &at)?;
                }
            }
            return Ok(());
        }
        for n in 0..times {
            self.tick(step["every"].as_u64().unwrap_or(1));
            let at = format!("{} step {} (repetition {})", self.name, i + 1, n + 1);
            self.one(step, n, &at)?;
        }
        Ok(())
    }

    fn one(&mut self, step: &Value, n: u64, at: &str) -> Result<(), String> {
        if let Some(secs) = step["advance"].as_u64() {
            self.tick(secs);
            return Ok(());
        }
        if let Some(id) = step["session"].as_str() {
            // A fresh session of the same project (an outer loop's next iteration).
            self.env.session = id.into();
            return Ok(());
        }
        if let Some(id) = step["prompt"].as_str() {
            let out = self
                .env
                .prompt_with(id, step["text"].as_str().unwrap_or("do the task"));
            let want = step["expect"].as_str().unwrap_or("any");
            let ok = match want {
                "block" => prompt_blocked(&out),
                "allow" => !prompt_blocked(&out),
                // Goes ahead, and only the person is told something.
                "tell" => {
                    !prompt_blocked(&out)
                        && !out.stdout.is_empty()
                        && out.json()["systemMessage"].is_string()
                        && out.context().is_none()
                }
                _ => true,
            };
            if !ok {
                return Err(format!(
                    "{at}: prompt expected {want}, got {:?}",
                    out.stdout
                ));
            }
            return match step["detector"].as_str() {
                Some(d) => decided_by(&self.env, d, at),
                None => Ok(()),
            };
        }
        if let Some(file) = step["edit"].as_str() {
            let out = match step["content"].as_str() {
                Some(c) => self
                    .env
                    .edit_from(file, step["old"].as_str().unwrap_or("a"), c),
                None => self
                    .env
                    .edit(file, &format!("content {} {n}\n", self.clock)),
            };
            return check(
                &out,
                step["expect"].as_str().unwrap_or("allow"),
                step["detector"].as_str(),
                &self.env,
                at,
            );
        }
        if let Some(file) = step["rm"].as_str() {
            // `rm FILE` through Bash: the file goes, and Claude Code's bashEditDiff names it.
            let path = self.env.project.join(file);
            let input =
                json!({"command": format!("rm {}", path.display()), "description": "remove"});
            let Some(id) = self.pre_unless_denied("Bash", &input, step, at)? else {
                return Ok(());
            };
            let _ = std::fs::remove_file(&path);
            self.silent_command_changed(&input, &id, json!({"filePath": path, "hunks": []}));
            return Ok(());
        }
        if let Some(file) = step["sh_write"].as_str() {
            // `printf … > FILE` through Bash, creating it; Claude Code's bashEditDiff says so.
            let path = self.env.project.join(file);
            let content = step["content"].as_str().unwrap_or("x\n");
            let input = json!({"command": format!("printf '%s' '{content}' > {}", path.display()), "description": "write"});
            let Some(id) = self.pre_unless_denied("Bash", &input, step, at)? else {
                return Ok(());
            };
            let created = !path.exists();
            std::fs::create_dir_all(path.parent().unwrap()).map_err(|e| e.to_string())?;
            std::fs::write(&path, content).map_err(|e| e.to_string())?;
            let file = json!({"filePath": path, "hunks": [], "created": created});
            self.silent_command_changed(&input, &id, file);
            return Ok(());
        }
        if let Some(file) = step["outside"].as_str() {
            // After the coarse file clock has passed the turn's start (a tick is at most 10 ms).
            std::thread::sleep(std::time::Duration::from_millis(25));
            let path = self.env.project.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).map_err(|e| e.to_string())?;
            std::fs::write(&path, step["content"].as_str().unwrap_or(""))
                .map_err(|e| e.to_string())?;
            return Ok(());
        }
        if let Some(calls) = step["parallel"].as_array() {
            return self.parallel(calls, step, n, at);
        }
        if let Some(calls) = step["script"].as_array() {
            return self.script(calls, step, at);
        }
        if let Some(file) = step["write"].as_str() {
            let path = self.env.project.join(file);
            let content = step["content"].as_str().unwrap_or("");
            let input = json!({"file_path": path, "content": content});
            let Some(id) = self.pre_unless_denied("Write", &input, step, at)? else {
                return Ok(());
            };
            std::fs::create_dir_all(path.parent().unwrap()).map_err(|e| e.to_string())?;
            std::fs::write(&path, content).map_err(|e| e.to_string())?;
            let post = self.env.post(
                "Write",
                input.clone(),
                &id,
                json!({"type": "create", "filePath": path}),
            );
            let want = step["post"].as_str().unwrap_or("any");
            check(
                &post,
                want,
                step["post_detector"].as_str(),
                &self.env,
                &format!("{at} (post)"),
            )?;
            self.env
                .batch_of("Write", &input, &id, "File created successfully");
            return Ok(());
        }
        if let Some(file) = step["rejected_edit"].as_str() {
            let out = self.env.rejected_edit(file, "text that is not there");
            return check(
                &out,
                step["expect"].as_str().unwrap_or("any"),
                step["detector"].as_str(),
                &self.env,
                at,
            );
        }
        if step.get("batch").is_some() {
            let p = self.env.base("PostToolBatch", json!({"tool_calls": []}));
            let out = self.env.hook("post-tool-batch", &p);
            return check(
                &out,
                step["expect"].as_str().unwrap_or("silent"),
                step["detector"].as_str(),
                &self.env,
                at,
            );
        }
        if step.get("stop").is_some() {
            let out = self
                .env
                .stop(step["stop_hook_active"].as_bool().unwrap_or(false));
            return match (
                step["expect"].as_str().unwrap_or("allow"),
                out.stop_blocked(),
            ) {
                ("block", true) | ("allow", false) => Ok(()),
                (want, _) => Err(format!("{at}: Stop expected {want}, got {:?}", out.stdout)),
            };
        }
        let tool = step["call"]
            .as_str()
            .ok_or(format!("{at}: unknown step {step}"))?;
        let input = substitute(&step["input"], n);
        let batch_want = step["batch_expect"].as_str().unwrap_or("any");
        let Some(id) = self.pre_unless_denied(tool, &input, step, at)? else {
            return Ok(());
        };
        // The call itself takes this long (a blocking read of a background task).
        if let Some(secs) = step["takes"].as_u64() {
            self.tick(secs);
        }
        let mut seen = String::new();
        let post = if let Some(err) = step.get("error") {
            let err = substitute(err, n);
            seen = err.as_str().unwrap_or("").to_string();
            self.env.fail(tool, input.clone(), &id, &seen)
        } else {
            let ok = substitute(&step["ok"], n);
            let response = match (&ok, tool) {
                (Value::String(s), "Bash") => {
                    json!({"stdout": s, "stderr": "", "interrupted": false})
                }
                (Value::Null, "Bash") => json!({"stdout": "", "stderr": "", "interrupted": false}),
                (other, _) => other.clone(),
            };
            self.env.post(tool, input.clone(), &id, response)
        };
        let want = step["post"].as_str().unwrap_or("any");
        let post_at = format!("{at} (post)");
        check(
            &post,
            want,
            step["post_detector"].as_str(),
            &self.env,
            &post_at,
        )?;
        let batch = self.env.batch_of(tool, &input, &id, &seen);
        check(
            &batch,
            batch_want,
            step["batch_detector"].as_str(),
            &self.env,
            &format!("{at} (batch)"),
        )
    }
}

fn prompt_blocked(out: &crate::common::Out) -> bool {
    out.stdout.contains("\"decision\":\"block\"")
}

impl Run {
    /// The Post and batch of a Bash command that printed nothing and changed one file, as
    /// Claude Code's `bashEditDiff` names it.
    fn silent_command_changed(&self, input: &Value, id: &str, file: Value) {
        let path = file["filePath"].clone();
        let diff = json!({"files": [file], "moreFiles": 0, "changedFiles": [path]});
        self.env.post(
            "Bash",
            input.clone(),
            id,
            json!({"stdout": "", "stderr": "", "interrupted": false, "bashEditDiff": diff}),
        );
        self.env.batch_of("Bash", input, id, "");
    }

    /// PreToolUse checked against the step's `expect`; a denied call ends its model turn there
    /// (Claude Code sends the batch and no Post event), checked against `batch_expect`. Returns
    /// the call's id when it may run.
    fn pre_unless_denied(
        &mut self,
        tool: &str,
        input: &Value,
        step: &Value,
        at: &str,
    ) -> Result<Option<String>, String> {
        let id = self.env.id();
        let pre = self.env.pre(tool, input.clone(), &id);
        check(
            &pre,
            step["expect"].as_str().unwrap_or("allow"),
            step["detector"].as_str(),
            &self.env,
            &format!("{at} (pre)"),
        )?;
        if let Some(text) = step["reason_has"].as_str() {
            if !pre.stdout.contains(text) {
                return Err(format!(
                    "{at} (pre): the answer does not say {text:?}: {:?}",
                    pre.stdout
                ));
            }
        }
        if pre.denied() {
            // The model turn ends with the denial: its batch is judged against `batch_expect`.
            let batch = self
                .env
                .batch_of(tool, input, &id, &denial_text(tool, &pre));
            check(
                &batch,
                step["batch_expect"].as_str().unwrap_or("any"),
                step["batch_detector"].as_str(),
                &self.env,
                &format!("{at} (batch)"),
            )?;
            return Ok(None);
        }
        Ok(Some(id))
    }

    /// The PostToolBatch listing `lines`, checked against the step's `batch_expect`.
    fn batch_of_lines(&self, lines: Vec<Value>, step: &Value, at: &str) -> Result<(), String> {
        let p = self
            .env
            .base("PostToolBatch", json!({ "tool_calls": lines }));
        let out = self.env.hook("post-tool-batch", &p);
        check(
            &out,
            step["batch_expect"].as_str().unwrap_or("any"),
            step["batch_detector"].as_str(),
            &self.env,
            &format!("{at} (batch)"),
        )
    }

    /// One Code Mode step: a script's calls one after another (ids `toolu_cc_…`, no
    /// description), a denied call answered to the script and the script going on, then one
    /// PostToolBatch listing every call. A CALL may say `"repeat": N` (a loop in the script),
    /// `"deny_from": K` (repetitions from the K-th on must be denied, by `detector` at the K-th)
    /// and `{i}` in its input (the repetition number).
    fn script(&mut self, calls: &[Value], step: &Value, at: &str) -> Result<(), String> {
        let mut lines = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            let tool = c["call"].as_str().unwrap_or("Bash");
            for r in 1..=c["repeat"].as_u64().unwrap_or(1) {
                let n: u64 = self.env.id()["toolu_t_".len()..].parse().unwrap_or(0);
                let id = format!("toolu_cc_{n:032x}");
                let input = substitute(&c["input"], r)
                    .to_string()
                    .replace("{i}", &r.to_string());
                let input: Value = serde_json::from_str(&input).map_err(|e| e.to_string())?;
                let pre = self.env.pre(tool, input.clone(), &id);
                let from = c["deny_from"].as_u64().unwrap_or(u64::MAX);
                let want = if r >= from { "deny" } else { "allow" };
                let detector = if r == from {
                    c["detector"].as_str()
                } else {
                    None
                };
                let where_ = format!("{at} call {} repetition {r} (pre)", i + 1);
                check(&pre, want, detector, &self.env, &where_)?;
                let text = if pre.denied() {
                    format!("Permission denied for {tool}: {}", denial_text(tool, &pre))
                } else if let Some(err) = c["error"].as_str() {
                    self.env.fail(tool, input.clone(), &id, err);
                    err.to_string()
                } else {
                    let out = substitute(&c["ok"], r);
                    let text = out.as_str().unwrap_or("").to_string();
                    let response = match (&out, tool) {
                        (Value::String(s), "Bash") => {
                            json!({"stdout": s, "stderr": "", "interrupted": false})
                        }
                        (other, _) => other.clone(),
                    };
                    self.env.post(tool, input.clone(), &id, response);
                    text
                };
                lines.push(json!({"tool_name": tool, "tool_input": input, "tool_use_id": id, "tool_response": text}));
            }
        }
        self.batch_of_lines(lines, step, at)
    }

    /// One model turn of parallel calls, as Claude Code runs them: every PreToolUse, then a Post
    /// for each call that ran, then one PostToolBatch listing them all. A call marked
    /// `"cancelled": true` is a sibling Claude Code cancelled after another failed: no hook event
    /// of its own, only its line in the batch.
    fn parallel(&mut self, calls: &[Value], step: &Value, n: u64, at: &str) -> Result<(), String> {
        let mut ids = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            let id = self.env.id();
            let tool = c["call"].as_str().unwrap_or("Bash");
            let input = substitute(&c["input"], n);
            let pre = self.env.pre(tool, input.clone(), &id);
            check(
                &pre,
                c["expect"].as_str().unwrap_or("allow"),
                c["detector"].as_str(),
                &self.env,
                &format!("{at} call {} (pre)", i + 1),
            )?;
            ids.push((id, tool, input, pre.denied()));
        }
        let mut lines = Vec::new();
        for ((id, tool, input, denied), c) in ids.into_iter().zip(calls) {
            let text = if denied {
                "PreToolUse:Bash hook error: denied".to_string()
            } else if c["cancelled"].as_bool() == Some(true) {
                "<tool_use_error>Sibling tool call errored</tool_use_error>".to_string()
            } else if let Some(err) = c["error"].as_str() {
                self.env.fail(tool, input.clone(), &id, err);
                err.to_string()
            } else {
                let out = c["ok"].as_str().unwrap_or("");
                self.env.post(
                    tool,
                    input.clone(),
                    &id,
                    json!({"stdout": out, "stderr": "", "interrupted": false}),
                );
                out.to_string()
            };
            lines.push(json!({"tool_name": tool, "tool_input": input, "tool_use_id": id, "tool_response": text}));
        }
        self.batch_of_lines(lines, step, at)
    }
}

fn substitute(v: &Value, n: u64) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("{n}", &n.to_string())),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), substitute(v, n)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| substitute(v, n)).collect()),
        other => other.clone(),
    }
}

fn check(out: &Out, want: &str, detector: Option<&str>, env: &Env, at: &str) -> Result<(), String> {
    if out.code != 0 {
        return Err(format!("{at}: exit {} {}", out.code, out.stderr));
    }
    let ok = match want {
        "any" => true,
        "allow" => !out.denied(),
        "silent" => out.stdout.is_empty(),
        "deny" => out.denied(),
        "ask" => {
            !out.stdout.is_empty()
                && out.json()["hookSpecificOutput"]["permissionDecision"] == "ask"
        }
        "warn" => out.context().is_some() && !out.denied(),
        "block" => !out.stdout.is_empty() && out.json()["decision"] == "block",
        other => return Err(format!("{at}: unknown expectation {other}")),
    };
    if !ok {
        return Err(format!("{at}: expected {want}, got {:?}", out.stdout));
    }
    if let (Some(d), "deny" | "warn" | "block" | "ask") = (detector, want) {
        return decided_by(env, d, at);
    }
    Ok(())
}

/// The latest hook call's events name detector `d`.
fn decided_by(env: &Env, d: &str, at: &str) -> Result<(), String> {
    let last = env.events().last().cloned().unwrap_or(Value::Null);
    let decided: Vec<Value> = env
        .events()
        .into_iter()
        .rev()
        .take_while(|e| e["ts"] == last["ts"])
        .collect();
    if !decided.iter().any(|e| e["detector"] == d) {
        return Err(format!(
            "{at}: expected detector {d}, events were {decided:?}"
        ));
    }
    Ok(())
}

fn run_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let s: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut env = Env::new();
    if s["git"].as_bool() == Some(true) {
        env = env.git();
    }
    if let Some(cfg) = s["config"].as_str() {
        env = env.config(cfg);
    }
    for (k, v) in s["env"].as_object().into_iter().flatten() {
        env = env.var(k, v.as_str().unwrap_or(""));
    }
    let mut run = Run {
        env,
        clock: START_MS,
        name: s["name"].as_str().unwrap_or("?").to_string(),
    };
    run.tick(0);
    run.env.new_prompt("scenario-prompt");
    for (i, step) in s["steps"].as_array().ok_or("no steps")?.iter().enumerate() {
        run.step(i, step)?;
    }
    Ok(())
}

#[test]
fn every_scenario_gets_the_expected_answer_at_every_step() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    // `SCENARIO=word cargo test …` runs only the scenarios whose file name contains it.
    if let Ok(only) = std::env::var("SCENARIO") {
        files.retain(|f| f.to_string_lossy().contains(&only));
        assert!(!files.is_empty(), "no scenario matches {only:?}");
        let failures: Vec<String> = files.iter().filter_map(|f| run_file(f).err()).collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        return;
    }
    assert!(files.len() >= 20, "only {} scenarios", files.len());
    let failures: Vec<String> = files.iter().filter_map(|f| run_file(f).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
