// The TypeScript Claude Agent SDK as the SDK's examples import it (tests/frontends/sdk):
// everything it exports, with agi as the CLI of every query() that names none
// (pathToClaudeCodeExecutable $AGI_SDK_CLI), which is all a program does to use agi.
// with_agi_hooks.mjs sends the examples' `@anthropic-ai/claude-agent-sdk` here.
import { query as sdkQuery } from "@anthropic-ai/claude-agent-sdk";

export * from "@anthropic-ai/claude-agent-sdk";

export function query({ prompt, options = {} }) {
  const cli = options.pathToClaudeCodeExecutable ?? process.env.AGI_SDK_CLI;
  return sdkQuery({ prompt, options: { ...options, pathToClaudeCodeExecutable: cli } });
}
