// Why: drives Manifold's gateway with the real TypeScript SDK 1.x client (@modelcontextprotocol/sdk,
// legacy era) against tools an ask rule holds, answering Manifold's approval question as the plan says,
// so tests/approvals.rs checks the client most people run and not only the Python one. Same plan and
// report as approval_py_client.py ("mode" is ignored); one JSON line on stdout.
//
// usage: node approval_ts_client.mjs PLAN_JSON   (PLAN_JSON also carries "modules": the peers' node_modules)
import { pathToFileURL } from "node:url";
import path from "node:path";

const plan = JSON.parse(process.argv[2]);
const sdk = (p) =>
  import(pathToFileURL(path.join(plan.modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ElicitRequestSchema } = await sdk("types.js");

let asked = [];
const capabilities = plan.answer === null ? {} : { elicitation: { form: {} } };
const client = new Client({ name: "manifold-approvals-ts", version: "1.0.0" }, { capabilities });
if (plan.answer !== null) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message ?? "");
    return plan.answer === "accept" ? { action: "accept", content: {} } : { action: plan.answer };
  });
}

const transport = new StreamableHTTPClientTransport(new URL(plan.url));
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
