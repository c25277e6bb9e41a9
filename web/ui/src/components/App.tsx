import { useEffect, useRef, useState } from "preact/hooks";
import { go, store, submitToken } from "../state/app";
import { useStore } from "../state/store";
import { ActionView, ListView } from "./Lists";
import { SandboxesView } from "./Sandboxes";
import { SchedulesView } from "./Schedules";
import { Settings } from "./Settings";
import { Sidebar } from "./Sidebar";
import { ActivityPanel, ThreadView } from "./ThreadView";

const SHORTCUTS: [string, string][] = [
  ["j / k", "Next / previous thread or approval card"],
  ["Enter", "Open the focused thread"],
  ["a", "Approve the focused approval card"],
  ["r", "Reject the focused approval card"],
  ["/", "Search"],
  ["c", "Write: focus the composer"],
  ["u", "Back to the list"],
  ["g then a / u / i / t / b / s", "Go to All, Unread, Action (inbox), Triggers, Sandboxes or Settings"],
  ["?", "Show or hide this list"],
  ["Escape", "Close dialogs and menus"],
];

function TokenDialog() {
  const s = useStore(store);
  const [v, setV] = useState("");
  return (
    <div class="overlay">
      <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="tok-h"><form onSubmit={(e) => { e.preventDefault(); if (v.trim()) submitToken(v); }}>
        <h2 id="tok-h">This server needs its API token</h2>
        <p class="muted">Kiln was started with <code>KILN_API_TOKEN</code>. Paste it once; it stays in this tab only (session storage).</p>
        <label for="token">API token</label>
        <input id="token" type="password" autoComplete="off" data-testid="token-input" value={v} autoFocus onInput={(e) => setV((e.target as HTMLInputElement).value)} />
        {s.tokenError && <p class="field-error" role="alert">{s.tokenError}</p>}
        <div class="card-actions"><button type="submit" class="primary" data-testid="token-submit">Connect</button></div>
      </form></div>
    </div>
  );
}

function Shortcuts({ onClose }: { onClose: () => void }) {
  const ref = useRef<HTMLButtonElement>(null);
  useEffect(() => { ref.current?.focus(); }, []);
  return (
    <div class="overlay" onClick={(e) => { if (e.target === e.currentTarget) onClose(); }}>
      <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="sc-h" data-testid="shortcuts">
        <h2 id="sc-h">Keyboard shortcuts</h2>
        <table class="sc"><tbody>{SHORTCUTS.map(([k, d]) => <tr key={k}><th scope="row"><kbd>{k}</kbd></th><td>{d}</td></tr>)}</tbody></table>
        <div class="card-actions"><button type="button" ref={ref} onClick={onClose}>Close</button></div>
      </div>
    </div>
  );
}

function isTyping(el: Element | null) {
  if (!el) return false;
  const tag = el.tagName;
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (el as HTMLElement).isContentEditable;
}

export function App() {
  const s = useStore(store);
  const [help, setHelpState] = useState(false);
  const helpRef = useRef(false);
  const setHelp = (v: boolean | ((h: boolean) => boolean)) => {
    helpRef.current = typeof v === "function" ? v(helpRef.current) : v;
    setHelpState(helpRef.current);
  };
  const gPending = useRef(false);
  useEffect(() => {
    const toggle = () => setHelp((h) => !h);
    document.addEventListener("kiln:shortcuts", toggle);
    return () => document.removeEventListener("kiln:shortcuts", toggle);
  }, []);
  useEffect(() => {
    function onKey(e: KeyboardEvent) {
      // A modal dialog takes every key (Escape closes it).
      if (document.querySelector("dialog.modal[open]")) return;
      if (e.key === "Escape") {
        if (helpRef.current) { setHelp(false); return; }
        if (store.get().error) { store.set({ error: undefined }); return; }
        return;
      }
      if (e.metaKey || e.ctrlKey || e.altKey || isTyping(document.activeElement) || store.get().needToken) return;
      if (helpRef.current && e.key !== "?") return;
      if (gPending.current) {
        gPending.current = false;
        const to: Record<string, string> = { a: "#/all", u: "#/unread", i: "#/action", t: "#/triggers", b: "#/sandboxes", s: "#/settings" };
        if (to[e.key]) { e.preventDefault(); go(to[e.key]); return; }
      }
      const main = document.getElementById("main");
      const items = [...(main?.querySelectorAll<HTMLElement>("[data-nav]") ?? [])];
      const card = (document.activeElement as HTMLElement | null)?.closest?.("[data-testid=approval-card]");
      switch (e.key) {
        case "?": e.preventDefault(); setHelp((h) => !h); break;
        case "/": { const el = document.querySelector<HTMLInputElement>("[data-testid=search]"); if (el) { e.preventDefault(); el.focus(); el.select(); } break; }
        case "c": { const el = document.querySelector<HTMLElement>("#main [data-testid=composer-input]"); if (el) { e.preventDefault(); el.focus(); } break; }
        case "g": gPending.current = true; setTimeout(() => (gPending.current = false), 1200); break;
        case "u": { const back = document.querySelector<HTMLAnchorElement>(".thread-head .back"); if (back) { e.preventDefault(); back.click(); } break; }
        case "j": case "k": {
          if (!items.length) break;
          e.preventDefault();
          const cur = items.findIndex((x) => x === document.activeElement || x.contains(document.activeElement));
          const next = cur < 0 ? (e.key === "j" ? 0 : items.length - 1) : Math.max(0, Math.min(items.length - 1, cur + (e.key === "j" ? 1 : -1)));
          items[next].focus();
          items[next].scrollIntoView({ block: "nearest" });
          break;
        }
        case "a": case "r": {
          const target = card ?? (items.length && items[0].dataset.nav === "card" ? null : null);
          if (!target) break;
          const btn = target.querySelector<HTMLButtonElement>(`[data-testid=${e.key === "a" ? "approve" : "reject"}]`);
          if (btn) { e.preventDefault(); btn.click(); }
          break;
        }
      }
    }
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, []);

  const offline = s.globalState === "reconnecting" || s.threadState === "reconnecting";
  const v = s.route.view;
  return (
    <div class={`app ${v === "thread" ? "with-aside" : ""}`}>
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>Skip to content</a>
      {offline && (
        <div class="banner" role="status" data-testid="offline-banner">
          <strong>Offline.</strong> The connection to the Kiln server was lost; reconnecting… Runs keep going on the server and everything catches up when it is back.
        </div>
      )}
      {s.error && (
        <div class="banner error" role="alert">
          {s.error} <button type="button" class="sm" onClick={() => store.set({ error: undefined })}>Dismiss</button>
        </div>
      )}
      <Sidebar />
      <main id="main" tabIndex={-1}>
        {v === "thread" ? <ThreadView /> : v === "settings" ? <Settings /> : v === "sandboxes" ? <SandboxesView /> : v === "triggers" ? <SchedulesView /> : v === "action" ? <ActionView /> : <ListView />}
      </main>
      {v === "thread" && <ActivityPanel />}
      {help && <Shortcuts onClose={() => setHelp(false)} />}
      {s.needToken && <TokenDialog />}
    </div>
  );
}
