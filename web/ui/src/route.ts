export type Route =
  | { view: "all" } | { view: "unread" } | { view: "action" } | { view: "settings" }
  | { view: "folder"; id: string } | { view: "thread"; id: string };

export function parseRoute(hash: string): Route {
  const h = hash.replace(/^#\/?/, "");
  const [a, b] = h.split("/").map((x) => decodeURIComponent(x));
  switch (a) {
    case "unread": return { view: "unread" };
    case "action": return { view: "action" };
    case "settings": return { view: "settings" };
    case "folder": if (b) return { view: "folder", id: b }; break;
    case "thread": if (b) return { view: "thread", id: b }; break;
  }
  return { view: "all" };
}

export function href(r: Route): string {
  return "id" in r ? `#/${r.view}/${encodeURIComponent(r.id)}` : `#/${r.view}`;
}
