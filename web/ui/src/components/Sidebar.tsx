import { useState } from "preact/hooks";
import { createFolder, deleteFolder, moveFolder, patchThread, renameFolder, showError, store } from "../state/app";
import { useStore } from "../state/store";
import { isListRoute } from "../route";
import type { Folder } from "../types";

export const DRAG_TYPE = "application/x-kiln-thread";

function FolderItem({ f, first, last, active }: { f: Folder; first: boolean; last: boolean; active: boolean }) {
  const [renaming, setRenaming] = useState(false);
  const [name, setName] = useState(f.name);
  const [confirm, setConfirm] = useState(false);
  const [over, setOver] = useState(false);
  const [err, setErr] = useState("");
  async function save() {
    const n = name.trim();
    if (!n || n === f.name) { setRenaming(false); return; }
    try { await renameFolder(f.id, n); setRenaming(false); setErr(""); } catch (e) { setErr((e as Error).message); }
  }
  return (
    <li data-testid="folder-item" data-folder-id={f.id} class={`folder ${over ? "drop" : ""}`}
      onDragOver={(e) => { if (e.dataTransfer?.types.includes(DRAG_TYPE)) { e.preventDefault(); e.dataTransfer.dropEffect = "move"; setOver(true); } }}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => { e.preventDefault(); setOver(false); const id = e.dataTransfer?.getData(DRAG_TYPE); if (id) patchThread(id, { folder_id: f.id }).catch(showError); }}>
      {renaming ? (
        <form class="folder-form" onSubmit={(e) => { e.preventDefault(); save(); }}>
          <label class="sr-only" for={`rn-${f.id}`}>Folder name</label>
          <input id={`rn-${f.id}`} data-testid="folder-rename-input" value={name} maxLength={80} autoFocus
            onInput={(e) => setName((e.target as HTMLInputElement).value)}
            onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); setRenaming(false); setName(f.name); } }} onBlur={save} />
          {err && <span class="field-error" role="alert">{err}</span>}
        </form>
      ) : (
        <>
          <a href={`#/folder/${encodeURIComponent(f.id)}`} class={`nav-link ${active ? "active" : ""}`} aria-current={active ? "page" : undefined}>
            <span class="ico" aria-hidden="true">▸</span><span class="label">{f.name}</span>
          </a>
          <span class="folder-tools">
            <button type="button" class="icon sm" aria-label={`Rename folder ${f.name}`} onClick={() => { setName(f.name); setRenaming(true); }}>✎</button>
            <button type="button" class="icon sm" aria-label={`Move folder ${f.name} up`} disabled={first} onClick={() => moveFolder(f.id, -1).catch(showError)}>↑</button>
            <button type="button" class="icon sm" aria-label={`Move folder ${f.name} down`} disabled={last} onClick={() => moveFolder(f.id, 1).catch(showError)}>↓</button>
            {confirm
              ? <button type="button" class="sm danger" onClick={() => deleteFolder(f.id).catch(showError)} onBlur={() => setConfirm(false)}>Delete?</button>
              : <button type="button" class="icon sm" aria-label={`Delete folder ${f.name}`} onClick={() => setConfirm(true)}>✕</button>}
          </span>
        </>
      )}
    </li>
  );
}

export function Sidebar() {
  const s = useStore(store);
  const [adding, setAdding] = useState(false);
  const [name, setName] = useState("");
  const [err, setErr] = useState("");
  const lr = isListRoute(s.route) ? s.route : null;
  const cur = (v: string) => (lr?.view === v ? "page" : undefined);
  async function add() {
    const n = name.trim();
    if (!n) { setAdding(false); return; }
    try { await createFolder(n); setName(""); setAdding(false); setErr(""); } catch (e) { setErr((e as Error).message); }
  }
  return (
    <nav class="side" aria-label="Inbox">
      <div class="brand"><span class="logo" aria-hidden="true">◆</span> Kiln</div>
      <ul class="views">
        <li><a href="#/all" data-testid="nav-all" class="nav-link" aria-current={cur("all")}><span class="ico" aria-hidden="true">≡</span><span class="label">All</span></a></li>
        <li><a href="#/unread" data-testid="nav-unread" class="nav-link" aria-current={cur("unread")}><span class="ico" aria-hidden="true">●</span><span class="label">Unread</span>
          <span class="count" data-testid="count-unread" aria-label={s.counts ? `${s.counts.unread} unread` : undefined}>{s.counts?.unread}</span></a></li>
        <li><a href="#/action" data-testid="nav-action" class="nav-link" aria-current={cur("action")}><span class="ico" aria-hidden="true">!</span><span class="label">Action</span>
          <span class={`count ${s.counts?.action ? "hot" : ""}`} data-testid="count-action" aria-label={s.counts ? `${s.counts.action} need action` : undefined}>{s.counts?.action}</span></a></li>
      </ul>
      <div class="side-head">
        <h2 id="folders-h">Folders</h2>
        <button type="button" class="icon sm" data-testid="folder-new" aria-label="New folder" onClick={() => { setAdding(true); setErr(""); }}>+</button>
      </div>
      <ul class="folders" aria-labelledby="folders-h">
        {s.folders.map((f, i) => <FolderItem key={f.id} f={f} first={i === 0} last={i === s.folders.length - 1} active={lr?.view === "folder" && lr.id === f.id} />)}
        {s.foldersLoaded && !s.folders.length && !adding && <li class="muted small pad">Folders group threads; they never hide anything from Unread or Action.</li>}
      </ul>
      {adding && (
        <form class="folder-form" onSubmit={(e) => { e.preventDefault(); add(); }}>
          <label class="sr-only" for="new-folder">Folder name</label>
          <input id="new-folder" data-testid="folder-name-input" placeholder="Folder name" value={name} maxLength={80} autoFocus
            onInput={(e) => setName((e.target as HTMLInputElement).value)}
            onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); setAdding(false); setName(""); } }} />
          {err && <span class="field-error" role="alert">{err}</span>}
        </form>
      )}
      <div class="side-foot">
        <a href="#/triggers" data-testid="nav-schedules" class="nav-link" aria-current={s.route.view === "triggers" ? "page" : undefined}><span class="ico" aria-hidden="true">◷</span><span class="label">Triggers</span></a>
        <a href="#/sandboxes" data-testid="nav-sandboxes" class="nav-link" aria-current={s.route.view === "sandboxes" ? "page" : undefined}><span class="ico" aria-hidden="true">▣</span><span class="label">Sandboxes</span></a>
        <a href="#/settings" data-testid="nav-settings" class="nav-link" aria-current={s.route.view === "settings" ? "page" : undefined}><span class="ico" aria-hidden="true">⚙</span><span class="label">Settings</span></a>
        <button type="button" class="link small" onClick={() => document.dispatchEvent(new CustomEvent("kiln:shortcuts"))}>Keyboard shortcuts <kbd>?</kbd></button>
      </div>
    </nav>
  );
}
