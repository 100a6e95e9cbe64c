// The module resolution hook of with_agi_hooks.mjs.
const SDK = "@anthropic-ai/claude-agent-sdk";
const WRAPPER = new URL("./with_agi.mjs", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier === SDK && context.parentURL !== WRAPPER) {
    return { url: WRAPPER, shortCircuit: true };
  }
  if (specifier === SDK) {
    return next(specifier, { ...context, parentURL: WRAPPER });
  }
  return next(specifier, context);
}
