// Prints the raw and gzipped sizes of the dist files.
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
const LIMIT = 150 * 1024;
let fail = false;
for (const f of ["dist/app.js", "dist/app.css", "dist/index.html"]) {
  const b = readFileSync(new URL(f, import.meta.url));
  const gz = gzipSync(b, { level: 9 }).length;
  console.log(`${f.padEnd(16)} ${String(b.length).padStart(7)} B  ${String(gz).padStart(6)} B gzipped`);
  if (f.endsWith(".js") && gz > LIMIT) { console.error(`${f} is over the ${LIMIT} B gzipped budget`); fail = true; }
}
process.exit(fail ? 1 : 0);
