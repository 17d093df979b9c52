// Why: a second session, held by the real TypeScript SDK v1 client (@modelcontextprotocol/sdk 1.32.2,
// legacy era), that must hear `notifications/tools/list_changed` when another session authors a tool,
// see the tool in its next list and call it; tests/authored_tools.rs drives the other session. The
// script prints "ready" once its first list is in, then one JSON report line.
//
// usage: node authored_ts_client.mjs PLAN_JSON
// PLAN_JSON: {"url": URL, "modules": the peers' node_modules, "expect": TOOL, "call": {"arguments"},
//             "guardMs": how long to wait for the change (a hang guard)}
import { pathToFileURL } from "node:url";
import path from "node:path";

const plan = JSON.parse(process.argv[2]);
const sdk = (p) =>
  import(pathToFileURL(path.join(plan.modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ToolListChangedNotificationSchema } = await sdk("types.js");

const transport = new StreamableHTTPClientTransport(new URL(plan.url));
const client = new Client({ name: "manifold-authored-test-ts", version: "1.0.0" }, { capabilities: {} });
let changes = 0;
let changed = () => {};
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  changes += 1;
  changed();
});
await client.connect(transport);
const report = { before: (await client.listTools()).tools.map((t) => t.name) };
console.log("ready");

const deadline = Date.now() + plan.guardMs;
let after = report.before;
while (!after.includes(plan.expect) && Date.now() < deadline) {
  let timer;
  await new Promise((resolve) => {
    changed = resolve;
    timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
  });
  // A pending timer would keep the process alive after the report.
  clearTimeout(timer);
  after = (await client.listTools()).tools.map((t) => t.name);
}
report.after = after;
report.changes = changes;
try {
  const result = await client.callTool({ name: plan.expect, arguments: plan.call.arguments });
  report.call = {
    isError: result.isError ?? false,
    texts: (result.content ?? []).filter((b) => b.type === "text").map((b) => b.text),
    structured: result.structuredContent ?? null,
  };
} catch (e) {
  report.call = { error: `${e?.name ?? "Error"}: ${e?.message ?? String(e)}` };
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(report));
