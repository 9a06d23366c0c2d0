#!/usr/bin/env bash
# The npm route, end to end, with no Rust toolchain: publishes the npm packages that
# contrib/release.py wrote into DIST to a throwaway local registry (verdaccio on 127.0.0.1), then
# on a fresh HOME with no cargo or rustc on PATH:
#   1. `npx loopgate setup` (nothing installed): the hooks call a native binary copied to the
#      per-user bin dir, not the JS launcher and not npx's cache,
#   2. `npm install -g loopgate` and `loopgate setup`: the same, and `loopgate doctor` passes,
#   3. a hook session (tests/dist/hook-session.sh) through the wired binary, and through the
#      launcher, whose answers must equal the binary's (stdin, stdout and exit code untouched).
#
#   tests/dist/npm-route.sh DIST
#
# The registry is tests/dist/registry.sh's (verdaccio, pinned, installed once into
# target/dist-cache); nothing else is fetched. Bounded: every npm step and the registry
# start-up have time limits. Exits non-zero with the failing step on any failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/dist/registry.sh
. "$here/registry.sh"
case $(uname -m) in
    x86_64) cpu=x64 ;;
    aarch64 | arm64) cpu=arm64 ;;
    *) echo "npm-route: no npm package for $(uname -m)" >&2 && exit 1 ;;
esac

registry_session npm-route "$@"

# The user's machine: a fresh HOME, npm configured for the local registry, no Rust on PATH;
# every command bounded.
user_env() {
    local home=$1
    shift
    timeout 300 env -i HOME="$home" PATH="$home/npm-global/bin:$(dirname "$(command -v node)"):/usr/local/bin:/usr/bin:/bin" \
        LANG=C.UTF-8 npm_config_registry="$registry_url" npm_config_cache="$home/.npm" \
        npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false "$@"
}
expect_native_hooks() {
    local home=$1 settings=$1/.claude/settings.json bin=$1/.local/share/loopgate/bin/loopgate
    [ -f "$settings" ] || fail "no $settings after setup"
    [ -x "$bin" ] || fail "setup did not install the native binary at $bin"
    [ "$(head -c 4 "$bin" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "$bin is not a native (ELF) binary"
    local commands
    commands=$(node -e '
        const s = require(process.argv[1]);
        for (const groups of Object.values(s.hooks || {}))
            for (const g of groups) for (const h of g.hooks || []) console.log(h.command);' "$settings")
    [ "$(printf '%s\n' "$commands" | wc -l)" -ge 8 ] || fail "fewer than 8 hook commands in $settings: $commands"
    local c
    while IFS= read -r c; do
        case $c in
            "$bin "*) ;;
            # SessionStart runs behind the binary's SHA-256 check (src/setup/pin.rs).
            "echo '"*"  $bin' | "*" && exec $bin session-start; echo '"*) ;;
            *) fail "a hook does not call the native binary $bin: $c" ;;
        esac
    done <<<"$commands"
}

home1=$tmp/home-npx
mkdir -p "$home1"
if user_env "$home1" sh -c 'command -v cargo || command -v rustc' >/dev/null; then
    fail "cargo or rustc is on the test PATH; the route must work without them"
fi
step "npx loopgate setup on a fresh HOME"
(cd "$home1" && user_env "$home1" npx --yes loopgate setup) >"$tmp/npx-setup.out" 2>&1 ||
    fail "npx loopgate setup failed: $(cat "$tmp/npx-setup.out")"
expect_native_hooks "$home1"
grep -q '_npx' "$home1/.claude/settings.json" && fail "the hooks point into npx's cache"

home2=$tmp/home-global
mkdir -p "$home2"
step "npm install -g loopgate, loopgate setup on a fresh HOME"
user_env "$home2" npm install -g --prefix "$home2/npm-global" loopgate >"$tmp/install.out" 2>&1 ||
    fail "npm install -g loopgate failed: $(cat "$tmp/install.out")"
