// The marketplace parts of the Plugins panel: search across the added
// marketplaces, a plugin's details (every version with its trust), the
// install dialog (download progress, what was verified, the permissions
// or, for an upgrade, what it adds and which files change; the consent),
// and the marketplaces themselves (keys, index version, log, last
// refresh; add, refresh, remove).
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, apiStream, ApiError } from "../api";
import {
  changeLines, changeSummary, compareVersions, consentLabel, formatBytes, installKind, keyLabel, logStatus, marketplaceInput, plural,
  progressFraction, progressText, quarantineText, readPreview, signatureStatus, type InstallKind, type MarketplaceForm,
} from "../marketplace";
import { relTime } from "../time";
import type { Marketplace, MarketplaceInstallRequest, MarketplacePlugin, MarketplacePreview, MarketplaceVersion, Plugin, Progress } from "../types";
import { message, Modal } from "./common";

const enc = encodeURIComponent;
const when = (iso: string | undefined) => (iso ? new Date(iso).toLocaleString() : "");

/** What the install dialog installs: a name (and version, marketplace), or the upgrade of an installed plugin. */
export interface InstallTarget {
  name: string;
  version?: string;
  marketplace?: string;
  /** Upgrade the installed plugin name to the version GET /plugins/{id}/upgrade names. */
  upgrade?: boolean;
}

/** Kinds, as badges. */
function Kinds({ kinds }: { kinds: string[] | null | undefined }) {
  return <>{(kinds ?? []).map((k) => <span key={k} class="badge" data-testid="mp-kind">{k}</span>)}</>;
}

/**
 * FindPlugins searches every added marketplace (as the user types, and
 * again whenever gen changes) and lists the ranked results with their
 * kinds and marketplace; Details opens a plugin, Install… installs it.
 */
export function FindPlugins({ gen, count, onDetails, onInstall }: {
  gen: number; count: number; onDetails: (p: MarketplacePlugin) => void; onInstall: (t: InstallTarget) => void;
}) {
  const [q, setQ] = useState("");
  const [shown, setShown] = useState<{ q: string; list: MarketplacePlugin[] }>();
  const [err, setErr] = useState("");
  const seq = useRef(0);
  const timer = useRef<ReturnType<typeof setTimeout>>(undefined);
  async function search(text: string) {
    clearTimeout(timer.current);
    const n = ++seq.current;
    try {
      const r = await api<{ plugins: MarketplacePlugin[] | null }>("GET", `/marketplace/plugins?q=${enc(text.trim())}`);
      if (n !== seq.current) return; // a later search answers
      setShown({ q: text.trim(), list: r.plugins ?? [] });
      setErr("");
    } catch (e) {
      if (n !== seq.current || (e instanceof ApiError && e.status === 401)) return;
      setErr(`Could not search: ${message(e)}`);
    }
  }
  useEffect(() => { search(q); }, [gen]);
  useEffect(() => () => clearTimeout(timer.current), []);
  const list = shown?.list;
  return (
    <section class="mp-part" aria-labelledby="mp-find-h" data-testid="mp-find">
      <h3 id="mp-find-h">Find plugins</h3>
      <form role="search" aria-label="Marketplace plugins" class="mp-search" onSubmit={(e) => { e.preventDefault(); search(q); }}>
        <label for="mp-q">Search the marketplaces</label>
        <div class="mp-search-row">
          <input id="mp-q" type="search" data-testid="mp-search" value={q} autoComplete="off" spellcheck={false} placeholder="Name, description, tag or kind"
            onInput={(e) => { const v = (e.target as HTMLInputElement).value; setQ(v); clearTimeout(timer.current); timer.current = setTimeout(() => search(v), 250); }} />
          <button type="submit" class="sm">Search</button>
        </div>
      </form>
      {err && <p class="card-error" role="alert" data-testid="mp-search-error">{err}</p>}
      <p class="muted small" role="status" data-testid="mp-count">
        {!list ? "" : !count ? "" : shown!.q ? `${plural(list.length, "plugin")} ${list.length === 1 ? "matches" : "match"} “${shown!.q}”.` : `${plural(list.length, "plugin")} in ${plural(count, "marketplace")}.`}
      </p>
      {!count ? <p class="muted" data-testid="mp-none">Add a marketplace below to find plugins in it.</p>
        : !list ? <p class="muted">Loading…</p>
        : list.length > 0 && (
          <ul class="plugins" aria-label="Search results" data-testid="mp-results">
            {list.map((r) => <Result key={`${r.marketplace}/${r.name}`} r={r} onDetails={onDetails} onInstall={onInstall} />)}
          </ul>
        )}
    </section>
  );
}

