// The MCP servers panel of Settings: the servers of <data>/.mcp.json and
// of plugins with their state, transport, protocol and tools; Reconnect,
// Enable and Disable; Add server (a form: a command, its arguments and
// environment, or a URL and headers) and Remove (the user's servers only,
// after a confirmation). While one is connecting the list is read again
// every 2 s. Values of variables and headers are sent, never shown back.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { serverInput, type McpForm } from "../mcp";
import type { McpServer } from "../types";

const path = (id: string, rest = "") => `/mcp-servers/${encodeURIComponent(id)}${rest}`;
const STATE_CLASS: Record<string, string> = { connected: "b-enabled", connecting: "b-running", error: "b-failed", disabled: "" };

export function McpPanel() {
  const [list, setList] = useState<McpServer[]>();
  const [loadErr, setLoadErr] = useState("");
  const [note, setNote] = useState("");
  const [adding, setAdding] = useState(false);
  const head = useRef<HTMLHeadingElement>(null);
  const addBtn = useRef<HTMLButtonElement>(null);
  const back = useRef(false);
  // Closing the form puts the focus back on Add server.
  useLayoutEffect(() => { if (!adding && back.current) { back.current = false; addBtn.current?.focus(); } }, [adding]);
  const closeAdd = () => { back.current = true; setAdding(false); };
  async function load() {
    try { setList((await api<{ servers: McpServer[] | null }>("GET", "/mcp-servers")).servers ?? []); setLoadErr(""); }
    catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      setLoadErr((e as Error).message);
    }
  }
  useEffect(() => { load(); }, []);
  const connecting = !!list?.some((x) => x.state === "connecting");
  useEffect(() => {
    if (!connecting) return;
    const t = setInterval(load, 2000);
    return () => clearInterval(t);
  }, [connecting]);
  const put = (x: McpServer) => setList((l) => l?.map((y) => (y.id === x.id ? x : y)));
  function added(x: McpServer) {
    closeAdd();
    setNote(`Added ${x.id}: ${x.state}.`);
    setList((l) => [...(l ?? []).filter((y) => y.id !== x.id), x].sort((a, b) => a.id.localeCompare(b.id)));
    load();
  }
  function removed(id: string) {
    setNote(`Removed ${id}.`);
    setList((l) => l?.filter((y) => y.id !== id));
    head.current?.focus();
    load();
  }
  const state = loadErr ? "error" : list ? "loaded" : "loading";
  return (
    <section id="set-mcp" class="panel" aria-labelledby="mcp-h" data-testid="mcp" data-state={state}>
      <div class="panel-head">
        <h2 id="mcp-h" tabIndex={-1} ref={head}>MCP servers</h2>
        <span class="plugin-actions">
          <button type="button" class="sm" data-testid="mcp-refresh" onClick={() => { setNote(""); load(); }}>Refresh</button>
          {!adding && <button type="button" class="sm" ref={addBtn} data-testid="mcp-add" onClick={() => setAdding(true)}>Add server</button>}
        </span>
      </div>
      <p class="sr-only" role="status">{note}</p>
      {adding && <McpAddForm onAdded={added} onClose={closeAdd} />}
      {loadErr ? <p class="card-error" role="alert" data-testid="mcp-error">{loadErr}</p>
        : !list ? <p class="muted">Loading…</p>
        : !list.length ? <p class="muted" data-testid="mcp-empty">No MCP servers. Add one here, or in <code>.mcp.json</code> in the data root (the common <code>mcpServers</code> format; restart the server after editing the file).</p>
        : <ul class="plugins">{list.map((x) => <McpRow key={x.id} x={x} onChange={put} onNote={setNote} onRemoved={removed} />)}</ul>}
      {list && list.length > 0 && <p class="muted small">Servers are configured in <code>.mcp.json</code> in the data root (Add server and Remove change it); their tools are named <code>mcp.&lt;server&gt;.&lt;tool&gt;</code>.</p>}
    </section>
  );
}

