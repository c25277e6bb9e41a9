// Plugins in Settings: the built-in util plugin is listed with its tools,
// is disabled and enabled again from the page (and the server's tool list
// follows), and cannot be removed. With the example WASM plugin that
// `make build` lays out, a plugin that fails to start shows why, and
// Remove asks for a confirmation on the page before deleting it (audited
// by axe-core in the dark theme).
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { KILN_BIN, UI, audit, setup, tid } from "./harness.mjs";

const row = (id) => `${tid("plugin")}[data-plugin-id="${id}"]`;

async function toolNames(kiln) {
  return (await kiln.api("GET", "/tools")).tools.map((t) => t.name);
}

test("the built-in util plugin: listed, disabled and enabled, not removable", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/settings");
    const util = p.locator(row("util"));
    await util.waitFor();
    assert.equal(await util.getAttribute("data-status"), "enabled");
    assert.equal(await util.locator(tid("plugin-status")).textContent(), "enabled");
    // One badge says it is built in (its runtime is "builtin"), not two.
    assert.deepEqual(await util.locator(".badge").allTextContents(), ["built-in", "enabled"]);
    assert.equal(await util.locator(tid("plugin-runtime")).getAttribute("data-runtime"), "builtin");
    assert.equal(await util.locator(tid("plugin-remove")).count(), 0, "a built-in has no Remove button");

    // The tools are listed, collapsed until asked for.
    const tools = util.locator(tid("plugin-tools"));
    assert.equal(await tools.locator("li", { hasText: "util.calc" }).isVisible(), false);
    await tools.locator("summary").click();
    await tools.locator("li", { hasText: "util.calc" }).waitFor();
    await tools.locator("li", { hasText: "util.now" }).waitFor();
    const perms = util.locator(tid("plugin-permissions"));
    await perms.locator("summary").click();
    assert.ok(await perms.locator("li").count() > 0, "the permissions are listed");

    // A model provider lists its models and no tools; the kiln plugin has both.
    const openai = p.locator(row("openai"));
    assert.equal(await openai.locator(tid("plugin-tools")).count(), 0, "a provider has no Tools list");
    const models = openai.locator(tid("plugin-provided-model-provider"));
    await models.locator("summary").click();
    await models.locator("li", { hasText: "openai:<model>" }).waitFor();
    const kiln = p.locator(row("kiln"));
    // As many as the server lists (echo, append_file, sleep and the file tools, today).
    const kilnTools = (await s.kiln.api("GET", "/plugins/kiln")).tools;
    assert.ok(kilnTools.includes("echo") && kilnTools.includes("write_file"), `the kiln plugin's tools: ${kilnTools}`);
    assert.equal(await kiln.locator(`${tid("plugin-tools")} summary`).textContent(), `Tools (${kilnTools.length})`);
    assert.equal(await kiln.locator(`${tid("plugin-provided-model-provider")} summary`).textContent(), "Models (2)");

    // Disable: the row says so and runs can no longer call its tools.
    const toggle = util.locator(tid("plugin-toggle"));
    assert.equal(await toggle.textContent(), "Disable util");
    await toggle.click();
    await p.waitForSelector(`${row("util")}[data-status="disabled"]`);
    assert.equal(await util.locator(tid("plugin-status")).textContent(), "disabled");
    assert.equal(await toggle.textContent(), "Enable util");
    assert.ok(!(await toolNames(s.kiln)).includes("util.calc"), "util.calc is gone from GET /tools");
    assert.equal((await s.kiln.api("GET", "/plugins/util")).enabled, false);

    // Enable: back.
    await toggle.click();
    await p.waitForSelector(`${row("util")}[data-status="enabled"]`);
    assert.equal(await toggle.textContent(), "Disable util");
    await tools.locator("li", { hasText: "util.calc" }).waitFor();
    assert.ok((await toolNames(s.kiln)).includes("util.calc"), "util.calc is back in GET /tools");
    assert.equal(await p.locator(tid("plugin-action-error")).count(), 0);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

// The example WASM plugin (make build); its folder has kiln-plugin.json and calc.wasm.
const CALC = [join(dirname(KILN_BIN), "plugins", "calc-wasm"), resolve(UI, "../../bin/plugins/calc-wasm")]
  .find((d) => existsSync(join(d, "kiln-plugin.json")) && existsSync(join(d, "calc.wasm")));

test("an installed plugin: a failure shows why, Remove asks first", { skip: CALC ? false : "no bin/plugins/calc-wasm: run make build" }, async () => {
  const s = await setup({ dark: true });
  const p = s.page;
  try {
    const info = await s.kiln.api("POST", "/plugins", { path: CALC, consent: true });
    assert.equal(info.status, "enabled");
    await p.goto(s.front.url + "#/settings");
    const calc = p.locator(row("calc"));
    await calc.waitFor();
    assert.equal(await calc.locator(tid("plugin-runtime")).textContent(), "wasm");
    assert.equal(await calc.locator(tid("plugin-builtin")).count(), 0);
    assert.equal(await calc.getAttribute("data-status"), "enabled");

    // Disable it, spoil its module, enable: the server answers 503 and the
    // row shows the plugin as failed, with the reason, once.
    await calc.locator(tid("plugin-toggle")).click();
    await p.waitForSelector(`${row("calc")}[data-status="disabled"]`);
    appendFileSync(join(info.dir, "calc.wasm"), "tampered");
    await calc.locator(tid("plugin-toggle")).click();
    await p.waitForSelector(`${row("calc")}[data-status="failed"]`);
    const failure = calc.locator(`${tid("plugin-failure")}[role=alert]`);
    assert.match(await failure.textContent(), /sha256 mismatch/);
    assert.equal(await calc.locator(tid("plugin-action-error")).count(), 0, "the reason is said once");
    assert.equal(await calc.locator(tid("plugin-status")).textContent(), "failed");
    assert.equal(await calc.locator(tid("plugin-retry")).count(), 1);

    // Remove asks on the page first; Cancel (or Escape) keeps the plugin.
    await calc.locator(tid("plugin-remove")).click();
    const confirm = calc.locator(tid("plugin-confirm"));
    await confirm.waitFor();
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "plugin-remove-confirm");
    await audit(p, "settings with a failed plugin and a confirmation (dark)");
    await confirm.locator("button", { hasText: "Cancel" }).click();
    await confirm.waitFor({ state: "detached" });
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "plugin-remove");
    await calc.locator(tid("plugin-remove")).click();
    await confirm.waitFor();
    // Focus is on the confirmation as soon as it shows (a key pressed at once reaches it).
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "plugin-remove-confirm");
    await p.keyboard.press("Escape");
    await confirm.waitFor({ state: "detached" });
    assert.equal((await s.kiln.api("GET", "/plugins/calc")).id, "calc", "still installed");

    // Confirm: it is gone, from the page and from the server.
    await calc.locator(tid("plugin-remove")).click();
    await calc.locator(tid("plugin-remove-confirm")).click();
    await calc.waitFor({ state: "detached" });
    await p.locator(`${tid("plugins")} [role=status]`, { hasText: "Removed calc 1.0.0." }).waitFor();
    const r = await fetch(`${s.kiln.url}/api/v1/plugins/calc`);
    assert.equal(r.status, 404);
    const left = (await s.kiln.api("GET", "/plugins")).plugins.map((x) => x.id);
    assert.ok(!left.includes("calc") && left.includes("util"), `calc is gone, the built-ins stay: ${left.join(", ")}`);
    await p.locator(row("util")).waitFor();
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