function Result({ r, onDetails, onInstall }: { r: MarketplacePlugin; onDetails: (p: MarketplacePlugin) => void; onInstall: (t: InstallTarget) => void }) {
  const hid = `mpr-${r.marketplace}-${r.name}`;
  const newer = !!r.installed && !!r.latest && compareVersions(r.latest, r.installed) > 0;
  return (
    <li class="plugin" data-testid="mp-result" data-name={r.name} data-marketplace={r.marketplace} aria-labelledby={hid}>
      <div class="plugin-head">
        <h4 id={hid}><code>{r.name}</code> <span class="muted small">{r.latest || "no version offered"}</span></h4>
        <span class="badges">
          <Kinds kinds={r.kinds} />
          <span class="badge b-origin" data-testid="mp-marketplace">{r.marketplace}</span>
          {r.installed && <span class="badge b-enabled" data-testid="mp-installed">installed {r.installed}</span>}
        </span>
        <span class="plugin-actions">
          <button type="button" class="sm" data-testid="mp-details" onClick={() => onDetails(r)}>Details<span class="sr-only"> of {r.name}</span></button>
          {!r.installed && r.latest && <button type="button" class="sm primary" data-testid="mp-install" onClick={() => onInstall({ name: r.name, marketplace: r.marketplace })}>Install…<span class="sr-only"> {r.name}</span></button>}
          {newer && <button type="button" class="sm primary" data-testid="mp-upgrade" onClick={() => onInstall({ name: r.name, marketplace: r.marketplace, upgrade: true })}>Upgrade…<span class="sr-only"> {r.name} to {r.latest}</span></button>}
        </span>
      </div>
      {r.description && <p class="plugin-desc">{r.description}</p>}
    </li>
  );
}

