// Pure helpers of the Skills panel: composing a SKILL.md from what the API
// shows of a skill, and the words for where a skill comes from.
import type { Skill, SkillLayer } from "./types";

/** A YAML scalar on one line: plain when that is safe, else double-quoted (JSON is valid YAML). */
export function yamlScalar(s: string): string {
  if (s !== "" && /^[A-Za-z0-9_][^:#\n"'\\]*$/.test(s) && s.trim() === s && !/^(true|false|null|yes|no|on|off|~)$/i.test(s) && !/^[-+.0-9]/.test(s)) return s;
  return JSON.stringify(s);
}

/** A SKILL.md rebuilt from a skill's name, description, tools and model, and its body. */
export function composeSkill(k: Pick<Skill, "name" | "description" | "tools" | "model" | "body">): string {
  const lines = ["---", `name: ${yamlScalar(k.name)}`, `description: ${yamlScalar(k.description ?? "")}`];
  if (k.tools?.length) lines.push(`tools: ${k.tools.join(" ")}`);
  if (k.model) lines.push(`model: ${yamlScalar(k.model)}`);
  lines.push("---");
  const body = (k.body ?? "").replace(/^\n+/, "");
  return lines.join("\n") + "\n" + body + (body.endsWith("\n") || !body ? "" : "\n");
}

/** The starting text of a new skill. */
export const skillTemplate = (name: string) => composeSkill({ name: name || "my-skill", description: "What this skill does and when to use it.", body: "# Instructions\n\n" });

/** A layer in words: "custom", "built-in", "plugin util". */
export function layerLabel(l: SkillLayer): string {
  if (l.origin === "builtin") return "built-in";
  if (l.origin === "plugin") return l.source ? `plugin ${l.source}` : "plugin";
  return l.origin;
}

/** A skill's name as the server takes it: lowercase letters, digits and single dashes. */
export const skillNameOK = (n: string) => /^[a-z0-9]+(-[a-z0-9]+)*$/.test(n) && n.length <= 64;
