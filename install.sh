#!/usr/bin/env bash
# Build loopgate, install the binary, and wire its hooks into Claude Code's settings (or, with
# --agent, into the hook files of the agent CLIs named).
# Run it again to update; run it with --uninstall to undo. See --help.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: ./install.sh [--agent CLI[,CLI...]]... [--observe] [--uninstall] [--restore] [--help]

Builds loopgate (static `cargo build-static` on x86_64 Linux, else `cargo build --release`), copies the binary into a bin directory and adds
loopgate's hooks to Claude Code's user settings, keeping every other setting and hook.
The settings file's previous contents are saved beside it as <file>.loopgate-bak.<time>
(the oldest backup and the newest ones are kept).
Safe to run again: it updates the binary and the hook entries in place.

Options:
  --agent CLIS Wire these agent CLIs instead of Claude Code alone: claude, codex, gemini,
               qwen, copilot, opencode, kilo; a comma list, or the option given again
               (--agent codex,gemini or --agent codex --agent gemini). Each is
               `loopgate setup --agent CLI` on its default file. With --uninstall: remove
               only these CLIs' hooks, keep the binary
  --observe    Install the hooks in observe mode: loopgate logs what it would do but never
               denies, blocks or injects anything
  --uninstall  Remove loopgate's hook entries (from every agent CLI's default file when
               --agent is not given), then the binary those hooks called
               (loopgate's state and config are left in place)
  --restore    Put the settings file back as it was before the last change
               (loopgate setup --restore; run it twice to undo it). Installs the binary
               again first if it is gone, so restored hooks never call a missing program
  -h, --help   Show this help

Environment:
  LOOPGATE_BIN_DIR  Where to put the binary. Default: ~/.local/bin if it is on PATH, else
                    ${CARGO_HOME:-~/.cargo}/bin if that is on PATH, else ~/.local/bin
  CLAUDE_SETTINGS   Claude Code settings file to edit. Default: ~/.claude/settings.json
  CODEX_HOME, COPILOT_HOME  Honoured as Codex CLI and Copilot CLI honour them
  CARGO_HOME, CARGO_TARGET_DIR  Honoured as cargo honours them
EOF
}

die() {
    printf 'install.sh: %s\n' "$*" >&2
    exit 1
}

observe=0
uninstall=0
restore=0
agents=()
add_agents() {
    local list=$1 name
    [ -n "$list" ] || die "--agent needs a CLI name (claude, codex, gemini, qwen, copilot, opencode, kilo)"
    local IFS=,
    for name in $list; do
        case $name in
            claude | codex | gemini | qwen | copilot | opencode | kilo) agents+=("$name") ;;
            *) die "--agent: unknown CLI '$name' (claude, codex, gemini, qwen, copilot, opencode, kilo)" ;;
        esac
    done
}
while [ $# -gt 0 ]; do
    arg=$1
    shift
    case $arg in
        --agent)
            [ $# -gt 0 ] || die "--agent needs a CLI name (claude, codex, gemini, qwen, copilot, opencode, kilo)"
            add_agents "$1"
            shift
            ;;
        --agent=*) add_agents "${arg#--agent=}" ;;
        --observe) observe=1 ;;
        --uninstall) uninstall=1 ;;
        --restore) restore=1 ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            printf "install.sh: unknown argument '%s'\n\n" "$arg" >&2
            usage >&2
            exit 2
            ;;
    esac
done

[ -n "${HOME:-}" ] || die "HOME is not set"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
settings=${CLAUDE_SETTINGS:-$HOME/.claude/settings.json}

# Whether a directory is on PATH (ignoring a trailing slash in either).
on_path() {
    local dir=${1%/} entry
    local IFS=:
    for entry in $PATH; do
        [ "${entry%/}" = "$dir" ] && return 0
    done
    return 1
}

if [ -n "${LOOPGATE_BIN_DIR:-}" ]; then
    bin_dir=$LOOPGATE_BIN_DIR
elif on_path "$HOME/.local/bin"; then
    bin_dir=$HOME/.local/bin
elif on_path "$cargo_home/bin"; then
    bin_dir=$cargo_home/bin
