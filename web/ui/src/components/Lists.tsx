import { useEffect, useRef, useState } from "preact/hooks";
import { decide, defaultModel, loadList, markAllRead, newThread, patchThread, setQuery, showError, store, type Row } from "../state/app";
import { useStore } from "../state/store";
import { fireLabel } from "../schedules";
import { relTime } from "../time";
import { ApprovalCard } from "./ApprovalCard";
import { AttachButton, AttachmentChips, FolderPicker, useAttachments, useFileDrop } from "./Attachments";
import { Badges, ModelPicker, Snippet, ThreadMenu } from "./common";
import { DRAG_TYPE } from "./Sidebar";

export function SearchBox({ label }: { label: string }) {
  const s = useStore(store);
  const [v, setV] = useState(s.query);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => setV(s.query), [s.query]);
  return (
    <form role="search" class="search" onSubmit={(e) => { e.preventDefault(); clearTimeout(timer.current); setQuery(v); }}>
      <label class="sr-only" for="search">{label}</label>
      <input id="search" type="search" data-testid="search" placeholder="Search  /" value={v} title={`${label} (press / to search)`}
        onInput={(e) => { const x = (e.target as HTMLInputElement).value; setV(x); clearTimeout(timer.current); timer.current = setTimeout(() => setQuery(x), 150); }}
        onKeyDown={(e) => { if (e.key === "Escape") { (e.target as HTMLInputElement).blur(); } }} />
    </form>
  );
}

/**
 * The end of a paged list: scrolling it into view loads the next page
 * (and so does its button, for the keyboard).
 */
function More({ cursor, loading, label }: { cursor?: string; loading: boolean; label: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = ref.current;
    if (!el || !cursor || typeof IntersectionObserver === "undefined") return;
    const io = new IntersectionObserver((es) => { if (es.some((x) => x.isIntersecting)) loadList({ more: true }); }, { rootMargin: "200px" });
    io.observe(el);
    return () => io.disconnect();
  }, [cursor]);
  if (!cursor) return null;
  return (
    <div class="more" ref={ref}>
      <button type="button" class="sm" data-testid="load-more" disabled={loading} onClick={() => loadList({ more: true })}>{loading ? "Loading…" : `More ${label}`}</button>
    </div>
  );
}

export function NewThreadBox() {
  const s = useStore(store);
  const [text, setText] = useState("");
  const [model, setModel] = useState("");
  const [folder, setFolder] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const att = useAttachments();
  const drop = useFileDrop(att);
  // Leaving the list with attachments not sent deletes them.
  useEffect(() => () => att.clear(true), []);
  const m = model || defaultModel(s) || "demo";
  async function go() {
    if (!text.trim()) { setErr("Write what the agent should do."); return; }
    setBusy(true); setErr("");
    try {
      const ids = await att.ready();
      await newThread(text, m, { attachments: ids, workingFolder: folder || undefined });
      setText(""); att.clear(false);
    } catch (e) { setErr((e as Error).message); } finally { setBusy(false); }
  }
  return (
    <form class={`composer new ${drop.over ? "drop" : ""}`} data-testid="new-composer" onSubmit={(e) => { e.preventDefault(); go(); }} {...drop.props}>
      <AttachmentChips att={att} />
      <label class="sr-only" for="new-text">Start a new thread</label>
      <textarea id="new-text" data-testid="composer-input" rows={1} placeholder="Start a new thread: what should the agent do?" value={text}
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} onPaste={drop.onPaste}
        onKeyDown={(e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); go(); } }} />
      <div class="composer-tools">
        <AttachButton att={att} id="new-files" />
        <FolderPicker id="new-folder-pick" value={folder} onChange={setFolder} />
        <ModelPicker id="new-model" value={m} onChange={setModel} />
        <button type="submit" class="primary" data-testid="new-thread" disabled={busy}>{busy && att.uploading ? "Uploading…" : "New thread"}</button>
      </div>
      {err && <p class="field-error" role="alert">{err}</p>}
      {drop.over && <p class="drop-hint" aria-hidden="true">Drop to attach</p>}
    </form>
  );
}

/**
 * A thread's row. folder is the name of the thread's folder, shown unless
 * the list is that folder; a thread a trigger started says which fire it
 * was (fireLabel), which tells that trigger's threads apart.
 */
