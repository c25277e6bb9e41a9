// Formatting helpers: token counts, provider settings and the model
// choice. Pure functions, no DOM, unit tested.
import type { ModelList, ProviderSetting, Usage } from "./types";

/** 1234567 -> "1,234,567" (the same in every locale, like the rest of the UI's English). */
export function groupDigits(n: number): string {
  const v = Math.max(0, Math.round(Number.isFinite(n) ? n : 0));
  return String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** "1,234 in · 567 out tokens", or "" when there is no usage to show (absent, or both 0). */
export function tokens(u: Usage | null | undefined): string {
  const i = u?.input_tokens ?? 0, o = u?.output_tokens ?? 0;
  if (!(i > 0) && !(o > 0)) return "";
  return `${groupDigits(i)} in · ${groupDigits(o)} out tokens`;
}

const LABELS: Record<string, string> = {
  api_key: "API key", base_url: "Base URL", api: "API", region: "Region", profile: "Profile",
  access_key_id: "Access key ID", secret_access_key: "Secret access key", session_token: "Session token",
  organization: "Organization", project: "Project", host: "Host",
};

/** A setting's name for people: "base_url" -> "Base URL", "foo_bar" -> "Foo bar". */
export function settingLabel(name: string): string {
  if (LABELS[name]) return LABELS[name];
  const t = name.replace(/[_.-]+/g, " ").trim();
  return t ? t[0].toUpperCase() + t.slice(1) : name;
}

/**
 * What the page shows for a setting's value. A secret shows only whether
 * it is set and where from, "set (env OPENAI_API_KEY)" or "not set": if
 * the server ever sent anything else for a secret it is not shown.
 */
export function settingValue(s: ProviderSetting): string {
  if (s.secret) {
    if (s.value === "not set" || !s.value) return "not set";
    if (/^set \(.*\)$/.test(s.value)) return s.value;
    return s.source ? `set (${s.source})` : "set";
  }
  return s.value || "not set";
}

/** The variable of an environment reference "${NAME}" (as a source says it, "config (env ref ${NAME})"), or "". */
export function envRefName(text: string | undefined): string {
  const m = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/.exec(text ?? "");
  return m ? m[1] : "";
}

/**
 * The value to store for an environment variable name as typed: "NAME",
 * "$NAME" or "${NAME}" -> "${NAME}"; undefined when it is not a name.
 */
export function envRef(typed: string): string | undefined {
  let t = typed.trim();
  const m = /^\$\{(.*)\}$/.exec(t);
  if (m) t = m[1];
  else if (t.startsWith("$")) t = t.slice(1);
  return /^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(t) ? "${" + t + "}" : undefined;
}

/** The environment variable a provider most likely reads for a setting: OPENAI_API_KEY for api_key. */
export function envFor(setting: string, env: string[] | null | undefined): string {
  const list = env ?? [];
  const want = setting.toUpperCase();
  return list.find((e) => e === want || e.endsWith("_" + want)) ?? "";
}

export interface ModelOption { value: string; label: string }
/** A group of the model choice; label "" is the options outside any group. */
export interface ModelGroup { label: string; options: ModelOption[] }

export const BUILTIN_MODELS = ["demo", "scripted"];

/**
 * The model choice of the composers. Without a model list (an older server
 * without GET /models, or before it answers): the default model, demo and
 * scripted, as before. With one: the default and the current value when no
 * group has them, the built-in models (provider "builtin", and demo and
 * scripted in any case), then each provider's models under its name, in
 * the order of the providers.
 */
export function modelGroups(list: ModelList | null | undefined, def: string | undefined, value: string): ModelGroup[] {
  const mark = (ref: string, label = ref) => ({ value: ref, label: ref === def ? `${label} (default)` : label });
  if (!list) {
    const refs = [...new Set([value, def, ...BUILTIN_MODELS].filter(Boolean) as string[])];
    return [{ label: "", options: refs.map((r) => mark(r)) }];
  }
  const models = list.models ?? [];
  const seen = new Set<string>();
  const builtin: ModelOption[] = [];
  const byProvider = new Map<string, ModelOption[]>();
  for (const m of models) {
    if (!m.ref || seen.has(m.ref)) continue;
    seen.add(m.ref);
    const o = mark(m.ref, m.name && m.name !== m.ref && m.name !== m.id ? `${m.name} (${m.ref})` : m.ref);
    if (m.provider === "builtin") { builtin.push(o); continue; }
    if (!byProvider.has(m.provider)) byProvider.set(m.provider, []);
    byProvider.get(m.provider)!.push(o);
  }
  for (const r of BUILTIN_MODELS) if (!seen.has(r)) { seen.add(r); builtin.push(mark(r)); }
  const loose = [...new Set([value, def].filter((r) => r && !seen.has(r)) as string[])];
  const names = new Map((list.providers ?? []).map((p) => [p.id, p.name || p.id]));
  const order = [...names.keys(), ...byProvider.keys()].filter((id, i, a) => a.indexOf(id) === i && byProvider.has(id));
  const groups: ModelGroup[] = [];
  if (loose.length) groups.push({ label: "", options: loose.map((r) => mark(r)) });
  if (builtin.length) groups.push({ label: "Built-in", options: builtin });
  for (const id of order) groups.push({ label: names.get(id) ?? id, options: byProvider.get(id)! });
  return groups;
}
