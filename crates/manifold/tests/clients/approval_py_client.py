# Why: drives Manifold's gateway with the real Python SDK client (mcp 2.3.0) in either era against tools
# an ask rule holds, answering Manifold's approval question as the plan says, so tests/approvals.rs can
# check every inline outcome, the out-of-band hold and the withdrawal of an open question. The Rust test
# owns the scenario and the expectations; this script performs the steps and reports what it saw, one
# JSON line on stdout.
#
# usage: python approval_py_client.py PLAN_JSON
# PLAN_JSON: {"url": URL, "mode": "legacy" | "auto",
#             "answer": "accept" | "decline" | "cancel" | "hang" | null (no elicitation handler at all),
#             "calls": [{"name", "arguments", "progress": bool}],
#             "cancel": {"name", "arguments"} (optional: cancel this call once its question arrived)}
import json
import sys

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult

# How long the cancel step waits for the question, and then for its withdrawal; a hang guard only.
QUESTION_GUARD_SECONDS = 20


async def main(plan: dict) -> None:
    asked: list = []
    urls: list = []
    hold = {"arrived": anyio.Event(), "withdrawn": anyio.Event()}

    async def on_elicit(ctx, params):
        fields = params.model_dump(by_alias=True, exclude_none=True)
        asked.append(fields.get("message", ""))
        if fields.get("mode") == "url":
            urls.append(fields.get("url", ""))
        if plan["answer"] == "hang":
            hold["arrived"].set()
            try:
                await anyio.sleep_forever()
            finally:
                hold["withdrawn"].set()
        return ElicitResult(action=plan["answer"], content={} if plan["answer"] == "accept" else None)

    kwargs = {}
    if plan["answer"] is not None:
        kwargs["elicitation_callback"] = on_elicit
    report: dict = {"calls": []}
    async with Client(plan["url"], mode=plan["mode"], cache=None, **kwargs) as client:
        report["protocolVersion"] = client.protocol_version
        for call in plan.get("calls", []):
            asked.clear()
            urls.clear()
            progress: list = []

            async def on_progress(value, total, message):
                progress.append(message or "")

            entry: dict = {"name": call["name"]}
            try:
                result = await client.call_tool(
                    call["name"],
                    call["arguments"],
                    progress_callback=on_progress if call.get("progress") else None,
                )
                dumped = result.model_dump(by_alias=True, exclude_none=True)
                entry["isError"] = bool(result.is_error)
                entry["texts"] = [b.text for b in result.content if getattr(b, "type", "") == "text"]
                entry["meta"] = dumped.get("_meta", {})
            except MCPError as e:
                entry["error"] = {"code": e.code, "message": e.message, "data": e.data}
            except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
                entry["error"] = {"message": f"{type(e).__name__}: {e}"}
            entry["asked"] = list(asked)
            entry["urls"] = list(urls)
            entry["progress"] = progress
            report["calls"].append(entry)
        if "cancel" in plan:
            report["cancel"] = await cancel_step(client, plan["cancel"], hold)
    print(json.dumps(report), flush=True)


async def cancel_step(client, call, hold) -> dict:
    outcome: dict = {"questionArrived": False, "questionWithdrawn": False}
    with anyio.move_on_after(QUESTION_GUARD_SECONDS):
        async with anyio.create_task_group() as tg:

            async def run_call() -> None:
                try:
                    await client.call_tool(call["name"], call["arguments"])
                    outcome["callEnded"] = "completed"
                except anyio.get_cancelled_exc_class():
                    outcome["callEnded"] = "cancelled"
                    raise
                except Exception as e:  # noqa: BLE001
                    outcome["callEnded"] = f"{type(e).__name__}: {e}"

            tg.start_soon(run_call)
            await hold["arrived"].wait()
            outcome["questionArrived"] = True
            tg.cancel_scope.cancel()
    with anyio.move_on_after(QUESTION_GUARD_SECONDS):
        await hold["withdrawn"].wait()
        outcome["questionWithdrawn"] = True
    return outcome


anyio.run(main, json.loads(sys.argv[1]))
