// The Providers panel of Settings: every model provider (OpenAI, Anthropic,
// ..., Ollama) with its state, its settings and where each comes from, and
// a form per provider to configure it or forget its stored configuration.
//
// Secrets: the server only ever answers whether a secret is set and where
// from. A key pasted into the form lives in its password field alone (an
// uncontrolled input, never component state), goes out in the PUT body and
// the field is emptied once saved; nothing logs it.
import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { envFor, envRef, envRefName, settingLabel, settingValue } from "../format";
import { loadModels } from "../state/app";
import type { Provider, ProviderSetting } from "../types";

const path = (id: string) => `/providers/${encodeURIComponent(id)}`;
const STATE_TEXT: Record<string, string> = { ready: "ready", not_configured: "not configured", disabled: "disabled", error: "error" };
/** api_key first, base_url second, the others as the server lists them. */
const RANK: Record<string, number> = { api_key: 0, base_url: 1 };
const ordered = (list: ProviderSetting[] | null) =>
  [...(list ?? [])].sort((a, b) => (RANK[a.name] ?? 2) - (RANK[b.name] ?? 2));
/** A non-secret setting whose value is stored by Kiln (not a default or the environment's). */
const stored = (s: ProviderSetting) => !!s.source && s.source.startsWith("config");

function andList(items: string[]) {
  const out: ComponentChildren[] = [];
  items.forEach((x, i) => {
    if (i) out.push(i === items.length - 1 ? " and " : ", ");
    out.push(<code key={x}>{x}</code>);
  });
  return out;
}

export function ProvidersPanel() {
  const [list, setList] = useState<Provider[]>();
  const [loadErr, setLoadErr] = useState("");
  const [missing, setMissing] = useState(false);
  const [note, setNote] = useState("");

  async function load() {
    try {
      setList((await api<{ providers: Provider[] }>("GET", "/providers")).providers ?? []);
      setLoadErr(""); setMissing(false);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      if (e instanceof ApiError && e.status === 404) { setMissing(true); return; }
      setLoadErr((e as Error).message);
    }
  }
  useEffect(() => { load(); }, []);

  function put(p: Provider, what: string) {
    setList((l) => l?.map((x) => (x.id === p.id ? p : x)));
    setNote(what);
    loadModels(); // the composers' model choice follows
  }

  const state = missing ? "unavailable" : loadErr ? "error" : list ? "loaded" : "loading";
  return (
    <section id="set-providers" class="panel" aria-labelledby="prv-h" data-testid="providers" data-state={state}>
      <div class="panel-head">
        <h2 id="prv-h" tabIndex={-1}>Providers</h2>
        {!missing && <button type="button" class="sm" data-testid="providers-refresh" onClick={() => { setNote(""); load(); }}>Refresh</button>}
      </div>
      <p class="sr-only" role="status">{note}</p>
      {missing ? <p class="muted" data-testid="providers-unavailable">This server has no model providers to configure (an older Kiln, or one started without them); it runs its built-in models.</p>
        : loadErr ? <p class="card-error" role="alert" data-testid="providers-error">{loadErr}</p>
        : !list ? <p class="muted">Loading…</p>
        : !list.length ? <p class="muted" data-testid="providers-empty">This server has no model providers.</p>
        : <ul class="plugins">{list.map((p) => <ProviderRow key={p.id} p={p} onChange={put} />)}</ul>}
    </section>
  );
}

