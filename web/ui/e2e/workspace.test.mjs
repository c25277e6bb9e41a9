// The agent's workspace in the browser, against a real server: folder
// grants in Settings > Files (the data root only when acknowledged, revoked
// with a confirmation), attachments dropped on a composer, pasted into it
// or picked (uploaded, shown as chips with thumbnails, refused ones saying
// why, removed ones deleted), sent with a working folder and shown in the
// sent message; fork from a completed turn; a thread's virtual files in
// its Files panel; long-term memories edited in Settings > Memories; the
// theme, the prompt addendum and the default sandbox runtime in Settings >
// General. axe audits the new pages.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { audit, setup, shot, startApprovalRun, tid, until } from "./harness.mjs";

const grantRow = (name) => `${tid("grant")}[data-name="${name}"]`;
const memoryRow = (name) => `${tid("memory")}[data-name="${name}"]`;
const focused = (p) => p.evaluate(() => document.activeElement?.getAttribute("data-testid") || document.activeElement?.id || document.activeElement?.tagName);

/** A 1×1 PNG. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/**
 * Drops files on the element as a person would: dragenter, dragover and
 * drop events carrying a DataTransfer with real File objects. files: [{name,
 * type, text} or {name, type, base64} or {name, type, size}].
 */
async function dropFiles(page, selector, files) {
  await page.evaluate(({ selector, files }) => {
    const dt = new DataTransfer();
    for (const f of files) {
      let body;
      if (f.base64) body = Uint8Array.from(atob(f.base64), (c) => c.charCodeAt(0));
      else if (f.size) body = new Uint8Array(f.size).fill(0x61); // "aaa…": text, f.size bytes
      else body = f.text;
      dt.items.add(new File([body], f.name, { type: f.type }));
    }
    const el = document.querySelector(selector);
    for (const type of ["dragenter", "dragover", "drop"]) el.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: dt }));
  }, { selector, files });
}

async function finished(kiln, runId) {
  for (let i = 0; i < 400; i++) {
    const r = await kiln.api("GET", `/runs/${runId}`);
    if (["succeeded", "failed", "cancelled"].includes(r.status)) return r;
    await new Promise((res) => setTimeout(res, 25)); // polling the run's state
  }
  throw new Error(`run ${runId} did not finish`);
}

