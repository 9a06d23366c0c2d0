#!/usr/bin/env bash
# A registry of its own for `e2e::plugin_install` when LOOPGATE_E2E_NPM_REGISTRY is not set
# (a plain `cargo test`): packages BIN, the binary under test, as this host's npm package with
# contrib/release.py, starts tests/dist/registry.sh's throwaway verdaccio, publishes to it, prints
# `REGISTRY=<url>`, then serves until its stdin closes (the test holds it) and stops.
#
#   tests/dist/local-registry.sh BIN OUT
#
# OUT receives the packages. Needs node, npm and python3; verdaccio is installed once into
# target/dist-cache. CI's install-routes.sh sets the variable instead, with the release builds.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 2 ] || { echo "usage: $0 BIN OUT" >&2; exit 2; }
bin=$1
out=$2
case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) target=x86_64-unknown-linux-musl ;;
    Linux-aarch64) target=aarch64-unknown-linux-musl ;;
    Darwin-x86_64) target=x86_64-apple-darwin ;;
    Darwin-arm64) target=aarch64-apple-darwin ;;
    *) echo "local-registry: no npm package for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac
rm -rf "$out"
mkdir -p "$out"
# Debug builds carry ~90 MB of debug info, which only slows packing and publishing.
cp "$bin" "$out/loopgate"
strip "$out/loopgate" 2>/dev/null || true
python3 "$here/../../contrib/release.py" "$out/dist" --prebuilt "$target=$out/loopgate" >&2

# shellcheck source=tests/dist/registry.sh
. "$here/registry.sh"
registry_session local-registry "$out/dist" >&2
echo "REGISTRY=$registry_url"
cat >/dev/null
