// Why: drives Manifold's gateway with the real TypeScript SDK v2 client (@modelcontextprotocol/client
// 2.4.0) over Streamable HTTP, in its `auto` negotiation (probes the 2026-07-28 era first) and in
// `legacy`, so tests/clients_through_gateway.rs can check every feature of both eras through one
// gateway. The Rust test owns the scenario and the expected content; this script performs the steps
// and prints what it saw as one JSON line, recording a failed step as {"error": ...} so one broken
// step never hides the others.
//
// usage: node ts_v2_client.mjs PLAN_JSON
// PLAN_JSON: as for py_client.py, plus "modules": the peers' node_modules directory, and "url".
import { pathToFileURL } from "node:url";
import path from "node:path";

const plan = JSON.parse(process.argv[2]);
const { Client, StreamableHTTPClientTransport } = await import(
  pathToFileURL(path.join(plan.modules, "@modelcontextprotocol/client/dist/index.mjs")).href
);

const texts = (blocks) => (blocks ?? []).filter((b) => b.type === "text").map((b) => b.text);
const failure = (e) => ({ error: `${e?.name ?? "Error"}: ${e?.message ?? String(e)}` });
const callReport = (r) => ({
  isError: r.isError ?? false,
  texts: texts(r.content),
  structured: r.structuredContent ?? null,
});

const asked = [];
// Errors the SDK reports outside any call, e.g. progress for a request it no longer knows.
const sessionErrors = [];

const transport = new StreamableHTTPClientTransport(new URL(plan.url));
const client = new Client(
  { name: "manifold-gateway-test-ts-v2", version: "1.0.0" },
  {
    capabilities: { elicitation: {}, sampling: {} },
    versionNegotiation: { mode: plan.mode },
  },
);
client.onerror = (e) => sessionErrors.push(e?.message ?? String(e));
client.setRequestHandler("elicitation/create", async (request) => {
  asked.push({ method: request.method, params: request.params });
  const wanted = request.params.requestedSchema?.properties ?? {};
  const content = {};
  if ("name" in wanted) content.name = plan.answers.name;
  if ("check" in wanted) content.check = true;
  return { action: "accept", content };
});
client.setRequestHandler("sampling/createMessage", async (request) => {
  asked.push({ method: request.method, params: request.params });
  return {
    role: "assistant",
    content: { type: "text", text: plan.answers.sampled },
    model: plan.answers.model,
    stopReason: "endTurn",
  };
});

await client.connect(transport);
const report = { protocol: client.getNegotiatedProtocolVersion() ?? null };
report.tools = (await client.listTools()).tools.map((t) => t.name);
report.resources = (await client.listResources()).resources.map((r) => r.uri);
report.prompts = (await client.listPrompts()).prompts.map((p) => p.name);

report.calls = {};
for (const call of plan.calls ?? []) {
  try {
    report.calls[call.name] = callReport(
      await client.callTool({ name: call.name, arguments: call.arguments }),
    );
  } catch (e) {
    report.calls[call.name] = failure(e);
  }
}

async function withProgress(step) {
  const events = [];
  try {
    const result = await client.callTool(
      { name: step.name, arguments: step.arguments },
      { onprogress: (p) => events.push([p.progress, p.total]) },
    );
    // onprogress runs as each notification arrives; the result resolves after them.
    return { ...callReport(result), events: [...events] };
  } catch (e) {
    return { ...failure(e), events };
  }
}

if (plan.progress) {
  report.progress = await withProgress(plan.progress);
}

if (plan.cancel) {
  const before = [];
  const abort = new AbortController();
  let outcome;
  try {
    const result = await client.callTool(
      { name: plan.cancel.name, arguments: plan.cancel.arguments },
      {
        signal: abort.signal,
        onprogress: (p) => {
          before.push([p.progress, p.total]);
          abort.abort("the gateway test cancels it");
        },
      },
    );
    outcome = { result: texts(result.content) };
  } catch (e) {
    outcome = abort.signal.aborted ? "cancelled" : failure(e);
  }
  const mark = sessionErrors.length;
  // The same operation again, to its end: by then the cancelled one would have finished too.
  const after = await withProgress(plan.cancel);
  report.cancel = { outcome, before, after, stray: sessionErrors.slice(mark) };
}

report.asks = {};
for (const step of plan.asks ?? []) {
  asked.length = 0;
  let result;
  try {
    result = callReport(await client.callTool({ name: step.name, arguments: step.arguments }));
  } catch (e) {
    result = failure(e);
  }
  report.asks[step.name] = { ...result, asked: [...asked] };
}

report.reads = {};
for (const uri of plan.reads ?? []) {
  try {
    const { contents } = await client.readResource({ uri });
    report.reads[uri] = { uris: contents.map((c) => c.uri), texts: contents.map((c) => c.text ?? null) };
  } catch (e) {
    report.reads[uri] = failure(e);
  }
}

report.prompt_results = {};
for (const prompt of plan.prompts ?? []) {
  try {
    const { messages } = await client.getPrompt({ name: prompt.name, arguments: prompt.arguments });
    report.prompt_results[prompt.name] = {
      messages: messages.map((m) => `${m.role}: ${m.content?.text ?? "(not text)"}`),
    };
  } catch (e) {
    report.prompt_results[prompt.name] = failure(e);
  }
}

report.sessionErrors = sessionErrors;
await client.close();
console.log(JSON.stringify(report));
