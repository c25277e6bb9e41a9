import { Fragment } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, apiText } from "../api";
import { cancelRun, defaultModel, forkThread, loadFiles, markRead, patchThread, showError, startRun, store } from "../state/app";
import { activityTree, currentRun, openInterrupts, queuedRuns, rootMessages, subagents, TERMINAL, threadModel, type ActivityNode, type ThreadState } from "../state/events";
import { useStore } from "../state/store";
import { tokens } from "../format";
import { relTime } from "../time";
import type { Interrupt, Message, Run, Thread, ToolCall, VirtualFile } from "../types";
import { filePath, forkable, formatBytes, mediaParts } from "../workspace";
import { ApprovalCard, pretty } from "./ApprovalCard";
import { AttachButton, AttachmentChips, FolderPicker, MessageParts, useAttachments, useFileDrop } from "./Attachments";
import { ModelPicker, ThreadMenu } from "./common";
import { Markdown } from "./Markdown";

function shortArgs(a: unknown): string {
  const t = JSON.stringify(a) ?? "";
  return t.length > 70 ? t.slice(0, 69) + "…" : t;
}

/**
 * The badge of a call a person decided on: a rejected or skipped call did
 * not fail, and an answered one did not run, so neither reads "error" or
 * "done" (the result says what the model was told).
 */
const DECIDED: Record<string, string> = { reject: "rejected", skip: "skipped", respond: "answered" };

/**
 * A tool call with its result; a task call names the subagent that answers
 * it, with its state. decision is how a person decided on the call, if
 * one did.
 */
function ToolCallView({ call, result, sub, decision }: { call: ToolCall; result?: Message; sub?: Run; decision?: string }) {
  const state = !result ? "pending" : (decision && DECIDED[decision]) || (result.is_error ? "error" : "done");
  return (
    <details class={`tool ${state}`} data-testid="tool-call" data-tool={call.name} data-result-index={result?.index}>
      <summary>
        <span class="tool-arrow" aria-hidden="true">→</span> <code class="tool-name">{call.name}</code> <span class="tool-args">{shortArgs(call.args)}</span>
        {sub && <span class="muted small" data-testid="subagent" data-run-id={sub.id} data-status={sub.status}>
          subagent <strong>{sub.agent?.skill}</strong> <span class={`badge b-${sub.status}`}>{sub.status}</span></span>}
        <span class={`tool-state s-${state}`} data-testid="tool-state">{state === "pending" ? "waiting" : state}</span>
      </summary>
      <div class="tool-body">
        <div class="small muted">Arguments</div>
        <pre>{pretty(call.args)}</pre>
        {result && <><div class="small muted">{result.is_error ? "Error" : "Result"}</div><pre class={result.is_error ? "err" : ""}>{result.text}</pre></>}
      </div>
    </details>
  );
}

/**
 * The conversation. A decision card stays where its call happened, right
 * under the call (decided ones too); cards whose call is not shown (yet)
 * follow the messages. Runs queued behind the active one show their input
 * as queued.
 */
