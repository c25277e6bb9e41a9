import { test } from "node:test";
import assert from "node:assert/strict";
import { envFor, envRef, envRefName, groupDigits, modelGroups, settingLabel, settingValue, tokens } from "../src/format";
import type { ModelList } from "../src/types";

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

test("settingValue: a secret says only whether it is set and where from", () => {
  assert.equal(settingValue({ name: "api_key", secret: true, value: "set", source: "env OPENAI_API_KEY" }), "set (env OPENAI_API_KEY)");
  assert.equal(settingValue({ name: "api_key", secret: true, value: "set", source: "config (env ref ${K})" }), "set (config (env ref ${K}))");
  assert.equal(settingValue({ name: "api_key", secret: true, value: "set" }), "set");
  assert.equal(settingValue({ name: "api_key", secret: true, value: "set (credentials file)", source: "credentials file" }), "set (credentials file)");
  assert.equal(settingValue({ name: "api_key", secret: true, value: "not set" }), "not set");
  assert.equal(settingValue({ name: "api_key", secret: true, value: "" }), "not set");
  // Anything else a server might send for a secret is never shown.
  assert.equal(settingValue({ name: "api_key", secret: true, value: "sk-live-123", source: "credentials file" }), "set (credentials file)");
  assert.equal(settingValue({ name: "base_url", secret: false, value: "https://x.test/v1", source: "default" }), "https://x.test/v1");
  assert.equal(settingValue({ name: "region", secret: false, value: "" }), "not set");
});

test("settingLabel", () => {
  assert.equal(settingLabel("api_key"), "API key");
  assert.equal(settingLabel("base_url"), "Base URL");
  assert.equal(settingLabel("max_retries"), "Max retries");
});

test("environment references: typed names, stored refs, sources", () => {
  assert.equal(envRef("OPENAI_API_KEY"), "${OPENAI_API_KEY}");
  assert.equal(envRef("  $MY_KEY "), "${MY_KEY}");
  assert.equal(envRef("${MY_KEY}"), "${MY_KEY}");
  assert.equal(envRef("sk-abc123"), undefined);
  assert.equal(envRef("1ABC"), undefined);
  assert.equal(envRef(""), undefined);
  assert.equal(envRefName("config (env ref ${OPENAI_API_KEY})"), "OPENAI_API_KEY");
  assert.equal(envRefName("env OPENAI_API_KEY"), "");
  assert.equal(envRefName(undefined), "");
  assert.equal(envFor("api_key", ["OPENAI_BASE_URL", "OPENAI_API_KEY"]), "OPENAI_API_KEY");
  assert.equal(envFor("secret_access_key", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]), "AWS_SECRET_ACCESS_KEY");
  assert.equal(envFor("api_key", null), "");
});

const labels = (gs: ReturnType<typeof modelGroups>) => gs.map((g) => [g.label, g.options.map((o) => o.label)]);

test("modelGroups without a model list: the default, demo and scripted, as before", () => {
  assert.deepEqual(labels(modelGroups(undefined, "scripted", "scripted")), [["", ["scripted (default)", "demo"]]]);
  assert.deepEqual(labels(modelGroups(null, "demo", "openai:gpt-4o")), [["", ["openai:gpt-4o", "demo (default)", "scripted"]]]);
});

test("modelGroups with a model list: built-ins first, then each provider's models under its name", () => {
  const list: ModelList = {
    default: "openai:gpt-4o",
    providers: [
      { id: "openai", name: "OpenAI", state: "ready", settings: [], env: [] },
      { id: "anthropic", name: "Anthropic", state: "not_configured", settings: [], env: [] },
      { id: "ollama", name: "Ollama", state: "ready", settings: [], env: [] },
    ],
    models: [
      { ref: "ollama:llama3", provider: "ollama", id: "llama3" },
      { ref: "openai:gpt-4o", provider: "openai", id: "gpt-4o", name: "GPT-4o" },
      { ref: "openai:gpt-4o-mini", provider: "openai", id: "gpt-4o-mini", name: "gpt-4o-mini" },
      { ref: "openai:gpt-4o", provider: "openai", id: "gpt-4o" },
    ],
  };
  const gs = modelGroups(list, list.default, "openai:gpt-4o");
  assert.deepEqual(labels(gs), [
    ["Built-in", ["demo", "scripted"]],
    ["OpenAI", ["GPT-4o (openai:gpt-4o) (default)", "openai:gpt-4o-mini"]],
    ["Ollama", ["ollama:llama3"]],
  ]);
  assert.deepEqual(gs[1].options.map((o) => o.value), ["openai:gpt-4o", "openai:gpt-4o-mini"]);
  // A default or a thread's model that no provider lists stays choosable, outside the groups.
  assert.deepEqual(labels(modelGroups({ ...list, models: [] }, "anthropic:claude", "gemini:x")),
    [["", ["gemini:x", "anthropic:claude (default)"]], ["Built-in", ["demo", "scripted"]]]);
  // The server lists the built-in models as provider "builtin".
  const withBuiltins: ModelList = { ...list, models: [{ ref: "demo", provider: "builtin", id: "demo" }, { ref: "scripted", provider: "builtin", id: "scripted" }, ...list.models!] };
  assert.deepEqual(labels(modelGroups(withBuiltins, "scripted", "scripted")), [
    ["Built-in", ["demo", "scripted (default)"]],
    ["OpenAI", ["GPT-4o (openai:gpt-4o)", "openai:gpt-4o-mini"]],
    ["Ollama", ["ollama:llama3"]],
  ]);
  // An unknown provider id is its own group, named by its id; an empty list still has the built-ins.
  assert.deepEqual(labels(modelGroups({ default: "demo", providers: null, models: [{ ref: "x:y", provider: "x", id: "y" }] }, "demo", "demo")),
    [["Built-in", ["demo (default)", "scripted"]], ["x", ["x:y"]]]);
});
