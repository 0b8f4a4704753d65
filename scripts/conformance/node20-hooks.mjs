// Module resolution hook registered by node20-shim.mjs: `fs` imported by the conformance
// suite's bundle becomes node20-fs.mjs. Every other import resolves as usual.
const shim = new URL("./node20-fs.mjs", import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  const parent = context.parentURL ?? "";
  const fromSuite =
    parent.includes("/conformance-") || parent.includes("/@modelcontextprotocol/conformance/");
  if ((specifier === "fs" || specifier === "node:fs") && fromSuite) {
    return { url: shim, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
