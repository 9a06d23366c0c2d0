#!/usr/bin/env bash
# Layer 2 of the design notes, PostToolUse half: any success resets the
# consecutive-failure counter that failure-counter.sh keeps.
#
#   failures = 0
#
# jq is still needed, only to find the session's state dir.
#
# State: $LOOP_HOOKS_STATE_DIR/<session>/failure-count, a single integer.
set -u

STATE_ROOT="${LOOP_HOOKS_STATE_DIR:-${TMPDIR:-/tmp}/claude-loop-hooks}"

SESSION_ID=$(jq -r '.session_id // "unknown"')
SESSION_ID=${SESSION_ID//[^A-Za-z0-9_-]/_}
DIR="$STATE_ROOT/$SESSION_ID"
mkdir -p "$DIR"
echo 0 >"$DIR/failure-count"
exit 0