function Messages({ t, cards, canFork }: { t: ThreadState; cards: Interrupt[]; canFork: Set<number> }) {
  const [forking, setForking] = useState<number>();
  const [forkErr, setForkErr] = useState<{ index: number; msg: string }>();
  async function fork(index: number) {
    setForking(index); setForkErr(undefined);
    try { await forkThread(t.id, index); }
    catch (e) { setForkErr({ index, msg: `Could not fork: ${(e as Error).message}` }); }
    finally { setForking(undefined); }
  }
  // Subagents' messages show in Activity, under their task calls.
  const msgs = rootMessages(t);
  const results = new Map<string, Message>();
  for (const m of msgs) if (m.role === "tool" && m.tool_call_id) results.set(m.tool_call_id, m);
  const calls = new Set<string>();
  for (const m of msgs) for (const c of m.tool_calls ?? []) calls.add(c.id);
  const byCall = new Map<string, Interrupt[]>();
  for (const i of cards) {
    const k = i.tool_call_id && calls.has(i.tool_call_id) ? i.tool_call_id : "";
    byCall.set(k, [...(byCall.get(k) ?? []), i]);
  }
  return (
    <>
      {msgs.map((m) => {
        if (m.role === "tool" && m.tool_call_id && calls.has(m.tool_call_id)) return null; // folded into its call
        return (
          <article key={m.index} class={`msg ${m.role}`} data-testid="message" data-role={m.role} data-index={m.index}>
            <div class="msg-meta"><span class="who">{m.role === "user" ? "You" : m.role === "assistant" ? "Agent" : m.name ?? "Tool"}</span>
              {m.created_at && <time dateTime={m.created_at}>{relTime(m.created_at)}</time>}
              {canFork.has(m.index) && (
                <button type="button" class="link small fork" data-testid="fork" disabled={forking !== undefined} onClick={() => fork(m.index)}
                  title="A new thread with the conversation up to here (and the files as they were then)">{forking === m.index ? "Forking…" : "Fork from here"}</button>
              )}</div>
            {m.text ? (m.role === "assistant" ? <Markdown text={m.text} /> : <div class={`plain ${m.is_error ? "err" : ""}`}>{m.text}</div>) : null}
            <MessageParts parts={mediaParts(m)} />
            {forkErr?.index === m.index && <p class="card-error" role="alert" data-testid="fork-error">{forkErr.msg}</p>}
            {m.tool_calls?.map((c) => (
              <Fragment key={c.id}>
                <ToolCallView call={c} result={results.get(c.id)} sub={m.run_id ? subagents(t, m.run_id).get(c.id) : undefined}
                  decision={byCall.get(c.id)?.filter((i) => i.decision).pop()?.decision?.decision} />
                {byCall.get(c.id)?.map((i) => <ApprovalCard key={i.id} it={i} />)}
              </Fragment>
            ))}
          </article>
        );
      })}
      {Object.entries(t.streaming).map(([run, text]) => (
        <article key={`s-${run}`} class="msg assistant streaming" data-testid="message" data-role="assistant" data-streaming="true" aria-live="polite">
          <div class="msg-meta"><span class="who">Agent</span><span class="typing">writing…</span></div>
          <Markdown text={text} />
        </article>
      ))}
      {byCall.get("")?.map((i) => <ApprovalCard key={i.id} it={i} />)}
      {queuedRuns(t).map((r) => (
        <article key={`q-${r.id}`} class="msg user queued" data-testid="queued-message" data-run-id={r.id}>
          <div class="msg-meta"><span class="who">You</span><span class="badge b-queued">queued</span>
            <span class="muted small">runs after the current run{r.model ? ` on ${r.model}` : ""}</span>
            <button type="button" class="link small" data-testid="queued-cancel" onClick={() => cancelRun(r.id).catch(showError)}>Cancel</button></div>
          <div class="plain">{r.input?.text ?? "…"}</div>
        </article>
      ))}
    </>
  );
}

/** "forked from <parent title>", linking to the parent; the parent is read once per thread. */
function ForkedFrom({ th }: { th: Thread }) {
  const [parent, setParent] = useState<{ id: string; title?: string; gone?: boolean }>();
  const pid = th.parent_thread_id;
  useEffect(() => {
    if (!pid) return;
    let stale = false;
    setParent({ id: pid });
    api<Thread>("GET", `/threads/${encodeURIComponent(pid)}`)
      .then((p) => { if (!stale) setParent({ id: pid, title: p.title }); })
      .catch(() => { if (!stale) setParent({ id: pid, gone: true }); });
    return () => { stale = true; };
  }, [pid]);
  if (!pid) return null;
  if (parent?.gone) return <span class="muted small nowrap forked" data-testid="forked-from">forked from a deleted thread</span>;
  return (
    <a class="small forked" href={`#/thread/${encodeURIComponent(pid)}`} data-testid="forked-from" data-parent-id={pid}>
      forked from <span class="forked-title">{parent?.title ?? "…"}</span>
    </a>
  );
}

