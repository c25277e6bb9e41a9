// The Triggers page's logic: the calls of /api/v1/triggers, the form of
// a trigger and the create or patch body it makes, and how schedules,
// fire times and occurrences read. Pure functions, no DOM, unit tested.
import { api } from "./api";
import type { Occurrence, OccurrencePage, ThreadTrigger, Trigger } from "./types";

const path = (id: string, rest = "") => `/triggers/${encodeURIComponent(id)}${rest}`;

export async function listTriggers(): Promise<Trigger[]> {
  return (await api<{ triggers: Trigger[] | null }>("GET", "/triggers")).triggers ?? [];
}
export const getTrigger = (id: string) => api<Trigger>("GET", path(id));
export const createTrigger = (body: Record<string, unknown>) => api<Trigger>("POST", "/triggers", body);
export const updateTrigger = (id: string, patch: Record<string, unknown>) => api<Trigger>("PATCH", path(id), patch);
export const deleteTrigger = (id: string) => api<void>("DELETE", path(id));
/** Fires a trigger now, by hand (its overlap policy applies): the occurrence recorded. */
export const fireTrigger = (id: string) => api<Occurrence>("POST", path(id, "/run"));
/** A webhook trigger's new secret, in this answer only. */
export const rotateSecret = (id: string) => api<Trigger>("POST", path(id, "/rotate-secret"));

/** One page of a trigger's history, newest first; before continues from a page's next_before. */
export async function listOccurrences(id: string, limit: number, before?: string): Promise<OccurrencePage> {
  const q = new URLSearchParams({ limit: String(limit) });
  if (before) q.set("before", before);
  const page = await api<OccurrencePage>("GET", path(id, `/occurrences?${q}`));
  return { ...page, occurrences: page.occurrences ?? [] };
}

/** The next n fire times of an expression in a zone ("" is UTC), before any trigger has it; a bad one rejects with the reason (400). */
export async function previewSchedule(cron: string, timezone: string, n: number): Promise<string[]> {
  const q = new URLSearchParams({ cron, n: String(n) });
  if (timezone) q.set("timezone", timezone);
  return (await api<{ next: string[] | null }>("GET", `/triggers/preview?${q}`)).next ?? [];
}
/** The next n fire times of a saved cron trigger, enabled or not. */
export async function previewTrigger(id: string, n: number): Promise<string[]> {
  return (await api<{ next: string[] | null }>("GET", path(id, `/preview?n=${n}`))).next ?? [];
}

/** The URL a webhook trigger's deliveries are POSTed to. */
export function hookUrl(origin: string, id: string): string {
  return `${origin.replace(/\/+$/, "")}/hooks/${encodeURIComponent(id)}`;
}

/** What a trigger is called in lists: its name, else its prompt's first line (cut at max). */
export function summary(tr: Pick<Trigger, "name" | "prompt">, max = 80): string {
  const name = tr.name?.trim();
  if (name) return name;
  const line = (tr.prompt ?? "").split("\n").map((l) => l.trim()).find(Boolean) ?? "";
  if (!line) return "(no prompt)";
  return line.length > max ? line.slice(0, max - 1) + "…" : line;
}

/** A cron trigger's expression and zone, "0 9 * * MON-FRI (Europe/Berlin)"; UTC when it has none. */
export function scheduleText(tr: Pick<Trigger, "cron" | "timezone">): string {
  return `${tr.cron ?? ""} (${tr.timezone || "UTC"})`;
}

const OUTCOMES: Record<string, [string, string]> = {
  running: ["running", "b-running"],
  waiting_for_action: ["waiting for action", "b-action"],
  succeeded: ["succeeded", "b-succeeded"],
  failed: ["failed", "b-failed"],
  cancelled: ["cancelled", "b-cancelled"],
  queued: ["queued", "b-queued"],
  buffered: ["buffered", "b-queued"],
  skipped: ["skipped", ""],
  started: ["started", "b-running"],
};

/**
 * What an occurrence came to, as the page shows it: its outcome (a run
 * that waits for a decision is "waiting for action", never "failed"),
 * or, before the history has listed it (the answer of Run now), its
 * status. key is the value the page marks it with (data-outcome).
 */
export function outcomeOf(o: Pick<Occurrence, "outcome" | "status">): { key: string; label: string; cls: string } {
  const key = o.outcome || o.status || "unknown";
  const [label, cls] = OUTCOMES[key] ?? [key.replace(/_/g, " "), ""];
  return { key, label, cls };
}

/** Whether an occurrence can still change (its run has not ended): its history is read again as it goes. */
export function isLive(o: Pick<Occurrence, "outcome" | "status">): boolean {
  const k = o.outcome || o.status;
  return k === "running" || k === "queued" || k === "buffered" || k === "started" || k === "waiting_for_action";
}

