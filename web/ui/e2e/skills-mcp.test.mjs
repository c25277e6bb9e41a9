// Skills and MCP servers in Settings. Skills: the built-in kiln-guide is
// listed; a new skill is written in the editor, whose frontmatter is
// checked as it is typed (a broken line is named and Create stays
// disabled until it is fixed), then it lists as custom and ready and is
// deleted after a confirmation; saving the built-in one makes a custom
// copy that shadows it until the copy is deleted. MCP: with a .mcp.json in the data root
// naming server-everything over stdio, the server shows connected with its
// tools, and Disable turns it to disabled (and Enable back); a server
// added through the Add server form (a bad ID first: the server's reason
// is shown) connects, its secret is never shown, and Remove (after a
// confirmation) takes it out of the list and of .mcp.json. Both panels
// pass the axe audit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { UI, audit, setup, tid } from "./harness.mjs";

const skill = (name) => `${tid("skill")}[data-name="${name}"]`;
const focused = (p) => p.evaluate(() => document.activeElement?.getAttribute("data-testid"));

test("skills: kiln-guide listed; create through the validating editor; delete with a confirmation", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/settings/skills");
    const guide = p.locator(skill("kiln-guide"));
    await guide.waitFor();
    assert.equal(await guide.getAttribute("data-origin"), "builtin");
    assert.equal(await guide.locator(tid("skill-origin")).textContent(), "built-in");
    assert.equal(await guide.locator(tid("skill-delete")).count(), 0, "a built-in skill has no Delete");
    assert.match(await guide.locator(tid("skill-desc")).textContent(), /Kiln/);

    await p.click(tid("skill-new"));
    const ed = p.locator(`${tid("skills")} > ${tid("skill-editor")}`);
    await ed.waitFor();
    assert.equal(await focused(p), "skill-name");
    await ed.locator(tid("skill-name")).fill("tidy-notes");
    // A frontmatter without its description: the line is named, Create is disabled.
    await ed.locator(tid("skill-content")).fill("---\nname: tidy-notes\ntools: [read_file\n---\n# Tidy\n");
    const invalid = ed.locator(tid("skill-invalid"));
    await invalid.waitFor();
    assert.match(await invalid.textContent(), /^Line \d+: \S/);
    assert.equal(await ed.getAttribute("data-verdict"), "invalid");
    assert.ok(await ed.locator(tid("skill-save")).isDisabled(), "Create is disabled while invalid");
    await audit(p, "settings: skill editor with an error");

    await ed.locator(tid("skill-content")).fill("---\nname: tidy-notes\ndescription: Tidies the user's notes. Use when asked to clean up notes.\n---\n# Tidy\n\nSort the notes by date.\n");
    await ed.locator(tid("skill-valid")).waitFor();
    assert.equal(await ed.locator(tid("skill-save")).isDisabled(), false);
    await ed.locator(tid("skill-save")).click();
    const row = p.locator(skill("tidy-notes"));
    await row.waitFor();
    await ed.waitFor({ state: "detached" });
    assert.equal(await row.getAttribute("data-origin"), "custom");
    assert.equal(await row.locator(tid("skill-origin")).textContent(), "custom");
    assert.equal(await row.getAttribute("data-ready"), "true");
    assert.equal(await row.locator(tid("skill-ready")).textContent(), "ready");
    const got = await s.kiln.api("GET", "/skills/tidy-notes");
    assert.match(got.body, /Sort the notes by date/);

    // Edit opens the editor on a SKILL.md composed from the skill.
    await row.locator(tid("skill-edit")).click();
    const red = row.locator(tid("skill-editor"));
    await red.waitFor();
    assert.match(await red.locator(tid("skill-content")).inputValue(), /^---\nname: tidy-notes\ndescription: /);
    await red.locator(tid("skill-valid")).waitFor();
    await p.keyboard.press("Escape");
    await red.waitFor({ state: "detached" });
    assert.equal(await focused(p), "skill-edit");

    // Editing the built-in one says that saving writes a custom copy.
    await guide.locator(tid("skill-edit")).click();
    await guide.locator(tid("skill-copy-note")).waitFor();
    await guide.locator(tid("skill-valid")).waitFor();
    await audit(p, "settings: editing a built-in skill");
    // Saving it makes a custom copy that shadows the built-in one; deleting the copy reveals it.
    await guide.locator(tid("skill-save")).click();
    await p.waitForSelector(`${skill("kiln-guide")}[data-origin="custom"]`);
    assert.equal(await guide.locator(tid("skill-shadows")).textContent(), "shadows built-in");
    await guide.locator(tid("skill-delete")).click();
    assert.match(await guide.locator(tid("skill-confirm")).textContent(), /built-in skill of that name takes its place/);
    await guide.locator(tid("skill-delete-confirm")).click();
    await p.waitForSelector(`${skill("kiln-guide")}[data-origin="builtin"]`);
    assert.equal(await guide.locator(tid("skill-shadows")).count(), 0);

    // Delete asks first; Escape keeps it; confirming deletes it.
    await row.locator(tid("skill-delete")).click();
    await row.locator(tid("skill-confirm")).waitFor();
    assert.equal(await focused(p), "skill-delete-confirm");
    await p.keyboard.press("Escape");
    await row.locator(tid("skill-confirm")).waitFor({ state: "detached" });
    assert.equal(await focused(p), "skill-delete");
    await row.locator(tid("skill-delete")).click();
    await row.locator(tid("skill-delete-confirm")).click();
    await row.waitFor({ state: "detached" });
    await p.locator(`${tid("skills")} [role=status]`, { hasText: "Deleted the custom tidy-notes." }).waitFor();
    const r = await fetch(`${s.kiln.url}/api/v1/skills/tidy-notes`);
    assert.equal(r.status, 404);
    await guide.waitFor();
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

const EVERYTHING = resolve(UI, "../../plugins/mcp/testdata/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");

test("MCP: an empty list says where servers are configured", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/settings/mcp");
    await p.locator(tid("mcp-empty")).waitFor();
    assert.match(await p.locator(tid("mcp-empty")).textContent(), /\.mcp\.json.*data root/);
  } finally { await s.close(); }
});