/** The thread's virtual files (what runs wrote outside folder grants), with one file's content open. */
function FilesPanel({ id, threadId, onClose }: { id: string; threadId: string; onClose: () => void }) {
  const s = useStore(store);
  const files = s.files?.threadId === threadId ? s.files : undefined;
  const [open, setOpen] = useState<{ path: string; text?: string; error?: string }>();
  const head = useRef<HTMLHeadingElement>(null);
  useLayoutEffect(() => { head.current?.focus(); }, []);
  async function view(f: VirtualFile) {
    setOpen({ path: f.path });
    try { setOpen({ path: f.path, text: await apiText(`/threads/${encodeURIComponent(threadId)}/files/${filePath(f.path)}`) }); }
    catch (e) { setOpen({ path: f.path, error: (e as Error).message }); }
  }
  // A newer version of the open file (a run wrote it again) is read again.
  const cur = files?.list?.find((f) => f.path === open?.path);
  const ver = cur ? `${cur.seq}:${cur.size}` : "";
  useEffect(() => { if (cur && open?.text !== undefined) view(cur); }, [ver]);
  const list = files?.list;
  return (
    <section id={id} class="files-panel" aria-labelledby={`${id}-h`} data-testid="files-panel"
      onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); onClose(); } }}>
      <div class="panel-head">
        <h2 id={`${id}-h`} tabIndex={-1} ref={head}>Files</h2>
        <span class="muted small grow">Written by this thread's runs outside any granted folder; kept with the thread, copied into its forks.</span>
        <button type="button" class="sm" data-testid="files-refresh" onClick={() => loadFiles(threadId)}>Refresh</button>
        <button type="button" class="sm" onClick={onClose}>Close</button>
      </div>
      {files?.error && <p class="card-error" role="alert">{files.error}</p>}
      {!list ? <p class="muted small">Loading…</p>
        : !list.length ? <p class="muted small" data-testid="files-empty">No files yet.</p>
        : (
          <ul class="file-list" data-testid="file-list">
            {list.map((f) => (
              <li key={f.path}>
                <button type="button" class="link" data-testid="file" data-path={f.path} aria-pressed={open?.path === f.path} onClick={() => view(f)}>
                  <code>{f.path}</code>
                </button>
                <span class="muted small">{formatBytes(f.size)}</span>
                {f.updated_at && <time class="muted small" dateTime={f.updated_at}>{relTime(f.updated_at)}</time>}
              </li>
            ))}
          </ul>
        )}
      {open && (
        <div class="file-view" data-testid="file-view" data-path={open.path}>
          <div class="small muted"><code>{open.path}</code></div>
          {open.error ? <p class="card-error" role="alert">{open.error}</p>
            : open.text === undefined ? <p class="muted small">Loading…</p>
            : <pre data-testid="file-content" tabIndex={0} aria-label={`Content of ${open.path}`}>{open.text}</pre>}
        </div>
      )}
    </section>
  );
}

