// Why: drives Manifold's downstream side with the real TypeScript SDK v1 client
// (@modelcontextprotocol/sdk 1.32.2), which speaks only the legacy era: Streamable HTTP with
// sessions, and the deprecated HTTP+SSE transport.
// Usage: node ts_client.mjs PEERS_NODE_MODULES streamable|sse URL MESSAGE
// Prints one JSON line: the session id (Streamable HTTP), the tool names, the echo's text.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [modules, transportKind, url, message] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(path.join(modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { SSEClientTransport } = await sdk("client/sse.js");

const transport = transportKind === "sse"
  ? new SSEClientTransport(new URL(url))
  : new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "manifold-test-ts-v1", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);
const tools = await client.listTools();
const result = await client.callTool({ name: "SERVER__echo", arguments: { message } });
const text = (result.content ?? []).find((c) => c.type === "text")?.text ?? null;
console.log(JSON.stringify({
  sessionId: transportKind === "sse" ? null : transport.sessionId ?? null,
  protocol: client.getServerVersion() ? transport.protocolVersion ?? null : null,
  tools: tools.tools.map((t) => t.name),
  text,
  isError: result.isError ?? false,
}));
if (transportKind !== "sse") {
  await transport.terminateSession();
}
await client.close();
