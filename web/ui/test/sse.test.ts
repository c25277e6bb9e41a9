import { test } from "node:test";
import assert from "node:assert/strict";
import { backoffDelay, EventStream, SSEParser, type SSEMessage } from "../src/sse";

test("parser: fields, multi-line data, comments, ids, retry", () => {
  const p = new SSEParser();
  const out = p.feed("retry: 2000\n\nevent: ready\ndata: {\"last_seq\":41}\n\n: ping\n\nid: 42\nevent: run.started\ndata: line1\ndata: line2\n\nevent: message.delta\ndata: {\"text\":\"hi\"}\n\n");
  assert.equal(p.retry, 2000);
  assert.deepEqual(out, [
    { event: "ready", data: "{\"last_seq\":41}" },
    { id: "42", event: "run.started", data: "line1\nline2" },
    { event: "message.delta", data: "{\"text\":\"hi\"}" },
  ]);
});

test("parser: CRLF and CR line endings, split anywhere", () => {
  const src = "id: 1\r\nevent: a\r\ndata: x\r\n\r\nid: 2\revent: b\rdata:y\r\rdata: no-space\n\n";
  for (let cut = 0; cut <= src.length; cut++) {
    const p = new SSEParser();
    const out = [...p.feed(src.slice(0, cut)), ...p.feed(src.slice(cut))];
    assert.deepEqual(out, [{ id: "1", event: "a", data: "x" }, { id: "2", event: "b", data: "y" }, { event: "message", data: "no-space" }], `cut at ${cut}`);
  }
  // Byte by byte
  const p = new SSEParser();
  const out: SSEMessage[] = [];
  for (const ch of src) out.push(...p.feed(ch));
  assert.equal(out.length, 3);
});

test("parser: a message without data is not dispatched; an incomplete one waits", () => {
  const p = new SSEParser();
  assert.deepEqual(p.feed("event: x\n\nid: 3\n"), []);
  assert.deepEqual(p.feed("data: z"), []);
  assert.deepEqual(p.feed("\n\n"), [{ id: "3", event: "message", data: "z" }]);
});

test("backoff grows exponentially up to the max, with jitter", () => {
  const mid = () => 1;
  assert.equal(backoffDelay(1, 500, 10000, mid), 500);
  assert.equal(backoffDelay(2, 500, 10000, mid), 1000);
  assert.equal(backoffDelay(3, 500, 10000, mid), 2000);
  assert.equal(backoffDelay(10, 500, 10000, mid), 10000);
  assert.equal(backoffDelay(1, 500, 10000, () => 0), 250);
});

/** A fake fetch: each call serves the next scripted stream and records its headers. */
function fakeFetch(streams: (string[] | number | Error)[]) {
  const calls: Record<string, string>[] = [];
  const f = async (_url: string, init: any) => {
    calls.push({ ...(init.headers ?? {}) });
    const next = streams.shift();
    if (next === undefined) { // hang until aborted
      return new Promise<Response>((_, rej) => init.signal.addEventListener("abort", () => rej(new Error("aborted"))));
    }
    if (next instanceof Error) throw next;
    if (typeof next === "number") return new Response("{}", { status: next });
    const enc = new TextEncoder();
    const body = new ReadableStream({ start(c) { for (const chunk of next) c.enqueue(enc.encode(chunk)); c.close(); } });
    return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
  return { f: f as unknown as typeof fetch, calls };
}

const frame = (seq: number, type = "message") => `id: ${seq}\nevent: ${type}\ndata: {"seq":${seq},"type":"${type}"}\n\n`;

test("reconnect resumes with Last-Event-ID, backs off, and never delivers twice", async () => {
  const { f, calls } = fakeFetch([
    ["retry: 2000\n\nevent: ready\ndata: {\"last_seq\":10}\n\n", frame(11), frame(12).slice(0, 9)], // cut mid-frame
    new Error("connection refused"),
    503,
    // The server replays from 11 although asked for after 11 (a duplicate), then new ones.
    ["event: ready\ndata: {\"last_seq\":11}\n\n", frame(11), frame(12), "event: message.delta\ndata: {\"seq\":0}\n\n", frame(13)],
  ]);
  const got: number[] = [];
  const eph: string[] = [];
  const delays: number[] = [];
  const states: string[] = [];
  let es!: EventStream;
  es = new EventStream({
    url: "/events", fetch: f, headers: () => ({ Authorization: "Bearer t" }),
    onEvent: (_m, seq) => { got.push(seq); if (seq === 13) es.close(); },
    onEphemeral: (m) => eph.push(m.event),
    onState: (s) => states.push(s),
    sleep: async (ms) => { delays.push(ms); },
    random: () => 1,
  });
  await es.start();
  assert.deepEqual(got, [11, 12, 13]);
  assert.deepEqual(eph, ["message.delta"]);
  assert.equal(calls[0]["Last-Event-ID"], undefined, "a fresh global stream starts live");
  assert.equal(calls[1]["Last-Event-ID"], "11", "resumes after the last durable id");
  assert.equal(calls[3]["Last-Event-ID"], "11");
  assert.equal(calls[3].Authorization, "Bearer t");
  assert.deepEqual(delays, [500, 1000, 2000], "backoff doubles while the server stays down");
  assert.ok(states.includes("reconnecting") && states.includes("open"));
});

test("the ready event sets the resume point when none is known", async () => {
  const { f, calls } = fakeFetch([["event: ready\ndata: {\"last_seq\":41}\n\n"], ["event: ready\ndata: {\"last_seq\":41}\n\n", frame(42)]]);
  let es!: EventStream;
  es = new EventStream({ url: "/e", fetch: f, onEvent: () => es.close(), sleep: async () => {} });
  await es.start();
  assert.equal(calls[1]["Last-Event-ID"], "41");
});

test("401 stops the stream and reports unauthorized", async () => {
  const { f, calls } = fakeFetch([401]);
  const states: string[] = [];
  const es = new EventStream({ url: "/e", fetch: f, onEvent: () => {}, onState: (s) => states.push(s), sleep: async () => {} });
  await es.start();
  assert.equal(calls.length, 1);
  assert.deepEqual(states, ["unauthorized"]);
});
