// Pure helpers of the Plugins page's marketplace parts: reading the
// preview's NDJSON stream, comparing versions, and the words and numbers
// the page shows (sizes, progress, trust, changes). No DOM, unit tested.
import { ApiError } from "./api";
import type { AddMarketplaceRequest, Marketplace, MarketplacePreview, MarketplaceVersion, PluginChanges, Progress } from "./types";

/** One line of POST /marketplace/preview's NDJSON answer. */
export type PreviewLine =
  | { progress: Progress }
  | { preview: MarketplacePreview }
  | { error: { code: string; message: string } };

/**
 * LineBuffer cuts a text stream into lines: push gives the lines a chunk
 * completes (a line may span chunks), end the last one when it had no
 * newline. Blank lines (and a trailing "\r") are dropped.
 */
export class LineBuffer {
  private rest = "";
  push(chunk: string): string[] {
    const parts = (this.rest + chunk).split("\n");
    this.rest = parts.pop()!;
    return parts.map((l) => l.replace(/\r$/, "")).filter((l) => l.trim() !== "");
  }
  end(): string[] {
    const last = this.rest.replace(/\r$/, "");
    this.rest = "";
    return last.trim() ? [last] : [];
  }
}

/** parsePreviewLine reads one line; it throws an Error naming the line when it is none of the three. */
export function parsePreviewLine(line: string): PreviewLine {
  let v: any;
  try { v = JSON.parse(line); } catch { throw new Error(`the server sent a line that is not JSON: ${clip(line)}`); }
  if (v && typeof v === "object") {
    if (v.progress && typeof v.progress.done === "number") return { progress: { done: v.progress.done, total: typeof v.progress.total === "number" ? v.progress.total : 0 } };
    if (v.preview && typeof v.preview === "object") return { preview: v.preview };
    if (v.error && typeof v.error === "object") return { error: { code: String(v.error.code ?? "error"), message: String(v.error.message ?? "the preview failed") } };
  }
  throw new Error(`the server sent a line the page does not know: ${clip(line)}`);
}

const clip = (s: string, n = 120) => (s.length > n ? s.slice(0, n) + "…" : s);

/**
 * readPreview reads a preview's NDJSON stream: onProgress hears each
 * progress line, and the promise resolves with the preview. An error
 * line rejects with an ApiError carrying the server's code and message;
 * a stream that ends before either rejects with code "incomplete".
 */
export async function readPreview(body: ReadableStream<Uint8Array>, onProgress: (p: Progress) => void): Promise<MarketplacePreview> {
  const reader = body.getReader();
  const text = new TextDecoder();
  const lines = new LineBuffer();
  const take = (ls: string[]): MarketplacePreview | undefined => {
    for (const l of ls) {
      const v = parsePreviewLine(l);
      if ("progress" in v) onProgress(v.progress);
      else if ("preview" in v) return v.preview;
      else throw new ApiError(0, v.error.code, v.error.message);
    }
    return undefined;
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      const got = done ? take([...lines.push(text.decode()), ...lines.end()]) : take(lines.push(text.decode(value, { stream: true })));
      if (got) return got;
      if (done) throw new ApiError(0, "incomplete", "The server stopped answering before the preview was ready.");
    }
  } finally {
    reader.releaseLock();
  }
}

interface SemVer { core: number[]; pre: string[] }

function parseVersion(v: string): SemVer | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/.exec(v.trim());
  return m ? { core: [+m[1], +m[2], +m[3]], pre: m[4] ? m[4].split(".") : [] } : undefined;
}

/**
 * compareVersions orders two semantic versions as semver does (build
 * metadata ignored, a pre-release before its release): negative when a is
 * older, 0 when equal, positive when newer. Text that is not a version
 * sorts before every version, and two such texts compare as strings.
 */
export function compareVersions(a: string, b: string): number {
  const x = parseVersion(a), y = parseVersion(b);
  if (!x || !y) return !x && !y ? (a < b ? -1 : a > b ? 1 : 0) : x ? 1 : -1;
  for (let i = 0; i < 3; i++) if (x.core[i] !== y.core[i]) return x.core[i] - y.core[i];
  if (!x.pre.length || !y.pre.length) return y.pre.length - x.pre.length;
  for (let i = 0; i < Math.min(x.pre.length, y.pre.length); i++) {
    const p = x.pre[i], q = y.pre[i];
    const pn = /^\d+$/.test(p), qn = /^\d+$/.test(q);
    if (pn && qn) { if (+p !== +q) return +p - +q; continue; }
    if (pn !== qn) return pn ? -1 : 1;
    if (p !== q) return p < q ? -1 : 1;
  }
  return x.pre.length - y.pre.length;
}

