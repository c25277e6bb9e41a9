// The Plugins panel of Settings: the installed plugins (built-ins
// included): enable, disable, remove; for one installed from a
// marketplace also upgrade, roll back, pin and unpin. Below them the
// marketplace: search, a plugin's details, install with consent, and the
// marketplaces added (Marketplace.tsx).
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { compareVersions, plural, type InstallKind } from "../marketplace";
import type { Marketplace, MarketplacePlugin, MarketplacePreview, Outdated, Plugin } from "../types";
import { message } from "./common";
import { FindPlugins, InstallDialog, Marketplaces, PluginDetails, type InstallTarget } from "./Marketplace";

const path = (id: string, rest = "") => `/plugins/${encodeURIComponent(id)}${rest}`;

/** The marketplace side of the panel: the marketplaces (undefined while loading, null on a server without a marketplace). */
type Mps = Marketplace[] | null | undefined;

export function PluginsPanel() {
  const [list, setList] = useState<Plugin[]>();
  const [loadErr, setLoadErr] = useState("");
  const [note, setNote] = useState("");
  const [mps, setMps] = useState<Mps>();
  const [mpErr, setMpErr] = useState("");
  const [outdated, setOutdated] = useState<Record<string, Outdated>>({});
  // gen grows with every change that search results and details show.
  const [gen, setGen] = useState(0);
  const [details, setDetails] = useState<{ name: string; marketplace: string }>();
  const [installing, setInstalling] = useState<InstallTarget>();
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
  async function loadMarketplaces() {
    try {
      setMps((await api<{ marketplaces: Marketplace[] | null }>("GET", "/marketplaces")).marketplaces ?? []);
      setMpErr("");
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      // Every marketplace route answers 404 on a server without a marketplace.
      if (e instanceof ApiError && e.status === 404) { setMps(null); return; }
      setMpErr(message(e));
    }
  }
  async function loadOutdated() {
    try {
      const r = await api<{ plugins: Outdated[] | null }>("GET", "/marketplace/outdated");
      setOutdated(Object.fromEntries((r.plugins ?? []).map((o) => [o.name, o])));
    } catch { setOutdated({}); /* shown as up to date; an upgrade's own check says why if it fails */ }
  }
  useEffect(() => { load(); loadMarketplaces(); }, []);
  useEffect(() => { if (mps) loadOutdated(); }, [gen, !!mps]);

  /** After a change: the installed list, what is outdated, and search results and details again. */
  const changed = () => { load(); setGen((g) => g + 1); };
  const put = (p: Plugin) => setList((l) => l?.map((x) => (x.id === p.id ? p : x)));
  const drop = (id: string) => setList((l) => l?.filter((x) => x.id !== id));
  function removed(p: Plugin) {
    drop(p.id);
    setNote(`Removed ${p.id} ${p.version}.`);
    head.current?.focus(); // its row, and the focused button, are gone
    setGen((g) => g + 1);
  }
  function installed(info: Plugin, kind: InstallKind, pv: MarketplacePreview) {
    setInstalling(undefined);
    const words = { install: "Installed", upgrade: "Upgraded", downgrade: "Downgraded", reinstall: "Reinstalled" }[kind];
    setNote(`${words} ${info.id} ${info.version} from ${pv.marketplace}: ${info.status}.`);
    setList((l) => l && (l.some((x) => x.id === info.id) ? l.map((x) => (x.id === info.id ? info : x)) : [...l, info]));
    changed();
  }
  const mpPut = (m: Marketplace) => setMps((l) => l?.map((x) => (x.name === m.name ? m : x)));
  const mpNote = (m: Marketplace) => `${m.name}: index version ${m.version ?? "?"}, ${plural(m.plugins, "plugin")}`;

  return (
    <section id="set-plugins" class="panel" aria-labelledby="plg-h" data-testid="plugins">
      <div class="panel-head">
        <h2 id="plg-h" tabIndex={-1} ref={head}>Plugins</h2>
        <button type="button" class="sm" data-testid="plugins-refresh" onClick={() => { setNote(""); load(); loadMarketplaces(); setGen((g) => g + 1); }}>Refresh</button>
      </div>
      <p class="sr-only" role="status" data-testid="plugins-note">{note}</p>
      <h3 id="plg-installed-h" class="mp-sub">Installed</h3>
      {loadErr ? <p class="card-error" role="alert" data-testid="plugins-error">{loadErr}</p>
        : !list ? <p class="muted">Loading…</p>
        : !list.length ? <p class="muted" data-testid="plugins-empty">No plugins are installed.</p>
        : <ul class="plugins" aria-labelledby="plg-installed-h">{list.map((p) => (
          <PluginRow key={p.id} p={p} outdated={outdated[p.id]} onChange={(x) => { put(x); setGen((g) => g + 1); }} onGone={drop} onRemoved={removed} onNote={setNote}
            onUpgrade={() => setInstalling({ name: p.id, upgrade: true })} />
        ))}</ul>}
      {mps === null ? <p class="muted small" data-testid="mp-unavailable">This server has no marketplace: install with <code>kiln plugin install PATH</code> on the server's machine; it shows what the plugin may do and asks before installing.</p>
        : mpErr ? <p class="card-error" role="alert" data-testid="marketplaces-error">{mpErr}</p>
        : mps && (
          <>
            <FindPlugins gen={gen} count={mps.length} onDetails={(r: MarketplacePlugin) => setDetails({ name: r.name, marketplace: r.marketplace })} onInstall={setInstalling} />
            <Marketplaces list={mps}
              onAdded={(m) => { setMps((l) => [...(l ?? []).filter((x) => x.name !== m.name), m].sort((a, b) => a.name.localeCompare(b.name))); setNote(`Added ${mpNote(m)}.`); setGen((g) => g + 1); }}
              onChanged={(m) => { mpPut(m); setNote(m.error ? `${m.name}: the last refresh was refused.` : `Refreshed ${mpNote(m)}.`); setGen((g) => g + 1); }}
              onRemoved={(name) => { setMps((l) => l?.filter((x) => x.name !== name)); setNote(`Removed the marketplace ${name}.`); head.current?.focus(); setGen((g) => g + 1); }} />
          </>
        )}
      {details && <PluginDetails name={details.name} marketplace={details.marketplace} mp={mps?.find((m) => m.name === details.marketplace)} gen={gen}
        onInstall={setInstalling} onClose={() => setDetails(undefined)} />}
      {/* Closed without installing: an install that failed may still have changed the list (a plugin that did not start). */}
      {installing && <InstallDialog target={installing} onDone={installed} onClose={() => { setInstalling(undefined); load(); }} />}
    </section>
  );
}

