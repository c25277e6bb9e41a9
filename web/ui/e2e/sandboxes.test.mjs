// The Sandboxes page, on the wasm runtime (no Docker needed): a sandbox
// is created from the page with metadata and listed with its state,
// runtime and a live expiry; commands run in it with their output
// streamed in as it comes (stdout and stderr), exit code 0, a failing
// command's code, and an interrupt; Renew moves the expiry; a refused
// create shows the server's message; Destroy asks on the page first and
// the sandbox is gone (audited by axe-core).
import { test } from "node:test";
import assert from "node:assert/strict";
import { audit, setup, tid } from "./harness.mjs";

const sandboxes = async (kiln) => {
  const r = await fetch(`${kiln.url}/v1/sandboxes`);
  assert.equal(r.status, 200);
  return (await r.json()).items;
};

test("sandboxes: create, list, run commands with streamed output, renew, destroy", async () => {
  const s = await setup({ env: { KILN_SANDBOX_RUNTIME: "wasm" } });
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/all");
    await p.locator(tid("empty")).waitFor();
    assert.equal(await p.locator(tid("nav-sandboxes")).getAttribute("href"), "#/sandboxes");
    await p.keyboard.press("g"); // g then b: the shortcut to Sandboxes
    await p.keyboard.press("b");
    await p.locator(tid("sandboxes-empty")).waitFor();
    assert.equal(await p.locator(tid("nav-sandboxes")).getAttribute("aria-current"), "page");

    // A refused create says why (wasm, the default here, takes no image).
    await p.locator(tid("sandbox-image")).fill("busybox:latest");
    await p.locator(tid("sandbox-create-submit")).click();
    assert.match(await p.locator(`${tid("sandbox-create-error")}[role=alert]`).textContent(), /takes no image/);
    assert.deepEqual(await sandboxes(s.kiln), []);

    // The runtimes are those the enabled plugins provide; wasm takes no image.
    await p.locator(tid("sandbox-runtime")).locator("option", { hasText: /^wasm$/ }).waitFor({ state: "attached" });
    await p.locator(tid("sandbox-runtime")).selectOption("wasm");
    assert.equal(await p.locator(tid("sandbox-image")).isDisabled(), true);
    await p.locator(tid("sandbox-timeout")).fill("10");
    await p.locator(tid("sandbox-metadata")).fill("purpose=e2e, team=ui");
    await p.locator(tid("sandbox-create-submit")).click();
    const row = p.locator(tid("sandbox"));
    await row.waitFor();
    assert.equal(await p.locator(tid("sandbox-create-error")).count(), 0);
    const [sb] = await sandboxes(s.kiln);
    assert.equal(sb.runtime, "wasm");
    assert.deepEqual(sb.metadata, { purpose: "e2e", team: "ui" });
    assert.equal(await row.getAttribute("data-sandbox-id"), sb.id);
    await p.locator(`${tid("sandboxes-note")}`, { hasText: `Created sandbox ${sb.id}.` }).waitFor();
    await p.waitForSelector(`${tid("sandbox")}[data-state=Running]`);
    assert.equal(await row.locator(tid("sandbox-state")).textContent(), "Running");
    assert.equal(await row.locator(tid("sandbox-runtime-badge")).textContent(), "wasm");
    assert.match(await row.locator(tid("sandbox-metadata-list")).textContent(), /purpose=e2e.*team=ui/);
    // wasm cannot pause: no Pause button.
    assert.equal(await row.locator(tid("sandbox-pause")).count(), 0);

    // The expiry counts down while the page is open.
    const expiry = row.locator(`${tid("sandbox-expiry")} time`);
    const first = await expiry.textContent();
    assert.match(first, /^in (9m|10m)/);
    await p.waitForFunction((t) => document.querySelector('[data-testid="sandbox-expiry"] time')?.textContent !== t, first, { timeout: 5000 });

    // The command box opened with the new sandbox; Enter runs a command.
    const box = row.locator(tid("exec-box"));
    await box.waitFor();
    assert.equal(await row.locator(tid("sandbox-exec-toggle")).getAttribute("aria-expanded"), "true");
    const input = box.locator(tid("exec-input"));
    const runs = box.locator(tid("exec-run-item"));
    await input.fill("echo hello");
    await input.press("Enter");
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(1)[data-state=exit][data-exit-code="0"]`);
    assert.equal(await runs.nth(0).locator(`${tid("exec-output")} [data-stream=stdout]`).textContent(), "hello\n");
    assert.match(await runs.nth(0).locator(tid("exec-status")).textContent(), /^exit code 0/);
    assert.equal(await input.inputValue(), "", "the box is cleared for the next command");

    // Output shows as it arrives: the first line before the command ends.
    await input.fill("echo first; echo oops >&2; sleep 2; echo second");
    await input.press("Enter");
    const second = runs.nth(1);
    await second.locator("[data-stream=stdout]", { hasText: "first" }).waitFor();
    assert.equal(await second.getAttribute("data-state"), "running", "output is shown before the command has ended");
    assert.equal(await second.locator("[data-stream=stderr]").textContent(), "oops\n");
    assert.equal(await box.locator(tid("exec-interrupt")).count(), 1, "Interrupt is offered while it runs");
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(2)[data-exit-code="0"]`);
    assert.match(await second.locator(tid("exec-output")).textContent(), /first\noops\nsecond\n/);

    // A failing command's code, and a command that does not exist (127).
    await input.fill("exit 3");
    await input.press("Enter");
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(3)[data-state=exit][data-exit-code="3"]`);
    assert.equal(await runs.nth(2).locator(tid("exec-status")).textContent(), "exit code 3");
    await input.fill("nosuchcmd");
    await input.press("Enter");
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(4)[data-exit-code="127"]`);
    assert.match(await runs.nth(3).locator("[data-stream=stderr]").textContent(), /not found/);

    // Interrupt: a long command stops.
    await input.fill("echo start; sleep 30");
    await input.press("Enter");
    await runs.nth(4).locator("[data-stream=stdout]", { hasText: "start" }).waitFor();
    await box.locator(tid("exec-interrupt")).click();
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(5)[data-state=interrupted]`, { timeout: 5000 });
    assert.equal(await runs.nth(4).locator(tid("exec-status")).textContent(), "interrupted");
    // And with Ctrl+C in the box.
    await input.fill("sleep 30");
    await input.press("Enter");
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(6)[data-state=running][data-started]`); // its init event came
    await input.press("Control+c");
    await p.waitForSelector(`${tid("exec-run-item")}:nth-child(6)[data-state=interrupted]`, { timeout: 5000 });
    await box.locator(tid("exec-run")).waitFor();

    // Renew: the expiry moves to an hour from now, on the page and the server.
    await row.locator(tid("sandbox-renew-for")).selectOption("3600");
    await row.locator(tid("sandbox-renew")).click();
    await p.waitForFunction(() => /^in (59m|1h)/.test(document.querySelector('[data-testid="sandbox-expiry"] time')?.textContent ?? ""));
    const renewed = (await sandboxes(s.kiln))[0];
    assert.ok(Date.parse(renewed.expiresAt) - Date.now() > 50 * 60 * 1000, `renewed to ${renewed.expiresAt}`);
    assert.equal(await row.locator(tid("sandbox-action-error")).count(), 0);

    // Destroy asks on the page; Escape (or Cancel) keeps the sandbox.
    await row.locator(tid("sandbox-destroy")).click();
    const confirm = row.locator(tid("sandbox-confirm"));
    await confirm.waitFor();
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "sandbox-destroy-confirm");
    await audit(p, "sandboxes with command output and a confirmation");
    await p.keyboard.press("Escape");
    await confirm.waitFor({ state: "detached" });
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "sandbox-destroy");
    assert.equal((await sandboxes(s.kiln)).length, 1, "still there");

    // Confirm with the keyboard: it is gone, from the page and the server.
    await p.keyboard.press("Enter");
    await confirm.waitFor();
    await p.keyboard.press("Enter");
    await row.waitFor({ state: "detached" });
    await p.locator(tid("sandboxes-note"), { hasText: `Destroyed sandbox ${sb.id}.` }).waitFor();
    await p.locator(tid("sandboxes-empty")).waitFor();
    assert.deepEqual(await sandboxes(s.kiln), []);
    const gone = await fetch(`${s.kiln.url}/v1/sandboxes/${sb.id}`);
    assert.equal(gone.status, 404);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
