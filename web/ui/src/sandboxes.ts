// The Sandboxes page's logic: the lifecycle API's types, the time left
// before a sandbox expires, and a command run through a sandbox's
// execution API (sandbox/execapi) with its output streamed.
import { api, ApiError, sandboxApi, sandboxError } from "./api";
import type { Plugin } from "./types";

export interface Sandbox {
  id: string;
  image?: { uri: string };
  status: { state: "Pending" | "Running" | "Paused" | "Terminated" | "Failed" | string; reason?: string; message?: string; lastTransitionAt?: string };
  metadata: Record<string, string>;
  entrypoint: string[];
  expiresAt?: string;
  createdAt: string;
  /** Kiln's addition: the runtime that runs it. */
  runtime?: string;
}
export interface SandboxPage {
  items: Sandbox[];
  pagination: { page: number; pageSize: number; totalItems: number; totalPages: number; hasNextPage: boolean };
}

/** The create request's extensions key that picks the runtime (sandbox/service.ExtRuntime). */
export const EXT_RUNTIME = "kiln.runtime";
/** The metadata key that marks an agent thread's own sandbox (sandbox/service.MetaThread): its value is the thread's ID. */
export const META_THREAD = "kiln.io/thread";

/** The ID of the thread whose own sandbox sb is, or undefined for one no thread owns. */
export function threadOf(sb: Pick<Sandbox, "metadata">): string | undefined {
  const id = sb.metadata?.[META_THREAD]?.trim();
  return id || undefined;
}

/** The runtimes the enabled sandbox-runtime plugins provide, sorted (from GET /plugins). */
export function runtimesOf(plugins: Plugin[] | null | undefined): string[] {
  return (plugins ?? [])
    .filter((p) => p.status === "enabled" && (p.provides ?? []).includes("sandbox-runtime"))
    .flatMap((p) => p.provided?.["sandbox-runtime"] ?? [p.id])
    .sort();
}

/** The runtimes the enabled sandbox-runtime plugins provide, sorted (GET /api/v1/plugins). */
export async function loadRuntimes(): Promise<string[]> {
  const { plugins } = await api<{ plugins: Plugin[] }>("GET", "/plugins");
  return runtimesOf(plugins);
}

/** An option of the default sandbox runtime's select in Settings. */
export interface RuntimeChoice { value: string; label: string }

/**
 * The choices of the sandbox_runtime setting: the server's default, the
 * enabled runtimes, and the chosen one when it is not (or not yet known
 * to be) enabled, so the select shows what is set; note says what
 * happens while the chosen runtime is not enabled ("" when it is, or
 * while the enabled ones are unknown).
 */
export function runtimeChoices(chosen: string | undefined, enabled: string[] | undefined): { choices: RuntimeChoice[]; note: string } {
  const choices: RuntimeChoice[] = [{ value: "", label: "Server default" }];
  for (const r of enabled ?? []) choices.push({ value: r, label: r });
  const off = !!chosen && !(enabled ?? []).includes(chosen);
  if (off) choices.push({ value: chosen!, label: enabled ? `${chosen} (not enabled)` : chosen! });
  const note = off && enabled
    ? `${chosen} is not enabled: sandboxes created without a runtime get the server's default until its plugin is enabled again.`
    : "";
  return { choices, note };
}

/** The execution API's port, as OpenSandbox's SDKs ask for it. */
export const EXECD_PORT = 44772;

/**
 * Whether a runtime can pause its sandboxes: true or false for the
 * built-ins, undefined for one the page does not know (it offers Pause,
 * and a 501 answer says no).
 */
export function canPause(runtime: string | undefined, learned: Record<string, boolean> = {}): boolean | undefined {
  if (!runtime) return undefined;
  if (runtime in learned) return learned[runtime];
  return ({ docker: true, wasm: false, js: false } as Record<string, boolean>)[runtime];
}

/** Whether a runtime takes an image (docker does; wasm and js have one environment). */
export function takesImage(runtime: string | undefined): boolean | undefined {
  if (!runtime) return undefined;
  return ({ docker: true, wasm: false, js: false } as Record<string, boolean>)[runtime];
}

/**
 * Metadata as the form takes it, "k=v" pairs separated by commas or new
 * lines, parsed; throws an Error naming a pair without a key.
 */
export function parseMetadata(text: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  let any = false;
  for (const raw of text.split(/[,\n]/)) {
    const pair = raw.trim();
    if (!pair) continue;
    const eq = pair.indexOf("=");
    const k = (eq < 0 ? pair : pair.slice(0, eq)).trim();
    if (!k || eq < 0) throw new Error(`metadata "${pair}": want key=value`);
    out[k] = pair.slice(eq + 1).trim();
    any = true;
  }
  return any ? out : undefined;
}

/** One event of a command's output stream (execd's shape). */
export interface ExecEvent {
  type: "init" | "stdout" | "stderr" | "result" | "execution_complete" | "error" | "ping" | string;
  text?: string;
  /** Kiln only: text does not end its line (a piece of a long line, or a last line without an ending). */
  partial?: boolean;
  execution_time?: number;
  timestamp?: number;
  error?: { ename: string; evalue: string; traceback?: string[] };
}

/**
 * Incremental parser of an output stream: JSON objects each on a line of
 * its own (execd follows each with a blank line). Feed it decoded text in
 * arbitrary chunks; it returns the complete events. A line that is not
 * JSON comes back as an error event saying so.
 */
