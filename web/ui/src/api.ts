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
  if (!res.ok) {
    throw new ApiError(res.status, data?.error?.code ?? "error", data?.error?.message ?? `HTTP ${res.status}`);
  }
  return data as T;
}
