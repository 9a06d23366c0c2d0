#!/bin/sh
# Regenerates contrib/hot-functions.txt: the functions a hook call runs, in the order first run,
# for contrib/link-hot-first to place together. Needs valgrind and git; run from anywhere:
#
#   sh contrib/hot-functions.sh
#
# It builds a symbolised copy of the static binary, replays the recorded Claude Code session
# tests/fixtures/basic-* (every hook event loopgate answers) under callgrind, and lists each
# function it entered, its mangled name cut before the hash; then PreToolUse calls of commands
# that name paths. Code that valgrind's CPU model never
# takes (SHA-NI, PCLMULQDQ) is added by hand at the end.
set -eu
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$repo" && cargo build-static --quiet --config profile.release.strip=false --target-dir "$work/target")
bin="$work/target/x86_64-unknown-linux-gnu/release/loopgate"

git init -q "$work/project"
printf 'hello\n' >"$work/project/README"
git -C "$work/project" add README
git -C "$work/project" -c user.name=x -c user.email=x@x commit -qm init

n=0
for fixture in "$repo"/tests/fixtures/basic-*.json; do
    event="$(sed -n 's/.*"hook_event_name": *"\([A-Za-z]*\)".*/\1/p' "$fixture" | head -1)"
    case "$event" in SessionEnd | "") continue ;; esac
    sub="$(printf '%s' "$event" | sed -E 's/([a-z])([A-Z])/\1-\2/g' | tr 'A-Z' 'a-z')"
    n=$((n + 1))
    (cd "$work/project" && env -i PATH="$PATH" HOME="$work/home" CLAUDECODE=1 \
        CLAUDE_PROJECT_DIR="$work/project" \
        valgrind --tool=callgrind --demangle=no --dump-instr=no \
        --callgrind-out-file="$work/cg.$n" "$bin" --state-dir "$work/state" "$sub" <"$fixture" >/dev/null 2>&1) || true
done

# The guard's path work runs only for commands that name paths, which the fixture session's
# `echo` does not: a PreToolUse of ordinary commands that do (the benchmark's realistic rows).
pre="$(ls "$repo"/tests/fixtures/basic-*-PreToolUse-Bash.json | head -1)"
for command in 'cargo test --quiet' 'npm run build' 'pytest tests/test_a.py -x' \
    'git log --oneline | head -20 | grep fix | sort | uniq -c | sort -rn > /tmp/fixes.txt'; do
    n=$((n + 1))
    sed "s#\"command\": *\"[^\"]*\"#\"command\": \"$command\"#" "$pre" >"$work/pre.json"
    (cd "$work/project" && env -i PATH="$PATH" HOME="$work/home" CLAUDECODE=1 \
        CLAUDE_PROJECT_DIR="$work/project" \
        valgrind --tool=callgrind --demangle=no --dump-instr=no \
        --callgrind-out-file="$work/cg.$n" "$bin" --state-dir "$work/state" pre-tool-use <"$work/pre.json" >/dev/null 2>&1) || true
done

out="$repo/contrib/hot-functions.txt"
{
    echo "# The functions hook calls run, in the order first run (contrib/hot-functions.sh wrote"
    echo "# this; contrib/link-hot-first reads it). Rust names are cut before their hash."
    i=1
    while [ "$i" -le "$n" ]; do
        grep -oE '^c?fn=\([0-9]+\) [^ ]+' "$work/cg.$i" | cut -d' ' -f2
        i=$((i + 1))
    done | sed -E 's/17h[0-9a-f]{16}E$//' | grep -v '^0x' | awk '!seen[$0]++'
    echo "# Not taken under valgrind, taken on the machines loopgate runs on:"
    echo "_ZN4sha26sha2563x8613digest_blocks"
    echo "_ZN9crc32fast11specialized9pclmulqdq9calculate"
    echo "_ZN9crc32fast11specialized9pclmulqdq14calculate_avx2"
    echo "_ZN9crc32fast11specialized9pclmulqdq16calculate_avx512"
} >"$out"
echo "wrote $out ($(grep -vc '^#' "$out") functions from $n hook calls)"
