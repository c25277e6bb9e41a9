// The Memories panel of Settings: the long-term memory files (markdown
// under /memories/ in the agent's file tools) with their previews; one
// opens in an editor (saved with PUT), a new one takes a name and its
// content, and deleting asks first. While memory is off in the settings,
// the panel says so and offers to turn it on.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { saveSettings, store } from "../state/app";
import { useStore } from "../state/store";
import { relTime } from "../time";
import type { Memory } from "../types";
import { formatBytes, memoryName } from "../workspace";

const path = (name: string) => `/memories/${encodeURIComponent(name)}`;
const byName = (a: Memory, b: Memory) => a.name.localeCompare(b.name);
/** The start of a memory's content on one line, as the list's preview. */
const previewOf = (content: string) => content.replace(/\s+/g, " ").trim().slice(0, 120);

export function MemoriesPanel() {
  const s = useStore(store);
  const [list, setList] = useState<Memory[]>();
  const [loadErr, setLoadErr] = useState("");
  const [creating, setCreating] = useState(false);
  const [note, setNote] = useState("");
  const [onErr, setOnErr] = useState("");
  const head = useRef<HTMLHeadingElement>(null);
  const newBtn = useRef<HTMLButtonElement>(null);
  const back = useRef(false); // the form closed: New memory gets the focus back
  useLayoutEffect(() => { if (!creating && back.current) { back.current = false; newBtn.current?.focus(); } }, [creating]);
  const closeNew = () => { back.current = true; setCreating(false); };

  async function load() {
    try { setList(((await api<{ memories: Memory[] }>("GET", "/memories")).memories ?? []).sort(byName)); setLoadErr(""); }
    catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      setLoadErr((e as Error).message);
    }
  }
  useEffect(() => { load(); }, []);

  const put = (m: Memory) => setList((l) => [...(l ?? []).filter((x) => x.name !== m.name), { ...m, preview: m.preview ?? previewOf(m.content ?? ""), content: undefined }].sort(byName));
  function deleted(m: Memory) {
    setList((l) => l?.filter((x) => x.name !== m.name));
    setNote(`Deleted ${m.name}.`);
    head.current?.focus();
  }
  async function turnOn() {
    setOnErr("");
    try { await saveSettings({ memory: true }); setNote("Long-term memory is on."); }
    catch (e) { setOnErr((e as Error).message); }
  }
  const off = s.settings && !s.settings.memory;
  const state = loadErr ? "error" : list ? "loaded" : "loading";
  return (
    <section id="set-memories" class="panel" aria-labelledby="mem-h" data-testid="memories" data-state={state}>
      <div class="panel-head">
        <h2 id="mem-h" tabIndex={-1} ref={head}>Memories</h2>
        <span class="plugin-actions">
          <button type="button" class="sm" data-testid="memories-refresh" onClick={() => { setNote(""); load(); }}>Refresh</button>
          {!creating && <button type="button" class="sm" ref={newBtn} data-testid="memory-new" onClick={() => setCreating(true)}>New memory</button>}
        </span>
      </div>
      <p>Markdown notes that last across threads: runs find them under <code>/memories/</code> and may add to them.</p>
      {off && (
        <p class="note" data-testid="memory-off">
          Memory is off: runs do not see these files. <button type="button" class="sm" data-testid="memory-enable" onClick={turnOn}>Turn memory on</button>
        </p>
      )}
      {onErr && <p class="card-error" role="alert">{onErr}</p>}
      <p class="sr-only" role="status">{note}</p>
      {creating && <NewMemory onCreated={(m) => { put(m); closeNew(); setNote(`Created ${m.name}.`); }} onClose={closeNew} />}
      {loadErr ? <p class="card-error" role="alert" data-testid="memories-error">{loadErr}</p>
        : !list ? <p class="muted">Loading…</p>
        : !list.length ? <p class="muted" data-testid="memories-empty">No memories yet.</p>
        : <ul class="plugins">{list.map((m) => <MemoryRow key={m.name} m={m} onSaved={put} onDeleted={deleted} />)}</ul>}
    </section>
  );
}

function MemoryRow({ m, onSaved, onDeleted }: { m: Memory; onSaved: (m: Memory) => void; onDeleted: (m: Memory) => void }) {
  const [editing, setEditing] = useState(false);
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const ref = useRef<HTMLLIElement>(null);
  const back = useRef(""); // the button that gets the focus back when the editor or the confirmation closes
  const hid = `mem-${m.name}`;
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f("memory-delete-confirm");
    else if (back.current) { f(back.current); back.current = ""; }
  }, [confirm, editing]);
  const closeEditor = () => { back.current = "memory-edit"; setEditing(false); };
  const cancel = () => { back.current = "memory-delete"; setConfirm(false); };
  async function del() {
    setBusy(true); setErr("");
    try { await api("DELETE", path(m.name)); onDeleted(m); return; }
    catch (e) { setErr(`Could not delete ${m.name}: ${(e as Error).message}`); back.current = "memory-delete"; setConfirm(false); }
    setBusy(false);
  }
  return (
    <li class="plugin memory" ref={ref} data-testid="memory" data-name={m.name} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => {
        if (e.key !== "Escape") return;
        if (confirm) { e.stopPropagation(); cancel(); }
        else if (editing) { e.stopPropagation(); closeEditor(); }
      }}>
      <div class="plugin-head">
        <h3 id={hid}><code>{m.name}</code></h3>
        <span class="muted small">{formatBytes(m.size)}{m.updated_at ? ` · ${relTime(m.updated_at)}` : ""}</span>
        <span class="plugin-actions">
          <button type="button" class="sm" data-testid="memory-edit" aria-expanded={editing}
            onClick={() => { if (editing) closeEditor(); else { setConfirm(false); setErr(""); setEditing(true); } }}>Edit<span class="sr-only"> {m.name}</span></button>
          {!confirm && <button type="button" class="sm danger" data-testid="memory-delete" disabled={busy}
            onClick={() => { setErr(""); setEditing(false); setConfirm(true); }}>Delete…<span class="sr-only"> {m.name}</span></button>}
        </span>
      </div>
      {!editing && <p class="plugin-desc memory-preview" data-testid="memory-preview">{m.preview || <span class="muted">(empty)</span>}</p>}
      {confirm && (
        <div class="plugin-confirm" role="group" aria-label={`Delete ${m.name}`} data-testid="memory-confirm">
          <p>Delete <code>{m.name}</code>? Runs no longer find it; this cannot be undone.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="memory-delete-confirm" disabled={busy} onClick={del}>Delete {m.name}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="memory-action-error">{err}</p>}
      {editing && <MemoryEditor name={m.name} onSaved={onSaved} onClose={closeEditor} />}
    </li>
  );
}

