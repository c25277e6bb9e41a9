// The Plugins panel of Settings: lists the installed plugins (built-ins
// included), enables, disables and removes them. Installing takes a folder
// on the server's machine and the user's consent, so it stays in the CLI.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import type { Plugin } from "../types";

const path = (id: string, rest = "") => `/plugins/${encodeURIComponent(id)}${rest}`;
const plural = (n: number, one: string, many = one + "s") => `${n} ${n === 1 ? one : many}`;

export function PluginsPanel() {
  const [list, setList] = useState<Plugin[]>();
  const [loadErr, setLoadErr] = useState("");
  const [note, setNote] = useState("");
  const head = useRef<HTMLHeadingElement>(null);

  async function load() {
    try {
      setList((await api<{ plugins: Plugin[] }>("GET", "/plugins")).plugins ?? []);
      setLoadErr("");
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      setLoadErr((e as Error).message);
    }
  }
  useEffect(() => { load(); }, []);

  const put = (p: Plugin) => setList((l) => l?.map((x) => (x.id === p.id ? p : x)));
  const drop = (id: string) => setList((l) => l?.filter((x) => x.id !== id));
  function removed(p: Plugin) {
    drop(p.id);
    setNote(`Removed ${p.id} ${p.version}.`);
    head.current?.focus(); // its row, and the focused button, are gone
  }

  return (
    <section id="set-plugins" class="panel" aria-labelledby="plg-h" data-testid="plugins">
      <div class="panel-head">
        <h2 id="plg-h" tabIndex={-1} ref={head}>Plugins</h2>
        <button type="button" class="sm" data-testid="plugins-refresh" onClick={() => { setNote(""); load(); }}>Refresh</button>
      </div>
      <p class="sr-only" role="status">{note}</p>
      {loadErr ? <p class="card-error" role="alert" data-testid="plugins-error">{loadErr}</p>
        : !list ? <p class="muted">Loading…</p>
        : !list.length ? <p class="muted" data-testid="plugins-empty">No plugins are installed.</p>
        : <ul class="plugins">{list.map((p) => <PluginRow key={p.id} p={p} onChange={put} onGone={drop} onRemoved={removed} />)}</ul>}
      <p class="muted small">Install with <code>kiln plugin install PATH</code> on the server's machine: it shows what the plugin may do and asks before installing.</p>
    </section>
  );
}

/** The kinds besides toolset whose items a plugin row lists, with their headings. */
const kindLabels: [string, string][] = [["model-provider", "Models"], ["skills", "Skills"], ["mcp-servers", "MCP servers"], ["sandbox-runtime", "Sandbox runtimes"]];

