// Attachments in the composers: files dropped on a composer, pasted into
// it or picked with its button are uploaded at once (XMLHttpRequest, for
// the upload's progress) and shown as chips: a thumbnail for an image, the
// name and size otherwise, a progress bar while uploading, the server's
// message when it refuses one (413, 415). Sending waits for the uploads
// and passes the attachments' IDs. And the working folder select, and how
// a sent message shows its attachments.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, API, ApiError, fetchBlob, getToken, uploadFile } from "../api";
import { store } from "../state/app";
import { useStore } from "../state/store";
import type { Attachment, Part } from "../types";
import { extLabel, formatBytes, MAX_ATTACHMENTS, partURL, typeLabel } from "../workspace";

export interface Chip {
  key: string; name: string; size: number; type: string;
  /** An object URL of the file, for an image's thumbnail. */
  preview?: string;
  status: "uploading" | "done" | "error";
  /** The fraction uploaded, 0 to 1. */
  progress: number;
  error?: string;
  attachment?: Attachment;
}

/** Uploads the composer's attachments and keeps their chips. */
export function useAttachments() {
  const [chips, setChips] = useState<Chip[]>([]);
  const live = useRef(new Map<string, { promise: Promise<Attachment | undefined>; abort: () => void; preview?: string }>());
  const seq = useRef(0);
  // Chips added since the last render count against the limit too.
  const current = useRef(chips);
  current.current = chips;
  const patch = (key: string, p: Partial<Chip>) => setChips((cs) => cs.map((c) => (c.key === key ? { ...c, ...p } : c)));

  function add(files: File[]) {
    const room = MAX_ATTACHMENTS - current.current.filter((c) => c.status !== "error").length;
    const next: Chip[] = [];
    files.forEach((f, i) => {
      const key = `a${++seq.current}`;
      const name = f.name || "pasted file";
      if (i >= room) {
        next.push({ key, name, size: f.size, type: f.type, status: "error", progress: 0, error: `Not attached: a message carries at most ${MAX_ATTACHMENTS} files.` });
        return;
      }
      const preview = f.type.startsWith("image/") ? URL.createObjectURL(f) : undefined;
      const up = uploadFile<Attachment>("/attachments", f, (x) => patch(key, { progress: x }));
      const promise = up.promise.then(
        (a) => { patch(key, { status: "done", progress: 1, attachment: a }); return a; },
        (e: unknown) => {
          if (!(e instanceof ApiError && e.code === "aborted")) patch(key, { status: "error", error: uploadError(e, name) });
          return undefined;
        });
      live.current.set(key, { promise, abort: up.abort, preview });
      next.push({ key, name, size: f.size, type: f.type, preview, status: "uploading", progress: 0 });
    });
    current.current = [...current.current, ...next];
    setChips((cs) => [...cs, ...next]);
  }

  function forget(key: string) {
    const l = live.current.get(key);
    if (l?.preview) URL.revokeObjectURL(l.preview);
    live.current.delete(key);
  }


  /** Removes a chip: cancels its upload, or deletes the uploaded attachment (best effort: an unsent one is only clutter). */
  function remove(key: string) {
    const c = current.current.find((x) => x.key === key);
    live.current.get(key)?.abort();
    if (c?.attachment) api("DELETE", `/attachments/${encodeURIComponent(c.attachment.id)}`).catch(() => { /* gone already */ });
    forget(key);
    current.current = current.current.filter((x) => x.key !== key);
    setChips((cs) => cs.filter((x) => x.key !== key));
  }

  /** Empties the composer: after sending (the thread has the attachments now), or discarding them (deleted). */
  function clear(discard: boolean) {
    for (const c of current.current) {
      if (discard) {
        live.current.get(c.key)?.abort();
        if (c.attachment) api("DELETE", `/attachments/${encodeURIComponent(c.attachment.id)}`).catch(() => { /* gone already */ });
      }
      forget(c.key);
    }
    current.current = [];
    setChips([]);
  }

  /**
   * Waits for the uploads; resolves with the attachments' IDs in order, or
   * rejects when one failed (its chip says why: the user removes it first).
   */
  async function ready(): Promise<string[]> {
    const list = current.current;
    if (list.some((c) => c.status === "error")) throw new Error("An attachment was not uploaded: remove it (✕) before sending.");
    const got = await Promise.all(list.map((c) => c.attachment ?? live.current.get(c.key)?.promise));
    if (got.some((a) => !a)) throw new Error("An attachment could not be uploaded: remove it (✕) before sending.");
    return got.map((a) => a!.id);
  }

  // Unmounting (leaving the page) frees the thumbnails.
  useEffect(() => () => { for (const l of live.current.values()) if (l.preview) URL.revokeObjectURL(l.preview); }, []);

  return { chips, add, remove, clear, ready, uploading: chips.some((c) => c.status === "uploading") };
}
export type Attachments = ReturnType<typeof useAttachments>;

