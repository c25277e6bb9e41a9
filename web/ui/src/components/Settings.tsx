import { useEffect } from "preact/hooks";
import { href, type SettingsSection } from "../route";
import { loadStatus, setNotifications, showError, store } from "../state/app";
import { useStore } from "../state/store";
import { duration } from "../time";
import { GeneralPanel } from "./General";
import { GrantsPanel } from "./Grants";
import { MemoriesPanel } from "./Memories";
import { PluginsPanel } from "./Plugins";
import { ProvidersPanel } from "./Providers";
import { SkillsPanel } from "./Skills";
import { McpPanel } from "./Mcp";

/** The sections a link can open (#/settings/<section>), in the page's order. */
const SECTIONS: [SettingsSection, string][] = [
  ["general", "General"], ["files", "Files"], ["memories", "Memories"], ["notifications", "Notifications"], ["providers", "Providers"], ["plugins", "Plugins"], ["skills", "Skills"], ["mcp", "MCP servers"],
];

/**
 * keepInView scrolls view so that el starts right under view's sticky
 * header, and keeps it there while the panels above it load and change
 * height, until the person scrolls, clicks or types (or 10 s pass). It
 * returns the function that stops it.
 */
function keepInView(view: HTMLElement, el: HTMLElement): () => void {
  const head = view.querySelector<HTMLElement>(".view-head");
  const pin = () => { view.scrollTop = el.offsetTop - (head?.offsetHeight ?? 0) - 12; };
  pin();
  const ro = typeof ResizeObserver === "undefined" ? undefined : new ResizeObserver(pin);
  for (const c of view.children) ro?.observe(c);
  const user = ["wheel", "touchstart", "pointerdown", "keydown"];
  const stop = () => {
    ro?.disconnect();
    clearTimeout(timer);
    for (const t of user) view.removeEventListener(t, stop);
  };
  const timer = setTimeout(stop, 10000);
  for (const t of user) view.addEventListener(t, stop, { passive: true });
  return stop;
}

export function Settings() {
  const s = useStore(store);
  const st = s.status;
  const section = s.route.view === "settings" ? s.route.section : undefined;
  // A link to a section scrolls to it and moves the focus to its heading.
  useEffect(() => {
    const view = document.querySelector<HTMLElement>("[data-testid=settings]");
    const el = section && document.getElementById(`set-${section}`);
    if (!view || !el) return;
    el.querySelector<HTMLElement>("h2")?.focus({ preventScroll: true });
    return keepInView(view, el);
  }, [section]);
  return (
    <div class="view settings" data-testid="settings">
      <header class="view-head"><h1>Settings</h1>
        <nav class="settings-nav" aria-label="Settings sections">
          {SECTIONS.map(([id, label]) => (
            <a key={id} href={href({ view: "settings", section: id })} data-testid={`settings-nav-${id}`} aria-current={section === id ? "location" : undefined}>{label}</a>
          ))}
        </nav>
      </header>
      <section class="panel" aria-labelledby="srv-h">
        <div class="panel-head"><h2 id="srv-h">Server</h2><button type="button" class="sm" onClick={() => loadStatus()}>Refresh</button></div>
        {st ? (
          <dl class="kv">
            <dt>Version</dt><dd data-testid="status-version"><code>{st.version}</code></dd>
            <dt>Data root</dt><dd><code>{st.data_root}</code></dd>
            <dt>Default model</dt><dd><code>{st.default_model}</code></dd>
            <dt>Uptime</dt><dd>{duration(st.uptime_seconds)} <span class="muted small">since {new Date(st.started_at).toLocaleString()}</span></dd>
            <dt>Active runs</dt><dd>{st.active_runs}</dd>
            <dt>Event subscribers</dt><dd>{st.subscribers}</dd>
          </dl>
        ) : <p class="muted">Loading…</p>}
      </section>
      <GeneralPanel />
      <GrantsPanel />
      <MemoriesPanel />
      <section id="set-notifications" class="panel" aria-labelledby="ntf-h">
        <h2 id="ntf-h" tabIndex={-1}>Notifications</h2>
        <p>Get a browser notification when a run needs your decision.</p>
        {s.notify === "unsupported" && <p class="muted">This browser does not support notifications.</p>}
        {s.notify === "denied" && <p class="muted">Blocked in the browser's site settings; allow notifications there to enable them.</p>}
        {s.notify === "granted" && s.notifyOn && (
          <p class="ok">Enabled. New Action items notify you. <button type="button" class="sm" data-testid="notify-disable" onClick={() => setNotifications(false)}>Turn off</button></p>
        )}
        {(s.notify === "default" || (s.notify === "granted" && !s.notifyOn)) && (
          <button type="button" class="primary" data-testid="notify-enable" onClick={() => setNotifications(true).catch(showError)}>Enable notifications</button>
        )}
      </section>
      <ProvidersPanel />
      <PluginsPanel />
      <SkillsPanel />
      <McpPanel />
      <section class="panel" aria-labelledby="trg-set-h" data-testid="settings-triggers">
        <h2 id="trg-set-h">Triggers</h2>
        <p>Cron and webhook triggers, which start runs on a schedule or when a request arrives, are on the <a href={href({ view: "triggers" })} data-testid="settings-schedules-link">Triggers</a> page.</p>
      </section>
    </div>
  );
}
