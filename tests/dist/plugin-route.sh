#!/usr/bin/env bash
# The Claude Code plugin route with nothing built: publishes the npm packages contrib/release.py
# wrote into DIST to a throwaway local registry (tests/dist/registry.sh), then runs the e2e test
# `e2e::plugin_install::` (tests/e2e/plugin_install.rs): the real Claude Code CLI (pinned, from
# target/e2e-cache) with `--plugin-dir` on a copy of the plugin's files, against the fake model,
# with no loopgate, cargo or rustc on its PATH. Its first SessionStart installs the binary from
# that registry once; the hooks then deny a repeated failing command.
#
#   tests/dist/plugin-route.sh DIST
#
# The test is Rust (it reuses the e2e harness and fake API), so this script needs cargo; the
# Claude Code run it drives does not. Bounded by the e2e harness (60 s per claude run).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/dist/registry.sh
. "$here/registry.sh"
registry_session plugin-route "$@"

step "claude --plugin-dir (a copy of the plugin, nothing built) against the fake model"
# CI=1: a missing Claude Code CLI fails the test instead of skipping it.
(cd "$repo" && CI=1 LOOPGATE_E2E_NPM_REGISTRY="$registry_url" timeout 900 \
    cargo test --quiet --test integration e2e::plugin_install:: -- --nocapture) ||
    fail "the plugin e2e test failed (its run is kept in target/e2e-out/plugin-install/)"
step "OK: the plugin installed its binary once from the registry and broke the loop, nothing built"
