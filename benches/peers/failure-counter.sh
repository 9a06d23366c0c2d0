#!/usr/bin/env bash
# Layer 2 of the design notes, PostToolUseFailure half: count consecutive
# failures and speak up at 5.
#
#   failures += 1
#   if failures >= 5: output systemMessage "5 consecutive failures. Stop and reconsider your approach."
#
# Faithful to the design, including its use of systemMessage. Note that
# Claude Code 2.1.330 never sends systemMessage to the model (it is only shown
# to the user), so this warning does not reach the agent it is meant for.
# No lock, as in the design.
#
# State: $LOOP_HOOKS_STATE_DIR/<session>/failure-count, a single integer.
set -u

LIMIT=5
STATE_ROOT="${LOOP_HOOKS_STATE_DIR:-${TMPDIR:-/tmp}/claude-loop-hooks}"

SESSION_ID=$(jq -r '.session_id // "unknown"')
SESSION_ID=${SESSION_ID//[^A-Za-z0-9_-]/_}
DIR="$STATE_ROOT/$SESSION_ID"
mkdir -p "$DIR"
COUNT_FILE="$DIR/failure-count"

FAILURES=0
[ -f "$COUNT_FILE" ] && FAILURES=$(<"$COUNT_FILE")
FAILURES=$((FAILURES + 1))
echo "$FAILURES" >"$COUNT_FILE"

if [ "$FAILURES" -ge "$LIMIT" ]; then
  printf '{"systemMessage":"%d consecutive failures. Stop and reconsider your approach."}\n' "$FAILURES"
fi
exit 0