function uploadError(e: unknown, name: string): string {
  if (e instanceof ApiError && (e.status === 413 || e.status === 415)) return e.message;
  return `${name} was not attached: ${(e as Error).message}`;
}

/**
 * The drop target and paste handler of a composer: files dropped on it or
 * pasted into its text are attached; other drags (a thread onto a folder)
 * are left alone. over is true while files are dragged over it.
 */
export function useFileDrop(att: Attachments) {
  const [over, setOver] = useState(false);
  const depth = useRef(0);
  const hasFiles = (e: DragEvent) => !!e.dataTransfer && [...e.dataTransfer.types].includes("Files");
  const props = {
    onDragEnter: (e: DragEvent) => { if (!hasFiles(e)) return; e.preventDefault(); depth.current++; setOver(true); },
    onDragOver: (e: DragEvent) => { if (!hasFiles(e)) return; e.preventDefault(); e.dataTransfer!.dropEffect = "copy"; },
    onDragLeave: (e: DragEvent) => { if (!hasFiles(e)) return; depth.current = Math.max(0, depth.current - 1); if (!depth.current) setOver(false); },
    onDrop: (e: DragEvent) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      depth.current = 0; setOver(false);
      const files = [...(e.dataTransfer?.files ?? [])];
      if (files.length) att.add(files);
    },
  };
  function onPaste(e: ClipboardEvent) {
    const files = [...(e.clipboardData?.files ?? [])];
    if (!files.length) return;
    att.add(files);
    // A copied image comes with no text; text copied with a file stays text.
    if (!e.clipboardData?.getData("text/plain")) e.preventDefault();
  }
  return { over, props, onPaste };
}

/** The composer's "Attach" button and its hidden file input. */
export function AttachButton({ att, id }: { att: Attachments; id: string }) {
  const input = useRef<HTMLInputElement>(null);
  return (
    <>
      <input id={id} ref={input} type="file" multiple hidden data-testid="attach-input"
        onChange={(e) => { const el = e.target as HTMLInputElement; att.add([...(el.files ?? [])]); el.value = ""; }} />
      <button type="button" class="attach" data-testid="attach" title="Attach images or text files (or drop or paste them here)"
        onClick={() => input.current?.click()}>Attach<span class="sr-only"> files</span></button>
    </>
  );
}

/** The chips of the composer's attachments. */
export function AttachmentChips({ att }: { att: Attachments }) {
  if (!att.chips.length) return null;
  return (
    <ul class="chips" aria-label="Attachments" data-testid="attachment-chips">
      {att.chips.map((c) => (
        <li key={c.key} class={`chip ${c.status}`} data-testid="attachment-chip" data-status={c.status} data-name={c.name}>
          {c.preview && c.status !== "error" ? <img class="chip-thumb" src={c.preview} alt="" /> : <span class="chip-icon" aria-hidden="true">{c.status === "error" ? "!" : extLabel(c.name)}</span>}
          <span class="chip-text">
            <span class="chip-name">{c.name}</span>
            {c.status === "error"
              ? <span class="chip-error" role="alert" data-testid="attachment-error">{c.error}</span>
              : <span class="chip-size">{formatBytes(c.size)}{c.status === "uploading" ? " · uploading…" : ""}</span>}
            {c.status === "uploading" && <progress class="chip-progress" max={1} value={c.progress} aria-label={`Uploading ${c.name}`} />}
          </span>
          <button type="button" class="icon sm" data-testid="attachment-remove" aria-label={`Remove ${c.name}`} onClick={() => att.remove(c.key)}>✕</button>
        </li>
      ))}
    </ul>
  );
}

