import { test } from "node:test";
import assert from "node:assert/strict";
import { activityTree, applyEvent, currentRun, initThread, openInterrupts, progressText, queuedRuns, rootMessages, subagents, threadModel, withMessages, type ThreadState } from "../src/state/events";
import type { KEvent } from "../src/types";

const T = "thr_1", R = "run_1";
const ev = (seq: number, type: string, payload: any = {}, extra: Partial<KEvent> = {}): KEvent =>
  ({ seq, type, payload, thread_id: T, run_id: R, time: "2026-01-01T00:00:00Z", ...extra });
const fold = (s: ThreadState, es: KEvent[]) => es.reduce(applyEvent, s);

test("message events build the conversation in index order", () => {
  const s = fold(initThread(T), [
    ev(1, "run.started", { status: "running", model: "scripted" }),
    ev(2, "message", { index: 0, role: "user", text: "hi" }),
    ev(3, "message", { index: 1, role: "assistant", text: "hello" }),
  ]);
  assert.deepEqual(s.messages.map((m) => [m.index, m.role, m.text]), [[0, "user", "hi"], [1, "assistant", "hello"]]);
  assert.equal(s.lastSeq, 3);
  assert.equal(currentRun(s)?.status, "running");
});

test("deltas accumulate and the final message replaces them", () => {
  let s = fold(initThread(T), [ev(1, "run.started", {}), ev(0, "message.delta", { text: "Hel" }), ev(0, "message.delta", { text: "lo " }), ev(0, "message.delta", { text: "world" })]);
  assert.equal(s.streaming[R], "Hello world");
  assert.equal(s.lastSeq, 1, "deltas are not durable");
  s = applyEvent(s, ev(2, "message", { index: 1, role: "assistant", text: "Hello world" }));
  assert.equal(s.streaming[R], undefined);
  assert.equal(s.messages.length, 1);
  assert.equal(s.activity.filter((a) => a.type === "message.delta").length, 0, "deltas stay out of the activity");
});

test("run.finished records the status and the error, and closes open interrupts", () => {
  let s = fold(initThread(T), [
    ev(1, "run.started", {}),
    ev(2, "interrupt.created", { id: "int_1", run_id: R, thread_id: T, kind: "approval", tool: "append_file", args: {}, allowed_decisions: ["approve"], status: "open" }),
    ev(0, "message.delta", { text: "partial" }),
    ev(3, "run.finished", { status: "failed", error: "tool call limit of 1 reached" }),
  ]);
  const run = currentRun(s)!;
  assert.equal(run.status, "failed");
  assert.equal(run.error, "tool call limit of 1 reached");
  assert.equal(openInterrupts(s).length, 0);
  assert.equal(s.interrupts.int_1.status, "cancelled");
  assert.equal(s.streaming[R], undefined);
});

test("interrupt created then decided", () => {
  const base = { id: "int_1", run_id: R, thread_id: T, kind: "approval", tool: "append_file", args: { path: "a" }, allowed_decisions: ["approve", "reject"] };
  let s = fold(initThread(T), [ev(1, "interrupt.created", { ...base, status: "open" }), ev(2, "run.interrupted", { interrupts: 1 })]);
  assert.equal(openInterrupts(s).length, 1);
  assert.equal(currentRun(s)?.status, "interrupted");
  s = fold(s, [ev(3, "interrupt.decided", { ...base, status: "decided", decision: { decision: "approve" } }), ev(4, "run.resumed", { reason: "decision" })]);
  assert.equal(openInterrupts(s).length, 0);
  assert.equal(s.interrupts.int_1.decision?.decision, "approve");
  assert.equal(currentRun(s)?.status, "running");
});

test("a decided interrupt never reopens (snapshot older than the stream)", () => {
  const base = { id: "int_1", run_id: R, thread_id: T, kind: "approval", tool: "x", args: {}, allowed_decisions: ["approve"] };
  let s = fold(initThread(T), [ev(1, "interrupt.created", { ...base, status: "open" }), ev(2, "interrupt.decided", { ...base, status: "decided" })]);
  s = applyEvent(s, ev(5, "interrupt.created", { ...base, status: "open" }));
  assert.equal(s.interrupts.int_1.status, "decided");
});

test("duplicate durable events are ignored", () => {
  const e = [ev(1, "run.started", {}), ev(2, "message", { index: 0, role: "user", text: "a" }), ev(3, "message", { index: 1, role: "assistant", text: "b" })];
  const once = fold(initThread(T), e);
  const twice = fold(once, e);
  assert.equal(twice, once, "replaying the same events returns the same state object");
  assert.equal(twice.activity.length, 3);
});