function ProviderRow({ p, onChange }: { p: Provider; onChange: (p: Provider, note: string) => void }) {
  const [editing, setEditing] = useState(false);
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const ref = useRef<HTMLLIElement>(null);
  const back = useRef(""); // the button that gets the focus back when a form or confirmation closes
  const hid = `prv-${p.id}`, fid = `prv-form-${p.id}`;
  const settings = ordered(p.settings);
  const env = p.env ?? [];
  // A layout effect moves focus in the same task that opens or closes the
  // confirmation or the form, so there is no moment in which the focused
  // button is gone and focus falls to the page (as in Plugins.tsx).
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f("provider-reset-confirm");
    else if (back.current) { f(back.current); back.current = ""; }
  }, [confirm, editing]);

  const closeForm = () => { back.current = "provider-edit"; setEditing(false); };
  const cancelReset = () => { back.current = "provider-reset"; setConfirm(false); };
  async function reset() {
    setBusy(true); setErr("");
    try {
      const st = await api<Provider>("DELETE", path(p.id));
      back.current = "provider-reset";
      setConfirm(false);
      onChange(st, `${st.name || p.name} reset: its stored configuration is forgotten.`);
    } catch (e) { setErr(`Could not reset ${p.name}: ${(e as Error).message}`); }
    finally { setBusy(false); }
  }

  return (
    <li class="plugin provider" ref={ref} data-testid="provider" data-provider-id={p.id} data-state={p.state} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => {
        if (e.key !== "Escape") return;
        if (confirm) { e.stopPropagation(); cancelReset(); }
        else if (editing) { e.stopPropagation(); closeForm(); }
      }}>
      <div class="plugin-head">
        <h3 id={hid}>{p.name || p.id} <code class="muted small">{p.id}</code></h3>
        <span class={`badge b-${p.state}`} data-testid="provider-state">{STATE_TEXT[p.state] ?? p.state}</span>
        <span class="plugin-actions">
          <button type="button" class="sm" data-testid="provider-edit" aria-expanded={editing} aria-controls={editing ? fid : undefined}
            onClick={() => { if (editing) closeForm(); else { setConfirm(false); setErr(""); setEditing(true); } }}>
            Edit<span class="sr-only"> {p.name}</span>
          </button>
          {!confirm && <button type="button" class="sm danger" data-testid="provider-reset" disabled={busy}
            onClick={() => { setErr(""); setEditing(false); setConfirm(true); }}>Reset…<span class="sr-only"> {p.name}</span></button>}
        </span>
      </div>
      {p.state === "disabled" && <p class="muted small" data-testid="provider-disabled">Its plugin is disabled: enable <code>{p.id}</code> under Plugins to use it.</p>}
      {p.state === "error" && <p class="card-error" data-testid="provider-error">{p.error || "The provider reports an error but gave no reason."}</p>}
      {settings.length > 0 && (
        <dl class="kv provider-settings">
          {settings.map((s) => [
            <dt key={`t-${s.name}`}><code>{s.name}</code></dt>,
            <dd key={`d-${s.name}`} data-testid="provider-setting" data-setting={s.name} data-secret={s.secret || undefined}>
              {s.secret || !s.value ? <span class={settingValue(s) === "not set" ? "muted" : ""}>{settingValue(s)}</span>
                : <><code>{s.value}</code>{s.source && <span class="muted small"> ({s.source})</span>}</>}
            </dd>,
          ])}
        </dl>
      )}
      {env.length > 0 && <EnvHint p={p} env={env} />}
      {confirm && (
        <div class="plugin-confirm" role="group" aria-label={`Reset ${p.name}`} data-testid="provider-confirm">
          <p>Reset {p.name}? The settings stored here, a pasted key included, are forgotten; the server's environment variables still apply.</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="provider-reset-confirm" disabled={busy} onClick={reset}>Reset {p.name}</button>
            <button type="button" disabled={busy} onClick={cancelReset}>Cancel</button>
          </div>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="provider-action-error">{err}</p>}
      {editing && <ProviderForm id={fid} p={p} settings={settings} onSaved={(st) => onChange(st, `Saved ${st.name || p.name}: ${STATE_TEXT[st.state] ?? st.state}.`)} onClose={closeForm} />}
    </li>
  );
}

/** How to configure a provider from the server's environment: its main key's variable first. */
function EnvHint({ p, env }: { p: Provider; env: string[] }) {
  const main = envFor("api_key", env) || (env.length === 1 ? env[0] : "");
  const rest = env.filter((e) => e !== main);
  return (
    <p class="muted small" data-testid="provider-env">
      {main ? <>Set <code>{main}</code> in the server's environment, or use Edit to configure {p.name} here.{rest.length > 0 && <> It also reads {andList(rest)}.</>}</>
        : <>The server reads {andList(env)} from its environment: set them there, or use Edit to configure {p.name} here.</>}
    </p>
  );
}

type Mode = "env" | "paste";
interface Init { vals: Record<string, string>; modes: Record<string, Mode>; envs: Record<string, string> }

function initial(settings: ProviderSetting[]): Init {
  const o: Init = { vals: {}, modes: {}, envs: {} };
  for (const s of settings) {
    if (s.secret) {
      o.modes[s.name] = s.source === "credentials file" ? "paste" : "env";
      o.envs[s.name] = envRefName(s.source);
    } else o.vals[s.name] = stored(s) ? s.value : "";
  }
  return o;
}

