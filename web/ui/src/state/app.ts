// The app controller: loads data, owns the two kinds of event streams (one
// global, one per open thread) and exposes the actions components call.
import { api, ApiError, authHeaders, API, setToken, setUnauthorizedHandler } from "../api";
import { normTheme } from "../workspace";
import { EventStream, type SSEMessage, type StreamState } from "../sse";
import { isListRoute, parseRoute, type Route } from "../route";
import type { Counts, Folder, Grant, InboxItem, Interrupt, KEvent, Message, ModelList, Run, SearchMatch, Settings, Status, Theme, Thread, ThreadTrigger, VirtualFile } from "../types";
import { applyEvent, initThread, withInterrupts, withMessages, withRuns, type ThreadState } from "./events";
import { createStore } from "./store";

export interface Row {
  id: string; title: string; preview?: string; time: string; pinned?: boolean; status?: string;
  unread: boolean; openActions: number; runStatus?: string; folderId?: string; match?: SearchMatch;
  /** Who started the thread (user, trigger, fork) and when; a trigger's threads differ by its fire. */
  source?: string; created?: string; fire?: ThreadTrigger;
  /** What the row's menu acts on (every row has one). */
  menu: Pick<Thread, "id" | "title" | "pinned" | "folder_id" | "unread">;
}

export interface AppState {
  route: Route;
  listRoute: Route;
  folders: Folder[];
  rows: Row[];
  rowsLoaded: boolean;
  rowsKey: string;
  /** The next page of the list, or undefined on its last page. */
  rowsCursor?: string;
  actionsCursor?: string;
  loadingMore: boolean;
  query: string;
  /** Undefined until the first inbox answer. */
  counts?: Counts;
  actions: InboxItem[];
  actionsLoaded: boolean;
  foldersLoaded: boolean;
  status?: Status;
  /** GET /models: undefined until it answers, null when the server has no model list (an older server). */
  models?: ModelList | null;
  thread?: ThreadState;
  threadMissing?: boolean;
  globalState: StreamState;
  threadState: StreamState;
  everOpen: boolean;
  needToken: boolean;
  tokenError?: string;
  error?: string;
  /** The browser's notification permission. */
  notify: NotificationPermission | "unsupported";
  /** Whether the user turned notifications on in Settings (kept in localStorage). */
  notifyOn: boolean;
  /** GET /grants, by name: undefined until it answers, null when the server has no grants (an older server). */
  grants?: Grant[] | null;
  grantsError?: string;
  /** GET /settings: undefined until it answers, null when the server has none (an older server). */
  settings?: Settings | null;
  settingsError?: string;
  /** The open thread's virtual files; list is undefined until they are read. */
  files?: { threadId: string; list?: VirtualFile[]; error?: string };
}

const NOTIFY_KEY = "kiln.notify";
const initialRoute = parseRoute(location.hash);
export const store = createStore<AppState>({
  route: initialRoute,
  listRoute: isListRoute(initialRoute) ? initialRoute : { view: "all" },
  folders: [], rows: [], rowsLoaded: false, rowsKey: "", query: "", loadingMore: false,
  actions: [], actionsLoaded: false, foldersLoaded: false,
  globalState: "connecting", threadState: "closed", everOpen: false,
  needToken: false,
  notify: typeof Notification === "undefined" ? "unsupported" : Notification.permission,
  notifyOn: readNotifyOn(),
});

const THEME_KEY = "kiln.theme";
/** The theme last applied in this browser, so the page paints in it before the settings answer. */
export function storedTheme(): Theme {
  try { return normTheme(localStorage.getItem(THEME_KEY)); } catch { return "system"; }
}
/** Applies a theme at once: data-theme on <html> (app.css has both palettes; system follows prefers-color-scheme). */
export function applyTheme(t: Theme) {
  document.documentElement.dataset.theme = t;
  try { localStorage.setItem(THEME_KEY, t); } catch { /* private mode */ }
}

