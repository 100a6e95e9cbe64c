// The TypeScript Claude Agent SDK's query() with agi as its CLI (tests/frontends/sdk):
// argv[2] is agi's path, argv[3] the prompt, argv[4] "deny" to refuse every tool call.
// Prints each message the SDK yields as one JSON line.
import { query } from "@anthropic-ai/claude-agent-sdk";

const [agi, prompt, policy] = process.argv.slice(2);
const options = { pathToClaudeCodeExecutable: agi, cwd: process.cwd(), env: process.env };
if (policy === "deny") {
  options.canUseTool = async (name, input) => ({ behavior: "deny", message: `no ${name} here` });
}
for await (const message of query({ prompt, options })) {
  console.log(JSON.stringify(message));
}