export function ThreadView() {
  const s = useStore(store);
  const t = s.thread;
  const [text, setText] = useState("");
  // The model the user picked for the next message; "" means the thread's.
  const [model, setModel] = useState("");
  // The working folder picked for the next message; undefined means the thread's.
  const [folder, setFolder] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [renaming, setRenaming] = useState(false);
  const [title, setTitle] = useState("");
  const [showFiles, setShowFiles] = useState(false);
  const att = useAttachments();
  const drop = useFileDrop(att);
  const filesBtn = useRef<HTMLButtonElement>(null);
  const scroller = useRef<HTMLDivElement>(null);
  // The conversation follows what runs add (messages, a waiting card)
  // while it is scrolled to the end: stick, which only the person's own
  // scrolling turns off (a scroll event for a position follow set is not
  // theirs, even when more arrived before it was delivered).
  const stick = useRef(true);
  const followed = useRef(-1);
  const follow = () => {
    const el = scroller.current;
    if (!el || !stick.current) return;
    el.scrollTop = el.scrollHeight;
    followed.current = el.scrollTop;
  };
  const count = (t?.messages.length ?? 0) + Object.values(t?.streaming ?? {}).join("").length + Object.keys(t?.interrupts ?? {}).length + Object.keys(t?.runs ?? {}).length;
  useLayoutEffect(() => { stick.current = true; }, [t?.id]);
  useLayoutEffect(follow, [count, t?.id]);
  // The conversation's own height changes too (the run bar above it grows when a run waits).
  useEffect(() => {
    const el = scroller.current;
    if (!el || typeof ResizeObserver === "undefined") return;
    const ro = new ResizeObserver(follow);
    ro.observe(el);
    return () => ro.disconnect();
  }, [t?.id]);
  useEffect(() => {
    setText(""); setModel(""); setFolder(undefined); setErr(""); setRenaming(false); setShowFiles(false);
    // Attachments not sent in the thread left behind are deleted.
    return () => att.clear(true);
  }, [t?.id]);

  if (s.threadMissing) return <div class="view"><p class="empty">This thread does not exist (any more). <a href="#/all">Back to all threads</a></p></div>;
  if (!t) return null;
  const th = t.thread;
  const run = currentRun(t);
  const queued = queuedRuns(t);
  const active = run && !TERMINAL.includes(run.status);
  // Every decision the thread has seen (the stream replays them all): a
  // card stays with its call, decided or not, whichever run is current.
  const cards = Object.values(t.interrupts).sort((a, b) => (a.created_at ?? "").localeCompare(b.created_at ?? ""));
  const waiting = cards.filter((i) => i.status === "open");
  const m = model || threadModel(t) || defaultModel(s) || "demo";
  const wf = folder ?? th?.working_folder ?? "";
  // The server forks only a thread without an active run (a queued one counts: it is about to start).
  const canFork = forkable(rootMessages(t), !!active || queued.length > 0 || Object.keys(t.streaming).length > 0);
  const nFiles = s.files?.threadId === t.id ? s.files.list?.length : undefined;

  async function send() {
    if (!text.trim() || !t) return;
    setBusy(true); setErr("");
    try {
      const ids = await att.ready();
      // Without a pick, the server runs the follow-up on the thread's model and in its working folder.
      await startRun(t.id, text, model || undefined, { attachments: ids, workingFolder: folder || undefined });
      setText(""); att.clear(false); stick.current = true;
    } catch (e) { setErr((e as Error).message); } finally { setBusy(false); }
  }
  function showCard() {
    const el = document.querySelector<HTMLElement>(`[data-interrupt-id="${waiting[0]?.id}"]`);
    el?.scrollIntoView({ block: "center" });
    el?.focus();
  }
  async function saveTitle() {
    const v = title.trim();
    setRenaming(false);
    if (v && th && v !== th.title) patchThread(th.id, { title: v }).catch(showError);
  }
  function closeFiles() { setShowFiles(false); filesBtn.current?.focus(); }
  return (
    <div class="view thread-view" data-testid="thread-view" data-thread-id={t.id}>
      <header class="view-head thread-head">
        <a class="back" href={s.listRoute.view === "folder" ? `#/folder/${s.listRoute.id}` : `#/${s.listRoute.view}`} aria-label="Back to the list">←</a>
        {renaming ? (
          <form class="grow" onSubmit={(e) => { e.preventDefault(); saveTitle(); }}>
            <label class="sr-only" for="rename-thread">Thread title</label>
            <input id="rename-thread" class="title-input" value={title} maxLength={200} autoFocus onInput={(e) => setTitle((e.target as HTMLInputElement).value)}
              onBlur={saveTitle} onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); setRenaming(false); } }} />
          </form>
        ) : (
          <div class="grow title-block">
            <h1>{th?.title ?? "…"}</h1>
            {th?.parent_thread_id && <ForkedFrom th={th} />}
          </div>
        )}
        {tokens(th?.usage) && <span class="muted small nowrap" data-testid="thread-usage">Total: {tokens(th?.usage)}</span>}
        <button type="button" class="sm nowrap" ref={filesBtn} data-testid="files-toggle" aria-expanded={showFiles} aria-controls={showFiles ? "thread-files" : undefined}
          onClick={() => (showFiles ? closeFiles() : setShowFiles(true))}>
          Files{nFiles ? <> <span class="count-pill" data-testid="files-count">{nFiles}</span></> : null}
        </button>
        {th?.unread && <button type="button" class="sm" onClick={() => markRead(th.id).catch(showError)}>Mark read</button>}
        {th && <ThreadMenu thread={th} onRename={() => { setTitle(th.title); setRenaming(true); }} />}
      </header>
      <div class="run-bar" data-testid="run-status" data-status={run?.status ?? "none"} role="status">
        {run ? (
          <>
            <span class={`badge b-${run.status}`}>{run.status === "running" && <span class="dot" aria-hidden="true" />}{run.status}</span>
            <span class="muted small">run on <code>{run.model}</code>{run.steps ? ` · ${run.steps} step${run.steps === 1 ? "" : "s"}` : ""}{tokens(run.usage) && <> · <span data-testid="run-usage">{tokens(run.usage)}</span></>}{run.cancel_requested ? " · cancelling…" : ""}</span>
            {waiting.length > 0 && <button type="button" class="link small" data-testid="run-waiting" onClick={showCard}>waiting for your decision on <code>{waiting[0].tool}</code>{waiting.length > 1 ? ` and ${waiting.length - 1} more` : ""}</button>}
            {queued.length > 0 && <span class="badge b-queued" data-testid="queued-count">{queued.length} queued</span>}
            {active && <button type="button" class="sm danger" data-testid="run-cancel" onClick={() => cancelRun(run.id).catch(showError)}>Cancel run</button>}
          </>
        ) : <span class="muted small">No run yet — write below to start one.</span>}
        {s.threadState === "reconnecting" && <span class="muted small">· reconnecting…</span>}
      </div>
      {showFiles && <FilesPanel id="thread-files" threadId={t.id} onClose={closeFiles} />}
      {run?.status === "failed" && <div class="run-error" role="alert"><strong>The run failed.</strong> {run.error || "No reason was given."}</div>}
      <div class="convo" ref={scroller} onScroll={(e) => {
        const el = e.currentTarget as HTMLDivElement;
        if (el.scrollTop !== followed.current) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
      }}>
        {!t.messages.length && !Object.keys(t.streaming).length && <p class="empty">No messages yet. Tell the agent what to do below.</p>}
        <Messages t={t} cards={cards} canFork={canFork} />
      </div>
      <form class={`composer ${drop.over ? "drop" : ""}`} data-testid="composer" onSubmit={(e) => { e.preventDefault(); send(); }} {...drop.props}>
        <AttachmentChips att={att} />
        <label class="sr-only" for="composer">Message</label>
        <textarea id="composer" data-testid="composer-input" rows={2} value={text} placeholder={active ? "Queue a follow-up (runs after the current run)…" : "Send the next message…  (Enter sends, Shift+Enter for a new line)"}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} onPaste={drop.onPaste}
          onKeyDown={(e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } }} />
        <div class="composer-tools">
          <AttachButton att={att} id="composer-files" />
          <FolderPicker id="composer-folder" value={wf} onChange={setFolder} />
          <ModelPicker id="composer-model" value={m} onChange={setModel} />
          <button type="submit" class="primary" data-testid="composer-send" disabled={busy || !text.trim()}>{busy && att.uploading ? "Uploading…" : "Send"}</button>
        </div>
        {err && <p class="field-error" role="alert">{err}</p>}
        {drop.over && <p class="drop-hint" aria-hidden="true">Drop to attach</p>}
      </form>
    </div>
  );
}

