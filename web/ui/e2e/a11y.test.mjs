// Accessibility: axe-core audits the main views, in light and dark themes,
// with an approval card on screen and the Settings panels open; serious
// and critical violations fail (missing labels, contrast, landmarks, ARIA misuse). Keyboard focus order
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
      // The Providers panel with OpenAI's form open on a pasted key (on a
      // server without providers, the panel says so; audited either way).
      await p.waitForSelector(`${tid("providers")}:not([data-state="loading"])`);
      const openai = p.locator(`${tid("provider")}[data-provider-id="openai"]`);
      if (await openai.count()) {
        await openai.locator(tid("provider-edit")).click();
        await openai.locator(tid("secret-mode-paste")).check();
        await openai.locator(tid("secret-paste")).waitFor();
        await audit(p, "settings with a provider's form");
        await openai.locator(tid("provider-reset")).click();
        await openai.locator(tid("provider-confirm")).waitFor();
      }
      await audit(p, "settings with the providers panel");
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
