// Node 20 shim for @modelcontextprotocol/conformance (docs/mcp-conformance.md).
//
// The suite's single bundle imports `globSync` from `fs`, which Node added in 22; on
// Node 20 the whole CLI then fails to load, although only `tier-check` calls it (to find
// `**/checks.json` below a results directory). Loaded with `node --import`, this file
// resolves that one import, for the suite's bundle only, to node20-fs.mjs: all of `fs`
// plus a `globSync` for patterns of the form `**/NAME`. On Node 22 and later it does
// nothing.
import { register } from "node:module";

const major = Number(process.versions.node.split(".")[0]);
if (major < 22) {
  register("./node20-hooks.mjs", import.meta.url);
}
