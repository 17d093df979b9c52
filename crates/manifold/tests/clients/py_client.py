# Why: drives Manifold's gateway with the real Python SDK client (mcp 2.3.0), the way an application
# would, so tests/clients_through_gateway.rs can check every feature a client uses through one
# gateway that fronts many real servers. The Rust test owns the scenario and the expected content;
# this script only performs the steps and reports what it saw, one JSON line on stdout, recording a
# failed step as {"error": ...} so one broken step never hides the others.
#
# usage: python py_client.py PLAN_JSON
# PLAN_JSON: {"target": {"url": URL} | {"command": C, "args": [...], "cwd": DIR}, "mode": M,
#             "answers": {"name", "sampled", "model"}, "calls": [{"name", "arguments"}],
#             "progress": {"name", "arguments"}, "cancel": {"name", "arguments"},
#             "asks": [{"name", "arguments"}], "reads": [URI], "prompts": [{"name", "arguments"}]}
import json
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CreateMessageResult, ElicitResult, ProgressNotification, TextContent


def content_texts(blocks) -> list:
    return [b.text for b in blocks if getattr(b, "type", "") == "text"]


def failure(e: BaseException) -> dict:
    return {"error": f"{type(e).__name__}: {e}"}


def call_report(result) -> dict:
    return {
        "isError": bool(result.is_error),
        "texts": content_texts(result.content),
        "structured": result.structured_content,
    }


async def main(plan: dict) -> None:
    answers = plan["answers"]
    asked: list = []
    # Every progress notification that reached the session, in arrival order: (token, progress).
    progress_seen: list = []

    async def on_elicit(ctx, params):
        asked.append({"method": "elicitation/create", "params": params.model_dump(by_alias=True, exclude_none=True)})
        wanted = params.requested_schema.get("properties", {}) if hasattr(params, "requested_schema") else {}
        content = {}
        if "name" in wanted:
            content["name"] = answers["name"]
        if "check" in wanted:
            content["check"] = True
        return ElicitResult(action="accept", content=content)

    async def on_sample(ctx, params):
        asked.append({"method": "sampling/createMessage", "params": params.model_dump(by_alias=True, exclude_none=True)})
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=answers["sampled"]),
            model=answers["model"],
            stop_reason="endTurn",
        )

    async def on_message(message) -> None:
        if isinstance(message, ProgressNotification):
            progress_seen.append([message.params.progress_token, message.params.progress])

    target = plan["target"]
    if "url" in target:
        server = target["url"]
    else:
        server = StdioServerParameters(command=target["command"], args=target["args"], cwd=target.get("cwd"))

    report: dict = {}
    async with Client(
        server,
        mode=plan["mode"],
        cache=None,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        message_handler=on_message,
    ) as client:
        report["protocol"] = client.protocol_version
        report["tools"] = [t.name for t in (await client.list_tools()).tools]
        report["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
        report["prompts"] = [p.name for p in (await client.list_prompts()).prompts]

        report["calls"] = {}
        for call in plan.get("calls", []):
            try:
                report["calls"][call["name"]] = call_report(await client.call_tool(call["name"], call["arguments"]))
            except Exception as e:  # noqa: BLE001 - reported, the Rust test judges it
                report["calls"][call["name"]] = failure(e)

        async def with_progress(step: dict) -> dict:
            events: list = []

            async def on_progress(progress, total, message):
                events.append([progress, total])

            try:
                result = await client.call_tool(step["name"], step["arguments"], progress_callback=on_progress)
            except Exception as e:  # noqa: BLE001
                return {**failure(e), "events": events}
            # Progress callbacks run before call_tool returns: these arrived before the result.
            return {**call_report(result), "events": list(events)}

        if "progress" in plan:
            report["progress"] = await with_progress(plan["progress"])

        if "cancel" in plan:
            step = plan["cancel"]
            before: list = []
            first = anyio.Event()

            async def on_first(progress, total, message):
                before.append([progress, total])
                first.set()

            outcome = "no outcome"
            seen_before = len(progress_seen)
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:

                    async def cancel_at_first_progress():
                        await first.wait()
                        scope.cancel()

                    group.start_soon(cancel_at_first_progress)
                    try:
                        result = await client.call_tool(step["name"], step["arguments"], progress_callback=on_first)
                        outcome = {"result": content_texts(result.content)}
                    except Exception as e:  # noqa: BLE001
                        outcome = failure(e)
            if scope.cancelled_caught:
                outcome = "cancelled"
            cancelled_tokens = {token for token, _ in progress_seen[seen_before:]}
            mark = len(progress_seen)
            # The same operation again, to its end: by then the cancelled one would have finished too.
            after = await with_progress(step)
            stray = [p for token, p in progress_seen[mark:] if token in cancelled_tokens]
            report["cancel"] = {"outcome": outcome, "before": before, "after": after, "stray": stray}

        report["asks"] = {}
        for step in plan.get("asks", []):
            asked.clear()
            try:
                result = call_report(await client.call_tool(step["name"], step["arguments"]))
            except Exception as e:  # noqa: BLE001
                result = failure(e)
            report["asks"][step["name"]] = {**result, "asked": list(asked)}

        report["reads"] = {}
        for uri in plan.get("reads", []):
            try:
                contents = (await client.read_resource(uri)).contents
                report["reads"][uri] = {
                    "uris": [str(c.uri) for c in contents],
                    "texts": [getattr(c, "text", None) for c in contents],
                }
            except Exception as e:  # noqa: BLE001
                report["reads"][uri] = failure(e)

        report["prompt_results"] = {}
        for prompt in plan.get("prompts", []):
            try:
                messages = (await client.get_prompt(prompt["name"], prompt["arguments"])).messages
                report["prompt_results"][prompt["name"]] = {
                    "messages": [f"{m.role}: {getattr(m.content, 'text', '(not text)')}" for m in messages]
                }
            except Exception as e:  # noqa: BLE001
                report["prompt_results"][prompt["name"]] = failure(e)

    print(json.dumps(report), flush=True)


anyio.run(main, json.loads(sys.argv[1]))
