//! End-to-end suite for the Claude Agent SDK (issue 28): the TypeScript SDK
//! (`@anthropic-ai/claude-agent-sdk`) and the Python SDK (`claude-agent-sdk`), pinned and
//! installed by the tests into `target/e2e-cache/agent-sdk/<ts|py>`, each running a small app
//! (`driver.mjs`, `driver.py`: one `query()`) in a temp project against the fake Messages API of
//! `fake_api.rs`. Both SDKs start the Claude Code binary they bundle, so every fact of
//! hooks-observed.md about what the model is sent holds here too.
//!
//! Run with `cargo test --test integration e2e::agent_sdk`. Without an SDK (npm, python3 or the
//! registries missing) its tests fail, saying why, unless `LOOPGATE_E2E_SKIP=1` (never under
//! `CI`) asks for a skip. Each run's files are kept in `target/e2e-out/agent-sdk-<sdk>-<scenario>/`.
//!
//! - `host`: the pinned SDKs, their install, the app and its options.
//! - `observe`: what fires under each `settingSources` and with callbacks (recorders only).
//! - `fail_open`: the helpers on a missing, crashing, garbling or hanging binary.
//! - `routes`: loopgate through the settings route and through the helpers
//!   (`loopgate/agent-sdk`, `loopgate_agent_sdk`): a denial storm refused and ended at the
//!   ceiling, an ordinary run untouched.

mod fail_open;
mod host;
mod observe;
mod routes;
