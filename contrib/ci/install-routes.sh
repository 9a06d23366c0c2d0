#!/usr/bin/env bash
# The no-toolchain install routes, end to end, from the binaries contrib/ci/cross.sh built (no
# release build here): contrib/release.py packages them (archives, npm packages, SHA256SUMS),
# then tests/dist/npm-route.sh installs from a local registry on a fresh HOME with no Rust, and
# tests/dist/plugin-route.sh runs the real Claude Code with the plugin, which installs its binary
# once from that registry. Run after `cargo test` (the plugin route reuses its Claude Code CLI).
set -euo pipefail
cd "$(dirname "$0")/../.."
cross=${CROSS_TARGET_DIR:-target/cross}
dist=$cross/dist
stripped=$cross/stripped
rm -rf "$dist" "$stripped"
mkdir -p "$stripped"

# Debug builds carry ~90 MB of debug info that only slows the packaging (GNU strip reads x86_64
# ELF and PE; cross.sh --install brings the aarch64 one).
prebuilt=()
for spec in x86_64-unknown-linux-musl:loopgate:strip aarch64-unknown-linux-musl:loopgate:aarch64-linux-gnu-strip \
    x86_64-pc-windows-gnu:loopgate.exe:strip; do
    IFS=: read -r target exe strip <<<"$spec"
    mkdir -p "$stripped/$target"
    "$strip" -o "$stripped/$target/$exe" "$cross/$target/debug/$exe"
    prebuilt+=(--prebuilt "$target=$stripped/$target/$exe")
done
python3 contrib/release.py "$dist" "${prebuilt[@]}"
(cd "$dist" && sha256sum -c --quiet SHA256SUMS)
tests/dist/npm-route.sh "$dist"
tests/dist/plugin-route.sh "$dist"