test("out-of-order: stale seqs are dropped, messages stay sorted by index", () => {
  let s = fold(initThread(T), [ev(5, "message", { index: 2, role: "assistant", text: "c" })]);
  s = applyEvent(s, ev(4, "message", { index: 1, role: "tool", text: "stale" }));
  assert.equal(s.messages.length, 1, "seq 4 after seq 5 is a replay and ignored");
  s = withMessages(s, [{ index: 0, role: "user", text: "a" }, { index: 1, role: "tool", text: "b" }]);
  assert.deepEqual(s.messages.map((m) => m.index), [0, 1, 2]);
  s = withMessages(s, [{ index: 1, role: "tool", text: "b" }]);
  assert.equal(s.messages.length, 3, "snapshots are idempotent");
});

test("a delta that arrives after its run ended does not stream again", () => {
  const s = fold(initThread(T), [
    ev(1, "run.started", { model: "scripted" }),
    ev(2, "message", { index: 0, role: "assistant", text: "Hello." }),
    ev(3, "run.finished", { status: "succeeded" }),
    ev(0, "message.delta", { text: "Hello." }),
  ]);
  assert.deepEqual(s.streaming, {});
});

test("events of other threads are ignored", () => {
  const s = applyEvent(initThread(T), ev(1, "run.started", {}, { thread_id: "thr_other" }));
  assert.equal(s.lastSeq, 0);
});

test("subagents: their runs, messages and activity nest under the task call; the conversation and current run stay the root's", () => {
  const sub = { run_id: "run_s", namespace: "run_s" };
  const deep = { run_id: "run_d", namespace: "run_s/run_d" };
  const s = fold(initThread(T), [
    ev(1, "run.started", { model: "scripted" }),
    ev(2, "message", { index: 0, role: "user", text: "go" }),
    ev(3, "message", { index: 1, role: "assistant", tool_calls: [{ id: "t1", name: "task", args: {} }] }),
    ev(4, "run.started", { model: "scripted", parent_run_id: "run_1", parent_call_id: "t1", skill: "helper" }, sub),
    ev(5, "tool.started", { id: "t1", name: "task", args: {} }),
    ev(6, "message", { index: 2, role: "user", text: "the task" }, sub),
    ev(0, "message.delta", { text: "thinking" }, sub),
    ev(7, "message", { index: 3, role: "assistant", tool_calls: [{ id: "w1", name: "task", args: {} }] }, sub),
    ev(8, "tool.started", { id: "w1", name: "task", args: {} }, sub),
    ev(9, "run.started", { model: "scripted", parent_run_id: "run_s", parent_call_id: "w1", skill: "deep" }, deep),
    ev(10, "run.finished", { status: "succeeded" }, deep),
  ]);
  assert.equal(currentRun(s)?.id, "run_1", "a subagent's run is never the current run");
  assert.deepEqual(s.streaming, {}, "a subagent's deltas do not stream into the conversation");
  assert.deepEqual(rootMessages(s).map((m) => m.index), [0, 1]);
  assert.equal(s.messages.find((m) => m.index === 2)?.namespace, "run_s");
  assert.equal(subagents(s, "run_1").get("t1")?.agent?.skill, "helper");
  const tree = activityTree(s, "run_1");
  assert.deepEqual(tree.map((n) => n.item.seq), [1, 2, 3, 5]);
  const task = tree[3];
  assert.equal(task.subagents.length, 1);
  assert.equal(task.subagents[0].run.id, "run_s");
  const inner = task.subagents[0].nodes;
  assert.deepEqual(inner.map((n) => n.item.seq), [4, 6, 7, 8]);
  assert.equal(inner[0].item.summary, "Subagent helper started on scripted");
  assert.equal(inner[3].subagents[0].run.id, "run_d");
  assert.equal(inner[3].subagents[0].run.status, "succeeded");
  assert.deepEqual(inner[3].subagents[0].nodes.map((n) => n.item.seq), [9, 10]);
});

test("a subagent whose task call is not in the activity follows at the end", () => {
  const s = fold(initThread(T), [
    ev(1, "run.started", {}),
    ev(4, "run.started", { parent_run_id: "run_1", parent_call_id: "t9", skill: "helper" }, { run_id: "run_s", namespace: "run_s" }),
  ]);
  const tree = activityTree(s, "run_1");
  assert.equal(tree.length, 2);
  assert.equal(tree[1].item.type, "subagent");
  assert.equal(tree[1].subagents[0].run.id, "run_s");
});