/** 1536 -> "1.5 KB": bytes in powers of 1024, one decimal under 10. */
export function formatBytes(n: number): string {
  if (!(n > 0)) return "0 B";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${Math.round(v)} B` : `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** A download's progress in words: "1.5 MB of 3.0 MB (50%)", or "1.5 MB" while the total is unknown. */
export function progressText(p: Progress): string {
  if (!(p.total > 0)) return `${formatBytes(p.done)} downloaded`;
  return `${formatBytes(p.done)} of ${formatBytes(p.total)} (${Math.floor(Math.min(1, p.done / p.total) * 100)}%)`;
}

/** The fraction done, 0 to 1, or undefined while the total is unknown (an indeterminate bar). */
export function progressFraction(p: Progress | undefined): number | undefined {
  return p && p.total > 0 ? Math.min(1, Math.max(0, p.done / p.total)) : undefined;
}

/** A version's signature status in words. */
export const signatureStatus = (v: Pick<MarketplaceVersion, "signed">) => (v.signed ? "signed by a trusted key" : "not signed (a source you trusted explicitly)");

/**
 * Where a version's index sits in its marketplace's transparency log:
 * "index log entry 4 of tree 5" (entries count from 0, a tree's size is
 * its entry count), or why it is in none.
 */
export function logStatus(v: Pick<MarketplaceVersion, "log_index">, mp: Pick<Marketplace, "tree_size"> | undefined): string {
  if (v.log_index < 0) return "not in a transparency log";
  return mp?.tree_size ? `index log entry ${v.log_index} of tree ${mp.tree_size}` : `index log entry ${v.log_index}`;
}

/** A verifier key's name and hash ("acme+1a2b3c4d" of "acme+1a2b3c4d+AQ…"): what a person compares. */
export function keyLabel(key: string): string {
  const parts = key.split("+");
  return parts.length >= 3 ? `${parts[0]}+${parts[1]}` : key;
}

/** A Go duration as people write it: "72h0m0s" -> "72h", "1h30m0s" -> "1h30m"; "0s" (or none) -> "none". */
export function quarantineText(d: string | undefined): string {
  if (!d || /^0+(\.0+)?[a-zµ]*$/.test(d)) return "none";
  return d.replace(/([hm])0s$/, "$1").replace(/h0m$/, "h");
}

/** One changed file of an upgrade. */
export interface ChangeLine { kind: "added" | "removed" | "changed"; path: string }

/** The changed files of an upgrade, added, then removed, then changed, each sorted. */
export function changeLines(c: PluginChanges | undefined): ChangeLine[] {
  const out: ChangeLine[] = [];
  for (const kind of ["added", "removed", "changed"] as const) {
    for (const path of [...(c?.[kind] ?? [])].sort()) out.push({ kind, path });
  }
  return out;
}

/** The changes in one line: the server's summary, else the counts ("1 file added, 2 changed"), else "no files changed". */
export function changeSummary(c: PluginChanges | undefined): string {
  if (c?.summary) return c.summary;
  const parts = (["added", "removed", "changed"] as const).filter((k) => c?.[k]?.length)
    .map((k, i) => (i === 0 ? `${plural(c![k]!.length, "file")} ${k}` : `${c![k]!.length} ${k}`));
  return parts.length ? parts.join(", ") : "no files changed";
}

export const plural = (n: number, one: string, many = one + "s") => `${n} ${n === 1 ? one : many}`;

/** What installing a preview does to what is installed. */
export type InstallKind = "install" | "upgrade" | "downgrade" | "reinstall";

/** installKind compares the previewed version with the installed one (the server's downgrade, when it says so, is the word). */
export function installKind(pv: Pick<MarketplacePreview, "version" | "installed" | "downgrade">): InstallKind {
  if (!pv.installed) return "install";
  if (pv.downgrade) return "downgrade";
  const c = compareVersions(pv.version, pv.installed);
  return c > 0 ? "upgrade" : c < 0 ? "downgrade" : "reinstall";
}

/** The consent button's words: what it does, and "Allow and …" when it gives consent to permissions. */
export function consentLabel(pv: Pick<MarketplacePreview, "version" | "installed" | "downgrade" | "needs_consent" | "permissions" | "added">): string {
  const kind = installKind(pv);
  const asks = pv.needs_consent && ((pv.added?.length ?? 0) > 0 || (pv.permissions?.length ?? 0) > 0);
  return asks ? `Allow and ${kind}` : kind[0].toUpperCase() + kind.slice(1);
}

/** The Add marketplace form's fields, as typed. */
export interface MarketplaceForm { name: string; url: string; keys: string; quarantine: string; kind: "kiln" | "claude"; trust: boolean }

/**
 * marketplaceInput makes the POST /marketplaces body of the form, or says
 * what is missing: a name, a URL, a key for a signed marketplace, and the
 * explicit trust an unsigned one needs. Keys are one per line (or
 * separated by spaces), duplicates dropped. The server checks the rest.
 */
export function marketplaceInput(f: MarketplaceForm): { input?: AddMarketplaceRequest; error?: string } {
  const name = f.name.trim(), url = f.url.trim(), quarantine = f.quarantine.trim();
  if (!name) return { error: "Name: give the marketplace a name (lowercase letters, digits and -)" };
  if (!url) return { error: "URL: where the marketplace's files are (https://…, file://…, or a folder on the server's machine)" };
  const input: AddMarketplaceRequest = { name, url };
  if (f.kind === "claude") {
    if (!f.trust) return { error: "A Claude Code marketplace is not signed: tick “Trust this unsigned source” to add it anyway" };
    input.kind = "claude";
    input.trust_unsigned = true;
  } else {
    const keys = [...new Set(f.keys.split(/\s+/).filter(Boolean))];
    if (!keys.length) return { error: "Keys: paste the verifier key the marketplace's owner published (name+hash+key)" };
    input.keys = keys;
  }
  if (quarantine) input.quarantine = quarantine;
  return { input };
}