function readNotifyOn() { try { return localStorage.getItem(NOTIFY_KEY) === "on"; } catch { return false; } }

const S = () => store.get();

export function showError(e: unknown) {
  if (e instanceof ApiError && e.status === 401) return;
  store.set({ error: e instanceof Error ? e.message : String(e) });
}

export const threadRow = (t: Thread): Row => ({
  id: t.id, title: t.title, preview: t.last_message, time: t.updated_at, pinned: t.pinned, status: t.status,
  unread: t.unread, openActions: t.open_actions, folderId: t.folder_id, match: t.match, menu: t, source: t.source, created: t.created_at, fire: t.trigger,
});
const unreadRow = (i: InboxItem): Row => ({
  id: i.thread_id, title: i.thread_title, preview: i.preview, time: i.time, pinned: i.pinned, unread: true, openActions: 0,
  runStatus: i.run_status, status: i.run_status === "failed" ? "failed" : undefined, folderId: i.folder_id, match: i.match,
  menu: { id: i.thread_id, title: i.thread_title, pinned: !!i.pinned, folder_id: i.folder_id, unread: true },
});

/** The page size of lists; scrolling to the end loads the next page. */
export const PAGE = 50;

function listKey(r: Route, q: string) { return JSON.stringify([r, q]); }

/** The query string of a list page: the search, the size and where it starts. */
function pageQuery(q: string, limit: number, cursor?: string) {
  return `limit=${limit}${q ? `&q=${encodeURIComponent(q)}` : ""}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
}

/**
 * Loads the list of the current view, searched on the server. A refresh
 * reloads as many rows as are shown (up to 500) so that scrolling back
 * keeps its place; more loads the next page after them.
 */
export async function loadList({ more = false } = {}) {
  const r = S().listRoute, q = S().query.trim();
  const key = listKey(r, q);
  if (r.view === "action") return loadActions({ more });
  if (more && (!S().rowsCursor || S().rowsKey !== key || S().loadingMore)) return;
  const limit = more ? PAGE : Math.min(500, Math.max(PAGE, S().rowsKey === key ? S().rows.length : 0));
  const qs = pageQuery(q, limit, more ? S().rowsCursor : undefined);
  if (more) store.set({ loadingMore: true });
  try {
    let rows: Row[] = [];
    let cursor: string | undefined;
    if (r.view === "unread") {
      const page = await api<{ items: InboxItem[]; counts: Counts; next_cursor?: string }>("GET", `/inbox?queue=unread&${qs}`);
      cursor = page.next_cursor;
      rows = page.items.map(unreadRow);
      store.set({ counts: page.counts });
    } else {
      const folder = r.view === "folder" ? `&folder_id=${encodeURIComponent(r.id)}` : "";
      const page = await api<{ threads: Thread[]; next_cursor?: string }>("GET", `/threads?${qs}${folder}`);
      cursor = page.next_cursor;
      rows = page.threads.map(threadRow);
    }
    if (listKey(S().listRoute, S().query.trim()) !== key) return; // superseded
    if (more) {
      const seen = new Set(S().rows.map((x) => x.id));
      rows = [...S().rows, ...rows.filter((x) => !seen.has(x.id))];
    }
    store.set({ rows, rowsLoaded: true, rowsKey: key, rowsCursor: cursor });
  } catch (e) { showError(e); }
  finally { if (more) store.set({ loadingMore: false }); }
}

let lastActionIds: Set<string> | undefined;
/** Loads the Action queue (the first page, for the counts and notifications). */
export async function loadInbox() {
  try {
    const page = await api<{ items: InboxItem[]; counts: Counts; next_cursor?: string }>("GET", `/inbox?queue=action&limit=${PAGE}`);
    const ids = new Set(page.items.map((i) => i.interrupt_id!));
    if (lastActionIds) {
      for (const it of page.items) if (!lastActionIds.has(it.interrupt_id!)) notifyAction(it);
    }
    lastActionIds = ids;
    store.set({ counts: page.counts });
    if (S().listRoute.view !== "action") store.set({ actions: page.items, actionsLoaded: true, actionsCursor: page.next_cursor });
    else loadActions();
  } catch (e) { showError(e); }
}

/** Loads the Action view's cards, searched on the server, and pages on. */
export async function loadActions({ more = false } = {}) {
  const q = S().query.trim();
  if (more && (!S().actionsCursor || S().loadingMore)) return;
  const limit = more ? PAGE : Math.min(500, Math.max(PAGE, S().actions.length));
  if (more) store.set({ loadingMore: true });
  try {
    const page = await api<{ items: InboxItem[]; counts: Counts; next_cursor?: string }>("GET", `/inbox?queue=action&${pageQuery(q, limit, more ? S().actionsCursor : undefined)}`);
    if (S().query.trim() !== q) return; // superseded
    let items = page.items;
    if (more) {
      const seen = new Set(S().actions.map((a) => a.interrupt_id));
      items = [...S().actions, ...items.filter((a) => !seen.has(a.interrupt_id))];
    }
    store.set({ actions: items, counts: page.counts, actionsLoaded: true, actionsCursor: page.next_cursor });
  } catch (e) { showError(e); }
  finally { if (more) store.set({ loadingMore: false }); }
}

export async function loadFolders() {
  try { store.set({ folders: (await api<{ folders: Folder[] }>("GET", "/folders")).folders, foldersLoaded: true }); } catch (e) { showError(e); }
}

export async function loadStatus() {
  try { store.set({ status: await api<Status>("GET", "/status") }); } catch (e) { showError(e); }
}

/** The server's default model, from GET /models or GET /status, whichever has answered; undefined before either. */
export function defaultModel(s: Pick<AppState, "models" | "status">): string | undefined {
  return s.models?.default || s.status?.default_model;
}

/** Reads the model list for the composers; an older server without GET /models leaves them as they were. */
export async function loadModels() {
  try { store.set({ models: await api<ModelList>("GET", "/models") }); }
  catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    store.set({ models: null }); // 404 on an older server, or unavailable: the built-in choice stays
  }
}

// ---- the workspace: settings, folder grants ----
/** Reads the settings and applies their theme; an older server without them (404) leaves the defaults. */
export async function loadSettings() {
  try {
    const st = await api<Settings>("GET", "/settings");
    store.set({ settings: st, settingsError: undefined });
    applyTheme(normTheme(st.theme));
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    if (e instanceof ApiError && e.status === 404) { store.set({ settings: null }); return; }
    store.set({ settingsError: (e as Error).message });
  }
}

/** Changes the settings the patch names (PUT takes a partial object); rejects with the server's error, changing nothing. */
export async function saveSettings(patch: Partial<Settings>) {
  const st = await api<Settings>("PUT", "/settings", patch);
  store.set({ settings: st, settingsError: undefined });
  applyTheme(normTheme(st.theme));
  return st;
}

/** Applies a theme at once and stores it; a refusal puts the previous one back and rejects. */
export async function setTheme(t: Theme) {
  const before = normTheme(S().settings?.theme ?? storedTheme());
  applyTheme(t);
  if (S().settings) store.set({ settings: { ...S().settings!, theme: t } });
  try { await saveSettings({ theme: t }); }
  catch (e) {
    applyTheme(before);
    if (S().settings) store.set({ settings: { ...S().settings!, theme: before } });
    throw e;
  }
}

const byName = (a: Grant, b: Grant) => a.name.localeCompare(b.name);

export async function loadGrants() {
  try { store.set({ grants: (await api<{ grants: Grant[] }>("GET", "/grants")).grants ?? [], grantsError: undefined }); }
  catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    if (e instanceof ApiError && e.status === 404) { store.set({ grants: null }); return; }
    store.set({ grantsError: (e as Error).message });
  }
}

/** Grants a folder; rejects with the server's ApiError (409 for the data root, a duplicate or an overlap; 400 for a path that is not a directory). */
export async function addGrant(input: { path: string; name?: string; writable: boolean; acknowledge_data_root?: boolean }) {
  const g = await api<Grant>("POST", "/grants", input);
  store.set({ grants: [...(S().grants ?? []).filter((x) => x.id !== g.id), g].sort(byName) });
  return g;
}

export async function removeGrant(id: string) {
  await api("DELETE", `/grants/${encodeURIComponent(id)}`);
  store.set({ grants: (S().grants ?? []).filter((x) => x.id !== id) });
}

// ---- the open thread's virtual files ----
export async function loadFiles(threadId: string) {
  try {
    const list = (await api<{ files: VirtualFile[] }>("GET", `/threads/${encodeURIComponent(threadId)}/files`)).files ?? [];
    if (S().thread?.id === threadId) store.set({ files: { threadId, list: list.slice().sort((a, b) => a.path.localeCompare(b.path)) } });
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    if (S().thread?.id !== threadId) return;
    // 404: an older server without virtual files (or the thread is gone, which the view says): no files.
    store.set({ files: e instanceof ApiError && e.status === 404 ? { threadId, list: [] } : { threadId, list: S().files?.list, error: (e as Error).message } });
  }
}

let filesTimer: ReturnType<typeof setTimeout> | undefined;
/** Re-reads the open thread's files soon, once for a burst of events (a replay, a run's steps). */
function filesSoon(threadId: string) {
  clearTimeout(filesTimer);
  filesTimer = setTimeout(() => { if (S().thread?.id === threadId) loadFiles(threadId); }, 250);
}

function notifyAction(it: InboxItem) {
  if (!S().notifyOn || typeof Notification === "undefined" || Notification.permission !== "granted") return;
  try {
    const n = new Notification(`Kiln: ${it.tool} needs a decision`, { body: it.thread_title, tag: it.interrupt_id });
    n.onclick = () => { window.focus(); location.hash = `#/thread/${it.thread_id}`; };
  } catch { /* some browsers only allow notifications from a service worker */ }
}

