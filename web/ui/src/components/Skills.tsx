// The Skills panel of Settings: the effective skills (custom, a plugin's,
// built-in) with what each shadows and whether it is ready, the skills
// that failed to load (file:line: reason), and a SKILL.md editor whose
// frontmatter is checked as the user types (POST /skills/validate).
// Saving always writes a custom copy; deleting one (custom only) asks
// first and reveals the skill beneath.
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { composeSkill, layerLabel, skillNameOK, skillTemplate } from "../skills";
import type { Skill, SkillCheck, SkillProblem } from "../types";

const path = (name: string, rest = "") => `/skills/${encodeURIComponent(name)}${rest}`;
type Editing = { name?: string; content: string } | null;

export function SkillsPanel() {
  const [list, setList] = useState<Skill[]>();
  const [problems, setProblems] = useState<SkillProblem[]>([]);
  const [loadErr, setLoadErr] = useState("");
  const [note, setNote] = useState("");
  const [creating, setCreating] = useState(false);
  const head = useRef<HTMLHeadingElement>(null);
  const newBtn = useRef<HTMLButtonElement>(null);
  const back = useRef(false);
  useLayoutEffect(() => { if (!creating && back.current) { back.current = false; newBtn.current?.focus(); } }, [creating]);
  const closeNew = () => { back.current = true; setCreating(false); };

  async function load() {
    try {
      const r = await api<{ skills: Skill[] | null; problems: SkillProblem[] | null }>("GET", "/skills");
      setList(r.skills ?? []); setProblems(r.problems ?? []); setLoadErr("");
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      setLoadErr((e as Error).message);
    }
  }
  useEffect(() => { load(); }, []);

  function saved(k: Skill, verb: string) { setNote(`${verb} ${k.name}.`); load(); }
  function deleted(name: string) { setNote(`Deleted the custom ${name}.`); head.current?.focus(); load(); }
  const state = loadErr ? "error" : list ? "loaded" : "loading";
  return (
    <section id="set-skills" class="panel" aria-labelledby="skl-h" data-testid="skills" data-state={state}>
      <div class="panel-head">
        <h2 id="skl-h" tabIndex={-1} ref={head}>Skills</h2>
        <span class="plugin-actions">
          <button type="button" class="sm" data-testid="skills-refresh" onClick={() => { setNote(""); load(); }}>Refresh</button>
          {!creating && <button type="button" class="sm" ref={newBtn} data-testid="skill-new" onClick={() => setCreating(true)}>New skill</button>}
        </span>
      </div>
      <p>Reusable instructions (a <code>SKILL.md</code>) that runs can load. A custom skill hides a plugin's or a built-in one of the same name.</p>
      <p class="sr-only" role="status">{note}</p>
      {creating && <SkillEditor initial={{ content: skillTemplate("") }} onSaved={(k) => { closeNew(); saved(k, "Created"); }} onClose={closeNew} />}
      {loadErr ? <p class="card-error" role="alert" data-testid="skills-error">{loadErr}</p>
        : !list ? <p class="muted">Loading…</p>
        : !list.length ? <p class="muted" data-testid="skills-empty">No skills.</p>
        : <ul class="plugins">{list.map((k) => <SkillRow key={k.name} k={k} onSaved={(x) => saved(x, "Saved")} onDeleted={deleted} />)}</ul>}
      {problems.length > 0 && (
        <div data-testid="skill-problems">
          <h3 class="form-title">Skills that did not load</h3>
          <ul class="plugins">{problems.map((p, i) => (
            <li key={i} class="plugin" data-testid="skill-problem" data-name={p.name}>
              <code>{p.name}</code> <span class="badge">{layerLabel(p)}</span>
              <p class="card-error"><code>{p.error.file}:{p.error.line}</code>: {p.error.reason}</p>
            </li>
          ))}</ul>
        </div>
      )}
    </section>
  );
}

