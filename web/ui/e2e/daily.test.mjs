// Daily use: the composer keeps the thread's model, a follow-up queued
// behind a waiting run shows as queued while the run and its decision stay
// first, a decided card stays where its call was and says what was
// decided, Unread can be marked read at once, several decisions can be
// made at once, search runs on the server in every view with the matches
// marked, long lists page as they scroll, and the layout holds at 390 px.
import { test } from "node:test";
import assert from "node:assert/strict";
import { launch, setup, shot, startApprovalRun, tid } from "./harness.mjs";

const row = (id) => `${tid("thread-item")}[data-thread-id="${id}"]`;

async function finishedRun(kiln, title, text = "text done") {
  const t = await kiln.api("POST", "/threads", { title });
  const r = await kiln.api("POST", `/threads/${t.id}/runs`, { input: { text }, model: "scripted" });
  for (let i = 0; i < 400; i++) {
    const got = await kiln.api("GET", `/runs/${r.id}`);
    if (["succeeded", "failed", "cancelled"].includes(got.status)) return { thread: t, run: got };
    await new Promise((res) => setTimeout(res, 25)); // polling the run's state
  }
  throw new Error(`run ${r.id} did not finish`);
}

test("a follow-up in a waiting thread: the thread's model, queued behind the decision, which stays where it was", async () => {
  // The server's default is demo; the thread runs on scripted.
  const s = await setup({ env: { KILN_MODEL: "demo" } });
  const p = s.page;
  try {
    const { thread, run } = await startApprovalRun(s.kiln, "Waiting thread");
    await p.goto(s.front.url + `#/thread/${thread.id}`);
    await p.waitForSelector(`${tid("run-status")}[data-status="interrupted"]`);
    const picker = p.locator(`#composer-model`);
    await p.waitForFunction(() => document.querySelector("#composer-model")?.value === "scripted");
    assert.equal(await picker.inputValue(), "scripted", "the composer shows the thread's model, not the default");

    await p.fill("#composer", "text Second reply.");
    await p.click(tid("composer-send"));
    const queued = p.locator(tid("queued-message"));
    await queued.waitFor();
    assert.match(await queued.textContent(), /text Second reply\./);
    assert.match(await queued.textContent(), /queued/);
    const runs = (await s.kiln.api("GET", `/runs?thread_id=${thread.id}`)).runs;
    const follow = runs.find((r) => r.id !== run.id);
    assert.equal(follow.status, "queued");
    assert.equal(follow.model, "scripted", "the follow-up is queued on the thread's model");

    // The header is about the waiting run and its decision, and counts the queued one.
    const bar = p.locator(tid("run-status"));
    assert.equal(await bar.getAttribute("data-status"), "interrupted");
    assert.match(await bar.locator(tid("run-waiting")).textContent(), /append_file/);
    assert.equal(await bar.locator(tid("queued-count")).textContent(), "1 queued");
    assert.match(await p.locator(tid("activity")).textContent(), /Waiting for 1 decision/);
    await shot(p, "thread-queued");

    // Decide: the card says so and stays under its call, before the reply.
    const card = p.locator(`${tid("approval-card")}[data-interrupt-id]`);
    await card.locator(tid("approve")).click();
    await p.waitForSelector(`${tid("approval-card")}[data-status="decided"]`);
    assert.equal(await card.locator(tid("card-state")).textContent(), "Approved");
    assert.doesNotMatch(await card.textContent(), /Needs approval/);
    const reply = p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "All done." });
    await reply.waitFor();
    const before = await p.evaluate(() => {
      const c = document.querySelector('[data-testid="approval-card"]');
      const r = [...document.querySelectorAll('[data-testid="message"][data-role="assistant"]')].find((m) => m.textContent.includes("All done."));
      return !!(c.compareDocumentPosition(r) & Node.DOCUMENT_POSITION_FOLLOWING);
    });
    assert.ok(before, "the decided card stays where the call happened, before the final reply");

    // The follow-up runs next, on scripted.
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "Second reply." }).waitFor();
    await queued.waitFor({ state: "detached" });
    assert.equal((await s.kiln.api("GET", `/runs/${follow.id}`)).status, "succeeded");
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("Unread: rows with pin and menu, no repeated badge, mark all read; a cancelled thread says so", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const a = await finishedRun(s.kiln, "First result");
    const b = await finishedRun(s.kiln, "Second result");
    const { thread: waiting, run } = await startApprovalRun(s.kiln, "Stopped one");
    await s.kiln.api("POST", `/runs/${run.id}/cancel`);
    await p.goto(s.front.url + "#/unread");
    await p.waitForSelector(row(a.thread.id));
    await p.waitForSelector(row(b.thread.id));
    for (const id of [a.thread.id, b.thread.id]) {
      const r = p.locator(row(id));
      assert.equal(await r.locator(tid("pin")).count(), 1);
      assert.equal(await r.locator(tid("thread-menu")).count(), 1);
      assert.equal(await r.locator(".b-unread").count(), 0, "the Unread view does not repeat unread on every row");
    }
    await p.click(tid("mark-all-read"));
    await p.waitForFunction(() => document.querySelector('[data-testid="count-unread"]')?.textContent === "0");
    await p.locator(tid("empty")).waitFor();
    assert.equal((await s.kiln.api("GET", "/inbox?queue=unread")).counts.unread, 0);

    await p.click(tid("nav-all"));
    const stopped = p.locator(row(waiting.id));
    await stopped.waitFor();
    assert.equal(await stopped.locator(".badge.b-cancelled").textContent(), "cancelled");
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("Action: context, waiting time, hints on the focused card only, several approved at once", async () => {
  const s = await setup();
  const p = s.page;
  try {
    // The demo model says what it is about to do in the turn that asks for append_file.
    const t = await s.kiln.api("POST", "/threads", { title: "Demo run" });
    await s.kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: "note this" }, model: "demo" });
    const others = [await startApprovalRun(s.kiln, "Two"), await startApprovalRun(s.kiln, "Three")];
    await p.goto(s.front.url + "#/action");
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="approval-card"]').length === 3);
    const demo = p.locator(tid("approval-card"), { has: p.locator(tid("card-thread"), { hasText: "Demo run" }) });
    assert.match(await demo.locator(tid("card-context")).textContent(), /Step 2: asking to append your message/);
    assert.equal(await demo.locator(tid("card-thread")).getAttribute("href"), `#/thread/${t.id}`);
    assert.match(await demo.locator(tid("card-waiting")).textContent(), /^waiting (under a minute|\d+ min)$/);

    // The a / r hints show on the focused card only.
    const cards = p.locator(tid("approval-card"));
    await cards.nth(0).focus();
    const shown = (i) => cards.nth(i).locator("kbd").first().evaluate((k) => getComputedStyle(k).visibility);
    assert.equal(await shown(0), "visible");
    assert.equal(await shown(1), "hidden");

    await p.check(tid("select-all"));
    assert.equal(await p.locator(tid("bulk-approve")).textContent(), "Approve 3");
    await p.click(tid("bulk-approve"));
    await p.waitForFunction(() => document.querySelector('[data-testid="count-action"]')?.textContent === "0");
    await p.locator(tid("empty")).waitFor();
    assert.match(await p.locator(tid("bulk-note")).textContent(), /Approved 3 of 3\./);
    for (const o of others) {
      const ints = (await s.kiln.api("GET", `/runs/${o.run.id}/interrupts`)).interrupts;
      assert.equal(ints[0].decision?.decision, "approve");
    }
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("search on the server in every view, with the matches marked; lists page as they scroll", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const hit = await finishedRun(s.kiln, "Numbers", "text The quarterly numbers are in.");
    await finishedRun(s.kiln, "Holiday plans", "text Nothing about money.");
    const { thread: held } = await startApprovalRun(s.kiln, "Quarterly filing");
    for (let i = 0; i < 57; i++) await s.kiln.api("POST", "/threads", { title: `Filler ${i}` });

    // All: 60 threads, 50 at first, the rest when the end scrolls into view.
    await p.goto(s.front.url + "#/all");
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 50);
    await p.locator(tid("load-more")).scrollIntoViewIfNeeded();
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 60);
    assert.equal(await p.locator(tid("load-more")).count(), 0, "no more to load");

    await p.fill(tid("search"), "quarter");
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 2);
    const mark = p.locator(`${row(hit.thread.id)} ${tid("snippet")} mark`);
    assert.equal(await mark.textContent(), "quarterly", "the matching word is marked");
    assert.equal(await p.locator(row(held.id)).count(), 1, "a title matches too");

    // Unread, searched on the server.
    await p.click(tid("nav-unread"));
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 1);
    assert.equal(await p.locator(row(hit.thread.id)).count(), 1);

    // Action, searched on the server: the held call's thread matches by title.
    await p.click(tid("nav-action"));
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="approval-card"]').length === 1);
    await p.fill(tid("search"), "holiday");
    await p.locator(tid("empty")).waitFor();
    assert.match(await p.locator(tid("empty")).textContent(), /No decision matches “holiday”/);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("390 px wide: the folders stay reachable and the search box fits", async () => {
  const s = await setup();
  let b;
  try {
    for (const name of ["Research", "Operations", "Personal", "Archive"]) await s.kiln.api("POST", "/folders", { name });
    await finishedRun(s.kiln, "A thread on a phone");
    b = await launch();
    const ctx = await b.browser.newContext({ viewport: { width: 390, height: 844 }, reducedMotion: "reduce" });
    const p = await ctx.newPage();
    await p.goto(s.front.url + "#/all");
    await p.waitForSelector(tid("thread-item"));
    const folders = p.locator(`${tid("folder-item")} a`);
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="folder-item"]').length === 4);
    // Nothing is wider than the screen: the page never scrolls sideways.
    const wide = () => p.evaluate(() => ({ page: document.documentElement.scrollWidth, screen: innerWidth, x: scrollX }));
    let w = await wide();
    assert.ok(w.page <= w.screen, `the page is ${w.page}px wide on a ${w.screen}px screen`);
    await shot(p, "mobile-390");
    // Every folder can be brought into view (the strip scrolls) and opened.
    const last = folders.last();
    await last.scrollIntoViewIfNeeded();
    const box = await last.boundingBox();
    assert.ok(box && box.width > 0 && box.x >= 0 && box.x + box.width <= 390.5 && box.y >= 0 && box.y < 844, `the last folder is on screen: ${JSON.stringify(box)}`);
    w = await wide();
    assert.equal(w.x, 0, "bringing a folder into view scrolls the strip, not the page");
    await last.click();
    await p.waitForFunction(() => location.hash.startsWith("#/folder/"));
    assert.equal(await p.locator("h1").first().textContent(), "Archive");
    // The search box is wide enough for its placeholder.
    const fit = await p.locator(tid("search")).evaluate((el) => {
      const cs = getComputedStyle(el);
      const c = document.createElement("canvas").getContext("2d");
      c.font = `${cs.fontSize} ${cs.fontFamily}`;
      const room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
      return { need: c.measureText(el.placeholder).width, room };
    });
    assert.ok(fit.need <= fit.room, `the placeholder needs ${fit.need}px, the box has ${fit.room}px`);
    await ctx.close();
  } finally { await b?.browser.close(); await s.close(); }
});