/** Turns notifications on (asking the browser first when it has not been asked) or off. */
export async function setNotifications(on: boolean) {
  if (typeof Notification === "undefined") return;
  const p = on && Notification.permission !== "granted" ? await Notification.requestPermission() : Notification.permission;
  const enabled = on && p === "granted";
  try { localStorage.setItem(NOTIFY_KEY, enabled ? "on" : "off"); } catch { /* private mode */ }
  store.set({ notify: p, notifyOn: enabled });
}

// ---- refresh scheduling (debounced, coalesced) ----
let timer: ReturnType<typeof setTimeout> | undefined;
let pending = { list: false, inbox: false, folders: false };
export function schedule(what: Partial<typeof pending>) {
  pending = { list: pending.list || !!what.list, inbox: pending.inbox || !!what.inbox, folders: pending.folders || !!what.folders };
  if (timer) return;
  timer = setTimeout(() => {
    timer = undefined;
    const p = pending;
    pending = { list: false, inbox: false, folders: false };
    if (p.folders) loadFolders();
    if (p.inbox) loadInbox();
    if (p.list) loadList();
  }, 80);
}

// ---- the global stream ----
let global: EventStream | undefined;
type GlobalListener = (e: KEvent | undefined) => void;
const globalListeners = new Set<GlobalListener>();
/**
 * Calls f with each event of the global stream (a page that shows what
 * they change, such as Triggers, reads it again), and with undefined
 * when the stream is back after a disconnect (anything may have changed
 * meanwhile). Returns the function that stops it.
 */
