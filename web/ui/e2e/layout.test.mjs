// The layout holds when views scroll: Settings at a short window keeps the
// sidebar and its section links in place while its content fills the
// window, a link to a section lands on it even as the panels above load,
// and at 390 px a long list keeps its header (the search box) off the
// new-thread box.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch, setup, shot, tid } from "./harness.mjs";

/** Whether two bounding boxes share any area. */
const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

test("Settings at a short window: scrolled to the end, the sidebar and the section links stay and the content fills the window", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.setViewportSize({ width: 1280, height: 500 });
    await p.goto(s.front.url + "#/settings");
    await p.waitForSelector(`${tid("settings")} ${tid("status-version")}`);
    await p.waitForSelector(tid("plugin"));
    const settings = p.locator(tid("settings"));
    await settings.evaluate((el) => { el.scrollTop = el.scrollHeight; });
    // Keys too: End scrolls whatever scrolls, the page included if it can.
    await p.keyboard.press("End");
    await p.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    await p.waitForFunction(() => { const el = document.querySelector('[data-testid="settings"]'); return el.scrollTop + el.clientHeight >= el.scrollHeight - 1; });
    await shot(p, "settings-short-bottom");
    const got = await p.evaluate(() => {
      const r = (sel) => document.querySelector(sel).getBoundingClientRect();
      return { page: scrollY, win: innerHeight, side: r("nav.side"), main: r("main"), nav: r(".settings-nav"), last: r('[data-testid="settings-triggers"]') };
    });
    assert.equal(got.page, 0, "the page itself never scrolls, only the view");
    assert.equal(got.side.top, 0, "the sidebar starts at the top of the window");
    assert.equal(got.side.bottom, got.win, "the sidebar reaches the bottom of the window");
    assert.equal(got.main.bottom, got.win, "the content reaches the bottom of the window");
    assert.ok(got.nav.top >= 0 && got.nav.bottom <= 100, `the section links stay at the top: ${JSON.stringify(got.nav)}`);
    assert.ok(got.last.bottom <= got.win, "the last panel is in view");
    // A section link still works from there.
    await p.click(tid("settings-nav-general"));
    await p.waitForFunction(() => location.hash === "#/settings/general");
    const general = await p.locator("#set-general").boundingBox();
    assert.ok(general.y >= 40 && general.y < 200, `General is at the top, under the header: ${JSON.stringify(general)}`);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("a link to a Settings section opens on it, also when the panels above load after it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kiln-e2e-layout-"));
  const s = await setup();
  const p = s.page;
  try {
    // A panel above MCP with content that arrives after the page.
    await s.kiln.api("POST", "/grants", { path: dir, name: "scratch" });
    await p.setViewportSize({ width: 1280, height: 700 });
    for (const section of ["mcp", "skills", "files"]) {
      await p.goto("about:blank");
      await p.goto(s.front.url + `#/settings/${section}`);
      await p.waitForSelector(`${tid("settings")} ${tid("status-version")}`);
      await p.waitForSelector(`${tid("plugin")}`);
      await p.waitForSelector(`#set-${section}`);
      // Settled: every panel has loaded (their lists or empty states are shown).
      await p.waitForFunction(() => !document.querySelector(".settings .loading, .settings [aria-busy=true]"));
      await p.waitForTimeout(300); // a late load would move the page: look after it had the chance (this checks a position, not a state)
      await shot(p, `settings-direct-${section}`);
      // The section starts right under the header, or (near the page's end) the view is scrolled as far as it goes with the section in it.
      const at = await p.evaluate((section) => {
        const view = document.querySelector('[data-testid="settings"]');
        const head = view.querySelector(".view-head").getBoundingClientRect().bottom;
        const box = document.getElementById(`set-${section}`).getBoundingClientRect();
        return { top: box.top, head, end: view.scrollTop + view.clientHeight >= view.scrollHeight - 1, bottom: view.getBoundingClientRect().bottom };
      }, section);
      const under = at.top >= at.head - 1 && at.top < at.head + 40;
      assert.ok(under || (at.end && at.top >= at.head - 1 && at.top < at.bottom - 100), `#/settings/${section} opens on ${section}: ${JSON.stringify(at)}`);
      assert.equal(await p.locator(`${tid(`settings-nav-${section}`)}`).getAttribute("aria-current"), "location");
    }
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); rmSync(dir, { recursive: true, force: true }); }
});

test("390 px wide with a long list: the search box stays off the new-thread box, scrolled or not", async () => {
  const s = await setup();
  const dir = mkdtempSync(join(tmpdir(), "kiln-e2e-layout-"));
  let b;
  try {
    for (const name of ["Research", "Operations", "Personal"]) await s.kiln.api("POST", "/folders", { name });
    // A grant adds the working-folder picker, which makes the new-thread box taller.
    await s.kiln.api("POST", "/grants", { path: dir, name: "scratch" });
    for (let i = 0; i < 15; i++) await s.kiln.api("POST", "/threads", { title: `Thread ${i}` });
    b = await launch();
    const ctx = await b.browser.newContext({ viewport: { width: 390, height: 844 }, reducedMotion: "reduce" });
    const p = await ctx.newPage();
    await p.goto(s.front.url + "#/all");
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 15);
    await p.waitForSelector("#new-folder-pick");
    await shot(p, "mobile-390-long-list");
    const boxes = async () => ({
      title: await p.locator(".list-view .view-head h1").boundingBox(),
      search: await p.locator(tid("search")).boundingBox(),
      box: await p.locator(tid("new-composer")).boundingBox(),
      input: await p.locator(`${tid("new-composer")} ${tid("composer-input")}`).boundingBox(),
    });
    const b0 = await boxes();
    assert.ok(!overlap(b0.search, b0.box), `the search box ${JSON.stringify(b0.search)} overlaps the new-thread box ${JSON.stringify(b0.box)}`);
    assert.ok(!overlap(b0.title, b0.search), `the title ${JSON.stringify(b0.title)} overlaps the search box ${JSON.stringify(b0.search)}`);
    assert.ok(b0.input.height >= 30, `the new-thread input keeps its height: ${JSON.stringify(b0.input)}`);
    // Scrolled: the header stays on top and the box goes under it, whole.
    await p.locator(".list-view").evaluate((el) => { el.scrollTop = 60; });
    await p.waitForFunction(() => document.querySelector(".list-view").scrollTop >= 60);
    const b1 = await boxes();
    assert.ok(b1.search.y >= 0 && b1.search.height >= 30, `the search box stays in view, whole: ${JSON.stringify(b1.search)}`);
    assert.equal(b1.box.height, b0.box.height, "the new-thread box keeps its height when the list scrolls");
    await ctx.close();
  } finally { await b?.browser.close(); await s.close(); rmSync(dir, { recursive: true, force: true }); }
});