test("MCP: server-everything over stdio shows connected with its tools, and disables", { skip: existsSync(EVERYTHING) ? false : "server-everything is not installed: run make deps" }, async () => {
  const cfg = { mcpServers: { everything: { command: process.execPath, args: [EVERYTHING, "stdio"] } } };
  const s = await setup({ dark: true, files: { ".mcp.json": JSON.stringify(cfg) } });
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/settings/mcp");
    const row = p.locator(`${tid("mcp-server")}[data-id="everything"]`);
    await row.waitFor();
    // Connecting is polled every 2 s until it settles.
    await p.waitForSelector(`${tid("mcp-server")}[data-id="everything"][data-state="connected"]`, { timeout: 20000 });
    assert.equal(await row.locator(tid("mcp-state")).textContent(), "connected");
    assert.equal(await row.locator(tid("mcp-transport")).textContent(), "stdio");
    assert.match(await row.locator(tid("mcp-protocol")).textContent(), /^MCP \d{4}-\d\d-\d\d$/);
    const tools = (await s.kiln.api("GET", "/mcp-servers/everything")).tools;
    assert.ok(tools.includes("mcp.everything.echo"), `tools: ${tools}`);
    const list = row.locator(tid("mcp-tools"));
    assert.equal(await list.locator("summary").textContent(), `Tools (${tools.length})`);
    await list.locator("summary").click();
    await list.locator("li", { hasText: "mcp.everything.echo" }).waitFor();
    await audit(p, "settings: MCP server connected (dark)");

    await row.locator(tid("mcp-toggle")).click();
    await p.waitForSelector(`${tid("mcp-server")}[data-id="everything"][data-state="disabled"]`);
    assert.equal(await row.locator(tid("mcp-state")).textContent(), "disabled");
    assert.equal(await row.locator(tid("mcp-toggle")).textContent(), "Enable everything");
    assert.equal(await focused(p), "mcp-toggle");
    assert.equal((await s.kiln.api("GET", "/mcp-servers/everything")).state, "disabled");
    await audit(p, "settings: MCP server disabled (dark)");

    await row.locator(tid("mcp-toggle")).click();
    await p.waitForSelector(`${tid("mcp-server")}[data-id="everything"][data-state="connected"]`, { timeout: 20000 });
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("MCP: add server-everything through the form, see it connected, remove it", { skip: existsSync(EVERYTHING) ? false : "server-everything is not installed: run make deps" }, async () => {
  const s = await setup();
  const p = s.page;
  const secret = "e2e-secret-value-31337";
  const file = () => JSON.parse(readFileSync(join(s.kiln.data, ".mcp.json"), "utf8")).mcpServers;
  try {
    await p.goto(s.front.url + "#/settings/mcp");
    await p.locator(tid("mcp-empty")).waitFor();
    await p.click(tid("mcp-add"));
    const form = p.locator(tid("mcp-form"));
    await form.waitFor();
    assert.equal(await focused(p), "mcp-id");
    // Escape closes the form and gives the focus back to Add server.
    await p.keyboard.press("Escape");
    await form.waitFor({ state: "detached" });
    assert.equal(await focused(p), "mcp-add");
    await p.click(tid("mcp-add"));
    await form.locator(tid("mcp-id")).fill("Bad ID");
    await form.locator(tid("mcp-command")).fill(process.execPath);
    await form.locator(tid("mcp-args")).fill(`${EVERYTHING}\nstdio`);
    await form.locator(tid("mcp-env")).fill(`E2E_TOKEN=${secret}`);
    await audit(p, "settings: MCP add form");
    await form.locator(tid("mcp-form-save")).click();
    const formErr = form.locator(tid("mcp-form-error"));
    await formErr.waitFor();
    assert.match(await formErr.textContent(), /Could not add Bad ID: .*a name is/);
    assert.equal(existsSync(join(s.kiln.data, ".mcp.json")), false, "a refused server is not written");

    await form.locator(tid("mcp-id")).fill("added");
    await form.locator(tid("mcp-form-save")).click();
    await form.waitFor({ state: "detached" });
    assert.equal(await focused(p), "mcp-add");
    const row = p.locator(`${tid("mcp-server")}[data-id="added"]`);
    await row.waitFor();
    await p.waitForSelector(`${tid("mcp-server")}[data-id="added"][data-state="connected"]`, { timeout: 20000 });
    assert.equal(await row.locator(tid("mcp-transport")).textContent(), "stdio");
    assert.equal(await row.locator(tid("mcp-plugin")).count(), 0);
    assert.deepEqual(file().added, { command: process.execPath, args: [EVERYTHING, "stdio"], env: { E2E_TOKEN: secret } });
    const got = await s.kiln.api("GET", "/mcp-servers/added");
    assert.ok(got.tools.includes("mcp.added.echo"), `tools: ${got.tools}`);
    assert.ok(!JSON.stringify(got).includes(secret), "the API shows the secret");
    assert.ok(!(await p.content()).includes(secret), "the page shows the secret");

    // Remove asks first; Escape keeps it; confirming removes it.
    await row.locator(tid("mcp-remove")).click();
    await row.locator(tid("mcp-confirm")).waitFor();
    assert.equal(await focused(p), "mcp-remove-confirm");
    await audit(p, "settings: MCP remove confirmation");
    await p.keyboard.press("Escape");
    await row.locator(tid("mcp-confirm")).waitFor({ state: "detached" });
    assert.equal(await focused(p), "mcp-remove");
    await row.locator(tid("mcp-remove")).click();
    await row.locator(tid("mcp-remove-confirm")).click();
    await row.waitFor({ state: "detached" });
    await p.locator(tid("mcp-empty")).waitFor();
    await p.locator(`${tid("mcp")} [role=status]`, { hasText: "Removed added." }).waitFor();
    assert.deepEqual(file(), {});
    const r = await fetch(`${s.kiln.url}/api/v1/mcp-servers/added`);
    assert.equal(r.status, 404);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
