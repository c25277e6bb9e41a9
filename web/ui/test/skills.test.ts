import { test } from "node:test";
import assert from "node:assert/strict";
import { composeSkill, layerLabel, skillNameOK, skillTemplate, yamlScalar } from "../src/skills";

test("yamlScalar quotes what plain YAML would misread", () => {
  assert.equal(yamlScalar("kiln-guide"), "kiln-guide");
  assert.equal(yamlScalar("Does: things"), '"Does: things"');
  assert.equal(yamlScalar("yes"), '"yes"');
  assert.equal(yamlScalar("1.5"), '"1.5"');
  assert.equal(yamlScalar(""), '""');
  assert.equal(yamlScalar('say "hi"'), '"say \\"hi\\""');
});

test("composeSkill writes the frontmatter and the body", () => {
  assert.equal(composeSkill({ name: "a", description: "Does a.", tools: ["read_file", "ls"], model: "openai:gpt", body: "# A\nbody" }),
    "---\nname: a\ndescription: Does a.\ntools: read_file ls\nmodel: \"openai:gpt\"\n---\n# A\nbody\n");
  assert.equal(composeSkill({ name: "b", description: "B" }), "---\nname: b\ndescription: B\n---\n");
  assert.match(skillTemplate("x"), /^---\nname: x\n/);
});

test("layerLabel and skillNameOK", () => {
  assert.equal(layerLabel({ origin: "builtin" }), "built-in");
  assert.equal(layerLabel({ origin: "plugin", source: "util" }), "plugin util");
  assert.equal(layerLabel({ origin: "custom" }), "custom");
  assert.ok(skillNameOK("my-skill2"));
  assert.ok(!skillNameOK("My skill") && !skillNameOK("a--b") && !skillNameOK("-a") && !skillNameOK(""));
});
