// A hand-written MCP server over stdio (no SDK) that misbehaves on
// request, for the bridge's tests. Its tools:
//   reply {line}        answers the call with line as it is, "$ID" replaced
//                       by the request's id (JSON): a malformed answer
//   hang {}             answers nothing, not even pings, from now on
//   slow {ms}           answers after ms milliseconds, unless cancelled
//   cancelled {}        the ids of the requests notifications/cancelled named
//   progress {steps}    sends steps progress notifications ("step i of n"),
//                       one for a token no request has, then answers
// Every tool is annotated read-only, so that none is held for approval.
const readline = require("node:readline");

let wedged = false;
const timers = new Map();
const cancelled = [];

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\n");
}

function answer(id, result) {
  send({ jsonrpc: "2.0", id, result });
}

function text(id, s) {
  answer(id, { content: [{ type: "text", text: s }] });
}

const tools = ["reply", "hang", "slow", "cancelled", "progress"].map((name) => ({
  name,
  description: `the ${name} tool`,
  inputSchema: { type: "object" },
  annotations: { readOnlyHint: true },
}));

function call(id, params) {
  const args = params.arguments ?? {};
  switch (params.name) {
    case "reply":
      process.stdout.write(args.line.replaceAll("$ID", JSON.stringify(id)) + "\n");
      return;
    case "hang":
      wedged = true;
      return;
    case "slow":
      timers.set(JSON.stringify(id), setTimeout(() => text(id, "done"), args.ms));
      return;
    case "cancelled":
      return text(id, JSON.stringify(cancelled));
    case "progress": {
      const token = params._meta?.progressToken;
      const n = args.steps ?? 3;
      send({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "not-a-token", progress: 1 } });
      for (let i = 1; i <= n; i++) {
        send({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: token, progress: i, total: n, message: `step ${i} of ${n}` } });
      }
      return text(id, "progressed");
    }
  }
  send({ jsonrpc: "2.0", id, error: { code: -32602, message: `unknown tool ${params.name}` } });
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (wedged || !line.trim()) return;
  const msg = JSON.parse(line);
  switch (msg.method) {
    case "initialize":
      return answer(msg.id, {
        protocolVersion: msg.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: "misbehaving", version: "1.0.0" },
      });
    case "ping":
      return answer(msg.id, {});
    case "tools/list":
      return answer(msg.id, { tools });
    case "tools/call":
      return call(msg.id, msg.params);
    case "notifications/cancelled": {
      const key = JSON.stringify(msg.params.requestId);
      clearTimeout(timers.get(key));
      timers.delete(key);
      cancelled.push(msg.params.requestId);
      return;
    }
  }
  if (msg.id !== undefined) {
    send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `method not found: ${msg.method}` } });
  }
});