test("Settings > Files: grant a folder, the data root only when acknowledged, revoke with a confirmation", async () => {
  const s = await setup();
  const p = s.page;
  const dir = mkdtempSync(join(tmpdir(), "kiln-e2e-grant-"));
  try {
    await p.goto(s.front.url + "#/settings/files");
    await p.waitForSelector(`${tid("grants")}[data-state="loaded"]`);
    assert.equal(await focused(p), "grt-h", "a link to the section moves the focus to its heading");
    await p.locator(tid("grants-empty")).waitFor();

    // A path that is not a directory: the server's message, inline.
    await p.fill(tid("grant-path-input"), join(dir, "missing"));
    await p.click(tid("grant-add"));
    await p.locator(tid("grant-error")).waitFor();
    assert.ok((await p.locator(tid("grant-error")).textContent()).length > 10);

    // A writable grant of the temp folder.
    await p.fill(tid("grant-path-input"), dir);
    await p.fill(tid("grant-name-input"), "scratch");
    await p.check(tid("grant-writable"));
    await p.click(tid("grant-add"));
    const row = p.locator(grantRow("scratch"));
    await row.waitFor();
    assert.equal(await row.locator(tid("grant-mode")).textContent(), "writable");
    assert.match(await row.locator(tid("grant-path")).textContent(), /kiln-e2e-grant-/);
    assert.equal(await p.locator(tid("grant-error")).count(), 0);
    let grants = (await s.kiln.api("GET", "/grants")).grants;
    assert.deepEqual(grants.map((g) => [g.name, g.writable]), [["scratch", true]]);

    // Kiln's data root: refused with the server's reason until "Grant anyway".
    await p.fill(tid("grant-path-input"), s.kiln.data);
    await p.click(tid("grant-add"));
    const warn = p.locator(tid("grant-data-root-warning"));
    await warn.waitFor();
    assert.match(await warn.textContent(), /data root/);
    assert.equal(await focused(p), "grant-ack", "the acknowledgement is focused, not sent");
    assert.equal((await s.kiln.api("GET", "/grants")).grants.length, 1, "nothing granted before the acknowledgement");
    await audit(p, "settings files with the data root warning");
    await p.click(tid("grant-ack"));
    await warn.waitFor({ state: "detached" });
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="grant"]').length === 2);
    assert.equal(await p.locator(`${tid("grant")} ${tid("grant-data-root")}`).count(), 1);
    assert.equal(await p.locator(`${tid("grant")}:not([data-name="scratch"]) ${tid("grant-mode")}`).textContent(), "read-only");
    grants = (await s.kiln.api("GET", "/grants")).grants;
    assert.equal(grants.filter((g) => g.data_root).length, 1);
    await shot(p, "settings-files");

    // Revoke: a confirmation first (Escape takes it back, focus returns), then gone.
    await row.locator(tid("grant-revoke")).click();
    await row.locator(tid("grant-confirm")).waitFor();
    assert.equal(await focused(p), "grant-revoke-confirm");
    await p.keyboard.press("Escape");
    await row.locator(tid("grant-confirm")).waitFor({ state: "detached" });
    assert.equal(await focused(p), "grant-revoke");
    await row.locator(tid("grant-revoke")).click();
    await row.locator(tid("grant-revoke-confirm")).click();
    await row.waitFor({ state: "detached" });
    assert.equal(await focused(p), "grt-h", "the panel's heading has the focus once the row is gone");
    grants = (await s.kiln.api("GET", "/grants")).grants;
    assert.deepEqual(grants.map((g) => g.name).includes("scratch"), false);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); rmSync(dir, { recursive: true, force: true }); }
});