/**
 * The working folder of the next message's run: one of the folder grants,
 * or none. Hidden while there are no grants (Settings > Files adds them).
 */
export function FolderPicker({ id, value, onChange }: { id: string; value: string; onChange: (v: string) => void }) {
  const s = useStore(store);
  const grants = s.grants ?? [];
  if (!grants.length) return null;
  const known = !value || grants.some((g) => g.id === value);
  return (
    <>
      <label class="sr-only" for={id}>Working folder</label>
      <select id={id} data-testid="working-folder" value={value} title="The granted folder the run works in"
        onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
        <option value="">No working folder</option>
        {!known && <option value={value}>A folder no longer granted</option>}
        {grants.map((g) => <option key={g.id} value={g.id}>Folder: {g.name}{g.writable ? "" : " (read-only)"}</option>)}
      </select>
    </>
  );
}

/**
 * The URL an <img> or a link can load: the URL itself, or with a token
 * (which an <img> cannot send) an object URL of the bytes fetched with it.
 */
function useAuthedURL(url: string): string {
  const [obj, setObj] = useState("");
  const token = getToken();
  useEffect(() => {
    if (!token || !url || url.startsWith("data:")) return;
    let gone = false, made = "";
    fetchBlob(url).then((b) => { if (gone) return; made = URL.createObjectURL(b); setObj(made); }).catch(() => { /* the alt text shows */ });
    return () => { gone = true; if (made) URL.revokeObjectURL(made); };
  }, [url, token]);
  return token && !url.startsWith("data:") ? obj : url;
}

function PartImage({ p, url }: { p: Part; url: string }) {
  const src = useAuthedURL(url);
  const name = p.name || "image";
  return (
    <a class="part-image" href={src || undefined} target="_blank" rel="noopener" data-testid="message-attachment" data-type="image" data-name={p.name}>
      {src ? <img src={src} alt={name} loading="lazy" /> : <span class="muted small">{name}</span>}
    </a>
  );
}

function PartFile({ p, url }: { p: Part; url: string }) {
  const name = p.name || "file";
  async function open(e: MouseEvent) {
    if (!getToken()) return; // the link works as it is
    e.preventDefault();
    try {
      const u = URL.createObjectURL(await fetchBlob(url));
      const a = document.createElement("a");
      a.href = u; a.download = name;
      a.click();
      setTimeout(() => URL.revokeObjectURL(u), 1000);
    } catch { /* the server said why in its log; nothing to show but the link */ }
  }
  return (
    <a class="file-chip" href={url} download={name} onClick={open} data-testid="message-attachment" data-type="file" data-name={p.name}>
      <span class="ext" aria-hidden="true">{extLabel(name)}</span> <span class="chip-name">{name}</span> <span class="muted small">{typeLabel(p.mime_type)}</span>
    </a>
  );
}

/** A sent message's images (thumbnails, opening the full image) and files (chips that download them). */
export function MessageParts({ parts }: { parts: Part[] }) {
  if (!parts.length) return null;
  return (
    <div class="parts" data-testid="message-parts">
      {parts.map((p, i) => {
        const url = partURL(API, p);
        if (!url) return <span key={i} class="file-chip muted">{p.name || p.type}</span>;
        return p.type === "image" ? <PartImage key={i} p={p} url={url} /> : <PartFile key={i} p={p} url={url} />;
      })}
    </div>
  );
}
