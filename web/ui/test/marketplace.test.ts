import { test } from "node:test";
import assert from "node:assert/strict";
import { ApiError } from "../src/api";
import {
  LineBuffer, changeLines, changeSummary, compareVersions, consentLabel, formatBytes, installKind, keyLabel, logStatus,
  marketplaceInput, parsePreviewLine, progressFraction, progressText, quarantineText, readPreview, signatureStatus,
  type MarketplaceForm,
} from "../src/marketplace";
import type { MarketplacePreview, Progress } from "../src/types";

test("LineBuffer cuts a stream into lines across chunks, dropping blank lines and \\r", () => {
  const b = new LineBuffer();
  assert.deepEqual(b.push('{"a":'), []);
  assert.deepEqual(b.push('1}\n{"b":2}\r\n\n{"c"'), ['{"a":1}', '{"b":2}']);
  assert.deepEqual(b.push(":3}"), []);
  assert.deepEqual(b.end(), ['{"c":3}'], "the last line without a newline");
  assert.deepEqual(b.end(), [], "nothing twice");
  assert.deepEqual(new LineBuffer().push("\n\n  \n"), []);
});

test("parsePreviewLine reads progress, preview and error lines and names anything else", () => {
  assert.deepEqual(parsePreviewLine('{"progress":{"done":5,"total":10}}'), { progress: { done: 5, total: 10 } });
  assert.deepEqual(parsePreviewLine('{"progress":{"done":5}}'), { progress: { done: 5, total: 0 } });
  assert.deepEqual(parsePreviewLine('{"preview":{"id":"echo"}}'), { preview: { id: "echo" } });
  assert.deepEqual(parsePreviewLine('{"error":{"code":"invalid","message":"archive sha256 mismatch"}}'), { error: { code: "invalid", message: "archive sha256 mismatch" } });
  assert.deepEqual(parsePreviewLine('{"error":{}}'), { error: { code: "error", message: "the preview failed" } });
  assert.throws(() => parsePreviewLine("<html>"), /not JSON: <html>/);
  assert.throws(() => parsePreviewLine('{"other":1}'), /does not know: \{"other":1\}/);
  assert.throws(() => parsePreviewLine("null"), /does not know/);
  assert.throws(() => parsePreviewLine('{"progress":{"done":"5"}}'), /does not know/);
});

/** A byte stream that yields the given chunks (strings encoded, or raw bytes). */
function stream(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) { for (const x of chunks) c.enqueue(typeof x === "string" ? enc.encode(x) : x); c.close(); },
  });
}

test("readPreview reports progress and resolves with the preview, also split mid-line and mid-character", async () => {
  const seen: Progress[] = [];
  // "é" is two bytes in UTF-8; the chunk boundary falls between them.
  const bytes = new TextEncoder().encode('{"preview":{"id":"echo","description":"caf\u00e9"}}\n');
  const at = bytes.indexOf(0xc3) + 1;
  const pv = await readPreview(stream(['{"progress":{"done":0,"total":2048}}\n{"progress":', '{"done":1024,"total":2048}}\n', bytes.slice(0, at), bytes.slice(at)]), (p) => seen.push(p));
  assert.deepEqual(pv, { id: "echo", description: "café" } as unknown as MarketplacePreview);
  assert.deepEqual(seen, [{ done: 0, total: 2048 }, { done: 1024, total: 2048 }]);
  // The last line needs no newline.
  assert.equal((await readPreview(stream(['{"preview":{"id":"x"}}']), () => {})).id, "x");
});

test("readPreview rejects with the server's error, or when the stream ends first", async () => {
  const seen: Progress[] = [];
  await assert.rejects(readPreview(stream(['{"progress":{"done":1,"total":9}}\n{"error":{"code":"invalid","message":"echo 1.1.0: archive sha256 mismatch: refused"}}\n']), (p) => seen.push(p)),
    (e: unknown) => e instanceof ApiError && e.code === "invalid" && e.message === "echo 1.1.0: archive sha256 mismatch: refused");
  assert.deepEqual(seen, [{ done: 1, total: 9 }]);
  await assert.rejects(readPreview(stream(['{"progress":{"done":1,"total":9}}\n']), () => {}), (e: unknown) => e instanceof ApiError && e.code === "incomplete");
  await assert.rejects(readPreview(stream([]), () => {}), (e: unknown) => e instanceof ApiError && e.code === "incomplete");
  await assert.rejects(readPreview(stream(["garbage\n"]), () => {}), /not JSON: garbage/);
});