function FireText({ r }: { r: Row }) {
  const f = fireLabel(r.fire, r.created!);
  return (
    <span class="row-origin" data-testid="row-trigger" title={r.fire ? `Trigger ${r.fire.name || r.fire.id}` : undefined}>
      ◷ fired <time dateTime={f.at}>{f.when}</time>{f.how && ` (${f.how})`}{f.summary && <span class="row-fire-summary">: {f.summary}</span>}
    </span>
  );
}

function ThreadItem({ r, selected, inUnread, folder }: { r: Row; selected: boolean; inUnread: boolean; folder?: string }) {
  return (
    <li class={`row ${r.unread && !inUnread ? "is-unread" : ""} ${selected ? "sel" : ""}`} data-testid="thread-item" data-thread-id={r.id}
      draggable onDragStart={(e) => { e.dataTransfer?.setData(DRAG_TYPE, r.id); e.dataTransfer?.setData("text/plain", r.title); if (e.dataTransfer) e.dataTransfer.effectAllowed = "move"; }}>
      <a class="row-link" href={`#/thread/${encodeURIComponent(r.id)}`} data-nav="row">
        <span class="row-top">
          <span class="row-title">{r.pinned && <span class="pin-mark" aria-label="pinned">📌 </span>}{r.title || "Untitled"}</span>
          <Badges status={r.status} unread={r.unread && !inUnread} openActions={r.openActions} runStatus={r.runStatus} />
          <time class="row-time" dateTime={r.time} title={new Date(r.time).toLocaleString()}>{relTime(r.time)}</time>
        </span>
        <span class="row-bottom">
          {r.source === "trigger" && r.created && <FireText r={r} />}
          {folder && <span class="row-folder" data-testid="row-folder" title={`In folder ${folder}`}><span aria-hidden="true">▸ </span>{folder}</span>}
          <span class="row-preview">{r.match && r.match.in === "message" ? <Snippet m={r.match} /> : r.preview || <span class="muted">No messages yet</span>}</span>
        </span>
      </a>
      <span class="row-tools">
        <button type="button" class={`icon pin ${r.pinned ? "on" : ""}`} aria-pressed={!!r.pinned} aria-label={r.pinned ? `Unpin ${r.title}` : `Pin ${r.title}`}
          data-testid="pin" onClick={() => patchThread(r.id, { pinned: !r.pinned }).catch(showError)}>{r.pinned ? "★" : "☆"}</button>
        <ThreadMenu thread={r.menu} />
      </span>
    </li>
  );
}

export function ListView() {
  const s = useStore(store);
  const r = s.listRoute;
  const folder = r.view === "folder" ? s.folders.find((f) => f.id === r.id) : undefined;
  const title = r.view === "unread" ? "Unread" : r.view === "folder" ? folder?.name ?? "Folder" : "All threads";
  const q = s.query.trim();
  const unread = r.view === "unread";
  let empty = "No threads yet — start one with the box above or `kiln run` in a terminal.";
  if (q) empty = `Nothing matches “${q}”. Every word must start a word of a title or a message; try fewer words.`;
  else if (unread) empty = "All caught up. Finished runs land here until you open them.";
  else if (r.view === "folder") empty = "This folder is empty. Drag a thread onto it, or use a thread's ⋯ menu → Move to.";
  const sel = s.thread?.id;
  return (
    <div class="view list-view">
      <header class="view-head">
        <h1>{title}</h1>
        {unread && (s.counts?.unread ?? 0) > 0 && !q && (
          <button type="button" class="sm" data-testid="mark-all-read" onClick={() => markAllRead().catch(showError)}>Mark all read</button>
        )}
        <SearchBox label={unread ? "Search unread threads" : `Search ${title.toLowerCase()}`} />
      </header>
      <NewThreadBox />
      {s.rowsLoaded && !s.rows.length ? (
        <p class="empty" data-testid="empty">{empty}</p>
      ) : !s.rowsLoaded && !s.rows.length ? (
        <p class="loading" role="status" data-testid="loading">Loading…</p>
      ) : (
        <>
          <ul class="rows" data-testid="thread-list" aria-label={title} aria-busy={!s.rowsLoaded}>
            {s.rows.map((row) => <ThreadItem key={row.id} r={row} selected={row.id === sel} inUnread={unread}
              folder={r.view === "folder" && r.id === row.folderId ? undefined : s.folders.find((f) => f.id === row.folderId)?.name} />)}
          </ul>
          <More cursor={s.rowsCursor} loading={s.loadingMore} label="threads" />
        </>
      )}
    </div>
  );
}