function McpRow({ x, onChange, onNote, onRemoved }: { x: McpServer; onChange: (x: McpServer) => void; onNote: (s: string) => void; onRemoved: (id: string) => void }) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [confirm, setConfirm] = useState(false);
  const ref = useRef<HTMLLIElement>(null);
  const refocus = useRef(false);
  const back = useRef(false);
  // The confirmation takes the focus; Cancel (or a failure) gives it back to Remove.
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f("mcp-remove-confirm");
    else if (back.current) { back.current = false; f("mcp-remove"); }
  }, [confirm]);
  const cancel = () => { back.current = true; setConfirm(false); };
  async function remove() {
    setBusy(true); setErr("");
    try { await api("DELETE", path(x.id)); onRemoved(x.id); return; }
    catch (e) { setErr(`Could not remove ${x.id}: ${(e as Error).message}`); back.current = true; setConfirm(false); }
    setBusy(false);
  }
  const tools = x.tools ?? [];
  const hid = `mcp-${x.id}`;
  const off = x.state === "disabled";
  // The toggle's label changes under the focus; keep the focus on it.
  useLayoutEffect(() => { if (refocus.current) { refocus.current = false; ref.current?.querySelector<HTMLElement>("[data-testid=mcp-toggle]")?.focus(); } }, [off]);
  async function act(what: "reconnect" | "enable" | "disable") {
    setBusy(true); setErr("");
    try {
      let st = await api<McpServer>("POST", path(x.id, `/${what}`));
      // The server acts in the background and may answer with the state
      // before the change: read it again (every 250 ms, for up to 10 s)
      // until it shows the change.
      let i = 0;
      const done = (y: McpServer): boolean => what === "disable" ? y.state === "disabled" : what === "enable" ? y.state !== "disabled" : i > 0;
      // A reconnect is read once more after a moment; connecting is polled by the panel.
      for (; i < 40 && !done(st); i++) {
        await new Promise((r) => setTimeout(r, 250));
        st = await api<McpServer>("GET", path(x.id));
      }
      if (what !== "reconnect") refocus.current = true;
      onChange(st);
      onNote(`${x.id}: ${st.state}.`);
    } catch (e) { setErr(`Could not ${what} ${x.id}: ${(e as Error).message}`); }
    finally { setBusy(false); }
  }
  return (
    <li class="plugin" ref={ref} data-testid="mcp-server" data-id={x.id} data-state={x.state} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => { if (confirm && e.key === "Escape") { e.stopPropagation(); cancel(); } }}>
      <div class="plugin-head">
        <h3 id={hid}><code>{x.id}</code></h3>
        <span class="badges">
          <span class={`badge ${STATE_CLASS[x.state] ?? ""}`} data-testid="mcp-state">{x.state}</span>
          <span class="badge" data-testid="mcp-transport">{x.transport}</span>
          {x.protocol && <span class="badge" data-testid="mcp-protocol">MCP {x.protocol}</span>}
          {x.plugin && <span class="badge" data-testid="mcp-plugin">plugin {x.plugin}</span>}
        </span>
        <span class="plugin-actions">
          {!off && <button type="button" class="sm" data-testid="mcp-reconnect" disabled={busy} onClick={() => act("reconnect")}>Reconnect<span class="sr-only"> {x.id}</span></button>}
          <button type="button" class="sm" data-testid="mcp-toggle" disabled={busy} onClick={() => act(off ? "enable" : "disable")}>{off ? "Enable" : "Disable"}<span class="sr-only"> {x.id}</span></button>
          {!x.plugin && !confirm && <button type="button" class="sm danger" data-testid="mcp-remove" disabled={busy}
            onClick={() => { setErr(""); setConfirm(true); }}>Remove…<span class="sr-only"> {x.id}</span></button>}
        </span>
      </div>
      {confirm && (
        <div class="plugin-confirm" role="group" aria-label={`Remove ${x.id}`} data-testid="mcp-confirm">
          <p>Remove <code>{x.id}</code>? It is disconnected, runs lose its tools, and its entry (with its variables and headers) is deleted from <code>.mcp.json</code>.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="mcp-remove-confirm" disabled={busy} onClick={remove}>Remove {x.id}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {x.error && <pre class="card-error mcp-error" data-testid="mcp-server-error">{x.error}</pre>}
      {err && <p class="card-error" role="alert" data-testid="mcp-action-error">{err}</p>}
      <details class="plugin-more" data-testid="mcp-tools">
        <summary>Tools ({tools.length})</summary>
        {tools.length ? <ul>{tools.map((t) => <li key={t}><code>{t}</code></li>)}</ul>
          : <p class="muted small">{x.state === "connected" ? "This server offers no tools." : "Its tools are listed while it is connected."}</p>}
      </details>
    </li>
  );
}

const EMPTY: McpForm = { id: "", transport: "stdio", command: "", args: "", env: "", cwd: "", url: "", headers: "", trust: false, disabled: false, timeout: "" };