test("compareVersions orders semantic versions as semver does", () => {
  const sorted = ["0.9.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0", "2.0.0"];
  for (let i = 0; i < sorted.length; i++) {
    for (let j = 0; j < sorted.length; j++) {
      const c = compareVersions(sorted[i], sorted[j]);
      assert.equal(Math.sign(c), Math.sign(i - j), `${sorted[i]} vs ${sorted[j]}: ${c}`);
    }
  }
  assert.equal(compareVersions("1.0.0+build.1", "1.0.0+build.2"), 0, "build metadata is ignored");
  assert.equal(compareVersions("v1.2.3", "1.2.3"), 0);
  assert.ok(compareVersions("junk", "0.0.1") < 0 && compareVersions("0.0.1", "junk") > 0, "not a version sorts first");
  assert.equal(compareVersions("b", "a"), 1);
});

test("formatBytes, progressText and progressFraction", () => {
  assert.equal(formatBytes(0), "0 B");
  assert.equal(formatBytes(-1), "0 B");
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.5 KB");
  assert.equal(formatBytes(20 * 1024 * 1024), "20 MB");
  assert.equal(formatBytes(3 * 1024 ** 4 * 1024), "3072 TB");
  assert.equal(progressText({ done: 1536, total: 3072 }), "1.5 KB of 3.0 KB (50%)");
  assert.equal(progressText({ done: 3071, total: 3072 }), "3.0 KB of 3.0 KB (99%)", "never 100% before the end");
  assert.equal(progressText({ done: 4096, total: 0 }), "4.0 KB downloaded", "an unknown total");
  assert.equal(progressFraction({ done: 1, total: 4 }), 0.25);
  assert.equal(progressFraction({ done: 9, total: 4 }), 1);
  assert.equal(progressFraction({ done: 9, total: 0 }), undefined);
  assert.equal(progressFraction(undefined), undefined);
});

test("signatureStatus, logStatus and keyLabel say what was verified", () => {
  assert.equal(signatureStatus({ signed: true }), "signed by a trusted key");
  assert.match(signatureStatus({ signed: false }), /^not signed/);
  assert.equal(logStatus({ log_index: 4 }, { tree_size: 5 }), "index log entry 4 of tree 5");
  assert.equal(logStatus({ log_index: 0 }, { tree_size: 1 }), "index log entry 0 of tree 1");
  assert.equal(logStatus({ log_index: 2 }, undefined), "index log entry 2");
  assert.equal(logStatus({ log_index: -1 }, { tree_size: 0 }), "not in a transparency log");
  assert.equal(keyLabel("acme+1a2b3c4d+AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="), "acme+1a2b3c4d");
  assert.equal(keyLabel("odd"), "odd");
});

test("quarantineText writes a Go duration as people do", () => {
  assert.equal(quarantineText("72h0m0s"), "72h");
  assert.equal(quarantineText("1h30m0s"), "1h30m");
  assert.equal(quarantineText("1h0m30s"), "1h0m30s");
  assert.equal(quarantineText("30m0s"), "30m");
  assert.equal(quarantineText("45s"), "45s");
  assert.equal(quarantineText("0s"), "none");
  assert.equal(quarantineText(""), "none");
  assert.equal(quarantineText(undefined), "none");
});

