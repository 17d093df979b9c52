# Why: proves that manifold-test-peer's well-behaved mode satisfies a real client (the Python SDK
# 2.3.0 `mcp.Client`), in both eras and over stdio, Streamable HTTP and HTTP+SSE, so the peer's idea
# of "correct" is not just our own reading of the spec.
#
# usage: tests/peers/.venv/bin/python crates/test-peer/scripts/check_with_python_sdk.py PEER_BINARY
# Prints one line per check and "N passed, M failed"; exits 1 on any failure.

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

PEER = sys.argv[1] if len(sys.argv) > 1 else "target/debug/manifold-test-peer"
results: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    results.append((name, ok, detail))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f"  -- {detail}"), flush=True)


async def on_elicit(_context, params):
    return ElicitResult(action="accept", content={"answer": "forty-two"})


async def on_sample(_context, params):
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="sampled text"), model="fake")


async def on_roots(_context):
    return ListRootsResult(roots=[Root(uri="file:///tmp/a"), Root(uri="file:///tmp/b")])


def text_of(result) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


async def exercise(label: str, server, mode: str, legacy: bool, http: bool) -> None:
    progress: list[float] = []

    async def on_progress(value, total, message):
        progress.append(value)

    try:
        async with Client(
            server,
            mode=mode,
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
            list_roots_callback=on_roots,
            read_timeout_seconds=20,
        ) as client:
            expected_era = "2026-07-28" if mode != "legacy" and not legacy else None
            if expected_era:
                check(f"{label}: negotiated {expected_era}", client.protocol_version == expected_era, client.protocol_version)
            else:
                check(f"{label}: negotiated a legacy revision", client.protocol_version.startswith("2025"), client.protocol_version)
            tools = await client.list_tools()
            names = [t.name for t in tools.tools]
            check(f"{label}: tools/list", names[:3] == ["echo", "add", "fail"], str(names))
            echo = await client.call_tool("echo", {"message": "hello"})
            check(f"{label}: echo", text_of(echo) == "hello", repr(echo))
            added = await client.call_tool("add", {"a": 2, "b": 3})
            check(f"{label}: add", text_of(added) == "5" and added.structured_content == {"sum": 5}, repr(added))
            failed = await client.call_tool("fail", {})
            check(f"{label}: fail isError", failed.is_error is True, repr(failed))
            slow = await client.call_tool("slow", {"seconds": 0.2, "steps": 2}, progress_callback=on_progress)
            check(f"{label}: slow + progress", text_of(slow) == "slow done after 2 steps" and progress == [1, 2], f"{slow!r} {progress}")
            asked = await client.call_tool("ask", {"question": "answer?"})
            check(f"{label}: ask (elicitation)", json.loads(text_of(asked)) == {"answer": "forty-two"}, repr(asked))
            sampled = await client.call_tool("sample", {"prompt": "hi"})
            check(f"{label}: sample (sampling)", text_of(sampled) == "sampled text", repr(sampled))
            roots = await client.call_tool("roots", {})
            check(f"{label}: roots", text_of(roots) == "file:///tmp/a\nfile:///tmp/b", repr(roots))
            raw = await client.call_tool("echo_raw", {})
            check(f"{label}: echo_raw parses", "quoted" in text_of(raw), repr(raw))
            resource = await client.read_resource("test://static")
            check(f"{label}: resources/read", resource.contents[0].text == "static resource", repr(resource))
            item = await client.read_resource("test://item/9")
            check(f"{label}: template read", item.contents[0].text == "item 9", repr(item))
            templates = await client.list_resource_templates()
            check(f"{label}: templates", templates.resource_templates[0].uri_template == "test://item/{id}", repr(templates))
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            check(f"{label}: prompts/get", prompt.messages[0].content.text == "Hello, Ada!", repr(prompt))
            if http:
                seen = await client.call_tool("seen_headers", {})
                headers = (seen.structured_content or {}).get("headers", {})
                check(f"{label}: seen_headers", headers.get("content-type") == "application/json" and "host" in headers, json.dumps(headers))
    except Exception as error:  # noqa: BLE001 - report every failure as a failed check
        check(f"{label}: session", False, f"{type(error).__name__}: {error}")


def start_http(kind: str, era: str | None = None) -> tuple[subprocess.Popen, str]:
    args = [PEER, kind, "--port", "0"]
    if era:
        args += ["--era", era]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline().strip()
    address = line.removeprefix("listening on ")
    return process, address


async def main() -> None:
    for mode in ("auto", "legacy", "2026-07-28"):
        await exercise(f"stdio {mode}", StdioServerParameters(command=PEER, args=["stdio"]), mode, False, False)
    await exercise("stdio auto vs --era legacy", StdioServerParameters(command=PEER, args=["stdio", "--era", "legacy"]), "auto", True, False)
    for era in (None, "legacy"):
        process, address = start_http("http", era)
        try:
            modes = ("auto", "legacy", "2026-07-28") if era is None else ("auto",)
            for mode in modes:
                await exercise(f"http(era={era or 'both'}) {mode}", f"http://{address}/mcp", mode, era == "legacy", True)
        finally:
            process.kill()
    process, address = start_http("sse")
    try:
        await exercise("sse legacy", sse_client(f"http://{address}/sse"), "legacy", True, True)
    finally:
        process.kill()
    passed = sum(1 for _, ok, _ in results if ok)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


asyncio.run(main())
