// `fs` with the `globSync` of Node 22, for the patterns the conformance suite passes
// (`**/NAME`: every file called NAME below `cwd`, as paths relative to it). Any other
// pattern is refused with an error naming Node 22, rather than answered wrongly.
import fs from "node:fs";
import path from "node:path";

export * from "node:fs";
export default fs;

export function globSync(pattern, options = {}) {
  const match = /^\*\*\/([^*?[\]{}/]+)$/.exec(String(pattern));
  if (!match) {
    throw new Error(`globSync(${JSON.stringify(pattern)}) needs Node 22 (the Node 20 shim only knows **/NAME)`);
  }
  const name = match[1];
  const cwd = options.cwd ? String(options.cwd) : process.cwd();
  const found = [];
  const walk = (relative) => {
    let entries;
    try {
      entries = fs.readdirSync(path.join(cwd, relative), { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const child = relative ? path.join(relative, entry.name) : entry.name;
      if (entry.isDirectory()) walk(child);
      else if (entry.name === name) found.push(child);
    }
  };
  walk("");
  return found;
}
