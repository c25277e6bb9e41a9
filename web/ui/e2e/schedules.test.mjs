// The Triggers page against a real server's triggers: a cron trigger is
// created from the page (a bad expression or zone shows the server's
// reason beside its field and creates nothing; the preview shows the
// server's next fire times as the expression is typed, asked for once
// typing pauses), listed with its schedule, zone and next fire, disabled
// and enabled (the switch, by mouse and keyboard), fired with Run now
// (its occurrence waits for action, not failed; a second is skipped by
// the overlap policy; approving the first turns it succeeded live) with
// a link to its thread, and edited. A webhook trigger's secret is shown
// once with a copy button, works, is rotated (the old one stops working,
// the new one is shown once) and is not on the page after a reload; the
// trigger is deleted after a confirmation. Audited by axe-core in both
// themes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { APPROVAL_SCRIPT, audit, setup, shot, tid } from "./harness.mjs";

const triggers = async (kiln) => (await kiln.api("GET", "/triggers")).triggers;
// Hours of Berlin's day half a day away, so that no slot of the schedules saved here falls inside the test.
const berlinHour = Number(new Intl.DateTimeFormat("en-GB", { hour: "2-digit", hourCycle: "h23", timeZone: "Europe/Berlin" }).format(new Date()));
const H1 = (berlinHour + 12) % 24, H2 = (berlinHour + 13) % 24;
const pad = (n) => String(n).padStart(2, "0");
const EXPR = `0 ${H1} * * MON-FRI`, EXPR2 = `30 ${H2} * * *`;
const focused = (p) => p.evaluate(() => document.activeElement?.getAttribute("data-testid"));