const CAUSES: Record<string, string> = { schedule: "schedule", catchup: "catch-up", webhook: "webhook", manual: "run now" };
export const causeLabel = (c: string) => CAUSES[c] ?? c;

/**
 * A fire time in a zone ("" is UTC), 24-hour and with the zone's
 * abbreviation: "Thu, 3 Dec 2026, 09:00 CET"; seconds when asked. An
 * unknown zone falls back to UTC, a bad time to the text as given.
 */
export function fireTime(iso: string, timezone = "", seconds = false): string {
  const d = new Date(iso);
  if (!Number.isFinite(d.getTime())) return iso;
  const opts: Intl.DateTimeFormatOptions = {
    weekday: "short", day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit",
    ...(seconds ? { second: "2-digit" } : {}), hourCycle: "h23", timeZoneName: "short",
  };
  try { return new Intl.DateTimeFormat("en-GB", { ...opts, timeZone: timezone || "UTC" }).format(d); }
  catch { return new Intl.DateTimeFormat("en-GB", { ...opts, timeZone: "UTC" }).format(d); }
}

/**
 * What a thread's row says of the trigger fire that started it, which is
 * what tells that trigger's threads apart (they share its name): when it
 * fired, in the trigger's zone (with seconds off a whole minute), the
 * cause when it is not the schedule (as the trigger's history names it),
 * and for a webhook what it was sent (the filled prompt).
 * Without the fire (an older server, a deleted trigger) the thread's
 * creation, in the browser's zone, with seconds.
 */
export function fireLabel(fire: ThreadTrigger | undefined, createdAt: string, browserZone = localZone()): { when: string; how: string; summary: string; at: string } {
  if (!fire) return { when: fireTime(createdAt, browserZone, true), how: "", summary: "", at: createdAt };
  const how = fire.cause === "schedule" ? "" : causeLabel(fire.cause);
  return {
    when: fireTime(fire.scheduled_at, fire.timezone, needSeconds([fire.scheduled_at])), how,
    summary: fire.cause === "webhook" ? fire.summary ?? "" : "", at: fire.scheduled_at,
  };
}

/** Whether any of the times falls off a whole minute (an @every 30s, a 6-field expression): they are then shown with seconds. */
export function needSeconds(times: string[]): boolean {
  return times.some((t) => { const d = new Date(t); return Number.isFinite(d.getTime()) && d.getUTCSeconds() !== 0; });
}

/** Nanoseconds as a Go duration the API takes back: 3600e9 -> "1h", 5400e9 -> "1h30m", 90e9 -> "1m30s"; "" for none. */
export function goDuration(ns: number | undefined): string {
  if (!ns || !Number.isFinite(ns) || ns <= 0) return "";
  let s = Math.round(ns / 1e9);
  if (s === 0) return `${Math.round(ns / 1e6)}ms`;
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  return `${h ? h + "h" : ""}${m ? m + "m" : ""}${s ? s + "s" : ""}`;
}

/** Tool names or globs as typed, separated by commas, spaces or new lines. */
export function parseList(text: string): string[] {
  return text.split(/[\s,]+/).map((t) => t.trim()).filter(Boolean);
}

/** The form of a trigger, every field as typed. */
export interface TriggerForm {
  kind: "cron" | "webhook";
  name: string; cron: string; timezone: string; prompt: string; model: string; enabled: boolean;
  overlap: string; catchup: string; catchupWindow: string;
  unattended: string; allow: string;
  /** A webhook secret of one's own (empty: Kiln makes one, or keeps the current one). */
  secret: string; rateLimit: string;
}

export const OVERLAPS: [string, string][] = [
  ["skip", "Skip it (default)"], ["buffer_one", "Buffer one, start it when the run ends"],
  ["cancel_previous", "Cancel the previous run"], ["allow_all", "Run both"],
];
export const CATCHUPS: [string, string][] = [
  ["latest", "Fire the latest missed slot (default)"], ["all", "Fire every missed slot"], ["skip", "Fire none"],
];
export const UNATTENDED: [string, string][] = [
  ["pause", "Wait in Action for a decision (default)"], ["reject", "Reject it automatically"], ["allow", "Allow the tools listed"],
];