/** Activity lines, with each subagent's nested under the task call that started it. */
function ActivityList({ nodes, nested }: { nodes: ActivityNode[]; nested?: boolean }) {
  return (
    <ol class={nested ? "act act-sub" : "act"}>
      {nodes.map((n, i) => (
        <li key={`${n.item.seq}-${i}`} class={`act-${n.item.type.replace(/\./g, "-")}`}>
          <span class="act-dot" aria-hidden="true" />
          <span class="act-text">{n.item.summary}</span>
          {n.item.fraction !== undefined && <progress class="act-progress" max={1} value={n.item.fraction} aria-label={n.item.summary} />}
          {n.item.time && <time class="act-time" dateTime={n.item.time}>{new Date(n.item.time).toLocaleTimeString()}</time>}
          {n.subagents.map(({ run, nodes }) => (
            <section key={run.id} class="act-subagent" data-testid="subagent-activity" data-run-id={run.id} data-skill={run.agent?.skill} data-status={run.status}
              aria-label={`Subagent ${run.agent?.skill ?? ""}`}>
              <div class="small"><strong>{run.agent?.skill}</strong> subagent · <span class={`badge b-${run.status}`}>{run.status}</span></div>
              <ActivityList nodes={nodes} nested />
            </section>
          ))}
        </li>
      ))}
    </ol>
  );
}

export function ActivityPanel() {
  const s = useStore(store);
  const t = s.thread;
  if (!t) return null;
  const run = currentRun(t);
  const open = openInterrupts(t).length;
  return (
    <aside class="activity" data-testid="activity" aria-label="Activity">
      <h2>Activity</h2>
      <p class="muted small">{run ? `Run ${run.status}${open ? ` · ${open} waiting for you` : ""}` : "Nothing has run yet."}</p>
      <ActivityList nodes={activityTree(t, run?.id)} />
    </aside>
  );
}
