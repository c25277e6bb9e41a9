// A crash inside a non-idempotent tool call: kill -9 the server while
// append_file has taken effect but not returned, restart it, and resolve the
// recovery card in the Action view with Skip; the line is written once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setup, tid, until } from "./harness.mjs";

test("recovery card after a crash inside append_file: skip", async () => {
  // The tool takes effect, then waits 3 s before returning: the kill lands in between.
  const s = await setup({ env: { KILN_TEST_TOOL_DELAY: "append_file=3s" } });
  const p = s.page;
  try {
    const file = join(s.kiln.data, "scratch", "r.txt");
    const t = await s.kiln.api("POST", "/threads", { title: "Cut off by a crash" });
    const run = await s.kiln.api("POST", `/threads/${t.id}/runs`, {
      input: { text: 'tool append_file {"path":"r.txt","line":"once"}\ntext Carried on without it.' },
      model: "scripted", interrupt_on: { append_file: false },
    });
    await p.goto(s.front.url + "#/action");
    await p.locator(tid("empty")).waitFor();
    await until(() => existsSync(file), "append_file to write r.txt");

    await s.kiln.stop("SIGKILL");
    s.kiln.env = {}; // restart without the delay, same port and data dir
    await s.kiln.start();

    // The page reconnects on its own; the cut-off call waits in Action.
    const card = p.locator(`${tid("approval-card")}[data-status="open"]`);
    await card.waitFor({ timeout: 20000 });
    assert.equal(await card.count(), 1);
    assert.match(await card.locator("h3").textContent(), /append_file.*cut off by a restart/);
    assert.ok((await card.locator(".card-reason").textContent()).trim().length > 20, "the card gives the reason");
    assert.match(await card.locator("pre").textContent(), /"path": "r.txt"/);
    assert.equal(await card.locator(tid("retry")).count(), 1);
    assert.equal(await card.locator(tid("skip")).count(), 1);
    await p.waitForFunction(() => document.querySelector('[data-testid="count-action"]')?.textContent === "1");

    await card.locator(tid("skip")).click();
    await p.locator(tid("approval-card")).waitFor({ state: "detached" });
    await p.waitForFunction(() => document.querySelector('[data-testid="count-action"]')?.textContent === "0");
    await until(async () => (await s.kiln.api("GET", `/runs/${run.id}`)).status === "succeeded", "the run to finish");
    // Not watched (the Action view was open): it lands in Unread.
    await p.waitForFunction(() => document.querySelector('[data-testid="count-unread"]')?.textContent === "1");

    assert.deepEqual(readFileSync(file, "utf8").split("\n").filter((l) => l === "once"), ["once"], "the line is in the file exactly once");
    const ints = (await s.kiln.api("GET", `/runs/${run.id}/interrupts`)).interrupts;
    assert.equal(ints.length, 1);
    assert.equal(ints[0].kind, "recovery");
    assert.equal(ints[0].decision.decision, "skip");
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
