// An MCP server built on the official TypeScript SDK whose tools answer
// with huge results, for the tests of the result cap (plugins/mcp): text
// answers {"mib": n} with one text block of n MiB ("BEGIN", then x, then
// "END"); image answers with one PNG image block of n MiB. Over stdio.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "huge", version: "1.0.0" });
const size = (mib) => Math.round(mib * 1024 * 1024);

server.registerTool(
  "text",
  { description: "One text block of mib MiB.", inputSchema: { mib: z.number() }, annotations: { readOnlyHint: true } },
  async ({ mib }) => ({ content: [{ type: "text", text: "BEGIN" + "x".repeat(size(mib) - 8) + "END" }] }),
);

server.registerTool(
  "image",
  { description: "One PNG image block of mib MiB.", inputSchema: { mib: z.number() }, annotations: { readOnlyHint: true } },
  async ({ mib }) => ({ content: [{ type: "image", mimeType: "image/png", data: Buffer.alloc(size(mib), 7).toString("base64") }] }),
);

await server.connect(new StdioServerTransport());
