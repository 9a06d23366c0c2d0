#!/usr/bin/env bash
# Drives one real hook session through a loopgate binary, from the payloads Claude Code sent when
# they were captured (tests/fixtures), and checks what a user would notice:
#   - the same failing Bash command is allowed three times and denied on its 4th call,
#   - a Stop after a turn whose two edits were rejected is blocked,
#   - `loopgate status` lists both sessions and `loopgate doctor` answers.
#
#   tests/dist/hook-session.sh [--reference BIN] CMD [ARG...]
#
# CMD [ARG...] runs loopgate: a path (`target/x86_64-unknown-linux-musl/release/loopgate`) or a
# command (`wine64 loopgate.exe`). With --reference, the same session first runs through BIN (a
# native build) and every hook answer (stdout and exit code) must be byte-for-byte the same.
#
# Environment: HOOK_SESSION_PATH_CMD, a command that turns a Unix path into the form the tested
# binary sees (e.g. `winepath -w`), used for the project path inside its payloads (the
# reference's stay Unix paths). HOOK_SESSION_KEEP=1
# keeps the temp dir. Exits non-zero, saying which step, on the first difference.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fixtures=$(cd "$here/../fixtures" && pwd)

reference=
if [ "${1:-}" = --reference ]; then
    [ $# -ge 3 ] || { echo "usage: $0 [--reference BIN] CMD [ARG...]" >&2; exit 2; }
    reference=$2
    shift 2
fi
[ $# -ge 1 ] || { echo "usage: $0 [--reference BIN] CMD [ARG...]" >&2; exit 2; }

# A relative path would break once the calls run in the project dir.
absolute() {
    case $1 in
        */*) printf '%s/%s\n' "$(cd "$(dirname "$1")" && pwd)" "$(basename "$1")" ;;
        *) printf '%s\n' "$1" ;;
    esac
}

fail() {
    printf 'hook-session: FAIL: %s\n' "$*" >&2
    exit 1
}

# One session in a fresh temp dir through the command "$@"; the answers go to $answers (one
# block per hook call: the step, the exit code, stdout), the manual commands' output beside it.
session() {
    local dir=$1 path_cmd=$2
    shift 2
    local home=$dir/home proj=$dir/project answers=$dir/answers
    mkdir -p "$home" "$proj"
    printf 'hello\n' >"$proj/README.md"
    git -C "$proj" init -q
    git -C "$proj" add README.md
    git -C "$proj" -c user.name=t -c user.email=t@example.invalid -c commit.gpgsign=false \
        commit -q -m init
    local proj_in=$proj
    if [ -n "$path_cmd" ]; then
        # shellcheck disable=SC2086 # a command with its arguments
        proj_in=$($path_cmd "$proj")
    fi
    # The payload's project path, as JSON string content (a Windows path has backslashes).
    local proj_json=${proj_in//\\/\\\\}
    # The same as a sed replacement, where a backslash and the delimiter need escaping again.
    local proj_sed=${proj_json//\\/\\\\}
    proj_sed=${proj_sed//#/\\#}

    local -a env=(env -i "PATH=$PATH" "HOME=$home" "XDG_CONFIG_HOME=$dir/xdg"
        "LOOPGATE_STATE_DIR=$dir/state" "CLAUDE_PROJECT_DIR=$proj_in"
        "CLAUDE_CODE_SESSION_ATTENDED=0" "LANG=C.UTF-8")
    [ -n "${WINEPREFIX:-}" ] && env+=("WINEPREFIX=$WINEPREFIX")
    [ -n "${WINEDEBUG:-}" ] && env+=("WINEDEBUG=$WINEDEBUG")

    : >"$answers"
    # call STEP FIXTURE SUBCOMMAND [SED]: sends the fixture (its paths moved into this session,
    # SED applied) to the binary and records the answer in $last_out / $last_code.
    local -a bin=("$@")
    call() { hook "$1" "$2" "$3" "${4:-}" "${bin[@]}"; }
    hook() {
        local step=$1 fixture=$2 sub=$3 extra=$4
        shift 4
        local payload out code
        payload=$(sed -e "s#/home/dev/project#${proj_sed}#g" -e "s#/home/dev#/nonexistent#g" \
            ${extra:+-e "$extra"} "$fixtures/$fixture")
        set +e
        # The state dir on the hook's command line, as setup writes it: a hook never takes it
        # from its environment (the manual commands below do).
        out=$(printf '%s\n' "$payload" |
            (cd "$proj" && "${env[@]}" "$@" --state-dir "$dir/state" "$sub") 2>>"$dir/stderr")
        code=$?
        set -e
        [ "$code" = 2 ] && fail "$step: exit code 2 (loopgate never exits 2)"
        # SessionStart's watchPaths start with the binary's own path, which differs by build
        # (and under wine is a Windows path): compared as <BINARY>.
        local recorded=${out//"$proj_json"/<PROJECT>}
        recorded=$(printf '%s' "$recorded" | sed -e 's#"watchPaths":\["[^"]*"#"watchPaths":["<BINARY>"#')
        printf '== %s\nexit %s\n%s\n' "$step" "$code" "$recorded" >>"$answers"
        last_out=$out
        last_code=$code
    }

    # Session 1: the same failing command, four times.
    call session-start basic-01-SessionStart.json session-start
    call prompt basic-02-UserPromptSubmit.json user-prompt-submit
    local n
    for n in 1 2 3 4; do
        local id="s/toolu_mock_1_0/toolu_hs_$n/"
        call "pre-$n" basic-06-PreToolUse-Bash.json pre-tool-use "$id"
        if [ "$n" -lt 4 ]; then
            [ "$last_code" = 0 ] && [ -z "$last_out" ] ||
                fail "call $n of the failing command was not silently allowed (exit $last_code): $last_out"
            call "failure-$n" basic-07-PostToolUseFailure-Bash.json post-tool-use-failure "$id"
            call "batch-$n" basic-08-PostToolBatch.json post-tool-batch "$id"
        fi
    done
    [ "$last_code" = 0 ] || fail "the 4th call's answer exited $last_code"
    case $last_out in
        '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"'*)
            ;;
        *) fail "the 4th identical failing call was not denied: $last_out" ;;
    esac

    # Session 2: two edits rejected (old_string not found), then the model stops.
    call session-start-2 edit_not_found-01-SessionStart.json session-start
    call prompt-2 edit_not_found-02-UserPromptSubmit.json user-prompt-submit
    call rejected-edit-1 edit_not_found-03-PostToolBatch.json post-tool-batch
    call rejected-edit-2 edit_not_found-04-PostToolBatch.json post-tool-batch
    call stop edit_not_found-08-Stop.json stop
    [ "$last_code" = 0 ] || fail "the Stop answer exited $last_code"
    case $last_out in
        '{"decision":"block","reason":"'*) ;;
        *) fail "the Stop after two rejected edits was not blocked: $last_out" ;;
    esac

    # The manual commands answer. Their text holds times and paths, so it is checked, not compared.
    local status
    status=$(cd "$proj" && "${env[@]}" "$@" status 2>&1) || fail "loopgate status failed: $status"
    for sid in 7fe72480 6c704179; do
        case $status in *"$sid"*) ;; *) fail "loopgate status does not list session $sid: $status" ;; esac
    done
    local doctor code
    set +e
    doctor=$(cd "$proj" && "${env[@]}" "$@" doctor 2>&1)
    code=$?
    set -e
    # 1 is doctor's "some check failed" (here: no hooks wired in this throwaway HOME).
    [ "$code" = 0 ] || [ "$code" = 1 ] || fail "loopgate doctor exited $code: $doctor"
    case $doctor in *"state dir:"*) ;; *) fail "loopgate doctor did not check the state dir: $doctor" ;; esac
    printf '%s\n' "$status" >"$dir/status"
    printf '%s\n' "$doctor" >"$dir/doctor"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/loopgate-hook-session.XXXXXX")
if [ "${HOOK_SESSION_KEEP:-}" = 1 ]; then
    echo "hook-session: keeping $tmp" >&2
else
    trap 'rm -rf "$tmp"' EXIT
fi

# Every argument naming a file (the binary, also when it follows `wine64` or `qemu-aarch64`).
resolved=()
for arg in "$@"; do
    if [ -f "$arg" ]; then resolved+=("$(absolute "$arg")"); else resolved+=("$arg"); fi
done
set -- "${resolved[@]}"
[ -z "$reference" ] || reference=$(absolute "$reference")
mkdir -p "$tmp/test"
session "$tmp/test" "${HOOK_SESSION_PATH_CMD:-}" "$@"
if [ -n "$reference" ]; then
    mkdir -p "$tmp/reference"
    session "$tmp/reference" "" "$reference"
    if ! diff -u "$tmp/reference/answers" "$tmp/test/answers" >"$tmp/diff"; then
        cat "$tmp/diff" >&2
        fail "the answers of '$*' differ from those of $reference (above: - reference, + tested)"
    fi
    echo "hook-session: OK: '$*' answered all $(grep -c '^== ' "$tmp/test/answers") hook calls exactly as $reference"
else
    echo "hook-session: OK: '$*' denied the 4th failing call, blocked the Stop, status and doctor answered"
fi
