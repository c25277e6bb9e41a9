import { test } from "node:test";
import assert from "node:assert/strict";
import { parseInline, parseMarkdown, safeHref } from "../src/markdown";

test("blocks: paragraphs, code fences, lists, headings", () => {
  const b = parseMarkdown("# Title\n\nSome **bold** and *em*.\n\n```js\nlet a = '<b>';\n```\n- one\n- two\n\n1. first\n2. second");
  assert.deepEqual(b.map((x) => x.t), ["h", "p", "pre", "ul", "ol"]);
  assert.equal((b[2] as any).v, "let a = '<b>';");
  assert.equal((b[3] as any).items.length, 2);
});

test("inline: code, strong, em, links", () => {
  assert.deepEqual(parseInline("a `x<y>` **b** _c_"), [
    { t: "text", v: "a " }, { t: "code", v: "x<y>" }, { t: "text", v: " " }, { t: "strong", c: [{ t: "text", v: "b" }] }, { t: "text", v: " " }, { t: "em", c: [{ t: "text", v: "c" }] },
  ]);
  assert.deepEqual(parseInline("[site](https://example.com)"), [{ t: "link", href: "https://example.com", c: [{ t: "text", v: "site" }] }]);
});

test("unsafe links become text; raw HTML stays text", () => {
  assert.deepEqual(parseInline("[x](javascript:alert(1))"), [{ t: "text", v: "x" }, { t: "text", v: ")" }]);
  assert.equal(safeHref("data:text/html,hi"), undefined);
  assert.equal(safeHref("mailto:a@b.c"), "mailto:a@b.c");
  const p = parseMarkdown("<img src=x onerror=alert(1)>");
  assert.deepEqual(p, [{ t: "p", c: [{ t: "text", v: "<img src=x onerror=alert(1)>" }] }]);
});