installed=$home2/npm-global/lib/node_modules/loopgate/node_modules/@loopgate
[ -x "$installed/cli-linux-$cpu/bin/loopgate" ] || fail "the platform package's binary is not installed (ls: $(ls "$installed" 2>&1))"
[ "$(ls "$installed")" = "cli-linux-$cpu" ] || fail "npm installed other platforms' packages too: $(ls "$installed")"
grep -q "loopgate's plugin for OpenCode" "$home2/npm-global/lib/node_modules/loopgate/opencode/loopgate.js" ||
    fail "the package does not ship OpenCode's plugin (opencode/loopgate.js)"
(cd "$home2" && user_env "$home2" loopgate setup) >"$tmp/setup.out" 2>&1 ||
    fail "loopgate setup failed: $(cat "$tmp/setup.out")"
expect_native_hooks "$home2"
native=$home2/.local/share/loopgate/bin/loopgate
(cd "$home2" && user_env "$home2" loopgate status) >"$tmp/status.out" 2>&1 || fail "loopgate status failed: $(cat "$tmp/status.out")"
(cd "$home2" && user_env "$home2" loopgate doctor) >"$tmp/doctor.out" 2>&1 || fail "loopgate doctor failed: $(cat "$tmp/doctor.out")"
user_env "$home2" loopgate --version | grep -q "^loopgate $version " || fail "loopgate --version is not $version"
# The Agent SDK helper ships in the package, exported as `loopgate/agent-sdk`, and finds the
# binary setup copied (docs/agent-sdk.md).
helper_bin=$(cd "$home2/npm-global/lib" && user_env "$home2" node -e \
    'process.stdout.write(require("loopgate/agent-sdk").findBinary())') ||
    fail "require(\"loopgate/agent-sdk\") failed in the installed package"
[ "$helper_bin" = "$native" ] || fail "loopgate/agent-sdk would run $helper_bin, not $native"
# A failing exit code and stderr pass through the launcher as the binary gives them.
set +e
native_err=$(user_env "$home2" "$native" no-such-command 2>&1 >/dev/null)
native_code=$?
launcher_err=$(user_env "$home2" loopgate no-such-command 2>&1 >/dev/null)
launcher_code=$?
set -e
[ "$native_code" != 0 ] && [ "$launcher_code" = "$native_code" ] && [ "$launcher_err" = "$native_err" ] ||
    fail "through the launcher an unknown command gave exit $launcher_code, natively $native_code"

# npm picks each platform's package by `os`/`cpu`: installing as another platform would
# (npm's --os/--cpu) must bring exactly that platform's package and binary.
for pkg in "$dist"/loopgate-cli-*-"$version".tgz; do
    platform=${pkg##*/loopgate-cli-}
    platform=${platform%-"$version".tgz}
    os_name=${platform%-*}
    arch=${platform#*-}
    exe=loopgate
    [ "$os_name" = win32 ] && exe=loopgate.exe
    prefix=$tmp/as-$platform
    step "npm install -g loopgate as $os_name/$arch"
    user_env "$home2" npm install -g --prefix "$prefix" --os="$os_name" --cpu="$arch" loopgate \
        >"$tmp/install-$platform.out" 2>&1 || fail "npm install as $platform failed: $(cat "$tmp/install-$platform.out")"
    chosen=$(ls "$prefix"/lib/node_modules/loopgate/node_modules/@loopgate 2>/dev/null || true)
    [ "$chosen" = "cli-$platform" ] || fail "npm as $platform installed '$chosen', not cli-$platform"
    [ -f "$prefix/lib/node_modules/loopgate/node_modules/@loopgate/cli-$platform/bin/$exe" ] ||
        fail "the $platform package has no bin/$exe"
done

step "hook session through the wired binary, then through the launcher"
"$here/hook-session.sh" "$native"
PATH="$home2/npm-global/bin:$PATH" "$here/hook-session.sh" --reference "$native" "$home2/npm-global/bin/loopgate"
step "OK: installed from the registry without Rust, hooks wired to $native, a hook session answered"