/**
 * The Action view: every open decision, newest first, searched on the
 * server, with the context of each and decisions on several at once.
 */
export function ActionView() {
  const s = useStore(store);
  const q = s.query.trim();
  const items = s.actions;
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const [bulk, setBulk] = useState<{ busy: boolean; note: string }>({ busy: false, note: "" });
  // Only what is still listed stays picked.
  const ids = new Set(items.map((a) => a.interrupt_id!));
  const chosen = [...picked].filter((id) => ids.has(id));
  const all = items.length > 0 && chosen.length === items.length;
  const toggle = (id: string, on: boolean) => setPicked((p) => { const n = new Set(p); if (on) n.add(id); else n.delete(id); return n; });
  async function decideAll(decision: "approve" | "reject") {
    const targets = items.filter((a) => chosen.includes(a.interrupt_id!));
    const ok = targets.filter((a) => (a.allowed_decisions ?? []).includes(decision));
    setBulk({ busy: true, note: "" });
    const failed: string[] = [];
    for (const a of ok) {
      try { await decide({ id: a.interrupt_id!, thread_id: a.thread_id }, decision); }
      catch (e) { failed.push(`${a.tool}: ${(e as Error).message}`); }
    }
    setPicked(new Set());
    const skipped = targets.length - ok.length;
    const done = ok.length - failed.length;
    const verb = decision === "approve" ? "Approved" : "Rejected";
    setBulk({ busy: false, note: `${verb} ${done} of ${targets.length}.` + (skipped ? ` ${skipped} do not allow “${decision}”.` : "") + (failed.length ? ` Failed: ${failed.join("; ")}` : "") });
  }
  return (
    <div class="view action-view">
      <header class="view-head">
        <h1>Action <span class="muted small">{s.counts?.action ? `${s.counts.action} waiting for you` : ""}</span></h1>
        <SearchBox label="Search decisions" />
      </header>
      {items.length > 0 && (
        <div class="bulk-bar" role="group" aria-label="Decide several">
          <label class="check"><input type="checkbox" data-testid="select-all" checked={all} onChange={(e) => setPicked(new Set((e.target as HTMLInputElement).checked ? ids : []))} /> Select all</label>
          <button type="button" class="sm primary" data-testid="bulk-approve" disabled={!chosen.length || bulk.busy} onClick={() => decideAll("approve")}>Approve {chosen.length || ""}</button>
          <button type="button" class="sm danger" data-testid="bulk-reject" disabled={!chosen.length || bulk.busy} onClick={() => decideAll("reject")}>Reject {chosen.length || ""}</button>
        </div>
      )}
      <p class="muted small bulk-note" role="status" data-testid="bulk-note">{bulk.note}</p>
      {!s.actionsLoaded ? (
        <p class="loading" role="status" data-testid="loading">Loading…</p>
      ) : !items.length ? (
        <p class="empty" data-testid="empty">{q ? `No decision matches “${q}”.` : "Nothing needs you. Tool calls held for approval show up here; runs wait until you decide."}</p>
      ) : (
        <>
          <div class="cards" data-testid="action-list" aria-label="Decisions waiting">
            {items.map((a) => (
              <ApprovalCard key={a.interrupt_id} threadTitle={a.thread_title} threadHref={`#/thread/${encodeURIComponent(a.thread_id)}`}
                context={a.assistant_text} since={a.time} match={a.match}
                picked={chosen.includes(a.interrupt_id!)} onPick={(on) => toggle(a.interrupt_id!, on)}
                it={{ id: a.interrupt_id!, thread_id: a.thread_id, kind: a.kind ?? "approval", tool: a.tool ?? "", args: a.args, allowed_decisions: a.allowed_decisions ?? [], reason: a.reason, status: "open" }} />
            ))}
          </div>
          <More cursor={s.actionsCursor} loading={s.loadingMore} label="decisions" />
        </>
      )}
    </div>
  );
}
