import { useState } from "preact/hooks";
import { newThread, patchThread, setQuery, showError, store, type Row } from "../state/app";
import { useStore } from "../state/store";
import { relTime } from "../time";
import { ApprovalCard } from "./ApprovalCard";
import { Badges, ModelPicker, ThreadMenu } from "./common";
import { DRAG_TYPE } from "./Sidebar";

export function SearchBox() {
  const s = useStore(store);
  const [v, setV] = useState(s.query);
  let t: any;
  return (
    <form role="search" class="search" onSubmit={(e) => { e.preventDefault(); setQuery(v); }}>
      <label class="sr-only" for="search">Search threads</label>
      <input id="search" type="search" data-testid="search" placeholder="Search threads  ( / )" value={v}
        onInput={(e) => { const x = (e.target as HTMLInputElement).value; setV(x); clearTimeout(t); t = setTimeout(() => setQuery(x), 150); }}
        onKeyDown={(e) => { if (e.key === "Escape") { (e.target as HTMLInputElement).blur(); } }} />
    </form>
  );
}

export function NewThreadBox() {
  const s = useStore(store);
  const [text, setText] = useState("");
  const [model, setModel] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const m = model || s.status?.default_model || "demo";
  async function go() {
    if (!text.trim()) { setErr("Write what the agent should do."); return; }
    setBusy(true); setErr("");
    try { await newThread(text, m); setText(""); } catch (e) { setErr((e as Error).message); } finally { setBusy(false); }
  }
  return (
    <form class="composer new" onSubmit={(e) => { e.preventDefault(); go(); }}>
      <label class="sr-only" for="new-text">Start a new thread</label>
      <textarea id="new-text" data-testid="composer-input" rows={1} placeholder="Start a new thread: what should the agent do?" value={text}
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        onKeyDown={(e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); go(); } }} />
      <ModelPicker id="new-model" value={m} onChange={setModel} />
      <button type="submit" class="primary" data-testid="new-thread" disabled={busy}>New thread</button>
      {err && <p class="field-error" role="alert">{err}</p>}
    </form>
  );
}

function ThreadItem({ r, selected }: { r: Row; selected: boolean }) {
  return (
    <li class={`row ${r.unread ? "is-unread" : ""} ${selected ? "sel" : ""}`} data-testid="thread-item" data-thread-id={r.id}
      draggable onDragStart={(e) => { e.dataTransfer?.setData(DRAG_TYPE, r.id); e.dataTransfer?.setData("text/plain", r.title); if (e.dataTransfer) e.dataTransfer.effectAllowed = "move"; }}>
      <a class="row-link" href={`#/thread/${encodeURIComponent(r.id)}`} data-nav="row">
        <span class="row-top">
          <span class="row-title">{r.pinned && <span class="pin-mark" aria-label="pinned">📌 </span>}{r.title || "Untitled"}</span>
          <time class="row-time" dateTime={r.time} title={new Date(r.time).toLocaleString()}>{relTime(r.time)}</time>
        </span>
        <span class="row-bottom">
          <span class="row-preview">{r.preview || <span class="muted">No messages yet</span>}</span>
          <Badges status={r.status} unread={r.unread} openActions={r.openActions} runStatus={r.runStatus} />
        </span>
      </a>
      {r.thread && (
        <span class="row-tools">
          <button type="button" class={`icon pin ${r.pinned ? "on" : ""}`} aria-pressed={!!r.pinned} aria-label={r.pinned ? `Unpin ${r.title}` : `Pin ${r.title}`}
            data-testid="pin" onClick={() => patchThread(r.id, { pinned: !r.pinned }).catch(showError)}>{r.pinned ? "★" : "☆"}</button>
          <ThreadMenu thread={r.thread} />
        </span>
      )}
    </li>
  );
}

export function ListView() {
  const s = useStore(store);
  const r = s.listRoute;
  const folder = r.view === "folder" ? s.folders.find((f) => f.id === r.id) : undefined;
  const title = r.view === "unread" ? "Unread" : r.view === "folder" ? folder?.name ?? "Folder" : "All threads";
  const q = s.query.trim();
  let empty = "No threads yet — start one with the box above or `kiln run` in a terminal.";
  if (q) empty = `Nothing matches “${q}”. Try fewer words, or clear the search.`;
  else if (r.view === "unread") empty = "All caught up. Finished runs land here until you open them.";
  else if (r.view === "folder") empty = "This folder is empty. Drag a thread onto it, or use a thread's ⋯ menu → Move to.";
  const sel = s.thread?.id;
  return (
    <div class="view list-view">
      <header class="view-head">
        <h1>{title}</h1>
        <SearchBox />
      </header>
      <NewThreadBox />
      {s.rowsLoaded && !s.rows.length ? (
        <p class="empty" data-testid="empty">{empty}</p>
      ) : !s.rowsLoaded && !s.rows.length ? (
        <p class="loading" role="status" data-testid="loading">Loading…</p>
      ) : (
        <ul class="rows" data-testid="thread-list" aria-label={title} aria-busy={!s.rowsLoaded}>
          {s.rows.map((row) => <ThreadItem key={row.id} r={row} selected={row.id === sel} />)}
        </ul>
      )}
    </div>
  );
}

export function ActionView() {
  const s = useStore(store);
  const q = s.query.trim().toLowerCase();
  const items = s.actions.filter((a) => !q || `${a.thread_title} ${a.tool} ${JSON.stringify(a.args)}`.toLowerCase().includes(q));
  return (
    <div class="view action-view">
      <header class="view-head">
        <h1>Action <span class="muted small">{s.counts?.action ? `${s.counts.action} waiting for you` : ""}</span></h1>
        <SearchBox />
      </header>
      {!s.actionsLoaded ? (
        <p class="loading" role="status" data-testid="loading">Loading…</p>
      ) : !items.length ? (
        <p class="empty" data-testid="empty">{q ? `No decision matches “${s.query.trim()}”.` : "Nothing needs you. Tool calls held for approval show up here; runs wait until you decide."}</p>
      ) : (
        <div class="cards" data-testid="action-list" aria-label="Decisions waiting">
          {items.map((a) => (
            <ApprovalCard key={a.interrupt_id} threadTitle={a.thread_title} threadHref={`#/thread/${encodeURIComponent(a.thread_id)}`}
              it={{ id: a.interrupt_id!, thread_id: a.thread_id, kind: a.kind ?? "approval", tool: a.tool ?? "", args: a.args, allowed_decisions: a.allowed_decisions ?? [], reason: a.reason, status: "open" }} />
          ))}
        </div>
      )}
    </div>
  );
}