test("changeLines and changeSummary list an upgrade's files", () => {
  const c = { added: ["skills/b/SKILL.md", "skills/a/SKILL.md"], removed: ["old.txt"], changed: ["kiln-plugin.json"], summary: "" };
  assert.deepEqual(changeLines(c), [
    { kind: "added", path: "skills/a/SKILL.md" }, { kind: "added", path: "skills/b/SKILL.md" },
    { kind: "removed", path: "old.txt" }, { kind: "changed", path: "kiln-plugin.json" },
  ]);
  assert.deepEqual(c.added, ["skills/b/SKILL.md", "skills/a/SKILL.md"], "the input is not sorted in place");
  assert.equal(changeSummary(c), "2 files added, 1 removed, 1 changed");
  assert.equal(changeSummary({ changed: ["a"] }), "1 file changed");
  assert.equal(changeSummary({ ...c, summary: "4 files: 2 added, 1 removed, 1 changed" }), "4 files: 2 added, 1 removed, 1 changed", "the server's words first");
  assert.equal(changeSummary({ added: null, removed: [], changed: null }), "no files changed");
  assert.equal(changeSummary(undefined), "no files changed");
  assert.deepEqual(changeLines(undefined), []);
});

test("installKind and consentLabel: what the button does and whether it gives consent", () => {
  const pv = (p: Partial<MarketplacePreview>) => ({ version: "1.1.0", installed: "", needs_consent: true, permissions: [], added: [], ...p });
  assert.equal(installKind(pv({})), "install");
  assert.equal(installKind(pv({ installed: "1.0.0" })), "upgrade");
  assert.equal(installKind(pv({ installed: "1.2.0" })), "downgrade");
  assert.equal(installKind(pv({ installed: "1.1.0" })), "reinstall");
  assert.equal(installKind(pv({ version: "1.10.0", installed: "1.9.0" })), "upgrade", "numerically, not as text");
  assert.equal(installKind(pv({ version: "1.1.0", installed: "1.1.0-rc.1", downgrade: true })), "downgrade", "the server's word first");
  assert.equal(consentLabel(pv({ permissions: ["read environment variable TZ"] })), "Allow and install");
  assert.equal(consentLabel(pv({})), "Install", "nothing asked for");
  assert.equal(consentLabel(pv({ installed: "1.0.0", needs_consent: false, permissions: ["read environment variable TZ"] })), "Upgrade", "nothing added: no new consent");
  assert.equal(consentLabel(pv({ installed: "1.0.0", added: ["connect to api.example.com"], permissions: ["connect to api.example.com"] })), "Allow and upgrade");
  assert.equal(consentLabel(pv({ installed: "2.0.0", needs_consent: false })), "Downgrade");
});

test("marketplaceInput makes the POST /marketplaces body or says what is missing", () => {
  const form = (f: Partial<MarketplaceForm>): MarketplaceForm => ({ name: "", url: "", keys: "", quarantine: "", kind: "kiln", trust: false, ...f });
  const key = "acme+1a2b3c4d+AQID";
  assert.deepEqual(marketplaceInput(form({ name: " acme ", url: " https://m.example/acme/ ", keys: `${key}\n\n other+00000000+BBBB ${key}\n`, quarantine: " 72h " })),
    { input: { name: "acme", url: "https://m.example/acme/", keys: [key, "other+00000000+BBBB"], quarantine: "72h" } });
  assert.deepEqual(marketplaceInput(form({ name: "acme", url: "/srv/acme", keys: key })), { input: { name: "acme", url: "/srv/acme", keys: [key] } });
  assert.match(marketplaceInput(form({ url: "x", keys: key })).error ?? "", /^Name:/);
  assert.match(marketplaceInput(form({ name: "a", keys: key })).error ?? "", /^URL:/);
  assert.match(marketplaceInput(form({ name: "a", url: "x", keys: "  \n" })).error ?? "", /^Keys:/);
  assert.match(marketplaceInput(form({ name: "cc", url: "x", kind: "claude" })).error ?? "", /not signed/);
  assert.deepEqual(marketplaceInput(form({ name: "cc", url: "https://github.com/o/r", kind: "claude", trust: true, keys: key })),
    { input: { name: "cc", url: "https://github.com/o/r", kind: "claude", trust_unsigned: true } }, "an unsigned source takes no keys");
});
