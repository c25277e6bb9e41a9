// An MCP client built on the official TypeScript SDK, for the tests of
// Kiln as an MCP server (plugins/mcp/kilnserver): it hands Kiln a task over
// Streamable HTTP, approves the call it waits on, and prints what it saw.
// Usage: node kiln-client.mjs URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "kiln-ts-sdk-test", version: "1.0.0" });
await client.connect(transport);

async function call(name, args) {
  const r = await client.callTool({ name, arguments: args });
  const text = r.content.map((c) => c.text ?? "").join("");
  if (r.isError) throw new Error(`${name}: ${text}`);
  return JSON.parse(text);
}

const tools = (await client.listTools()).tools.map((t) => t.name).sort();
const started = await call("start_run", { text: 'tool append_file {"path":"ts.txt","line":"x"}\ntext Done over the TS SDK.' });
const waiting = await call("wait_run", { run_id: started.run_id, timeout_seconds: 10 });
await call("decide", { interrupt_id: waiting.waiting[0].interrupt_id, decision: "approve" });
const done = await call("wait_run", { run_id: started.run_id, timeout_seconds: 10 });
console.log(JSON.stringify({ tools, protocol: transport.protocolVersion ?? "", waiting: waiting.status, done }));
await client.close();
