//! End-to-end suite: the real Claude Code CLI (pinned, installed into `target/e2e-cache`) runs
//! against a scripted fake Anthropic API with loopgate installed as a user would install it,
//! and each scenario asserts on what the model was sent back.
//!
//! Run with `cargo test --test integration e2e -- --nocapture`. The first run installs the CLI
//! (`npm install --prefix target/e2e-cache @anthropic-ai/claude-code@2.1.330`) and builds the
//! release binary (install.sh and the plugin both use it); later runs take seconds. Without the
//! CLI the scenarios fail, saying why; `LOOPGATE_E2E_SKIP=1` (never under `CI`) makes them print
//! a skip message and pass instead.
//!
//! Each scenario gets its own temp HOME, git project, state dir and fake-API port, so libtest
//! runs them in parallel. Every run's request log, stream-json output, transcript, settings and
//! `events.jsonl` are kept in `target/e2e-out/<scenario>/`, and a failing assertion prints a
//! summary of what the model was sent.
//!
//! - `fake_api` / `http`: the scripted Messages API (SSE streaming, request recording).
//! - `harness` / `run`: temp dirs, install routes, the bounded `claude -p` run, its results.
//! - `expect`: assertions phrased as what the model saw.
//! - `smoke`: the harness against the real CLI with a recorder hook, no loopgate involved.
//! - `loops`, `stop_gate`: the scenarios of issue 4.
//! - `plugin_install`: the plugin route with nothing built, installing its binary once from a
//!   registry (run by tests/dist/plugin-route.sh).
//! - `escalation`: issues 3 and 9, stage-3 escalation ending an unattended run, and an OPEN
//!   circuit refusing the next prompt.
//! - `ceiling`: issue 22, a denial storm ends its turn at the ceiling.
//! - `budget`: issue 39, a loop reaches the loop budget and the unattended turn ends.
//! - `progress`: issue 9, a same-content write loop and a parallel batch with one failure.
//! - `sessions`: issue 36, one session of a person: questions then a task, a new instruction
//!   after failed turns, a background command polled until it finishes.
//! - `managed`: issue 37, `setup --managed` in a private mount namespace, attacked by its
//!   unprivileged agent.
//! - `agent_sdk`: issue 28, the Claude Agent SDK (TypeScript and Python) through both routes.

mod agent_sdk;
mod agents;
mod budget;
mod ceiling;
mod claude_cli;
mod escalation;
mod expect;
mod fake_api;
mod harness;
mod http;
mod interactive;
mod loops;
mod managed;
mod plugin_install;
mod plugin_sanction;
mod plugin_validate;
mod progress;
mod run;
mod sanction;
mod sessions;
mod smoke;
mod stop_gate;
mod stop_hooks;
mod tamper;
mod tell;
mod watch_paths;
