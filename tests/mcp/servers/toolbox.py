"""A small MCP server for the client tests, written with the SDK's MCPServer (FastMCP in mcp 1).

    python toolbox.py stdio
    python toolbox.py http PORT

Tools: `lookup` (read), `purge` (destructive), `note` (a plain write), `tag` (an idempotent
write), `nap` (sleeps: the
timeout tests), `crash` (the process exits mid-call), `grow` (adds a tool, says the list changed),
`whoami` (the env value the client was given: shows it reached the server), `fail` (isError).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("toolbox")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(term: str, limit: int = 3) -> str:
    """Look a term up."""
    return f"found {term} x{limit}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def purge(target: str) -> str:
    """Delete everything about a target."""
    return f"purged {target}"


@server.tool()
def note(text: str) -> str:
    """Write a note."""
    return f"noted {text}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def tag(text: str) -> str:
    """Set a tag (setting it twice is setting it once)."""
    return f"tagged {text}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def nap(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "rested"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Exit the server's process in the middle of the call."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami() -> str:
    """The token the server was started with."""
    return "token " + os.environ.get("TOOLBOX_TOKEN", "none")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail() -> str:
    """Always fails."""
    raise ValueError("the toolbox is empty")


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called `name` and tell the client the tool list changed."""

    def grown() -> str:
        return f"I am {name}"

    server.add_tool(grown, name=name, description="A tool added at run time.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
