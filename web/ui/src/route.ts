export type Route =
  | { view: "all" } | { view: "unread" } | { view: "action" }
  | { view: "settings"; section?: SettingsSection } | { view: "sandboxes" } | { view: "triggers" }
  | { view: "folder"; id: string } | { view: "thread"; id: string };

/** The sections of Settings a link can open (#/settings/files); without one, the page's top. */
export const SETTINGS_SECTIONS = ["general", "files", "memories", "notifications", "providers", "plugins", "skills", "mcp"] as const;
export type SettingsSection = (typeof SETTINGS_SECTIONS)[number];

export function parseRoute(hash: string): Route {
  const h = hash.replace(/^#\/?/, "");
  const [a, b] = h.split("/").map((x) => decodeURIComponent(x));
  switch (a) {
    case "unread": return { view: "unread" };
    case "action": return { view: "action" };
    case "sandboxes": return { view: "sandboxes" };
    // #/schedules is the page's name before it was called Triggers; its links still open it.
    case "triggers": case "schedules": return { view: "triggers" };
    case "settings": return (SETTINGS_SECTIONS as readonly string[]).includes(b) ? { view: "settings", section: b as SettingsSection } : { view: "settings" };
    case "folder": if (b) return { view: "folder", id: b }; break;
    case "thread": if (b) return { view: "thread", id: b }; break;
  }
  return { view: "all" };
}

export function href(r: Route): string {
  if (r.view === "settings") return r.section ? `#/settings/${r.section}` : "#/settings";
  return "id" in r ? `#/${r.view}/${encodeURIComponent(r.id)}` : `#/${r.view}`;
}

/** A route that shows a list of threads (and is where a thread's Back goes). */
export function isListRoute(r: Route): r is Extract<Route, { view: "all" | "unread" | "action" | "folder" }> {
  return r.view !== "thread" && r.view !== "settings" && r.view !== "sandboxes" && r.view !== "triggers";
}
