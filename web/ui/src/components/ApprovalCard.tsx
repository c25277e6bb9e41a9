import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { decide } from "../state/app";
import type { Interrupt, SearchMatch } from "../types";
import { Snippet } from "./common";
import { Markdown } from "./Markdown";

export type CardInterrupt = Pick<Interrupt, "id" | "thread_id" | "kind" | "tool" | "args" | "allowed_decisions" | "reason" | "status" | "decision">;

export function pretty(v: unknown): string {
  if (v === undefined) return "";
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}

const LABEL: Record<string, string> = { approve: "Approve", edit: "Edit", reject: "Reject", respond: "Respond", retry: "Retry", skip: "Skip" };
const PAST: Record<string, string> = { approve: "Approved", edit: "Edited and approved", reject: "Rejected", respond: "Answered", retry: "Retried", skip: "Skipped" };
/** The look of a decided card's badge, by decision. */
const TONE: Record<string, string> = { approve: "b-succeeded", edit: "b-succeeded", respond: "b-succeeded", retry: "b-succeeded", reject: "b-failed", skip: "b-cancelled" };

/** How long a call has waited: "2 min", "3 h"; "" for an unknown time. */
export function waited(iso: string | undefined, now = Date.now()): string {
  const t = iso ? Date.parse(iso) : NaN;
  if (!Number.isFinite(t)) return "";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return "under a minute";
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

/** The model's words that led to a call, shortened for a card. */
function contextText(t: string): string {
  const s = t.trim();
  return s.length > 400 ? s.slice(0, 399) + "…" : s;
}

export interface CardProps {
  it: CardInterrupt;
  /** The thread's title and link (the Action view). */
  threadTitle?: string; threadHref?: string;
  /** What the model said in the turn that made the call. */
  context?: string;
  /** When the call was held. */
  since?: string;
  /** Where a search matched the card's thread. */
  match?: SearchMatch;
  /** Selection for a decision on several cards (the Action view). */
  picked?: boolean; onPick?: (on: boolean) => void;
}

export function ApprovalCard({ it, threadTitle, threadHref, context, since, match, picked, onPick }: CardProps) {
  const [mode, setMode] = useState<"" | "edit" | "reject" | "respond">("");
  const [text, setText] = useState("");
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  const ref = useRef<HTMLElement>(null);
  const open = it.status === "open";
  const recovery = it.kind === "recovery";
  const allowed = it.allowed_decisions ?? [];
  const decided = it.decision?.decision ?? "";
  // The form's field takes focus as the form shows (a key pressed at once reaches it).
  useLayoutEffect(() => { if (mode) ref.current?.querySelector<HTMLElement>(".card-input")?.focus(); }, [mode]);

  async function send(decision: string, extra: { args?: unknown; message?: string } = {}) {
    setErr(""); setBusy(true);
    try { await decide(it, decision, extra); setMode(""); }
    catch (e) { setErr((e as Error).message); }
    finally { setBusy(false); }
  }
  function start(m: "edit" | "reject" | "respond") {
    setErr(""); setMode(m); setText(m === "edit" ? pretty(it.args) : "");
  }
  function submitEdit() {
    let v: unknown;
    try { v = JSON.parse(text); } catch (e) { setErr(`Invalid JSON: ${(e as Error).message}`); return; }
    if (v === null || typeof v !== "object" || Array.isArray(v)) { setErr("The arguments must be a JSON object, e.g. {\"path\": \"a.txt\"}."); return; }
    send("edit", { args: v });
  }
  function onKey(e: KeyboardEvent) {
    if (e.key === "Escape" && mode) { e.stopPropagation(); setMode(""); setErr(""); (e.currentTarget as HTMLElement).focus(); }
  }
  const titleId = `card-title-${it.id}`;
  const badge = open
    ? <span class={`badge ${recovery ? "b-failed" : "b-action"}`} data-testid="card-state">{recovery ? "Recovery" : "Needs approval"}</span>
    : it.status === "cancelled"
      ? <span class="badge b-cancelled" data-testid="card-state">Cancelled</span>
      : <span class={`badge ${TONE[decided] ?? "b-succeeded"}`} data-testid="card-state">{PAST[decided] ?? "Decided"}</span>;
  const heading = open ? (recovery ? "was cut off by a restart" : "wants to run")
    : it.status === "cancelled" ? "was not run: the run was cancelled"
    : decided === "reject" ? "was rejected" : decided === "respond" ? "was answered instead of run" : decided === "skip" ? "was skipped" : "ran";
  return (
    <section ref={ref} class={`card ${recovery ? "recovery" : ""} ${open ? "" : "resolved"}`} data-testid="approval-card" data-interrupt-id={it.id}
      data-status={it.status} data-decision={decided || undefined} data-nav={open ? "card" : undefined} tabIndex={open ? 0 : -1} aria-labelledby={titleId} onKeyDown={onKey as any}>
      <header class="card-head">
        {onPick && open && (
          <input type="checkbox" class="card-pick" data-testid="select-card" checked={!!picked} aria-label={`Select ${it.tool} for a decision on several`}
            onChange={(e) => onPick((e.target as HTMLInputElement).checked)} />
        )}
        {badge}
        <h3 id={titleId}><code>{it.tool}</code> {heading}</h3>
        {since && open && <span class="muted small" data-testid="card-waiting" title={new Date(since).toLocaleString()}>waiting {waited(since)}</span>}
        {threadTitle && <a class="card-thread" href={threadHref} data-testid="card-thread">{threadTitle}</a>}
      </header>
      {match && <p class="card-match small">Matched in {match.in === "title" ? "the title" : "the thread"}: <Snippet m={match} /></p>}
      {context && <blockquote class="card-context" data-testid="card-context"><span class="muted small">The agent: </span><Markdown text={contextText(context)} /></blockquote>}
      {recovery && <p class="card-reason">{it.reason || "The call started before the server stopped; it may or may not have taken effect."} Retry runs it again; skip continues without it.</p>}
      {!recovery && it.reason && <p class="card-reason">{it.reason}</p>}
      <pre class="args" aria-label="Arguments">{pretty(decided === "edit" && it.decision?.args !== undefined ? it.decision.args : it.args)}</pre>
      {!open && it.decision?.message && <p class="card-done" role="status">{decided === "respond" ? "Answer" : "Reason"}: {it.decision.message}</p>}
      {open && !mode && (
        <div class="card-actions">
          {allowed.map((d) => {
            const onClick = d === "edit" || d === "reject" || d === "respond" ? () => start(d) : () => send(d);
            const kbd = d === "approve" ? "a" : d === "reject" ? "r" : "";
            return <button key={d} type="button" data-testid={d} class={d === "approve" || d === "retry" ? "primary" : d === "reject" ? "danger" : ""}
              disabled={busy} onClick={onClick} aria-keyshortcuts={kbd || undefined}>{LABEL[d] ?? d}{kbd && <kbd>{kbd}</kbd>}</button>;
          })}
        </div>
      )}
      {open && mode === "edit" && (
        <form class="card-form" onSubmit={(e) => { e.preventDefault(); submitEdit(); }}>
          <label for={`edit-${it.id}`}>New arguments (JSON object)</label>
          <textarea id={`edit-${it.id}`} class="card-input mono" data-testid="edit-args" rows={6} value={text} spellcheck={false}
            aria-invalid={err ? "true" : undefined} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
          <div class="card-actions">
            <button type="submit" class="primary" data-testid="edit-submit" disabled={busy}>Run with these arguments</button>
            <button type="button" onClick={() => { setMode(""); setErr(""); }}>Back</button>
          </div>
        </form>
      )}
      {open && mode === "reject" && (
        <form class="card-form" onSubmit={(e) => { e.preventDefault(); send("reject", text.trim() ? { message: text.trim() } : {}); }}>
          <label for={`reject-${it.id}`}>Why? (the model sees this; optional)</label>
          <input id={`reject-${it.id}`} class="card-input" data-testid="reject-message" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
          <div class="card-actions">
            <button type="submit" class="danger" data-testid="reject-submit" disabled={busy}>Reject</button>
            <button type="button" onClick={() => { setMode(""); setErr(""); }}>Back</button>
          </div>
        </form>
      )}
      {open && mode === "respond" && (
        <form class="card-form" onSubmit={(e) => { e.preventDefault(); if (!text.trim()) { setErr("Write the text the tool should return."); return; } send("respond", { message: text }); }}>
          <label for={`respond-${it.id}`}>Answer instead of the tool (becomes the tool result)</label>
          <textarea id={`respond-${it.id}`} class="card-input" data-testid="respond-text" rows={3} value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
          <div class="card-actions">
            <button type="submit" class="primary" data-testid="respond-submit" disabled={busy}>Send answer</button>
            <button type="button" onClick={() => { setMode(""); setErr(""); }}>Back</button>
          </div>
        </form>
      )}
      {err && <p class="card-error" role="alert" data-testid="card-error">{err}</p>}
    </section>
  );
}
