// Types of `loopgate/agent-sdk` (agent-sdk.js). Structural, so this package does not depend on
// `@anthropic-ai/claude-agent-sdk`: the result is assignable to its `Options["hooks"]`.

/** What a callback receives and answers: the hook input and output of Claude Code's hooks. */
export type LoopgateHookCallback = (
  input: any,
  toolUseID: string | undefined,
  options: { signal: AbortSignal }
) => Promise<Record<string, unknown>>;

export interface LoopgateHookMatcher {
  matcher?: string;
  hooks: LoopgateHookCallback[];
  timeout?: number;
}

export interface LoopgateHooksOptions {
  /** The loopgate binary (default: `$LOOPGATE_BIN`, the copy `loopgate setup` made, this package's, `loopgate` on PATH). */
  bin?: string;
  /** The project the agent works in (default: the `cwd` of the session's first hook input). */
  projectDir?: string;
  /** Whether a person watches the run (default false). */
  attended?: boolean;
  /** Seconds one call may take before it is let through unchecked (default 10). */
  timeout?: number;
  /** Extra environment for the binary (a `LOOPGATE_*` setting may only tighten it; a hook takes no state dir or config file from its environment). */
  env?: Record<string, string>;
}

/** The SDK's `hooks` option, one callback per event loopgate handles. */
export declare function loopgateHooks(
  options?: LoopgateHooksOptions
): Record<string, LoopgateHookMatcher[]>;

/** The binary the callbacks run. */
export declare function findBinary(options?: LoopgateHooksOptions): string;

/** `[event, subcommand, isToolEvent]` for every event the callbacks cover. */
export declare const EVENTS: ReadonlyArray<readonly [string, string, boolean]>;