test("attachments: dropped on the new-thread composer, refused ones say why, removed ones are deleted; sent with a working folder and shown in the message", async () => {
  const s = await setup();
  const p = s.page;
  const dir = mkdtempSync(join(tmpdir(), "kiln-e2e-wf-"));
  try {
    const grant = await s.kiln.api("POST", "/grants", { path: dir, name: "work", writable: false });
    await p.goto(s.front.url + "#/all");
    await p.waitForSelector(tid("empty"));
    const composer = tid("new-composer");
    await dropFiles(p, composer, [
      { name: "notes.txt", type: "text/plain", text: "hello from a file\n" },
      { name: "dot.png", type: "image/png", base64: PNG },
      { name: "blob.bin", type: "application/octet-stream", base64: "AAECA/8=" },
    ]);
    const chip = (name) => p.locator(`${tid("attachment-chip")}[data-name="${name}"]`);
    await p.waitForSelector(`${tid("attachment-chip")}[data-name="notes.txt"][data-status="done"]`);
    await p.waitForSelector(`${tid("attachment-chip")}[data-name="dot.png"][data-status="done"]`);
    // The image's thumbnail is an object URL, and it loads (the CSP allows blob: images).
    const thumb = chip("dot.png").locator("img");
    assert.match(await thumb.getAttribute("src"), /^blob:/);
    await p.waitForFunction(() => document.querySelector('[data-name="dot.png"] img')?.naturalWidth === 1);
    assert.match(await chip("notes.txt").textContent(), /18 B/);
    // Binary bytes: the server's 415, on the chip.
    await p.waitForSelector(`${tid("attachment-chip")}[data-name="blob.bin"][data-status="error"]`);
    assert.match(await chip("blob.bin").locator(tid("attachment-error")).textContent(), /attachments are images .* or UTF-8 text/);
    await audit(p, "the composer with attachments");
    await shot(p, "composer-attachments");

    // Sending is refused while a failed chip is there.
    await p.fill("#new-text", "text Got the file.");
    await p.click(tid("new-thread"));
    await p.locator(`${composer} .field-error`).waitFor();
    await chip("blob.bin").locator(tid("attachment-remove")).click();

    // Removing an uploaded one deletes it on the server.
    const uploaded = await p.evaluate(() => performance.getEntriesByType("resource").filter((e) => e.name.endsWith("/api/v1/attachments")).length);
    assert.equal(uploaded, 3);
    let deleted;
    p.on("request", (r) => { if (r.method() === "DELETE" && r.url().includes("/api/v1/attachments/")) deleted = r.url(); });
    await chip("dot.png").locator(tid("attachment-remove")).click();
    await chip("dot.png").waitFor({ state: "detached" });
    for (let i = 0; i < 100 && !deleted; i++) await new Promise((r) => setTimeout(r, 20)); // waiting for the request
    assert.ok(deleted, "removing an uploaded attachment deletes it");
    for (let i = 0; i < 100 && (await fetch(deleted)).status !== 404; i++) await new Promise((r) => setTimeout(r, 20)); // its answer
    assert.equal((await fetch(deleted)).status, 404);

    // The working folder: picked from the grants.
    await p.selectOption(`${composer} ${tid("working-folder")}`, grant.id);
    await p.click(tid("new-thread"));
    await p.waitForSelector(tid("thread-view"));
    const threadId = await p.getAttribute(tid("thread-view"), "data-thread-id");
    const sent = p.locator(`${tid("message")}[data-role="user"]`);
    await sent.locator(`${tid("message-attachment")}[data-name="notes.txt"]`).waitFor();
    const link = sent.locator(tid("message-attachment"));
    assert.equal(await link.count(), 1);
    assert.equal(await link.getAttribute("data-type"), "file");
    assert.match(await link.textContent(), /notes\.txt.*text/);
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "Got the file." }).waitFor();

    const msgs = (await s.kiln.api("GET", `/threads/${threadId}/messages`)).messages;
    const user = msgs.find((m) => m.role === "user");
    const part = user.parts?.find((x) => x.type === "file");
    assert.ok(part, `the user message has a file part: ${JSON.stringify(user)}`);
    assert.equal(part.name, "notes.txt");
    assert.match(part.uri, /^attachment:\/\//);
    assert.equal(await link.getAttribute("href"), `/api/v1/attachments/${part.uri.slice("attachment://".length)}/content`);
    const body = await fetch(s.kiln.url + (await link.getAttribute("href"))).then((r) => r.text());
    assert.equal(body, "hello from a file\n");
    const runs = (await s.kiln.api("GET", `/runs?thread_id=${threadId}`)).runs;
    assert.equal(runs[0].working_folder, grant.id);
    assert.equal((await s.kiln.api("GET", `/threads/${threadId}`)).working_folder, grant.id);
    // The thread's composer starts on the thread's working folder.
    assert.equal(await p.inputValue(`#composer-folder`), grant.id);
    await shot(p, "thread-attachment");

    // An image pasted into the thread's composer, sent, shows as a thumbnail with its name as alt text.
    await p.evaluate((b64) => {
      const dt = new DataTransfer();
      dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], "dot.png", { type: "image/png" }));
      document.querySelector("#composer").dispatchEvent(new ClipboardEvent("paste", { bubbles: true, cancelable: true, clipboardData: dt }));
    }, PNG);
    await p.waitForSelector(`${tid("attachment-chip")}[data-name="dot.png"][data-status="done"]`);
    await p.fill("#composer", "text Nice image.");
    await p.click(tid("composer-send"));
    const img = p.locator(`${tid("message")}[data-role="user"] ${tid("message-attachment")}[data-type="image"] img`);
    await img.waitFor();
    assert.equal(await img.getAttribute("alt"), "dot.png");
    await p.waitForFunction(() => document.querySelector('[data-testid="message-attachment"][data-type="image"] img')?.naturalWidth === 1);
    assert.equal(await p.locator(tid("attachment-chip")).count(), 0, "the composer is empty once sent");
    assert.deepEqual(s.errors.filter((e) => !/415/.test(e)), []);
  } finally { await s.close(); rmSync(dir, { recursive: true, force: true }); }
});

