// Runs the UI's unit tests: bundles each web/test/*.test.ts for node with esbuild,
// then runs them with node's own test runner. No test framework to install.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const here = new URL(".", import.meta.url).pathname;
const out = mkdtempSync(join(tmpdir(), "agentplane-web-test-"));
const tests = readdirSync(here).filter((f) => f.endsWith(".test.ts"));
await build({
  entryPoints: tests.map((f) => join(here, f)),
  bundle: true,
  platform: "node",
  format: "esm",
  outdir: out,
  outExtension: { ".js": ".mjs" },
  logLevel: "warning",
});
const files = readdirSync(out).map((f) => join(out, f));
const run = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
rmSync(out, { recursive: true, force: true });
process.exit(run.status ?? 1);
