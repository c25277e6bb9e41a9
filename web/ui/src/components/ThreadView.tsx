import { Fragment } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { cancelRun, defaultModel, markRead, patchThread, showError, startRun, store } from "../state/app";
import { currentRun, groupActivity, openInterrupts, queuedRuns, TERMINAL, threadModel, type ThreadState } from "../state/events";
import { useStore } from "../state/store";
import { tokens } from "../format";
import { relTime } from "../time";
import type { Interrupt, Message, ToolCall } from "../types";
import { ApprovalCard, pretty } from "./ApprovalCard";
import { ModelPicker, ThreadMenu } from "./common";
import { Markdown } from "./Markdown";

function shortArgs(a: unknown): string {
  const t = JSON.stringify(a) ?? "";
  return t.length > 70 ? t.slice(0, 69) + "…" : t;
}

function ToolCallView({ call, result }: { call: ToolCall; result?: Message }) {
  const state = !result ? "pending" : result.is_error ? "error" : "done";
  return (
    <details class={`tool ${state}`} data-testid="tool-call" data-tool={call.name} data-result-index={result?.index}>
      <summary>
        <span class="tool-arrow" aria-hidden="true">→</span> <code class="tool-name">{call.name}</code> <span class="tool-args">{shortArgs(call.args)}</span>
        <span class={`tool-state s-${state}`}>{state === "pending" ? "waiting" : state === "error" ? "error" : "done"}</span>
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
function Messages({ t, cards }: { t: ThreadState; cards: Interrupt[] }) {
  const results = new Map<string, Message>();
  for (const m of t.messages) if (m.role === "tool" && m.tool_call_id) results.set(m.tool_call_id, m);
  const calls = new Set<string>();
  for (const m of t.messages) for (const c of m.tool_calls ?? []) calls.add(c.id);
  const byCall = new Map<string, Interrupt[]>();
  for (const i of cards) {
    const k = i.tool_call_id && calls.has(i.tool_call_id) ? i.tool_call_id : "";
    byCall.set(k, [...(byCall.get(k) ?? []), i]);
  }
  return (
    <>
      {t.messages.map((m) => {
        if (m.role === "tool" && m.tool_call_id && calls.has(m.tool_call_id)) return null; // folded into its call
        return (
          <article key={m.index} class={`msg ${m.role}`} data-testid="message" data-role={m.role} data-index={m.index}>
            <div class="msg-meta"><span class="who">{m.role === "user" ? "You" : m.role === "assistant" ? "Agent" : m.name ?? "Tool"}</span>
              {m.created_at && <time dateTime={m.created_at}>{relTime(m.created_at)}</time>}</div>
            {m.text ? (m.role === "assistant" ? <Markdown text={m.text} /> : <div class={`plain ${m.is_error ? "err" : ""}`}>{m.text}</div>) : null}
            {m.tool_calls?.map((c) => (
              <Fragment key={c.id}>
                <ToolCallView call={c} result={results.get(c.id)} />
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

export function ThreadView() {
  const s = useStore(store);
  const t = s.thread;
  const [text, setText] = useState("");
  // The model the user picked for the next message; "" means the thread's.
  const [model, setModel] = useState("");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const [renaming, setRenaming] = useState(false);
  const [title, setTitle] = useState("");
  const scroller = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const count = (t?.messages.length ?? 0) + Object.values(t?.streaming ?? {}).join("").length + Object.keys(t?.interrupts ?? {}).length + Object.keys(t?.runs ?? {}).length;
  useEffect(() => { const el = scroller.current; if (el && stick.current) el.scrollTop = el.scrollHeight; }, [count, t?.id]);
  useEffect(() => { setText(""); setModel(""); setErr(""); setRenaming(false); stick.current = true; }, [t?.id]);

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

  async function send() {
    if (!text.trim() || !t) return;
    setBusy(true); setErr("");
    // Without a pick, the server runs the follow-up on the thread's model.
    try { await startRun(t.id, text, model || undefined); setText(""); stick.current = true; } catch (e) { setErr((e as Error).message); } finally { setBusy(false); }
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
        ) : <h1 class="grow">{th?.title ?? "…"}</h1>}
        {tokens(th?.usage) && <span class="muted small nowrap" data-testid="thread-usage">Total: {tokens(th?.usage)}</span>}
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
      {run?.status === "failed" && <div class="run-error" role="alert"><strong>The run failed.</strong> {run.error || "No reason was given."}</div>}
      <div class="convo" ref={scroller} onScroll={(e) => { const el = e.currentTarget as HTMLDivElement; stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80; }}>
        {!t.messages.length && !Object.keys(t.streaming).length && <p class="empty">No messages yet. Tell the agent what to do below.</p>}
        <Messages t={t} cards={cards} />
      </div>
      <form class="composer" onSubmit={(e) => { e.preventDefault(); send(); }}>
        <label class="sr-only" for="composer">Message</label>
        <textarea id="composer" data-testid="composer-input" rows={2} value={text} placeholder={active ? "Queue a follow-up (runs after the current run)…" : "Send the next message…  (Enter sends, Shift+Enter for a new line)"}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } }} />
        <ModelPicker id="composer-model" value={m} onChange={setModel} />
        <button type="submit" class="primary" data-testid="composer-send" disabled={busy || !text.trim()}>Send</button>
        {err && <p class="field-error" role="alert">{err}</p>}
      </form>
    </div>
  );
}

export function ActivityPanel() {
  const s = useStore(store);
  const t = s.thread;
  if (!t) return null;
  const run = currentRun(t);
  const list = t.activity.filter((a) => !run || a.run_id === run.id || !a.run_id);
  const groups = groupActivity(list.slice(-150));
  const open = openInterrupts(t).length;
  return (
    <aside class="activity" data-testid="activity" aria-label="Activity">
      <h2>Activity</h2>
      <p class="muted small">{run ? `Run ${run.status}${open ? ` · ${open} waiting for you` : ""}` : "Nothing has run yet."}</p>
      {groups.map((g) => (
        <section key={g.namespace} class="act-group">
          {g.namespace && <h3 class="small">{g.namespace}</h3>}
          <ol class="act">
            {g.items.map((a, i) => (
              <li key={`${a.seq}-${i}`} class={`act-${a.type.replace(/\./g, "-")}`}>
                <span class="act-dot" aria-hidden="true" />
                <span class="act-text">{a.summary}</span>
                <time class="act-time" dateTime={a.time}>{new Date(a.time).toLocaleTimeString()}</time>
              </li>
            ))}
          </ol>
        </section>
      ))}
    </aside>
  );
}