export function onGlobalEvent(f: GlobalListener): () => void {
  globalListeners.add(f);
  return () => { globalListeners.delete(f); };
}
function tellListeners(e: KEvent | undefined) {
  for (const f of [...globalListeners]) { try { f(e); } catch { /* one page's error is not the stream's */ } }
}
function startGlobal() {
  global?.close();
  global = new EventStream({
    url: `${API}/events`,
    headers: authHeaders,
    onEvent: (m: SSEMessage) => {
      let e: KEvent;
      try { e = JSON.parse(m.data); } catch { return; }
      tellListeners(e);
      if (e.type.startsWith("folder.")) { schedule({ folders: true, list: true }); return; }
      schedule({ list: true, inbox: true });
      const th = S().thread;
      if (th && e.thread_id === th.id && e.type === "thread.deleted") store.set({ threadMissing: true });
    },
    onState: (st) => {
      const was = S().globalState;
      store.set({ globalState: st, everOpen: S().everOpen || st === "open" });
      if (st === "unauthorized") store.set({ needToken: true });
      if (st === "open" && was === "reconnecting") { schedule({ list: true, inbox: true, folders: true }); loadStatus(); tellListeners(undefined); }
    },
  });
  global.start();
}

// ---- the open thread ----
let threadStream: EventStream | undefined;
let threadGen = 0;
function setThread(f: (t: ThreadState) => ThreadState, id: string) {
  const t = S().thread;
  if (!t || t.id !== id) return;
  store.set({ thread: f(t) });
}

