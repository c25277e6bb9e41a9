// E2E harness: a real `kiln serve` on a free port with a temp data dir, and a
// real headless Chromium through playwright-core (never downloads browsers).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, mkdirSync } from "node:fs";
import { createServer, request } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const UI = resolve(here, "..");
export const KILN_BIN = process.env.KILN_BIN || resolve(UI, "../../bin/kiln");
export const SHOTS = join(here, "screenshots");
export const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'";

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

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8" };

/**
 * The URL the browser opens. When kiln serves the UI itself (GET / is HTML)
 * that is kiln; otherwise (the Go side has not landed yet) a TEMPORARY
 * same-origin front that serves dist/ with the production CSP and proxies
 * everything else to kiln, including SSE.
 */
let warned = false;
export async function uiBase(kiln) {
  const r = await fetch(kiln.url + "/");
  const ct = r.headers.get("content-type") || "";
  await r.arrayBuffer();
  let fresh = false;
  if (r.ok && ct.includes("text/html")) {
    fresh = true;
    for (const f of ["app.js", "app.css"]) {
      const served = await fetch(kiln.url + "/" + f).then((x) => (x.ok ? x.text() : ""));
      if (served !== readFileSync(join(UI, "dist", f), "utf8")) fresh = false;
    }
    if (!fresh && !warned) { warned = true; console.warn(`# ${KILN_BIN} embeds an older web/ui/dist; serving the current dist through a same-origin proxy (run make build to test the binary's own files)`); }
  }
  if (fresh && !process.env.KILN_E2E_FORCE_PROXY) return { url: kiln.url + "/", close: async () => {}, proxied: false };
  const server = createServer((req, res) => {
    const u = new URL(req.url, "http://x");
    const file = u.pathname === "/" ? "index.html" : u.pathname.replace(/^\/(assets\/)?/, "");
    if (req.method === "GET" && ["index.html", "app.js", "app.css"].includes(file)) {
      res.writeHead(200, { "Content-Type": TYPES[file.slice(file.lastIndexOf("."))], "Content-Security-Policy": CSP, "Cache-Control": "no-cache" });
      res.end(readFileSync(join(UI, "dist", file)));
      return;
    }
    const up = request({ host: "127.0.0.1", port: kiln.port, path: req.url, method: req.method, headers: { ...req.headers, host: `127.0.0.1:${kiln.port}` } }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      res.flushHeaders();
      ur.on("data", (c) => res.write(c));
      ur.on("end", () => res.end());
      ur.on("aborted", () => res.destroy());
      ur.on("error", () => res.destroy());
    });
    up.on("error", () => { if (!res.headersSent) { res.writeHead(502, { "Content-Type": "application/json" }); res.end('{"error":{"code":"unavailable","message":"kiln is down"}}'); } else res.destroy(); });
    req.pipe(up);
    res.on("close", () => up.destroy());
  });
  const sockets = new Set();
  server.on("connection", (s) => { sockets.add(s); s.on("close", () => sockets.delete(s)); });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}/`, proxied: true, close: () => new Promise((r) => { sockets.forEach((s) => s.destroy()); server.close(r); }) };
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

/** Sets everything up for one test; returns helpers and a cleanup. */
export async function setup({ env, dark } = {}) {
  const kiln = await new Kiln({ env }).start();
  const front = await uiBase(kiln);
  const b = await launch({ dark });
  return {
    kiln, front, ...b,
    async close() { await b.browser.close(); await front.close(); await kiln.cleanup(); },
  };
}

export const tid = (id) => `[data-testid="${id}"]`;

/** Script for the scripted model: an append_file held for approval, then a final text. */
export const APPROVAL_SCRIPT = 'tool append_file {"path":"a.txt","line":"x"}\ntext All done.';

export async function startApprovalRun(kiln, title = "Approve me", script = APPROVAL_SCRIPT) {
  const t = await kiln.api("POST", "/threads", { title });
  const run = await kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: script }, model: "scripted", interrupt_on: { append_file: true } });
  return { thread: t, run };
}
