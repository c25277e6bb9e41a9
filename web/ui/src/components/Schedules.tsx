// The Triggers page (#/triggers): the owner's cron and webhook
// triggers (/api/v1/triggers) with their schedule and time zone or
// webhook URL, enabled state and next fire times; a form that creates or
// edits one, previewing the next fire times of the expression as it is
// typed; per trigger Enable/Disable, Run now, Edit, Delete (confirmed on
// the page) and, for a webhook, Rotate secret; and its history of
// occurrences with what came of each, linked to their threads. A
// webhook's secret is shown once, when it is made or rotated, and is
// kept in no storage: only in this page's memory until dismissed.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api";
import { modelGroups } from "../format";
import { href } from "../route";
import {
  CATCHUPS, OVERLAPS, UNATTENDED, causeLabel, createBody, createTrigger, deleteTrigger, errorField, fireTime, fireTrigger, formOf,
  hookUrl, isLive, listOccurrences, listTriggers, localZone, needSeconds, outcomeOf, patchBody, previewSchedule, previewTrigger,
  rotateSecret, summary, timeZones, updateTrigger, type TriggerForm,
} from "../schedules";
import { defaultModel, onGlobalEvent, store } from "../state/app";
import { useStore } from "../state/store";
import { relTime, untilTime } from "../time";
import { message, useNow } from "./common";
import type { Occurrence, Trigger } from "../types";

/** How many fire times the form's preview and a trigger's details show. */
const PREVIEW_N = 5;
/** How long typing must pause before the preview asks the server. */
const DEBOUNCE_MS = 300;
/** A history page. */
const HISTORY_N = 20;
/** How often the list is read again while the page is open (the events say most changes sooner). */
const POLL_MS = 30000;
/** How often a history with a run still going is read again, in case an event was missed. */
const LIVE_POLL_MS = 5000;

const quiet = (e: unknown) => e instanceof ApiError && e.status === 401; // the token dialog says it

function Until({ iso }: { iso: string }) {
  const u = untilTime(iso, useNow());
  return <span class="muted small">{u === "expired" ? "due" : u}</span>;
}
function Ago({ iso }: { iso: string }) {
  return <span class="muted small">{relTime(iso, useNow())}</span>;
}

/** A fire time in the trigger's zone, the browser's local time on hover. */
function FireTime({ iso, tz, seconds, testid }: { iso: string; tz?: string; seconds: boolean; testid?: string }) {
  return (
    <><time dateTime={iso} data-testid={testid} title={`${new Date(iso).toLocaleString()} (your time)`}>{fireTime(iso, tz, seconds)}</time> <Until iso={iso} /></>
  );
}

async function copy(text: string, el?: HTMLInputElement | null): Promise<boolean> {
  try { await navigator.clipboard.writeText(text); return true; } catch { /* not allowed here: select and copy */ }
  if (!el) return false;
  el.focus(); el.select();
  try { return document.execCommand("copy"); } catch { return false; }
}

/** A copy button that says, visibly and to screen readers, that it copied (or that it could not). */
function CopyButton({ text, label, testid, field }: { text: string; label: string; testid: string; field?: () => HTMLInputElement | null }) {
  const [said, setSaid] = useState("");
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  async function click() {
    const ok = await copy(text, field?.());
    setSaid(ok ? "Copied." : "Could not copy: select the text and copy it.");
    clearTimeout(timer.current);
    timer.current = setTimeout(() => setSaid(""), 4000);
  }
  return (
    <>
      <button type="button" class="sm" data-testid={testid} onClick={click}>{label}</button>
      <span class="muted small" role="status" data-testid={`${testid}-status`}>{said}</span>
    </>
  );
}

