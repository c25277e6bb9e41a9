import { test } from "node:test";
import assert from "node:assert/strict";
import { canPause, ExecParser, META_THREAD, outcomeOf, outputOf, parseMetadata, runtimeChoices, runtimesOf, takesImage, threadOf } from "../src/sandboxes";
import type { Plugin } from "../src/types";
import { untilTime } from "../src/time";
import { isListRoute, parseRoute, href } from "../src/route";

test("untilTime: the time left, counting down; expired once past", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(untilTime(undefined, now), "");
  assert.equal(untilTime("nonsense", now), "");
  assert.equal(untilTime("2026-01-01T00:00:09.5Z", now), "in 9s");
  assert.equal(untilTime("2026-01-01T00:09:05Z", now), "in 9m 5s");
  assert.equal(untilTime("2026-01-01T02:03:59Z", now), "in 2h 3m");
  assert.equal(untilTime("2026-01-04T04:00:00Z", now), "in 3d 4h");
  assert.equal(untilTime("2026-01-01T00:00:00Z", now), "expired");
  assert.equal(untilTime("2025-12-31T23:00:00Z", now), "expired");
});

test("ExecParser: execd's events in any chunks, blank lines between, a bad line said", () => {
  const stream = '{"type":"init","text":"c1","timestamp":1}\n\n{"type":"stdout","text":"hello","timestamp":2}\n\n{"type":"error","error":{"ename":"CommandExecError","evalue":"3","traceback":[]}}\n\n';
  for (const size of [1, 3, 7, stream.length]) {
    const p = new ExecParser();
    const evs = [];
    for (let i = 0; i < stream.length; i += size) evs.push(...p.feed(stream.slice(i, i + size)));
    evs.push(...p.end());
    assert.deepEqual(evs.map((e) => e.type), ["init", "stdout", "error"], `chunks of ${size}`);
    assert.equal(evs[1].text, "hello");
  }
  const p = new ExecParser();
  assert.deepEqual(p.feed('{"type":"ping","text":"pong"}'), [], "no line end yet");
  assert.deepEqual(p.end().map((e) => e.type), ["ping"], "the last line without its end");
  const bad = new ExecParser().feed("<html>\n");
  assert.equal(bad[0].type, "error");
  assert.equal(bad[0].error?.ename, "BadStream");
});

test("outputOf: a line event gets its ending back, an empty line stays one, a partial one gets none", () => {
  assert.equal(outputOf({ type: "stdout", text: "hello" }), "hello\n");
  assert.equal(outputOf({ type: "stderr", text: "\n" }), "\n");
  assert.equal(["a", "\n", "b"].map((text) => outputOf({ type: "stdout", text })).join(""), "a\n\nb\n");
  const evs = [{ text: "xx", partial: true }, { text: "x" }, { text: "\n" }, { text: "end", partial: true }];
  assert.equal(evs.map((e) => outputOf({ type: "stdout", ...e })).join(""), "xxx\n\nend", "partial pieces get no ending");
});

test("outcomeOf: exit 0, a failing command's code, an interrupt, other errors; nothing for output", () => {
  assert.deepEqual(outcomeOf({ type: "execution_complete", execution_time: 21 }), { kind: "exit", code: 0, ms: 21 });
  assert.deepEqual(outcomeOf({ type: "error", error: { ename: "CommandExecError", evalue: "127" } }), { kind: "exit", code: 127 });
  assert.deepEqual(outcomeOf({ type: "error", error: { ename: "Interrupted", evalue: "context canceled: interrupted" } }), { kind: "interrupted", message: "context canceled: interrupted" });
  assert.deepEqual(outcomeOf({ type: "error", error: { ename: "TimeoutError", evalue: "deadline exceeded" } }), { kind: "error", name: "TimeoutError", message: "deadline exceeded" });
  assert.equal(outcomeOf({ type: "stdout", text: "x" }), undefined);
  assert.equal(outcomeOf({ type: "init", text: "c1" }), undefined);
  assert.equal(outcomeOf({ type: "ping" }), undefined);
});

