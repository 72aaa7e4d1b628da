// A real stdio MCP server on the official SDK. Its tool fetches a URL with
// Node's fetch, which ignores proxy variables: egressd run enforces the
// manifest anyway.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "egressd-test", version: "1.0.0" });
server.registerTool(
  "fetch_url",
  { description: "Fetch a URL and return its body.", inputSchema: { url: z.string() } },
  async ({ url }) => {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(8000) });
      return { content: [{ type: "text", text: await res.text() }] };
    } catch (err) {
      return { isError: true, content: [{ type: "text", text: `fetch failed: ${err.cause?.code ?? err.name}` }] };
    }
  },
);
await server.connect(new StdioServerTransport());