/** The kinds besides toolset whose items a plugin row lists, with their headings. */
const kindLabels: [string, string][] = [["model-provider", "Models"], ["skills", "Skills"], ["mcp-servers", "MCP servers"], ["sandbox-runtime", "Sandbox runtimes"]];

function PluginRow({ p, outdated, onChange, onGone, onRemoved, onNote, onUpgrade }: {
  p: Plugin; outdated: Outdated | undefined; onChange: (p: Plugin) => void; onGone: (id: string) => void; onRemoved: (p: Plugin) => void;
  onNote: (s: string) => void; onUpgrade: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  // The confirmation on screen: of Remove or of Roll back (or forward).
  const [confirm, setConfirm] = useState<"" | "remove" | "rollback">("");
  const ref = useRef<HTMLLIElement>(null);
  const tools = p.tools ?? [], perms = p.permissions ?? [], kinds = p.provides ?? [];
  const others = kindLabels.filter(([k]) => kinds.includes(k));
  const hid = `plg-${p.id}`;
  const src = p.source, pinned = p.pinned ?? "";
  const back = useRef<"" | "remove" | "rollback">(""); // a cancelled confirmation returns focus to its button
  // A layout effect moves focus in the same task that shows the confirmation
  // (or takes it away), so there is no moment in which the focused button is
  // gone and a key press (Escape) lands on the page instead of the row.
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f(`plugin-${confirm}-confirm`);
    else if (back.current) { f(`plugin-${back.current}`); back.current = ""; }
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
    catch (e) { setErr(`Could not remove ${p.id}: ${(e as Error).message}`); setConfirm(""); await refresh(); }
    setBusy(false);
  }
  /** Runs a marketplace action that answers the plugin (or nothing: then the plugin is read again). */
  async function change(what: string, call: () => Promise<Plugin | undefined>, done: (x: Plugin) => string) {
    setBusy(true); setErr("");
    try {
      const got = await call();
      const fresh = got?.id ? got : await api<Plugin>("GET", path(p.id));
      onChange(fresh);
      onNote(done(fresh));
    } catch (e) { setErr(`Could not ${what} ${p.id}: ${message(e)}`); await refresh(); }
    finally { setBusy(false); setConfirm(""); }
  }
  // A rollback switches to the version kept before; after one, that is the newer one (a second rollback rolls forward).
  const switchWord = p.previous ? (compareVersions(p.previous, p.version) > 0 ? "Roll forward" : "Roll back") : "";
  const rollback = () => change(switchWord.toLowerCase(), () => api<Plugin>("POST", path(p.id, "/rollback")), (x) => `${switchWord === "Roll back" ? "Rolled back" : "Rolled forward"} ${x.id} to ${x.version}: ${x.status}.`);
  const pin = () => pinned
    ? change("unpin", () => api<Plugin>("DELETE", path(p.id, "/pin")), (x) => `Unpinned ${x.id}: upgrades offer newer versions again.`)
    : change("pin", () => api<Plugin>("POST", path(p.id, "/pin"), { version: p.version }), (x) => `Pinned ${x.id} at ${x.pinned || p.version}.`);
  const cancel = () => { back.current = confirm; setConfirm(""); };
  const upgradable = !!outdated && !pinned;

  return (
    <li class="plugin" ref={ref} data-testid="plugin" data-plugin-id={p.id} data-status={p.status} data-version={p.version} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => { if (e.key === "Escape" && confirm) { e.stopPropagation(); cancel(); } }}>
      <div class="plugin-head">
        <h4 id={hid}><code>{p.id}</code> <span class="muted small" data-testid="plugin-version">{p.version}</span></h4>
        <span class="badges">
          {/* A built-in's runtime is "builtin": one badge says so. */}
          <span class="badge" data-testid="plugin-runtime" data-runtime={p.runtime}>{p.builtin ? "built-in" : p.runtime}</span>
          <span class={`badge b-${p.status}`} data-testid="plugin-status">{p.status}</span>
          {src && <span class="badge b-origin" data-testid="plugin-source">from {src.marketplace}</span>}
          {pinned && <span class="badge b-action" data-testid="plugin-pinned">pinned {pinned}</span>}
          {outdated && <span class="badge b-running" data-testid="plugin-update">{outdated.latest} available</span>}
        </span>
        <span class="plugin-actions">
          {p.status === "failed" && <button type="button" class="sm" data-testid="plugin-retry" disabled={busy} onClick={() => act("enable")}>Retry<span class="sr-only"> {p.id}</span></button>}
          {upgradable && <button type="button" class="sm primary" data-testid="plugin-upgrade" disabled={busy} onClick={onUpgrade}>Upgrade…<span class="sr-only"> {p.id} to {outdated!.latest}</span></button>}
          {p.previous && !pinned && confirm !== "rollback" && <button type="button" class="sm" data-testid="plugin-rollback" disabled={busy} onClick={() => { setErr(""); setConfirm("rollback"); }}>{switchWord}…<span class="sr-only"> {p.id} to {p.previous}</span></button>}
          {src && <button type="button" class="sm" data-testid="plugin-pin" disabled={busy} aria-pressed={!!pinned} onClick={pin}>{pinned ? "Unpin" : "Pin"}<span class="sr-only"> {p.id}{pinned ? "" : ` at ${p.version}`}</span></button>}
          <button type="button" class="sm" data-testid="plugin-toggle" disabled={busy} onClick={() => act(p.enabled ? "disable" : "enable")}>
            {p.enabled ? "Disable" : "Enable"}<span class="sr-only"> {p.id}</span>
          </button>
          {!p.builtin && confirm !== "remove" && <button type="button" class="sm danger" data-testid="plugin-remove" disabled={busy} onClick={() => { setErr(""); setConfirm("remove"); }}>Remove…<span class="sr-only"> {p.id}</span></button>}
        </span>
      </div>
      {p.description && <p class="plugin-desc">{p.description}</p>}
      {p.status === "failed" && <p class="card-error" role="alert" data-testid="plugin-failure">Failed to start: {p.error || "no reason given"}</p>}
      {p.runtime === "process" && (p.restarts ?? 0) > 0 && <p class="muted small" data-testid="plugin-restarts">Restarted {plural(p.restarts!, "time")}</p>}
      {pinned && outdated && <p class="muted small" data-testid="plugin-pinned-note">Pinned at {pinned}: {outdated.latest} is offered; unpin to upgrade.</p>}
      {confirm === "remove" && (
        <div class="plugin-confirm" role="group" aria-label={`Remove ${p.id}`} data-testid="plugin-confirm">
          <p>Remove <code>{p.id}</code> {p.version}? Its files and stored data are deleted; {src ? <>installing it again downloads it from {src.marketplace}.</> : "installing it again needs its folder."}</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="plugin-remove-confirm" disabled={busy} onClick={remove}>Remove {p.id}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {confirm === "rollback" && (
        <div class="plugin-confirm" role="group" aria-label={`${switchWord} ${p.id}`} data-testid="plugin-rollback-group">
          <p>{switchWord} <code>{p.id}</code> from {p.version} to {p.previous}? That version, kept on disk, runs again with the permissions you allowed for it.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="plugin-rollback-confirm" disabled={busy} onClick={rollback}>{switchWord} to {p.previous}</button>
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
      {src && (
        <details class="plugin-more" data-testid="plugin-origin">
          <summary>Source</summary>
          <dl class="kv small">
            <dt>Marketplace</dt><dd>{src.marketplace}</dd>
            <dt>Version</dt><dd>{src.version}</dd>
            <dt>Index version</dt><dd>{src.index_version}</dd>
            <dt>Folder digest</dt><dd><code data-testid="plugin-digest">{src.digest}</code></dd>
            <dt>Archive sha256</dt><dd><code>{src.archive_sha256}</code></dd>
            <dt>Kept to switch back to</dt><dd data-testid="plugin-previous">{p.previous || "nothing"}</dd>
          </dl>
        </details>
      )}
    </li>
  );
}
