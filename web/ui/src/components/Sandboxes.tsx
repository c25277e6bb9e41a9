// The Sandboxes page (#/sandboxes): the sandboxes of OpenSandbox's
// lifecycle API (/v1/sandboxes) with their state, runtime, image, expiry
// and metadata; a form that creates one; and per sandbox a command box
// whose output streams in from its execution API, Pause/Resume where the
// runtime can, Renew and Destroy (confirmed on the page first).
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError, sandboxApi } from "../api";
import {
  canPause, execEndpoint, EXT_RUNTIME, interruptCommand, loadRuntimes, outputOf, parseMetadata, runCommand, takesImage, threadOf,
  type Endpoint, type ExecOutcome, type Sandbox, type SandboxPage,
} from "../sandboxes";
import { href } from "../route";
import { relTime, untilTime } from "../time";
import { message, useNow } from "./common";

const path = (id: string, rest = "") => `/sandboxes/${encodeURIComponent(id)}${rest}`;
const PAGE_SIZE = 50;
/** How often the list is read again while the page is open (states change on their own: expiry, a lost sandbox). */
const POLL_MS = 5000;
const STATES = ["Running", "Paused", "Pending", "Failed", "Terminated"];
const RENEW: [string, number][] = [["10 minutes", 600], ["1 hour", 3600], ["1 day", 86400]];

const stateClass = (st: string) => ({ Running: "b-running", Paused: "b-action", Pending: "b-queued", Failed: "b-failed", Terminated: "b-cancelled" } as Record<string, string>)[st] ?? "";

export function SandboxesView() {
  const [list, setList] = useState<Sandbox[]>();
  const [pagination, setPagination] = useState<SandboxPage["pagination"]>();
  const [page, setPage] = useState(1);
  const [state, setState] = useState("");
  const [loadErr, setLoadErr] = useState("");
  const [note, setNote] = useState("");
  const [runtimes, setRuntimes] = useState<string[]>();
  const [learned, setLearned] = useState<Record<string, boolean>>({});
  const [open, setOpen] = useState<Record<string, boolean>>({});
  const head = useRef<HTMLHeadingElement>(null);
  const gen = useRef(0);
  const now = useNow();

  async function load() {
    const g = ++gen.current;
    const q = new URLSearchParams({ page: String(page), pageSize: String(PAGE_SIZE) });
    if (state) q.set("state", state);
    try {
      const r = await sandboxApi<SandboxPage>("GET", `/sandboxes?${q}`);
      if (g !== gen.current) return; // a later read is under way
      setList(r.items ?? []);
      setPagination(r.pagination);
      setLoadErr("");
    } catch (e) {
      if (g !== gen.current || (e instanceof ApiError && e.status === 401)) return;
      setLoadErr(`Could not list the sandboxes: ${message(e)}`);
    }
  }
  useEffect(() => {
    load();
    const t = setInterval(() => { if (!document.hidden) load(); }, POLL_MS);
    return () => clearInterval(t);
  }, [page, state]);
  useEffect(() => {
    loadRuntimes().then(setRuntimes, (e) => { if (!(e instanceof ApiError && e.status === 401)) setRuntimes([]); });
  }, []);

  const put = (sb: Sandbox) => setList((l) => l?.map((x) => (x.id === sb.id ? sb : x)));
  function created(sb: Sandbox) {
    setNote(`Created sandbox ${sb.id}.`);
    setOpen((o) => ({ ...o, [sb.id]: true }));
    setList((l) => (l && !l.some((x) => x.id === sb.id) ? [sb, ...l] : l));
    load();
  }
  function destroyed(sb: Sandbox) {
    setList((l) => l?.filter((x) => x.id !== sb.id));
    setNote(`Destroyed sandbox ${sb.id}.`);
    head.current?.focus(); // its row, and the focused button, are gone
    load();
  }

  return (
    <div class="view sandboxes" data-testid="sandboxes">
      <header class="view-head"><h1>Sandboxes</h1></header>
      <CreateForm runtimes={runtimes} onCreated={created} />
      <section class="panel" aria-labelledby="sbx-h">
        <div class="panel-head">
          <h2 id="sbx-h" tabIndex={-1} ref={head}>Sandboxes{pagination ? <span class="muted small" data-testid="sandboxes-total">{pagination.totalItems}</span> : null}</h2>
          <span class="sbx-tools">
            <label class="sr-only" for="sbx-state">Show</label>
            <select id="sbx-state" data-testid="sandboxes-state" value={state} onChange={(e) => { setPage(1); setState((e.target as HTMLSelectElement).value); }}>
              <option value="">All states</option>
              {STATES.map((s) => <option key={s} value={s}>{s}</option>)}
            </select>
            <button type="button" class="sm" data-testid="sandboxes-refresh" onClick={() => { setNote(""); load(); }}>Refresh</button>
          </span>
        </div>
        <p class="sr-only" role="status" data-testid="sandboxes-note">{note}</p>
        {loadErr && <p class="card-error" role="alert" data-testid="sandboxes-error">{loadErr}</p>}
        {!list ? (!loadErr && <p class="muted">Loading…</p>)
          : !list.length ? <p class="muted" data-testid="sandboxes-empty">{state ? `No sandbox is ${state.toLowerCase()}.` : "No sandboxes. Create one above, or let an agent make one (sandbox.exec)."}</p>
          : <ul class="plugins">{list.map((sb) => (
            <SandboxRow key={sb.id} sb={sb} now={now} pausable={canPause(sb.runtime, learned)}
              open={!!open[sb.id]} onToggle={() => setOpen((o) => ({ ...o, [sb.id]: !o[sb.id] }))}
              onChange={put} onDestroyed={destroyed} onReload={load}
              onNoPause={() => sb.runtime && setLearned((l) => ({ ...l, [sb.runtime!]: false }))} />
          ))}</ul>}
        {pagination && pagination.totalPages > 1 && (
          <nav class="card-actions" aria-label="Pages of sandboxes">
            <button type="button" class="sm" disabled={page <= 1} onClick={() => setPage(page - 1)}>Previous page</button>
            <span class="muted small">Page {pagination.page} of {pagination.totalPages}</span>
            <button type="button" class="sm" disabled={!pagination.hasNextPage} onClick={() => setPage(page + 1)}>Next page</button>
          </nav>
        )}
        <p class="muted small">The same sandboxes as OpenSandbox's SDKs and CLI see at <code>/v1/sandboxes</code> on this server.</p>
      </section>
    </div>
  );
}

