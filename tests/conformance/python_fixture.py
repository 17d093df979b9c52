# Why: the conformance comparison (run-compare.sh) needs a dual-era SDK server as well as the legacy
# TS SDK 1.x one: this is the Python SDK 2.x (mcp==2.3.0, MCPServer) offering the official suite's
# fixture tools, resources and prompts under their exact names. Sampling, elicitation and roots are
# Resolve(...) parameters, which the SDK serves as server->client requests in the legacy era and as
# multi-round-trip input requests in the 2026-07-28 era, so the suite can check that Manifold keeps
# them working for a legacy client in front of an upstream it reaches in the modern era.
#
# usage: tests/peers/.venv/bin/python tests/conformance/python_fixture.py --port N
#   binds 127.0.0.1 and serves Streamable HTTP at http://127.0.0.1:N/mcp (the caller picks a free port).

from __future__ import annotations

import argparse
import json
import sys
from typing import Annotated, Literal

import anyio
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp_types import (
    AudioContent,
    CallToolResult,
    Completion,
    CreateMessageResult,
    EmbeddedResource,
    ImageContent,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, Field

HOST = "127.0.0.1"
# The pause between the steps of the logging and progress tools (the suite asks for about 50 ms).
STEP_SECONDS = 0.05
RED_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0FDAAAAAElFTkSuQmCC"
SILENCE_WAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
TEMPLATE = "test://template/{id}/data"

server = MCPServer("manifold-python-conformance-fixture", version="1.0.0")


def text(value: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=value)])


def sampled(result: CreateMessageResult) -> str:
    return result.content.text if isinstance(result.content, TextContent) else "(no text)"


@server.tool(description="Returns a simple text content block.")
def test_simple_text() -> CallToolResult:
    return text("This is a simple text response for testing.")


@server.tool(description="Returns an image content block (a 1x1 red PNG).")
def test_image_content() -> CallToolResult:
    return CallToolResult(content=[ImageContent(type="image", data=RED_PIXEL_PNG, mime_type="image/png")])


@server.tool(description="Returns an audio content block (a short WAV).")
def test_audio_content() -> CallToolResult:
    return CallToolResult(content=[AudioContent(type="audio", data=SILENCE_WAV, mime_type="audio/wav")])


def embedded(uri: str, mime_type: str, value: str) -> EmbeddedResource:
    resource = TextResourceContents(uri=uri, mime_type=mime_type, text=value)
    return EmbeddedResource(type="resource", resource=resource)


@server.tool(description="Returns an embedded text resource.")
def test_embedded_resource() -> CallToolResult:
    content = embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    return CallToolResult(content=[content])


@server.tool(description="Returns text, image and embedded resource content together.")
def test_multiple_content_types() -> CallToolResult:
    return CallToolResult(
        content=[
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=RED_PIXEL_PNG, mime_type="image/png"),
            embedded("test://mixed-content-resource", "application/json", '{"test":"data","value":123}'),
        ]
    )


@server.tool(description="Sends three info log messages while it runs.")
async def test_tool_with_logging(ctx: Context) -> CallToolResult:
    await ctx.info("Tool execution started")
    await anyio.sleep(STEP_SECONDS)
    await ctx.info("Tool processing data")
    await anyio.sleep(STEP_SECONDS)
    await ctx.info("Tool execution completed")
    return text("Tool with logging executed successfully")


@server.tool(description="Like test_tool_with_logging: logs only as the request's log level allows.")
async def test_logging_tool(ctx: Context) -> CallToolResult:
    return await test_tool_with_logging(ctx)


@server.tool(description="Always fails with a tool execution error (isError: true).")
def test_error_handling() -> CallToolResult:
    failure = TextContent(type="text", text="This tool intentionally returns an error for testing")
    return CallToolResult(content=[failure], is_error=True)


@server.tool(description="Reports progress 0, 50 and 100 of 100 when the request carries a progress token.")
async def test_tool_with_progress(ctx: Context) -> CallToolResult:
    await ctx.report_progress(0, 100)
    await anyio.sleep(STEP_SECONDS)
    await ctx.report_progress(50, 100)
    await anyio.sleep(STEP_SECONDS)
    await ctx.report_progress(100, 100)
    return text("Tool with progress executed successfully")


