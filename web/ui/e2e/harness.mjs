// E2E harness: a real `kiln serve` on a free port with a temp data dir, and a
// real headless Chromium through playwright-core (never downloads browsers).
import { spawn } from "node:child_process";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const UI = resolve(here, "..");
export const KILN_BIN = process.env.KILN_BIN || resolve(UI, "../../bin/kiln");
/** Screenshots go here (gitignored): test artifacts, never committed files. */
export const SHOTS = join(here, "artifacts");

export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => res(p)); });
    s.on("error", rej);
  });
}

async function waitHealthy(url, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    try { const r = await fetch(url + "/healthz"); if (r.ok) return; } catch { /* not yet */ }
    if (Date.now() > end) throw new Error(`kiln did not become healthy at ${url}`);
    await new Promise((r) => setTimeout(r, 50)); // polling a condition, not a fixed sleep
  }
}

/** until polls cond (async) until it holds, failing after ms milliseconds. */
export async function until(cond, what, ms = 20000) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25)); // polling a condition
  }
}

/** A kiln server process; restart() keeps the port and data dir. */
export class Kiln {
  constructor({ env = {}, data } = {}) {
    this.env = env;
    this.data = data ?? mkdtempSync(join(tmpdir(), "kiln-e2e-"));
    this.log = "";
  }
  async start() {
    this.port ??= await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    this.proc = spawn(KILN_BIN, ["serve", "--addr", `127.0.0.1:${this.port}`, "--data", this.data], {
      env: { ...process.env, KILN_MODEL: "scripted", ...this.env }, stdio: ["ignore", "pipe", "pipe"],
    });
    this.proc.stdout.on("data", (d) => (this.log += d));
    this.proc.stderr.on("data", (d) => (this.log += d));
    this.exited = new Promise((r) => this.proc.once("exit", r));
    await waitHealthy(this.url);
    return this;
  }
  async stop(signal = "SIGTERM") {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill(signal);
    await this.exited;
  }
  async restart() { await this.stop(); await this.start(); }
  async api(method, path, body) {
    const headers = { "Content-Type": "application/json" };
    if (this.env.KILN_API_TOKEN) headers.Authorization = `Bearer ${this.env.KILN_API_TOKEN}`;
    const r = await fetch(`${this.url}/api/v1${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const t = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${t}`);
    return t ? JSON.parse(t) : undefined;
  }
  async cleanup() { await this.stop(); rmSync(this.data, { recursive: true, force: true }); }
}

/**
 * The URL the browser opens: kiln itself, which serves the UI embedded in
 * the binary. The tests are of the current sources, so the binary must
 * embed the current web/ui/dist; `make test` builds it first, and by hand
 * `make build` does.
 */
let checked;
export async function uiBase(kiln) {
  checked ??= (async () => {
    const r = await fetch(kiln.url + "/");
    const ct = r.headers.get("content-type") || "";
    const html = await r.text();
    if (!r.ok || !ct.includes("text/html")) throw new Error(`${KILN_BIN} does not serve the web UI at / (${r.status} ${ct}); run make build`);
    const stale = [];
    if (html !== readFileSync(join(UI, "dist", "index.html"), "utf8")) stale.push("index.html");
    for (const f of ["app.js", "app.css"]) {
      const served = await fetch(kiln.url + "/" + f).then((x) => (x.ok ? x.text() : ""));
      if (served !== readFileSync(join(UI, "dist", f), "utf8")) stale.push(f);
    }
    if (stale.length) throw new Error(`${KILN_BIN} embeds an older web/ui/dist (${stale.join(", ")} differ): run make build (in ${resolve(UI, "../..")}) and run the tests again`);
  })();
  await checked;
  return { url: kiln.url + "/" };
}

export async function launch({ dark = false } = {}) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-gpu", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: dark ? "dark" : "light", reducedMotion: "reduce" });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error" && !/Failed to load resource|ERR_|502|net::/.test(m.text())) errors.push(m.text()); });
  return { browser, context, page, errors };
}

export async function shot(page, name) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

/**
 * Sets everything up for one test; returns helpers and a cleanup. files
 * maps paths in the data root to contents written before the server
 * starts (a .mcp.json, say).
 */
export async function setup({ env, dark, files = {} } = {}) {
  const k = new Kiln({ env });
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(dirname(join(k.data, rel)), { recursive: true });
    writeFileSync(join(k.data, rel), content, { mode: 0o600 });
  }
  const kiln = await k.start();
  let front;
  try { front = await uiBase(kiln); } catch (e) { await kiln.cleanup(); throw e; }
  const b = await launch({ dark });
  return {
    kiln, front, ...b,
    async close() { await b.browser.close(); await kiln.cleanup(); },
  };
}

let axeSource;
/** Runs axe-core on the page; serious and critical violations fail the test. */
export async function audit(page, view) {
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  assert.ok(result.passes.length > 10, `${view}: axe checked only ${result.passes.length} rules`);
  const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  const detail = bad.map((v) => `${v.id} (${v.impact}): ${v.help}\n  ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join("\n  ")}`);
  assert.deepEqual(detail, [], `${view}: accessibility violations`);
}

export const tid = (id) => `[data-testid="${id}"]`;

/** Script for the scripted model: an append_file held for approval, then a final text. */
export const APPROVAL_SCRIPT = 'tool append_file {"path":"a.txt","line":"x"}\ntext All done.';

export async function startApprovalRun(kiln, title = "Approve me", script = APPROVAL_SCRIPT) {
  const t = await kiln.api("POST", "/threads", { title });
  const run = await kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: script }, model: "scripted", interrupt_on: { append_file: true } });
  return { thread: t, run };
}
