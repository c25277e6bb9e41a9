// Server-Sent Events over fetch() streaming: a spec-following parser and a
// reconnecting client that resumes with Last-Event-ID and never delivers a
// durable event (one with an id) twice.

export interface SSEMessage {
  /** The id field of this message, or undefined when it had none (ephemeral). */
  id?: string;
  event: string;
  data: string;
}

/**
 * Incremental SSE parser (https://html.spec.whatwg.org/#event-stream-interpretation).
 * Feed it decoded text in arbitrary chunks; it returns the complete messages.
 * Lines end with CRLF, LF or CR; a CR at the end of a chunk followed by LF in
 * the next chunk counts once.
 */
export class SSEParser {
  private buf = "";
  private skipLF = false;
  private data: string[] = [];
  private hasData = false;
  private event = "";
  private id: string | undefined;
  /** The last retry: value in ms, if any. */
  retry: number | undefined;

  feed(chunk: string): SSEMessage[] {
    const out: SSEMessage[] = [];
    let s = chunk;
    if (this.skipLF && s.startsWith("\n")) s = s.slice(1);
    this.skipLF = false;
    this.buf += s;
    let start = 0;
    for (let i = 0; i < this.buf.length; i++) {
      const c = this.buf.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this.buf.slice(start, i);
      if (c === 13) {
        if (i + 1 < this.buf.length) {
          if (this.buf.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLF = true;
        }
      }
      start = i + 1;
      const m = this.line(line);
      if (m) out.push(m);
    }
    this.buf = this.buf.slice(start);
    return out;
  }

  private line(line: string): SSEMessage | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined; // comment (": ping")
    const colon = line.indexOf(":");
    let field = line, value = "";
    if (colon >= 0) {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
    }
    switch (field) {
      case "data": this.data.push(value); this.hasData = true; break;
      case "event": this.event = value; break;
      case "id": if (!value.includes("\0")) this.id = value; break;
      case "retry": if (/^\d+$/.test(value)) this.retry = Number(value); break;
    }
    return undefined;
  }

  private dispatch(): SSEMessage | undefined {
    const m: SSEMessage | undefined = this.hasData
      ? { event: this.event || "message", data: this.data.join("\n"), ...(this.id !== undefined ? { id: this.id } : {}) }
      : undefined;
    this.data = []; this.hasData = false; this.event = ""; this.id = undefined;
    return m;
  }
}

export type StreamState = "connecting" | "open" | "reconnecting" | "unauthorized" | "closed";

export interface StreamOptions {
  url: string;
  fetch?: typeof fetch;
  /** Extra headers per attempt (e.g. Authorization). */
  headers?: () => Record<string, string>;
  /** Durable events (with an id), in order, each once. */
  onEvent: (m: SSEMessage, seq: number) => void;
  /** Ephemeral events (no id), e.g. message.delta. */
  onEphemeral?: (m: SSEMessage) => void;
  onState?: (s: StreamState) => void;
  /** Resume after this seq from the start (Last-Event-ID on the first request too). */
  since?: number;
  /** Backoff: base and max delay in ms. */
  minDelay?: number;
  maxDelay?: number;
  /** Injected for tests. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  random?: () => number;
}

export function backoffDelay(attempt: number, min: number, max: number, random: () => number = Math.random): number {
  const base = Math.min(max, min * 2 ** Math.max(0, attempt - 1));
  // Jitter in [base/2, base].
  return Math.round(base / 2 + (random() * base) / 2);
}

const defaultSleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });

/**
 * A reconnecting SSE client. It keeps the last durable seq; on every
 * (re)connect it sends Last-Event-ID with it, and it drops any durable event
 * whose seq is not above it. The `ready` event's last_seq sets the resume
 * point when none is known yet (the global stream starts live).
 */
export class EventStream {
  lastSeq: number | undefined;
  attempts = 0;
  state: StreamState = "connecting";
  private ctrl = new AbortController();
  private opts: StreamOptions;
  private running = false;
  private done: Promise<void> | undefined;

  constructor(opts: StreamOptions) {
    this.opts = opts;
    this.lastSeq = opts.since;
  }

  start(): Promise<void> {
    if (!this.running) {
      this.running = true;
      if (this.ctrl.signal.aborted) this.ctrl = new AbortController();
      this.done = this.loop();
    }
    return this.done!;
  }

  close() {
    this.running = false;
    this.ctrl.abort();
    this.setState("closed");
  }

  private setState(s: StreamState) {
    if (this.state === s) return;
    this.state = s;
    this.opts.onState?.(s);
  }

  private async loop() {
    const f = this.opts.fetch ?? fetch.bind(globalThis);
    const sleep = this.opts.sleep ?? defaultSleep;
    const min = this.opts.minDelay ?? 500, max = this.opts.maxDelay ?? 10000;
    const signal = this.ctrl.signal;
    while (this.running && !signal.aborted) {
      let opened = false;
      try {
        const headers: Record<string, string> = { Accept: "text/event-stream", ...(this.opts.headers?.() ?? {}) };
        if (this.lastSeq !== undefined) headers["Last-Event-ID"] = String(this.lastSeq);
        const res = await f(this.opts.url, { headers, signal, cache: "no-store" });
        if (res.status === 401) {
          this.running = false;
          this.setState("unauthorized");
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        const reader = res.body.getReader();
        const dec = new TextDecoder();
        const parser = new SSEParser();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const m of parser.feed(dec.decode(value, { stream: true }))) {
            if (m.event === "ready") {
              opened = true;
              this.attempts = 0;
              this.setState("open");
              if (this.lastSeq === undefined) {
                try { const r = JSON.parse(m.data); if (typeof r.last_seq === "number") this.lastSeq = r.last_seq; } catch { /* ignore */ }
              }
              continue;
            }
            if (m.id === undefined || m.id === "") {
              this.opts.onEphemeral?.(m);
              continue;
            }
            const seq = Number(m.id);
            if (!Number.isFinite(seq)) continue;
            if (this.lastSeq !== undefined && seq <= this.lastSeq) continue; // already applied
            this.lastSeq = seq;
            this.opts.onEvent(m, seq);
          }
        }
      } catch (e) {
        if (signal.aborted) return;
      }
      if (!this.running || signal.aborted) return;
      if (!opened) this.attempts++;
      else this.attempts = 1;
      this.setState("reconnecting");
      await sleep(backoffDelay(this.attempts, min, max, this.opts.random), signal);
    }
  }
}
