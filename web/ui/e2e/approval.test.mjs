// The main flow: a run asks for approval -> Action (count) -> approve in the
// card -> the run finishes -> Unread -> opening the thread clears it; a run
// that finishes on the open thread is read at once.
// Also takes the screenshots of the main views.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, shot, startApprovalRun, tid, until } from "./harness.mjs";

test("approve from the Action view, then read it from Unread", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await s.kiln.api("POST", "/folders", { name: "Research" });
    await s.kiln.api("POST", "/folders", { name: "Ops" });
    const done = await s.kiln.api("POST", "/threads", { title: "Summarise the release notes" });
    await s.kiln.api("POST", `/threads/${done.id}/runs`, { input: { text: 'tool echo {"notes":"v1.2"}\ntext The release adds **approvals** and `retry`.' }, model: "scripted" });
    const { thread } = await startApprovalRun(s.kiln, "Write a note to a.txt");

    await p.goto(s.front.url + "#/all");
    await p.waitForSelector(`${tid("thread-item")}[data-thread-id="${thread.id}"]`);
    await p.waitForFunction(() => document.querySelector('[data-testid="count-action"]')?.textContent === "1");
    await p.waitForFunction(() => document.querySelector('[data-testid="count-unread"]')?.textContent === "1");
    await shot(p, "inbox");

    await p.click(tid("nav-action"));
    const card = p.locator(tid("approval-card"));
    await card.waitFor();
    assert.equal(await card.count(), 1);
    assert.match(await card.textContent(), /append_file/);
    assert.match(await card.locator("pre").textContent(), /"path": "a.txt"/);
    await shot(p, "action");

    await card.locator(tid("approve")).click();
    await p.waitForFunction(() => document.querySelector('[data-testid="count-action"]')?.textContent === "0");
    await p.locator(tid("approval-card")).waitFor({ state: "detached" });
    // The run goes on to the end and the thread lands in Unread.
    await p.waitForFunction(() => document.querySelector('[data-testid="count-unread"]')?.textContent === "2");
    await p.click(tid("nav-unread"));
    const item = p.locator(`${tid("thread-item")}[data-thread-id="${thread.id}"]`);
    await item.waitFor();
    // The view says unread; its rows do not repeat it, and have the pin and the menu.
    assert.doesNotMatch(await item.textContent(), /unread/);
    assert.equal(await item.locator(tid("pin")).count(), 1);
    assert.equal(await item.locator(tid("thread-menu")).count(), 1);

    await item.locator("a").click();
    await p.waitForSelector(`${tid("thread-view")}[data-thread-id="${thread.id}"]`);
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "All done." }).waitFor();
    assert.equal(await p.locator(tid("tool-call")).count(), 1);
    await p.waitForFunction(() => document.querySelector('[data-testid="count-unread"]')?.textContent === "1");
    const t = await s.kiln.api("GET", `/threads/${thread.id}`);
    assert.equal(t.unread, false, "opening the thread marked it read");
    await p.click(tid("nav-unread"));
    await p.locator(`${tid("thread-item")}[data-thread-id="${thread.id}"]`).waitFor({ state: "detached" });

    // Settings, light.
    await p.click(tid("nav-settings"));
    await p.waitForSelector(`${tid("settings")} ${tid("status-version")}`);
    assert.equal(await p.locator(tid("settings-schedules-link")).getAttribute("href"), "#/triggers");
    await p.waitForSelector(`${tid("plugin")}[data-plugin-id="util"]`);
    await shot(p, "settings");

    // Keyboard: ? toggles the shortcut list, Escape closes it; / focuses search.
    await p.click(tid("nav-all"));
    await p.waitForSelector(tid("thread-item"));
    await p.locator("body").click({ position: { x: 600, y: 700 } });
    await p.keyboard.press("?");
    await p.waitForSelector(tid("shortcuts"));
    await p.keyboard.press("Escape");
    await p.locator(tid("shortcuts")).waitFor({ state: "detached" });
    await p.keyboard.press("/");
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "search");
    await p.keyboard.press("Escape");
    await p.keyboard.press("j");
    assert.equal(await p.evaluate(() => document.activeElement?.closest("[data-testid=thread-item]") !== null), true);
    await p.keyboard.press("j");
    await p.keyboard.press("Enter");
    await p.waitForSelector(tid("thread-view"));
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("a thread with an open approval card, live, and keyboard approve (a)", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const { thread } = await startApprovalRun(s.kiln, "Append a line to a.txt", 'tool echo {"step":1}\ntool append_file {"path":"a.txt","line":"x"}\ntext Wrote **a.txt**. See [docs](https://example.com/docs).');
    await p.goto(s.front.url + `#/thread/${thread.id}`);
    const card = p.locator(`${tid("approval-card")}[data-status="open"]`);
    await card.waitFor();
    await p.waitForSelector(`${tid("run-status")}[data-status="interrupted"]`);
    await shot(p, "thread-approval");
    await card.focus();
    await p.keyboard.press("a");
    await p.waitForSelector(`${tid("approval-card")}[data-status="decided"]`);
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    const last = p.locator(`${tid("message")}[data-role="assistant"]`).last();
    await last.locator("a[href='https://example.com/docs'][rel='noopener noreferrer']").waitFor();
    assert.equal(await last.locator("strong").textContent(), "a.txt");
    assert.equal(await p.locator(tid("tool-call")).count(), 2);
    assert.match(await p.locator(tid("activity")).textContent(), /append_file approve/);
    // The run finished while the thread was open and the page visible: it is
    // read already, so it does not land in Unread.
    assert.equal(await p.evaluate(() => document.visibilityState), "visible");
    await p.waitForFunction(() => document.querySelector('[data-testid="count-unread"]')?.textContent === "0");
    // The page marks it read once it hears of the run's end; the count was 0 before that too.
    await until(async () => (await s.kiln.api("GET", `/threads/${thread.id}`)).unread === false, "the watched run's thread read");
    assert.equal((await s.kiln.api("GET", "/inbox?queue=unread")).items.length, 0);
    assert.equal(await p.locator(".thread-head button", { hasText: "Mark read" }).count(), 0);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("dark theme screenshot", async () => {
  const s = await setup({ dark: true });
  const p = s.page;
  try {
    const { thread } = await startApprovalRun(s.kiln, "Append a line to a.txt");
    await p.goto(s.front.url + `#/thread/${thread.id}`);
    await p.locator(`${tid("approval-card")}[data-status="open"]`).waitFor();
    assert.equal(await p.evaluate(() => matchMedia("(prefers-color-scheme: dark)").matches), true);
    await shot(p, "thread-approval-dark");
  } finally { await s.close(); }
});
