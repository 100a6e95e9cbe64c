// `node --import tsx --import ./with_agi_hooks.mjs EXAMPLE.ts`: runs one of the SDK's
// examples unchanged, its `@anthropic-ai/claude-agent-sdk` resolved to with_agi.mjs (which
// loads the SDK installed here), wherever the example lies.
import { register } from "node:module";

register("./with_agi_resolve.mjs", import.meta.url);
