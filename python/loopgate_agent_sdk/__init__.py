"""loopgate for agents built on the Claude Agent SDK for Python (``claude-agent-sdk``).

An SDK agent that loads no settings (``setting_sources=[]``, or a list without ``"user"``) never
runs the hooks ``loopgate setup`` writes into ``~/.claude/settings.json``. This module gives it
the same hooks as SDK callbacks::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from loopgate_agent_sdk import loopgate_hooks

    options = ClaudeAgentOptions(setting_sources=[], hooks=loopgate_hooks())

Each callback runs ``loopgate <subcommand>`` with the hook input on stdin, as Claude Code runs a
settings hook, and answers with what loopgate printed. Faults of loopgate's own fail open: a
missing binary, a crash, a timeout or output that is not JSON answer ``{}`` (the call goes
ahead) with one line on stderr; nothing is raised into the agent. See docs/agent-sdk.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

__all__ = ["EVENTS", "find_binary", "loopgate_hooks"]

#: The events loopgate handles for Claude Code, its subcommand for each, and whether it is a
#: tool event (which takes a matcher): what ``loopgate setup`` wires (src/setup/mod.rs HOOKS).
EVENTS: tuple[tuple[str, str, bool], ...] = (
    ("SessionStart", "session-start", False),
    ("PreToolUse", "pre-tool-use", True),
    ("PostToolUse", "post-tool-use", True),
    ("PostToolUseFailure", "post-tool-use-failure", True),
    ("PostToolBatch", "post-tool-batch", False),
    ("Stop", "stop", False),
    ("SubagentStop", "subagent-stop", False),
    ("UserPromptSubmit", "user-prompt-submit", False),
    ("ConfigChange", "config-change", False),
    ("FileChanged", "file-changed", False),
)

#: Seconds one call may take, as in the settings ``loopgate setup`` writes.
DEFAULT_TIMEOUT = 10.0

_EXE = "loopgate.exe" if sys.platform == "win32" else "loopgate"

#: This file, as installed (a venv's site-packages): what loopgate compares with its own copy.
_SELF = str(Path(__file__).resolve())


def _stable_bin() -> Path:
    """Where the npm package's ``loopgate setup`` copies the binary the hooks run."""
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "loopgate" / "bin" / _EXE


def find_binary(bin: str | None = None) -> str:
    """The loopgate binary the callbacks run: ``bin``, else ``$LOOPGATE_BIN``, else the copy
    ``loopgate setup`` made, else ``loopgate`` on PATH (``~/.local/bin`` for install.sh)."""
    if bin:
        return bin
    if os.environ.get("LOOPGATE_BIN"):
        return os.environ["LOOPGATE_BIN"]
    stable = _stable_bin()
    if stable.is_file():
        return str(stable)
    return shutil.which("loopgate") or "loopgate"


def _warn(message: str) -> None:
    try:
        print(f"loopgate: {message}; the call goes ahead unchecked", file=sys.stderr, flush=True)
    except Exception:  # stderr closed: nothing more to do
        pass


def _run(bin: str, sub: str, payload: bytes, env: Mapping[str, str], timeout: float) -> dict:
    """``bin sub`` with ``payload`` on stdin: its JSON answer, or ``{}`` on any fault."""
    posix = os.name == "posix"
    try:
        # Its own process group, so a timeout kills whatever it started too (a child holding its
        # stdout would otherwise keep the wait going).
        # ``--sdk``: this copy names itself, so loopgate checks it at a session's first call.
        child = subprocess.Popen(
            [bin, "--sdk", _SELF, sub],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=dict(env),
            start_new_session=posix,
        )
    except OSError as e:
        _warn(f"cannot run {bin}: {e}")
        return {}
    try:
        out, _ = child.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        if posix:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass
        child.kill()
        child.communicate()
        _warn(f"{bin} {sub} took longer than {timeout:g} s")
        return {}
    if child.returncode != 0:
        _warn(f"{bin} {sub} exited with {child.returncode}")
        return {}
    text = out.decode("utf-8", "replace").strip()
    if not text:
        return {}
    try:
        answer = json.loads(text)
    except ValueError:
        _warn(f"{bin} {sub} printed something that is not JSON")
        return {}
    if not isinstance(answer, dict):
        _warn(f"{bin} {sub} printed JSON that is not an object")
        return {}
    return answer


async def _in_thread(fn: Callable[[], dict]) -> dict:
    """Runs the blocking call off the event loop (anyio, which the SDK runs on)."""
    try:
        import anyio.to_thread
    except ImportError:  # pragma: no cover - the SDK depends on anyio
        return fn()
    return await anyio.to_thread.run_sync(fn)


def loopgate_hooks(
    *,
    bin: str | None = None,
    project_dir: str | None = None,
    attended: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> dict[Any, list[Any]]:
    """The ``hooks`` option of ``ClaudeAgentOptions``: one ``HookMatcher`` per event loopgate
    handles, each running the loopgate binary as a settings hook would run it.

    - ``bin``: the binary (default: see :func:`find_binary`).
    - ``project_dir``: the project, given to loopgate as ``CLAUDE_PROJECT_DIR`` (default: the
      ``cwd`` of the session's first hook input, the query's working directory).
    - ``attended``: whether a person watches the run (default False: SDK agents run unattended,
      and Claude Code says the same of an SDK session's settings hooks).
    - ``timeout``: seconds one call may take (default 10).
    - ``env``: extra environment for the binary (a ``LOOPGATE_*`` setting may only tighten it; a hook takes no state dir or config file from its environment).

    Merge with hooks of your own by concatenating the matcher lists of an event.
    """
    from claude_agent_sdk import HookMatcher

    program = find_binary(bin)
    limit = max(1.0, float(timeout or DEFAULT_TIMEOUT))
    extra = dict(env or {})
    first_cwd: dict[str, str] = {}

    def callback_for(sub: str) -> Callable[..., Awaitable[dict]]:
        async def callback(input: Any, tool_use_id: str | None, context: Any) -> dict:
            try:
                data = dict(input)
                session = str(data.get("session_id") or "")
                cwd = data.get("cwd")
                if session and cwd and session not in first_cwd:
                    first_cwd[session] = cwd
                project = project_dir or first_cwd.get(session) or cwd or os.getcwd()
                run_env = {**os.environ, **extra}
                run_env["CLAUDE_PROJECT_DIR"] = str(project)
                run_env["CLAUDE_CODE_SESSION_ATTENDED"] = "1" if attended else "0"
                # The helper's own variable; loopgate would warn of a LOOPGATE_* it does not know.
                run_env.pop("LOOPGATE_BIN", None)
                payload = json.dumps(data).encode("utf-8")
                return await _in_thread(lambda: _run(program, sub, payload, run_env, limit))
            except Exception as e:  # never raise into the agent
                _warn(f"hook {sub} failed: {e}")
                return {}

        return callback

    hooks: dict[Any, list[Any]] = {}
    for event, sub, is_tool in EVENTS:
        hooks[event] = [
            HookMatcher(
                matcher="*" if is_tool else None,
                hooks=[callback_for(sub)],
                timeout=limit + 5,
            )
        ]
    return hooks
