// The thread view follows a run as it goes, its waiting card included: a
// new run on the open thread that stops for a decision brings the card
// into view, unless the person scrolled up to read.
import { test } from "node:test";
import assert from "node:assert/strict";
import { APPROVAL_SCRIPT, setup, shot, tid, until } from "./harness.mjs";

/** A script of n echo calls and a final text: a conversation taller than the window. */
const LONG = Array.from({ length: 14 }, (_, i) => `tool echo {"text":"line ${i} of a long conversation"}`).join("\n") + "\ntext The long part is done.";

/** A run that works a while (its calls and text grow the conversation) and then asks. */
const WORK_THEN_ASK = Array.from({ length: 6 }, (_, i) => `tool echo {"text":"step ${i}"}`).join("\n") + "\n" + APPROVAL_SCRIPT;

async function finished(kiln, runId) {
  await until(async () => ["succeeded", "failed", "cancelled"].includes((await kiln.api("GET", `/runs/${runId}`)).status), `run ${runId} to finish`);
}

/** Where el is against the conversation's visible area. */
const inView = (p, sel) => p.evaluate((sel) => {
  const convo = document.querySelector(".convo").getBoundingClientRect();
  const el = document.querySelector(sel).getBoundingClientRect();
  return { visible: el.top >= convo.top - 1 && el.bottom <= convo.bottom + 1, el: { top: el.top, bottom: el.bottom }, convo: { top: convo.top, bottom: convo.bottom } };
}, sel);

test("a new run's waiting card on the open thread is scrolled into view; not when the person scrolled up", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.setViewportSize({ width: 1100, height: 640 });
    const t = await s.kiln.api("POST", "/threads", { title: "Follow me" });
    const first = await s.kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: LONG }, model: "scripted" });
    await finished(s.kiln, first.id);
    await p.goto(s.front.url + `#/thread/${t.id}`);
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "The long part is done." }).waitFor();
    await until(async () => (await inView(p, `${tid("message")}[data-role="assistant"]:last-of-type`)).visible, "the last message in view");

    // A run started elsewhere (the CLI, a trigger) stops for a decision.
    const run = await s.kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: WORK_THEN_ASK }, model: "scripted", interrupt_on: { append_file: true } });
    const card = `${tid("approval-card")}[data-status="open"]`;
    await p.waitForSelector(card);
    await p.waitForSelector(`${tid("run-status")}[data-status="interrupted"]`);
    await until(async () => (await inView(p, `${card} ${tid("approve")}`)).visible, "the waiting card's buttons to be in view", 5000)
      .catch(async (e) => { await shot(p, "follow-card-missed"); throw new Error(`${e.message}: ${JSON.stringify(await inView(p, `${card} ${tid("approve")}`))}`); });
    await shot(p, "follow-card");
    await p.locator(`${card} ${tid("approve")}`).click();
    await finished(s.kiln, run.id);

    // Scrolled up to read: a new run's card does not pull the view down.
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "All done." }).waitFor();
    await p.locator(".convo").evaluate((el) => { el.scrollTop = 0; el.dispatchEvent(new Event("scroll")); });
    await s.kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: APPROVAL_SCRIPT }, model: "scripted", interrupt_on: { append_file: true } });
    await p.waitForSelector(card);
    await p.waitForSelector(`${tid("run-status")}[data-status="interrupted"]`);
    assert.equal(await p.locator(".convo").evaluate((el) => el.scrollTop), 0, "the view stays where the person scrolled");
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
