"""Runs one Claude Agent SDK (Python) query the way an SDK app would, for the e2e suite
(tests/e2e/agent_sdk). Configured by the JSON in $LG_SDK_CONFIG, as driver.mjs is:
prompt, settingSources (absent: not passed), hooks ("none" | "loopgate" | "record"),
recordDir, recordEvents, options (more ClaudeAgentOptions fields, by their Python names).
Prints every SDK message as one JSON line on stdout."""

import asyncio
import dataclasses
import json
import os
import time

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, query

config = json.loads(os.environ["LG_SDK_CONFIG"])


# The SDK's message and block classes, named as the CLI's stream-json names them, so the suite
# reads both SDKs' output alike.
KINDS = {
    "ResultMessage": "result",
    "SystemMessage": "system",
    "AssistantMessage": "assistant",
    "UserMessage": "user",
    "TextBlock": "text",
    "ToolUseBlock": "tool_use",
    "ToolResultBlock": "tool_result",
    "ThinkingBlock": "thinking",
}


def jsonable(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = KINDS.get(type(value).__name__, type(value).__name__)
        fields = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if kind in ("user", "assistant"):
            content = fields.pop("content")
            role = kind
            return {"type": kind, "message": {"role": role, "content": content}, **fields}
        return {"type": kind, **fields}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


async def main():
    kwargs = dict(config.get("options") or {})
    if "settingSources" in config:
        kwargs["setting_sources"] = config["settingSources"]
    if config.get("hooks") == "loopgate":
        from loopgate_agent_sdk import loopgate_hooks

        kwargs["hooks"] = loopgate_hooks()
    elif config.get("hooks") == "record":
        counter = [0]

        async def record(input, tool_use_id, context):
            counter[0] += 1
            name = f"{time.time_ns()}-{counter[0]:04d}.json"
            with open(os.path.join(config["recordDir"], name), "w") as f:
                json.dump({"input": input, "toolUseId": tool_use_id}, f)
            return {}

        kwargs["hooks"] = {e: [HookMatcher(hooks=[record])] for e in config["recordEvents"]}
    options = ClaudeAgentOptions(**kwargs)
    async for message in query(prompt=config["prompt"], options=options):
        print(json.dumps(jsonable(message), default=str), flush=True)


asyncio.run(main())