function ProviderForm({ id, p, settings, onSaved, onClose }: {
  id: string; p: Provider; settings: ProviderSetting[]; onSaved: (p: Provider) => void; onClose: () => void;
}) {
  const [init, setInit] = useState(() => initial(settings));
  const [vals, setVals] = useState(init.vals);
  const [modes, setModes] = useState(init.modes);
  const [envs, setEnvs] = useState(init.envs);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [saved, setSaved] = useState("");
  const form = useRef<HTMLFormElement>(null);
  /** The password fields of pasted secrets, read on Save only: their values never enter state. */
  const pasted = useRef<Record<string, HTMLInputElement | null>>({});
  useEffect(() => { form.current?.querySelector<HTMLElement>("input:not([type=radio]), input[type=radio]:checked")?.focus(); }, []);

  function clearPasted() { for (const el of Object.values(pasted.current)) if (el) el.value = ""; }

  async function save() {
    setErr(""); setSaved("");
    const out: Record<string, string> = {};
    for (const s of settings) {
      const label = settingLabel(s.name);
      if (!s.secret) {
        const v = (vals[s.name] ?? "").trim();
        if (v !== init.vals[s.name]) out[s.name] = v; // "" removes it
      } else if (modes[s.name] === "env") {
        const typed = (envs[s.name] ?? "").trim();
        if (!typed) { if (init.envs[s.name]) out[s.name] = ""; continue; }
        const ref = envRef(typed);
        // The message never repeats what was typed: it may be a key pasted into the wrong field.
        if (!ref) { setErr(`${label}: that is not an environment variable name (letters, digits and _, such as ${envFor(s.name, p.env) || "MY_KEY"}).`); return; }
        if (ref !== "${" + init.envs[s.name] + "}" || init.modes[s.name] !== "env") out[s.name] = ref;
      } else {
        const v = pasted.current[s.name]?.value.trim() ?? "";
        if (v) out[s.name] = v;
      }
    }
    if (!Object.keys(out).length) { setErr("Nothing to save: change a field first."); return; }
    setBusy(true);
    try {
      const st = await api<Provider>("PUT", `/providers/${encodeURIComponent(p.id)}`, { settings: out });
      clearPasted();
      const next = initial(ordered(st.settings));
      setInit(next); setVals(next.vals); setModes(next.modes); setEnvs(next.envs);
      setSaved(`Saved. ${st.name || p.name} is ${STATE_TEXT[st.state] ?? st.state}.`);
      onSaved(st);
    } catch (e) {
      setErr(e instanceof ApiError && e.status === 401 ? "A token is needed." : (e as Error).message);
    } finally { setBusy(false); }
  }

  return (
    <form id={id} class="provider-form" ref={form} aria-label={`Configure ${p.name}`} data-testid="provider-form" autoComplete="off" aria-busy={busy || undefined}
      onSubmit={(e) => { e.preventDefault(); save(); }}>
      {!settings.length && <p class="muted">{p.name} has no settings to change here.</p>}
      {settings.map((s) => {
        const fid = `${id}-${s.name}`, label = settingLabel(s.name);
        if (s.secret) {
          const mode = modes[s.name] ?? "env";
          const hint = envFor(s.name, p.env);
          return (
            <fieldset key={s.name} class="secret-field" data-testid="provider-secret" data-setting={s.name}>
              <legend>{label} <span class="muted small">— now {settingValue(s)}</span></legend>
              <label class="radio"><input type="radio" name={`${fid}-mode`} value="env" data-testid="secret-mode-env" checked={mode === "env"}
                onChange={() => setModes({ ...modes, [s.name]: "env" })} /> Environment variable name (stored as <code>{"${NAME}"}</code>)</label>
              <label class="radio"><input type="radio" name={`${fid}-mode`} value="paste" data-testid="secret-mode-paste" checked={mode === "paste"}
                onChange={() => setModes({ ...modes, [s.name]: "paste" })} /> Paste key (stored in the server's credentials file, readable only by the server's user)</label>
              {mode === "env" ? (
                <div class="field">
                  <label for={fid}>Environment variable name</label>
                  <input id={fid} type="text" data-testid="secret-env" autoComplete="off" spellcheck={false} autoCapitalize="off" placeholder={hint || "NAME"}
                    value={envs[s.name] ?? ""} aria-describedby={`${fid}-hint`} onInput={(e) => setEnvs({ ...envs, [s.name]: (e.target as HTMLInputElement).value })} />
                  <p class="muted small" id={`${fid}-hint`}>The server reads the key from this variable of its environment{hint ? <>, for instance <code>{hint}</code></> : ""}.</p>
                </div>
              ) : (
                <div class="field">
                  <label for={fid}>Paste the {/^[A-Z]{2}/.test(label) ? label : label.toLowerCase()}</label>
                  <input id={fid} type="password" data-testid="secret-paste" autoComplete="off" spellcheck={false} autoCapitalize="off"
                    aria-describedby={`${fid}-hint`} ref={(el) => { pasted.current[s.name] = el; }} />
                  <p class="muted small" id={`${fid}-hint`}>It is never shown again{settingValue(s) !== "not set" ? "; leave empty to keep the current one" : ""}.</p>
                </div>
              )}
            </fieldset>
          );
        }
        const now = !stored(s) && s.value ? `${s.value}${s.source ? ` (${s.source})` : ""}` : "";
        return (
          <div key={s.name} class="field">
            <label for={fid}>{label}</label>
            <input id={fid} type="text" data-testid="provider-field" data-setting={s.name} autoComplete="off" spellcheck={false} value={vals[s.name] ?? ""}
              aria-describedby={now ? `${fid}-hint` : undefined} onInput={(e) => setVals({ ...vals, [s.name]: (e.target as HTMLInputElement).value })} />
            {now && <p class="muted small" id={`${fid}-hint`}>Empty: {now}.</p>}
          </div>
        );
      })}
      {err && <p class="card-error" role="alert" data-testid="provider-form-error">{err}</p>}
      <div class="card-actions">
        <button type="submit" class="primary" data-testid="provider-save" disabled={busy || !settings.length}>Save</button>
        <button type="button" disabled={busy} onClick={onClose}>Close</button>
        <span class="ok small provider-saved" role="status" data-testid="provider-saved">{saved}</span>
      </div>
    </form>
  );
}
