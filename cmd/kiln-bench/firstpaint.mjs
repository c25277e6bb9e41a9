// Measures the first contentful paint of the Kiln web UI: loads a URL in
// headless Chromium, each time in a new browser context (empty cache, new
// connections), and prints the median of the loads after a first one that
// warms Chromium up. kiln-bench runs it; it needs Node and playwright-core,
// which it takes from the UI's node_modules.
//
//	node firstpaint.mjs URL CHROMIUM UI_DIR [RUNS]
//
// Output: one line, JSON {"median_ms","min_ms","max_ms","runs"}.
import { createRequire } from "node:module";
import path from "node:path";

const [url, executablePath, uiDir, runsArg = "10"] = process.argv.slice(2);
if (!url || !executablePath || !uiDir) {
  console.error("usage: node firstpaint.mjs URL CHROMIUM UI_DIR [RUNS]");
  process.exit(2);
}
const runs = Number(runsArg);

// playwright-core as the UI installs it (npm ci in web/ui).
const require = createRequire(path.resolve(uiDir, "package.json"));
let chromium;
for (const name of ["playwright-core", "playwright", "@playwright/test"]) {
  try {
    ({ chromium } = require(name));
    break;
  } catch {}
}
if (!chromium) {
  console.error(`no playwright-core in ${path.join(uiDir, "node_modules")} (npm ci there)`);
  process.exit(3);
}

// Playwright gives the browser a fresh temporary profile (it does not take
// --user-data-dir in args) and adds --headless.
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
  ],
});
try {
  const times = [];
  for (let i = 0; i <= runs; i++) {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(url, { waitUntil: "load", timeout: 30_000 });
    const fcp = await page.evaluate(
      () =>
        new Promise((resolve) => {
          const seen = (entries) => {
            const e = entries.find((e) => e.name === "first-contentful-paint");
            if (e) resolve(e.startTime);
          };
          seen(performance.getEntriesByType("paint"));
          new PerformanceObserver((list) => seen(list.getEntries())).observe({ type: "paint", buffered: true });
          setTimeout(() => resolve(-1), 5_000);
        }),
    );
    await context.close();
    if (fcp < 0) {
      throw new Error(`no first-contentful-paint within 5 s of the load event of ${url}: does the page show any text?`);
    }
    if (i > 0) times.push(fcp); // the first load warms Chromium up
  }
  times.sort((a, b) => a - b);
  const r = (x) => Math.round(x * 10) / 10;
  console.log(
    JSON.stringify({ median_ms: r(times[Math.floor(times.length / 2)]), min_ms: r(times[0]), max_ms: r(times.at(-1)), runs: times.length }),
  );
} finally {
  await browser.close();
}