test("parseMetadata: key=value pairs by commas or lines; none is undefined; a pair without = is refused", () => {
  assert.equal(parseMetadata(""), undefined);
  assert.equal(parseMetadata(" , \n"), undefined);
  assert.deepEqual(parseMetadata("team=ui, purpose = e2e\nempty="), { team: "ui", purpose: "e2e", empty: "" });
  assert.deepEqual(parseMetadata("url=a=b"), { url: "a=b" });
  assert.throws(() => parseMetadata("team"), /want key=value/);
  assert.throws(() => parseMetadata("=x"), /want key=value/);
});

test("canPause and takesImage: the built-ins known, others learned or unknown", () => {
  assert.equal(canPause("docker"), true);
  assert.equal(canPause("wasm"), false);
  assert.equal(canPause("mine"), undefined);
  assert.equal(canPause("mine", { mine: false }), false);
  assert.equal(canPause(undefined), undefined);
  assert.equal(takesImage("docker"), true);
  assert.equal(takesImage("js"), false);
  assert.equal(takesImage(""), undefined);
});

test("route: #/sandboxes, not a list of threads", () => {
  const r = parseRoute("#/sandboxes");
  assert.deepEqual(r, { view: "sandboxes" });
  assert.equal(href(r), "#/sandboxes");
  assert.equal(isListRoute(r), false);
  assert.equal(isListRoute(parseRoute("#/settings")), false);
  assert.equal(isListRoute(parseRoute("#/thread/t1")), false);
  assert.equal(isListRoute(parseRoute("#/folder/f1")), true);
  assert.equal(isListRoute(parseRoute("#/unread")), true);
});

test("threadOf: the kiln.io/thread key names the thread that owns a sandbox", () => {
  assert.equal(threadOf({ metadata: { [META_THREAD]: "thr_1", team: "ui" } }), "thr_1");
  assert.equal(threadOf({ metadata: { team: "ui" } }), undefined);
  assert.equal(threadOf({ metadata: { [META_THREAD]: "  " } }), undefined);
  assert.equal(threadOf({ metadata: undefined as unknown as Record<string, string> }), undefined);
});

test("runtimesOf: the runtimes of the enabled sandbox-runtime plugins, sorted", () => {
  const p = (id: string, status: string, provides: string[], provided?: Record<string, string[]>) =>
    ({ id, status, provides, provided } as unknown as Plugin);
  assert.deepEqual(runtimesOf([
    p("wasm", "enabled", ["sandbox-runtime"], { "sandbox-runtime": ["wasm"] }),
    p("bwrap", "enabled", ["sandbox-runtime"]),
    p("docker", "failed", ["sandbox-runtime"], { "sandbox-runtime": ["docker"] }),
    p("js", "disabled", ["sandbox-runtime", "toolset"]),
    p("calc", "enabled", ["toolset"], { toolset: ["calc.add"] }),
  ]), ["bwrap", "wasm"]);
  assert.deepEqual(runtimesOf(null), []);
});

test("runtimeChoices: the server's default, the enabled runtimes, and a chosen one that is not enabled, marked", () => {
  const values = (r: ReturnType<typeof runtimeChoices>) => r.choices.map((c) => `${c.value}=${c.label}`);
  let r = runtimeChoices("", ["js", "wasm"]);
  assert.deepEqual(values(r), ["=Server default", "js=js", "wasm=wasm"]);
  assert.equal(r.note, "");
  r = runtimeChoices("js", ["js", "wasm"]);
  assert.deepEqual(values(r), ["=Server default", "js=js", "wasm=wasm"]);
  assert.equal(r.note, "");
  r = runtimeChoices("bwrap", ["wasm"]);
  assert.deepEqual(values(r), ["=Server default", "wasm=wasm", "bwrap=bwrap (not enabled)"]);
  assert.match(r.note, /^bwrap is not enabled: sandboxes created without a runtime get the server's default/);
  // The enabled ones not known yet (or no plugins on the server): the
  // chosen one is shown as it is, with no claim about it.
  r = runtimeChoices("bwrap", undefined);
  assert.deepEqual(values(r), ["=Server default", "bwrap=bwrap"]);
  assert.equal(r.note, "");
  assert.deepEqual(values(runtimeChoices(undefined, undefined)), ["=Server default"]);
});