function CreateForm({ runtimes, onCreated }: { runtimes?: string[]; onCreated: (sb: Sandbox) => void }) {
  const [runtime, setRuntime] = useState("");
  const [image, setImage] = useState("");
  const [timeout, setTimeoutMin] = useState("10");
  const [meta, setMeta] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const noImage = takesImage(runtime) === false;

  async function submit() {
    setErr("");
    const body: Record<string, unknown> = { timeout: null }; // null: no expiry (absent would be the server's default)
    try {
      const t = timeout.trim();
      if (t) {
        const min = Number(t);
        if (!Number.isFinite(min) || min <= 0) throw new Error("the timeout is a number of minutes above 0, or empty for none");
        body.timeout = Math.max(1, Math.round(min * 60));
      }
      const md = parseMetadata(meta);
      if (md) body.metadata = md;
    } catch (e) { setErr(message(e)); return; }
    if (image.trim() && !noImage) body.image = { uri: image.trim() };
    if (runtime) body.extensions = { [EXT_RUNTIME]: runtime };
    setBusy(true);
    try {
      const sb = await sandboxApi<Sandbox>("POST", "/sandboxes", body);
      setMeta("");
      onCreated({ ...sb, metadata: sb.metadata ?? {}, entrypoint: sb.entrypoint ?? [], ...(body.image ? { image: body.image as { uri: string } } : {}) });
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) setErr(`Could not create the sandbox: ${message(e)}`);
    } finally { setBusy(false); }
  }

  return (
    <section class="panel" aria-labelledby="sbx-new-h">
      <h2 id="sbx-new-h">New sandbox</h2>
      <form class="sbx-form" data-testid="sandbox-create" aria-busy={busy || undefined} onSubmit={(e) => { e.preventDefault(); if (!busy) submit(); }}>
        <div class="field">
          <label for="sbx-runtime">Runtime</label>
          <select id="sbx-runtime" data-testid="sandbox-runtime" value={runtime} onChange={(e) => setRuntime((e.target as HTMLSelectElement).value)}>
            <option value="">Server default</option>
            {(runtimes ?? []).map((r) => <option key={r} value={r}>{r}</option>)}
          </select>
        </div>
        <div class="field grow">
          <label for="sbx-image">Image</label>
          <input id="sbx-image" data-testid="sandbox-image" value={noImage ? "" : image} disabled={noImage} aria-describedby="sbx-image-hint"
            placeholder={noImage ? "none" : "the server's default (busybox:latest for docker)"} onInput={(e) => setImage((e.target as HTMLInputElement).value)} />
          <p id="sbx-image-hint" class="muted small">{noImage ? `The ${runtime} runtime has one environment and takes no image.` : "An OCI image already on the server's host; wasm and js take none."}</p>
        </div>
        <div class="field">
          <label for="sbx-timeout">Expires after (minutes)</label>
          <input id="sbx-timeout" data-testid="sandbox-timeout" inputMode="numeric" value={timeout} aria-describedby="sbx-timeout-hint" onInput={(e) => setTimeoutMin((e.target as HTMLInputElement).value)} />
          <p id="sbx-timeout-hint" class="muted small">Empty: it stays until destroyed.</p>
        </div>
        <div class="field grow">
          <label for="sbx-meta">Metadata</label>
          <input id="sbx-meta" data-testid="sandbox-metadata" value={meta} placeholder="key=value, key2=value2" onInput={(e) => setMeta((e.target as HTMLInputElement).value)} />
        </div>
        <div class="field end"><button type="submit" class="primary" data-testid="sandbox-create-submit" disabled={busy}>{busy ? "Creating…" : "Create"}</button></div>
      </form>
      {err && <p class="card-error" role="alert" data-testid="sandbox-create-error">{err}</p>}
    </section>
  );
}