/** The Add server form: the server is connected in the background and written into .mcp.json. */
function McpAddForm({ onAdded, onClose }: { onAdded: (x: McpServer) => void; onClose: () => void }) {
  const [f, setF] = useState<McpForm>(EMPTY);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const first = useRef<HTMLInputElement>(null);
  useLayoutEffect(() => { first.current?.focus(); }, []);
  const set = <K extends keyof McpForm>(k: K, v: McpForm[K]) => setF((o) => ({ ...o, [k]: v }));
  const text = (k: keyof McpForm) => (e: Event) => set(k, (e.target as HTMLInputElement | HTMLTextAreaElement).value as never);
  const stdio = f.transport === "stdio";
  async function save() {
    const { input, error } = serverInput(f);
    if (error) { setErr(error); return; }
    setBusy(true); setErr("");
    try { onAdded(await api<McpServer>("POST", "/mcp-servers", input)); }
    catch (e) { setErr(`Could not add ${input!.id || "the server"}: ${(e as Error).message}`); setBusy(false); }
  }
  const plain = { autoComplete: "off", spellcheck: false, autoCapitalize: "off" } as const;
  return (
    <form class="settings-form" aria-label="Add an MCP server" data-testid="mcp-form" aria-busy={busy || undefined}
      onSubmit={(e) => { e.preventDefault(); save(); }}
      onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); onClose(); } }}>
      <div class="field-row">
        <div class="field">
          <label for="mcp-new-id">ID</label>
          <input id="mcp-new-id" ref={first} data-testid="mcp-id" {...plain} placeholder="github" required value={f.id} onInput={text("id")}
            aria-describedby="mcp-new-id-hint" />
        </div>
        <div class="field">
          <label for="mcp-new-type">Transport</label>
          <select id="mcp-new-type" data-testid="mcp-type" value={f.transport} onChange={(e) => set("transport", (e.target as HTMLSelectElement).value as McpForm["transport"])}>
            <option value="stdio">stdio (a command)</option>
            <option value="http">HTTP (streamable)</option>
            <option value="sse">HTTP+SSE (older)</option>
          </select>
        </div>
      </div>
      <p id="mcp-new-id-hint" class="muted small">Lowercase letters, digits, - and _; its tools are named <code>mcp.&lt;id&gt;.&lt;tool&gt;</code>.</p>
      {stdio ? (
        <>
          <div class="field">
            <label for="mcp-new-cmd">Command</label>
            <input id="mcp-new-cmd" data-testid="mcp-command" {...plain} placeholder="npx" value={f.command} onInput={text("command")} />
          </div>
          <div class="field">
            <label for="mcp-new-args">Arguments <span class="muted">(one per line)</span></label>
            <textarea id="mcp-new-args" class="mono-area" data-testid="mcp-args" rows={3} {...plain} placeholder={"-y\n@modelcontextprotocol/server-github"} value={f.args} onInput={text("args")} />
          </div>
          <div class="field">
            <label for="mcp-new-env">Environment <span class="muted">(KEY=VALUE lines)</span></label>
            <textarea id="mcp-new-env" class="mono-area" data-testid="mcp-env" rows={2} {...plain} placeholder={"GITHUB_TOKEN=${GITHUB_TOKEN}"} value={f.env} onInput={text("env")}
              aria-describedby="mcp-new-secret" />
          </div>
          <div class="field">
            <label for="mcp-new-cwd">Working directory <span class="muted">(optional, relative to the data root)</span></label>
            <input id="mcp-new-cwd" data-testid="mcp-cwd" {...plain} value={f.cwd} onInput={text("cwd")} />
          </div>
        </>
      ) : (
        <>
          <div class="field">
            <label for="mcp-new-url">URL</label>
            <input id="mcp-new-url" type="url" data-testid="mcp-url" {...plain} placeholder="https://example.com/mcp" value={f.url} onInput={text("url")} />
          </div>
          <div class="field">
            <label for="mcp-new-headers">Headers <span class="muted">(Name: value lines)</span></label>
            <textarea id="mcp-new-headers" class="mono-area" data-testid="mcp-headers" rows={2} {...plain} placeholder={"Authorization: Bearer ${API_TOKEN}"} value={f.headers} onInput={text("headers")}
              aria-describedby="mcp-new-secret" />
          </div>
        </>
      )}
      <p id="mcp-new-secret" class="muted small"><code>${"{NAME}"}</code> takes the server's environment variable NAME when connecting. Values are kept in <code>.mcp.json</code> and never shown again.</p>
      <div class="field">
        <label for="mcp-new-timeout">Call timeout <span class="muted">(seconds; blank: the server's default, 10 minutes)</span></label>
        <input id="mcp-new-timeout" data-testid="mcp-timeout" inputMode="decimal" {...plain} placeholder="600" value={f.timeout} onInput={text("timeout")} />
      </div>
      <label class="check" for="mcp-new-trust">
        <input id="mcp-new-trust" type="checkbox" data-testid="mcp-trust" checked={f.trust} onChange={(e) => set("trust", (e.target as HTMLInputElement).checked)} />
        Trust all its tools <span class="muted small">— none waits for approval (by default those not marked read-only do)</span>
      </label>
      <label class="check" for="mcp-new-disabled">
        <input id="mcp-new-disabled" type="checkbox" data-testid="mcp-disabled" checked={f.disabled} onChange={(e) => set("disabled", (e.target as HTMLInputElement).checked)} />
        Add it disabled
      </label>
      {err && <p class="card-error" role="alert" data-testid="mcp-form-error">{err}</p>}
      <div class="card-actions">
        <button type="submit" class="primary" data-testid="mcp-form-save" disabled={busy}>Add</button>
        <button type="button" disabled={busy} onClick={onClose}>Cancel</button>
      </div>
    </form>
  );
}