export async function openThread(id: string) {
  threadStream?.close();
  const gen = ++threadGen;
  store.set({ thread: initThread(id), threadMissing: false, threadState: "connecting", files: { threadId: id } });
  const stream = new EventStream({
    url: `${API}/threads/${encodeURIComponent(id)}/events`,
    headers: authHeaders,
    onEvent: (m) => {
      let e: KEvent;
      try { e = JSON.parse(m.data); } catch { return; } // bad frame
      const before = S().thread;
      setThread((t) => applyEvent(t, e), id);
      // Files are committed with each step: a new message or a finished run may bring some.
      if ((e.type === "message" || e.type === "run.finished") && before?.id === id && e.seq > before.lastSeq) filesSoon(id);
      // A run queued elsewhere (the CLI, another tab): its input shows as queued.
      if (e.type === "run.queued" && e.run_id && !S().thread?.runs[e.run_id]?.input) {
        api<Run>("GET", `/runs/${encodeURIComponent(e.run_id)}`).then((r) => setThread((t) => withRuns(t, [r]), id)).catch(() => { /* shown without its input */ });
      }
      // A run that finishes on the thread the user is looking at does not
      // land in Unread: it is read already (replays of older events aside).
      // Either way the thread comes again (markRead answers with it): its token usage grew.
      if (e.type === "run.finished" && gen === threadGen && before?.id === id && e.seq > before.lastSeq) {
        if (document.visibilityState === "visible") markRead(id).catch(showError);
        else refreshThreadSoon(id);
      }
    },
    onEphemeral: (m) => { try { const e = JSON.parse(m.data) as KEvent; setThread((t) => applyEvent(t, e), id); } catch { /* bad frame */ } },
    onState: (st) => { if (gen === threadGen) store.set({ threadState: st }); if (st === "unauthorized") store.set({ needToken: true }); },
  });
  threadStream = stream;
  try {
    // The newest 100 runs (a long thread's first ones do not matter here), oldest first.
    const [thread, msgs, runs] = await Promise.all([
      api<Thread>("GET", `/threads/${encodeURIComponent(id)}`),
      api<{ messages: Message[] }>("GET", `/threads/${encodeURIComponent(id)}/messages`),
      api<{ runs: Run[] }>("GET", `/runs?thread_id=${encodeURIComponent(id)}&limit=100`),
    ]);
    if (gen !== threadGen) return;
    setThread((t) => withRuns(withMessages({ ...t, thread }, msgs.messages), runs.runs.slice().reverse()), id);
    loadFiles(id);
    if (thread.active_run_id) {
      const ints = await api<{ interrupts: Interrupt[] }>("GET", `/runs/${thread.active_run_id}/interrupts`);
      if (gen === threadGen) setThread((t) => withInterrupts(t, ints.interrupts), id);
    }
    stream.start();
    if (thread.unread) {
      const t2 = await api<Thread>("POST", `/threads/${encodeURIComponent(id)}/read`);
      if (gen === threadGen) setThread((t) => ({ ...t, thread: t2 }), id);
      schedule({ list: true, inbox: true });
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && gen === threadGen) store.set({ threadMissing: true });
    else showError(e);
  }
}

