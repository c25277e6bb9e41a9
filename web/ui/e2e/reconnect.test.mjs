// Kill the server mid-run and restart it on the same port and data dir: the
// offline banner comes and goes, the run finishes, and the thread view has
// every message exactly once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, tid } from "./harness.mjs";

/** Message indices the thread view shows (messages plus tool results folded into calls). */
const shown = (p) => p.evaluate(() => {
  const idx = [...document.querySelectorAll('[data-testid="message"][data-index]')].map((e) => Number(e.getAttribute("data-index")));
  const res = [...document.querySelectorAll('[data-testid="tool-call"][data-result-index]')].map((e) => Number(e.getAttribute("data-result-index")));
  const calls = [...document.querySelectorAll('[data-testid="tool-call"]')].map((e) => e.getAttribute("data-tool"));
  return { idx, res, calls, streaming: document.querySelectorAll('[data-streaming]').length };
});

test("reconnect after a server restart: no lost or doubled messages", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const t = await s.kiln.api("POST", "/threads", { title: "Survives a restart" });
    await p.goto(s.front.url + `#/thread/${t.id}`);
    await p.waitForSelector(tid("thread-view"));
    await s.kiln.api("POST", `/threads/${t.id}/runs`, {
      input: { text: 'tool echo {"before":1}\ntool sleep {"ms":1500}\ntool echo {"after":2}\ntext Finished after the restart.' }, model: "scripted",
    });
    await p.locator(`${tid("tool-call")}[data-tool="sleep"]`).waitFor();

    await s.kiln.stop(); // SIGTERM: the run stops at a step boundary and resumes on the next start
    await p.waitForSelector(tid("offline-banner"));
    await s.kiln.start(); // same port, same data dir
    await p.locator(tid("offline-banner")).waitFor({ state: "detached", timeout: 20000 });

    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "Finished after the restart." }).waitFor({ timeout: 20000 });
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    const api = (await s.kiln.api("GET", `/threads/${t.id}/messages`)).messages;
    const v = await shown(p);
    const all = [...v.idx, ...v.res].sort((x, y) => x - y);
    assert.deepEqual(all, api.map((m) => m.index), "every message exactly once");
    assert.equal(new Set(all).size, all.length, "no duplicates");
    assert.deepEqual(v.calls, ["echo", "sleep", "echo"]);
    assert.equal(v.streaming, 0);

    // It finished while the thread was open: read at once, not in Unread.
    await p.waitForFunction(() => document.querySelector('[data-testid="count-unread"]')?.textContent === "0");
    assert.equal((await s.kiln.api("GET", `/threads/${t.id}`)).unread, false);

    // The global stream is back too: counts follow new events.
    await p.click(tid("nav-all"));
    const t2 = await s.kiln.api("POST", "/threads", { title: "After reconnect" });
    await s.kiln.api("POST", `/threads/${t2.id}/runs`, { input: { text: "text ok" }, model: "scripted" });
    await p.waitForFunction(() => document.querySelector('[data-testid="count-unread"]')?.textContent === "1");
    await p.locator(`${tid("thread-item")}[data-thread-id="${t2.id}"]`).waitFor();
  } finally { await s.close(); }
});