function SandboxRow({ sb, now, pausable, open, onToggle, onChange, onDestroyed, onReload, onNoPause }: {
  sb: Sandbox; now: number; pausable: boolean | undefined; open: boolean; onToggle: () => void;
  onChange: (sb: Sandbox) => void; onDestroyed: (sb: Sandbox) => void; onReload: () => void; onNoPause: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [confirm, setConfirm] = useState(false);
  const [renewFor, setRenewFor] = useState(String(RENEW[0][1]));
  const ref = useRef<HTMLLIElement>(null);
  const back = useRef(false); // a cancelled confirmation returns focus to Destroy…
  const st = sb.status.state;
  const live = st === "Running" || st === "Paused";
  const hid = `sbx-${sb.id}`, boxId = `sbx-exec-${sb.id}`;
  // As in the Plugins panel: focus moves in the same task that shows (or hides) the confirmation.
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f("sandbox-destroy-confirm");
    else if (back.current) { back.current = false; f("sandbox-destroy"); }
  }, [confirm]);

  async function act(what: string, f: () => Promise<void>) {
    setBusy(true); setErr("");
    try { await f(); }
    catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      if (e instanceof ApiError && e.status === 404) { onDestroyed(sb); return; }
      setErr(`Could not ${what} ${sb.id}: ${message(e)}`);
    } finally { setBusy(false); }
  }
  const pause = (on: boolean) => act(on ? "pause" : "resume", async () => {
    try { await sandboxApi("POST", path(sb.id, on ? "/pause" : "/resume")); }
    catch (e) { if (on && e instanceof ApiError && e.status === 501) onNoPause(); throw e; }
    onChange({ ...sb, status: { ...sb.status, state: on ? "Paused" : "Running" } });
    onReload();
  });
  const renew = () => act("renew", async () => {
    const at = new Date(Date.now() + Number(renewFor) * 1000).toISOString();
    const r = await sandboxApi<{ expiresAt: string }>("POST", path(sb.id, "/renew-expiration"), { expiresAt: at });
    onChange({ ...sb, expiresAt: r.expiresAt });
  });
  const destroy = () => act("destroy", async () => {
    await sandboxApi("DELETE", path(sb.id));
    onDestroyed(sb);
  });
  const cancel = () => { back.current = true; setConfirm(false); };
  const meta = Object.entries(sb.metadata ?? {});
  const until = untilTime(sb.expiresAt, now);
  const thread = threadOf(sb);

  return (
    <li class="plugin sandbox" ref={ref} data-testid="sandbox" data-sandbox-id={sb.id} data-state={st} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => { if (e.key === "Escape" && confirm) { e.stopPropagation(); cancel(); } }}>
      <div class="plugin-head">
        <h3 id={hid}><code>{sb.id}</code></h3>
        <span class="badges">
          <span class={`badge ${stateClass(st)}`} data-testid="sandbox-state">{st}</span>
          {sb.runtime && <span class="badge" data-testid="sandbox-runtime-badge">{sb.runtime}</span>}
        </span>
      </div>
      <dl class="kv sbx-kv">
        <dt>Image</dt><dd data-testid="sandbox-image-uri">{sb.image?.uri ? <code>{sb.image.uri}</code> : <span class="muted">{takesImage(sb.runtime) === false ? "none (one environment)" : "the server's default"}</span>}</dd>
        <dt>Expires</dt><dd data-testid="sandbox-expiry">{sb.expiresAt
          ? <time dateTime={sb.expiresAt} title={new Date(sb.expiresAt).toLocaleString()}>{until === "expired" ? "expired" : until}</time>
          : <span class="muted">never: it stays until destroyed</span>}</dd>
        <dt>Created</dt><dd><time dateTime={sb.createdAt} title={new Date(sb.createdAt).toLocaleString()}>{relTime(sb.createdAt, now)}</time></dd>
        {thread && <><dt>Thread</dt><dd data-testid="sandbox-thread">An agent thread's own sandbox: <a href={href({ view: "thread", id: thread })} data-testid="sandbox-thread-link">open thread <code>{thread}</code></a></dd></>}
        <dt>Metadata</dt><dd data-testid="sandbox-metadata-list">{meta.length
          ? <ul class="sbx-meta">{meta.map(([k, v]) => <li key={k}><code>{k}={v}</code></li>)}</ul>
          : <span class="muted">none</span>}</dd>
      </dl>
      {(sb.status.reason || sb.status.message) && <p class={st === "Failed" ? "card-error" : "muted small"} data-testid="sandbox-status-message">{[sb.status.reason, sb.status.message].filter(Boolean).join(": ")}</p>}
      <div class="card-actions">
        <button type="button" class="sm" data-testid="sandbox-exec-toggle" aria-expanded={open} aria-controls={open ? boxId : undefined} onClick={onToggle}>
          {open ? "Hide commands" : "Run commands"}<span class="sr-only"> in {sb.id}</span>
        </button>
        {st === "Running" && pausable !== false && <button type="button" class="sm" data-testid="sandbox-pause" disabled={busy} onClick={() => pause(true)}>Pause<span class="sr-only"> {sb.id}</span></button>}
        {st === "Paused" && <button type="button" class="sm" data-testid="sandbox-resume" disabled={busy} onClick={() => pause(false)}>Resume<span class="sr-only"> {sb.id}</span></button>}
        {live && (
          <span class="sbx-renew">
            <label class="sr-only" for={`sbx-renew-${sb.id}`}>Renew {sb.id} for</label>
            <select id={`sbx-renew-${sb.id}`} class="sm" data-testid="sandbox-renew-for" value={renewFor} onChange={(e) => setRenewFor((e.target as HTMLSelectElement).value)}>
              {RENEW.map(([label, s]) => <option key={s} value={String(s)}>{label} from now</option>)}
            </select>
            <button type="button" class="sm" data-testid="sandbox-renew" disabled={busy} onClick={renew}>Renew<span class="sr-only"> {sb.id}</span></button>
          </span>
        )}
        {!confirm && <button type="button" class="sm danger" data-testid="sandbox-destroy" disabled={busy} onClick={() => { setErr(""); setConfirm(true); }}>Destroy…<span class="sr-only"> {sb.id}</span></button>}
      </div>
      {confirm && (
        <div class="plugin-confirm" role="group" aria-label={`Destroy ${sb.id}`} data-testid="sandbox-confirm">
          <p>Destroy sandbox <code>{sb.id}</code>? Whatever runs in it is stopped and its files are deleted.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="sandbox-destroy-confirm" disabled={busy} onClick={destroy}>Destroy {sb.id}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="sandbox-action-error">{err}</p>}
      {open && <ExecBox id={boxId} sb={sb} />}
    </li>
  );
}

