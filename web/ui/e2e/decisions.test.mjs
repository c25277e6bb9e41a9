// Edit (with invalid JSON first), reject with a message and respond, each
// clicked in the thread view's approval card, with the run going on live.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, startApprovalRun, tid } from "./harness.mjs";

async function openCard(s, title) {
  const { thread, run } = await startApprovalRun(s.kiln, title);
  await s.page.goto(s.front.url + `#/thread/${thread.id}`);
  const card = s.page.locator(`${tid("approval-card")}[data-status="open"]`);
  await card.waitFor();
  const ints = await s.kiln.api("GET", `/runs/${run.id}/interrupts`);
  return { thread, run, card, interrupt: ints.interrupts[0] };
}

test("edit, reject and respond", async () => {
  const s = await setup();
  const p = s.page;
  try {
    // Edit: invalid JSON shows an inline error and sends nothing.
    let c = await openCard(s, "Edit me");
    await c.card.locator(tid("edit")).click();
    await c.card.locator(tid("edit-args")).fill('{"path": "b.txt", ');
    await c.card.locator(tid("edit-submit")).click();
    await c.card.locator(tid("card-error")).waitFor();
    assert.match(await c.card.locator(tid("card-error")).textContent(), /Invalid JSON/);
    assert.equal((await s.kiln.api("GET", `/interrupts/${c.interrupt.id}`)).status, "open", "nothing was sent");
    await c.card.locator(tid("edit-args")).fill("[1, 2]");
    await c.card.locator(tid("edit-submit")).click();
    await p.waitForFunction(() => /JSON object/.test(document.querySelector('[data-testid="card-error"]')?.textContent ?? ""));
    assert.equal((await s.kiln.api("GET", `/interrupts/${c.interrupt.id}`)).status, "open");
    await c.card.locator(tid("edit-args")).fill('{"path": "b.txt", "line": "edited"}');
    await c.card.locator(tid("edit-submit")).click();
    await p.waitForSelector(`${tid("approval-card")}[data-status="decided"]`);
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    let it = await s.kiln.api("GET", `/interrupts/${c.interrupt.id}`);
    assert.equal(it.decision.decision, "edit");
    assert.deepEqual(it.decision.args, { path: "b.txt", line: "edited" });
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "All done." }).waitFor();

    // Reject with a message.
    c = await openCard(s, "Reject me");
    await c.card.locator(tid("reject")).click();
    await c.card.locator(tid("reject-message")).fill("Not in this folder, please.");
    await c.card.locator(tid("reject-submit")).click();
    await p.waitForSelector(`${tid("approval-card")}[data-status="decided"]`);
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    it = await s.kiln.api("GET", `/interrupts/${c.interrupt.id}`);
    assert.equal(it.decision.decision, "reject");
    assert.equal(it.decision.message, "Not in this folder, please.");
    const call = p.locator(tid("tool-call")).first();
    await call.locator("summary").click();
    assert.match(await call.textContent(), /Not in this folder, please\./);
    assert.equal(await call.locator(tid("tool-state")).textContent(), "rejected", "a rejected call is not an error");

    // Respond with text: an empty answer is refused inline.
    c = await openCard(s, "Respond to me");
    await c.card.locator(tid("respond")).click();
    await c.card.locator(tid("respond-submit")).click();
    await c.card.locator(tid("card-error")).waitFor();
    await c.card.locator(tid("respond-text")).fill("I wrote it by hand.");
    await c.card.locator(tid("respond-submit")).click();
    await p.waitForSelector(`${tid("approval-card")}[data-status="decided"]`);
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    it = await s.kiln.api("GET", `/interrupts/${c.interrupt.id}`);
    assert.equal(it.decision.decision, "respond");
    const call2 = p.locator(tid("tool-call")).first();
    await call2.locator("summary").click();
    assert.match(await call2.textContent(), /I wrote it by hand\./);
    assert.equal(await call2.locator(tid("tool-state")).textContent(), "answered", "an answered call did not run");
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("cancel a waiting run and start the next one from the composer", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const c = await openCard(s, "Cancel me");
    await p.click(tid("run-cancel"));
    await p.waitForSelector(`${tid("run-status")}[data-status="cancelled"]`);
    await p.waitForSelector(`${tid("approval-card")}[data-status="cancelled"]`);
    await p.fill(tid("composer-input"), "text Second run here.");
    await p.selectOption(tid("composer-model"), "scripted");
    await p.click(tid("composer-send"));
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "Second run here." }).waitFor();
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    assert.equal((await s.kiln.api("GET", `/threads/${c.thread.id}/runs`)).runs.length, 2);

    // A failed run shows its error plainly (started through the API: a limit the composer does not set).
    await s.kiln.api("POST", `/threads/${c.thread.id}/runs`, { input: { text: 'tool echo {"a":1}\ntool echo {"b":2}\ntext unreachable' }, model: "scripted", limits: { max_tool_calls: 1 } });
    await p.waitForSelector(`${tid("run-status")}[data-status="failed"]`);
    await p.locator(".run-error[role=alert]", { hasText: "tool call limit of 1 reached" }).waitFor();
  } finally { await s.close(); }
});

test("New thread from the list starts a run and opens it", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/all");
    await p.locator(tid("empty")).waitFor();
    assert.match(await p.locator(tid("empty")).textContent(), /start one with the box above/);
    await p.fill(tid("composer-input"), "text Hello from a new thread.");
    await p.selectOption(tid("composer-model"), "scripted");
    await p.click(tid("new-thread"));
    await p.waitForSelector(tid("thread-view"));
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "Hello from a new thread." }).waitFor();
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
  } finally { await s.close(); }
});