test("schedules: create a cron trigger (bad ones refused), preview, list, disable/enable, run now with history, edit", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/all");
    await p.locator(tid("empty")).waitFor();
    assert.equal(await p.locator(tid("nav-schedules")).getAttribute("href"), "#/triggers");
    await p.keyboard.press("g"); // g then t: the shortcut to Triggers
    await p.keyboard.press("t");
    await p.locator(tid("schedules-empty")).waitFor();
    assert.equal(await p.locator(tid("nav-schedules")).getAttribute("aria-current"), "page");
    // One name for the page everywhere: Triggers (specs/RATIONALE.md).
    assert.equal(await p.locator(`${tid("nav-schedules")} .label`).textContent(), "Triggers");
    assert.equal(await p.locator("#main h1").textContent(), "Triggers");
    assert.equal(await p.locator(tid("schedules-total")).textContent(), "0");
    await audit(p, "schedules, empty");

    await p.click(tid("trigger-new"));
    const form = p.locator(tid("trigger-form"));
    await form.waitFor();
    assert.equal(await p.locator(tid("trigger-new")).getAttribute("aria-expanded"), "true");
    assert.equal(await focused(p), "trigger-kind-cron", "the form opens on its first field");
    const cron = form.locator(tid("trigger-cron")), zone = form.locator(tid("trigger-timezone"));
    const preview = form.locator(tid("trigger-preview"));
    await form.locator(tid("trigger-name")).fill("standup");
    await form.locator(tid("trigger-prompt")).fill(APPROVAL_SCRIPT);
    await zone.fill("Europe/Berlin");

    // Typing: the preview asks once typing pauses, not at every key.
    const asked = [];
    const onRequest = (r) => { if (r.url().includes("/api/v1/triggers/preview?")) asked.push(r.url()); };
    p.on("request", onRequest);
    await cron.pressSequentially("*/15 * * * *", { delay: 25 });
    await p.waitForSelector(`${tid("trigger-preview")}[data-state=ok]`);
    p.off("request", onRequest);
    assert.ok(asked.length >= 1 && asked.length < "*/15 * * * *".length, `${asked.length} preview requests for 12 keys`);
    const q = new URL(asked.at(-1)).searchParams;
    assert.deepEqual([q.get("cron"), q.get("timezone"), q.get("n")], ["*/15 * * * *", "Europe/Berlin", "5"]);

    // A bad expression: the preview says why, and so does a refused create, beside the field; nothing is created.
    await cron.fill("61 9 * * *");
    await form.locator(tid("trigger-preview-error"), { hasText: 'cron: end of range (61) above maximum (59): "61"' }).waitFor();
    assert.equal(await cron.getAttribute("aria-invalid"), "true");
    await form.locator(tid("trigger-submit")).click();
    const formErr = form.locator(`${tid("trigger-form-error")}[role=alert]`);
    assert.equal(await formErr.textContent(), 'Not created: cron: end of range (61) above maximum (59): "61"');
    assert.ok((await cron.getAttribute("aria-describedby")).split(" ").includes(await formErr.getAttribute("id")), "the reason describes the field");
    assert.deepEqual(await triggers(s.kiln), []);

    // A bad time zone, the same.
    await cron.fill(EXPR);
    await formErr.waitFor({ state: "detached" }); // editing the field clears its error
    await zone.fill("Mars/Olympus");
    await form.locator(tid("trigger-preview-error"), { hasText: 'timezone: unknown IANA time zone "Mars/Olympus"' }).waitFor();
    assert.equal(await zone.getAttribute("aria-invalid"), "true");
    assert.equal(await cron.getAttribute("aria-invalid"), null, "the expression itself is fine");
    await form.locator(tid("trigger-submit")).click();
    assert.equal(await formErr.textContent(), 'Not created: timezone: unknown IANA time zone "Mars/Olympus"');
    assert.deepEqual(await triggers(s.kiln), []);
    assert.equal(await p.locator(tid("trigger")).count(), 0);

    // A good one: the next five fire times are the server's, in Berlin time.
    await zone.fill("Europe/Berlin");
    await p.waitForSelector(`${tid("trigger-preview")}[data-state=ok]`);
    const shown = await preview.locator(tid("trigger-preview-time")).evaluateAll((els) => els.map((e) => e.getAttribute("datetime")));
    const want = (await s.kiln.api("GET", `/triggers/preview?cron=${encodeURIComponent(EXPR)}&timezone=Europe%2FBerlin&n=5`)).next;
    assert.deepEqual(shown, want);
    for (const t of await preview.locator(tid("trigger-preview-time")).allTextContents()) assert.match(t, new RegExp(`^(Mon|Tue|Wed|Thu|Fri), \\d+ \\w+ \\d{4}, ${pad(H1)}:00 CES?T$`));
    await audit(p, "schedules, the form with a preview");
    await shot(p, "schedules-form");

    await form.locator(tid("trigger-submit")).click();
    const row = p.locator(tid("trigger"));
    await row.waitFor();
    await form.waitFor({ state: "detached" });
    const [tr] = await triggers(s.kiln);
    assert.equal(tr.name, "standup");
    assert.equal(tr.kind, "cron");
    assert.equal(tr.cron, EXPR);
    assert.equal(tr.timezone, "Europe/Berlin");
    assert.equal(tr.prompt, APPROVAL_SCRIPT);
    assert.equal(tr.enabled, true);
    assert.equal(await row.getAttribute("data-trigger-id"), tr.id);
    await p.locator(tid("schedules-note"), { hasText: "Created trigger standup." }).waitFor();
    assert.equal(await row.locator(tid("trigger-name-text")).textContent(), "standup");
    assert.equal(await row.locator(tid("trigger-kind")).textContent(), "cron");
    assert.equal(await row.locator(tid("trigger-schedule")).textContent(), `${EXPR} in Europe/Berlin`);
    const next = row.locator(tid("trigger-next"));
    assert.equal(await next.getAttribute("data-next"), tr.next[0]);
    assert.match(await next.textContent(), new RegExp(`, ${pad(H1)}:00 CES?T in \\d+(d|h) `));
    assert.equal(await p.locator(tid("schedules-total")).textContent(), "1");

    // Disable with the switch, enable with the keyboard.
    const sw = row.locator(tid("trigger-enabled"));
    assert.equal(await sw.getAttribute("role"), "switch");
    assert.equal(await sw.getAttribute("aria-checked"), "true");
    await sw.click();
    await p.waitForSelector(`${tid("trigger")}[data-enabled=false]`);
    assert.equal(await sw.getAttribute("aria-checked"), "false");
    assert.equal(await next.textContent(), "disabled: it does not fire");
    assert.equal(await row.locator(tid("trigger-disabled")).textContent(), "disabled");
    assert.equal((await s.kiln.api("GET", `/triggers/${tr.id}`)).enabled, false);
    await sw.focus();
    await p.keyboard.press("Space");
    await p.waitForSelector(`${tid("trigger")}[data-enabled=true]`);
    assert.equal(await sw.getAttribute("aria-checked"), "true");
    const again = await s.kiln.api("GET", `/triggers/${tr.id}`);
    assert.equal(again.enabled, true);
    assert.equal(await next.getAttribute("data-next"), again.next[0]);
    assert.equal(await row.locator(tid("trigger-disabled")).count(), 0);

    // Run now: its occurrence waits for action (an append_file needs approval), shown so and not as failed.
    await row.locator(tid("trigger-run")).click();
    const hist = row.locator(tid("trigger-history"));
    await hist.waitFor();
    assert.equal(await row.locator(tid("trigger-history-toggle")).getAttribute("aria-expanded"), "true");
    const first = hist.locator(`${tid("occurrence")}[data-outcome=waiting_for_action]`);
    await first.waitFor();
    assert.equal(await first.locator(tid("occurrence-outcome")).textContent(), "waiting for action");
    assert.equal(await first.locator(tid("occurrence-cause")).textContent(), "run now");
    let occs = (await s.kiln.api("GET", `/triggers/${tr.id}/occurrences`)).occurrences;
    assert.equal(occs.length, 1);
    const [o] = occs;
    assert.equal(o.outcome, "waiting_for_action");
    assert.equal(await first.getAttribute("data-occurrence-id"), o.id);
    assert.equal(await first.locator(tid("occurrence-thread")).getAttribute("href"), `#/thread/${o.thread_id}`);
    // The details list the next five fire times too.
    const fires = await hist.locator(tid("trigger-next-time")).evaluateAll((els) => els.map((e) => e.getAttribute("datetime")));
    assert.deepEqual(fires, (await s.kiln.api("GET", `/triggers/${tr.id}/preview?n=5`)).next);

    // Again while that run waits: the overlap policy (skip) records a skipped occurrence with its reason.
    await row.locator(tid("trigger-run")).click();
    await row.locator(tid("trigger-said"), { hasText: /^Not started \(skipped\): overlap: run run_\w+ was still active\.$/ }).waitFor();
    const skipped = hist.locator(`${tid("occurrence")}[data-outcome=skipped]`);
    await skipped.waitFor();
    assert.match(await skipped.locator(tid("occurrence-reason")).textContent(), /^overlap: run run_\w+ was still active$/);
    assert.equal(await skipped.locator(tid("occurrence-thread")).count(), 0, "a skipped occurrence has no thread");
    assert.equal(await hist.locator(tid("occurrence")).count(), 2);
    assert.equal(await hist.locator(tid("occurrence")).first().getAttribute("data-outcome"), "skipped", "newest first");

    // Approving the waiting run elsewhere: the history follows live.
    const { interrupts } = await s.kiln.api("GET", `/runs/${o.run_id}/interrupts`);
    assert.equal(interrupts.length, 1);
    await s.kiln.api("POST", `/interrupts/${interrupts[0].id}/decision`, { decision: "approve" });
    const done = hist.locator(`${tid("occurrence")}[data-occurrence-id="${o.id}"][data-outcome=succeeded]`);
    await done.waitFor();
    assert.equal(await done.locator(tid("occurrence-outcome")).textContent(), "succeeded");
    occs = (await s.kiln.api("GET", `/triggers/${tr.id}/occurrences`)).occurrences;
    assert.deepEqual(occs.map((x) => x.outcome), ["skipped", "succeeded"]);
    await audit(p, "schedules with a history");
    await shot(p, "schedules-history");

    // The occurrence's link opens its thread.
    await done.locator(tid("occurrence-thread")).click();
    await p.waitForSelector(`${tid("thread-view")}[data-thread-id="${o.thread_id}"]`);
    await p.locator(`${tid("message")}[data-role=assistant]`, { hasText: "All done." }).waitFor();
    await p.goBack();
    await row.waitFor();

    // Edit: a new expression (previewed in the row's form); only what changed is sent.
    await row.locator(tid("trigger-edit")).click();
    const edit = row.locator(tid("trigger-edit-box"));
    await edit.waitFor();
    assert.equal(await edit.locator(tid("trigger-name")).inputValue(), "standup");
    assert.equal(await edit.locator(tid("trigger-kind-cron")).count(), 0, "the kind cannot change");
    await edit.locator(tid("trigger-cron")).fill(EXPR2);
    await p.waitForSelector(`${tid("trigger-edit-box")} ${tid("trigger-preview")}[data-state=ok]`);
    const patches = [];
    const onPatch = (r) => { if (r.method() === "PATCH") patches.push(r.postDataJSON()); };
    p.on("request", onPatch);
    await edit.locator(tid("trigger-submit")).click();
    await edit.waitFor({ state: "detached" });
    p.off("request", onPatch);
    assert.deepEqual(patches, [{ cron: EXPR2 }]);
    assert.equal(await focused(p), "trigger-edit", "focus returns to Edit");
    const edited = await s.kiln.api("GET", `/triggers/${tr.id}`);
    assert.equal(edited.cron, EXPR2);
    assert.equal(edited.timezone, "Europe/Berlin");
    assert.equal(await row.locator(tid("trigger-schedule")).textContent(), `${EXPR2} in Europe/Berlin`);
    await p.waitForFunction((n) => document.querySelector('[data-testid="trigger-next"]')?.getAttribute("data-next") === n, edited.next[0]);
    assert.match(await next.textContent(), new RegExp(`, ${pad(H2)}:30 CES?T in \\d+h `));
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("schedules: a webhook trigger's secret is shown once, rotated, not shown after a reload; delete is confirmed (dark)", async () => {
  const s = await setup({ dark: true });
  const p = s.page;
  try {
    await s.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: s.kiln.url });
    await p.goto(s.front.url + "#/schedules"); // the page's old address still opens it
    await p.locator(tid("schedules-empty")).waitFor();
    await p.click(tid("trigger-new"));
    const form = p.locator(tid("trigger-form"));
    await form.locator(tid("trigger-kind-webhook")).check();
    assert.equal(await form.locator(tid("trigger-cron")).count(), 0, "a webhook has no schedule");
    await form.locator(tid("trigger-name")).fill("pr-review");
    await form.locator(tid("trigger-prompt")).fill("text Reviewed {{.pr}}.");
    // Deliveries may come faster than their runs end: each starts its own.
    await form.locator("summary", { hasText: "Policies" }).click();
    await form.locator(tid("trigger-overlap")).selectOption("allow_all");
    await form.locator(tid("trigger-submit")).click();
    const row = p.locator(tid("trigger"));
    await row.waitFor();
    const [tr] = await triggers(s.kiln);
    assert.equal(tr.kind, "webhook");
    assert.equal(tr.secret, undefined, "the list never has the secret");
    assert.equal(tr.overlap, "allow_all");
    assert.equal(await row.getAttribute("data-kind"), "webhook");
    const url = `${s.kiln.url}/hooks/${tr.id}`;
    assert.equal(await row.locator(tid("trigger-url")).textContent(), url);

    // The secret Kiln made, shown once with a copy button and a note.
    const once = row.locator(tid("secret-once"));
    await once.waitFor();
    assert.equal(await focused(p), "secret-value", "the secret is focused (and selected) to be copied");
    assert.match(await once.textContent(), /Shown once\..*will not show it again/);
    const secret = await once.locator(tid("secret-value")).inputValue();
    assert.match(secret, /^whsec_[0-9a-f]{64}$/);
    await once.locator(tid("secret-copy")).click();
    await once.locator(tid("secret-copy-status"), { hasText: "Copied." }).waitFor();
    assert.equal(await p.evaluate(() => navigator.clipboard.readText()), secret);
    await audit(p, "schedules with a secret shown once");
    await shot(p, "schedules-secret");

    const deliver = (sec) => fetch(url, { method: "POST", headers: { Authorization: `Bearer ${sec}`, "Content-Type": "application/json" }, body: JSON.stringify({ pr: "#7" }) });
    assert.equal((await deliver(secret)).status, 202, "the secret shown is the trigger's");

    // Dismissed, it is gone from the page.
    await once.locator(tid("secret-done")).click();
    await once.waitFor({ state: "detached" });
    assert.equal((await p.content()).includes(secret), false);

    // Rotate: confirmed first (Escape keeps the secret), then the new one is shown once and the old one stops working.
    await row.locator(tid("trigger-rotate")).click();
    const box = row.locator(tid("trigger-rotate-box"));
    await box.waitFor();
    assert.equal(await focused(p), "trigger-rotate-confirm");
    await p.keyboard.press("Escape");
    await box.waitFor({ state: "detached" });
    assert.equal(await focused(p), "trigger-rotate");
    assert.equal((await deliver(secret)).status, 202, "nothing rotated");
    await p.keyboard.press("Enter");
    await box.waitFor();
    await p.keyboard.press("Enter");
    await once.waitFor();
    assert.match(await once.textContent(), /The new secret.*previous secret has stopped working/);
    const rotated = await once.locator(tid("secret-value")).inputValue();
    assert.match(rotated, /^whsec_[0-9a-f]{64}$/);
    assert.notEqual(rotated, secret);
    assert.equal((await deliver(secret)).status, 401, "the old secret stopped working");
    assert.equal((await deliver(rotated)).status, 202);
    await p.locator(tid("schedules-note"), { hasText: "Rotated the secret of pr-review." }).waitFor();

    // After a reload the secret is not shown: the server has no way to show it and the page kept it nowhere.
    await p.reload();
    await row.waitFor();
    assert.equal(await row.locator(tid("secret-once")).count(), 0);
    assert.equal((await p.content()).includes(rotated), false);
    assert.equal((await p.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }))).includes(rotated), false);

    // Its history: the three accepted deliveries (not the refused one), their runs succeeded, each with its thread.
    await row.locator(tid("trigger-history-toggle")).click();
    const hist = row.locator(tid("trigger-history"));
    await p.waitForFunction(() => {
      const o = [...document.querySelectorAll('[data-testid="occurrence"]')];
      return o.length === 3 && o.every((e) => e.getAttribute("data-outcome") === "succeeded");
    });
    assert.deepEqual(await hist.locator(tid("occurrence-cause")).allTextContents(), ["webhook", "webhook", "webhook"]);
    assert.equal(await hist.locator(tid("occurrence-thread")).count(), 3);
    const occs = (await s.kiln.api("GET", `/triggers/${tr.id}/occurrences`)).occurrences;
    assert.deepEqual(await hist.locator(tid("occurrence-thread")).evaluateAll((els) => els.map((e) => e.getAttribute("href"))), occs.map((o) => `#/thread/${o.thread_id}`));
    assert.equal(await hist.locator(tid("trigger-next-list")).count(), 0, "a webhook has no fire times");

    // Delete: confirmed on the page; Escape keeps it.
    await row.locator(tid("trigger-delete")).click();
    const confirm = row.locator(tid("trigger-confirm"));
    await confirm.waitFor();
    assert.equal(await focused(p), "trigger-delete-confirm");
    await p.keyboard.press("Escape");
    await confirm.waitFor({ state: "detached" });
    assert.equal(await focused(p), "trigger-delete");
    assert.equal((await triggers(s.kiln)).length, 1, "still there");
    await row.locator(tid("trigger-delete")).click();
    await row.locator(tid("trigger-delete-confirm")).click();
    await row.waitFor({ state: "detached" });
    await p.locator(tid("schedules-note"), { hasText: "Deleted trigger pr-review." }).waitFor();
    await p.locator(tid("schedules-empty")).waitFor();
    assert.deepEqual(await triggers(s.kiln), []);
    assert.equal((await deliver(rotated)).status, 404);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