/** Re-reads the open thread (coalescing bursts, such as a replay of many finished runs). */
let refreshTimer: ReturnType<typeof setTimeout> | undefined;
function refreshThreadSoon(id: string) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    if (S().thread?.id !== id) return;
    try { const t = await api<Thread>("GET", `/threads/${encodeURIComponent(id)}`); setThread((s) => ({ ...s, thread: t }), id); }
    catch { /* the next snapshot catches up */ }
  }, 150);
}

export function closeThread() {
  threadStream?.close();
  threadStream = undefined;
  threadGen++;
  store.set({ thread: undefined, threadState: "closed", files: undefined });
}

// ---- routing ----
export function onRoute() {
  const route = parseRoute(location.hash);
  const prev = S().route;
  const isList = isListRoute(route);
  store.set({ route, ...(isList ? { listRoute: route } : {}) });
  if (isList) {
    if (JSON.stringify(route) !== JSON.stringify(prev) || !S().rowsLoaded) { store.set({ rowsLoaded: false }); loadList(); }
  }
  if (route.view === "thread") { if (S().thread?.id !== route.id) openThread(route.id); }
  else if (S().thread) closeThread();
  if (route.view === "settings") { loadStatus(); loadSettings(); loadGrants(); }
}

export function go(hash: string) { if (location.hash !== hash) location.hash = hash; else onRoute(); }

// ---- actions ----
/** What a message carries besides its text: uploaded attachments (IDs) and the folder grant its run works in (ID or name). */
export interface RunExtras { attachments?: string[]; workingFolder?: string }

/** Starts a run; without a model the server uses the thread's (or its default, for a new thread), without a working folder the thread's. */
export async function startRun(threadId: string, text: string, model?: string, extras: RunExtras = {}) {
  const body: any = { input: { text } };
  if (extras.attachments?.length) body.input.attachments = extras.attachments;
  if (model) body.model = model;
  if (extras.workingFolder) body.working_folder = extras.workingFolder;
  const run = await api<Run>("POST", `/threads/${encodeURIComponent(threadId)}/runs`, body);
  setThread((t) => withRuns(t, [run]), threadId);
  return run;
}

export async function newThread(text: string, model: string, extras: RunExtras = {}) {
  const first = text.trim().split("\n")[0];
  const title = first.length > 60 ? first.slice(0, 59) + "…" : first;
  const lr = S().listRoute;
  const t = await api<Thread>("POST", "/threads", { title, ...(lr.view === "folder" ? { folder_id: lr.id } : {}) });
  await startRun(t.id, text, model, extras);
  go(`#/thread/${t.id}`);
}

/** Forks a thread at a completed assistant turn (its message index) and opens the new thread. */
export async function forkThread(threadId: string, messageIndex: number) {
  const t = await api<Thread>("POST", `/threads/${encodeURIComponent(threadId)}/fork`, { message_index: messageIndex });
  schedule({ list: true });
  go(`#/thread/${encodeURIComponent(t.id)}`);
  return t;
}

export async function decide(it: { id: string; thread_id: string }, decision: string, extra: { args?: unknown; message?: string } = {}) {
  const res = await api<Interrupt>("POST", `/interrupts/${encodeURIComponent(it.id)}/decision`, { decision, ...extra });
  setThread((t) => withInterrupts(t, [res]), it.thread_id);
  store.set({ actions: S().actions.filter((a) => a.interrupt_id !== it.id) });
  schedule({ inbox: true, list: true });
  return res;
}

