# Why: drives a Manifold gateway (several replicas behind a load balancer, in tests/replicas.rs) with the
# real Python SDK client (mcp 2.3.0) in the legacy era, one session whose requests the balancer spreads,
# with an API key; the Rust test owns the scenario and the expectations, this script performs the calls
# and reports what it saw, one JSON line on stdout.
#
# usage: python replica_py_client.py PLAN_JSON
# PLAN_JSON: {"url": URL, "key": API_KEY, "calls": [{"name", "arguments"}], "transport": "sse"?}
# With "transport": "sse" the client speaks the deprecated HTTP+SSE transport (URL is then the /sse
# endpoint); otherwise Streamable HTTP.
# The client declares elicitation, sampling and roots and answers each question the same way: the
# name "Ada", the summary "a short summary", the one root file:///srv/project.
import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent


async def on_elicit(ctx, params):
    return ElicitResult(action="accept", content={"name": "Ada"})


async def on_sample(ctx, params):
    return CreateMessageResult(
        role="assistant",
        content=TextContent(type="text", text="a short summary"),
        model="replica-test-model",
        stop_reason="endTurn",
    )


async def on_roots(ctx):
    return ListRootsResult(roots=[Root(uri="file:///srv/project", name="project")])


async def main(plan: dict) -> None:
    report: dict = {"calls": []}
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {plan['key']}"}, timeout=60)
    if plan.get("transport") == "sse":
        transport = sse_client(plan["url"], headers={"Authorization": f"Bearer {plan['key']}"}, timeout=60)
    else:
        transport = streamable_http_client(plan["url"], http_client=http)
    async with Client(
        transport,
        mode="legacy",
        cache=None,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
    ) as client:
        for call in plan["calls"]:
            entry: dict = {"name": call["name"]}
            try:
                result = await client.call_tool(call["name"], call["arguments"])
                entry["isError"] = bool(result.is_error)
                entry["texts"] = [b.text for b in result.content if getattr(b, "type", "") == "text"]
            except MCPError as e:
                entry["error"] = {"code": e.code, "message": e.message}
            report["calls"].append(entry)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
