// Accessibility: axe-core audits the main views, in light and dark themes,
// with an approval card on screen; serious and critical violations fail
// (missing labels, contrast, landmarks, ARIA misuse). Keyboard focus order
// is checked by tabbing through the sidebar.
import { test } from "node:test";
import assert from "node:assert/strict";
import { audit, setup, startApprovalRun, tid } from "./harness.mjs";

for (const dark of [false, true]) {
  test(`axe finds no serious violations (${dark ? "dark" : "light"} theme)`, async () => {
    const s = await setup({ dark });
    const p = s.page;
    try {
      await s.kiln.api("POST", "/folders", { name: "Research" });
      const { thread } = await startApprovalRun(s.kiln, "Write a note");
      await p.goto(s.front.url + "#/all");
      await p.waitForSelector(`${tid("thread-item")}[data-thread-id="${thread.id}"]`);
      await audit(p, "inbox");
      await p.click(tid("nav-action"));
      await p.locator(tid("approval-card")).waitFor();
      await audit(p, "action");
      await p.goto(s.front.url + `#/thread/${thread.id}`);
      await p.locator(tid("approval-card")).waitFor();
      await audit(p, "thread");
      await p.click(tid("nav-settings"));
      await p.waitForSelector(tid("settings"));
      // The Plugins panel, with the built-in util plugin's details open.
      const util = p.locator(`${tid("plugin")}[data-plugin-id="util"]`);
      await util.waitFor();
      for (const d of ["plugin-tools", "plugin-permissions"]) await util.locator(`${tid(d)} summary`).click();
      await audit(p, "settings");
    } finally {
      await s.close();
    }
  });
}

test("the sidebar is reachable by keyboard, in order", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/all");
    await p.waitForSelector(tid("empty"));
    const seen = [];
    for (let i = 0; i < 8; i++) {
      await p.keyboard.press("Tab");
      seen.push(await p.evaluate(() => document.activeElement?.getAttribute("data-testid") || document.activeElement?.tagName));
    }
    const order = ["nav-all", "nav-unread", "nav-action"].map((id) => seen.indexOf(id));
    assert.ok(order.every((i) => i >= 0), `tab order ${seen.join(", ")} misses the smart views`);
    assert.deepEqual([...order].sort((a, b) => a - b), order, `smart views out of order: ${seen.join(", ")}`);
  } finally {
    await s.close();
  }
});
