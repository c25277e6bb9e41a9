// Subagents in the thread view: a run delegates to a custom skill through
// the task tool. The conversation shows the task call with its subagent's
// state (not the subagent's own messages); the Activity panel nests the
// subagent's progress under the task call, live. The skill's interruptOn
// holds the subagent's echo: its card shows in the thread, approving it
// finishes the subagent and then the run. The view passes the axe audit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { audit, setup, tid } from "./harness.mjs";

const SKILL = `---
name: helper
description: Echoes what it is asked to, with the user's approval.
tools: [echo]
interruptOn:
  echo: {allowedDecisions: [approve, reject]}
---
# Helper
Echo it.
`;

test("a task call's subagent: nested live in Activity, its approval in the thread, then the run finishes", async () => {
  const s = await setup({ files: { "skills/helper/SKILL.md": SKILL } });
  const p = s.page;
  try {
    const child = 'tool echo {"said":"hello"}\ntext The helper echoed hello.';
    const script = `tool task ${JSON.stringify({ skill: "helper", prompt: child })}\ntext Parent done.`;
    const t = await s.kiln.api("POST", "/threads", { title: "Delegate" });
    const run = await s.kiln.api("POST", `/threads/${t.id}/runs`, { input: { text: script }, model: "scripted" });

    await p.goto(s.front.url + `#/thread/${t.id}`);
    await p.waitForSelector(`${tid("thread-view")}[data-thread-id="${t.id}"]`);
    // The subagent's echo waits for a decision: its card is in the thread.
    const card = p.locator(tid("approval-card"));
    await card.waitFor();
    assert.match(await card.textContent(), /echo/);
    assert.equal(await card.locator(tid("edit")).count(), 0, "the skill allows approve and reject only");
    // The task call names its subagent and its state.
    const call = p.locator(`${tid("tool-call")}[data-tool="task"]`);
    await call.locator(`${tid("subagent")}[data-status="interrupted"]`).waitFor();
    assert.match(await call.locator(tid("subagent")).textContent(), /helper/);
    // Activity: the subagent's lines sit under the task call's.
    const nested = p.locator(`${tid("activity")} .act-tool-started ${tid("subagent-activity")}[data-skill="helper"]`);
    await nested.waitFor();
    assert.equal(await nested.getAttribute("data-status"), "interrupted");
    assert.match(await nested.textContent(), /Subagent helper started on scripted/);
    assert.match(await nested.textContent(), /Approval needed for echo/);
    // The conversation is the thread's own: the subagent's task text is not a message.
    const msgs = await s.kiln.api("GET", `/threads/${t.id}/messages`);
    const own = msgs.messages.filter((m) => !m.namespace).map((m) => String(m.index));
    assert.ok(msgs.messages.length > own.length, "the subagent has messages of its own");
    const shown = await p.locator(tid("message")).evaluateAll((els) => els.map((e) => e.getAttribute("data-index")));
    assert.deepEqual(shown, own, "the conversation shows the thread's own messages only");
    assert.equal(await p.locator(`${tid("run-status")}`).getAttribute("data-status"), "running");
    await audit(p, "thread: a subagent waiting for a decision");

    await card.locator(tid("approve")).click();
    await p.waitForSelector(`${tid("run-status")}[data-status="succeeded"]`);
    await p.locator(`${tid("message")}[data-role="assistant"]`, { hasText: "Parent done." }).waitFor();
    await nested.and(p.locator('[data-status="succeeded"]')).waitFor();
    assert.match(await nested.textContent(), /echo approve/);
    assert.match(await nested.textContent(), /Run succeeded/);
    await call.locator(`${tid("subagent")}[data-status="succeeded"]`).waitFor();
    await call.locator("summary").click();
    assert.match(await call.textContent(), /The helper echoed hello\./);
    const runs = await s.kiln.api("GET", `/threads/${t.id}/runs`);
    const sub = runs.runs.find((r) => r.parent_run_id === run.id);
    assert.equal(sub?.agent?.skill, "helper");
    assert.equal(sub?.status, "succeeded");
  } finally {
    await s.close();
  }
});
