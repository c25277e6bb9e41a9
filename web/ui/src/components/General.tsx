// The General panel of Settings: the theme (applied at once), long-term
// memory on or off, the runtime of sandboxes created without one (saved at
// once), the instructions added to every run's system prompt (counted live
// against the server's limit) and the default limits of runs.
import { useEffect, useState } from "preact/hooks";
import { loadRuntimes, runtimeChoices } from "../sandboxes";
import { saveSettings, setTheme, store } from "../state/app";
import { useStore } from "../state/store";
import type { Settings, Theme } from "../types";
import { charCount, MAX_ADDENDUM, MAX_LIMIT, normTheme, parseLimit } from "../workspace";

const THEME_TEXT: Record<Theme, string> = { system: "System (follows this device)", light: "Light", dark: "Dark" };

export function GeneralPanel() {
  const s = useStore(store);
  const st = s.settings;
  return (
    <section id="set-general" class="panel" aria-labelledby="gen-h" data-testid="general" data-state={st ? "loaded" : st === null ? "unavailable" : s.settingsError ? "error" : "loading"}>
      <h2 id="gen-h" tabIndex={-1}>General</h2>
      {st === null ? <p class="muted" data-testid="general-unavailable">This server keeps no settings (an older Kiln).</p>
        : s.settingsError && !st ? <p class="card-error" role="alert">{s.settingsError}</p>
        : !st ? <p class="muted">Loading…</p>
        : <GeneralForm st={st} />}
    </section>
  );
}

function GeneralForm({ st }: { st: Settings }) {
  const [addendum, setAddendum] = useState(st.prompt_addendum);
  const [steps, setSteps] = useState(st.limits?.max_steps ? String(st.limits.max_steps) : "");
  const [calls, setCalls] = useState(st.limits?.max_tool_calls ? String(st.limits.max_tool_calls) : "");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [saved, setSaved] = useState("");
  const [prefErr, setPrefErr] = useState("");
  const [prefNote, setPrefNote] = useState("");
  // The enabled sandbox runtimes; undefined until known (or on a server
  // without plugins). Read again when the select gets the focus, as a
  // plugin enabled below on this page adds one.
  const [runtimes, setRuntimes] = useState<string[]>();
  const readRuntimes = () => loadRuntimes().then(setRuntimes, () => {});
  useEffect(() => { readRuntimes(); }, []);
  const sbx = runtimeChoices(st.sandbox_runtime, runtimes);
  const n = charCount(addendum);
  const over = n > MAX_ADDENDUM;

  async function pref(what: string, f: () => Promise<unknown>) {
    setPrefErr(""); setPrefNote("");
    try { await f(); setPrefNote(what); }
    catch (e) { setPrefErr((e as Error).message); }
  }
  async function save() {
    setErr(""); setSaved("");
    const ms = parseLimit(steps), mc = parseLimit(calls);
    if (over) { setErr(`The instructions are ${n - MAX_ADDENDUM} characters over the limit of ${MAX_ADDENDUM}.`); return; }
    if (ms === undefined || mc === undefined) { setErr(`Limits are whole numbers from 0 to ${MAX_LIMIT}; empty or 0 means the server's default.`); return; }
    setBusy(true);
    try {
      const next = await saveSettings({ prompt_addendum: addendum, limits: { max_steps: ms, max_tool_calls: mc } });
      setAddendum(next.prompt_addendum); // the server trims it
      setSaved("Saved. New runs use these.");
    } catch (e) { setErr((e as Error).message); }
    finally { setBusy(false); }
  }

  return (
    <>
      <div class="field-row">
        <div class="field">
          <label for="gen-theme">Theme</label>
          <select id="gen-theme" data-testid="theme" value={normTheme(st.theme)}
            onChange={(e) => { const t = normTheme((e.target as HTMLSelectElement).value); pref(`Theme: ${THEME_TEXT[t]}.`, () => setTheme(t)); }}>
            {(Object.keys(THEME_TEXT) as Theme[]).map((t) => <option key={t} value={t}>{THEME_TEXT[t]}</option>)}
          </select>
        </div>
        <label class="check" for="gen-memory">
          <input id="gen-memory" type="checkbox" data-testid="memory-toggle" checked={st.memory}
            onChange={(e) => { const on = (e.target as HTMLInputElement).checked; pref(on ? "Long-term memory is on." : "Long-term memory is off.", () => saveSettings({ memory: on })); }} />
          Long-term memory <span class="muted small">— runs may read and write the files under Memories</span>
        </label>
      </div>
      <div class="field">
        <label for="gen-sandbox-runtime">Default sandbox runtime <span class="muted small">— for sandboxes created without naming one, over the API and by agents</span></label>
        <select id="gen-sandbox-runtime" data-testid="sandbox-runtime-default" value={st.sandbox_runtime ?? ""} aria-describedby={sbx.note ? "gen-sandbox-runtime-note" : undefined}
          onFocus={readRuntimes}
          onChange={(e) => { const r = (e.target as HTMLSelectElement).value; pref(`Sandbox runtime: ${r || "the server's default"}.`, () => saveSettings({ sandbox_runtime: r })); }}>
          {sbx.choices.map((c) => <option key={c.value} value={c.value}>{c.label}</option>)}
        </select>
        {sbx.note && <p id="gen-sandbox-runtime-note" class="note small" data-testid="sandbox-runtime-note">{sbx.note}</p>}
      </div>
      {prefErr && <p class="card-error" role="alert" data-testid="pref-error">{prefErr}</p>}
      <p class="sr-only" role="status">{prefNote}</p>
      <form class="settings-form" aria-label="Instructions and limits" data-testid="general-form" aria-busy={busy || undefined} onSubmit={(e) => { e.preventDefault(); save(); }}>
        <div class="field">
          <label for="gen-addendum">Instructions added to every run's system prompt</label>
          <textarea id="gen-addendum" data-testid="addendum" rows={5} value={addendum} aria-describedby="gen-addendum-count" aria-invalid={over || undefined}
            placeholder="For example: answer in British English; keep summaries under 200 words."
            onInput={(e) => { setAddendum((e.target as HTMLTextAreaElement).value); setSaved(""); }} />
          <p id="gen-addendum-count" class={`small count-line ${over ? "over" : "muted"}`} data-testid="addendum-count">
            {n.toLocaleString("en-US")} / {MAX_ADDENDUM.toLocaleString("en-US")} characters{over ? ` — ${n - MAX_ADDENDUM} too many` : ""}
          </p>
        </div>
        <fieldset class="limits">
          <legend>Default limits of a run <span class="muted small">(empty or 0: the server's default)</span></legend>
          <div class="field">
            <label for="gen-steps">Model steps</label>
            <input id="gen-steps" data-testid="limit-steps" inputMode="numeric" autoComplete="off" placeholder="default" value={steps}
              onInput={(e) => { setSteps((e.target as HTMLInputElement).value); setSaved(""); }} />
          </div>
          <div class="field">
            <label for="gen-calls">Tool calls</label>
            <input id="gen-calls" data-testid="limit-calls" inputMode="numeric" autoComplete="off" placeholder="default" value={calls}
              onInput={(e) => { setCalls((e.target as HTMLInputElement).value); setSaved(""); }} />
          </div>
        </fieldset>
        {err && <p class="card-error" role="alert" data-testid="general-error">{err}</p>}
        <div class="card-actions">
          <button type="submit" class="primary" data-testid="general-save" disabled={busy || over}>Save</button>
          <span class="ok small provider-saved" role="status" data-testid="general-saved">{saved}</span>
        </div>
      </form>
    </>
  );
}
