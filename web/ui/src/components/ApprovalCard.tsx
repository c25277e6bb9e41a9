import { useState } from "preact/hooks";
import { decide } from "../state/app";
import type { Interrupt } from "../types";

export type CardInterrupt = Pick<Interrupt, "id" | "thread_id" | "kind" | "tool" | "args" | "allowed_decisions" | "reason" | "status" | "decision">;

export function pretty(v: unknown): string {
  if (v === undefined) return "";
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}

const LABEL: Record<string, string> = { approve: "Approve", edit: "Edit", reject: "Reject", respond: "Respond", retry: "Retry", skip: "Skip" };
const PAST: Record<string, string> = { approve: "Approved", edit: "Edited and approved", reject: "Rejected", respond: "Answered", retry: "Retried", skip: "Skipped" };

export function ApprovalCard({ it, threadTitle, threadHref }: { it: CardInterrupt; threadTitle?: string; threadHref?: string }) {
  const [mode, setMode] = useState<"" | "edit" | "reject" | "respond">("");
  const [text, setText] = useState("");
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  const open = it.status === "open";
  const recovery = it.kind === "recovery";
  const allowed = it.allowed_decisions ?? [];

  async function send(decision: string, extra: { args?: unknown; message?: string } = {}) {
    setErr(""); setBusy(true);
    try { await decide(it, decision, extra); setMode(""); }
    catch (e) { setErr((e as Error).message); }
    finally { setBusy(false); }
  }
  function start(m: "edit" | "reject" | "respond") {
    setErr(""); setMode(m); setText(m === "edit" ? pretty(it.args) : "");
    setTimeout(() => (document.querySelector(`[data-interrupt-id="${it.id}"] .card-input`) as HTMLElement | null)?.focus(), 0);
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
  return (
    <section class={`card ${recovery ? "recovery" : ""} ${open ? "" : "resolved"}`} data-testid="approval-card" data-interrupt-id={it.id}
      data-status={it.status} data-nav={open ? "card" : undefined} tabIndex={open ? 0 : -1} aria-labelledby={titleId} onKeyDown={onKey as any}>
      <header class="card-head">
        <span class={`badge ${recovery ? "b-failed" : "b-action"}`}>{recovery ? "Recovery" : "Needs approval"}</span>
        <h3 id={titleId}><code>{it.tool}</code> {recovery ? "was cut off by a restart" : "wants to run"}</h3>
        {threadTitle && <a class="card-thread" href={threadHref}>{threadTitle}</a>}
      </header>
      {recovery && <p class="card-reason">{it.reason || "The call started before the server stopped; it may or may not have taken effect."} Retry runs it again; skip continues without it.</p>}
      {!recovery && it.reason && <p class="card-reason">{it.reason}</p>}
      <pre class="args" aria-label="Arguments">{pretty(it.args)}</pre>
      {!open && <p class="card-done" role="status">{it.status === "cancelled" ? "Cancelled with the run" : PAST[it.decision?.decision ?? ""] ?? "Decided"}{it.decision?.message ? `: ${it.decision.message}` : ""}</p>}
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
