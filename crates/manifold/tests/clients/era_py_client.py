# Why: drives Manifold's gateway with the real Python SDK client (mcp 2.3.0) in either era, answering every
# question a server can ask mid-call (sampling, form and URL elicitation, roots) with its own handlers, so
# tests/era_fidelity.rs can check that each question reaches the client through the gateway as it would
# directly. The Rust test owns the scenario and the expected content; this script performs the steps and
# reports what it saw, one JSON line on stdout, a failed step recorded as {"error": ...}.
#
# usage: python era_py_client.py PLAN_JSON
# PLAN_JSON: {"url": URL, "mode": "legacy" | "auto", "answers": {"name", "sampled", "model", "root"},
#             "calls": [{"name", "arguments"}], "cancels": [{"name", "arguments"}]}
# Each of "cancels" calls a tool whose question the client never answers, cancels the call once the
# question has arrived, and reports whether the client saw its question withdrawn.
import json
import sys

import anyio
from mcp import Client
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

# How long the cancel step waits for the question, and then for its withdrawal; a hang guard only.
QUESTION_GUARD_SECONDS = 10


def failure(e: BaseException) -> dict:
    return {"error": f"{type(e).__name__}: {e}"}


async def main(plan: dict) -> None:
    answers = plan["answers"]
    asked: list = []
    hold = {"on": False, "arrived": anyio.Event(), "withdrawn": anyio.Event()}

    async def held_question() -> None:
        hold["arrived"].set()
        try:
            await anyio.sleep_forever()
        finally:
            hold["withdrawn"].set()

    async def on_elicit(ctx, params):
        fields = params.model_dump(by_alias=True, exclude_none=True)
        asked.append({"method": "elicitation/create", "mode": fields.get("mode", "form")})
        if hold["on"]:
            await held_question()
        if fields.get("mode") == "url":
            return ElicitResult(action="accept")
        return ElicitResult(action="accept", content={"name": answers["name"]})

    async def on_sample(ctx, params):
        asked.append({"method": "sampling/createMessage"})
        if hold["on"]:
            await held_question()
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=answers["sampled"]),
            model=answers["model"],
            stop_reason="endTurn",
        )

    async def on_roots(ctx):
        asked.append({"method": "roots/list"})
        if hold["on"]:
            await held_question()
        return ListRootsResult(roots=[Root(uri=answers["root"], name="root")])

    report: dict = {"calls": []}
    async with Client(
        plan["url"],
        mode=plan["mode"],
        cache=None,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
    ) as client:
        report["protocolVersion"] = client.protocol_version
        for call in plan["calls"]:
            asked.clear()
            try:
                result = await client.call_tool(call["name"], call["arguments"])
                texts = [b.text for b in result.content if getattr(b, "type", "") == "text"]
                entry = {"isError": bool(result.is_error), "texts": texts}
            except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
                entry = failure(e)
            entry["name"] = call["name"]
            entry["asked"] = list(asked)
            report["calls"].append(entry)
        report["cancels"] = []
        for call in plan.get("cancels", []):
            hold["arrived"], hold["withdrawn"] = anyio.Event(), anyio.Event()
            outcome = await cancel_step(client, call, hold)
            outcome["name"] = call["name"]
            report["cancels"].append(outcome)
    print(json.dumps(report), flush=True)


async def cancel_step(client, call, hold) -> dict:
    hold["on"] = True
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
                    outcome["callEnded"] = failure(e)

            tg.start_soon(run_call)
            await hold["arrived"].wait()
            outcome["questionArrived"] = True
            tg.cancel_scope.cancel()
    with anyio.move_on_after(QUESTION_GUARD_SECONDS):
        await hold["withdrawn"].wait()
        outcome["questionWithdrawn"] = True
    hold["on"] = False
    return outcome


anyio.run(main, json.loads(sys.argv[1]))
