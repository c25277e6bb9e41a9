// An MCP client built on the official TypeScript SDK, for the tests of
// Kiln as an MCP server (plugins/mcp/kilnserver): it lists the threads as resources
// (every page), reads one, lists the resource templates and the prompts,
// gets a prompt with its task argument, sets the log level to warning and
// waits for the first log notification. It prints "ready" once the level
// is set, then one JSON line with what it saw.
// Usage: node kiln-context-client.mjs URL TOKEN THREAD_ID PROMPT
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, threadID, promptName] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "kiln-ts-sdk-test", version: "1.0.0" });
const logged = new Promise((resolve) => client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => resolve(n.params)));
await client.connect(transport);

const resources = [];
let pages = 0;
let cursor;
do {
  const page = await client.listResources(cursor ? { cursor } : {});
  resources.push(...page.resources);
  cursor = page.nextCursor;
  pages++;
} while (cursor);
const read = await client.readResource({ uri: `kiln://threads/${threadID}` });
let missing = "";
try {
  await client.readResource({ uri: "kiln://threads/thr_missing" });
} catch (e) {
  missing = e.message;
}
const templates = (await client.listResourceTemplates()).resourceTemplates;
const prompts = (await client.listPrompts()).prompts;
const prompt = await client.getPrompt({ name: promptName, arguments: { task: "the release notes" } });

await client.setLoggingLevel("warning");
console.log("ready");
const log = await logged;

console.log(JSON.stringify({
  capabilities: client.getServerCapabilities(),
  resources: resources.length,
  uris: new Set(resources.map((r) => r.uri)).size,
  pages,
  read: read.contents[0],
  missing,
  templates: templates.map((t) => t.uriTemplate),
  prompts,
  prompt,
  log,
}));
await client.close();