test("run.finished carries the run's token usage into the run and the activity", () => {
  const s = fold(initThread(T), [
    ev(1, "run.started", { model: "scripted" }),
    ev(2, "run.finished", { status: "succeeded", steps: 2, usage: { input_tokens: 1234, output_tokens: 56 } }),
  ]);
  assert.deepEqual(currentRun(s)?.usage, { input_tokens: 1234, output_tokens: 56 });
  assert.equal(s.activity.at(-1)?.summary, "Run succeeded · 1,234 in · 56 out tokens");
  const none = fold(initThread(T), [ev(1, "run.started", {}), ev(2, "run.finished", { status: "cancelled", usage: { input_tokens: 0, output_tokens: 0 } })]);
  assert.equal(none.activity.at(-1)?.summary, "Run cancelled", "no tokens, no token text");
});

test("a replay does not undo a fresh read of the thread", () => {
  const fresh = { id: T, title: "Renamed", model: "scripted", status: "interrupted", active_run_id: R, unread: false, open_actions: 1, pinned: true, created_at: "", updated_at: "" };
  let s = { ...initThread(T), thread: fresh as any };
  s = fold(s, [
    ev(1, "thread.created", { id: T, title: "New thread", status: "idle", unread: false, open_actions: 0, pinned: false }, { run_id: undefined }),
    ev(2, "thread.updated", { id: T, title: "Renamed", status: "idle", pinned: true, folder_id: "fld_1" }, { run_id: undefined }),
  ]);
  assert.equal(s.thread?.model, "scripted", "the model stays");
  assert.equal(s.thread?.status, "interrupted", "the derived status stays");
  assert.equal(s.thread?.active_run_id, R);
  assert.equal(s.thread?.title, "Renamed");
  assert.equal(s.thread?.folder_id, "fld_1", "what the user edits comes from the event");
});

test("the current run is the active one; follow-ups are queued behind it", () => {
  const R2 = "run_2";
  const s = fold(initThread(T), [
    ev(1, "run.started", { status: "running", model: "scripted" }),
    ev(2, "run.interrupted", { interrupts: 1 }),
    ev(3, "run.queued", { status: "queued", model: "scripted" }, { run_id: R2 }),
  ]);
  assert.equal(currentRun(s)?.id, R, "the waiting run, not the queued one");
  assert.equal(currentRun(s)?.status, "interrupted");
  assert.deepEqual(queuedRuns(s).map((r) => r.id), [R2]);
  assert.equal(threadModel(s), "scripted", "from the first run when the thread does not say");
  const after = fold(s, [ev(4, "run.finished", { status: "succeeded" }), ev(5, "run.started", { status: "running", model: "scripted" }, { run_id: R2 })]);
  assert.equal(currentRun(after)?.id, R2);
  assert.deepEqual(queuedRuns(after), []);
});

test("a tool call's progress is one Activity line that follows the latest event", () => {
  const progress = (call: string, tool: string, p: any) => ev(0, "tool.progress", { tool_call_id: call, tool, progress: p });
  const op = "mcp.everything.trigger-long-running-operation";
  let s = fold(initThread(T), [
    ev(1, "run.started", {}),
    ev(0, "tool.started", { id: "c1", name: op, args: {} }),
    progress("c1", op, { progress: 1, total: 3 }),
    ev(0, "tool.started", { id: "c2", name: "mcp.bad.progress", args: {} }),
    progress("c2", "mcp.bad.progress", { progress: 1, total: 4, message: "step 1 of 4" }),
    progress("c1", op, { progress: 2, total: 3, message: "halfway" }),
  ]);
  const lines = () => s.activity.filter((a) => a.type === "tool.progress").map((a) => [a.call_id, a.summary, a.fraction]);
  assert.deepEqual(lines(), [
    ["c1", `${op}: 2/3 (67%) · halfway`, 2 / 3],
    ["c2", "mcp.bad.progress: 1/4 (25%) · step 1 of 4", 0.25],
  ]);
  assert.equal(s.lastSeq, 1, "progress is not durable");
  s = applyEvent(s, progress("c1", op, { progress: 3, total: 3 }));
  assert.deepEqual(lines()[0], ["c1", `${op}: 3/3 (100%)`, 1]);
  assert.equal(s.activity.length, 5, "updated in place, not appended");
  assert.equal(activityTree(s, R).filter((n) => n.item.type === "tool.progress").length, 2);
});

test("progressText reads MCP progress, sandbox.exec output and anything else", () => {
  assert.equal(progressText({ progress: 7 }), "7");
  assert.equal(progressText({ progress: 5, total: 4 }), "5/4 (100%)");
  assert.equal(progressText({ progress: 0.5, total: 1, message: "" }), "0.5/1 (50%)");
  assert.equal(progressText({ stream: "stdout", text: "one\ntwo\n" }), "two");
  assert.equal(progressText({ done: 1, of: 2 }), `{"done":1,"of":2}`);
});
