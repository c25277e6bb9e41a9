import { test } from "node:test";
import assert from "node:assert/strict";
import { href, parseRoute } from "../src/route";
import type { Message } from "../src/types";
import {
  attachmentId, attachmentURL, charCount, extLabel, filePath, forkable, formatBytes, isDataRootConflict, mediaParts,
  memoryName, normTheme, parseLimit, partURL, typeLabel,
} from "../src/workspace";

test("formatBytes: as the server says sizes (core.FormatBytes)", () => {
  assert.equal(formatBytes(0), "0 B");
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1023), "1023 B");
  assert.equal(formatBytes(1024), "1 KiB");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(25 << 20), "25 MiB");
  assert.equal(formatBytes(3 * 1024 ** 3), "3 GiB");
  assert.equal(formatBytes(-1), "0 B");
  assert.equal(formatBytes(NaN), "0 B");
});

test("charCount: code points, as the server counts the addendum", () => {
  assert.equal(charCount(""), 0);
  assert.equal(charCount("abc"), 3);
  assert.equal(charCount("é🙂"), 2, "an emoji is one character, not two UTF-16 units");
});

test("attachment URIs and URLs", () => {
  assert.equal(attachmentId("attachment://att_1"), "att_1");
  assert.equal(attachmentId("attachment://"), "");
  assert.equal(attachmentId("https://example.com/x"), "");
  assert.equal(attachmentId("attachment://a/../b"), "");
  assert.equal(attachmentId(undefined), "");
  assert.equal(attachmentURL("/api/v1", "att 1"), "/api/v1/attachments/att%201/content");
  assert.equal(partURL("/api/v1", { type: "image", uri: "attachment://att_1", mime_type: "image/png" }), "/api/v1/attachments/att_1/content");
  assert.equal(partURL("/api/v1", { type: "image", data: "AAAA", mime_type: "image/png" }), "data:image/png;base64,AAAA");
  assert.equal(partURL("/api/v1", { type: "image", data: "AAAA", mime_type: "image/png;x=<" }), "", "a strange type makes no data: URL");
  assert.equal(partURL("/api/v1", { type: "file", uri: "javascript:alert(1)" }), "");
});

test("mediaParts: the images and files, not the text parts", () => {
  assert.deepEqual(mediaParts({}), []);
  const parts = [{ type: "text", text: "hi" }, { type: "image", uri: "attachment://a" }, { type: "file", uri: "attachment://b" }];
  assert.deepEqual(mediaParts({ parts }).map((p) => p.uri), ["attachment://a", "attachment://b"]);
});

test("typeLabel: short names for a file chip", () => {
  assert.equal(typeLabel("text/plain"), "text");
  assert.equal(typeLabel("text/markdown"), "markdown");
  assert.equal(typeLabel("application/json"), "json");
  assert.equal(typeLabel("image/png"), "PNG image");
  assert.equal(typeLabel("text/plain; charset=utf-8"), "text");
  assert.equal(typeLabel(undefined), "file");
});

test("extLabel: a file icon's letters", () => {
  assert.equal(extLabel("notes.txt"), "TXT");
  assert.equal(extLabel("a.b.Json"), "JSON");
  assert.equal(extLabel("README"), "FILE");
  assert.equal(extLabel("x.markdown"), "FILE", "over 4 letters");
});

const msg = (index: number, role: string, extra: Partial<Message> = {}): Message => ({ index, role, ...extra });

test("forkable: completed assistant turns only, none while a run is active", () => {
  const ms = [
    msg(0, "user", { text: "go" }),
    msg(1, "assistant", { text: "calling", tool_calls: [{ id: "c1", name: "echo", args: {} }, { id: "c2", name: "echo", args: {} }] }),
    msg(2, "tool", { tool_call_id: "c1", text: "1" }),
    msg(3, "tool", { tool_call_id: "c2", text: "2" }),
    msg(4, "assistant", { text: "done" }),
    msg(5, "user", { text: "more" }),
    msg(6, "assistant", { text: "one more", tool_calls: [{ id: "c3", name: "append_file", args: {} }] }),
  ];
  assert.deepEqual([...forkable(ms, false)], [1, 4], "the turn whose call has no result yet is not complete");
  assert.deepEqual([...forkable(ms, true)], []);
  // A result before the call (a stray one) does not complete it.
  assert.deepEqual([...forkable([msg(0, "tool", { tool_call_id: "x" }), msg(1, "assistant", { tool_calls: [{ id: "x", name: "t", args: {} }] })], false)], []);
});

test("isDataRootConflict: the server's 409 about the data root, not other conflicts", () => {
  assert.ok(isDataRootConflict(409, "/data overlaps Kiln's data root /data (its database, plugins and memories); grant it only with acknowledge_data_root"));
  assert.ok(!isDataRootConflict(409, "folder /x is granted already as x"));
  assert.ok(!isDataRootConflict(400, "data root"));
});

test("memoryName: .md added, the server's pattern kept", () => {
  assert.equal(memoryName("notes"), "notes.md");
  assert.equal(memoryName(" notes.md "), "notes.md");
  assert.equal(memoryName("my.prefs"), "my.prefs.md");
  assert.equal(memoryName(""), undefined);
  assert.equal(memoryName("../x"), undefined);
  assert.equal(memoryName(".hidden"), undefined);
  assert.equal(memoryName("a b"), undefined);
});

test("parseLimit: empty is the default (0), whole numbers up to 10000", () => {
  assert.equal(parseLimit(""), 0);
  assert.equal(parseLimit(" 25 "), 25);
  assert.equal(parseLimit("10000"), 10000);
  assert.equal(parseLimit("10001"), undefined);
  assert.equal(parseLimit("-1"), undefined);
  assert.equal(parseLimit("1.5"), undefined);
  assert.equal(parseLimit("x"), undefined);
});

test("normTheme: unknown is system", () => {
  assert.equal(normTheme("dark"), "dark");
  assert.equal(normTheme("light"), "light");
  assert.equal(normTheme("system"), "system");
  assert.equal(normTheme("sepia"), "system");
  assert.equal(normTheme(null), "system");
});

test("filePath: a virtual file's path for the URL, slashes kept, segments escaped", () => {
  assert.equal(filePath("/notes/plan.md"), "notes/plan.md");
  assert.equal(filePath("/a b/c#d.txt"), "a%20b/c%23d.txt");
});

test("routes: Settings sections", () => {
  assert.deepEqual(parseRoute("#/settings"), { view: "settings" });
  assert.deepEqual(parseRoute("#/settings/files"), { view: "settings", section: "files" });
  assert.deepEqual(parseRoute("#/settings/memories"), { view: "settings", section: "memories" });
  assert.deepEqual(parseRoute("#/settings/nope"), { view: "settings" });
  assert.deepEqual(parseRoute("#/settings/skills"), { view: "settings", section: "skills" });
  assert.deepEqual(parseRoute("#/settings/mcp"), { view: "settings", section: "mcp" });
  assert.equal(href({ view: "settings", section: "general" }), "#/settings/general");
  assert.equal(href({ view: "settings" }), "#/settings");
  assert.equal(href({ view: "thread", id: "thr 1" }), "#/thread/thr%201");
  assert.equal(href({ view: "all" }), "#/all");
});
