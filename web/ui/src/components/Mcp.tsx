// The MCP servers panel of Settings: the servers of <data>/.mcp.json with
// their state, transport, protocol and tools; Reconnect, Enable and
// Disable. While one is connecting the list is read again every 2 s.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import type { McpServer } from "../types";

const path = (id: string, rest = "") => `/mcp-servers/${encodeURIComponent(id)}${rest}`;
const STATE_CLASS: Record<string, string> = { connected: "b-enabled", connecting: "b-running", error: "b-failed", disabled: "" };

export function McpPanel() {
  const [list, setList] = useState<McpServer[]>();
  const [loadErr, setLoadErr] = useState("");
  const [note, setNote] = useState("");
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
  const state = loadErr ? "error" : list ? "loaded" : "loading";
  return (
    <section id="set-mcp" class="panel" aria-labelledby="mcp-h" data-testid="mcp" data-state={state}>
      <div class="panel-head">
        <h2 id="mcp-h" tabIndex={-1}>MCP servers</h2>
        <button type="button" class="sm" data-testid="mcp-refresh" onClick={() => { setNote(""); load(); }}>Refresh</button>
      </div>
      <p class="sr-only" role="status">{note}</p>
      {loadErr ? <p class="card-error" role="alert" data-testid="mcp-error">{loadErr}</p>
        : !list ? <p class="muted">Loading…</p>
        : !list.length ? <p class="muted" data-testid="mcp-empty">No MCP servers. They are configured in <code>.mcp.json</code> in the data root (the common <code>mcpServers</code> format); restart the server after changing it.</p>
        : <ul class="plugins">{list.map((x) => <McpRow key={x.id} x={x} onChange={put} onNote={setNote} />)}</ul>}
      {list && list.length > 0 && <p class="muted small">Servers are configured in <code>.mcp.json</code> in the data root; their tools are named <code>mcp.&lt;server&gt;.&lt;tool&gt;</code>.</p>}
    </section>
  );
}

function McpRow({ x, onChange, onNote }: { x: McpServer; onChange: (x: McpServer) => void; onNote: (s: string) => void }) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const ref = useRef<HTMLLIElement>(null);
  const refocus = useRef(false);
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
    <li class="plugin" ref={ref} data-testid="mcp-server" data-id={x.id} data-state={x.state} aria-labelledby={hid} aria-busy={busy || undefined}>
      <div class="plugin-head">
        <h3 id={hid}><code>{x.id}</code></h3>
        <span class="badges">
          <span class={`badge ${STATE_CLASS[x.state] ?? ""}`} data-testid="mcp-state">{x.state}</span>
          <span class="badge" data-testid="mcp-transport">{x.transport}</span>
          {x.protocol && <span class="badge" data-testid="mcp-protocol">MCP {x.protocol}</span>}
        </span>
        <span class="plugin-actions">
          {!off && <button type="button" class="sm" data-testid="mcp-reconnect" disabled={busy} onClick={() => act("reconnect")}>Reconnect<span class="sr-only"> {x.id}</span></button>}
          <button type="button" class="sm" data-testid="mcp-toggle" disabled={busy} onClick={() => act(off ? "enable" : "disable")}>{off ? "Enable" : "Disable"}<span class="sr-only"> {x.id}</span></button>
        </span>
      </div>
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
