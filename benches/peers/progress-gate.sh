#!/usr/bin/env bash
# Layer 3 of the design notes (Stop): the progress gate.
#
#   if stop_hook_active == true: exit 0          # prevent an infinite loop
#   changes = git diff --stat HEAD
#   if changes is empty AND no_progress_count >= 2: exit 0   # genuinely stuck, let it stop
#   elif changes is empty: no_progress_count += 1; block "No file changes detected. ..."
#   else: no_progress_count = 0; exit 0          # real progress, allow stop
#
# git runs in $CLAUDE_PROJECT_DIR when set (cwd follows the model's `cd`, the
# project root does not), else in the payload's cwd.
#
# State: $LOOP_HOOKS_STATE_DIR/<session>/progress-state.json, as in the design.
set -u

STATE_ROOT="${LOOP_HOOKS_STATE_DIR:-${TMPDIR:-/tmp}/claude-loop-hooks}"

INPUT=$(cat)
{
  IFS= read -r ACTIVE
  IFS= read -r SESSION_ID
  IFS= read -r CWD
} < <(jq -r '(.stop_hook_active // false), (.session_id // "unknown"), (.cwd // ".")' <<<"$INPUT")

if [ "$ACTIVE" = "true" ]; then
  exit 0
fi

SESSION_ID=${SESSION_ID//[^A-Za-z0-9_-]/_}
DIR="$STATE_ROOT/$SESSION_ID"
mkdir -p "$DIR"
STATE_FILE="$DIR/progress-state.json"

cd "${CLAUDE_PROJECT_DIR:-$CWD}" || exit 0
CHANGES=$(git diff --stat HEAD 2>/dev/null)

if [ -n "$CHANGES" ]; then
  printf '{"no_progress_count":0}\n' >"$STATE_FILE"
  exit 0
fi

# Only the no-change path needs the stored count, so only it pays for jq.
COUNT=0
[ -f "$STATE_FILE" ] && COUNT=$(jq -r '.no_progress_count // 0' "$STATE_FILE")

if [ "$COUNT" -ge 2 ]; then
  exit 0
fi

printf '{"no_progress_count":%d}\n' $((COUNT + 1)) >"$STATE_FILE"
cat <<'JSON'
{"decision":"block","reason":"No file changes detected. Review what was accomplished."}
JSON
exit 0
