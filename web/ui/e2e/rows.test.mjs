// What a thread's row tells apart: the folder the thread is in (in every
// list but that folder's own), and for the threads a trigger started, all
// named after it, which fire it was: when, in the trigger's zone, and how.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, shot, tid, until } from "./harness.mjs";

const row = (id) => `${tid("thread-item")}[data-thread-id="${id}"]`;

test("rows: a thread's folder by name; a trigger's threads by when it fired", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const work = await s.kiln.api("POST", "/folders", { name: "Work" });
    const filed = await s.kiln.api("POST", "/threads", { title: "Filed thread" });
    await s.kiln.api("PATCH", `/threads/${filed.id}`, { folder_id: work.id });
    const loose = await s.kiln.api("POST", "/threads", { title: "Loose thread" });

    // Two fires of one trigger, in different seconds: two threads of the same name.
    const tr = await s.kiln.api("POST", "/triggers", { name: "nightly report", kind: "cron", cron: "30 2 * * *", timezone: "Europe/Berlin", prompt: "text Report written.", model: "scripted" });
    const o1 = await s.kiln.api("POST", `/triggers/${tr.id}/run`);
    const sec = Math.floor(Date.now() / 1000);
    await until(async () => Math.floor(Date.now() / 1000) > sec, "the next second"); // a fire in a later second than the first
    const o2 = await s.kiln.api("POST", `/triggers/${tr.id}/run`);
    assert.ok(o1.thread_id && o2.thread_id && o1.thread_id !== o2.thread_id, "each fire started its own thread");

    await p.goto(s.front.url + "#/all");
    await p.waitForSelector(row(o2.thread_id));
    await shot(p, "rows-folder-trigger");
    assert.equal(await p.locator(`${row(filed.id)} ${tid("row-folder")}`).innerText(), "▸ Work");
    assert.equal(await p.locator(`${row(loose.id)} ${tid("row-folder")}`).count(), 0, "a thread in no folder names none");
    assert.equal(await p.locator(`${row(loose.id)} ${tid("row-trigger")}`).count(), 0, "a thread a person started says nothing of triggers");

    const fired = async (id) => {
      const el = p.locator(`${row(id)} ${tid("row-trigger")}`);
      return { text: await el.innerText(), title: await p.locator(`${row(id)} .row-title`).innerText() };
    };
    const a = await fired(o1.thread_id), b = await fired(o2.thread_id);
    assert.equal(a.title, b.title, "the trigger's threads share its name");
    // When it fired, in the trigger's zone (Berlin, in winter: CET), and how (Run now, not the schedule).
    assert.match(a.text, /^◷ fired \w{3}, \d{1,2} \w{3} \d{4}, \d\d:\d\d(:\d\d)? CE[S]?T \(run now\)$/);
    const th = await s.kiln.api("GET", `/threads/${o1.thread_id}`);
    assert.equal(th.trigger?.occurrence_id, o1.id, "the API says which fire started the thread");
    assert.equal(await p.locator(`${row(o1.thread_id)} ${tid("row-trigger")} time`).getAttribute("datetime"), th.trigger.scheduled_at);
    assert.notEqual(a.text, b.text, "the trigger's threads are told apart by when it fired");

    // In the folder's own list, the folder is not repeated.
    await p.click(`${tid("folder-item")} a`);
    await p.waitForSelector(row(filed.id));
    assert.equal(await p.locator(`${row(filed.id)} ${tid("row-folder")}`).count(), 0);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