test("attachments from the file picker; over the server's limit, the chip says so with the server's message", async () => {
  const s = await setup({ env: { KILN_MAX_ATTACHMENT_MB: "1" } });
  const p = s.page;
  try {
    const t = await s.kiln.api("POST", "/threads", { title: "Big file" });
    await p.goto(s.front.url + `#/thread/${t.id}`);
    await p.waitForSelector(tid("composer"));
    // The file picker: a file under the limit is uploaded.
    await p.setInputFiles(`${tid("composer")} ${tid("attach-input")}`, { name: "small.md", mimeType: "text/markdown", buffer: Buffer.from("# Small\n") });
    await p.waitForSelector(`${tid("attachment-chip")}[data-name="small.md"][data-status="done"]`);
    await dropFiles(p, tid("composer"), [{ name: "big.txt", type: "text/plain", size: 2 << 20 }]);
    const chip = p.locator(`${tid("attachment-chip")}[data-name="big.txt"]`);
    await p.waitForSelector(`${tid("attachment-chip")}[data-name="big.txt"][data-status="error"]`);
    assert.match(await chip.locator(tid("attachment-error")).textContent(), /exceeds the attachment limit of 1 MiB/);
    assert.deepEqual(s.errors.filter((e) => !/413/.test(e)), []);
  } finally { await s.close(); }
});