interface Chunk { stream: "stdout" | "stderr"; text: string }
interface Run { n: number; command: string; chunks: Chunk[]; size: number; dropped: boolean; started?: boolean; outcome?: ExecOutcome; error?: string }
/** How much of one command's output the page keeps; beyond it the oldest goes. */
const MAX_OUTPUT = 256 * 1024;
/** How many commands' outputs the box keeps. */
const MAX_RUNS = 20;

function append(r: Run, c: Chunk): Run {
  const chunks = [...r.chunks];
  const last = chunks[chunks.length - 1];
  if (last && last.stream === c.stream) chunks[chunks.length - 1] = { ...last, text: last.text + c.text };
  else chunks.push(c);
  let size = r.size + c.text.length, dropped = r.dropped;
  while (size > MAX_OUTPUT && chunks.length) {
    const over = size - MAX_OUTPUT, first = chunks[0];
    if (first.text.length <= over) { chunks.shift(); size -= first.text.length; }
    else { chunks[0] = { ...first, text: first.text.slice(over) }; size -= over; }
    dropped = true;
  }
  return { ...r, chunks, size, dropped };
}

/** The command box of one sandbox: a shell command, its output as it comes, how it ended; Interrupt (or Ctrl+C) stops it. */
function ExecBox({ id, sb }: { id: string; sb: Sandbox }) {
  const [cmd, setCmd] = useState("");
  const [runs, setRuns] = useState<Run[]>([]);
  const [running, setRunning] = useState(false);
  const [err, setErr] = useState("");
  const ep = useRef<Endpoint | undefined>(undefined);
  const ctrl = useRef<AbortController | undefined>(undefined);
  const current = useRef<Run | undefined>(undefined);
  const commandId = useRef<string | undefined>(undefined);
  const count = useRef(0);
  const out = useRef<HTMLDivElement>(null);
  useEffect(() => () => ctrl.current?.abort(), []); // leaving drops the stream: the server ends the command
  useEffect(() => { const el = out.current; if (el) el.scrollTop = el.scrollHeight; }, [runs]);

  const update = (n: number, f: (r: Run) => Run) => setRuns((rs) => rs.map((r) => (r.n === n ? f(r) : r)));

  async function run() {
    const command = cmd.trim();
    if (!command || running) return;
    setErr("");
    const n = ++count.current;
    const r: Run = { n, command, chunks: [], size: 0, dropped: false };
    current.current = r;
    commandId.current = undefined;
    setRuns((rs) => [...rs, r].slice(-MAX_RUNS));
    setRunning(true);
    const ac = new AbortController();
    ctrl.current = ac;
    try {
      ep.current ??= await execEndpoint(sb.id);
      const outcome = await runCommand(ep.current, command, (e) => {
        if (e.type === "init") { commandId.current = e.text; update(n, (x) => ({ ...x, started: true })); }
        else if ((e.type === "stdout" || e.type === "stderr") && e.text) update(n, (x) => append(x, { stream: e.type as Chunk["stream"], text: outputOf(e) }));
      }, ac.signal);
      update(n, (x) => ({ ...x, outcome }));
      setCmd("");
    } catch (e) {
      if (e instanceof ApiError && (e.status === 401 || e.status === 404)) ep.current = undefined; // a new token or a gone sandbox: ask again next time
      // Interrupted before it said its ID: the stream was dropped, which ends it too.
      if (ac.signal.aborted && e instanceof ApiError && e.code === "aborted") update(n, (x) => ({ ...x, outcome: { kind: "interrupted", message: e.message } }));
      else update(n, (x) => ({ ...x, error: message(e) }));
    } finally {
      if (ctrl.current === ac) ctrl.current = undefined;
      current.current = undefined;
      setRunning(false);
    }
  }
  async function interrupt() {
    if (!current.current) return;
    const cid = commandId.current;
    if (!cid || !ep.current) { ctrl.current?.abort(); return; }
    try { await interruptCommand(ep.current, cid); }
    catch (e) { setErr(`Could not interrupt: ${message(e)}`); ctrl.current?.abort(); }
  }

  return (
    <div class="sbx-exec" id={id} data-testid="exec-box">
      <form class="sbx-exec-form" onSubmit={(e) => { e.preventDefault(); run(); }}>
        <label class="sr-only" for={`${id}-cmd`}>Command to run in {sb.id}</label>
        <span class="sbx-prompt" aria-hidden="true">$</span>
        <input id={`${id}-cmd`} class="mono" data-testid="exec-input" value={cmd} autoComplete="off" spellcheck={false} placeholder="a shell command, e.g. ls -la /"
          aria-describedby={`${id}-hint`} onInput={(e) => setCmd((e.target as HTMLInputElement).value)}
          onKeyDown={(e) => {
            const el = e.target as HTMLInputElement;
            if (running && e.ctrlKey && e.key === "c" && el.selectionStart === el.selectionEnd) { e.preventDefault(); interrupt(); }
          }} />
        {running
          ? <button type="button" class="sm danger" data-testid="exec-interrupt" onClick={interrupt}>Interrupt</button>
          : <button type="submit" class="sm primary" data-testid="exec-run" disabled={!cmd.trim()}>Run</button>}
      </form>
      <p id={`${id}-hint`} class="muted small">{sb.status.state === "Running" ? "Enter runs it in the sandbox's shell; Ctrl+C (with nothing selected) or Interrupt stops it." : `The sandbox is ${sb.status.state.toLowerCase()}; commands run in a running one.`}</p>
      {err && <p class="card-error" role="alert" data-testid="exec-error">{err}</p>}
      {runs.length > 0 && (
        <div class="sbx-out" ref={out} role="log" aria-label={`Output in ${sb.id}`} data-testid="exec-log" tabIndex={0}>
          {runs.map((r) => <RunView key={r.n} r={r} />)}
        </div>
      )}
    </div>
  );
}

