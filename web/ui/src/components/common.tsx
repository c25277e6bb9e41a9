import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { defaultModel, store, patchThread, deleteThread, markRead, showError } from "../state/app";
import { useStore } from "../state/store";
import { modelGroups, type ModelOption } from "../format";
import type { SearchMatch, Thread } from "../types";

/** The text of a caught error. */
export const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

// One clock, ticking each second, for every countdown on screen.
const tickers = new Set<() => void>();
let tickTimer: ReturnType<typeof setInterval> | undefined;

/** The time now, again each second while mounted: what makes countdowns count down. */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const f = () => setNow(Date.now());
    tickers.add(f);
    tickTimer ??= setInterval(() => tickers.forEach((g) => g()), 1000);
    return () => { tickers.delete(f); if (!tickers.size && tickTimer) { clearInterval(tickTimer); tickTimer = undefined; } };
  }, []);
  return now;
}

/** The model choice: GET /models grouped by provider when the server has it, else the default, demo and scripted. */
export function ModelPicker({ value, onChange, id }: { value: string; onChange: (v: string) => void; id: string }) {
  const s = useStore(store);
  const def = defaultModel(s);
  const groups = modelGroups(s.models, def, value);
  const opt = (o: ModelOption) => <option key={o.value} value={o.value}>{o.label}</option>;
  return (
    <>
      <label class="sr-only" for={id}>Model</label>
      <select id={id} data-testid="composer-model" value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
        {groups.map((g) => (g.label ? <optgroup key={g.label} label={g.label}>{g.options.map(opt)}</optgroup> : g.options.map(opt)))}
      </select>
    </>
  );
}

export function Badges({ status, unread, openActions, runStatus }: { status?: string; unread?: boolean; openActions?: number; runStatus?: string }) {
  return (
    <span class="badges">
      {status === "running" && <span class="badge b-running"><span class="dot" aria-hidden="true" />running</span>}
      {(openActions ?? 0) > 0 && <span class="badge b-action">needs action{openActions! > 1 ? ` (${openActions})` : ""}</span>}
      {(status === "failed" || runStatus === "failed") && <span class="badge b-failed">failed</span>}
      {(status === "cancelled" || runStatus === "cancelled") && <span class="badge b-cancelled">cancelled</span>}
      {unread && <span class="badge b-unread">unread</span>}
    </span>
  );
}

/** The per-thread menu: pin, mark read, move to a folder, delete. */
export function ThreadMenu({ thread, onRename }: { thread: Pick<Thread, "id" | "pinned" | "folder_id" | "unread">; onRename?: () => void }) {
  const s = useStore(store);
  const [open, setOpen] = useState(false);
  const [confirm, setConfirm] = useState(false);
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!open) return;
    const close = (e: Event) => { if (ref.current && !ref.current.contains(e.target as Node)) { setOpen(false); setConfirm(false); } };
    document.addEventListener("mousedown", close);
    return () => document.removeEventListener("mousedown", close);
  }, [open]);
  useEffect(() => { if (open) (ref.current?.querySelector("[role=menuitem]") as HTMLElement | null)?.focus(); }, [open]);
  const run = (f: () => Promise<unknown>) => async () => { setOpen(false); setConfirm(false); try { await f(); } catch (e) { showError(e); } };
  function onKey(e: KeyboardEvent) {
    if (e.key === "Escape" && open) { e.stopPropagation(); setOpen(false); (ref.current?.querySelector("button") as HTMLElement)?.focus(); }
    if ((e.key === "ArrowDown" || e.key === "ArrowUp") && open) {
      e.preventDefault(); e.stopPropagation();
      const items = [...(ref.current?.querySelectorAll<HTMLElement>("[role=menuitem]") ?? [])];
      const i = items.indexOf(document.activeElement as HTMLElement);
      items[(i + (e.key === "ArrowDown" ? 1 : -1) + items.length) % items.length]?.focus();
    }
  }
  return (
    <div class="menu-wrap" ref={ref} onKeyDown={onKey as any}>
      <button type="button" class="icon" data-testid="thread-menu" aria-haspopup="menu" aria-expanded={open} aria-label="Thread actions"
        onClick={() => { setOpen(!open); setConfirm(false); }}>⋯</button>
      {open && (
        <div class="menu" role="menu" aria-label="Thread actions">
          <button role="menuitem" type="button" onClick={run(() => patchThread(thread.id, { pinned: !thread.pinned }))}>{thread.pinned ? "Unpin" : "Pin to top"}</button>
          {onRename && <button role="menuitem" type="button" onClick={() => { setOpen(false); onRename(); }}>Rename…</button>}
          {thread.unread && <button role="menuitem" type="button" onClick={run(() => markRead(thread.id))}>Mark read</button>}
          <div class="menu-label" id={`mv-${thread.id}`}>Move to</div>
          <button role="menuitem" type="button" data-move-folder="" aria-current={!thread.folder_id} onClick={run(() => patchThread(thread.id, { folder_id: null }))}>No folder</button>
          {s.folders.map((f) => (
            <button key={f.id} role="menuitem" type="button" data-move-folder={f.id} aria-current={thread.folder_id === f.id}
              onClick={run(() => patchThread(thread.id, { folder_id: f.id }))}>{f.name}</button>
          ))}
          <div class="menu-sep" />
          {!confirm
            ? <button role="menuitem" type="button" class="danger-text" onClick={() => setConfirm(true)}>Delete…</button>
            : <button role="menuitem" type="button" class="danger-text" onClick={run(() => deleteThread(thread.id))}>Really delete this thread</button>}
        </div>
      )}
    </div>
  );
}

/** A search match's snippet: the matching words marked. */
export function Snippet({ m }: { m: SearchMatch }) {
  return (
    <span class="snippet" data-testid="snippet" data-in={m.in}>
      {m.snippet.map((p, i) => (p.match ? <mark key={i}>{p.text}</mark> : <span key={i}>{p.text}</span>))}
    </span>
  );
}

/**
 * Modal is a modal dialog: the native <dialog> shown with showModal, so
 * the page behind it is inert, Tab stays inside and the first control
 * (or the one marked autofocus) takes the focus. Escape calls onClose,
 * except while busy; closing gives the focus back to what had it when
 * the dialog opened. labelledBy names the dialog's heading.
 */
export function Modal({ labelledBy, onClose, busy, testid, wide, children }: {
  labelledBy: string; onClose: () => void; busy?: boolean; testid?: string; wide?: boolean; children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const closing = useRef(false);
  useLayoutEffect(() => {
    const d = ref.current!;
    const opener = document.activeElement as HTMLElement | null;
    d.showModal();
    return () => {
      closing.current = true;
      if (d.open) d.close();
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  return (
    <dialog ref={ref} class={`dialog modal ${wide ? "wide" : ""}`} aria-labelledby={labelledBy} data-testid={testid} aria-busy={busy || undefined}
      onCancel={(e) => { e.preventDefault(); if (!busy) onClose(); }}
      // The browser may close the dialog itself (a second Escape while busy): follow it.
      onClose={() => { if (!closing.current) onClose(); }}>
      {children}
    </dialog>
  );
}