export async function cancelRun(runId: string) { await api("POST", `/runs/${encodeURIComponent(runId)}/cancel`); }

export async function patchThread(id: string, patch: { title?: string; folder_id?: string | null; pinned?: boolean }) {
  const t = await api<Thread>("PATCH", `/threads/${encodeURIComponent(id)}`, patch);
  const edit = { title: t.title, pinned: t.pinned, folder_id: t.folder_id };
  store.set({ rows: S().rows.map((r) => (r.id !== id ? r : { ...r, title: t.title, pinned: t.pinned, folderId: t.folder_id, menu: { ...r.menu, ...edit } })) });
  setThread((s) => ({ ...s, thread: t }), id);
  schedule({ list: true });
  return t;
}

export async function deleteThread(id: string) {
  await api("DELETE", `/threads/${encodeURIComponent(id)}`);
  store.set({ rows: S().rows.filter((r) => r.id !== id) });
  if (S().route.view === "thread") go("#/all");
  schedule({ list: true, inbox: true });
}

export async function markRead(id: string) {
  const t = await api<Thread>("POST", `/threads/${encodeURIComponent(id)}/read`);
  setThread((s) => ({ ...s, thread: t }), id);
  schedule({ list: true, inbox: true });
}

/** Empties the Unread queue. */
export async function markAllRead() {
  await api("POST", "/inbox/read");
  const c = S().counts;
  store.set({ counts: c ? { ...c, unread: 0 } : c, rows: S().listRoute.view === "unread" ? [] : S().rows.map((r) => ({ ...r, unread: false })), rowsCursor: S().listRoute.view === "unread" ? undefined : S().rowsCursor });
  schedule({ list: true, inbox: true });
}

export async function createFolder(name: string) {
  const f = await api<Folder>("POST", "/folders", { name });
  store.set({ folders: [...S().folders, f] });
  return f;
}
export async function renameFolder(id: string, name: string) {
  const f = await api<Folder>("PATCH", `/folders/${encodeURIComponent(id)}`, { name });
  store.set({ folders: S().folders.map((x) => (x.id === id ? f : x)) });
}
export async function deleteFolder(id: string) {
  await api("DELETE", `/folders/${encodeURIComponent(id)}`);
  store.set({ folders: S().folders.filter((x) => x.id !== id) });
  const r = S().listRoute;
  if (r.view === "folder" && r.id === id) go("#/all");
}
/** Move a folder up (-1) or down (+1): the server renumbers the others. */
export async function moveFolder(id: string, dir: -1 | 1) {
  const list = S().folders.slice();
  const i = list.findIndex((f) => f.id === id), j = i + dir;
  if (i < 0 || j < 0 || j >= list.length) return;
  [list[i], list[j]] = [list[j], list[i]];
  store.set({ folders: list.map((f, k) => ({ ...f, position: k })) });
  await api("PATCH", `/folders/${encodeURIComponent(id)}`, { position: j });
  schedule({ folders: true });
}

export function setQuery(q: string) {
  store.set({ query: q });
  loadList();
}

export async function submitToken(token: string) {
  setToken(token.trim());
  try {
    await api("GET", "/status");
  } catch (e) {
    store.set({ tokenError: e instanceof ApiError && e.status === 401 ? "That token was refused. Check KILN_API_TOKEN and try again." : String((e as Error).message) });
    return;
  }
  store.set({ needToken: false, tokenError: undefined });
  boot();
}

export function boot() {
  startGlobal();
  loadFolders();
  loadInbox();
  loadStatus();
  loadModels();
  loadSettings();
  loadGrants();
  const r = S().route;
  store.set({ thread: undefined });
  onRoute();
  if (!isListRoute(r)) loadList();
}

setUnauthorizedHandler(() => store.set({ needToken: true }));
