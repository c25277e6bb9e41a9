// The MCP server form's parsing: lines of KEY=VALUE (environment) or
// Name: value (headers), and the POST /mcp-servers body it makes.

/** A server to add: one entry of .mcp.json's mcpServers with its id. */
export interface McpServerInput {
  id: string;
  type?: "http" | "sse";
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  url?: string;
  headers?: Record<string, string>;
  trust?: "all";
  disabled?: boolean;
  /** A tool call's deadline in milliseconds; absent: the server's default. */
  timeout?: number;
}

/** The form's fields, as typed. */
export interface McpForm {
  id: string;
  transport: "stdio" | "http" | "sse";
  command: string;
  args: string;
  env: string;
  cwd: string;
  url: string;
  headers: string;
  trust: boolean;
  disabled: boolean;
  /** A tool call's deadline in seconds, as typed; blank: the default. */
  timeout: string;
}

/**
 * parsePairs reads one KEY<sep>VALUE per line (blank lines skipped): the
 * key is trimmed, and with ":" (headers) the value too. The error names
 * the line: a line without sep or with an empty key, or a key given twice.
 */
export function parsePairs(text: string, sep: "=" | ":", what: string): { pairs?: Record<string, string>; error?: string } {
  const pairs: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].replace(/\r$/, "");
    if (!line.trim()) continue;
    const at = line.indexOf(sep);
    const key = at < 0 ? "" : line.slice(0, at).trim();
    if (!key) return { error: `${what}, line ${i + 1}: want ${sep === "=" ? "KEY=VALUE" : "Name: value"}` };
    if (Object.prototype.hasOwnProperty.call(pairs, key)) return { error: `${what}, line ${i + 1}: ${key} is given twice` };
    const value = line.slice(at + 1);
    pairs[key] = sep === ":" ? value.trim() : value;
  }
  return { pairs };
}

/** serverInput makes the POST /mcp-servers body of the form, or says what is wrong in it. */
export function serverInput(f: McpForm): { input?: McpServerInput; error?: string } {
  const input: McpServerInput = { id: f.id.trim() };
  if (f.transport === "stdio") {
    input.command = f.command.trim();
    const args = f.args.split("\n").map((a) => a.replace(/\r$/, "")).filter((a) => a.trim() !== "");
    if (args.length) input.args = args;
    const env = parsePairs(f.env, "=", "Environment");
    if (env.error) return { error: env.error };
    if (Object.keys(env.pairs!).length) input.env = env.pairs;
    if (f.cwd.trim()) input.cwd = f.cwd.trim();
  } else {
    input.type = f.transport;
    input.url = f.url.trim();
    const headers = parsePairs(f.headers, ":", "Headers");
    if (headers.error) return { error: headers.error };
    if (Object.keys(headers.pairs!).length) input.headers = headers.pairs;
  }
  if (f.trust) input.trust = "all";
  if (f.disabled) input.disabled = true;
  const timeout = f.timeout.trim();
  if (timeout) {
    const ms = /^\d+(\.\d+)?$/.test(timeout) ? Math.round(Number(timeout) * 1000) : NaN;
    if (!(ms >= 1 && ms <= 86_400_000)) return { error: "Call timeout: want seconds, from 0.001 to 86400 (a day), or leave it blank for the default" };
    input.timeout = ms;
  }
  return { input };
}
