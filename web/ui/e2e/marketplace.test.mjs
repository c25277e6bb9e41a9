// The marketplace on the Plugins panel, against a real signed marketplace
// that the test publishes with `kiln marketplace keygen` and `kiln
// marketplace build --sign`: a data-only skills bundle, greet, in 1.0.0
// (asks for one environment variable) and then 1.1.0 (asks also for a
// network host, changes a file and adds one). Through the page: adding the
// marketplace with a key it was not signed with is refused with the
// server's reason and adds nothing; with its key it lists with that key,
// index version and log tree; search finds greet (kinds, marketplace);
// its details show each version's digest and archive sha256 (those of the
// signed index), signature and log entry; install downloads with progress
// (the NDJSON preview), lists what was verified and the permissions, and
// installs on consent bound to the digest (by keyboard). After 1.1.0 is
// published, Refresh shows index version 2, the plugin shows the update,
// and Upgrade shows the added permission and the changed files and asks
// again; Roll back returns to 1.0.0; Pin holds it there; Remove deletes
// it. A marketplace.json changed after signing is refused on Refresh,
// the refusal shown and the last verified index kept; the marketplace is
// then removed. Every dialog and the panel pass the axe audit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { KILN_BIN, audit, setup, shot, tid } from "./harness.mjs";

const focused = (p) => p.evaluate(() => document.activeElement?.getAttribute("data-testid"));

/** Runs the kiln CLI; fails the test with its output when it fails. */
function kiln(...args) {
  const r = spawnSync(KILN_BIN, args, { encoding: "utf8", timeout: 60000 });
  assert.equal(r.status, 0, `kiln ${args.join(" ")}: ${r.stdout}${r.stderr}`);
  return r.stdout + r.stderr;
}

/** A new signing key for name in dir; returns the key file and the verifier key the command prints. */
function keygen(dir, name) {
  const file = join(dir, `${name}.key`);
  const out = kiln("marketplace", "keygen", name, "--out", file);
  const key = new RegExp(`^\\s*(${name}\\+[0-9a-f]{8}\\+[A-Za-z0-9+/=]+)\\s*$`, "m").exec(out)?.[1];
  assert.ok(key, `kiln marketplace keygen printed no verifier key: ${out}`);
  return { file, key };
}

/** Writes files (path -> content) under dir. */
function write(dir, files) {
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), content);
  }
}

const skillMd = (name, text) => `---\nname: ${name}\ndescription: ${text}\n---\n${text}\n`;

/** The greet bundle in a version, in its own folder: 1.1.0 asks for one more permission, changes its skill and adds a file. */
function greet(version) {
  const v2 = version !== "1.0.0";
  const permissions = v2 ? { env: ["TZ"], network: ["api.example.com"] } : { env: ["TZ"] };
  const d = `greet-${version}`;
  return {
    [`${d}/kiln-plugin.json`]: JSON.stringify({ apiVersion: "kiln.dev/v1", id: "greet", version, description: "Skills that greet people by their time zone.", provides: ["skills"], permissions }, null, 2),
    [`${d}/skills/greet/SKILL.md`]: skillMd("greet", v2 ? "Greet the user, naming the local time." : "Greet the user."),
    ...(v2 ? { [`${d}/skills/greet/phrases.md`]: "Good morning.\nGood evening.\n" } : {}),
  };
}

const farewell = {
  "farewell/kiln-plugin.json": JSON.stringify({ apiVersion: "kiln.dev/v1", id: "farewell", version: "0.2.0", description: "Skills that say goodbye.", provides: ["skills"] }, null, 2),
  "farewell/skills/farewell/SKILL.md": skillMd("farewell", "Say goodbye to the user."),
};

/** publish.json of the acme marketplace with the given plugin folders. */
const publishJSON = (...paths) => JSON.stringify({ name: "acme", owner: { name: "Acme Plugins" }, plugins: paths.map((path) => ({ path })) });

/** Builds and signs the marketplace in dir (its files are published beside publish.json); returns its marketplace.json. */
function publish(dir, keyFile) {
  kiln("marketplace", "build", dir, "--sign", keyFile);
  return JSON.parse(readFileSync(join(dir, "marketplace.json"), "utf8"));
}

