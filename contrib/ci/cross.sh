#!/usr/bin/env bash
# Proves on one Linux machine that loopgate builds for every platform it ships to, and that the
# builds it can run answer a real hook session exactly as the native Linux build does:
#
#   x86_64-unknown-linux-musl    built (static), run natively through tests/dist/hook-session.sh
#   aarch64-unknown-linux-musl   built (static); run under qemu-user when qemu-aarch64 is there
#   x86_64-pc-windows-gnu        built with mingw-w64, run under wine through the same session
#   aarch64-apple-darwin         the library and every dependency compiled and code-generated
#   x86_64-apple-darwin          checked (`cargo check`: the same cfgs as aarch64, another arch)
#
# The macOS builds stop before the final link: libgit2 links Apple's Security and CoreFoundation
# frameworks, which only Apple's SDK has (the release workflow links on a macOS runner).
# Debug builds: what is proven here is the platform code and the C dependencies, not speed.
#
#   contrib/ci/cross.sh [--install]   (--install: fetch what is missing: apt, pip, rustup)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CROSS_TARGET_DIR:-target/cross}

step() { printf '\n== cross: %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }

if [ "${1:-}" = --install ]; then
    step "installing what is missing"
    missing=()
    have x86_64-w64-mingw32-gcc || missing+=(gcc-mingw-w64-x86-64)
    have wine || missing+=(wine64 wine)
    have qemu-aarch64 || missing+=(qemu-user)
    have aarch64-linux-gnu-strip || missing+=(binutils-aarch64-linux-gnu)
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    have cargo-zigbuild && python3 -c 'import ziglang' 2>/dev/null ||
        python3 -m pip install -q ziglang cargo-zigbuild
    # Under pyenv a new console script appears on PATH only once its shims are rebuilt.
    if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
    rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl \
        x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin >/dev/null
fi

# A fixed cwd-independent path for the binaries each step produced.
bin() { printf '%s/%s/debug/%s' "$CARGO_TARGET_DIR" "$1" "$2"; }

step "native reference build (cargo test's, in the default target dir)"
env -u CARGO_TARGET_DIR cargo build --quiet --locked
reference=$(env -u CARGO_TARGET_DIR cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/loopgate

step "x86_64-unknown-linux-musl (static), run natively"
cargo zigbuild --quiet --locked --target x86_64-unknown-linux-musl
musl=$(bin x86_64-unknown-linux-musl loopgate)
file "$musl" | grep -q 'statically linked' || { file "$musl"; echo "cross: not static" >&2; exit 1; }
tests/dist/hook-session.sh --reference "$reference" "$musl"

step "aarch64-unknown-linux-musl (static)"
cargo zigbuild --quiet --locked --target aarch64-unknown-linux-musl
arm=$(bin aarch64-unknown-linux-musl loopgate)
file "$arm" | grep -q 'ARM aarch64' || { file "$arm"; echo "cross: not an aarch64 binary" >&2; exit 1; }
if have qemu-aarch64; then
    tests/dist/hook-session.sh --reference "$reference" qemu-aarch64 "$arm"
else
    echo "cross: qemu-aarch64 not installed: aarch64 built, not run"
fi

step "x86_64-pc-windows-gnu, run under wine"
cargo build --quiet --locked --target x86_64-pc-windows-gnu
exe=$(bin x86_64-pc-windows-gnu loopgate.exe)
# The prefix lives outside the checkout: its dosdevices link to / would send any tree walk there.
export WINEDEBUG=-all WINEPREFIX=${WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/loopgate-ci/wineprefix}
mkdir -p "$WINEPREFIX"
wineboot -i >/dev/null 2>&1 || true
# Debian 12's wine lacks bcryptprimitives.dll, which std imports (see the stand-in's source).
x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
    contrib/ci/wine-bcryptprimitives.c -ladvapi32
HOOK_SESSION_PATH_CMD="winepath -w" tests/dist/hook-session.sh --reference "$reference" wine "$exe"
# A real stack overflow under the crash handler: one line and the fail-open exit (1).
cargo build --quiet --locked --target x86_64-pc-windows-gnu --example crash_line
crash=$(bin x86_64-pc-windows-gnu examples/crash_line.exe)
said=$(wine "$crash" 2>&1 >/dev/null) && code=0 || code=$?
case $said in
    *"loopgate: internal error: it crashed"*) [ "$code" = 1 ] ||
        { echo "cross: the Windows crash line came with exit $code, not 1" >&2; exit 1; } ;;
    *) echo "cross: the Windows crash said: $said (exit $code)" >&2; exit 1 ;;
esac
echo "crash-line: OK: a stack overflow under wine said its one line and exited 1"

step "aarch64-apple-darwin: everything up to the final link"
cargo zigbuild --quiet --locked --lib --target aarch64-apple-darwin
step "x86_64-apple-darwin: cargo check"
cargo-zigbuild check --quiet --locked --target x86_64-apple-darwin

step "all targets built; the musl, aarch64 and Windows builds answered as the native build"
