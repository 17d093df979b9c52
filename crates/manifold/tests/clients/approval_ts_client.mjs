// Why: drives Manifold's gateway with the real TypeScript SDK clients against tools an ask rule holds,
// answering Manifold's approval question as the plan says, so tests/approvals.rs checks the clients most
// people run and not only the Python one: "sdk": "v1" is @modelcontextprotocol/sdk 1.x (legacy era
// only), "v2" is @modelcontextprotocol/client 2.x in the plan's "mode" (auto probes the 2026-07-28 era
// first). Same plan and report as approval_py_client.py; one JSON line on stdout.
//
// usage: node approval_ts_client.mjs PLAN_JSON   (PLAN_JSON also carries "modules": the peers' node_modules)
import { pathToFileURL } from "node:url";
import path from "node:path";

const plan = JSON.parse(process.argv[2]);
const load = (p) => import(pathToFileURL(path.join(plan.modules, p)).href);

let asked = [];
const answer = async (request) => {
  asked.push(request.params.message ?? "");
  return plan.answer === "accept" ? { action: "accept", content: {} } : { action: plan.answer };
};
const capabilities = plan.answer === null ? {} : { elicitation: { form: {} } };
const info = { name: "manifold-approvals-ts", version: "1.0.0" };
let client, transport;
if (plan.sdk === "v2") {
  const { Client, StreamableHTTPClientTransport } = await load("@modelcontextprotocol/client/dist/index.mjs");
  client = new Client(info, { capabilities, versionNegotiation: { mode: plan.mode } });
  if (plan.answer !== null) client.setRequestHandler("elicitation/create", answer);
  transport = new StreamableHTTPClientTransport(new URL(plan.url));
} else {
  const sdk = (p) => load(path.join("@modelcontextprotocol/sdk/dist/esm", p));
  const { Client } = await sdk("client/index.js");
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  const { ElicitRequestSchema } = await sdk("types.js");
  client = new Client(info, { capabilities });
  if (plan.answer !== null) client.setRequestHandler(ElicitRequestSchema, answer);
  transport = new StreamableHTTPClientTransport(new URL(plan.url));
}

await client.connect(transport);
const report = { calls: [] };
for (const call of plan.calls) {
  asked = [];
  const entry = { name: call.name };
  try {
    const r = await client.callTool({ name: call.name, arguments: call.arguments });
    entry.isError = r.isError ?? false;
    entry.texts = (r.content ?? []).filter((b) => b.type === "text").map((b) => b.text);
    entry.meta = r._meta ?? {};
  } catch (e) {
    entry.error = { code: e?.code ?? null, message: e?.message ?? String(e), data: e?.data ?? null };
  }
  entry.asked = asked;
  report.calls.push(entry);
}
await client.close();
console.log(JSON.stringify(report));
process.exit(0);