function RunView({ r }: { r: Run }) {
  const o = r.outcome;
  const state = r.error ? "error" : !o ? "running" : o.kind;
  return (
    <div class="sbx-run" data-testid="exec-run-item" data-state={state} data-started={r.started ? "" : undefined} data-exit-code={o?.kind === "exit" ? String(o.code) : undefined}>
      <div class="sbx-cmd"><span aria-hidden="true">$ </span><code>{r.command}</code></div>
      {r.dropped && <div class="muted small">(earlier output dropped: only the last {MAX_OUTPUT / 1024} KiB are kept)</div>}
      {r.chunks.length > 0 && <pre class="sbx-pre" data-testid="exec-output">{r.chunks.map((c, i) => <span key={i} class={`sbx-${c.stream}`} data-stream={c.stream}>{c.text}</span>)}</pre>}
      <div class="sbx-end small" data-testid="exec-status">
        {r.error ? <span class="fail-text">{r.error}</span>
          : !o ? <span class="muted">running…</span>
          : o.kind === "exit" ? <span class={o.code === 0 ? "ok" : "fail-text"}>exit code {o.code}{o.ms !== undefined ? <span class="muted"> · {o.ms} ms</span> : null}</span>
          : o.kind === "interrupted" ? <span class="fail-text">interrupted</span>
          : <span class="fail-text">{o.name}: {o.message}</span>}
      </div>
    </div>
  );
}
