# Why: drives Manifold's downstream side with the real Python SDK client (mcp 2.3.0), so the
# tests prove interoperability with a client we did not write, in each negotiation mode.
# Usage: python py_client.py http URL MODE MESSAGE
#        python py_client.py stdio MODE MESSAGE COMMAND [ARGS...]
# Prints one JSON line: the negotiated protocol version, the tool names, the echo's text.
import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    kind = sys.argv[1]
    if kind == "http":
        url, mode, message = sys.argv[2], sys.argv[3], sys.argv[4]
        target = url
    else:
        mode, message, command, args = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
        target = StdioServerParameters(command=command, args=args)
    async with Client(target, mode=mode, cache=None) as client:
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        result = await client.call_tool("SERVER__echo", {"message": message})
        texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
        print(json.dumps({
            "protocol": client.protocol_version,
            "tools": names,
            "text": texts[0] if texts else None,
            "isError": result.is_error,
        }), flush=True)


asyncio.run(main())