/** The form of an existing trigger, or of a new one in the zone given (the browser's). */
export function formOf(tr: Trigger | undefined, timezone = ""): TriggerForm {
  if (!tr) {
    return {
      kind: "cron", name: "", cron: "", timezone, prompt: "", model: "", enabled: true,
      overlap: "skip", catchup: "latest", catchupWindow: "", unattended: "pause", allow: "", secret: "", rateLimit: "",
    };
  }
  return {
    kind: tr.kind === "webhook" ? "webhook" : "cron",
    name: tr.name ?? "", cron: tr.cron ?? "", timezone: tr.timezone ?? "", prompt: tr.prompt ?? "", model: tr.model ?? "", enabled: tr.enabled,
    overlap: tr.overlap || "skip", catchup: tr.catchup || "latest", catchupWindow: goDuration(tr.catchup_window),
    unattended: tr.unattended?.mode || "pause", allow: (tr.unattended?.allow ?? []).join(", "), secret: "",
    rateLimit: tr.rate_limit ? String(tr.rate_limit) : "",
  };
}

function rateLimit(text: string): number | undefined {
  const t = text.trim();
  if (!t) return undefined;
  const n = Number(t);
  if (!Number.isInteger(n) || n < 1) throw new Error("the rate limit is a whole number of deliveries a minute, 1 or more");
  return n;
}

/**
 * The body of POST /triggers for a form: the fields of its kind, without
 * the empty ones (the server's defaults apply). Throws an Error for a
 * field the page can tell is wrong before asking (the rate limit).
 */
export function createBody(f: TriggerForm): Record<string, unknown> {
  const b: Record<string, unknown> = { kind: f.kind, prompt: f.prompt, enabled: f.enabled };
  if (f.name.trim()) b.name = f.name.trim();
  if (f.model) b.model = f.model;
  if (f.overlap && f.overlap !== "skip") b.overlap = f.overlap;
  const allow = parseList(f.allow);
  if (f.unattended !== "pause" || allow.length) b.unattended = { mode: f.unattended, ...(allow.length ? { allow } : {}) };
  if (f.kind === "cron") {
    b.cron = f.cron.trim();
    if (f.timezone.trim()) b.timezone = f.timezone.trim();
    if (f.catchup && f.catchup !== "latest") b.catchup = f.catchup;
    if (f.catchupWindow.trim()) b.catchup_window = f.catchupWindow.trim();
  } else {
    if (f.secret) b.secret = f.secret;
    const rl = rateLimit(f.rateLimit);
    if (rl !== undefined) b.rate_limit = rl;
  }
  return b;
}

/** The body of PATCH /triggers/{id}: only what the form changed (an empty object when nothing). */
export function patchBody(tr: Trigger, f: TriggerForm): Record<string, unknown> {
  const was = formOf(tr);
  const p: Record<string, unknown> = {};
  if (f.name.trim() !== was.name) p.name = f.name.trim();
  if (f.prompt !== was.prompt) p.prompt = f.prompt;
  if (f.model !== was.model) p.model = f.model;
  if (f.enabled !== was.enabled) p.enabled = f.enabled;
  if (f.overlap !== was.overlap) p.overlap = f.overlap;
  const allow = parseList(f.allow);
  if (f.unattended !== was.unattended || allow.join(",") !== parseList(was.allow).join(",")) p.unattended = { mode: f.unattended, ...(allow.length ? { allow } : {}) };
  if (was.kind === "cron") {
    if (f.cron.trim() !== was.cron) p.cron = f.cron.trim();
    if (f.timezone.trim() !== was.timezone) p.timezone = f.timezone.trim();
    if (f.catchup !== was.catchup) p.catchup = f.catchup;
    if (f.catchupWindow.trim() !== was.catchupWindow) p.catchup_window = f.catchupWindow.trim();
  } else {
    if (f.secret) p.secret = f.secret;
    const rl = rateLimit(f.rateLimit);
    if (rl !== undefined && String(rl) !== was.rateLimit) p.rate_limit = rl;
  }
  return p;
}

/**
 * The field a 400's message is about, by the prefix the server gives it
 * ("cron: …", "timezone: unknown IANA time zone …", "prompt must …"), so
 * the page can show the reason beside that field; "" for another.
 */
export function errorField(message: string): keyof TriggerForm | "" {
  const m = /^(cron|timezone|prompt|secret|catchup_window|rate_limit|unattended|name|model)\b/.exec(message.trim());
  if (!m) return "";
  return ({ catchup_window: "catchupWindow", rate_limit: "rateLimit", unattended: "allow" } as Record<string, keyof TriggerForm>)[m[1]] ?? (m[1] as keyof TriggerForm);
}

/** The IANA zones this browser knows (for the zone field's suggestions), UTC first. */
export function timeZones(): string[] {
  let all: string[] = [];
  try { all = (Intl as any).supportedValuesOf?.("timeZone") ?? []; } catch { /* an older browser */ }
  return ["UTC", ...all.filter((z) => z !== "UTC")];
}

/** The browser's own zone ("" when it cannot say, which the server reads as UTC). */
export function localZone(): string {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch { return ""; }
}
