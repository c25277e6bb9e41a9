// The Files panel of Settings: the local folders granted to the agent
// (read-only or writable), a form to grant one by its path on the server's
// machine, and revoking with a confirmation. Granting Kiln's own data root
// (or a folder around or inside it) is refused by the server with 409 until
// the user acknowledges it explicitly: the page shows the server's reason
// and a "Grant anyway" that sends the acknowledgement.
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api";
import { addGrant, loadGrants, removeGrant, store } from "../state/app";
import { useStore } from "../state/store";
import type { Grant } from "../types";
import { isDataRootConflict } from "../workspace";

export function GrantsPanel() {
  const s = useStore(store);
  const list = s.grants;
  const [note, setNote] = useState("");
  const head = useRef<HTMLHeadingElement>(null);
  const state = list === null ? "unavailable" : s.grantsError && !list ? "error" : list ? "loaded" : "loading";
  function revoked(g: Grant) {
    setNote(`Revoked ${g.name}: runs can no longer reach ${g.path}.`);
    head.current?.focus(); // its row, and the focused button, are gone
  }
  return (
    <section id="set-files" class="panel" aria-labelledby="grt-h" data-testid="grants" data-state={state}>
      <div class="panel-head">
        <h2 id="grt-h" tabIndex={-1} ref={head}>Files</h2>
        {list !== null && <button type="button" class="sm" data-testid="grants-refresh" onClick={() => { setNote(""); loadGrants(); }}>Refresh</button>}
      </div>
      <p>Folders on the server's machine the agent may use, under <code>/grants/&lt;name&gt;/</code> in its file tools. Read-only unless writable; writes still wait for your approval.</p>
      <p class="sr-only" role="status">{note}</p>
      {list === null ? <p class="muted" data-testid="grants-unavailable">This server has no folder grants (an older Kiln).</p>
        : s.grantsError && !list ? <p class="card-error" role="alert" data-testid="grants-error">{s.grantsError}</p>
        : !list ? <p class="muted">Loading…</p>
        : !list.length ? <p class="muted" data-testid="grants-empty">No folder is granted: runs see only their thread's own files.</p>
        : <ul class="plugins">{list.map((g) => <GrantRow key={g.id} g={g} onRevoked={revoked} />)}</ul>}
      {list !== null && <GrantForm onAdded={(g) => setNote(`Granted ${g.path} as ${g.name}.`)} />}
    </section>
  );
}

function GrantRow({ g, onRevoked }: { g: Grant; onRevoked: (g: Grant) => void }) {
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const ref = useRef<HTMLLIElement>(null);
  const back = useRef(false); // a cancelled confirmation returns focus to Revoke…
  const hid = `grt-${g.id}`;
  // As in Plugins.tsx: focus moves in the same task that shows or hides the confirmation.
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f("grant-revoke-confirm");
    else if (back.current) { back.current = false; f("grant-revoke"); }
  }, [confirm]);
  const cancel = () => { back.current = true; setConfirm(false); };
  async function revoke() {
    setBusy(true); setErr("");
    try { await removeGrant(g.id); onRevoked(g); return; }
    catch (e) { setErr(`Could not revoke ${g.name}: ${(e as Error).message}`); back.current = true; setConfirm(false); }
    setBusy(false);
  }
  return (
    <li class="plugin" ref={ref} data-testid="grant" data-grant-id={g.id} data-name={g.name} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => { if (e.key === "Escape" && confirm) { e.stopPropagation(); cancel(); } }}>
      <div class="plugin-head">
        <h3 id={hid}><code>{g.name}</code></h3>
        <span class="badges">
          <span class={`badge ${g.writable ? "b-writable" : ""}`} data-testid="grant-mode">{g.writable ? "writable" : "read-only"}</span>
          {g.data_root && <span class="badge b-action" data-testid="grant-data-root">Kiln's data root</span>}
        </span>
        <span class="plugin-actions">
          {!confirm && <button type="button" class="sm danger" data-testid="grant-revoke" disabled={busy} onClick={() => { setErr(""); setConfirm(true); }}>Revoke…<span class="sr-only"> {g.name}</span></button>}
        </span>
      </div>
      <p class="grant-path"><code data-testid="grant-path">{g.path}</code></p>
      {confirm && (
        <div class="plugin-confirm" role="group" aria-label={`Revoke ${g.name}`} data-testid="grant-confirm">
          <p>Revoke <code>{g.name}</code>? Runs lose access to <code>{g.path}</code> from their next tool call, running ones included. The folder itself is not touched.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="grant-revoke-confirm" disabled={busy} onClick={revoke}>Revoke {g.name}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="grant-action-error">{err}</p>}
    </li>
  );
}

