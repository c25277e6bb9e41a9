// The workspace's pure helpers: sizes, attachment URLs, which messages a
// thread can be forked at, the settings' limits, memory names and the
// theme. No DOM, unit tested.
import type { Message, Part, Theme } from "./types";

/** A size for people, as the server says it in its messages: 512 B, 1.5 KiB, 25 MiB. */
export function formatBytes(n: number): string {
  const v = Math.max(0, Math.round(Number.isFinite(n) ? n : 0));
  if (v < 1024) return `${v} B`;
  let div = 1024, exp = 0;
  for (let m = Math.floor(v / 1024); m >= 1024; m = Math.floor(m / 1024)) { div *= 1024; exp++; }
  return `${(v / div).toFixed(1).replace(/\.0$/, "")} ${"KMGTPE"[exp]}iB`;
}

/** The most attachments one message carries (RunInput.attachments). */
export const MAX_ATTACHMENTS = 10;
/** The most characters of the prompt addendum (counted as the server does, in code points). */
export const MAX_ADDENDUM = 8000;
/** The most a run's default limits may be. */
export const MAX_LIMIT = 10000;

/** Characters as the server counts them: code points, so an emoji is one. */
export function charCount(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** The attachment ID of a part's uri (attachment://<id>), or "". */
export function attachmentId(uri: string | undefined): string {
  const m = /^attachment:\/\/([^/?#]+)$/.exec(uri ?? "");
  return m ? m[1] : "";
}

/** Where an attachment's bytes are served (images inline, other files as a download). */
export function attachmentURL(api: string, id: string): string {
  return `${api}/attachments/${encodeURIComponent(id)}/content`;
}

/**
 * The URL of a message part's bytes: its attachment's content, or a data:
 * URL for inline bytes; "" when it has neither (or an unknown scheme).
 */
export function partURL(api: string, p: Part): string {
  const id = attachmentId(p.uri);
  if (id) return attachmentURL(api, id);
  if (p.data && p.mime_type && /^[\w.+-]+\/[\w.+-]+$/.test(p.mime_type)) return `data:${p.mime_type};base64,${p.data}`;
  return "";
}

/** The image and file parts of a message, the ones the text does not already show. */
export function mediaParts(m: Pick<Message, "parts">): Part[] {
  return (m.parts ?? []).filter((p) => p.type === "image" || p.type === "file");
}

/** "text/markdown" -> "markdown", "image/png" -> "PNG image", for a file chip. */
export function typeLabel(mime: string | undefined): string {
  const t = (mime ?? "").split(";")[0].trim().toLowerCase();
  if (!t) return "file";
  const [major, minor = ""] = t.split("/");
  if (major === "image") return `${minor.toUpperCase()} image`;
  if (t === "text/plain") return "text";
  if (major === "text" || major === "application") return minor.replace(/^x-/, "");
  return t;
}

/** A file's extension for its icon: "notes.txt" -> "TXT", at most 4 letters; "FILE" without one. */
export function extLabel(name: string): string {
  const m = /\.([A-Za-z0-9]{1,4})$/.exec(name);
  return m ? m[1].toUpperCase() : "FILE";
}

/**
 * The indexes of the assistant messages a thread can be forked at: every
 * assistant turn whose tool calls all have a result after it. None while a
 * run is active (the server refuses a fork then).
 */
export function forkable(messages: Message[], active: boolean): Set<number> {
  const out = new Set<number>();
  if (active) return out;
  const answered = new Map<string, number>(); // tool call ID -> index of its result
  for (const m of messages) if (m.role === "tool" && m.tool_call_id) answered.set(m.tool_call_id, m.index);
  for (const m of messages) {
    if (m.role !== "assistant") continue;
    if ((m.tool_calls ?? []).every((c) => (answered.get(c.id) ?? -1) > m.index)) out.add(m.index);
  }
  return out;
}

/** Whether a refused grant (409) is about Kiln's data root, which the owner may acknowledge. */
export function isDataRootConflict(status: number, message: string): boolean {
  return status === 409 && /acknowledge_data_root|data root/i.test(message);
}

/** The memory file name for what was typed: "notes" -> "notes.md"; undefined when it cannot be one. */
export function memoryName(typed: string): string | undefined {
  let t = typed.trim();
  if (!t) return undefined;
  if (!/\.md$/i.test(t)) t += ".md";
  return /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.md$/.test(t) ? t : undefined;
}

/**
 * A limit as typed: "" -> 0 (the server's default), a whole number from 0
 * to MAX_LIMIT -> itself; undefined otherwise.
 */
export function parseLimit(typed: string): number | undefined {
  const t = typed.trim();
  if (!t) return 0;
  if (!/^\d+$/.test(t)) return undefined;
  const n = Number(t);
  return n <= MAX_LIMIT ? n : undefined;
}

export const THEMES: Theme[] = ["system", "light", "dark"];

/** A theme from storage or the server: anything unknown is "system". */
export function normTheme(v: unknown): Theme {
  return THEMES.includes(v as Theme) ? (v as Theme) : "system";
}

/** The path segment of a virtual file for GET /threads/{id}/files/{path}: each segment escaped, slashes kept. */
export function filePath(path: string): string {
  return path.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/");
}
