// The thread reducer: folds API snapshots and stream events into one
// immutable ThreadState. Pure functions, no DOM, unit tested.
import { tokens } from "../format";
import type { Interrupt, KEvent, Message, Run, RunStatus, Thread } from "../types";

export interface Activity {
  seq: number; type: string; namespace?: string; run_id?: string; summary: string; time: string;
  /** The tool call a tool.started or tool.progress event is about. */
  call_id?: string;
  /** How far a tool.progress with a total has come, from 0 to 1. */
  fraction?: number;
}

export interface ThreadState {
  id: string;
  thread?: Thread;
  /** Messages by index, kept sorted. */
  messages: Message[];
  runs: Record<string, Run>;
  /** The latest run seen (by creation order). */
  runOrder: string[];
  interrupts: Record<string, Interrupt>;
  /** Live text of a model turn in progress, per run (from message.delta). */
  streaming: Record<string, string>;
  activity: Activity[];
  /** Highest durable seq applied. */
  lastSeq: number;
}

export const MAX_ACTIVITY = 300;

export function initThread(id: string): ThreadState {
  return { id, messages: [], runs: {}, runOrder: [], interrupts: {}, streaming: {}, activity: [], lastSeq: 0 };
}

/** Insert or replace a message by index, keeping order. Idempotent. */
export function upsertMessage(list: Message[], m: Message): Message[] {
  const i = list.findIndex((x) => x.index >= m.index);
  if (i < 0) return [...list, m];
  if (list[i].index === m.index) {
    const next = list.slice();
    next[i] = { ...list[i], ...m };
    return next;
  }
  return [...list.slice(0, i), m, ...list.slice(i)];
}

/** Merge the GET /messages snapshot. */
export function withMessages(s: ThreadState, msgs: Message[]): ThreadState {
  let list = s.messages;
  for (const m of msgs) list = upsertMessage(list, m);
  return { ...s, messages: list };
}

export function withRuns(s: ThreadState, runs: Run[]): ThreadState {
  const r = { ...s.runs };
  const order = s.runOrder.slice();
  for (const run of runs) {
    // Stream events win over a snapshot that may be older.
    r[run.id] = { ...run, ...(s.runs[run.id] ?? {}) };
    if (!order.includes(run.id)) order.push(run.id);
  }
  return { ...s, runs: r, runOrder: order };
}

export function withInterrupts(s: ThreadState, list: Interrupt[]): ThreadState {
  const m = { ...s.interrupts };
  for (const it of list) {
    const cur = m[it.id];
    // A decided or cancelled interrupt never goes back to open.
    if (cur && cur.status !== "open" && it.status === "open") continue;
    m[it.id] = it;
  }
  return { ...s, interrupts: m };
}

function short(v: unknown, n = 80): string {
  let t = typeof v === "string" ? v : JSON.stringify(v);
  if (t === undefined) t = "";
  return t.length > n ? t.slice(0, n - 1) + "…" : t;
}

/**
 * A tool.progress event's progress as a line: an MCP server's
 * {progress, total?, message?} as "2/5 (40%) · message", sandbox.exec's
 * {stream, text} as the last line of its output, anything else as JSON.
 */
export function progressText(v: any): string {
  if (typeof v?.progress === "number") {
    const total = typeof v.total === "number" && v.total > 0 ? v.total : undefined;
    const amount = total === undefined ? `${v.progress}` : `${v.progress}/${total} (${Math.round(100 * Math.min(v.progress / total, 1))}%)`;
    return typeof v.message === "string" && v.message ? `${amount} · ${short(v.message, 60)}` : amount;
  }
  if (typeof v?.text === "string") {
    const lines = v.text.trimEnd().split("\n");
    return short(lines[lines.length - 1], 60);
  }
  return short(v, 60);
}

/** A tool.progress's fraction done (0 to 1), when its progress has a total. */
function progressFraction(v: any): number | undefined {
  if (typeof v?.progress !== "number" || typeof v.total !== "number" || v.total <= 0) return undefined;
  return Math.max(0, Math.min(v.progress / v.total, 1));
}