export function SchedulesView() {
  const [list, setList] = useState<Trigger[]>();
  const [loadErr, setLoadErr] = useState("");
  const [missing, setMissing] = useState(false);
  const [note, setNote] = useState("");
  const [creating, setCreating] = useState(false);
  const [open, setOpen] = useState<Record<string, boolean>>({});
  /** Secrets just made or rotated, by trigger, until dismissed: never stored anywhere else. */
  const [secrets, setSecrets] = useState<Record<string, { secret: string; rotated: boolean }>>({});
  const [focus, setFocus] = useState("");
  const head = useRef<HTMLHeadingElement>(null);
  const newBtn = useRef<HTMLButtonElement>(null);
  const gen = useRef(0);

  async function load() {
    const g = ++gen.current;
    try {
      const trs = await listTriggers();
      if (g !== gen.current) return; // a later read is under way
      setList(trs); setLoadErr(""); setMissing(false);
    } catch (e) {
      if (g !== gen.current || quiet(e)) return;
      if (e instanceof ApiError && e.status === 404) { setMissing(true); return; }
      setLoadErr(`Could not list the triggers: ${message(e)}`);
    }
  }
  useEffect(() => {
    load();
    const t = setInterval(() => { if (!document.hidden) load(); }, POLL_MS);
    let soon: ReturnType<typeof setTimeout> | undefined;
    const off = onGlobalEvent((e) => {
      if (e && !e.type.startsWith("trigger.")) return;
      clearTimeout(soon);
      soon = setTimeout(load, 150);
    });
    return () => { clearInterval(t); clearTimeout(soon); off(); };
  }, []);
  // When the soonest fire time passes, the next ones move on: read them again then.
  useEffect(() => {
    const soonest = Math.min(...(list ?? []).flatMap((t) => (t.next ?? []).slice(0, 1).map((x) => Date.parse(x))).filter(Number.isFinite));
    if (!Number.isFinite(soonest)) return;
    const wait = soonest - Date.now() + 1000;
    if (wait > POLL_MS) return; // the poll comes first
    const t = setTimeout(load, Math.max(1000, wait));
    return () => clearTimeout(t);
  }, [list]);

  const put = (tr: Trigger) => setList((l) => l?.map((x) => (x.id === tr.id ? { ...tr, next: tr.next?.slice(0, 1) } : x)));
  function created(tr: Trigger) {
    const { secret, ...rest } = tr;
    setList((l) => [...(l ?? []).filter((x) => x.id !== tr.id), rest]);
    if (secret) setSecrets((s) => ({ ...s, [tr.id]: { secret, rotated: false } }));
    setCreating(false);
    setNote(`Created trigger ${summary(tr)}.`);
    setFocus(tr.id);
  }
  function rotated(tr: Trigger) {
    const { secret, ...rest } = tr;
    put(rest);
    if (secret) setSecrets((s) => ({ ...s, [tr.id]: { secret, rotated: true } }));
    setNote(`Rotated the secret of ${summary(tr)}.`);
  }
  const forget = (id: string) => setSecrets((s) => { const { [id]: _, ...rest } = s; return rest; });
  function deleted(tr: Trigger) {
    setList((l) => l?.filter((x) => x.id !== tr.id));
    forget(tr.id);
    setNote(`Deleted trigger ${summary(tr)}.`);
    head.current?.focus(); // its row, and the focused button, are gone
  }
  function gone(tr: Trigger) {
    setList((l) => l?.filter((x) => x.id !== tr.id));
    forget(tr.id);
    setNote(`Trigger ${summary(tr)} no longer exists.`);
    head.current?.focus();
  }
  function closeForm() { setCreating(false); newBtn.current?.focus(); }

  return (
    <div class="view schedules" data-testid="schedules">
      <header class="view-head">
        <h1>Triggers</h1>
        {!missing && <button type="button" class="primary sm" ref={newBtn} data-testid="trigger-new" aria-expanded={creating} aria-controls={creating ? "sched-new" : undefined}
          onClick={() => setCreating((c) => !c)}>New trigger</button>}
      </header>
      {creating && (
        <section class="panel" id="sched-new" aria-labelledby="sched-new-h">
          <h2 id="sched-new-h">New trigger</h2>
          <TriggerFormView onDone={created} onCancel={closeForm} />
        </section>
      )}
      <section class="panel" aria-labelledby="sched-h">
        <div class="panel-head">
          <h2 id="sched-h" tabIndex={-1} ref={head}>All triggers{list ? <span class="muted small" data-testid="schedules-total">{list.length}</span> : null}</h2>
          {!missing && <button type="button" class="sm" data-testid="schedules-refresh" onClick={() => { setNote(""); load(); }}>Refresh</button>}
        </div>
        <p class="sr-only" role="status" data-testid="schedules-note">{note}</p>
        {missing ? <p class="muted" data-testid="schedules-missing">This server has no triggers API (an older Kiln): update it to schedule runs.</p>
          : loadErr ? <p class="card-error" role="alert" data-testid="schedules-error">{loadErr} <button type="button" class="sm" onClick={load}>Retry</button></p>
          : !list ? <p class="muted" role="status">Loading…</p>
          : !list.length ? (
            <div class="sched-empty" data-testid="schedules-empty">
              <p>No triggers yet.</p>
              <p class="muted">A <strong>cron</strong> trigger runs a prompt on a schedule (every weekday at 9, every 15 minutes) in its time zone;
                a <strong>webhook</strong> trigger runs one when a request reaches its URL, its JSON filling the prompt. Each run lands in the inbox like any other.</p>
              {!creating && <button type="button" class="sm" onClick={() => setCreating(true)}>Create the first one</button>}
            </div>
          )
          : <ul class="plugins triggers">{list.map((tr) => (
            <TriggerRow key={tr.id} tr={tr} open={!!open[tr.id]} focus={focus === tr.id} onFocused={() => setFocus("")}
              onToggle={(v) => setOpen((o) => ({ ...o, [tr.id]: v ?? !o[tr.id] }))}
              secret={secrets[tr.id]} onSecretDone={() => forget(tr.id)}
              onChange={put} onRotated={rotated} onDeleted={deleted} onGone={gone} />
          ))}</ul>}
        <p class="muted small">The same triggers as <code>kiln triggers ls</code> and <code>/api/v1/triggers</code>. A new cron trigger first fires at its schedule's first slot after it is saved; Run now fires it at once.</p>
      </section>
    </div>
  );
}