function MemoryEditor({ name, onSaved, onClose }: { name: string; onSaved: (m: Memory) => void; onClose: () => void }) {
  const [content, setContent] = useState<string>();
  const [loadErr, setLoadErr] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [saved, setSaved] = useState("");
  const area = useRef<HTMLTextAreaElement>(null);
  const id = `mem-edit-${name}`;
  useEffect(() => {
    let stale = false;
    api<Memory>("GET", path(name))
      .then((m) => { if (!stale) setContent(m.content ?? ""); })
      .catch((e) => { if (!stale) setLoadErr((e as Error).message); });
    return () => { stale = true; };
  }, [name]);
  useLayoutEffect(() => { if (content !== undefined) area.current?.focus(); }, [content === undefined]);
  async function save() {
    setBusy(true); setErr(""); setSaved("");
    try {
      const m = await api<Memory>("PUT", path(name), { content: content ?? "" });
      setSaved("Saved.");
      onSaved({ ...m, content: m.content ?? content });
    } catch (e) { setErr((e as Error).message); }
    finally { setBusy(false); }
  }
  if (loadErr) return <p class="card-error" role="alert" data-testid="memory-load-error">{loadErr}</p>;
  if (content === undefined) return <p class="muted small">Loading…</p>;
  return (
    <form class="settings-form" aria-label={`Edit ${name}`} data-testid="memory-editor" aria-busy={busy || undefined} onSubmit={(e) => { e.preventDefault(); save(); }}>
      <div class="field">
        <label for={id}>Content of {name} (markdown)</label>
        <textarea id={id} ref={area} class="mono-area" data-testid="memory-content" rows={10} value={content} spellcheck={false}
          onInput={(e) => { setContent((e.target as HTMLTextAreaElement).value); setSaved(""); }}
          onKeyDown={(e) => { if (e.key === "s" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); save(); } }} />
      </div>
      {err && <p class="card-error" role="alert" data-testid="memory-error">{err}</p>}
      <div class="card-actions">
        <button type="submit" class="primary" data-testid="memory-save" disabled={busy}>Save</button>
        <button type="button" disabled={busy} onClick={onClose}>Close</button>
        <span class="ok small provider-saved" role="status" data-testid="memory-saved">{saved}</span>
      </div>
    </form>
  );
}

function NewMemory({ onCreated, onClose }: { onCreated: (m: Memory) => void; onClose: () => void }) {
  const [name, setName] = useState("");
  const [content, setContent] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const first = useRef<HTMLInputElement>(null);
  useLayoutEffect(() => { first.current?.focus(); }, []);
  async function create() {
    const n = memoryName(name);
    if (!n) { setErr("A memory's name is letters, digits, dots, dashes and underscores, ending in .md (for example preferences.md)."); first.current?.focus(); return; }
    setBusy(true); setErr("");
    try { onCreated({ ...(await api<Memory>("POST", "/memories", { name: n, content })), content }); }
    catch (e) { setErr((e as Error).message); setBusy(false); }
  }
  return (
    <form class="settings-form" aria-label="New memory" data-testid="memory-create-form" aria-busy={busy || undefined}
      onSubmit={(e) => { e.preventDefault(); create(); }} onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); onClose(); } }}>
      <div class="field">
        <label for="mem-new-name">File name</label>
        <input id="mem-new-name" ref={first} data-testid="memory-name" autoComplete="off" spellcheck={false} autoCapitalize="off" placeholder="preferences.md"
          aria-describedby="mem-new-name-hint" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <p id="mem-new-name-hint" class="muted small">.md is added when left out.</p>
      </div>
      <div class="field">
        <label for="mem-new-content">Content (markdown)</label>
        <textarea id="mem-new-content" class="mono-area" data-testid="memory-new-content" rows={6} value={content} spellcheck={false}
          onInput={(e) => setContent((e.target as HTMLTextAreaElement).value)} />
      </div>
      {err && <p class="card-error" role="alert" data-testid="memory-create-error">{err}</p>}
      <div class="card-actions">
        <button type="submit" class="primary" data-testid="memory-create" disabled={busy}>Create</button>
        <button type="button" disabled={busy} onClick={onClose}>Cancel</button>
      </div>
    </form>
  );
}
