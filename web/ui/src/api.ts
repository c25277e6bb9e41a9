// HTTP client for /api/v1 with the optional bearer token (sessionStorage).
const TOKEN_KEY = "kiln.token";
export const API = "/api/v1";

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) { super(message); }
}

let onUnauthorized: () => void = () => {};
export function setUnauthorizedHandler(f: () => void) { onUnauthorized = f; }

export function getToken(): string {
  try { return sessionStorage.getItem(TOKEN_KEY) ?? ""; } catch { return ""; }
}
export function setToken(t: string) {
  try { sessionStorage.setItem(TOKEN_KEY, t); } catch { /* private mode */ }
}
export function authHeaders(): Record<string, string> {
  const t = getToken();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json", ...authHeaders() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(API + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, "network", "The server cannot be reached.");
  }
  if (res.status === 401) {
    onUnauthorized();
    throw new ApiError(401, "unauthorized", "A token is needed.");
  }
  if (res.status === 204) return undefined as T;
  let data: any;
  try { data = await res.json(); } catch { data = undefined; }
  if (!res.ok) throw answerError(res.status, data);
  return data as T;
}

/** The error of a failed answer: the server's code and message, or the status. */
function answerError(status: number, data: any): ApiError {
  return new ApiError(status, data?.error?.code ?? "error", data?.error?.message ?? `HTTP ${status}`);
}

/** GET of a raw body (a virtual file's content) as text. */
export async function apiText(path: string): Promise<string> {
  let res: Response;
  try { res = await fetch(API + path, { headers: authHeaders(), cache: "no-store" }); }
  catch { throw new ApiError(0, "network", "The server cannot be reached."); }
  if (res.status === 401) { onUnauthorized(); throw new ApiError(401, "unauthorized", "A token is needed."); }
  if (!res.ok) { let data: any; try { data = await res.json(); } catch { /* not JSON */ } throw answerError(res.status, data); }
  return res.text();
}

/** GET of a URL's bytes with the token, for what an <img> or a link cannot authorize. */
export async function fetchBlob(url: string): Promise<Blob> {
  let res: Response;
  try { res = await fetch(url, { headers: authHeaders() }); }
  catch { throw new ApiError(0, "network", "The server cannot be reached."); }
  if (res.status === 401) { onUnauthorized(); throw new ApiError(401, "unauthorized", "A token is needed."); }
  if (!res.ok) throw new ApiError(res.status, "error", `HTTP ${res.status}`);
  return res.blob();
}

export interface Upload<T> { promise: Promise<T>; abort(): void }

/**
 * POSTs a file as multipart/form-data (one part, `field`) with
 * XMLHttpRequest, which reports upload progress (fetch does not):
 * onProgress gets the fraction sent, 0 to 1. The promise rejects with an
 * ApiError: the server's message for a refusal (413, 415), status 0 for a
 * lost connection, code "aborted" after abort().
 */
export function uploadFile<T = any>(path: string, file: File, onProgress: (f: number) => void, field = "file"): Upload<T> {
  const xhr = new XMLHttpRequest();
  const promise = new Promise<T>((resolve, reject) => {
    xhr.open("POST", API + path);
    xhr.setRequestHeader("Accept", "application/json");
    for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
    xhr.responseType = "text";
    xhr.upload.onprogress = (e) => { if (e.lengthComputable && e.total > 0) onProgress(Math.min(1, e.loaded / e.total)); };
    xhr.onload = () => {
      let data: any;
      try { data = xhr.responseText ? JSON.parse(xhr.responseText) : undefined; } catch { data = undefined; }
      if (xhr.status === 401) { onUnauthorized(); reject(new ApiError(401, "unauthorized", "A token is needed.")); return; }
      if (xhr.status < 200 || xhr.status >= 300) { reject(answerError(xhr.status, data)); return; }
      onProgress(1);
      resolve(data as T);
    };
    // A refused upload may end with the connection closed before the answer is read.
    xhr.onerror = () => reject(new ApiError(0, "network", "The upload was cut off: the server cannot be reached, or it refused the file (too large?)."));
    xhr.onabort = () => reject(new ApiError(0, "aborted", "The upload was cancelled."));
    const form = new FormData();
    form.append(field, file, file.name);
    xhr.send(form);
  });
  return { promise, abort: () => xhr.abort() };
}

/** The prefix of OpenSandbox's lifecycle API (sandbox/api), beside /api/v1. */
export const SANDBOX_API = "/v1";

/**
 * A call to the sandbox API with the same token as the rest (it takes a
 * bearer token too). Its errors are {"code", "message"} at the top level;
 * a failure throws an ApiError with them.
 */
export async function sandboxApi<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json", ...authHeaders() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(SANDBOX_API + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  } catch {
    throw new ApiError(0, "network", "The server cannot be reached.");
  }
  if (res.status === 401) { onUnauthorized(); throw new ApiError(401, "unauthorized", "A token is needed."); }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: any;
  try { data = text ? JSON.parse(text) : undefined; } catch { data = undefined; }
  if (!res.ok) throw sandboxError(res.status, data);
  return data as T;
}

/** The error of a failed sandbox API answer ({"code","message"}), or the status. */
export function sandboxError(status: number, data: any): ApiError {
  return new ApiError(status, typeof data?.code === "string" ? data.code : "error", typeof data?.message === "string" && data.message ? data.message : `HTTP ${status}`);
}

/**
 * POST of a JSON body whose answer is read as a stream: the Response of a
 * 2xx answer, for the caller to read. A refusal before the stream starts
 * throws an ApiError with the server's code and message; abort (signal)
 * throws code "aborted".
 */
export async function apiStream(path: string, body: unknown, accept: string, signal?: AbortSignal): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(API + path, { method: "POST", headers: { Accept: accept, "Content-Type": "application/json", ...authHeaders() }, body: JSON.stringify(body), cache: "no-store", signal });
  } catch (e) {
    if (signal?.aborted) throw new ApiError(0, "aborted", "Cancelled.");
    throw new ApiError(0, "network", "The server cannot be reached.");
  }
  if (res.status === 401) { onUnauthorized(); throw new ApiError(401, "unauthorized", "A token is needed."); }
  if (!res.ok) { let data: any; try { data = await res.json(); } catch { /* not JSON */ } throw answerError(res.status, data); }
  return res;
}
