// Builds dist/ (index.html, app.js, app.css), or with --tests the unit tests into .test-out/.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(fileURLToPath(import.meta.url));
const common = { bundle: true, jsx: "automatic", jsxImportSource: "preact", target: "es2022", logLevel: "warning", legalComments: "none" };

if (process.argv.includes("--tests")) {
  const out = join(root, ".test-out");
  rmSync(out, { recursive: true, force: true });
  const entries = readdirSync(join(root, "test")).filter((f) => f.endsWith(".test.ts")).map((f) => join(root, "test", f));
  await esbuild.build({ ...common, entryPoints: entries, outdir: out, platform: "node", format: "esm", outExtension: { ".js": ".mjs" }, sourcemap: "inline" });
} else {
  const dist = join(root, "dist");
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(dist, { recursive: true });
  await esbuild.build({ ...common, entryPoints: [join(root, "src/main.tsx")], outfile: join(dist, "app.js"), format: "esm", minify: true, platform: "browser" });
  await esbuild.build({ entryPoints: [join(root, "src/app.css")], outfile: join(dist, "app.css"), bundle: true, minify: true, logLevel: "warning", target: ["chrome110", "firefox110", "safari16"] });
  copyFileSync(join(root, "src/index.html"), join(dist, "index.html"));
  console.log("built dist/index.html, dist/app.js, dist/app.css");
}