function SkillRow({ k, onSaved, onDeleted }: { k: Skill; onSaved: (k: Skill) => void; onDeleted: (name: string) => void }) {
  const [editing, setEditing] = useState<Editing>(null);
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const ref = useRef<HTMLLIElement>(null);
  const back = useRef("");
  const hid = `skl-${k.name}`;
  useLayoutEffect(() => {
    const f = (id: string) => ref.current?.querySelector<HTMLElement>(`[data-testid=${id}]`)?.focus();
    if (confirm) f("skill-delete-confirm");
    else if (back.current) { f(back.current); back.current = ""; }
  }, [confirm, editing === null]);
  const closeEditor = () => { back.current = "skill-edit"; setEditing(null); };
  const cancel = () => { back.current = "skill-delete"; setConfirm(false); };
  async function edit() {
    if (editing) { closeEditor(); return; }
    setConfirm(false); setErr(""); setBusy(true);
    try { const full = await api<Skill>("GET", path(k.name)); setEditing({ name: k.name, content: composeSkill(full) }); }
    catch (e) { setErr(`Could not read ${k.name}: ${(e as Error).message}`); }
    finally { setBusy(false); }
  }
  async function del() {
    setBusy(true); setErr("");
    try { await api("DELETE", path(k.name)); onDeleted(k.name); return; }
    catch (e) { setErr(`Could not delete ${k.name}: ${(e as Error).message}`); back.current = "skill-delete"; setConfirm(false); }
    setBusy(false);
  }
  const custom = k.origin === "custom";
  const shadows = k.shadows ?? [];
  return (
    <li class="plugin" ref={ref} data-testid="skill" data-name={k.name} data-origin={k.origin} data-ready={String(k.ready)} aria-labelledby={hid} aria-busy={busy || undefined}
      onKeyDown={(e) => {
        if (e.key !== "Escape") return;
        if (confirm) { e.stopPropagation(); cancel(); }
        else if (editing) { e.stopPropagation(); closeEditor(); }
      }}>
      <div class="plugin-head">
        <h3 id={hid}><code>{k.name}</code></h3>
        <span class="badges">
          <span class={`badge b-origin-${k.origin}`} data-testid="skill-origin">{layerLabel(k)}</span>
          {shadows.map((l, i) => <span key={i} class="badge" data-testid="skill-shadows">shadows {layerLabel(l)}</span>)}
          <span class={`badge ${k.ready ? "b-enabled" : "b-failed"}`} data-testid="skill-ready">{k.ready ? "ready" : "not ready"}</span>
        </span>
        <span class="plugin-actions">
          <button type="button" class="sm" data-testid="skill-edit" aria-expanded={!!editing} disabled={busy} onClick={edit}>Edit<span class="sr-only"> {k.name}</span></button>
          {custom && !confirm && <button type="button" class="sm danger" data-testid="skill-delete" disabled={busy}
            onClick={() => { setErr(""); setEditing(null); setConfirm(true); }}>Delete…<span class="sr-only"> {k.name}</span></button>}
        </span>
      </div>
      {k.description && <p class="plugin-desc" data-testid="skill-desc">{k.description}</p>}
      {!k.ready && k.not_ready && <p class="muted small" data-testid="skill-not-ready">Not ready: {k.not_ready}</p>}
      {(k.warnings ?? []).length > 0 && (
        <ul class="skill-warnings" data-testid="skill-warnings">{k.warnings!.map((w, i) => <li key={i}>Line {w.line}: {w.message}</li>)}</ul>
      )}
      {confirm && (
        <div class="plugin-confirm" role="group" aria-label={`Delete ${k.name}`} data-testid="skill-confirm">
          <p>Delete the custom <code>{k.name}</code>? {shadows.length ? `The ${layerLabel(shadows[0])} skill of that name takes its place.` : "Runs can no longer load it; this cannot be undone."}</p>
          <div class="card-actions">
            <button type="button" class="danger" data-testid="skill-delete-confirm" disabled={busy} onClick={del}>Delete {k.name}</button>
            <button type="button" disabled={busy} onClick={cancel}>Cancel</button>
          </div>
        </div>
      )}
      {err && <p class="card-error" role="alert" data-testid="skill-action-error">{err}</p>}
      {editing && (
        <>
          {!custom && <p class="note small" data-testid="skill-copy-note">Saving writes a custom copy of {k.name}, which hides the {layerLabel(k)} one; deleting the copy brings it back.</p>}
          <SkillEditor initial={editing} onSaved={(x) => { closeEditor(); onSaved(x); }} onClose={closeEditor} />
        </>
      )}
    </li>
  );
}

