// Browser notifications: turned on in Settings, a new Action item shows one
// naming the tool. window.Notification is a recording fake.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, startApprovalRun, tid } from "./harness.mjs";

test("a new Action item notifies once notifications are on", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await s.context.grantPermissions(["notifications"]);
    await s.context.addInitScript(() => {
      const shown = [];
      class FakeNotification extends EventTarget {
        static permission = "granted";
        static requestPermission() { return Promise.resolve("granted"); }
        constructor(title, options = {}) {
          super();
          this.title = title; this.body = options.body; this.tag = options.tag; this.onclick = null;
          shown.push({ title, body: options.body, tag: options.tag });
        }
        close() {}
      }
      Object.defineProperty(window, "Notification", { value: FakeNotification, configurable: true, writable: true });
      window.__notifications = shown;
    });
    await p.goto(s.front.url + "#/settings");
    await p.click(tid("notify-enable"));
    await p.waitForSelector(tid("notify-disable"));
    assert.equal(await p.evaluate(() => localStorage.getItem("kiln.notify")), "on");
    await p.waitForFunction(() => document.querySelector('[data-testid="count-action"]')?.textContent === "0");
    assert.deepEqual(await p.evaluate(() => window.__notifications), []);

    const { thread } = await startApprovalRun(s.kiln, "Ping me");
    await p.waitForFunction(() => document.querySelector('[data-testid="count-action"]')?.textContent === "1");
    await p.waitForFunction(() => window.__notifications.length > 0);
    const shown = await p.evaluate(() => window.__notifications);
    assert.equal(shown.length, 1);
    assert.match(shown[0].title, /append_file/);
    assert.equal(shown[0].body, thread.title);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
