// Builds web/dist/ from web/src/ (run by scripts/build-web.sh): one ES module bundle,
// one stylesheet, the page and the icon. Names are fixed; the server embeds exactly
// these files and revalidates them by content hash (crates/server/src/routes/ui.rs).
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

const out = new URL("./dist/", import.meta.url).pathname;
rmSync(out, { recursive: true, force: true });
mkdirSync(`${out}assets`, { recursive: true });
await build({
  entryPoints: { app: "src/main.ts" },
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "none",
  outdir: `${out}assets`,
  logLevel: "warning",
});
await build({
  entryPoints: { app: "src/style.css" },
  bundle: true,
  minify: true,
  outdir: `${out}assets`,
  logLevel: "warning",
});
copyFileSync("index.html", `${out}index.html`);
copyFileSync("icon.svg", `${out}assets/icon.svg`);
console.log(`built ${out}`);
