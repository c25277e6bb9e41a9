// Providers in Settings, against a real server: the six providers are
// listed with their states; OpenAI is configured with an environment
// reference and then with a pasted key, which the page clears once saved
// and never shows (not in the DOM, not in any API answer it received, not
// in its storage or console); a bad value is refused in the form; Reset
// asks on the page first. The composers' model choice lists GET /models
// grouped by provider, and on an older server without it (404) keeps the
// built-in choice.
//
// A server without the providers API answers 404 on GET /providers: the
// tests that need it skip, saying so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { audit, setup, shot, tid } from "./harness.mjs";

const IDS = ["openai", "anthropic", "gemini", "bedrock", "openrouter", "ollama"];
const STATE_TEXT = { ready: "ready", not_configured: "not configured", disabled: "disabled", error: "error" };
const row = (id) => `${tid("provider")}[data-provider-id="${id}"]`;
const setting = (id, name) => `${row(id)} ${tid("provider-setting")}[data-setting="${name}"]`;
const NO_API = "this kiln has no providers API (GET /api/v1/providers answers 404): rebuild it with `make kiln` once the provider hub is wired into kiln serve";

async function hasProviders(kiln) {
  const r = await fetch(`${kiln.url}/api/v1/providers`);
  if (r.status === 404) return false;
  assert.equal(r.status, 200, `GET /providers: ${r.status}`);
  return true;
}

/** What the page shows for a secret setting of a GET /providers answer. */
const secretText = (st) => (st.value === "set" ? (st.source ? `set (${st.source})` : "set") : st.value);
const apiSetting = async (kiln, id, name) => (await kiln.api("GET", `/providers/${id}`)).settings.find((x) => x.name === name);

/** Records the body of every API answer the page receives (the event streams aside, they never end). */
function recordResponses(page) {
  const seen = [];
  page.on("response", (r) => {
    const u = r.url();
    if (!u.includes("/api/v1/") || /\/events(\?|$)/.test(u)) return;
    seen.push(r.text().then((body) => ({ url: u, body }), () => ({ url: u, body: "" })));
  });
  return async () => Promise.all(seen);
}