test("the marketplace: add (key), search, details, install with consent, upgrade with the difference, roll back, pin, remove, refresh", async () => {
  const tmp = mkdtempSync(join(tmpdir(), "kiln-e2e-mp-"));
  // The keys stay outside the published folder, out.
  const out = join(tmp, "acme");
  const acme = keygen(tmp, "acme"), other = keygen(tmp, "other");
  write(out, { "publish.json": publishJSON("greet-1.0.0", "farewell"), ...greet("1.0.0"), ...farewell });
  const index1 = publish(out, acme.file);
  const v100 = index1.plugins.find((x) => x.name === "greet").versions.find((v) => v.version === "1.0.0");
  assert.ok(v100?.digest && v100.artifact?.sha256, "the index lists greet 1.0.0 with its digest and archive sha256");

  const s = await setup();
  const p = s.page;
  // The preview's answers, to check the download was asked for and answered as a stream of progress lines
  // (the page shows the progress only from those lines: mp-downloaded below).
  const previews = [];
  p.on("response", (r) => {
    if (r.url().endsWith("/api/v1/marketplace/preview")) previews.push({ accept: r.request().headers()["accept"], type: r.headers()["content-type"] });
  });
  try {
    await p.goto(s.front.url + "#/settings/plugins");
    await p.locator(tid("mp-none")).waitFor();
    await p.locator(tid("marketplaces-empty")).waitFor();

    // Add it with a key it was not signed with: refused with the reason, nothing added.
    await p.click(tid("mp-add"));
    assert.equal(await focused(p), "mp-name");
    await p.fill(tid("mp-name"), "acme");
    await p.fill(tid("mp-url-input"), out);
    await p.fill(tid("mp-keys-input"), other.key);
    await p.click(tid("mp-form-save"));
    const formErr = p.locator(`${tid("mp-form-error")}[role=alert]`);
    await formErr.waitFor();
    assert.match(await formErr.textContent(), /^Could not add acme: .*(key|sign)/i);
    assert.deepEqual((await s.kiln.api("GET", "/marketplaces")).marketplaces, []);
    await audit(p, "plugins: the add-marketplace form with a refusal");

    // With its key: added, with the key, the index version and the log tree.
    await p.fill(tid("mp-keys-input"), acme.key);
    await p.click(tid("mp-form-save"));
    const mp = p.locator(`${tid("marketplace")}[data-name="acme"]`);
    await mp.waitFor();
    await p.locator(tid("mp-form")).waitFor({ state: "detached" });
    assert.equal(await focused(p), "mp-add", "the focus goes back to Add marketplace");
    assert.equal(await mp.locator(tid("mp-trust")).textContent(), "signed");
    assert.match(await mp.locator(tid("mp-keys")).textContent(), new RegExp(acme.key.replace(/[+/]/g, "\\$&")));
    assert.equal(await mp.locator(tid("mp-index-version")).textContent(), String(index1.version));
    assert.match(await mp.locator(tid("mp-log")).textContent(), /^tree size \d+/);
    assert.equal(await mp.locator(tid("mp-plugins")).textContent(), "2");
    assert.equal(await mp.locator(tid("mp-error")).count(), 0);
    const treeSize1 = (await s.kiln.api("GET", "/marketplaces/acme")).tree_size;

    // Search: ranked results with their kinds and marketplace.
    await p.locator(tid("mp-result")).first().waitFor();
    assert.equal(await p.locator(tid("mp-result")).count(), 2, "every plugin before a search");
    await p.fill(tid("mp-search"), "greet");
    await p.locator(tid("mp-count"), { hasText: "1 plugin matches “greet”." }).waitFor();
    const result = p.locator(`${tid("mp-result")}[data-name="greet"]`);
    assert.equal(await p.locator(tid("mp-result")).first().getAttribute("data-name"), "greet", "the best match first");
    assert.deepEqual(await result.locator(tid("mp-kind")).allTextContents(), ["skills"]);
    assert.equal(await result.locator(tid("mp-marketplace")).textContent(), "acme");

    // Details: each version with its digest, archive sha256, signature and log entry.
    await result.locator(tid("mp-details")).click();
    const detail = p.locator(`dialog${tid("mp-detail")}[open]`);
    await detail.locator(tid("mp-version")).first().waitFor();
    const ver = detail.locator(`${tid("mp-version")}[data-version="1.0.0"]`);
    assert.equal(await ver.locator(tid("mp-version-digest")).textContent(), v100.digest);
    assert.equal(await ver.locator(tid("mp-version-sha256")).textContent(), v100.artifact.sha256);
    assert.equal(await ver.locator(tid("mp-version-signature")).textContent(), "signed by a trusted key");
    assert.equal(await ver.locator(tid("mp-version-log")).textContent(), `index log entry ${index1.log.index} of tree ${treeSize1}`);
    assert.match(await ver.locator(tid("mp-version-permissions")).textContent(), /TZ/);
    assert.equal(await detail.locator(tid("mp-detail-installed")).textContent(), "not installed");
    await audit(p, "plugins: a marketplace plugin's details");
    await shot(p, "marketplace-details");

    // Install 1.0.0: the download's progress, what was verified, the permissions; consent by keyboard.
    await ver.locator(tid("mp-version-install")).click();
    const dlg = p.locator(`dialog${tid("mp-install-dialog")}[open]`);
    await dlg.locator(`${tid("mp-install-body")}[data-phase="review"]`).waitFor();
    assert.equal(await dlg.locator(tid("mp-install-title")).textContent(), "Install greet 1.0.0");
    const verified = await dlg.locator(`${tid("mp-verified")} li`).allTextContents();
    assert.ok(verified.some((x) => /sign/i.test(x)) && verified.some((x) => /digest/i.test(x)), `what was verified: ${verified.join("; ")}`);
    assert.match(await dlg.locator(tid("mp-permissions")).textContent(), /TZ/);
    assert.match(await dlg.locator(tid("mp-downloaded")).textContent(), /^Downloaded .*\(100%\)\.$/, "the progress reached the whole archive");
    assert.equal(await dlg.locator(tid("mp-preview-digest")).textContent(), v100.digest);
    assert.equal(await focused(p), "mp-install-confirm", "the consent button has the focus");
    assert.equal(await dlg.locator(tid("mp-install-confirm")).textContent(), "Allow and install");
    await audit(p, "plugins: the install consent dialog");
    await shot(p, "marketplace-install");
    await p.keyboard.press("Enter");
    await dlg.waitFor({ state: "detached" });
    await p.locator(tid("plugins-note"), { hasText: "Installed greet 1.0.0 from acme" }).waitFor();
    const installed = await s.kiln.api("GET", "/plugins/greet");
    assert.equal(installed.version, "1.0.0");
    assert.equal(installed.source?.marketplace, "acme");
    assert.equal(installed.source?.digest, v100.digest);
    await p.waitForFunction(() => document.querySelector('dialog[open] [data-testid="mp-detail-installed"]')?.textContent === "1.0.0");
    // The installed version has no Install button any more: the focus, which went back to it, is on the version.
    assert.equal(await ver.locator(tid("mp-version-install")).count(), 0);
    assert.equal(await p.evaluate(() => { const a = document.activeElement; return a?.tagName === "SUMMARY" ? a.closest('[data-testid="mp-version"]')?.dataset.version : a?.tagName; }), "1.0.0");
    await p.keyboard.press("Escape");
    await detail.waitFor({ state: "detached" });
    assert.equal(await focused(p), "mp-details", "Escape closes the details; the focus goes back to Details");
    const preview = previews.at(-1);
    assert.match(preview?.accept ?? "", /application\/x-ndjson/);
    assert.match(preview?.type ?? "", /application\/x-ndjson/);

    const row = p.locator(`${tid("plugin")}[data-plugin-id="greet"]`);
    await row.waitFor();
    assert.equal(await row.getAttribute("data-version"), "1.0.0");
    assert.equal(await row.locator(tid("plugin-source")).textContent(), "from acme");
    assert.equal(await row.locator(tid("plugin-upgrade")).count(), 0, "up to date");

    // Publish 1.1.0; Refresh shows the new index; the plugin shows its update.
    write(out, { "publish.json": publishJSON("greet-1.0.0", "greet-1.1.0", "farewell"), ...greet("1.1.0") });
    const index2 = publish(out, acme.file);
    assert.ok(index2.version > index1.version);
    await mp.locator(tid("mp-refresh")).click();
    await p.waitForFunction((v) => document.querySelector('[data-testid="marketplace"][data-name="acme"] [data-testid="mp-index-version"]')?.textContent === v, String(index2.version));
    const treeSize2 = (await s.kiln.api("GET", "/marketplaces/acme")).tree_size;
    assert.ok(treeSize2 > treeSize1, `the log grew: ${treeSize1} -> ${treeSize2}`);
    assert.equal(await mp.locator(tid("mp-log")).textContent().then((t) => t.startsWith(`tree size ${treeSize2}`)), true);
    await row.locator(tid("plugin-update"), { hasText: "1.1.0 available" }).waitFor();

    // Upgrade: the added permission and the changed files; consent again.
    await row.locator(tid("plugin-upgrade")).click();
    await dlg.locator(`${tid("mp-install-body")}[data-phase="review"]`).waitFor();
    assert.equal(await dlg.locator(tid("mp-install-title")).textContent(), "Upgrade greet 1.0.0 → 1.1.0");
    const added = await dlg.locator(`${tid("mp-added")} li`).allTextContents();
    assert.equal(added.length, 1, `one permission added: ${added.join("; ")}`);
    assert.match(added[0], /api\.example\.com/);
    assert.doesNotMatch(added[0], /TZ/, "what was consented to before is not asked again");
    const files = await dlg.locator(`${tid("mp-changes")} li`).evaluateAll((els) => els.map((e) => `${e.dataset.kind} ${e.querySelector("code").textContent}`));
    assert.ok(files.includes("added skills/greet/phrases.md"), `changed files: ${files.join("; ")}`);
    assert.ok(files.includes("changed skills/greet/SKILL.md"), `changed files: ${files.join("; ")}`);
    assert.notEqual(await dlg.locator(tid("mp-changes-summary")).textContent(), "no files changed");
    assert.equal(await dlg.locator(tid("mp-install-confirm")).textContent(), "Allow and upgrade");
    await audit(p, "plugins: the upgrade dialog with the difference");
    await shot(p, "marketplace-upgrade");
    // Cancel (Escape) changes nothing; then upgrade.
    await p.keyboard.press("Escape");
    await dlg.waitFor({ state: "detached" });
    assert.equal(await focused(p), "plugin-upgrade");
    assert.equal((await s.kiln.api("GET", "/plugins/greet")).version, "1.0.0");
    await row.locator(tid("plugin-upgrade")).click();
    await dlg.locator(tid("mp-install-confirm")).click();
    await dlg.waitFor({ state: "detached" });
    await p.waitForSelector(`${tid("plugin")}[data-plugin-id="greet"][data-version="1.1.0"]`);
    const upgraded = await s.kiln.api("GET", "/plugins/greet");
    assert.equal(upgraded.version, "1.1.0");
    assert.equal(upgraded.previous, "1.0.0");
    assert.ok(upgraded.permissions.some((x) => /api\.example\.com/.test(x)), "the consent now covers the host");
    assert.equal(await row.locator(tid("plugin-update")).count(), 0);

    // Roll back (after a confirmation) to 1.0.0.
    await row.locator(tid("plugin-rollback")).click();
    assert.equal(await focused(p), "plugin-rollback-confirm");
    await row.locator(tid("plugin-rollback-confirm")).click();
    await p.waitForSelector(`${tid("plugin")}[data-plugin-id="greet"][data-version="1.0.0"]`);
    assert.equal((await s.kiln.api("GET", "/plugins/greet")).version, "1.0.0");
    await p.locator(tid("plugins-note"), { hasText: "Rolled back greet to 1.0.0" }).waitFor();
    // 1.1.0 is now the version kept: a second rollback rolls forward.
    assert.match(await row.locator(tid("plugin-rollback")).textContent(), /^Roll forward… greet to 1\.1\.0$/);
    await row.locator(tid("plugin-update"), { hasText: "1.1.0 available" }).waitFor();

    // Pin holds it at 1.0.0 (no Upgrade); Unpin offers the upgrade again.
    await row.locator(tid("plugin-pin")).click();
    await row.locator(tid("plugin-pinned"), { hasText: "pinned 1.0.0" }).waitFor();
    assert.equal(await row.locator(tid("plugin-upgrade")).count(), 0, "a pinned plugin is not upgraded");
    assert.equal((await s.kiln.api("GET", "/plugins/greet")).pinned, "1.0.0", "the server has it pinned");
    await audit(p, "plugins: a pinned marketplace plugin");
    await row.locator(tid("plugin-pin")).click();
    await row.locator(tid("plugin-pinned")).waitFor({ state: "detached" });
    await row.locator(tid("plugin-upgrade")).waitFor();

    // Remove it.
    await row.locator(tid("plugin-remove")).click();
    await row.locator(tid("plugin-remove-confirm")).click();
    await row.waitFor({ state: "detached" });
    assert.equal((await fetch(`${s.kiln.url}/api/v1/plugins/greet`)).status, 404);

    // marketplace.json changed after signing: Refresh is refused, the reason shown, the last index kept.
    appendFileSync(join(out, "marketplace.json"), "\n");
    await mp.locator(tid("mp-refresh")).click();
    const refused = mp.locator(tid("mp-error"));
    await refused.waitFor();
    assert.match(await refused.textContent(), /^Last refresh refused: \S.*The last verified index \(version \d+\) is kept\.$/);
    assert.equal(await mp.locator(tid("mp-index-version")).textContent(), String(index2.version));
    assert.ok((await s.kiln.api("GET", "/marketplaces/acme")).error, "the server records the refusal");
    await audit(p, "plugins: a marketplace whose refresh was refused");
    await mp.scrollIntoViewIfNeeded();
    await shot(p, "marketplace-refused");

    // Remove the marketplace (after a confirmation).
    await mp.locator(tid("mp-remove")).click();
    assert.equal(await focused(p), "mp-remove-confirm");
    await mp.locator(tid("mp-remove-confirm")).click();
    await mp.waitFor({ state: "detached" });
    await p.locator(tid("marketplaces-empty")).waitFor();
    await p.locator(tid("mp-none")).waitFor();
    assert.deepEqual((await s.kiln.api("GET", "/marketplaces")).marketplaces, []);
    assert.deepEqual(s.errors, []);
  } finally {
    await s.close();
    rmSync(tmp, { recursive: true, force: true });
  }
});