test("fork from a completed turn: a new thread with the messages up to it, linked to its parent; none while a run is active", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const t = await s.kiln.api("POST", "/threads", { title: "Original" });
    const r1 = await s.kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: 'tool echo {"text":"hi"}\ntext First answer.' }, model: "scripted" });
    await finished(s.kiln, r1.id);
    const r2 = await s.kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: "text Second answer." }, model: "scripted" });
    await finished(s.kiln, r2.id);
    const parentMsgs = (await s.kiln.api("GET", `/threads/${t.id}/messages`)).messages;
    // 0 user, 1 assistant (echo), 2 tool, 3 assistant, 4 user, 5 assistant
    assert.deepEqual(parentMsgs.map((m) => m.role), ["user", "assistant", "tool", "assistant", "user", "assistant"]);

    await p.goto(s.front.url + `#/thread/${t.id}`);
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "Second answer." }).waitFor();
    const forkAt = (i) => p.locator(`${tid("message")}[data-index="${i}"] ${tid("fork")}`);
    await forkAt(5).waitFor();
    assert.equal(await p.locator(tid("fork")).count(), 3, "every completed assistant turn can be forked");
    assert.equal(await p.locator(`${tid("message")}[data-role="user"] ${tid("fork")}`).count(), 0);
    await forkAt(3).click();
    await p.waitForFunction((id) => location.hash.startsWith("#/thread/") && !location.hash.endsWith(id), t.id);
    const forkId = decodeURIComponent((await p.evaluate(() => location.hash)).slice("#/thread/".length));
    await p.waitForSelector(`${tid("thread-view")}[data-thread-id="${forkId}"]`);
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "First answer." }).waitFor();
    assert.equal(await p.locator(tid("message")).count(), 3, "the user message, the echo turn (its result folded in) and the answer");
    assert.equal(await p.locator(`${tid("message")}`, { hasText: "Second answer." }).count(), 0);
    const link = p.locator(tid("forked-from"));
    await link.locator(".forked-title", { hasText: "Original" }).waitFor();
    assert.equal(await link.getAttribute("href"), `#/thread/${t.id}`);
    const fork = await s.kiln.api("GET", `/threads/${forkId}`);
    assert.equal(fork.source, "fork");
    assert.equal(fork.parent_thread_id, t.id);
    assert.equal(fork.parent_message_index, 3);
    // Its Files panel opens (the thread's virtual files; none here).
    await p.click(tid("files-toggle"));
    await p.locator(tid("files-empty")).waitFor();
    await audit(p, "a forked thread with its files panel");
    await shot(p, "thread-fork");
    await p.keyboard.press("Escape");
    await p.locator(tid("files-panel")).waitFor({ state: "detached" });
    assert.equal(await focused(p), "files-toggle");
    await link.click();
    await p.waitForSelector(`${tid("thread-view")}[data-thread-id="${t.id}"]`);

    // While a run waits for a decision, nothing can be forked.
    const { thread: held } = await startApprovalRun(s.kiln, "Held");
    await p.goto(s.front.url + `#/thread/${held.id}`);
    await p.waitForSelector(`${tid("run-status")}[data-status="interrupted"]`);
    assert.equal(await p.locator(tid("fork")).count(), 0);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("a thread's virtual files: listed in its Files panel, read there, refreshed as runs write them, copied into a fork", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const t = await s.kiln.api("POST", "/threads", { title: "Writes files" });
    const r = await s.kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: 'tool write_file {"path":"/notes/plan.md","content":"# Plan\\n- one\\n"}\ntext Wrote it.' }, model: "scripted" });
    assert.equal((await finished(s.kiln, r.id)).status, "succeeded");
    await p.goto(s.front.url + `#/thread/${t.id}`);
    await p.locator(`${tid("files-toggle")} ${tid("files-count")}`, { hasText: "1" }).waitFor();
    await p.click(tid("files-toggle"));
    assert.equal(await focused(p), "thread-files-h", "the panel's heading takes the focus");
    const file = p.locator(`${tid("file")}[data-path="/notes/plan.md"]`);
    await file.waitFor();
    assert.match(await p.locator(tid("file-list")).textContent(), /\/notes\/plan\.md.*13 B/);
    await file.click();
    await p.locator(tid("file-content")).waitFor();
    assert.equal(await p.locator(tid("file-content")).textContent(), "# Plan\n- one\n");

    // A run that writes more: the list and the open file follow.
    await p.fill("#composer", 'tool write_file {"path":"/notes/plan.md","content":"# Plan\\n- one\\n- two\\n"}\ntool write_file {"path":"/out/b.txt","content":"b"}\ntext Done.');
    await p.click(tid("composer-send"));
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="file"]').length === 2);
    await p.locator(tid("file-content"), { hasText: "- two" }).waitFor();
    assert.equal(await p.locator(tid("files-count")).textContent(), "2");
    await audit(p, "a thread's files panel with a file open");
    await shot(p, "thread-files");

    // A fork takes the files as they were at its turn.
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "Done." }).waitFor();
    await p.locator(tid("fork")).last().click();
    await p.waitForFunction((id) => location.hash.startsWith("#/thread/") && !location.hash.endsWith(id), t.id);
    await p.locator(`${tid("files-toggle")} ${tid("files-count")}`, { hasText: "2" }).waitFor();
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("Settings > Memories: turn memory on, edit one and see it persisted, create and delete one", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await s.kiln.api("POST", "/memories", { name: "notes.md", content: "# Notes\n- likes tea" });
    await p.goto(s.front.url + "#/settings/memories");
    await p.waitForSelector(`${tid("memories")}[data-state="loaded"]`);
    const row = p.locator(memoryRow("notes.md"));
    await row.waitFor();
    assert.match(await row.locator(tid("memory-preview")).textContent(), /# Notes - likes tea/);

    // Memory is off by default: the panel says so and turns it on.
    await p.locator(tid("memory-off")).waitFor();
    await p.click(tid("memory-enable"));
    await p.locator(tid("memory-off")).waitFor({ state: "detached" });
    assert.equal((await s.kiln.api("GET", "/settings")).memory, true);

    // Edit and save.
    await row.locator(tid("memory-edit")).click();
    const area = row.locator(tid("memory-content"));
    await area.waitFor();
    assert.equal(await area.inputValue(), "# Notes\n- likes tea");
    assert.equal(await focused(p), "memory-content");
    await area.fill("# Notes\n- likes tea\n- prefers short answers");
    await audit(p, "settings memories with the editor open");
    await shot(p, "settings-memories");
    await row.locator(tid("memory-save")).click();
    await row.locator(tid("memory-saved"), { hasText: "Saved." }).waitFor();
    assert.equal((await s.kiln.api("GET", "/memories/notes.md")).content, "# Notes\n- likes tea\n- prefers short answers");

    // Reload: persisted.
    await p.reload();
    await p.waitForSelector(`${tid("memories")}[data-state="loaded"]`);
    await row.locator(tid("memory-edit")).click();
    await row.locator(tid("memory-content")).waitFor();
    assert.equal(await row.locator(tid("memory-content")).inputValue(), "# Notes\n- likes tea\n- prefers short answers");
    await p.keyboard.press("Escape");
    await row.locator(tid("memory-editor")).waitFor({ state: "detached" });
    assert.equal(await focused(p), "memory-edit");
    assert.match(await row.locator(tid("memory-preview")).textContent(), /prefers short answers/);

    // Create one in the page (.md added), then delete it with a confirmation.
    await p.click(tid("memory-new"));
    await p.fill(tid("memory-name"), "project");
    await p.fill(tid("memory-new-content"), "Kiln is written in Go.");
    await p.click(tid("memory-create"));
    const created = p.locator(memoryRow("project.md"));
    await created.waitFor();
    assert.equal(await focused(p), "memory-new");
    assert.equal((await s.kiln.api("GET", "/memories/project.md")).content, "Kiln is written in Go.");
    // A name in use: the server's conflict, inline.
    await p.click(tid("memory-new"));
    await p.fill(tid("memory-name"), "project.md");
    await p.click(tid("memory-create"));
    await p.locator(tid("memory-create-error")).waitFor();
    await p.keyboard.press("Escape");
    await created.locator(tid("memory-delete")).click();
    assert.equal(await focused(p), "memory-delete-confirm");
    await created.locator(tid("memory-delete-confirm")).click();
    await created.waitFor({ state: "detached" });
    assert.equal(await focused(p), "mem-h");
    const names = (await s.kiln.api("GET", "/memories")).memories.map((m) => m.name);
    assert.deepEqual(names, ["notes.md"]);
    assert.deepEqual(s.errors.filter((e) => !/409/.test(e)), []);
  } finally { await s.close(); }
});