function GrantForm({ onAdded }: { onAdded: (g: Grant) => void }) {
  const [path, setPath] = useState("");
  const [name, setName] = useState("");
  const [writable, setWritable] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  // The server's reason when the folder overlaps Kiln's data root: "Grant anyway" acknowledges it.
  const [dataRoot, setDataRoot] = useState("");
  const ack = useRef<HTMLButtonElement>(null);
  const pathInput = useRef<HTMLInputElement>(null);
  useLayoutEffect(() => { if (dataRoot) ack.current?.focus(); }, [dataRoot]);

  async function grant(acknowledge = false) {
    const p = path.trim();
    if (!p) { setErr("Type the folder's path on the server's machine."); pathInput.current?.focus(); return; }
    setBusy(true); setErr("");
    try {
      const g = await addGrant({ path: p, writable, ...(name.trim() ? { name: name.trim() } : {}), ...(acknowledge ? { acknowledge_data_root: true } : {}) });
      setPath(""); setName(""); setWritable(false); setDataRoot("");
      onAdded(g);
      pathInput.current?.focus();
    } catch (e) {
      if (e instanceof ApiError && isDataRootConflict(e.status, e.message) && !acknowledge) setDataRoot(e.message);
      else { setDataRoot(""); setErr((e as Error).message); }
    } finally { setBusy(false); }
  }
  const edit = () => { setDataRoot(""); setErr(""); };

  return (
    <form class="settings-form grant-form" aria-label="Grant a folder" data-testid="grant-form" aria-busy={busy || undefined}
      onSubmit={(e) => { e.preventDefault(); grant(); }}>
      <h3 class="form-title">Grant a folder</h3>
      <div class="field-row">
        <div class="field grow">
          <label for="grant-path">Folder path on the server's machine</label>
          <input id="grant-path" ref={pathInput} data-testid="grant-path-input" autoComplete="off" spellcheck={false} autoCapitalize="off" placeholder="/home/me/projects/site"
            value={path} onInput={(e) => { setPath((e.target as HTMLInputElement).value); edit(); }} />
        </div>
        <div class="field">
          <label for="grant-name">Name <span class="muted">(optional)</span></label>
          <input id="grant-name" data-testid="grant-name-input" autoComplete="off" spellcheck={false} autoCapitalize="off" placeholder="from the folder"
            pattern="[a-z0-9][a-z0-9_\-]{0,63}" title="Lowercase letters, digits, - and _" value={name}
            onInput={(e) => { setName((e.target as HTMLInputElement).value); edit(); }} />
        </div>
      </div>
      <label class="check" for="grant-writable">
        <input id="grant-writable" type="checkbox" data-testid="grant-writable" checked={writable} onChange={(e) => { setWritable((e.target as HTMLInputElement).checked); edit(); }} />
        Writable <span class="muted small">— the agent may change files here (each write still asks you first)</span>
      </label>
      {dataRoot && (
        <div class="plugin-confirm" role="alert" data-testid="grant-data-root-warning">
          <p>{dataRoot}</p>
          <p>The agent could then read (or, if writable, change) Kiln's database, plugins and memories. Grant it only if you mean to.</p>
          <div class="card-actions">
            <button type="button" class="danger" ref={ack} data-testid="grant-ack" disabled={busy} onClick={() => grant(true)}>Grant anyway</button>
            <button type="button" disabled={busy} onClick={() => { setDataRoot(""); pathInput.current?.focus(); }}>Cancel</button>
          </div>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="grant-error">{err}</p>}
      <div class="card-actions">
        <button type="submit" class="primary" data-testid="grant-add" disabled={busy || !!dataRoot}>Grant folder</button>
      </div>
    </form>
  );
}
