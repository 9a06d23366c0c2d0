// `loopgate/agent-sdk`: loopgate for agents built on the Claude Agent SDK
// (`@anthropic-ai/claude-agent-sdk`) that load no settings (`settingSources: []` or a list
// without 'user'), where the hooks `loopgate setup` writes into ~/.claude/settings.json never run.
//
//   import { query } from "@anthropic-ai/claude-agent-sdk";
//   import { loopgateHooks } from "loopgate/agent-sdk";
//   for await (const m of query({ prompt, options: { settingSources: [], hooks: loopgateHooks() } })) …
//
// Each callback runs `loopgate <subcommand>` with the hook input on stdin, as Claude Code runs a
// settings hook, and answers with what loopgate printed. Our own faults fail open: a missing
// binary, a crash, a timeout or output that is not JSON answer `{}` (go ahead) and print one
// line on stderr; nothing is thrown into the agent. See docs/agent-sdk.md.
"use strict";

const { spawn } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

// The events loopgate handles for Claude Code and its subcommand for each (what `loopgate
// setup` wires, src/setup/mod.rs HOOKS); `true` for the tool events, which take a matcher.
const EVENTS = [
  ["SessionStart", "session-start", false],
  ["PreToolUse", "pre-tool-use", true],
  ["PostToolUse", "post-tool-use", true],
  ["PostToolUseFailure", "post-tool-use-failure", true],
  ["PostToolBatch", "post-tool-batch", false],
  ["Stop", "stop", false],
  ["SubagentStop", "subagent-stop", false],
  ["UserPromptSubmit", "user-prompt-submit", false],
  ["ConfigChange", "config-change", false],
  ["FileChanged", "file-changed", false],
];

// Seconds one call may take, as in the settings `loopgate setup` writes.
const DEFAULT_TIMEOUT = 10;

const exe = process.platform === "win32" ? "loopgate.exe" : "loopgate";

function isFile(p) {
  try {
    return fs.statSync(p).isFile();
  } catch (_) {
    return false;
  }
}

// Where the npm launcher's `loopgate setup` copies the binary (bin/loopgate.js, stableBinDir).
function stableBin() {
  const home = os.homedir();
  let dir;
  if (process.platform === "win32") {
    dir = path.join(process.env.LOCALAPPDATA || path.join(home, "AppData", "Local"), "loopgate", "bin");
  } else if (process.platform === "darwin") {
    dir = path.join(home, "Library", "Application Support", "loopgate", "bin");
  } else {
    dir = path.join(process.env.XDG_DATA_HOME || path.join(home, ".local", "share"), "loopgate", "bin");
  }
  return path.join(dir, exe);
}

// The platform package's binary, when npm installed it next to this package.
function packagedBin() {
  try {
    const manifest = require.resolve(`@loopgate/cli-${process.platform}-${process.arch}/package.json`);
    return path.join(path.dirname(manifest), "bin", exe);
  } catch (_) {
    return null;
  }
}

/**
 * The loopgate binary the callbacks run: `options.bin`, else `$LOOPGATE_BIN`, else the copy
 * `loopgate setup` made, else the one this npm package installed, else `loopgate` on PATH.
 */
function findBinary(options = {}) {
  if (options.bin) return options.bin;
  if (process.env.LOOPGATE_BIN) return process.env.LOOPGATE_BIN;
  for (const candidate of [stableBin(), packagedBin()]) {
    if (candidate && isFile(candidate)) return candidate;
  }
  return "loopgate";
}

function warn(message) {
  try {
    process.stderr.write(`loopgate: ${message}; the call goes ahead unchecked\n`);
  } catch (_) {
    // stderr closed: nothing more to do
  }
}