export function summarize(e: KEvent): string {
  const p = e.payload ?? {};
  switch (e.type) {
    case "run.queued": return "Run queued";
    case "run.started": return p.skill ? `Subagent ${p.skill} started on ${p.model ?? "?"}` : `Run started on ${p.model ?? "?"}`;
    case "run.resumed": return `Run resumed${p.reason ? ` (${p.reason})` : ""}`;
    case "run.interrupted": return `Waiting for ${p.interrupts ?? 1} decision${p.interrupts === 1 ? "" : "s"}`;
    case "run.finished": {
      const u = tokens(p.usage);
      return `Run ${p.status}${p.error ? `: ${p.error}` : ""}${u ? ` · ${u}` : ""}`;
    }
    case "message":
      if (p.role === "assistant" && p.tool_calls?.length) return `Model calls ${p.tool_calls.map((c: any) => c.name).join(", ")}`;
      if (p.role === "tool") return `${p.name ?? "tool"} ${p.is_error ? "failed" : "returned"} ${short(p.text, 60)}`;
      return `${p.role === "user" ? "You" : "Model"}: ${short(p.text, 60)}`;
    case "tool.started": return `Tool ${p.name} started ${short(p.args, 60)}`;
    case "tool.progress": return `${p.tool ?? "Tool"}: ${progressText(p.progress)}`;
    case "interrupt.created": return `${p.kind === "recovery" ? "Recovery needed" : "Approval needed"} for ${p.tool}`;
    case "interrupt.decided": return `${p.tool} ${p.decision?.decision ?? p.status}`;
    case "thread.updated": return "Thread updated";
    case "thread.read": return "Marked read";
    case "thread.created": return "Thread created";
    default: return e.type;
  }
}

function touchRun(s: ThreadState, id: string | undefined, patch: Partial<Run>): ThreadState {
  if (!id) return s;
  const prev = s.runs[id] ?? ({ id, thread_id: s.id, status: "queued", model: "" } as Run);
  return {
    ...s,
    runs: { ...s.runs, [id]: { ...prev, ...patch } },
    runOrder: s.runOrder.includes(id) ? s.runOrder : [...s.runOrder, id],
  };
}

/**
 * Apply one event. Durable events (seq > 0) at or below lastSeq are ignored,
 * so replays and reconnects never apply anything twice; ephemeral ones
 * (seq 0, message.delta and non-durable tool.started) only touch live state.
 */
export function applyEvent(s: ThreadState, e: KEvent): ThreadState {
  if (e.thread_id && e.thread_id !== s.id) return s;
  const durable = e.seq > 0;
  if (durable && e.seq <= s.lastSeq) return s;
  const p = e.payload ?? {};
  let n: ThreadState = durable ? { ...s, lastSeq: e.seq } : s;
  switch (e.type) {
    case "message.delta": {
      // A subagent's text shows in Activity once its message is complete;
      // a delta that arrives after its run ended (a stream that replayed
      // the stored events first) is late, not a new turn.
      if (!e.run_id || e.namespace || TERMINAL.includes(n.runs[e.run_id]?.status)) return s;
      return { ...n, streaming: { ...n.streaming, [e.run_id]: (n.streaming[e.run_id] ?? "") + (p.text ?? "") } };
    }
    case "message": {
      const m: Message = { ...p, run_id: e.run_id, created_at: p.created_at ?? e.time, ...(e.namespace ? { namespace: e.namespace } : {}) };
      n = { ...n, messages: upsertMessage(n.messages, m) };
      if (m.role === "assistant" && e.run_id && n.streaming[e.run_id] !== undefined) {
        const st = { ...n.streaming };
        delete st[e.run_id];
        n = { ...n, streaming: st };
      }
      break;
    }
    case "run.queued": n = touchRun(n, e.run_id, { status: "queued", model: p.model }); break;
    case "run.started": n = touchRun(n, e.run_id, {
      status: "running", model: p.model, error: undefined,
      ...(p.parent_run_id ? { parent_run_id: p.parent_run_id, parent_call_id: p.parent_call_id, namespace: e.namespace, agent: { skill: p.skill } } : {}),
    }); break;
    case "run.resumed": n = touchRun(n, e.run_id, { status: "running" }); break;
    case "run.interrupted": n = touchRun(n, e.run_id, { status: "interrupted" }); break;
    case "run.finished": {
      n = touchRun(n, e.run_id, {
        status: p.status as RunStatus, error: p.error || undefined, steps: p.steps, tool_calls: p.tool_calls,
        ...(p.usage ? { usage: p.usage } : {}),
      });
      // Finishing closes the run's open interrupts.
      const ints = { ...n.interrupts };
      for (const it of Object.values(ints)) if (it.run_id === e.run_id && it.status === "open") ints[it.id] = { ...it, status: "cancelled" };
      const st = { ...n.streaming };
      if (e.run_id) delete st[e.run_id];
      n = { ...n, interrupts: ints, streaming: st };
      break;
    }
    case "interrupt.created":
    case "interrupt.decided":
      if (p.id) n = withInterrupts(n, [p as Interrupt]);
      break;
    case "thread.created":
    case "thread.updated":
      // A replay brings old snapshots of the thread: only what the user
      // edits comes from them (its derived state comes from its runs and
      // from fresh reads), and thread.created never overrides a fresh read.
      if (p.id !== s.id) break;
      if (!n.thread) n = { ...n, thread: p as Thread };
      else if (e.type === "thread.updated") n = { ...n, thread: { ...n.thread, title: p.title, folder_id: p.folder_id, pinned: p.pinned } };
      break;
    case "thread.read":
      if (n.thread) n = { ...n, thread: { ...n.thread, unread: false } };
      break;
  }
  if (e.type !== "message.delta") {
    const a: Activity = { seq: e.seq, type: e.type, namespace: e.namespace, run_id: e.run_id, summary: summarize(e), time: e.time,
      ...(e.type === "tool.started" && p.id ? { call_id: p.id } : {}),
      ...(e.type === "tool.progress" && p.tool_call_id ? { call_id: p.tool_call_id, fraction: progressFraction(p.progress) } : {}) };
    // A call's progress is one line, updated in place.
    if (a.type === "tool.progress" && a.call_id) {
      for (let i = n.activity.length - 1; i >= 0; i--) {
        const x = n.activity[i];
        if (x.type === "tool.progress" && x.call_id === a.call_id && x.run_id === a.run_id) {
          const act = n.activity.slice();
          act[i] = a;
          return { ...n, activity: act };
        }
      }
    }
    const act = n.activity.length >= MAX_ACTIVITY ? n.activity.slice(1) : n.activity;
    n = { ...n, activity: [...act, a] };
  }
  return n;
}

