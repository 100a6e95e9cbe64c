// The TypeScript Claude Agent SDK's rewindFiles() with agi as its CLI (tests/frontends/sdk):
// argv[2] is agi's path, argv[3] a prompt that makes the model change files. Sends it with a
// uuid of its own, waits for its result, then prints rewindFiles' answers (a dry run, then the
// rewind) as JSON lines, with every message the SDK yields before them.
import { query } from "@anthropic-ai/claude-agent-sdk";
import { randomUUID } from "node:crypto";

const [agi, prompt] = process.argv.slice(2);
const id = randomUUID();
let finish;
const finished = new Promise((resolve) => (finish = resolve));

async function* input() {
  yield { type: "user", uuid: id, session_id: "", parent_tool_use_id: null,
          message: { role: "user", content: [{ type: "text", text: prompt }] } };
  await finished; // the input stays open until the rewinds are answered
}

const q = query({
  prompt: input(),
  options: { pathToClaudeCodeExecutable: agi, cwd: process.cwd(), env: process.env,
             permissionMode: "acceptEdits", enableFileCheckpointing: true },
});
for await (const message of q) {
  console.log(JSON.stringify(message));
  if (message.type === "result") { // the turn is over: rewind, then end the input
    console.log(JSON.stringify({ dry: await q.rewindFiles(id, { dryRun: true }), id }));
    console.log(JSON.stringify({ rewound: await q.rewindFiles(id) }));
    finish();
  }
}