/** A plugin's details: its facts, the marketplace's trust, and every version newest first with Install. */
export function PluginDetails({ name, marketplace, mp, gen, onInstall, onClose }: {
  name: string; marketplace: string; mp: Marketplace | undefined; gen: number; onInstall: (t: InstallTarget) => void; onClose: () => void;
}) {
  const [p, setP] = useState<MarketplacePlugin>();
  const [err, setErr] = useState("");
  useEffect(() => {
    api<MarketplacePlugin>("GET", `/marketplace/plugins/${enc(name)}?marketplace=${enc(marketplace)}`)
      .then((x) => { setP(x); setErr(""); }, (e) => setErr(message(e)));
  }, [name, marketplace, gen]);
  const versions = p?.versions ?? [];
  return (
    <Modal labelledBy="mpd-h" onClose={onClose} testid="mp-detail" wide>
      <div class="modal-head">
        <h2 id="mpd-h"><code>{name}</code> <span class="muted small">from {marketplace}</span></h2>
        <button type="button" class="icon" aria-label="Close" data-testid="mp-detail-close" onClick={onClose}>✕</button>
      </div>
      {err ? <p class="card-error" role="alert" data-testid="mp-detail-error">{err}</p>
        : !p ? <p class="muted">Loading…</p>
        : (
          <>
            {p.description && <p>{p.description}</p>}
            <dl class="kv">
              <dt>Kinds</dt><dd><span class="badges"><Kinds kinds={p.kinds} /></span></dd>
              {p.author && <><dt>Author</dt><dd>{p.author}</dd></>}
              {p.homepage && <><dt>Homepage</dt><dd>{/^https?:\/\//.test(p.homepage) ? <a href={p.homepage} target="_blank" rel="noopener noreferrer">{p.homepage}</a> : p.homepage}</dd></>}
              {p.license && <><dt>License</dt><dd>{p.license}</dd></>}
              {(p.tags?.length ?? 0) > 0 && <><dt>Tags</dt><dd>{p.tags!.join(", ")}</dd></>}
              <dt>Installed</dt><dd data-testid="mp-detail-installed">{p.installed || "not installed"}</dd>
              <dt>Latest offered</dt><dd>{p.latest || "none (see the versions)"}</dd>
              {mp && <><dt>Marketplace</dt><dd>{mp.name}{mp.version ? `, index version ${mp.version}` : ""}{mp.unsigned ? " (unsigned)" : ""}</dd></>}
            </dl>
            <h3 class="mp-sub">Versions <span class="muted small">newest first</span></h3>
            {!versions.length ? <p class="muted">No versions.</p> : (
              <ul class="mp-versions" data-testid="mp-versions">
                {versions.map((v) => <VersionItem key={v.version} v={v} open={v.version === (p.latest || versions[0].version)} p={p} mp={mp} onInstall={onInstall} />)}
              </ul>
            )}
          </>
        )}
    </Modal>
  );
}

function VersionItem({ v, open, p, mp, onInstall }: { v: MarketplaceVersion; open: boolean; p: MarketplacePlugin; mp: Marketplace | undefined; onInstall: (t: InstallTarget) => void }) {
  const perms = v.permissions ?? [];
  const kind: InstallKind = installKind({ version: v.version, installed: p.installed });
  const verb = { install: "Install", upgrade: "Upgrade to", downgrade: "Downgrade to", reinstall: "" }[kind];
  // Once this version is installed its Install button goes; if it had the
  // focus, the version itself takes it (not the page behind the dialog).
  const summary = useRef<HTMLElement>(null);
  useLayoutEffect(() => {
    if (kind === "reinstall" && (!document.activeElement || document.activeElement === document.body)) summary.current?.focus();
  }, [kind]);
  return (
    <li data-testid="mp-version" data-version={v.version} data-offered={String(v.offered)}>
      <details class="mp-version" open={open}>
        <summary ref={summary}>
          <strong>{v.version}</strong>
          {v.version === p.latest && <span class="badge b-enabled">latest</span>}
          {v.version === p.installed && <span class="badge">installed</span>}
          {!v.offered && <span class="badge b-action" data-testid="mp-version-reason">not offered{v.reason ? `: ${v.reason}` : ""}</span>}
          <span class="muted small">{v.published ? `published ${when(v.published)}` : ""}</span>
        </summary>
        <dl class="kv">
          <dt>Runtime</dt><dd>{v.runtime}</dd>
          <dt>Provides</dt><dd>{(v.provides ?? []).join(", ") || "nothing"}</dd>
          <dt>Permissions</dt>
          <dd data-testid="mp-version-permissions">{perms.length ? <ul class="plain">{perms.map((x, i) => <li key={i}>{x}</li>)}</ul> : "none"}</dd>
          <dt>Signature</dt><dd data-testid="mp-version-signature">{signatureStatus(v)}</dd>
          <dt>Log</dt><dd data-testid="mp-version-log">{logStatus(v, mp)}</dd>
          <dt>Folder digest</dt><dd><code data-testid="mp-version-digest">{v.digest}</code></dd>
          <dt>Archive sha256</dt><dd><code data-testid="mp-version-sha256">{v.archive_sha256}</code></dd>
          <dt>Size</dt><dd>{formatBytes(v.size)}</dd>
          {v.min_kiln && <><dt>Needs Kiln</dt><dd>{v.min_kiln} or newer</dd></>}
          {!!v.protocol && <><dt>Protocol</dt><dd>{v.protocol}</dd></>}
        </dl>
        {kind !== "reinstall" && (
          <div class="card-actions">
            <button type="button" class={`sm ${v.offered && (kind === "install" || kind === "upgrade") ? "primary" : ""}`} data-testid="mp-version-install"
              onClick={() => onInstall({ name: p.name, marketplace: p.marketplace, version: v.version })}>
              {verb} {v.version}…<span class="sr-only"> of {p.name}</span>
            </button>
            {!v.offered && <span class="muted small">Not offered: only installed when asked for by exact version, as this button does.</span>}
          </div>
        )}
      </details>
    </li>
  );
}

type Phase = "download" | "review" | "installing" | "error";

/**
 * InstallDialog downloads and verifies a version (POST /marketplace/preview
 * as an NDJSON stream, with a progress bar), shows what was verified and
 * what the plugin asks for (for an upgrade, what it adds and the files it
 * changes), and installs it on consent, bound to the previewed digest.
 * Closing it during the download cancels the download.
 */
export function InstallDialog({ target, onDone, onClose }: {
  target: InstallTarget; onDone: (info: Plugin, kind: InstallKind, pv: MarketplacePreview) => void; onClose: () => void;
}) {
  const [phase, setPhase] = useState<Phase>("download");
  const [progress, setProgress] = useState<Progress>();
  const [pv, setPv] = useState<MarketplacePreview>();
  const [req, setReq] = useState<MarketplaceInstallRequest>();
  const [err, setErr] = useState("");
  const abort = useRef<AbortController>(undefined);
  const action = useRef<HTMLButtonElement>(null);

  async function start() {
    abort.current?.abort();
    const ctl = new AbortController();
    abort.current = ctl;
    setPhase("download"); setProgress(undefined); setPv(undefined); setErr("");
    try {
      const r: MarketplaceInstallRequest = target.upgrade
        ? await api<MarketplaceInstallRequest>("GET", `/plugins/${enc(target.name)}/upgrade`)
        : { name: target.name, version: target.version, marketplace: target.marketplace };
      setReq(r);
      const res = await apiStream("/marketplace/preview", { name: r.name, version: r.version || undefined, marketplace: r.marketplace || undefined }, "application/x-ndjson", ctl.signal);
      const got = (res.headers.get("Content-Type") ?? "").includes("ndjson") ? await readPreview(res.body!, (p) => { if (!ctl.signal.aborted) setProgress(p); }) : await res.json() as MarketplacePreview;
      if (ctl.signal.aborted) return;
      setPv(got); setPhase("review");
    } catch (e) {
      if (ctl.signal.aborted) return; // closed: nothing to say
      setErr(message(e)); setPhase("error");
    }
  }
  useEffect(() => { start(); return () => abort.current?.abort(); }, []);
  // The review takes the focus to its action, the consent, once it is shown.
  useLayoutEffect(() => { if (phase === "review") action.current?.focus(); }, [phase]);

  async function install() {
    if (!pv || !req) return;
    const kind = installKind(pv);
    setPhase("installing"); setErr("");
    try {
      const info = await api<Plugin>("POST", "/marketplace/install", {
        name: req.name, version: pv.version, marketplace: pv.marketplace, consent: true, digest: pv.digest,
        ...(kind === "downgrade" ? { allow_downgrade: true } : {}),
      });
      onDone(info, kind, pv);
    } catch (e) {
      setErr(message(e)); setPhase("review");
    }
  }

  const kind = pv ? installKind(pv) : undefined;
  const title = !pv ? `${target.upgrade ? "Upgrade" : "Install"} ${target.name}${target.version ? ` ${target.version}` : ""}`
    : kind === "install" ? `Install ${pv.id} ${pv.version}`
    : kind === "reinstall" ? `Reinstall ${pv.id} ${pv.version}`
    : `${kind === "upgrade" ? "Upgrade" : "Downgrade"} ${pv.id} ${pv.installed} → ${pv.version}`;
  const busy = phase === "installing";
  const frac = progressFraction(progress);
  return (
    <Modal labelledBy="mpi-h" onClose={onClose} busy={busy} testid="mp-install-dialog" wide>
      <div class="modal-head"><h2 id="mpi-h" data-testid="mp-install-title">{title}</h2></div>
      <div data-testid="mp-install-body" data-phase={phase} data-done={progress?.done} data-total={progress?.total}>
        {phase === "download" && (
          <div class="mp-progress">
            <p role="status">Downloading and verifying{req?.marketplace ? ` from ${req.marketplace}` : ""}…</p>
            <progress data-testid="mp-progress" max={1} value={frac} aria-label={`Downloading ${target.name}`} />
            <p class="muted small" aria-hidden="true">{progress ? progressText(progress) : "Starting…"}</p>
          </div>
        )}
        {phase === "error" && <p class="card-error" role="alert" data-testid="mp-install-error">{err}</p>}
        {pv && (phase === "review" || phase === "installing") && <Review pv={pv} progress={progress} />}
        {pv && err && phase === "review" && <p class="card-error" role="alert" data-testid="mp-install-error">{err}</p>}
      </div>
      <div class="card-actions">
        {pv && (phase === "review" || phase === "installing") && (
          <button type="button" ref={action} class={kind === "downgrade" ? "danger" : "primary"} data-testid="mp-install-confirm" disabled={busy || !!pv.pinned} onClick={install}>
            {busy ? "Installing…" : consentLabel(pv)}
          </button>
        )}
        {phase === "error" && <button type="button" data-testid="mp-install-retry" onClick={start}>Try again</button>}
        <button type="button" data-testid="mp-install-cancel" disabled={busy} onClick={onClose}>{phase === "error" ? "Close" : "Cancel"}</button>
      </div>
    </Modal>
  );
}

/** The verified preview: checks, what it provides, the permissions (or what an upgrade adds), the changed files. */
function Review({ pv, progress }: { pv: MarketplacePreview; progress: Progress | undefined }) {
  const kind = installKind(pv);
  const perms = pv.permissions ?? [], added = pv.added ?? [];
  const files = changeLines(pv.changes);
  const change = kind === "upgrade" || kind === "downgrade";
  return (
    <>
      <p class="muted small">From <strong>{pv.marketplace}</strong>{pv.description ? ` — ${pv.description}` : ""}</p>
      <h3 class="mp-sub">Verified</h3>
      <ul class="mp-verified" data-testid="mp-verified">
        {(pv.verified ?? []).map((x, i) => <li key={i}><span class="ok" aria-hidden="true">✓ </span>{x}</li>)}
      </ul>
      {progress && <p class="muted small" data-testid="mp-downloaded">Downloaded {progressText(progress)}.</p>}
      <p class="small">Provides <span class="badges"><Kinds kinds={pv.provides} /></span> · runtime <code>{pv.runtime}</code></p>
      {pv.runtime === "process" && <p class="note small">A process plugin runs as a program on the server's machine: Kiln cannot enforce its permissions inside it, only record what you allowed.</p>}
      {change ? (
        <>
          <h3 class="mp-sub">New permissions</h3>
          {added.length ? (
            <ul class="mp-perms marked" data-testid="mp-added">
              {added.map((x, i) => <li key={i} class="added"><span class="sr-only">added: </span><span aria-hidden="true">+ </span>{x}</li>)}
            </ul>
          ) : <p data-testid="mp-added-none">None: it asks for nothing beyond what you allowed for {pv.installed}.</p>}
          {perms.length > 0 && (
            <details class="plugin-more" data-testid="mp-all-permissions">
              <summary>All its permissions ({perms.length})</summary>
              <ul>{perms.map((x, i) => <li key={i}>{x}</li>)}</ul>
            </details>
          )}
          <h3 class="mp-sub">Changed files</h3>
          <p data-testid="mp-changes-summary">{changeSummary(pv.changes)}</p>
          {files.length > 0 && (
            <ul class="mp-files marked" data-testid="mp-changes">
              {files.map((f) => (
                <li key={f.kind + f.path} class={f.kind} data-kind={f.kind}>
                  <span class="sr-only">{f.kind}: </span><span aria-hidden="true">{f.kind === "added" ? "+" : f.kind === "removed" ? "−" : "~"} </span><code>{f.path}</code>
                </li>
              ))}
            </ul>
          )}
        </>
      ) : (
        <>
          <h3 class="mp-sub">Permissions it asks for</h3>
          {perms.length ? <ul class="mp-perms" data-testid="mp-permissions">{perms.map((x, i) => <li key={i}>{x}</li>)}</ul>
            : <p data-testid="mp-permissions-none">None: it asks for nothing.</p>}
        </>
      )}
      {(pv.skipped?.length ?? 0) > 0 && (
        <p class="note small" data-testid="mp-skipped">Not installed, because Kiln does not run them: {pv.skipped!.join(", ")}.</p>
      )}
      <dl class="kv small">
        <dt>Folder digest</dt><dd><code data-testid="mp-preview-digest">{pv.digest}</code></dd>
        <dt>Archive sha256</dt><dd><code>{pv.archive_sha256}</code></dd>
        <dt>Size</dt><dd>{formatBytes(pv.size)}</dd>
      </dl>
      {kind === "downgrade" && <p class="note small">This installs an older version than the one installed ({pv.installed}).</p>}
      {pv.pinned && <p class="card-error" data-testid="mp-pinned"><code>{pv.id}</code> is pinned at {pv.pinned}: unpin it to install another version.</p>}
      {pv.needs_consent && (perms.length > 0 || added.length > 0) && (
        <p class="small" data-testid="mp-consent-text">{consentLabel(pv)} allows <code>{pv.id}</code> {change ? "what is new above" : "everything listed above"}; your consent is for exactly these bytes (the folder digest).</p>
      )}
    </>
  );
}

/** The marketplaces: each with its keys, index, log and last refresh; add, refresh, remove. */
export function Marketplaces({ list, onAdded, onChanged, onRemoved }: {
  list: Marketplace[]; onAdded: (m: Marketplace) => void; onChanged: (m: Marketplace) => void; onRemoved: (name: string) => void;
}) {
  const [adding, setAdding] = useState(false);
  const addBtn = useRef<HTMLButtonElement>(null);
  const back = useRef(false);
  useLayoutEffect(() => { if (!adding && back.current) { back.current = false; addBtn.current?.focus(); } }, [adding]);
  const close = () => { back.current = true; setAdding(false); };
  return (
    <section class="mp-part" aria-labelledby="mp-list-h" data-testid="marketplaces">
      <div class="panel-head">
        <h3 id="mp-list-h">Marketplaces</h3>
        {!adding && <button type="button" class="sm" ref={addBtn} data-testid="mp-add" onClick={() => setAdding(true)}>Add marketplace</button>}
      </div>
      {adding && <AddMarketplace onAdded={(m) => { close(); onAdded(m); }} onClose={close} />}
      {!list.length ? <p class="muted" data-testid="marketplaces-empty">No marketplaces. Add one with the URL and the verifier key its owner publishes.</p>
        : <ul class="plugins">{list.map((m) => <MarketplaceRow key={m.name} m={m} onChanged={onChanged} onRemoved={onRemoved} />)}</ul>}
    </section>
  );
}

function MarketplaceRow({ m, onChanged, onRemoved }: { m: Marketplace; onChanged: (m: Marketplace) => void; onRemoved: (name: string) => void }) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [confirm, setConfirm] = useState(false);
  const ref = useRef<HTMLLIElement>(null);
  const back = useRef(false);
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f("mp-remove-confirm");
    else if (back.current) { back.current = false; f("mp-remove"); }
  }, [confirm]);
  const cancel = () => { back.current = true; setConfirm(false); };
  const path = `/marketplaces/${enc(m.name)}`;
  async function refresh() {
    setBusy(true); setErr("");
    try { onChanged(await api<Marketplace>("POST", `${path}/refresh`)); }
    catch (e) {
      // A refused index is recorded on the marketplace, which keeps its
      // last verified one: show it there; any other failure here.
      const why = `Could not refresh ${m.name}: ${message(e)}`;
      try {
        const now = await api<Marketplace>("GET", path);
        onChanged(now);
        if (!now.error) setErr(why);
      } catch { setErr(why); }
    }
    finally { setBusy(false); }
  }
  async function remove() {
    setBusy(true); setErr("");
    try { await api("DELETE", path); onRemoved(m.name); return; }
    catch (e) { setErr(`Could not remove ${m.name}: ${message(e)}`); cancel(); }
    setBusy(false);
  }
  const hid = `mp-${m.name}`;
  const keys = m.keys ?? [];
  return (
    <li class="plugin" ref={ref} data-testid="marketplace" data-name={m.name} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => { if (confirm && e.key === "Escape") { e.stopPropagation(); cancel(); } }}>
      <div class="plugin-head">
        <h4 id={hid}><code>{m.name}</code></h4>
        <span class="badges">
          <span class={`badge ${m.unsigned ? "b-action" : "b-enabled"}`} data-testid="mp-trust">{m.unsigned ? "unsigned" : "signed"}</span>
          {m.kind !== "kiln" && <span class="badge">{m.kind}</span>}
          {m.error && <span class="badge b-failed" data-testid="mp-refused">last refresh refused</span>}
        </span>
        <span class="plugin-actions">
          <button type="button" class="sm" data-testid="mp-refresh" disabled={busy} onClick={refresh}>{busy && !confirm ? "Refreshing…" : "Refresh"}<span class="sr-only"> {m.name}</span></button>
          {!confirm && <button type="button" class="sm danger" data-testid="mp-remove" disabled={busy} onClick={() => { setErr(""); setConfirm(true); }}>Remove…<span class="sr-only"> {m.name}</span></button>}
        </span>
      </div>
      {confirm && (
        <div class="plugin-confirm" role="group" aria-label={`Remove ${m.name}`} data-testid="mp-confirm">
          <p>Forget <code>{m.name}</code> and its keys? Plugins installed from it stay installed, but are no longer upgraded from it.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="mp-remove-confirm" disabled={busy} onClick={remove}>Remove {m.name}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {m.error && <p class="card-error" data-testid="mp-error">Last refresh refused: {m.error}. The last verified index{m.version ? ` (version ${m.version})` : ""} is kept.</p>}
      {err && <p class="card-error" role="alert" data-testid="mp-action-error">{err}</p>}
      <dl class="kv small">
        <dt>URL</dt><dd><code data-testid="mp-url">{m.url}</code></dd>
        {m.owner && <><dt>Owner</dt><dd>{m.owner}</dd></>}
        <dt>{keys.length === 1 ? "Key" : "Keys"}</dt>
        <dd data-testid="mp-keys">{keys.length ? <ul class="plain">{keys.map((k) => <li key={k}><strong>{keyLabel(k)}</strong> <code class="key">{k}</code></li>)}</ul> : "none (unsigned)"}</dd>
        <dt>Index version</dt><dd data-testid="mp-index-version">{m.version ?? "—"}</dd>
        <dt>Log</dt>
        <dd data-testid="mp-log">{m.tree_size ? <>tree size {m.tree_size}{m.tree_hash && <>, root hash <code>{m.tree_hash}</code></>}</> : "no log"}</dd>
        {m.expires && <><dt>Index expires</dt><dd>{when(m.expires)}</dd></>}
        <dt>Quarantine</dt><dd data-testid="mp-quarantine">{quarantineText(m.quarantine)}</dd>
        <dt>Plugins</dt><dd data-testid="mp-plugins">{m.plugins}</dd>
        <dt>Added</dt><dd>{when(m.added)}</dd>
        <dt>Last refresh</dt><dd data-testid="mp-refreshed">{m.refreshed ? <>{relTime(m.refreshed)} <span class="muted">({when(m.refreshed)})</span></> : "never"}</dd>
      </dl>
    </li>
  );
}

const EMPTY: MarketplaceForm = { name: "", url: "", keys: "", quarantine: "", kind: "kiln", trust: false };

/** The Add marketplace form: the server fetches and verifies the index before adding it. */
function AddMarketplace({ onAdded, onClose }: { onAdded: (m: Marketplace) => void; onClose: () => void }) {
  const [f, setF] = useState<MarketplaceForm>(EMPTY);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const first = useRef<HTMLInputElement>(null);
  useLayoutEffect(() => { first.current?.focus(); }, []);
  const set = <K extends keyof MarketplaceForm>(k: K, v: MarketplaceForm[K]) => setF((o) => ({ ...o, [k]: v }));
  const text = (k: "name" | "url" | "keys" | "quarantine") => (e: Event) => set(k, (e.target as HTMLInputElement | HTMLTextAreaElement).value);
  async function save() {
    const { input, error } = marketplaceInput(f);
    if (error) { setErr(error); return; }
    setBusy(true); setErr("");
    try { onAdded(await api<Marketplace>("POST", "/marketplaces", input)); }
    catch (e) { setErr(`Could not add ${input!.name}: ${message(e)}`); setBusy(false); }
  }
  const plain = { autoComplete: "off", spellcheck: false, autoCapitalize: "off" } as const;
  const claude = f.kind === "claude";
  return (
    <form class="settings-form" aria-label="Add a marketplace" data-testid="mp-form" aria-busy={busy || undefined}
      onSubmit={(e) => { e.preventDefault(); save(); }}
      onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); onClose(); } }}>
      <div class="field-row">
        <div class="field">
          <label for="mp-new-name">Name</label>
          <input id="mp-new-name" ref={first} data-testid="mp-name" {...plain} placeholder="acme" required value={f.name} onInput={text("name")} />
        </div>
        <div class="field">
          <label for="mp-new-kind">Kind</label>
          <select id="mp-new-kind" data-testid="mp-kind-select" value={f.kind} onChange={(e) => set("kind", (e.target as HTMLSelectElement).value as MarketplaceForm["kind"])}>
            <option value="kiln">Kiln (signed)</option>
            <option value="claude">Claude Code (unsigned)</option>
          </select>
        </div>
        <div class="field">
          <label for="mp-new-quarantine">Quarantine <span class="muted">(optional)</span></label>
          <input id="mp-new-quarantine" data-testid="mp-quarantine-input" {...plain} placeholder="72h" value={f.quarantine} onInput={text("quarantine")} aria-describedby="mp-new-quarantine-hint" />
        </div>
      </div>
      <p id="mp-new-quarantine-hint" class="muted small">A version younger than the quarantine (a duration such as 72h) is offered only when asked for by exact version.</p>
      <div class="field">
        <label for="mp-new-url">URL</label>
        <input id="mp-new-url" data-testid="mp-url-input" {...plain} placeholder="https://plugins.example.com/acme/" required value={f.url} onInput={text("url")} aria-describedby="mp-new-url-hint" />
        <p id="mp-new-url-hint" class="muted small">An https:// or file:// URL, a folder on the server's machine, or an http:// URL of this machine.</p>
      </div>
      {claude ? (
        <label class="check" for="mp-new-trust">
          <input id="mp-new-trust" type="checkbox" data-testid="mp-trust-input" checked={f.trust} onChange={(e) => set("trust", (e.target as HTMLInputElement).checked)} />
          Trust this unsigned source <span class="muted small">— nothing proves who wrote its index or that it was not changed</span>
        </label>
      ) : (
        <div class="field">
          <label for="mp-new-keys">Verifier keys <span class="muted">(one per line)</span></label>
          <textarea id="mp-new-keys" class="mono-area" data-testid="mp-keys-input" rows={2} {...plain} placeholder="acme+1a2b3c4d+AQIDBAUG…" value={f.keys} onInput={text("keys")} aria-describedby="mp-new-keys-hint" />
          <p id="mp-new-keys-hint" class="muted small">Only these keys are ever trusted for it (until a rotation signed by one of them). Get them from the marketplace's owner, not from the marketplace.</p>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="mp-form-error">{err}</p>}
      <div class="card-actions">
        <button type="submit" class="primary" data-testid="mp-form-save" disabled={busy}>{busy ? "Verifying…" : "Add"}</button>
        <button type="button" disabled={busy} onClick={onClose}>Cancel</button>
      </div>
    </form>
  );
}
