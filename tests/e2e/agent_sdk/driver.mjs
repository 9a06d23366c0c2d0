// Runs one Claude Agent SDK (TypeScript) query the way an SDK app would, for the e2e suite
// (tests/e2e/agent_sdk). Configured by the JSON in $LG_SDK_CONFIG:
//   prompt          the prompt
//   settingSources  the option as given; absent: not passed (the SDK's default)
//   hooks           "none" | "loopgate" (loopgateHooks() from `loopgate/agent-sdk`) |
//                   "record" (callbacks that write their input to recordDir and answer {})
//   recordDir       where "record" writes
//   options         more options, passed as they are
// Prints every SDK message as one JSON line on stdout.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { loopgateHooks } from "loopgate/agent-sdk";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const config = JSON.parse(process.env.LG_SDK_CONFIG);
const options = { ...(config.options || {}) };
if ("settingSources" in config) options.settingSources = config.settingSources;
if (config.hooks === "loopgate") {
  options.hooks = loopgateHooks();
} else if (config.hooks === "record") {
  let n = 0;
  const record = async (input, toolUseId) => {
    n += 1;
    const name = `${Date.now()}-${String(n).padStart(4, "0")}.json`;
    writeFileSync(join(config.recordDir, name), JSON.stringify({ input, toolUseId }));
    return {};
  };
  options.hooks = {};
  for (const event of config.recordEvents) {
    options.hooks[event] = [{ hooks: [record] }];
  }
}
for await (const message of query({ prompt: config.prompt, options })) {
  process.stdout.write(JSON.stringify(message) + "\n");
}
