# Why: the dashboard's browser test (crates/manifold/tests/dashboard_browser.rs) needs an upstream it can
# take down and bring back at will, whose tool definition changes across that restart (a changed pin),
# and whose tool description and result carry HTML that the dashboard must show as text. This is a real
# Python SDK server (mcp 2.3.0, the peers venv) over stdio with exactly those tools.
#
# usage: python peer_server.py STATE_DIR
# STATE_DIR/gate present: exit at once with status 3 (the gateway sees a server that cannot start).
# STATE_DIR/variant present: `shout` has its second description (the pin of its definition changes).

from __future__ import annotations

import sys
from pathlib import Path

STATE = Path(sys.argv[1]) if len(sys.argv) > 1 else None
if STATE is None:
    print("usage: peer_server.py STATE_DIR", file=sys.stderr)
    sys.exit(2)
if (STATE / "gate").exists():
    # Before importing the SDK: a gated start fails as fast as a crashing server would.
    print(f"peer_server.py: {STATE / 'gate'} exists, refusing to start", file=sys.stderr)
    sys.exit(3)

from mcp.server.mcpserver import MCPServer  # noqa: E402

# Markup an operator must see as text: an image whose error handler runs script, and a bold element.
HTML_DESCRIPTION = "Returns markup. <img src=x onerror=alert(1)><b>bold</b>"
HTML_RESULT = "<script>window.pwned=1</script>"

server = MCPServer("manifold-browser-peer", version="1.0.0")

SHOUT_DESCRIPTION = (
    "Shout the text back in capitals (second definition)."
    if (STATE / "variant").exists()
    else "Shout the text back in capitals."
)


@server.tool(description=SHOUT_DESCRIPTION)
def shout(text: str) -> str:
    return text.upper() + "!"


@server.tool(description=HTML_DESCRIPTION)
def html_note(note: str = "") -> str:
    return HTML_RESULT + note


if __name__ == "__main__":
    server.run("stdio")
