// The Sandboxes page on the wasm runtime with no Docker reachable
// (DOCKER_HOST points nowhere): a sandbox created from the page runs
// `echo hello` with its output streamed and exit code 0, and `false` with
// its code (1) shown; Destroy, confirmed, removes it. An agent's
// sandbox.exec makes the thread's own sandbox (metadata kiln.io/thread):
// its row links to the thread, and its file is there from the page.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, tid } from "./harness.mjs";

const sandboxes = async (kiln) => {
  const r = await fetch(`${kiln.url}/v1/sandboxes`);
  assert.equal(r.status, 200);
  return (await r.json()).items;
};

/** Polls until the server lists a sandbox that pred accepts; returns it. */
async function waitSandbox(kiln, pred, what) {
  const end = Date.now() + 30000;
  for (;;) {
    const hit = (await sandboxes(kiln)).find(pred);
    if (hit) return hit;
    if (Date.now() > end) throw new Error(`no sandbox: ${what}\n${kiln.log}`);
    await new Promise((r) => setTimeout(r, 100)); // polling a condition, not a fixed sleep
  }
}

test("sandboxes: create, echo and false with their exit codes, destroy; a thread's own sandbox links to the thread", async () => {
  const s = await setup({ env: { KILN_SANDBOX_RUNTIME: "wasm", DOCKER_HOST: "unix:///nonexistent.sock" } });
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/sandboxes");
    await p.locator(tid("sandboxes-empty")).waitFor();

    // Create one from the page on wasm, with a 5-minute expiry.
    await p.locator(tid("sandbox-runtime")).locator("option", { hasText: /^wasm$/ }).waitFor({ state: "attached" });
    await p.locator(tid("sandbox-runtime")).selectOption("wasm");
    await p.locator(tid("sandbox-timeout")).fill("5");
    await p.locator(tid("sandbox-create-submit")).click();
    const row = p.locator(tid("sandbox"));
    await row.waitFor();
    const [sb] = await sandboxes(s.kiln);
    assert.equal(sb.runtime, "wasm");
    await p.waitForSelector(`${tid("sandbox")}[data-sandbox-id="${sb.id}"][data-state=Running]`);
    assert.match(await row.locator(tid("sandbox-expiry")).textContent(), /^in (4m|5m)/);
    assert.equal(await row.locator(tid("sandbox-thread")).count(), 0, "no thread owns it");

    // echo hello: streamed stdout, exit code 0.
    const box = row.locator(tid("exec-box"));
    const input = box.locator(tid("exec-input"));
    const runs = box.locator(tid("exec-run-item"));
    await input.fill("echo hello");
    await input.press("Enter");
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(1)[data-state=exit][data-exit-code="0"]`);
    assert.equal(await runs.nth(0).locator(`${tid("exec-output")} [data-stream=stdout]`).textContent(), "hello\n");
    assert.match(await runs.nth(0).locator(tid("exec-status")).textContent(), /^exit code 0/);

    // false: no output, its exit code shown as a failure.
    await input.fill("false");
    await input.press("Enter");
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(2)[data-state=exit][data-exit-code="1"]`);
    assert.equal(await runs.nth(1).locator(tid("exec-status")).textContent(), "exit code 1");
    assert.equal(await runs.nth(1).locator(`${tid("exec-status")} .fail-text`).count(), 1);
    assert.equal(await runs.nth(1).locator(tid("exec-output")).count(), 0);

    // Destroy, confirmed on the page: gone from the page and the server.
    await row.locator(tid("sandbox-destroy")).click();
    await row.locator(tid("sandbox-destroy-confirm")).click();
    await row.waitFor({ state: "detached" });
    await p.locator(tid("sandboxes-empty")).waitFor();
    assert.deepEqual(await sandboxes(s.kiln), []);

    // An agent's sandbox.exec makes the thread's own sandbox (kiln.io/thread);
    // its row links to the thread.
    const thread = await s.kiln.api("POST", "/threads", { title: "Build the report" });
    await s.kiln.api("POST", `/threads/${thread.id}/runs`, {
      input: { text: 'tool sandbox.exec {"command": "echo made > /note.txt"}\ntext done' }, model: "scripted" });
    const own = await waitSandbox(s.kiln, (x) => x.metadata?.["kiln.io/thread"] === thread.id, `the sandbox of ${thread.id}`);
    await p.locator(tid("sandboxes-refresh")).click();
    const ownRow = p.locator(`${tid("sandbox")}[data-sandbox-id="${own.id}"]`);
    await ownRow.waitFor();
    const link = ownRow.locator(tid("sandbox-thread-link"));
    assert.equal(await link.getAttribute("href"), `#/thread/${encodeURIComponent(thread.id)}`);
    assert.match(await ownRow.locator(tid("sandbox-metadata-list")).textContent(), new RegExp(`kiln.io/thread=${thread.id}`));
    // Its file is there: the agent's sandbox, reached from the page.
    await ownRow.locator(tid("sandbox-exec-toggle")).click();
    const ownInput = ownRow.locator(tid("exec-input"));
    await ownInput.fill("cat /note.txt");
    await ownInput.press("Enter");
    await ownRow.locator(`${tid("exec-run-item")}[data-exit-code="0"] [data-stream=stdout]`, { hasText: "made" }).waitFor();

    // The link, followed with the keyboard, opens the thread.
    await link.focus();
    await p.keyboard.press("Enter");
    await p.waitForSelector(`${tid("thread-view")}[data-thread-id="${thread.id}"]`);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
