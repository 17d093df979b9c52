# Why: drives Manifold's gateway with the real Python SDK client (mcp 2.3.0) through the life of an
# authored tool (create, list, call, update, history, rollback, disable, delete), so
# tests/authored_tools.rs can check each step as an application sees it. The Rust test owns the
# scenario and the expectations; this script performs the steps and reports what it saw, one JSON line.
#
# usage: python authored_py_client.py PLAN_JSON
# PLAN_JSON: {"url": URL, "mode": "legacy" | "auto",
#             "steps": [{"list": true} | {"call": NAME, "arguments": {...}, "progress": bool}],
#             "answer": "accept" | "decline" (optional: how to answer a question, e.g. an approval)}
import json
import sys

import anyio
from mcp import Client
from mcp_types import ElicitResult


async def main(plan: dict) -> None:
    report: dict = {"steps": [], "asked": []}

    async def on_elicit(ctx, params):
        report["asked"].append(params.model_dump(by_alias=True, exclude_none=True).get("message", ""))
        return ElicitResult(action=plan["answer"], content={} if plan["answer"] == "accept" else None)

    kwargs = {"elicitation_callback": on_elicit} if plan.get("answer") else {}
    async with Client(plan["url"], mode=plan["mode"], cache=None, **kwargs) as client:
        report["protocolVersion"] = client.protocol_version
        for step in plan["steps"]:
            entry: dict = {}
            try:
                if step.get("list"):
                    entry["tools"] = [t.name for t in (await client.list_tools()).tools]
                else:
                    progress: list = []

                    async def on_progress(value, total, message):
                        progress.append(message or "")

                    result = await client.call_tool(
                        step["call"],
                        step.get("arguments", {}),
                        progress_callback=on_progress if step.get("progress") else None,
                    )
                    entry["call"] = step["call"]
                    entry["isError"] = bool(result.is_error)
                    entry["texts"] = [b.text for b in result.content if getattr(b, "type", "") == "text"]
                    entry["structured"] = result.structured_content
                    entry["progress"] = progress
            except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
                entry["error"] = f"{type(e).__name__}: {e}"
            report["steps"].append(entry)
    print(json.dumps(report), flush=True)


anyio.run(main, json.loads(sys.argv[1]))
