// loopgate's plugin for OpenCode and Kilo CLI, which run no hook commands: it runs the loopgate
// binary on each tool call and session event, as the other CLIs' hooks do, and carries out its
// answer (what was observed of the plugin API: docs/opencode-observed.md).
//
// - tool.execute.before: `deny` is thrown, and the model reads the message as the call's result;
//   `halt` (the turn's ceiling) aborts the session, then throws: no model request follows.
// - tool.execute.after: `context` is appended to the tool's output, the one text the model reads.
// - a tool that throws reaches no tool.execute.after: its part's `error` state is the failure.
// - session.idle is the turn's end (Stop). `opencode run` exits there, and a prompt sent from it
//   gets no model request (observed), so a `block` of the progress gate is logged, not enforced.
//
// Fails open: a binary that is missing, crashes, times out or answers no JSON lets the call go
// ahead with one line on stderr; only a deliberate refusal throws.
//
// `loopgate setup --agent opencode|kilo` writes this file with COMMAND and AGENT filled in; the
// npm package's copy (COMMAND null) runs `loopgate` from PATH, or $LOOPGATE_BIN.

import { spawn } from "node:child_process"

const COMMAND = null
const AGENT = "opencode"
const TIMEOUT_MS = 10000
// Two copies loaded in one process (a user and a project copy) must judge each event once.
const CLAIMED = Symbol.for("loopgate.opencode.claimed")

function claim(key) {
  const seen = (globalThis[CLAIMED] ??= new Set())
  if (seen.has(key)) return false
  seen.add(key)
  if (seen.size > 4096) seen.delete(seen.values().next().value)
  return true
}

function say(line) {
  try {
    process.stderr.write(line.endsWith("\n") ? line : line + "\n")
  } catch {}
}

function command() {
  if (Array.isArray(COMMAND) && COMMAND.length) return COMMAND
  return [process.env.LOOPGATE_BIN || "loopgate", "--agent", AGENT]
}

