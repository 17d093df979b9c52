// Why: drives Manifold's gateway with the real TypeScript SDK v1 client (@modelcontextprotocol/sdk 1.32.2,
// legacy era only) over Streamable HTTP, answering every question a server can ask mid-call (sampling,
// form and URL elicitation, roots), so tests/era_fidelity.rs checks the legacy client most people run
// and not only the Python one. Same plan and report as era_py_client.py (the "mode" is ignored: this
// client speaks only the legacy era); one JSON line on stdout.
//
// usage: node era_ts_v1_client.mjs PLAN_JSON   (PLAN_JSON also carries "modules": the peers' node_modules)
import { pathToFileURL } from "node:url";
import path from "node:path";

// How long a cancel step waits for its question, then for its withdrawal; a hang guard only.
const QUESTION_GUARD_MS = 10_000;

const plan = JSON.parse(process.argv[2]);
const sdk = (p) =>
  import(pathToFileURL(path.join(plan.modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ElicitRequestSchema, CreateMessageRequestSchema, ListRootsRequestSchema } = await sdk("types.js");

let asked = [];
// While a cancel step runs, questions are held open until withdrawn.
let hold = null;

function heldOpen(signal) {
  hold.arrived();
  return new Promise((_, reject) =>
    signal.addEventListener("abort", () => {
      hold.withdrawn();
      reject(new Error("withdrawn"));
    }),
  );
}

const client = new Client(
  { name: "manifold-era-fidelity-ts-v1", version: "1.0.0" },
  { capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
  const mode = request.params.mode ?? "form";
  asked.push({ method: request.method, mode });
  if (hold) return heldOpen(extra.signal);
  return mode === "url" ? { action: "accept" } : { action: "accept", content: { name: plan.answers.name } };
});
client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => {
  asked.push({ method: request.method });
  if (hold) return heldOpen(extra.signal);
  return {
    role: "assistant",
    content: { type: "text", text: plan.answers.sampled },
    model: plan.answers.model,
    stopReason: "endTurn",
  };
});
client.setRequestHandler(ListRootsRequestSchema, async (request, extra) => {
  asked.push({ method: request.method });
  if (hold) return heldOpen(extra.signal);
  return { roots: [{ uri: plan.answers.root, name: "root" }] };
});

const failure = (e) => ({ error: `${e?.name ?? "Error"}: ${e?.message ?? String(e)}` });
const transport = new StreamableHTTPClientTransport(new URL(plan.url));
await client.connect(transport);
const report = { protocolVersion: transport.protocolVersion ?? null, calls: [], cancels: [] };
for (const call of plan.calls) {
  asked = [];
  let entry;
  try {
    const r = await client.callTool({ name: call.name, arguments: call.arguments });
    entry = { isError: r.isError ?? false, texts: (r.content ?? []).filter((b) => b.type === "text").map((b) => b.text) };
  } catch (e) {
    entry = failure(e);
  }
  report.calls.push({ ...entry, name: call.name, asked });
}

const within = (promise) =>
  Promise.race([promise.then(() => true), new Promise((ok) => setTimeout(() => ok(false), QUESTION_GUARD_MS))]);
for (const call of plan.cancels ?? []) {
  let arrived, withdrawn;
  const arrival = new Promise((ok) => (arrived = ok));
  const withdrawal = new Promise((ok) => (withdrawn = ok));
  hold = { arrived, withdrawn };
  const abort = new AbortController();
  const outcome = { name: call.name, questionArrived: false, questionWithdrawn: false };
  const ended = client
    .callTool({ name: call.name, arguments: call.arguments }, undefined, { signal: abort.signal })
    .then(
      () => (outcome.callEnded = "completed"),
      (e) => (outcome.callEnded = abort.signal.aborted ? "cancelled" : failure(e)),
    );
  outcome.questionArrived = await within(arrival);
  abort.abort("the test cancels the call");
  await ended;
  outcome.questionWithdrawn = await within(withdrawal);
  hold = null;
  report.cancels.push(outcome);
}
await client.close();
console.log(JSON.stringify(report));
process.exit(0);