def sample_prompt(prompt: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    return Sample([message], max_tokens=100)


@server.tool(description="Asks the client's LLM to answer the prompt (sampling/createMessage).")
def test_sampling(prompt: str, answer: Annotated[CreateMessageResult, Resolve(sample_prompt)]) -> CallToolResult:
    return text(f"LLM response: {sampled(answer)}")


class UserInfo(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


def ask_user_info(message: str) -> Elicit[UserInfo]:
    return Elicit(message, UserInfo)


@server.tool(description="Asks the user for a username and an email (elicitation/create).")
def test_elicitation(message: str, info: Annotated[UserInfo, Resolve(ask_user_info)]) -> CallToolResult:
    content = json.dumps(info.model_dump())
    return text(f"User response: action=accept, content={content}")


class Profile(BaseModel):
    name: str = "John Doe"
    age: int = 30
    score: float = 95.5
    status: Literal["active", "inactive", "pending"] = "active"
    verified: bool = True


def ask_profile() -> Elicit[Profile]:
    return Elicit("Please review and update the form fields with defaults", Profile)


@server.tool(description="Elicits a form whose fields carry defaults (SEP-1034).")
def test_elicitation_sep1034_defaults(profile: Annotated[Profile, Resolve(ask_profile)]) -> CallToolResult:
    return text(f"Elicitation completed: action=accept, content={json.dumps(profile.model_dump())}")


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool(description="Asks for the user's name and greets them.")
def test_input_required_result_elicitation(who: Annotated[Name, Resolve(ask_name)]) -> CallToolResult:
    return text(f"Hello, {who.name}!")


@server.tool(description="Asks the user for a name; in the modern era the question is an input request.")
def test_streaming_elicitation(who: Annotated[Name, Resolve(ask_name)]) -> CallToolResult:
    return text(f"Hello, {who.name}!")


def sample_anything() -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text="Say anything."))], max_tokens=10)


@server.tool(description="Needs the client's sampling capability.")
def test_missing_capability(answer: Annotated[CreateMessageResult, Resolve(sample_anything)]) -> CallToolResult:
    return text(f"The client declared sampling and answered: {sampled(answer)}")


def sample_capital() -> Sample:
    question = SamplingMessage(role="user", content=TextContent(type="text", text="What is the capital of France?"))
    return Sample([question], max_tokens=100)


@server.tool(description="Asks the client's LLM for the capital of France.")
def test_input_required_result_sampling(
    answer: Annotated[CreateMessageResult, Resolve(sample_capital)],
) -> CallToolResult:
    return text(f"The model answered: {sampled(answer)}")


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool(description="Asks for the client's roots (roots/list) and lists them.")
def test_input_required_result_list_roots(roots: Annotated[ListRootsResult, Resolve(ask_roots)]) -> CallToolResult:
    listed = ", ".join(str(root.uri) for root in roots.roots) or "(none)"
    return text(f"The client's roots: {listed}")


@server.tool(description="Returns Hello, {name}! at once.")
def greet(name: str) -> CallToolResult:
    return text(f"Hello, {name}!")


@server.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A text resource whose content never changes."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A binary resource (a 1x1 red PNG)."""
    import base64

    return base64.b64decode(RED_PIXEL_PNG)


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource, version 0."


@server.resource(TEMPLATE, name="template-data", mime_type="application/json")
def template_data(id: str) -> str:  # noqa: A002 - the suite's template names its variable `id`
    """JSON data for any id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.prompt(description="A prompt without arguments.")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt that substitutes two arguments.")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt that embeds a resource.")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:  # noqa: N803 - the suite's name
    resource = embedded(resourceUri, "text/plain", "Embedded resource content for testing.")
    return [UserMessage(resource), UserMessage("Please process the embedded resource above.")]


@server.prompt(description="A prompt with an image.")
def test_prompt_with_image() -> list[UserMessage]:
    image = ImageContent(type="image", data=RED_PIXEL_PNG, mime_type="image/png")
    return [UserMessage(image), UserMessage("Please analyze the image above.")]


PROMPT_CANDIDATES = ["paris", "park", "party", "test-value"]
ID_CANDIDATES = ["1", "2", "3", "123"]


@server.completion()
async def complete(ref, argument, _context) -> Completion:
    candidates: list[str] = []
    if isinstance(ref, PromptReference) and ref.name == "test_prompt_with_arguments":
        candidates = PROMPT_CANDIDATES
    elif isinstance(ref, ResourceTemplateReference) and ref.uri == TEMPLATE and argument.name == "id":
        candidates = ID_CANDIDATES
    values = [c for c in candidates if c.startswith(argument.value or "")]
    return Completion(values=values, total=len(values), has_more=False)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python_fixture.py")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    server.run("streamable-http", host=HOST, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