// The binary's answer to `payload` on `sub`, or null (nothing to do, or our own fault).
function judge(sub, payload, cwd) {
  const [program, ...args] = command()
  return new Promise((resolve) => {
    let out = ""
    let err = ""
    let done = false
    const finish = (answer, problem) => {
      if (done) return
      done = true
      if (problem) say(`loopgate: ${problem}; the call goes ahead`)
      resolve(answer)
    }
    let child
    try {
      child = spawn(program, [...args, sub], { cwd, stdio: ["pipe", "pipe", "pipe"] })
    } catch (e) {
      return finish(null, `cannot run ${program}: ${e?.message ?? e}`)
    }
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL")
      } catch {}
      finish(null, `${program} ${sub} took over ${TIMEOUT_MS} ms`)
    }, TIMEOUT_MS)
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    child.on("error", (e) => {
      clearTimeout(timer)
      finish(null, `cannot run ${program}: ${e?.message ?? e}`)
    })
    child.on("close", () => {
      clearTimeout(timer)
      // The binary's own notices and fault lines, as a hook's stderr is shown elsewhere.
      if (err.trim()) say(err.trim())
      const text = out.trim()
      if (!text) return finish(null)
      try {
        const answer = JSON.parse(text)
        finish(answer && typeof answer === "object" ? answer : null)
      } catch {
        finish(null, `${program} ${sub} answered no JSON`)
      }
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

export const LoopgatePlugin = async ({ client, directory }) => {
  // A subagent's session names its parent; loopgate keeps one session per user session and
  // tracks the child as an agent of it, as it does for Claude Code's subagents.
  const parents = new Map()
  // Guidance for a call that went ahead, appended to its output.
  const pending = new Map()
  // The last prompt or call of each session: session.idle fires twice after an abort
  // (observed), and one turn has one end.
  const last = new Map()

  const who = (sessionID) => {
    const parent = parents.get(sessionID)
    return parent
      ? { session_id: parent, agent_id: sessionID, cwd: directory }
      : { session_id: sessionID, cwd: directory }
  }

  const abort = async (sessionID, answer) => {
    if (answer.message) say(answer.message)
    for (const id of new Set([sessionID, parents.get(sessionID)])) {
      if (!id) continue
      try {
        await client.session.abort({ path: { id } })
      } catch (e) {
        say(`loopgate: cannot abort session ${id}: ${e?.message ?? e}`)
      }
    }
  }

  return {
    "chat.message": async (input, output) => {
      if (output?.message?.role !== "user") return
      const prompt = (output.parts ?? [])
        .filter((p) => p.type === "text" && !p.synthetic)
        .map((p) => p.text)
        .join("\n")
      const key = `prompt:${output.message.id ?? prompt}`
      last.set(input.sessionID, key)
      if (!prompt.trim() || !claim(key)) return
      await judge("user-prompt-submit", {
        hook_event_name: "UserPromptSubmit",
        ...who(input.sessionID),
        prompt,
      }, directory)
    },

    "tool.execute.before": async (input, output) => {
      last.set(input.sessionID, input.callID)
      if (!claim(`pre:${input.callID}`)) return
      const answer = await judge("pre-tool-use", {
        hook_event_name: "PreToolUse",
        ...who(input.sessionID),
        tool_name: input.tool,
        tool_input: output?.args ?? {},
        tool_use_id: input.callID,
      }, directory)
      if (!answer) return
      if (answer.decision === "deny" || answer.decision === "halt") {
        // Its error state is the refusal, not a failure of the tool: claimed here, so that no
        // copy of the plugin reports it.
        claim(`fail:${input.callID}`)
        if (answer.decision === "halt") await abort(input.sessionID, answer)
        throw new Error(answer.reason || "loopgate refused this call")
      }
      if (answer.context) pending.set(input.callID, answer.context)
    },

    "tool.execute.after": async (input, output) => {
      if (!claim(`post:${input.callID}`)) return
      const exit = output?.metadata?.exit
      const answer = await judge("post-tool-use", {
        hook_event_name: "PostToolUse",
        ...who(input.sessionID),
        tool_name: input.tool,
        tool_input: input.args ?? {},
        tool_use_id: input.callID,
        tool_response: { output: output?.output ?? "", metadata: { exit } },
      }, directory)
      const notes = [pending.get(input.callID), answer?.context ?? answer?.reason]
      pending.delete(input.callID)
      const told = notes.filter(Boolean).join("\n\n")
      if (told && output && typeof output.output === "string") output.output += `\n\n${told}`
      if (answer?.decision === "halt") await abort(input.sessionID, answer)
    },

    event: async ({ event }) => {
      const props = event?.properties ?? {}
      switch (event?.type) {
        case "session.created":
        case "session.updated": {
          const info = props.info ?? {}
          if (info.id && info.parentID) parents.set(info.id, info.parentID)
          return
        }
        case "message.part.updated": {
          const part = props.part ?? {}
          if (part.type !== "tool" || part.state?.status !== "error") return
          if (!claim(`fail:${part.callID}`)) return
          pending.delete(part.callID)
          await judge("post-tool-use-failure", {
            hook_event_name: "PostToolUseFailure",
            ...who(part.sessionID),
            tool_name: part.tool,
            tool_input: part.state?.input ?? {},
            tool_use_id: part.callID,
            error: String(part.state?.error ?? "error"),
          }, directory)
          return
        }
        case "session.idle": {
          const id = props.sessionID
          if (!id || !claim(`idle:${id}:${last.get(id) ?? ""}`)) return
          const sub = parents.has(id) ? "subagent-stop" : "stop"
          const answer = await judge(sub, {
            hook_event_name: sub === "stop" ? "Stop" : "SubagentStop",
            ...who(id),
            stop_hook_active: false,
          }, directory)
          if (answer?.decision === "block") {
            say(`loopgate: ${String(answer.reason ?? "").replace(/^loopgate: /, "")}`)
          }
          return
        }
      }
    },
  }
}