export class ExecParser {
  private buf = "";
  feed(chunk: string): ExecEvent[] {
    this.buf += chunk;
    const lines = this.buf.split("\n");
    this.buf = lines.pop() ?? "";
    return lines.flatMap((l) => this.line(l));
  }
  /** The events of what is left once the stream has ended. */
  end(): ExecEvent[] {
    const rest = this.buf;
    this.buf = "";
    return this.line(rest);
  }
  private line(l: string): ExecEvent[] {
    const t = l.trim();
    if (!t) return [];
    try {
      const e = JSON.parse(t);
      if (e && typeof e === "object" && typeof e.type === "string") return [e as ExecEvent];
    } catch { /* below */ }
    return [{ type: "error", error: { ename: "BadStream", evalue: `not an event: ${t.slice(0, 120)}` } }];
  }
}

/**
 * The output of a stdout or stderr event as the command printed it. As
 * execd, the server sends one event per line without its ending, and an
 * empty line as "\n"; this gives each line its "\n" back, but not to a
 * partial event (a piece of a line over 64 KiB, or a last line printed
 * without an ending), so the outputs joined are the command's output.
 */
export function outputOf(e: ExecEvent): string {
  const t = e.text ?? "";
  return e.partial || t === "\n" ? t : t + "\n";
}

/** How a command ended: its exit code, or an error (interrupted, timed out, refused). */
export type ExecOutcome =
  | { kind: "exit"; code: number; ms?: number }
  | { kind: "interrupted"; message: string }
  | { kind: "error"; name: string; message: string };

/** The outcome an event ends a command with, or undefined for one that does not end it. */
export function outcomeOf(e: ExecEvent): ExecOutcome | undefined {
  if (e.type === "execution_complete") return { kind: "exit", code: 0, ms: e.execution_time };
  if (e.type !== "error") return undefined;
  const name = e.error?.ename ?? "Error", value = e.error?.evalue ?? "";
  if (name === "CommandExecError" && /^-?\d+$/.test(value)) return { kind: "exit", code: Number(value) };
  if (name === "Interrupted") return { kind: "interrupted", message: value };
  return { kind: "error", name, message: value || name };
}

/** Where a sandbox's execution API is reached: Kiln's proxy path on this server, and the headers it needs. */
export interface Endpoint { base: string; headers: Record<string, string> }

/**
 * The endpoint of a sandbox's execution API. The server answers
 * host/v1/sandboxes/{id}/proxy/44772 (no scheme, as OpenSandbox's are);
 * the page calls the same origin, so only the path is kept.
 */
export async function execEndpoint(id: string): Promise<Endpoint> {
  const e = await sandboxApi<{ endpoint: string; headers?: Record<string, string> }>("GET", `/sandboxes/${encodeURIComponent(id)}/endpoints/${EXECD_PORT}`);
  const slash = e.endpoint.indexOf("/");
  return { base: slash < 0 ? "" : e.endpoint.slice(slash), headers: e.headers ?? {} };
}

/**
 * Runs a shell command in the foreground through the execution API and
 * calls onEvent with each event as it arrives. It resolves with how the
 * command ended; it rejects with an ApiError when the command was refused
 * before it started (the answer's code and message), or when the stream
 * broke off before an end. Aborting signal drops the stream (the server
 * then kills the command with its request); interrupt() is the polite way.
 */
export async function runCommand(ep: Endpoint, command: string, onEvent: (e: ExecEvent) => void, signal?: AbortSignal): Promise<ExecOutcome> {
  let res: Response;
  try {
    res = await fetch(ep.base + "/command", {
      method: "POST", signal, cache: "no-store",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...ep.headers },
      body: JSON.stringify({ command, background: false }),
    });
  } catch (e) {
    if (signal?.aborted) throw new ApiError(0, "aborted", "The command's stream was dropped.");
    throw new ApiError(0, "network", "The server cannot be reached.");
  }
  if (!res.ok || !res.body) {
    let data: any;
    try { data = await res.json(); } catch { data = undefined; }
    throw sandboxError(res.status, data);
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  const parser = new ExecParser();
  let end: ExecOutcome | undefined;
  const take = (evs: ExecEvent[]) => { for (const e of evs) { onEvent(e); end ??= outcomeOf(e); } };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      take(parser.feed(dec.decode(value, { stream: true })));
    }
    take(parser.feed(dec.decode()));
    take(parser.end());
  } catch {
    if (end) return end;
    if (signal?.aborted) throw new ApiError(0, "aborted", "The command's stream was dropped.");
    throw new ApiError(0, "network", "The command's stream broke off before it ended.");
  }
  if (!end) throw new ApiError(0, "network", "The command's stream ended without its result.");
  return end;
}

/** Interrupts a running command (DELETE /command?id=): it and everything it started are killed. */
export async function interruptCommand(ep: Endpoint, commandId: string): Promise<void> {
  let res: Response;
  try {
    res = await fetch(`${ep.base}/command?id=${encodeURIComponent(commandId)}`, { method: "DELETE", headers: ep.headers, cache: "no-store" });
  } catch {
    throw new ApiError(0, "network", "The server cannot be reached.");
  }
  if (!res.ok) {
    let data: any;
    try { data = await res.json(); } catch { data = undefined; }
    throw sandboxError(res.status, data);
  }
}