function PluginRow({ p, onChange, onGone, onRemoved }: {
  p: Plugin; onChange: (p: Plugin) => void; onGone: (id: string) => void; onRemoved: (p: Plugin) => void;
}) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [confirm, setConfirm] = useState(false);
  const ref = useRef<HTMLLIElement>(null);
  const tools = p.tools ?? [], perms = p.permissions ?? [], kinds = p.provides ?? [];
  const others = kindLabels.filter(([k]) => kinds.includes(k));
  const hid = `plg-${p.id}`;
  const back = useRef(false); // a cancelled confirmation returns focus to Remove…
  // A layout effect moves focus in the same task that shows the confirmation
  // (or takes it away), so there is no moment in which the focused button is
  // gone and a key press (Escape) lands on the page instead of the row.
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f("plugin-remove-confirm");
    else if (back.current) { back.current = false; f("plugin-remove"); }
  }, [confirm]);

  /** Re-reads the row after a failed action; true when the plugin shows as failed (its error says why). */
  async function refresh(): Promise<boolean> {
    try {
      const fresh = await api<Plugin>("GET", path(p.id));
      onChange(fresh);
      return fresh.status === "failed" && !!fresh.error;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) onGone(p.id);
      return false;
    }
  }
  async function act(what: "enable" | "disable") {
    setBusy(true); setErr("");
    try { onChange(await api<Plugin>("POST", path(p.id, `/${what}`))); }
    catch (e) {
      const msg = (e as Error).message;
      // A plugin that failed to start lists as failed with the reason: say it once.
      if (!(await refresh()) || what !== "enable") setErr(`Could not ${what} ${p.id}: ${msg}`);
    }
    finally { setBusy(false); }
  }
  async function remove() {
    setBusy(true); setErr("");
    try { await api("DELETE", path(p.id)); onRemoved(p); return; }
    catch (e) { setErr(`Could not remove ${p.id}: ${(e as Error).message}`); setConfirm(false); await refresh(); }
    setBusy(false);
  }
  const cancel = () => { back.current = true; setConfirm(false); };

  return (
    <li class="plugin" ref={ref} data-testid="plugin" data-plugin-id={p.id} data-status={p.status} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => { if (e.key === "Escape" && confirm) { e.stopPropagation(); cancel(); } }}>
      <div class="plugin-head">
        <h3 id={hid}><code>{p.id}</code> <span class="muted small">{p.version}</span></h3>
        <span class="badges">
          {/* A built-in's runtime is "builtin": one badge says so. */}
          <span class="badge" data-testid="plugin-runtime" data-runtime={p.runtime}>{p.builtin ? "built-in" : p.runtime}</span>
          <span class={`badge b-${p.status}`} data-testid="plugin-status">{p.status}</span>
        </span>
        <span class="plugin-actions">
          {p.status === "failed" && <button type="button" class="sm" data-testid="plugin-retry" disabled={busy} onClick={() => act("enable")}>Retry<span class="sr-only"> {p.id}</span></button>}
          <button type="button" class="sm" data-testid="plugin-toggle" disabled={busy} onClick={() => act(p.enabled ? "disable" : "enable")}>
            {p.enabled ? "Disable" : "Enable"}<span class="sr-only"> {p.id}</span>
          </button>
          {!p.builtin && !confirm && <button type="button" class="sm danger" data-testid="plugin-remove" disabled={busy} onClick={() => { setErr(""); setConfirm(true); }}>Remove…<span class="sr-only"> {p.id}</span></button>}
        </span>
      </div>
      {p.description && <p class="plugin-desc">{p.description}</p>}
      {p.status === "failed" && <p class="card-error" role="alert" data-testid="plugin-failure">Failed to start: {p.error || "no reason given"}</p>}
      {p.runtime === "process" && (p.restarts ?? 0) > 0 && <p class="muted small" data-testid="plugin-restarts">Restarted {plural(p.restarts!, "time")}</p>}
      {confirm && (
        <div class="plugin-confirm" role="group" aria-label={`Remove ${p.id}`} data-testid="plugin-confirm">
          <p>Remove <code>{p.id}</code> {p.version}? Its files and stored data are deleted; installing it again needs its folder.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="plugin-remove-confirm" disabled={busy} onClick={remove}>Remove {p.id}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="plugin-action-error">{err}</p>}
      {(kinds.includes("toolset") || !others.length) && (
        <details class="plugin-more" data-testid="plugin-tools">
          <summary>Tools ({tools.length})</summary>
          {tools.length ? <ul>{tools.map((t) => <li key={t}><code>{t}</code></li>)}</ul>
            : <p class="muted small">{p.status === "enabled" ? "This plugin provides no tools." : "Its tools are listed while it runs."}</p>}
        </details>
      )}
      {others.map(([kind, label]) => {
        const items = p.provided?.[kind] ?? [];
        return (
          <details class="plugin-more" data-testid={`plugin-provided-${kind}`} key={kind}>
            <summary>{label} ({items.length})</summary>
            {items.length ? <ul>{items.map((x) => <li key={x}><code>{x}</code></li>)}</ul>
              : <p class="muted small">{p.status === "enabled" ? "None." : "Listed while it runs."}</p>}
          </details>
        );
      })}
      <details class="plugin-more" data-testid="plugin-permissions">
        <summary>Permissions ({perms.length})</summary>
        {perms.length ? <ul>{perms.map((x, i) => <li key={i}>{x}</li>)}</ul> : <p class="muted small">None.</p>}
        {p.dir && <p class="muted small">Installed{p.installed_at ? ` ${new Date(p.installed_at).toLocaleString()}` : ""} in <code>{p.dir}</code></p>}
      </details>
    </li>
  );
}