/**
 * The run the thread view is about: the active one (running or waiting for
 * a decision), else the latest that ran. Queued runs wait behind it and
 * are shown as queued (queuedRuns).
 */
export function currentRun(s: ThreadState): Run | undefined {
  const runs = s.runOrder.map((id) => s.runs[id]).filter((r) => r && !r.parent_run_id);
  for (let i = runs.length - 1; i >= 0; i--) if (runs[i].status === "running" || runs[i].status === "interrupted") return runs[i];
  for (let i = runs.length - 1; i >= 0; i--) if (runs[i].status !== "queued") return runs[i];
  return undefined;
}

/** The runs queued behind the active one, in order. */
export function queuedRuns(s: ThreadState): Run[] {
  return s.runOrder.map((id) => s.runs[id]).filter((r) => r?.status === "queued");
}

/** The thread's model: pinned on its first run (Thread.model), else that run's. */
export function threadModel(s: ThreadState): string | undefined {
  return s.thread?.model || s.runOrder.map((id) => s.runs[id]?.model).find(Boolean);
}

export function openInterrupts(s: ThreadState): Interrupt[] {
  return Object.values(s.interrupts).filter((i) => i.status === "open")
    .sort((a, b) => (a.created_at ?? "").localeCompare(b.created_at ?? ""));
}

/** The thread's own conversation: the messages of no subagent. */
export function rootMessages(s: ThreadState): Message[] {
  return s.messages.filter((m) => !m.namespace);
}

/** The subagent runs that answer a run's tool calls, by call ID. */
export function subagents(s: ThreadState, runId: string): Map<string, Run> {
  const out = new Map<string, Run>();
  for (const id of s.runOrder) {
    const r = s.runs[id];
    if (r?.parent_run_id === runId && r.parent_call_id) out.set(r.parent_call_id, r);
  }
  return out;
}

/** One line of the Activity panel, with the subagents its task call started nested under it. */
export interface ActivityNode { item: Activity; subagents: { run: Run; nodes: ActivityNode[] }[] }

/**
 * A run's activity as a tree: its own events in order, each subagent's
 * (recursively) under the tool.started of the task call that started it;
 * a subagent whose call is not in the list follows at the end. The top
 * level also has the thread's events of no run; runId undefined: every
 * event, flat.
 */
export function activityTree(s: ThreadState, runId: string | undefined, limit = 150): ActivityNode[] {
  const byRun = new Map<string, Activity[]>();
  for (const a of s.activity) {
    const k = a.run_id ?? "";
    if (!byRun.has(k)) byRun.set(k, []);
    byRun.get(k)!.push(a);
  }
  const own = (id: string, depth: number) =>
    depth > 0 ? byRun.get(id) ?? [] : s.activity.filter((a) => !runId || a.run_id === runId || !a.run_id);
  const build = (id: string, depth: number): ActivityNode[] => {
    const kids = id ? subagents(s, id) : new Map<string, Run>();
    const placed = new Set<string>();
    const nodes: ActivityNode[] = own(id, depth).slice(-limit).map((item) => {
      const child = item.type === "tool.started" && item.call_id ? kids.get(item.call_id) : undefined;
      if (!child || depth > 8) return { item, subagents: [] };
      placed.add(child.id);
      return { item, subagents: [{ run: child, nodes: build(child.id, depth + 1) }] };
    });
    for (const child of kids.values()) {
      if (!placed.has(child.id) && depth <= 8) {
        nodes.push({ item: { seq: 0, type: "subagent", run_id: child.id, summary: `Subagent ${child.agent?.skill ?? ""}`, time: child.created_at ?? "" }, subagents: [{ run: child, nodes: build(child.id, depth + 1) }] });
      }
    }
    return nodes;
  };
  return build(runId ?? "", 0);
}

export const TERMINAL: RunStatus[] = ["succeeded", "failed", "cancelled"];
