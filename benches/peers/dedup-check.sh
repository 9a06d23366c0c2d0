#!/usr/bin/env bash
# Layer 1 of the design notes (PreToolUse): command deduplication.
#
#   hash = md5(tool_name + json(tool_input)); count = state[hash] || 0
#   if count >= 3: deny "Same command attempted 3 times. Try a different approach."
#   else: state[hash] = count + 1; allow
#
# A faithful bash+jq re-implementation, kept as lean as an honest author would
# write it (one jq call, one md5sum), so the latency bench compares loopgate
# with a fair peer and not a strawman. Like the design, it takes no lock, so
# parallel tool calls can race on a count file.
#
# State: one count file per hash in a per-session dir under
# $LOOP_HOOKS_STATE_DIR (default ${TMPDIR:-/tmp}/claude-loop-hooks).
set -u

LIMIT=3
STATE_ROOT="${LOOP_HOOKS_STATE_DIR:-${TMPDIR:-/tmp}/claude-loop-hooks}"

INPUT=$(cat)

# Line 1: session id. Line 2: tool_name + compact tool_input JSON; tojson never
# emits a raw newline, so the hash material always fits on one line.
{
  IFS= read -r SESSION_ID
  IFS= read -r MATERIAL
} < <(jq -r '(.session_id // "unknown"), (.tool_name + (.tool_input | tojson))' <<<"$INPUT")

# The session id names a directory: keep it to a safe alphabet.
SESSION_ID=${SESSION_ID//[^A-Za-z0-9_-]/_}
DIR="$STATE_ROOT/$SESSION_ID/dedup"
mkdir -p "$DIR"

HASH=$(printf '%s' "$MATERIAL" | md5sum)
HASH=${HASH%% *}
COUNT_FILE="$DIR/$HASH"

COUNT=0
[ -f "$COUNT_FILE" ] && COUNT=$(<"$COUNT_FILE")

if [ "$COUNT" -ge "$LIMIT" ]; then
  cat <<'JSON'
{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"Same command attempted 3 times. Try a different approach.","additionalContext":"Try a different approach - this command has failed repeatedly."}}
JSON
  exit 0
fi

echo $((COUNT + 1)) >"$COUNT_FILE"
exit 0
