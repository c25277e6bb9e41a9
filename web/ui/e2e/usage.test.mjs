// Token usage: the thread view shows the current run's tokens in its run
// bar and its activity, and the thread's total in its header, as the API
// counts them (the scripted model reports words as tokens); nothing shows
// before a run has used any.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, shot, tid } from "./harness.mjs";

const group = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
const tokens = (u) => `${group(u.input_tokens)} in · ${group(u.output_tokens)} out tokens`;

test("a run's tokens and the thread's total", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const t = await s.kiln.api("POST", "/threads", { title: "Count my tokens" });
    await p.goto(s.front.url + `#/thread/${t.id}`);
    await p.waitForSelector(tid("thread-view"));
    assert.equal(await p.locator(tid("thread-usage")).count(), 0, "no tokens yet, no total");

    // First run, from the composer.
    await p.fill(tid("composer-input"), "text The first answer has a few words in it.");
    await p.selectOption(tid("composer-model"), "scripted");
    await p.click(tid("composer-send"));
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    const [r1] = (await s.kiln.api("GET", `/threads/${t.id}/runs`)).runs;
    assert.ok(r1.usage.input_tokens > 0 && r1.usage.output_tokens > 0, `the scripted model counts tokens: ${JSON.stringify(r1.usage)}`);
    await p.locator(tid("run-usage"), { hasText: tokens(r1.usage) }).waitFor();
    await p.locator(`${tid("activity")} .act-run-finished`, { hasText: `Run succeeded · ${tokens(r1.usage)}` }).waitFor();
    let th = await s.kiln.api("GET", `/threads/${t.id}`);
    await p.locator(tid("thread-usage"), { hasText: `Total: ${tokens(th.usage)}` }).waitFor();

    // A second run: the run bar shows its own tokens, the header the sum.
    await p.fill(tid("composer-input"), "text Second.");
    await p.click(tid("composer-send"));
    let r2;
    while (!(r2 = (await s.kiln.api("GET", `/threads/${t.id}/runs`)).runs.find((r) => r.id !== r1.id && r.status === "succeeded"))) {
      await new Promise((r) => setTimeout(r, 50)); // polling the server for the run's end
    }
    th = await s.kiln.api("GET", `/threads/${t.id}`);
    assert.deepEqual(th.usage, { input_tokens: r1.usage.input_tokens + r2.usage.input_tokens, output_tokens: r1.usage.output_tokens + r2.usage.output_tokens });
    await p.locator(tid("run-usage"), { hasText: tokens(r2.usage) }).waitFor();
    await p.locator(tid("thread-usage"), { hasText: `Total: ${tokens(th.usage)}` }).waitFor();

    await shot(p, "thread-usage");

    // Opened afresh, the snapshot says the same.
    await p.reload();
    await p.locator(tid("thread-usage"), { hasText: `Total: ${tokens(th.usage)}` }).waitFor();
    await p.locator(tid("run-usage"), { hasText: tokens(r2.usage) }).waitFor();
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
