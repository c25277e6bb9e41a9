// With KILN_API_TOKEN the UI asks for the token once, keeps it for the tab
// and sends it as a bearer token (REST and both event streams).
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, tid } from "./harness.mjs";

const TOKEN = "e2e-token-0123456789abcdef0123456789abcdef";

test("token prompt", async () => {
  const s = await setup({ env: { KILN_API_TOKEN: TOKEN } });
  const p = s.page;
  try {
    const t = await s.kiln.api("POST", "/threads", { title: "Behind a token" });
    await p.goto(s.front.url + "#/all");
    await p.waitForSelector(tid("token-input"));
    await p.fill(tid("token-input"), "wrong-token");
    await p.click(tid("token-submit"));
    await p.locator("[role=dialog] [role=alert]", { hasText: "refused" }).waitFor();
    await p.fill(tid("token-input"), TOKEN);
    await p.click(tid("token-submit"));
    await p.locator(tid("token-input")).waitFor({ state: "detached" });
    await p.locator(`${tid("thread-item")}[data-thread-id="${t.id}"]`).waitFor();
    assert.equal(await p.evaluate(() => sessionStorage.getItem("kiln.token")), TOKEN);

    // The global stream works with the token: a new thread shows up live.
    const t2 = await s.kiln.api("POST", "/threads", { title: "Arrives live" });
    await p.locator(`${tid("thread-item")}[data-thread-id="${t2.id}"]`).waitFor();

    // A reload in the same tab does not ask again.
    await p.reload();
    await p.locator(`${tid("thread-item")}[data-thread-id="${t.id}"]`).waitFor();
    assert.equal(await p.locator(tid("token-input")).count(), 0);
    assert.equal(await p.locator(tid("offline-banner")).count(), 0);
  } finally { await s.close(); }
});