type Preview = { state: "idle" | "loading" | "ok" | "error"; next: string[]; error: string };

/** The next fire times of an expression as it is typed: asked for once typing pauses, later answers winning over earlier ones. */
function usePreview(on: boolean, cron: string, tz: string): Preview {
  const [p, setP] = useState<Preview>({ state: "idle", next: [], error: "" });
  useEffect(() => {
    if (!on || !cron.trim()) { setP({ state: "idle", next: [], error: "" }); return; }
    let live = true;
    setP((x) => ({ ...x, state: "loading" }));
    const t = setTimeout(async () => {
      try {
        const next = await previewSchedule(cron.trim(), tz.trim(), PREVIEW_N);
        if (live) setP({ state: "ok", next, error: "" });
      } catch (e) {
        if (live && !quiet(e)) setP({ state: "error", next: [], error: message(e) });
      }
    }, DEBOUNCE_MS);
    return () => { live = false; clearTimeout(t); };
  }, [on, cron, tz]);
  return p;
}

let zoneList: string[] | undefined;

/** The form that creates a trigger, or edits one (its kind stays). */
function TriggerFormView({ initial, onDone, onCancel }: { initial?: Trigger; onDone: (tr: Trigger) => void; onCancel: () => void }) {
  const s = useStore(store);
  const [f, setF] = useState<TriggerForm>(() => formOf(initial, localZone()));
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<{ field: string; text: string }>();
  const secretRef = useRef<HTMLInputElement>(null); // a secret of one's own stays in its field, never in state
  const formRef = useRef<HTMLFormElement>(null);
  const pfx = initial ? `tf-${initial.id}` : "tf-new";
  const id = (x: string) => `${pfx}-${x}`;
  const cron = f.kind === "cron";
  const preview = usePreview(cron, f.cron, f.timezone);
  zoneList ??= timeZones();
  useLayoutEffect(() => { formRef.current?.querySelector<HTMLElement>(initial ? `#${id("name")}` : "input[type=radio]:checked")?.focus(); }, []);

  const set = <K extends keyof TriggerForm>(k: K, v: TriggerForm[K]) => {
    setF((x) => ({ ...x, [k]: v }));
    if (err && (err.field === k || !err.field)) setErr(undefined);
  };
  const val = (e: Event) => (e.target as HTMLInputElement).value;

  async function submit() {
    setErr(undefined);
    const form = { ...f, secret: secretRef.current?.value ?? "" };
    let body: Record<string, unknown>;
    try { body = initial ? patchBody(initial, form) : createBody(form); }
    catch (e) { setErr({ field: "rateLimit", text: message(e) }); return; }
    if (initial && !Object.keys(body).length) { onCancel(); return; }
    setBusy(true);
    try {
      const tr = initial ? await updateTrigger(initial.id, body) : await createTrigger(body);
      if (secretRef.current) secretRef.current.value = "";
      onDone(tr);
    } catch (e) {
      if (quiet(e)) return;
      const text = message(e);
      setErr({ field: e instanceof ApiError && e.status === 400 ? errorField(text) : "", text: `${initial ? "Not saved" : "Not created"}: ${text}` });
    } finally { setBusy(false); }
  }

  const def = defaultModel(s);
  const groups = modelGroups(s.models, def, f.model);
  const errFor = (field: string) => (err && err.field === field ? <p id={id("err")} class="card-error" role="alert" data-testid="trigger-form-error">{err.text}</p> : null);
  const invalid = (field: string, also = false) => (err?.field === field || also ? true : undefined);
  const describe = (field: string, ...ids: string[]) => [...ids, err?.field === field ? id("err") : ""].filter(Boolean).join(" ") || undefined;
  const secs = needSeconds(preview.next);

  return (
    <form class="sched-form" ref={formRef} data-testid="trigger-form" data-mode={initial ? "edit" : "create"} aria-busy={busy || undefined} noValidate
      onSubmit={(e) => { e.preventDefault(); if (!busy) submit(); }}>
      {initial ? <p class="muted small">A {initial.kind} trigger (the kind cannot change; create another for the other kind).</p> : (
        <fieldset class="sched-kind">
          <legend>Kind</legend>
          <label class="radio"><input type="radio" name={id("kind")} value="cron" data-testid="trigger-kind-cron" checked={cron} onChange={() => set("kind", "cron")} />
            Cron: on a schedule</label>
          <label class="radio"><input type="radio" name={id("kind")} value="webhook" data-testid="trigger-kind-webhook" checked={!cron} onChange={() => set("kind", "webhook")} />
            Webhook: when a request reaches its URL</label>
        </fieldset>
      )}
      <div class="field">
        <label for={id("name")}>Name <span class="muted">(optional; its threads are named after it)</span></label>
        <input id={id("name")} data-testid="trigger-name" value={f.name} maxLength={200} aria-invalid={invalid("name")} aria-describedby={describe("name")} onInput={(e) => set("name", val(e))} />
        {errFor("name")}
      </div>
      {cron && (
        <div class="sched-when">
          <div class="field grow">
            <label for={id("cron")}>Cron expression</label>
            <input id={id("cron")} class="mono" data-testid="trigger-cron" value={f.cron} autoComplete="off" spellcheck={false} placeholder="0 9 * * MON-FRI"
              aria-invalid={invalid("cron", preview.state === "error" && !/^timezone:/.test(preview.error))} aria-describedby={describe("cron", id("cron-hint"), id("preview"))}
              onInput={(e) => set("cron", val(e))} />
            <p id={id("cron-hint")} class="muted small">Minute, hour, day of month, month, day of week (6 fields: seconds first); or <code>@hourly</code>, <code>@daily</code>, <code>@weekly</code>, <code>@every 15m</code>.</p>
            {errFor("cron")}
          </div>
          <div class="field">
            <label for={id("tz")}>Time zone</label>
            <input id={id("tz")} data-testid="trigger-timezone" value={f.timezone} list={id("zones")} autoComplete="off" spellcheck={false} placeholder="UTC"
              aria-invalid={invalid("timezone", preview.state === "error" && /^timezone:/.test(preview.error))} aria-describedby={describe("timezone", id("tz-hint"))}
              onInput={(e) => set("timezone", val(e))} />
            <datalist id={id("zones")}>{zoneList.map((z) => <option key={z} value={z} />)}</datalist>
            <p id={id("tz-hint")} class="muted small">An IANA name such as Europe/Berlin; empty is UTC.</p>
            {errFor("timezone")}
          </div>
          <div class="sched-preview" id={id("preview")} data-testid="trigger-preview" data-state={preview.state} aria-live="polite">
            {preview.state === "idle" ? <p class="muted small">Type an expression to see its next fire times.</p>
              : preview.state === "error" ? (err?.field === "cron" || err?.field === "timezone" ? null // the same reason shows at its field
                : <p class="field-error" data-testid="trigger-preview-error">{preview.error}</p>)
              : (
                <>
                  <p class="small"><strong>Next {PREVIEW_N} fire times</strong>{preview.state === "loading" && <span class="muted"> (checking…)</span>}</p>
                  {preview.next.length ? <ol class="sched-times">{preview.next.map((t) => <li key={t}><FireTime iso={t} tz={f.timezone.trim()} seconds={secs} testid="trigger-preview-time" /></li>)}</ol>
                    : preview.state === "ok" ? <p class="muted small">It never fires.</p> : null}
                </>
              )}
          </div>
        </div>
      )}
      <div class="field">
        <label for={id("prompt")}>Prompt</label>
        <textarea id={id("prompt")} class="mono-area" data-testid="trigger-prompt" rows={4} value={f.prompt} aria-invalid={invalid("prompt")}
          aria-describedby={describe("prompt", id("prompt-hint"))} onInput={(e) => set("prompt", val(e))} />
        <p id={id("prompt-hint")} class="muted small">{cron ? "The first message of each run." : <>The first message of each run, a Go template the delivery's JSON fills: <code>{"Review {{.pull_request.html_url}}"}</code>.</>}</p>
        {errFor("prompt")}
      </div>
      <div class="field-row">
        <div class="field">
          <label for={id("model")}>Model</label>
          <select id={id("model")} data-testid="trigger-model" value={f.model} onChange={(e) => set("model", (e.target as HTMLSelectElement).value)}>
            <option value="">Server default{def ? ` (${def})` : ""}</option>
            {groups.map((g) => {
              const opts = g.options.map((o) => <option key={o.value} value={o.value}>{o.label}</option>);
              return g.label ? <optgroup key={g.label} label={g.label}>{opts}</optgroup> : opts;
            })}
          </select>
        </div>
        <label class="check"><input type="checkbox" data-testid="trigger-enabled-input" checked={f.enabled} onChange={(e) => set("enabled", (e.target as HTMLInputElement).checked)} /> Enabled</label>
      </div>
      <details class="plugin-more sched-more" open={!!err && ["allow", "catchupWindow", "secret", "rateLimit"].includes(err.field)}>
        <summary>Policies{cron ? ": overlap, catch-up, unattended" : ": overlap, unattended, secret, rate limit"}</summary>
        <div class="field-row">
          <div class="field">
            <label for={id("overlap")}>While the previous run is still active</label>
            <select id={id("overlap")} data-testid="trigger-overlap" value={f.overlap} onChange={(e) => set("overlap", (e.target as HTMLSelectElement).value)}>
              {OVERLAPS.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
            </select>
          </div>
          {cron && (
            <>
              <div class="field">
                <label for={id("catchup")}>Slots missed while Kiln was down</label>
                <select id={id("catchup")} data-testid="trigger-catchup" value={f.catchup} onChange={(e) => set("catchup", (e.target as HTMLSelectElement).value)}>
                  {CATCHUPS.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
                </select>
              </div>
              <div class="field">
                <label for={id("window")}>Catch-up window</label>
                <input id={id("window")} class="mono" data-testid="trigger-catchup-window" value={f.catchupWindow} placeholder="1h" size={8} aria-invalid={invalid("catchupWindow")}
                  aria-describedby={describe("catchupWindow")} onInput={(e) => set("catchupWindow", val(e))} />
                {errFor("catchupWindow")}
              </div>
            </>
          )}
        </div>
        <div class="field-row">
          <div class="field">
            <label for={id("unattended")}>A tool call that needs approval</label>
            <select id={id("unattended")} data-testid="trigger-unattended" value={f.unattended} onChange={(e) => set("unattended", (e.target as HTMLSelectElement).value)}>
              {UNATTENDED.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
            </select>
          </div>
          {f.unattended === "allow" && (
            <div class="field grow">
              <label for={id("allow")}>Tools allowed without approval</label>
              <input id={id("allow")} class="mono" data-testid="trigger-allow" value={f.allow} placeholder="append_file, fs.*" aria-invalid={invalid("allow")}
                aria-describedby={describe("allow")} onInput={(e) => set("allow", val(e))} />
              {errFor("allow")}
            </div>
          )}
        </div>
        {!cron && (
          <div class="field-row">
            <div class="field grow">
              <label for={id("secret")}>{initial ? "Replace the secret with one of your own" : "Secret of your own"} <span class="muted">(optional, at least 32 characters)</span></label>
              <input id={id("secret")} ref={secretRef} type="password" class="mono" data-testid="trigger-secret" autoComplete="off" aria-invalid={invalid("secret")}
                aria-describedby={describe("secret", id("secret-hint"))} onInput={() => { if (err?.field === "secret") setErr(undefined); }} />
              <p id={id("secret-hint")} class="muted small">{initial ? "Empty keeps the current secret; Rotate secret makes a new one." : "Empty: Kiln makes one and shows it once."}</p>
              {errFor("secret")}
            </div>
            <div class="field">
              <label for={id("rate")}>Deliveries a minute</label>
              <input id={id("rate")} data-testid="trigger-rate-limit" inputMode="numeric" size={6} value={f.rateLimit} placeholder="60" aria-invalid={invalid("rateLimit")}
                aria-describedby={describe("rateLimit")} onInput={(e) => set("rateLimit", val(e))} />
              {errFor("rateLimit")}
            </div>
          </div>
        )}
      </details>
      {err && !["name", "cron", "timezone", "prompt", "catchupWindow", "allow", "secret", "rateLimit"].includes(err.field) && errFor(err.field)}
      <div class="card-actions">
        <button type="submit" class="primary" data-testid="trigger-submit" disabled={busy}>{busy ? (initial ? "Saving…" : "Creating…") : initial ? "Save changes" : "Create trigger"}</button>
        <button type="button" data-testid="trigger-cancel" disabled={busy} onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

/** A webhook secret, just made or rotated: shown this once, with a copy button, until the user says they have it. */
function SecretOnce({ tr, secret, rotated, onDone }: { tr: Trigger; secret: string; rotated: boolean; onDone: () => void }) {
  const field = useRef<HTMLInputElement>(null);
  const hid = `sec-h-${tr.id}`, fid = `sec-${tr.id}`;
  useLayoutEffect(() => { field.current?.focus(); field.current?.select(); }, [secret]);
  return (
    <div class="secret-once" role="region" aria-labelledby={hid} data-testid="secret-once">
      <h4 id={hid}>{rotated ? "The new secret" : "The webhook's secret"}</h4>
      <p class="note"><strong>Shown once.</strong> Copy it now: Kiln keeps only a hash of it (and a sealed copy to check signatures) and will not show it again{rotated ? "; the previous secret has stopped working" : ""}. Lost, it can only be rotated.</p>
      <div class="secret-row">
        <label class="sr-only" for={fid}>Secret of {summary(tr)}</label>
        <input id={fid} ref={field} class="mono" data-testid="secret-value" readOnly value={secret} spellcheck={false} onFocus={(e) => (e.target as HTMLInputElement).select()} />
        <CopyButton text={secret} label="Copy secret" testid="secret-copy" field={() => field.current} />
      </div>
      <p class="muted small">Send it as <code>Authorization: Bearer &lt;secret&gt;</code> (or <code>X-Kiln-Token</code>), or sign the body with it: <code>X-Kiln-Signature: sha256=&lt;HMAC-SHA256 hex&gt;</code>, GitHub's <code>X-Hub-Signature-256</code> too.</p>
      <div class="card-actions"><button type="button" data-testid="secret-done" onClick={onDone}>I have saved it</button></div>
    </div>
  );
}

function TriggerRow({ tr, open, focus, onFocused, onToggle, secret, onSecretDone, onChange, onRotated, onDeleted, onGone }: {
  tr: Trigger; open: boolean; focus: boolean; onFocused: () => void; onToggle: (v?: boolean) => void;
  secret?: { secret: string; rotated: boolean }; onSecretDone: () => void;
  onChange: (tr: Trigger) => void; onRotated: (tr: Trigger) => void; onDeleted: (tr: Trigger) => void; onGone: (tr: Trigger) => void;
}) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [said, setSaid] = useState("");
  const [confirm, setConfirm] = useState<"" | "delete" | "rotate">("");
  const [editing, setEditing] = useState(false);
  const [fired, setFired] = useState<Occurrence>();
  const ref = useRef<HTMLLIElement>(null);
  const back = useRef(""); // where focus returns when a confirmation or the form closes
  const name = summary(tr);
  const hid = `trg-${tr.id}`, histId = `trg-hist-${tr.id}`;
  const cron = tr.kind === "cron";
  const f = (testid: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${testid}]`)?.focus();
  // As in the Plugins panel: focus moves in the same task that shows (or hides) the confirmation.
  useLayoutEffect(() => {
    if (confirm) f(confirm === "delete" ? "trigger-delete-confirm" : "trigger-rotate-confirm");
    else if (back.current && !editing) { f(back.current); back.current = ""; }
  }, [confirm, editing]);
  useLayoutEffect(() => {
    if (!focus) return;
    if (!secret) ref.current?.querySelector<HTMLElement>("h3")?.focus();
    ref.current?.scrollIntoView({ block: "nearest" });
    onFocused();
  }, [focus]);

  async function act(what: string, fn: () => Promise<void>) {
    setBusy(true); setErr(""); setSaid("");
    try { await fn(); }
    catch (e) {
      if (quiet(e)) return;
      if (e instanceof ApiError && e.status === 404) { onGone(tr); return; }
      setErr(`Could not ${what} ${name}: ${message(e)}`);
    } finally { setBusy(false); }
  }
  const toggle = () => act(tr.enabled ? "disable" : "enable", async () => {
    const v = await updateTrigger(tr.id, { enabled: !tr.enabled });
    onChange(v);
    setSaid(v.enabled ? (cron ? "Enabled: the schedule starts from now." : "Enabled: deliveries start runs.") : "Disabled: it does not fire until enabled.");
  });
  const run = () => act("run", async () => {
    const o = await fireTrigger(tr.id);
    setFired(o);
    const r = o.reason ? `: ${o.reason}` : "";
    setSaid(o.status === "started" ? "Fired: a run started." : o.status === "buffered" ? "Buffered: it starts when the previous run ends." : `Not started (${o.status})${r}.`);
    onToggle(true);
  });
  const rotate = () => act("rotate the secret of", async () => {
    const v = await rotateSecret(tr.id);
    setConfirm("");
    onRotated(v);
  });
  const remove = () => act("delete", async () => {
    await deleteTrigger(tr.id);
    onDeleted(tr);
  });
  const cancel = () => { back.current = confirm === "delete" ? "trigger-delete" : "trigger-rotate"; setConfirm(""); };
  const next = tr.next?.[0];
  const url = hookUrl(location.origin, tr.id);

  return (
    <li class="plugin trigger" ref={ref} data-testid="trigger" data-trigger-id={tr.id} data-kind={tr.kind} data-enabled={String(tr.enabled)} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => { if (e.key === "Escape" && confirm) { e.stopPropagation(); cancel(); } }}>
      <div class="plugin-head">
        <h3 id={hid} tabIndex={-1} data-testid="trigger-name-text">{name}</h3>
        <span class="badges">
          <span class="badge" data-testid="trigger-kind">{tr.kind}</span>
          {!tr.enabled && <span class="badge" data-testid="trigger-disabled">disabled</span>}
        </span>
        <span class="plugin-actions">
          <button type="button" role="switch" class="sm switch" aria-checked={tr.enabled} data-testid="trigger-enabled" disabled={busy} onClick={toggle}>
            <span class="switch-track" aria-hidden="true" />Enabled<span class="sr-only"> ({name})</span>
          </button>
        </span>
      </div>
      <dl class="kv sbx-kv sched-kv">
        {cron ? (
          <>
            <dt>Schedule</dt>
            <dd data-testid="trigger-schedule"><code>{tr.cron}</code> <span class="muted">in</span> <span data-testid="trigger-timezone-text">{tr.timezone || "UTC"}</span></dd>
            <dt>Next</dt>
            <dd data-testid="trigger-next" data-next={next ?? ""}>{!tr.enabled ? <span class="muted">disabled: it does not fire</span>
              : next ? <FireTime iso={next} tz={tr.timezone} seconds={needSeconds([next])} /> : <span class="muted">never</span>}</dd>
          </>
        ) : (
          <>
            <dt>Webhook</dt>
            <dd data-testid="trigger-webhook"><code>POST <span data-testid="trigger-url">{url}</span></code> <CopyButton text={url} label="Copy URL" testid="trigger-url-copy" /></dd>
          </>
        )}
        <dt>Prompt</dt><dd><code class="sched-prompt" data-testid="trigger-prompt-text" title={tr.prompt}>{tr.prompt.split("\n")[0]}{tr.prompt.includes("\n") ? " …" : ""}</code></dd>
        <dt>Model</dt><dd>{tr.model ? <code>{tr.model}</code> : <span class="muted">the server's default</span>}</dd>
        <dt>Policies</dt>
        <dd class="small" data-testid="trigger-policies">overlap <code>{tr.overlap || "skip"}</code>{cron && <> · catch-up <code>{tr.catchup || "latest"}</code></>}
          {" "}· approvals <code>{tr.unattended?.mode || "pause"}</code>{tr.unattended?.allow?.length ? <> ({tr.unattended.allow.map((a) => <code key={a}>{a} </code>)})</> : null}
          {!cron && tr.rate_limit ? <> · <code>{tr.rate_limit}</code>/min</> : null}</dd>
      </dl>
      {secret && <SecretOnce tr={tr} secret={secret.secret} rotated={secret.rotated} onDone={() => { onSecretDone(); ref.current?.querySelector<HTMLElement>("h3")?.focus(); }} />}
      <div class="card-actions">
        <button type="button" class="sm" data-testid="trigger-run" disabled={busy} onClick={run}>Run now<span class="sr-only"> {name}</span></button>
        <button type="button" class="sm" data-testid="trigger-history-toggle" aria-expanded={open} aria-controls={open ? histId : undefined} onClick={() => onToggle()}>
          {open ? "Hide history" : "History"}<span class="sr-only"> of {name}</span>
        </button>
        <button type="button" class="sm" data-testid="trigger-edit" disabled={busy || editing} onClick={() => { setErr(""); setEditing(true); }}>Edit<span class="sr-only"> {name}</span></button>
        {!cron && confirm !== "rotate" && <button type="button" class="sm" data-testid="trigger-rotate" disabled={busy} onClick={() => { setErr(""); setConfirm("rotate"); }}>Rotate secret…<span class="sr-only"> of {name}</span></button>}
        {confirm !== "delete" && <button type="button" class="sm danger" data-testid="trigger-delete" disabled={busy} onClick={() => { setErr(""); setConfirm("delete"); }}>Delete…<span class="sr-only"> {name}</span></button>}
      </div>
      <p class="muted small trigger-said" role="status" data-testid="trigger-said">{said}</p>
      {confirm === "delete" && (
        <div class="plugin-confirm" role="group" aria-label={`Delete ${name}`} data-testid="trigger-confirm">
          <p>Delete the trigger <strong>{name}</strong> and its history? It stops firing; the threads and runs it started stay.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="trigger-delete-confirm" disabled={busy} onClick={remove}>Delete {name}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {confirm === "rotate" && (
        <div class="plugin-confirm" role="group" aria-label={`Rotate the secret of ${name}`} data-testid="trigger-rotate-box">
          <p>Give <strong>{name}</strong> a new secret? The current one stops working at once: update every sender.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="trigger-rotate-confirm" disabled={busy} onClick={rotate}>Rotate the secret</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="trigger-action-error">{err}</p>}
      {editing && (
        <div class="sched-edit" data-testid="trigger-edit-box">
          <TriggerFormView initial={tr} onCancel={() => { back.current = "trigger-edit"; setEditing(false); }}
            onDone={(v) => { onChange(v); setSaid("Saved."); back.current = "trigger-edit"; setEditing(false); }} />
        </div>
      )}
      {open && <History id={histId} tr={tr} fired={fired} />}
    </li>
  );
}

/** A trigger's next fire times (cron) and its occurrences, newest first, read again as their runs go on. */
function History({ id, tr, fired }: { id: string; tr: Trigger; fired?: Occurrence }) {
  const [items, setItems] = useState<Occurrence[]>();
  const [more, setMore] = useState<string>();
  const [err, setErr] = useState("");
  const [next, setNext] = useState<{ times?: string[]; error?: string }>({});
  const [loadingMore, setLoadingMore] = useState(false);
  const gen = useRef(0);
  const shown = useRef(HISTORY_N);
  const itemsRef = useRef(items);
  itemsRef.current = items;
  const cron = tr.kind === "cron";

  async function load() {
    const g = ++gen.current;
    try {
      const page = await listOccurrences(tr.id, shown.current);
      if (g !== gen.current) return;
      setItems(page.occurrences ?? []); setMore(page.next_before); setErr("");
    } catch (e) {
      if (g === gen.current && !quiet(e)) setErr(`Could not read the history: ${message(e)}`);
    }
  }
  async function older() {
    if (!more) return;
    setLoadingMore(true);
    const g = ++gen.current;
    try {
      const page = await listOccurrences(tr.id, HISTORY_N, more);
      if (g !== gen.current) return;
      const seen = new Set((itemsRef.current ?? []).map((o) => o.id));
      const all = [...(itemsRef.current ?? []), ...(page.occurrences ?? []).filter((o) => !seen.has(o.id))];
      shown.current = Math.min(500, all.length);
      setItems(all); setMore(page.next_before);
    } catch (e) {
      if (!quiet(e)) setErr(`Could not read the history: ${message(e)}`);
    } finally { setLoadingMore(false); }
  }
  // Run now's occurrence shows at once (as started), then as the history lists it.
  useEffect(() => {
    if (!fired) { load(); return; }
    setItems((l) => (l?.some((o) => o.id === fired.id) ? l : [fired, ...(l ?? [])]));
    load();
  }, [tr.id, fired]);
  useEffect(() => {
    if (!cron) return;
    let live = true;
    previewTrigger(tr.id, PREVIEW_N).then((times) => live && setNext({ times }), (e) => live && !quiet(e) && setNext({ error: message(e) }));
    return () => { live = false; };
  }, [tr.id, tr.cron, tr.timezone, tr.enabled, tr.last_slot, tr.updated_at]);
  // Its fires and the runs they started change it: the events say when.
  useEffect(() => {
    let t: ReturnType<typeof setTimeout> | undefined;
    const soon = () => { clearTimeout(t); t = setTimeout(load, 150); };
    const off = onGlobalEvent((e) => {
      if (!e) { soon(); return; }
      if (e.type === "trigger.fired" && e.payload?.trigger_id === tr.id) { soon(); return; }
      if (!/^(run|interrupt)\./.test(e.type)) return;
      const l = itemsRef.current ?? [];
      if (l.some((o) => (e.run_id && o.run_id === e.run_id) || isLive(o))) soon();
    });
    return () => { off(); clearTimeout(t); };
  }, [tr.id]);
  const live = (items ?? []).some(isLive);
  useEffect(() => {
    if (!live) return;
    const t = setInterval(() => { if (!document.hidden) load(); }, LIVE_POLL_MS);
    return () => clearInterval(t);
  }, [live, tr.id]);

  const name = summary(tr);
  const secs = needSeconds((items ?? []).map((o) => o.scheduled_at));
  return (
    <div class="sched-history" id={id} data-testid="trigger-history">
      {cron && (
        <div class="sched-next" data-testid="trigger-next-list">
          <h4>Next {PREVIEW_N} fire times{!tr.enabled && <span class="muted small"> if enabled now (the schedule starts from when it is enabled)</span>}</h4>
          {next.error ? <p class="card-error">{next.error}</p>
            : !next.times ? <p class="muted small">Loading…</p>
            : <ol class="sched-times">{next.times.map((t) => <li key={t}><FireTime iso={t} tz={tr.timezone} seconds={needSeconds(next.times!)} testid="trigger-next-time" /></li>)}</ol>}
        </div>
      )}
      <h4>History</h4>
      {err && <p class="card-error" role="alert" data-testid="history-error">{err}</p>}
      {!items ? (!err && <p class="muted small">Loading…</p>)
        : !items.length ? <p class="muted small" data-testid="history-empty">No occurrences yet: {cron ? (tr.enabled ? "it fires at its next slot, or with Run now." : "it is disabled; Run now fires it anyway.") : "none has reached its URL; Run now fires it by hand."}</p>
        : (
          <table class="sched-table" data-testid="occurrences">
            <caption class="sr-only">Occurrences of {name}, newest first</caption>
            <thead><tr><th scope="col">When</th><th scope="col">Cause</th><th scope="col">Outcome</th><th scope="col">Thread</th></tr></thead>
            <tbody>{items.map((o) => {
              const oc = outcomeOf(o);
              const when = fireTime(o.scheduled_at, tr.timezone, secs);
              return (
                <tr key={o.id} data-testid="occurrence" data-occurrence-id={o.id} data-outcome={oc.key}>
                  <td><time dateTime={o.scheduled_at} title={`${new Date(o.scheduled_at).toLocaleString()} (your time)`}>{when}</time><br /><Ago iso={o.scheduled_at} /></td>
                  <td data-testid="occurrence-cause">{causeLabel(o.cause)}</td>
                  <td><span class={`badge ${oc.cls}`} data-testid="occurrence-outcome">{oc.label}</span>
                    {o.reason && <div class="muted small sched-reason" data-testid="occurrence-reason">{o.reason}</div>}</td>
                  <td>{o.thread_id
                    ? <a href={href({ view: "thread", id: o.thread_id })} data-testid="occurrence-thread">Open thread<span class="sr-only"> of the {causeLabel(o.cause)} fire at {when}</span></a>
                    : <span class="muted small">none</span>}</td>
                </tr>
              );
            })}</tbody>
          </table>
        )}
      {more && <div class="card-actions"><button type="button" class="sm" data-testid="history-more" disabled={loadingMore} onClick={older}>{loadingMore ? "Loading…" : "Older"}</button></div>}
    </div>
  );
}
