import { test } from "node:test";
import assert from "node:assert/strict";
import { parsePairs, serverInput, type McpForm } from "../src/mcp";

test("parsePairs reads KEY=VALUE and Name: value lines and names a bad line", () => {
  assert.deepEqual(parsePairs("A=1\n\n B = x=y \r\n", "=", "Environment"), { pairs: { A: "1", B: " x=y " } });
  assert.deepEqual(parsePairs("Authorization: Bearer ${T}\nX-A:b", ":", "Headers"), { pairs: { Authorization: "Bearer ${T}", "X-A": "b" } });
  assert.deepEqual(parsePairs("A=1\nnovalue", "=", "Environment"), { error: "Environment, line 2: want KEY=VALUE" });
  assert.deepEqual(parsePairs("=x", "=", "Environment"), { error: "Environment, line 1: want KEY=VALUE" });
  assert.deepEqual(parsePairs("A: 1\nA: 2", ":", "Headers"), { error: "Headers, line 2: A is given twice" });
  assert.deepEqual(parsePairs("", "=", "Environment"), { pairs: {} });
});

const form = (f: Partial<McpForm>): McpForm => ({ id: "", transport: "stdio", command: "", args: "", env: "", cwd: "", url: "", headers: "", trust: false, disabled: false, timeout: "", ...f });

test("serverInput makes the body of a stdio or an HTTP server", () => {
  assert.deepEqual(serverInput(form({ id: " gh ", command: "npx ", args: "-y\n\n@mcp/server-github\n", env: "TOKEN=${GH}", cwd: "work", trust: true, url: "ignored" })),
    { input: { id: "gh", command: "npx", args: ["-y", "@mcp/server-github"], env: { TOKEN: "${GH}" }, cwd: "work", trust: "all" } });
  assert.deepEqual(serverInput(form({ id: "docs", transport: "sse", url: "https://h/mcp", headers: "A: b", command: "ignored", disabled: true })),
    { input: { id: "docs", type: "sse", url: "https://h/mcp", headers: { A: "b" }, disabled: true } });
  assert.deepEqual(serverInput(form({ id: "x", command: "c", env: "bad" })), { error: "Environment, line 1: want KEY=VALUE" });
});

test("serverInput takes a call timeout in seconds and sends milliseconds", () => {
  assert.deepEqual(serverInput(form({ id: "slow", command: "c", timeout: " 90 " })), { input: { id: "slow", command: "c", timeout: 90000 } });
  assert.deepEqual(serverInput(form({ id: "fast", command: "c", timeout: "0.5" })), { input: { id: "fast", command: "c", timeout: 500 } });
  for (const bad of ["0", "-1", "90s", "86401", "1e3"]) {
    assert.match(serverInput(form({ id: "x", command: "c", timeout: bad })).error ?? "", /^Call timeout: want seconds/, bad);
  }
});
