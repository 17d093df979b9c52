# Why: a real Python SDK 2.x (mcp==2.3.0) server that speaks both protocol eras, so Manifold's tests can
# exercise progress, cancellation, elicitation and sampling against the reference implementation rather
# than against a mock. Run with tests/peers/.venv/bin/python; see tests/peers/README.md.
#
# usage: python_server.py stdio
#        python_server.py http [--stateless] [--json] --port N
#        python_server.py sse --port N
# HTTP modes bind 127.0.0.1 only; the caller chooses the port (the test kit picks a free one).

from __future__ import annotations

import argparse
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

HOST = "127.0.0.1"

server = MCPServer("manifold-python-peer", version="1.0.0", instructions="Test peer for Manifold.")


@server.tool()
def echo(message: str) -> str:
    """Return the message unchanged."""
    return message


@server.tool()
def add(a: int | float, b: int | float) -> int | float:
    """Add two numbers."""
    return a + b


@server.tool()
async def slow(seconds: float, steps: int, ctx: Context) -> str:
    """Sleep `seconds` in `steps` parts, reporting progress after each; cancellation interrupts the sleep."""
    steps = max(steps, 1)
    for step in range(1, steps + 1):
        # The SDK cancels this task on notifications/cancelled (or a closed modern stream),
        # so the sleep is where cancellation lands.
        await anyio.sleep(seconds / steps)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"slept {seconds}s in {steps} steps"


class NameForm(BaseModel):
    name: str


def ask_for_name() -> Elicit[NameForm]:
    return Elicit("What is your name?", NameForm)


@server.tool()
def ask_name(form: Annotated[NameForm, Resolve(ask_for_name)]) -> str:
    """Elicit a name from the client (a server->client request in the legacy era, MRTR in the modern era)."""
    return f"Hello, {form.name}!"


def sample_summary(text: str) -> Sample:
    prompt = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))
    return Sample([prompt], max_tokens=100)


@server.tool()
def summarize(text: str, summary: Annotated[CreateMessageResult, Resolve(sample_summary)]) -> str:
    """Ask the client's model to summarize `text` via sampling; returns what the client sampled."""
    content = summary.content
    if isinstance(content, TextContent):
        return content.text
    return f"non-text sampling result: {content.type}"


def ask_for_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def list_roots(roots: Annotated[ListRootsResult, Resolve(ask_for_roots)]) -> str:
    """List the client's roots (a server->client request in the legacy era, MRTR in the modern era)."""
    return " ".join(str(r.uri) for r in roots.roots)


@server.tool()
async def open_link(ctx: Context) -> str:
    """Send the client to a URL (URL-mode elicitation). The SDK offers it only as a server->client
    request, so only the legacy era can carry it."""
    answer = await ctx.elicit_url("Please sign in.", "https://example.com/sign-in", "sign-in-1")
    return f"url elicitation {answer.action}"


@server.resource("test://python/hello", mime_type="text/plain")
def hello() -> str:
    """A fixed text resource."""
    return "Hello from the Python peer"


@server.resource("test://python/greet/{name}", mime_type="text/plain")
def greet(name: str) -> str:
    """A templated text resource."""
    return f"Greetings, {name}"


@server.prompt()
def greeting(name: str) -> str:
    """A one-message prompt greeting `name`."""
    return f"Please greet {name} warmly."


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python_server.py")
    modes = parser.add_subparsers(dest="mode", required=True)
    modes.add_parser("stdio")
    http = modes.add_parser("http")
    http.add_argument("--port", type=int, required=True)
    http.add_argument("--stateless", action="store_true")
    http.add_argument("--json", action="store_true")
    sse = modes.add_parser("sse")
    sse.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    if args.mode == "stdio":
        server.run("stdio")
    elif args.mode == "http":
        server.run(
            "streamable-http",
            host=HOST,
            port=args.port,
            stateless_http=args.stateless,
            json_response=args.json,
        )
    else:
        server.run("sse", host=HOST, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