test("providers: states, an environment reference, a pasted key that is never shown, a refused value, reset", async (t) => {
  const tag = randomBytes(8).toString("hex");
  const ENV_NAME = `KILN_E2E_OPENAI_KEY_${tag.toUpperCase()}`;
  const ENV_VALUE = `sk-e2e-env-${tag}`;
  const SECRET = `sk-e2e-pasted-${tag}`;
  // OPENAI_API_KEY empty: the developer's own key (if any) stays out of the test.
  const s = await setup({ env: { [ENV_NAME]: ENV_VALUE, OPENAI_API_KEY: "", OPENAI_BASE_URL: "" } });
  const p = s.page;
  const consoleText = [];
  p.on("console", (m) => consoleText.push(m.text()));
  try {
    if (!(await hasProviders(s.kiln))) { t.skip(NO_API); return; }
    const responses = recordResponses(p);
    // Listing the models settles each provider's state (a failed list, such
    // as Ollama's without an Ollama, makes it "error"): the page and the test see the same.
    await s.kiln.api("GET", "/models");
    await p.goto(s.front.url + "#/settings");
    await p.waitForSelector(`${tid("providers")}[data-state="loaded"]`);

    // One row per provider, in the server's order, each with its state.
    const api = (await s.kiln.api("GET", "/providers")).providers;
    assert.deepEqual([...api.map((x) => x.id)].sort(), [...IDS].sort());
    assert.deepEqual(await p.locator(tid("provider")).evaluateAll((els) => els.map((e) => e.getAttribute("data-provider-id"))), api.map((x) => x.id));
    for (const st of api) {
      const r = p.locator(row(st.id));
      assert.ok(Object.keys(STATE_TEXT).includes(st.state), `${st.id}: state ${st.state}`);
      assert.equal(await r.getAttribute("data-state"), st.state);
      assert.equal(await r.locator(tid("provider-state")).textContent(), STATE_TEXT[st.state]);
      if (st.state === "error") assert.equal(await r.locator(tid("provider-error")).textContent(), st.error);
      assert.equal(await r.locator(tid("provider-setting")).count(), (st.settings ?? []).length, `${st.id}: every setting is listed`);
    }
    const openai = p.locator(row("openai"));
    assert.match(await openai.locator(tid("provider-env")).textContent(), /^Set OPENAI_API_KEY in the server's environment, or use Edit/);
    assert.equal(await p.locator(setting("openai", "api_key")).textContent(), "not set");
    assert.match(await p.locator(setting("openai", "base_url")).textContent(), /https:\/\/api\.openai\.com\/v1 \(default\)/);

    // An environment reference: stored as ${NAME}, shown as set, from the reference.
    await openai.locator(tid("provider-edit")).click();
    const form = openai.locator(tid("provider-form"));
    await form.waitFor();
    assert.equal(await openai.locator(tid("provider-edit")).getAttribute("aria-expanded"), "true");
    assert.ok(await form.locator(`${tid("secret-mode-env")}`).isChecked(), "an environment variable is the default choice");
    await form.locator(tid("secret-env")).fill(ENV_NAME);
    await form.locator(tid("provider-save")).click();
    await form.locator(tid("provider-saved"), { hasText: "Saved." }).waitFor();
    let key = await apiSetting(s.kiln, "openai", "api_key");
    assert.deepEqual([key.value, key.source], ["set", `config (env ref \${${ENV_NAME}})`]);
    await p.locator(setting("openai", "api_key"), { hasText: `set (config (env ref \${${ENV_NAME}}))` }).waitFor();
    assert.equal(await p.locator(setting("openai", "api_key")).textContent(), secretText(key));

    // A pasted key: a password field, emptied once saved, stored in the credentials file.
    await form.locator(tid("secret-mode-paste")).check();
    const paste = form.locator(tid("secret-paste"));
    assert.equal(await paste.getAttribute("type"), "password");
    assert.equal(await paste.getAttribute("autocomplete"), "off");
    await paste.fill(SECRET);
    await form.locator(tid("provider-save")).click();
    await p.locator(setting("openai", "api_key"), { hasText: "set (credentials file)" }).waitFor();
    assert.equal(await paste.inputValue(), "", "the pasted key is cleared once saved");
    key = await apiSetting(s.kiln, "openai", "api_key");
    assert.deepEqual([key.value, key.source], ["set", "credentials file"]);
    assert.match(await form.locator(tid("provider-saved")).textContent(), /^Saved\. OpenAI is (ready|error|not configured)\.$/);

    // A value the server refuses: its message, in the form.
    await form.locator(`${tid("provider-field")}[data-setting="api"]`).fill("bogus");
    await form.locator(tid("provider-save")).click();
    const ferr = form.locator(`${tid("provider-form-error")}[role=alert]`);
    await ferr.waitFor();
    assert.match(await ferr.textContent(), /openai\.api: "bogus" is not one of chat, responses/);
    assert.equal((await apiSetting(s.kiln, "openai", "api")).value, "chat", "nothing was stored");
    await form.locator(`${tid("provider-field")}[data-setting="api"]`).fill("");
    await audit(p, "settings with the OpenAI form open and an error");
    await openai.scrollIntoViewIfNeeded();
    await shot(p, "settings-providers");

    // The composers list the models GET /models offers, by provider, with the built-ins.
    const models = await s.kiln.api("GET", "/models");
    await p.goto(s.front.url + "#/all");
    const select = p.locator(`#new-model`);
    await select.waitFor();
    const refs = models.models.map((m) => m.ref);
    await p.waitForFunction((want) => want.every((r) => [...document.querySelectorAll("#new-model option")].some((o) => o.value === r)), refs);
    const values = await select.locator("option").evaluateAll((os) => os.map((o) => o.value));
    for (const v of ["demo", "scripted", ...refs]) assert.ok(values.includes(v), `the model choice has ${v}: ${values.join(", ")}`);
    for (const prov of new Set(models.models.map((m) => m.provider))) {
      const name = prov === "builtin" ? "Built-in" : models.providers.find((x) => x.id === prov)?.name ?? prov;
      assert.ok(await select.locator(`optgroup[label="${name}"] option`).count() > 0, `a group for ${name}`);
    }

    // Nothing the page holds or received shows either the pasted key or the variable's value.
    await p.goto(s.front.url + "#/settings");
    await p.waitForSelector(`${tid("providers")}[data-state="loaded"]`);
    const held = await p.evaluate(() => [
      document.documentElement.outerHTML,
      ...[...document.querySelectorAll("input, textarea")].map((e) => e.value),
      JSON.stringify({ ...localStorage }), JSON.stringify({ ...sessionStorage }),
    ].join("\n"));
    const received = await responses();
    assert.ok(received.some((r) => r.url.endsWith("/api/v1/providers/openai")), "the PUT answers were recorded");
    for (const secret of [SECRET, ENV_VALUE]) {
      assert.ok(!held.includes(secret), "the page does not hold the secret");
      assert.deepEqual(received.filter((r) => r.body.includes(secret)).map((r) => r.url), [], "no API answer carries the secret");
      assert.ok(!consoleText.some((c) => c.includes(secret)), "the console never saw the secret");
    }

    // Reset asks on the page first; Cancel keeps everything.
    const again = p.locator(row("openai"));
    await again.locator(tid("provider-reset")).click();
    const confirm = again.locator(tid("provider-confirm"));
    await confirm.waitFor();
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "provider-reset-confirm");
    await confirm.locator("button", { hasText: "Cancel" }).click();
    await confirm.waitFor({ state: "detached" });
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "provider-reset");
    assert.equal((await apiSetting(s.kiln, "openai", "api_key")).source, "credentials file", "still configured");
    await again.locator(tid("provider-reset")).click();
    await again.locator(tid("provider-reset-confirm")).click();
    await p.locator(setting("openai", "api_key"), { hasText: "not set" }).waitFor();
    await p.locator(`${tid("providers")} [role=status]`, { hasText: "OpenAI reset" }).waitFor();
    key = await apiSetting(s.kiln, "openai", "api_key");
    assert.deepEqual([key.value, key.source ?? ""], ["not set", ""]);
    assert.equal(await again.getAttribute("data-state"), (await s.kiln.api("GET", "/providers/openai")).state);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("the model choice: grouped by provider from GET /models, the built-ins on an older server", async () => {
  const s = await setup();
  const p = s.page;
  try {
    // An older server: GET /models answers 404, the choice is what it was.
    await p.route("**/api/v1/models", (r) => r.fulfill({ status: 404, contentType: "application/json", body: '{"error":{"code":"not_found","message":"not found"}}' }));
    await p.goto(s.front.url + "#/all");
    await p.locator("#new-model").waitFor();
    const opts = () => p.locator("#new-model option").evaluateAll((os) => os.map((o) => [o.value, o.textContent, o.parentElement.tagName]));
    // The choice is complete once GET /status has named the default.
    await p.locator("#new-model option", { hasText: "(default)" }).waitFor({ state: "attached" });
    assert.deepEqual(await opts(), [["scripted", "scripted (default)", "SELECT"], ["demo", "demo", "SELECT"]]);

    // A server with models: the built-ins, then each provider's models under its name.
    await p.unroute("**/api/v1/models");
    await p.route("**/api/v1/models", (r) => r.fulfill({
      status: 200, contentType: "application/json", body: JSON.stringify({
        default: "scripted",
        providers: [{ id: "openai", name: "OpenAI", state: "ready", settings: [], env: [] }, { id: "ollama", name: "Ollama", state: "ready", settings: [], env: [] }],
        models: [{ ref: "openai:gpt-4o", provider: "openai", id: "gpt-4o", name: "GPT-4o" }, { ref: "ollama:llama3", provider: "ollama", id: "llama3" }],
      }),
    }));
    // GET /status answers after GET /models: the composer takes the default from the models.
    let answerStatus;
    const statusHeld = new Promise((r) => { answerStatus = r; });
    await p.route("**/api/v1/status", async (r) => { await statusHeld; await r.continue(); });
    await p.reload();
    await p.waitForSelector('#new-model optgroup[label="OpenAI"]', { state: "attached" });
    assert.equal(await p.locator("#new-model").inputValue(), "scripted", "the default is selected before GET /status answers");
    answerStatus();
    assert.deepEqual(await opts(), [
      ["demo", "demo", "OPTGROUP"], ["scripted", "scripted (default)", "OPTGROUP"],
      ["openai:gpt-4o", "GPT-4o (openai:gpt-4o)", "OPTGROUP"], ["ollama:llama3", "ollama:llama3", "OPTGROUP"],
    ]);
    assert.deepEqual(await p.locator("#new-model optgroup").evaluateAll((gs) => gs.map((g) => g.label)), ["Built-in", "OpenAI", "Ollama"]);
    assert.equal(await p.locator("#new-model").inputValue(), "scripted", "the default stays selected");
    await p.selectOption("#new-model", "ollama:llama3");
    assert.equal(await p.locator("#new-model").inputValue(), "ollama:llama3");
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