// Runs `bin sub` with `input` on stdin; resolves with its JSON answer, or `{}` on any fault.
function runHook(bin, sub, input, env, timeoutMs, signal) {
  return new Promise((resolve) => {
    let done = false;
    let timer = null;
    const finish = (answer, problem) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      if (problem) warn(problem);
      resolve(answer);
    };
    let child;
    try {
      // Its own process group (POSIX), so a timeout kills whatever it started too.
      // `--sdk`: this copy names itself, so loopgate checks it at a session's first call.
      child = spawn(bin, ["--sdk", __filename, sub], {
        env,
        stdio: ["pipe", "pipe", "inherit"],
        windowsHide: true,
        detached: process.platform !== "win32",
      });
    } catch (e) {
      finish({}, `cannot run ${bin}: ${e.message}`);
      return;
    }
    const kill = () => {
      try {
        if (process.platform !== "win32" && child.pid) process.kill(-child.pid, "SIGKILL");
        else child.kill("SIGKILL");
      } catch (_) {
        // already gone
      }
    };
    timer = setTimeout(() => {
      kill();
      finish({}, `${bin} ${sub} took longer than ${timeoutMs / 1000} s`);
    }, timeoutMs);
    if (signal) {
      signal.addEventListener("abort", () => {
        kill();
        finish({}, null);
      }, { once: true });
    }
    const out = [];
    child.stdout.on("data", (d) => out.push(d));
    child.on("error", (e) => finish({}, `cannot run ${bin}: ${e.message}`));
    child.stdin.on("error", () => {}); // the binary may exit before reading everything
    child.on("close", (code, sig) => {
      if (code !== 0) {
        finish({}, `${bin} ${sub} ${sig ? `died of ${sig}` : `exited with ${code}`}`);
        return;
      }
      const text = Buffer.concat(out).toString("utf8").trim();
      if (text === "") {
        finish({}, null);
        return;
      }
      try {
        const answer = JSON.parse(text);
        if (answer && typeof answer === "object" && !Array.isArray(answer)) {
          finish(answer, null);
        } else {
          finish({}, `${bin} ${sub} printed JSON that is not an object`);
        }
      } catch (_) {
        finish({}, `${bin} ${sub} printed something that is not JSON`);
      }
    });
    child.stdin.end(JSON.stringify(input));
  });
}

/**
 * The SDK's `hooks` option: one callback per event loopgate handles, each running the loopgate
 * binary as a settings hook would run it. Options:
 *  - `bin`: the binary (default: see findBinary).
 *  - `projectDir`: the project the agent works in, given to loopgate as CLAUDE_PROJECT_DIR
 *    (default: the `cwd` of the session's first hook input, the query's working directory).
 *  - `attended`: whether a person watches the run (default false: SDK agents run unattended;
 *    Claude Code says the same of an SDK session's settings hooks).
 *  - `timeout`: seconds one call may take (default 10).
 *  - `env`: extra environment for the binary (a `LOOPGATE_*` setting may only tighten it; a hook takes no state dir or config file from its environment).
 * Merge with hooks of your own by concatenating the matcher arrays of an event.
 */
function loopgateHooks(options = {}) {
  const bin = findBinary(options);
  const timeoutMs = Math.max(1, Number(options.timeout) || DEFAULT_TIMEOUT) * 1000;
  const firstCwd = new Map();
  const hooks = {};
  for (const [event, sub, isTool] of EVENTS) {
    const callback = async (input, _toolUseId, context) => {
      try {
        const session = input && input.session_id;
        if (session && input.cwd && !firstCwd.has(session)) firstCwd.set(session, input.cwd);
        const projectDir = options.projectDir || firstCwd.get(session) || (input && input.cwd) || process.cwd();
        const env = {
          ...process.env,
          ...(options.env || {}),
          CLAUDE_PROJECT_DIR: projectDir,
          CLAUDE_CODE_SESSION_ATTENDED: options.attended ? "1" : "0",
        };
        // The helper's own variable; loopgate would warn of a LOOPGATE_* it does not know.
        delete env.LOOPGATE_BIN;
        return await runHook(bin, sub, input, env, timeoutMs, context && context.signal);
      } catch (e) {
        warn(`hook ${sub} failed: ${e && e.message}`);
        return {};
      }
    };
    const matcher = { hooks: [callback], timeout: Math.ceil(timeoutMs / 1000) + 5 };
    if (isTool) matcher.matcher = "*";
    hooks[event] = [matcher];
  }
  return hooks;
}

module.exports = { loopgateHooks, findBinary, EVENTS };