/** The SKILL.md editor: new (with a name field) or of an existing name; validated as typed. */
function SkillEditor({ initial, onSaved, onClose }: { initial: { name?: string; content: string }; onSaved: (k: Skill) => void; onClose: () => void }) {
  const fixed = initial.name;
  const [name, setName] = useState(fixed ?? "");
  const [content, setContent] = useState(initial.content);
  const [check, setCheck] = useState<SkillCheck>();
  const [checkErr, setCheckErr] = useState("");
  const [checking, setChecking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const first = useRef<HTMLInputElement>(null);
  const area = useRef<HTMLTextAreaElement>(null);
  const uid = fixed ? `skl-edit-${fixed}` : "skl-new";
  useLayoutEffect(() => { (fixed ? area.current : first.current)?.focus(); }, []);
  const nameOK = skillNameOK(name);
  // The frontmatter is checked 300 ms after the last change; a stale answer is dropped.
  useEffect(() => {
    if (!nameOK) { setCheck(undefined); setChecking(false); return; }
    let stale = false;
    setChecking(true);
    const t = setTimeout(async () => {
      try {
        const r = await api<SkillCheck>("POST", "/skills/validate", { name, content });
        if (!stale) { setCheck(r); setCheckErr(""); }
      } catch (e) { if (!stale) { setCheck(undefined); setCheckErr((e as Error).message); } }
      finally { if (!stale) setChecking(false); }
    }, 300);
    return () => { stale = true; clearTimeout(t); };
  }, [name, content, nameOK]);
  async function save() {
    if (!nameOK || !check?.valid || checking) return;
    setBusy(true); setErr("");
    try {
      const k = fixed ? await api<Skill>("PUT", path(fixed), { content }) : await api<Skill>("POST", "/skills", { name, content });
      onSaved(k);
    } catch (e) { setErr((e as Error).message); setBusy(false); }
  }
  const warnings = check?.warnings ?? [];
  const verdict = !nameOK ? "name" : checking || !check ? "checking" : check.valid ? "valid" : "invalid";
  return (
    <form class="settings-form" aria-label={fixed ? `Edit ${fixed}` : "New skill"} data-testid="skill-editor" data-verdict={verdict} aria-busy={busy || undefined}
      onSubmit={(e) => { e.preventDefault(); save(); }}
      onKeyDown={(e) => { if (e.key === "Escape" && !fixed) { e.stopPropagation(); onClose(); } }}>
      {!fixed && (
        <div class="field">
          <label for="skl-new-name">Name</label>
          <input id="skl-new-name" ref={first} data-testid="skill-name" autoComplete="off" spellcheck={false} autoCapitalize="off" placeholder="my-skill"
            aria-describedby="skl-new-name-hint" aria-invalid={name !== "" && !nameOK} value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <p id="skl-new-name-hint" class="muted small">Lowercase letters, digits and dashes; the frontmatter's name must match it.</p>
        </div>
      )}
      <div class="field">
        <label for={`${uid}-md`}>SKILL.md (YAML frontmatter between <code>---</code> lines, then markdown)</label>
        <textarea id={`${uid}-md`} ref={area} class="mono-area" data-testid="skill-content" rows={14} value={content} spellcheck={false}
          aria-describedby={`${uid}-check`} aria-invalid={check ? !check.valid : undefined}
          onInput={(e) => setContent((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => { if (e.key === "s" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); save(); } }} />
      </div>
      <div id={`${uid}-check`} role="status" data-testid="skill-check">
        {verdict === "name" ? <p class="muted small">{name ? "The name is lowercase letters, digits and dashes (for example my-skill)." : "Give the skill a name to check it."}</p>
          : checkErr ? <p class="card-error" data-testid="skill-check-error">Could not check: {checkErr}</p>
          : verdict === "checking" ? <p class="muted small">Checking…</p>
          : verdict === "invalid" ? <p class="card-error" data-testid="skill-invalid">Line {check!.error?.line}: {check!.error?.reason}</p>
          : <p class="ok small" data-testid="skill-valid">The frontmatter is valid.</p>}
        {warnings.length > 0 && <ul class="skill-warnings" data-testid="skill-check-warnings">{warnings.map((w, i) => <li key={i}>Line {w.line}: {w.message}</li>)}</ul>}
      </div>
      {err && <p class="card-error" role="alert" data-testid="skill-save-error">{err}</p>}
      <div class="card-actions">
        <button type="submit" class="primary" data-testid="skill-save" disabled={busy || verdict !== "valid"}>{fixed ? "Save as custom" : "Create"}</button>
        <button type="button" disabled={busy} onClick={onClose}>{fixed ? "Close" : "Cancel"}</button>
      </div>
    </form>
  );
}