test("Settings > General: the theme applies at once and stays; the addendum is counted against 8000; limits saved", async () => {
  const s = await setup();
  const p = s.page;
  try {
    await p.goto(s.front.url + "#/settings/general");
    await p.waitForSelector(`${tid("general")}[data-state="loaded"]`);
    const bg = () => p.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const theme = () => p.evaluate(() => document.documentElement.dataset.theme);
    assert.equal(await theme(), "system");
    const light = await bg();

    await p.selectOption(tid("theme"), "dark");
    assert.equal(await theme(), "dark", "applied at once");
    assert.notEqual(await bg(), light);
    const dark = await bg();
    for (let i = 0; i < 100 && (await s.kiln.api("GET", "/settings")).theme !== "dark"; i++) await new Promise((r) => setTimeout(r, 20)); // the PUT
    assert.equal((await s.kiln.api("GET", "/settings")).theme, "dark");
    await audit(p, "settings in the dark theme");
    await p.reload();
    await p.waitForSelector(`${tid("general")}[data-state="loaded"]`);
    assert.equal(await theme(), "dark", "kept across a reload");
    assert.equal(await bg(), dark);
    assert.equal(await p.inputValue(tid("theme")), "dark");
    await p.selectOption(tid("theme"), "system");
    assert.equal(await bg(), light, "system follows the device (light here)");
    await p.emulateMedia({ colorScheme: "dark" });
    assert.equal(await bg(), dark, "system follows the device (now dark)");
    await p.emulateMedia({ colorScheme: "light" });

    // The addendum: counted live, refused over 8000.
    const count = p.locator(tid("addendum-count"));
    await p.fill(tid("addendum"), "Answer briefly. ☕");
    assert.match(await count.textContent(), /^17 \/ 8,000 characters$/);
    await p.fill(tid("addendum"), "x".repeat(8001));
    assert.match(await count.textContent(), /8,001 \/ 8,000 characters — 1 too many/);
    assert.ok(await p.locator(tid("general-save")).isDisabled());
    await p.fill(tid("addendum"), "Answer briefly.");
    await p.fill(tid("limit-steps"), "abc");
    await p.click(tid("general-save"));
    await p.locator(tid("general-error")).waitFor();
    await p.fill(tid("limit-steps"), "12");
    await p.click(tid("general-save"));
    await p.locator(tid("general-saved"), { hasText: "Saved." }).waitFor();
    const st = await s.kiln.api("GET", "/settings");
    assert.equal(st.prompt_addendum, "Answer briefly.");
    assert.equal(st.limits.max_steps, 12);
    assert.ok(!st.limits.max_tool_calls);
    await shot(p, "settings-general");
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});

test("Settings > General: the default sandbox runtime is one of the enabled ones, saved at once; a create naming none lands on it; one disabled since is marked", async () => {
  // No Docker engine, so the runtimes are js and wasm; the server's own
  // default is wasm.
  const s = await setup({ env: { DOCKER_HOST: "unix:///nonexistent.sock", KILN_SANDBOX_RUNTIME: "wasm" } });
  const p = s.page;
  const sel = tid("sandbox-runtime-default");
  const options = () => p.locator(`${sel} option`).allTextContents();
  const setting = async () => (await s.kiln.api("GET", "/settings")).sandbox_runtime;
  const create = async () => {
    const r = await fetch(s.kiln.url + "/v1/sandboxes", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ timeout: 600 }) });
    assert.equal(r.status, 202);
    return (await r.json()).runtime;
  };
  try {
    await p.goto(s.front.url + "#/settings/general");
    await p.waitForSelector(`${tid("general")}[data-state="loaded"]`);
    await until(async () => (await options()).length === 3, "the enabled runtimes in the select");
    assert.deepEqual(await options(), ["Server default", "js", "wasm"]);
    assert.equal(await p.inputValue(sel), "");
    assert.equal(await create(), "wasm");

    await p.selectOption(sel, "js");
    await until(async () => (await setting()) === "js", "the setting saved");
    assert.equal(await create(), "js", "a create naming no runtime");

    // The js plugin disabled: the setting stays, marked, and says what happens.
    await s.kiln.api("POST", "/plugins/js/disable");
    await p.reload();
    await p.waitForSelector(`${tid("general")}[data-state="loaded"]`);
    const note = p.locator(tid("sandbox-runtime-note"));
    await note.waitFor();
    assert.match(await note.textContent(), /^js is not enabled: sandboxes created without a runtime get the server's default/);
    assert.equal(await p.inputValue(sel), "js");
    assert.deepEqual(await options(), ["Server default", "wasm", "js (not enabled)"]);
    assert.equal(await create(), "wasm");
    await audit(p, "settings with a sandbox runtime not enabled");
    await shot(p, "settings-sandbox-runtime");

    // Enabled again (as from the Plugins panel below): the select reads
    // the runtimes again when it gets the focus.
    await s.kiln.api("POST", "/plugins/js/enable");
    await p.focus(sel);
    await note.waitFor({ state: "detached" });
    assert.deepEqual(await options(), ["Server default", "js", "wasm"]);

    await p.selectOption(sel, "");
    await until(async () => (await setting()) === "", "the server's default saved");
    assert.equal(await create(), "wasm");
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
