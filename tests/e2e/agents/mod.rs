//! End-to-end suite for the other agent CLIs (issue 12): Codex CLI, Gemini CLI, Qwen Code and
//! Copilot CLI, each pinned and installed by the tests into `target/e2e-cache/agents/<cli>`, run
//! headless and offline against `fake_llm.py` (a scripted fake model server speaking each CLI's
//! wire protocol, copied from the observation harness), with loopgate installed through
//! `loopgate setup --agent <cli>`.
//!
//! Run with `cargo test --test integration e2e::agents`. Without a CLI (npm missing, offline) its
//! tests fail, saying why, unless `LOOPGATE_E2E_SKIP=1` (never under `CI`) asks for a skip. Every run's
//! requests, CLI output, hook file and `events.jsonl` are kept in
//! `target/e2e-out/agents-<cli>-<scenario>/`.
//!
//! - `clis`: the pinned versions, the parallel npm install, the skip policy.
//! - `harness`: temp HOME and project, the CLI's offline config, hooks, the bounded run.
//! - `run`: what the model saw, for each wire protocol.
//! - `script`: model scripts with each CLI's tool names.
//! - `smoke`: the harness with a recorder hook, no loopgate.
//! - `scenarios`: the loops of issue 12, per CLI.
//! - `ceiling`: issue 22's denial storm, ended per CLI.
//! - `budget`: issue 39, a loop reaches the loop budget (Codex).
//! - `sessions`: issue 36, a person's session per CLI (continued headless): questions then a task,
//!   a new instruction after failed turns, a background command polled until it finishes.

mod budget;
mod ceiling;
mod clis;
mod harness;
mod run;
mod scenarios;
mod script;
mod sessions;
mod smoke;
mod stop_hooks;
