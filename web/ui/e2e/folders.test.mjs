// Folders: create, move a thread by menu and by drag and drop, rename,
// reorder, delete; search; folders never hide threads from Action.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setup, startApprovalRun, tid, until } from "./harness.mjs";

test("folders and search", async () => {
  const s = await setup();
  const p = s.page;
  try {
    const a = await s.kiln.api("POST", "/threads", { title: "Banana bread recipe" });
    const b = await s.kiln.api("POST", "/threads", { title: "Quarterly report" });
    const { thread: c } = await startApprovalRun(s.kiln, "Needs a decision");
    await p.goto(s.front.url + "#/all");
    await p.waitForSelector(`${tid("thread-item")}[data-thread-id="${c.id}"]`);

    // Create two folders.
    for (const name of ["Kitchen", "Work"]) {
      await p.click(tid("folder-new"));
      await p.fill(tid("folder-name-input"), name);
      await p.press(tid("folder-name-input"), "Enter");
      await p.locator(tid("folder-item"), { hasText: name }).waitFor();
    }
    const folders = (await s.kiln.api("GET", "/folders")).folders;
    const kitchen = folders.find((f) => f.name === "Kitchen"), work = folders.find((f) => f.name === "Work");

    // Move by the thread menu.
    const rowA = p.locator(`${tid("thread-item")}[data-thread-id="${a.id}"]`);
    await rowA.locator(tid("thread-menu")).click();
    await rowA.locator(`[role=menuitem][data-move-folder="${kitchen.id}"]`).click();
    await until(async () => (await s.kiln.api("GET", `/threads/${a.id}`)).folder_id === kitchen.id, "a in Kitchen");

    // Move by drag and drop.
    const rowC = p.locator(`${tid("thread-item")}[data-thread-id="${c.id}"]`);
    await rowC.dragTo(p.locator(`${tid("folder-item")}[data-folder-id="${work.id}"]`));
    await until(async () => (await s.kiln.api("GET", `/threads/${c.id}`)).folder_id === work.id, "c in Work");

    // The folder view lists its threads only.
    await p.click(`${tid("folder-item")}[data-folder-id="${kitchen.id}"] a`);
    await p.waitForFunction(() => location.hash.startsWith("#/folder/"));
    await p.locator(`${tid("thread-item")}[data-thread-id="${a.id}"]`).waitFor();
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 1);

    // Folders never hide anything from Action.
    await p.click(tid("nav-action"));
    await p.locator(tid("approval-card")).waitFor();
    assert.equal(await p.locator(tid("count-action")).textContent(), "1");

    // Reorder: move Work up, above Kitchen.
    await p.locator(`${tid("folder-item")}[data-folder-id="${work.id}"]`).hover();
    await p.click(`[aria-label="Move folder Work up"]`);
    await p.waitForFunction(() => [...document.querySelectorAll('[data-testid="folder-item"]')].map((e) => e.querySelector('.label')?.textContent).join(",") === "Work,Kitchen");
    await until(async () => (await s.kiln.api("GET", "/folders")).folders[0].id === work.id, "Work first");

    // Rename.
    await p.locator(`${tid("folder-item")}[data-folder-id="${kitchen.id}"]`).hover();
    await p.click(`[aria-label="Rename folder Kitchen"]`);
    await p.fill(tid("folder-rename-input"), "Home");
    await p.press(tid("folder-rename-input"), "Enter");
    await p.locator(tid("folder-item"), { hasText: "Home" }).waitFor();

    // Search.
    await p.click(tid("nav-all"));
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 3);
    await p.fill(tid("search"), "banana");
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 1);
    assert.equal(await p.locator(tid("thread-item")).getAttribute("data-thread-id"), a.id);
    await p.fill(tid("search"), "zzz-nothing");
    await p.locator(tid("empty"), { hasText: "Nothing matches" }).waitFor();
    await p.fill(tid("search"), "");
    await p.waitForFunction(() => document.querySelectorAll('[data-testid="thread-item"]').length === 3);

    // Pin puts a thread first.
    await p.locator(`${tid("thread-item")}[data-thread-id="${b.id}"] [data-testid=pin]`).click();
    await p.waitForFunction((id) => document.querySelector('[data-testid="thread-item"]')?.getAttribute("data-thread-id") === id, b.id);

    // Delete a folder: its threads go back to no folder.
    await p.locator(`${tid("folder-item")}[data-folder-id="${kitchen.id}"]`).hover();
    await p.click(`[aria-label="Delete folder Home"]`);
    await p.locator(`${tid("folder-item")}[data-folder-id="${kitchen.id}"] button`, { hasText: "Delete?" }).click();
    await p.locator(`${tid("folder-item")}[data-folder-id="${kitchen.id}"]`).waitFor({ state: "detached" });
    assert.equal((await s.kiln.api("GET", `/threads/${a.id}`)).folder_id, undefined);
    assert.deepEqual(s.errors, []);
  } finally { await s.close(); }
});