else
    bin_dir=$HOME/.local/bin
fi
case $bin_dir in
    /*) ;;
    *) bin_dir=$PWD/$bin_dir ;;
esac
bin_dir=${bin_dir%/}
bin=$bin_dir/loopgate

find_cargo() {
    if command -v cargo >/dev/null 2>&1; then
        cargo=cargo
    elif [ -x "$cargo_home/bin/cargo" ]; then
        cargo=$cargo_home/bin/cargo
    else
        die "cargo not found: install Rust from https://rustup.rs, then run this again"
    fi
}

# Builds the release binary and sets $built to its path.
build() {
    find_cargo
    # On x86_64 Linux: a static, non-PIE binary (`cargo build-static`, .cargo/config.toml), which
    # starts several times faster than a dynamic one; Claude Code starts one per hook event.
    local host sub=release
    # A cargo that cannot run (rustup with no default toolchain, a broken install) says why,
    # instead of the silent exit `set -e` would give.
    local about
    about=$("$cargo" -vV 2>&1) ||
        die "$cargo -vV failed: ${about:-no output} (with rustup: \`rustup default stable\`)"
    host=$(printf '%s\n' "$about" | sed -n 's/^host: //p')
    if [ "$host" = x86_64-unknown-linux-gnu ]; then
        printf 'Building loopgate (cargo build-static: release, static, non-PIE)...\n'
        (cd "$repo" && "$cargo" build-static)
        sub=$host/release
    elif [ -f "$repo/Cargo.lock" ]; then
        printf 'Building loopgate (cargo build --release)...\n'
        (cd "$repo" && "$cargo" build --release --locked)
    else
        printf 'Building loopgate (cargo build --release)...\n'
        (cd "$repo" && "$cargo" build --release)
    fi
    local target_dir
    target_dir=$(cd "$repo" && "$cargo" metadata --format-version 1 --no-deps 2>/dev/null |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p') || true
    if [ -z "$target_dir" ]; then
        target_dir=${CARGO_TARGET_DIR:-target}
        case $target_dir in
            /*) ;;
            *) target_dir=$repo/$target_dir ;;
        esac
    fi
    built=$target_dir/$sub/loopgate
    [ -x "$built" ] || die "the build finished but $built is missing"
}

# `setup` arguments for one agent CLI: Claude Code's settings file is $settings.
setup_for() {
    if [ "$1" = claude ]; then
        printf '%s\n' --settings "$settings"
    else
        printf '%s\n' --agent "$1"
    fi
}

# Any loopgate binary can edit the settings; prefer the installed one (no build needed).
find_runner() {
    if [ -x "$bin" ]; then
        runner=$bin
    elif command -v loopgate >/dev/null 2>&1; then
        runner=$(command -v loopgate)
    else
        build
        runner=$built
    fi
}

# Copies the built binary to $bin (atomically); sets $binary_state.
install_binary() {
    mkdir -p "$bin_dir"
    if [ -f "$bin" ] && cmp -s "$built" "$bin"; then
        binary_state="unchanged"
    else
        tmp=$(mktemp "$bin_dir/.loopgate.XXXXXX")
        trap 'rm -f "$tmp"' EXIT
        cp "$built" "$tmp"
        chmod 755 "$tmp"
        mv -f "$tmp" "$bin"
        trap - EXIT
        binary_state="installed"
    fi
}

if [ "$restore" = 1 ]; then
    if [ ! -x "$bin" ]; then
        # Restored hooks that call a deleted binary would fail on every tool call.
        printf 'no loopgate at %s: installing it again, so that the restored hooks can run it\n' "$bin"
        build
        install_binary
    fi
    runner=$bin
    [ ${#agents[@]} -gt 0 ] || agents=(claude)
    for agent in "${agents[@]}"; do
        mapfile -t args < <(setup_for "$agent")
        "$runner" setup --restore "${args[@]}"
    done
    exit 0
fi

if [ "$uninstall" = 1 ]; then
    find_runner
    if [ ${#agents[@]} -gt 0 ]; then
        printf '\nloopgate hooks removed (the binary stays: other CLIs may still use it)\n'
        for agent in "${agents[@]}"; do
            mapfile -t args < <(setup_for "$agent")
            printf '  %-8s %s\n' "$agent:" "$("$runner" setup --uninstall "${args[@]}")"
        done
        exit 0
    fi
    # The binaries the hooks call, wherever they are (not where an install would put one now).
    hooked=()
    while IFS= read -r path; do
        [ -n "$path" ] && hooked+=("$path")
    done < <(
        "$runner" setup --show-bin --settings "$settings" 2>/dev/null || true
        for agent in codex gemini qwen copilot opencode kilo; do
            "$runner" setup --show-bin --agent "$agent" 2>/dev/null || true
        done
    )
    summary=$("$runner" setup --uninstall --settings "$settings")
    # setup's notes (a running session would wire loopgate back) go last, after the summary.
    notes=$(printf '%s\n' "$summary" | sed -n 's/^note: //p')
    summary=$(printf '%s\n' "$summary" | grep -v '^note: ' || true)
    others=()
    for agent in codex gemini qwen copilot opencode kilo; do
        others+=("$agent: $("$runner" setup --uninstall --agent "$agent")")
    done
    removed_list=()
    for path in "${hooked[@]}" "$bin"; do
        case $path in
            /*/loopgate | /*/loopgate.exe) ;;
            *) continue ;; # a bare name on PATH, or not loopgate itself: left alone
        esac
        if [ -f "$path" ] || [ -L "$path" ]; then
            rm -f "$path"
            removed_list+=("removed $path")
            # The folder the install made for it goes too, when that leaves it empty.
            rmdir "$(dirname "$path")" 2>/dev/null || true
        fi
    done
    if [ ${#removed_list[@]} -gt 0 ]; then
        removed=$(printf '%s; ' "${removed_list[@]}")
        removed=${removed%; }
    else
        removed="no binary at $bin"
    fi
    printf '\nloopgate uninstalled\n'
    printf '  hooks:   %s\n' "$summary"
    for line in "${others[@]}"; do
        printf '           %s\n' "$line"
    done
    printf '  binary:  %s\n' "$removed"
    printf "  kept:    loopgate's state and config (delete them by hand if you want them gone)\n"
    if other=$(command -v loopgate 2>/dev/null); then
        printf '  note:    another loopgate is still on PATH at %s\n' "$other"
    fi
    if [ -n "$notes" ]; then
        printf '  note:    %s\n' "$notes"
    fi
    exit 0
fi

build
install_binary

[ ${#agents[@]} -gt 0 ] || agents=(claude)
summaries=()
for agent in "${agents[@]}"; do
    mapfile -t args < <(setup_for "$agent")
    setup_args=(setup --bin "$bin" "${args[@]}")
    [ "$observe" = 1 ] && setup_args+=(--observe)
    summaries+=("$("$bin" "${setup_args[@]}")")
done

printf '\nloopgate installed\n'
printf '  binary:  %s (%s)\n' "$bin" "$binary_state"
if [ "${agents[*]}" = claude ]; then
    printf '  hooks:   %s\n' "${summaries[0]}"
else
    printf '  hooks:\n'
    for i in "${!agents[@]}"; do
        printf '    %-8s %s\n' "${agents[$i]}:" "${summaries[$i]//$'\n'/$'\n             '}"
    done
fi
if [ "$observe" = 1 ]; then
    printf '  mode:    observe (logs decisions, never blocks; run ./install.sh without --observe to enforce)\n'
fi
if [ "${agents[*]}" = claude ]; then
    printf '  undo:    %s/install.sh --uninstall\n' "$repo"
else
    printf '  undo:    %s/install.sh --uninstall --agent %s\n' "$repo" "$(
        IFS=,
        printf '%s' "${agents[*]}"
    )"
fi
if ! on_path "$bin_dir"; then
    printf '\n%s is not on your PATH. The hooks call the binary by its full path, but to run\n' "$bin_dir"
    printf "loopgate yourself add this line to your shell's startup file:\n"
    # shellcheck disable=SC2016 # printed for the user, not expanded here
    printf '  export PATH="%s:$PATH"\n' "$bin_dir"
fi
