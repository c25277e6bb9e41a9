import { test } from "node:test";
import assert from "node:assert/strict";
import { groupDigits, tokens } from "../src/format";

test("groupDigits: thousands separated by commas, whole and non-negative", () => {
  assert.equal(groupDigits(0), "0");
  assert.equal(groupDigits(999), "999");
  assert.equal(groupDigits(1000), "1,000");
  assert.equal(groupDigits(1234567), "1,234,567");
  assert.equal(groupDigits(12.6), "13");
  assert.equal(groupDigits(-5), "0");
  assert.equal(groupDigits(NaN), "0");
});

test("tokens: in and out, nothing when both are 0 or absent", () => {
  assert.equal(tokens({ input_tokens: 1234, output_tokens: 567 }), "1,234 in · 567 out tokens");
  assert.equal(tokens({ input_tokens: 0, output_tokens: 3 }), "0 in · 3 out tokens");
  assert.equal(tokens({ input_tokens: 12, output_tokens: 0 }), "12 in · 0 out tokens");
  assert.equal(tokens({ input_tokens: 0, output_tokens: 0 }), "");
  assert.equal(tokens(undefined), "");
  assert.equal(tokens(null), "");
  assert.equal(tokens({} as any), "", "an older server's run without the fields");
});
