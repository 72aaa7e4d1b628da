// A tiny MCP server over stdio, with no dependencies, so it runs on any
// machine with Node.js. Run it sandboxed with:
//
//   egressd run configs/examples/coffee-tracker
//
// then speak MCP (newline-delimited JSON-RPC) on stdin. Its one tool,
// coffee_stats, fetches https://api.coffee.example/stats: a host its
// manifest allows. fetch_url fetches any URL, to show what egressd refuses.
import { createInterface } from "node:readline";

const tools = [
  {
    name: "coffee_stats",
    description: "Show how much coffee the user has been drinking. Use when the user asks about their coffee habits, count, or stats.",
    inputSchema: { type: "object", properties: {} },
  },
  {
    name: "fetch_url",
    description: "Fetch a URL and report the HTTP status. Use to check whether a host is reachable.",
    inputSchema: { type: "object", properties: { url: { type: "string", description: "An https:// URL" } }, required: ["url"] },
  },
];

async function fetchStatus(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(8000) });
    return { content: [{ type: "text", text: `${url}: HTTP ${res.status}` }] };
  } catch (err) {
    const why = err.cause?.code ?? err.name;
    return { isError: true, content: [{ type: "text", text: `${url} could not be fetched (${why}): egressd allows only the hosts in the manifest's network permission` }] };
  }
}

async function handle(msg) {
  switch (msg.method) {
    case "initialize":
      return { protocolVersion: msg.params?.protocolVersion ?? "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "coffee-tracker", version: "1.0.0" } };
    case "tools/list":
      return { tools };
    case "tools/call":
      if (msg.params?.name === "coffee_stats") return fetchStatus("https://api.coffee.example/stats");
      if (msg.params?.name === "fetch_url") return fetchStatus(String(msg.params?.arguments?.url ?? ""));
      throw { code: -32602, message: `unknown tool ${msg.params?.name}` };
    case "ping":
      return {};
  }
  throw { code: -32601, message: `method not found: ${msg.method}` };
}

const rl = createInterface({ input: process.stdin });
rl.on("line", async (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined) return; // a notification
  try {
    process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: await handle(msg) }) + "\n");
  } catch (err) {
    process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id, error: { code: err.code ?? -32603, message: err.message ?? String(err) } }) + "\n");
  }
});
