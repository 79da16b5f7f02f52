"""MCP over stdio: `pressloop mcp`, started by a desktop or IDE agent as its MCP server.

It acts as the local user, like the other commands (`pressloop chat`), with the role it is
given (`--role operator`, the default, or `admin`, which may also decide approvals). It opens
the service on the configured database (the one `pressloop serve` uses, if any) and runs an
in-process worker, so a run it queued (a busy thread, a retry, an approval decided elsewhere)
goes on while the agent is connected; `pressloop serve` and its workers may run it as well
(claims are atomic). The service is opened inside the stdio transport, which points fd 1 at
stderr meanwhile: nothing but MCP messages reaches stdout.
"""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from pressloop.config import Settings
from pressloop.mcp_server.caller import Caller
from pressloop.mcp_server.server import Context, build_server
from pressloop.observability.tracing import setup_tracing, shutdown_tracing
from pressloop.runtime.service import Service


async def serve_stdio(settings: Settings, caller: Caller) -> int:
    """Serve MCP on stdin/stdout for `caller` until the client closes stdin."""

    def local(_ctx: Context) -> Caller:
        return caller

    async with stdio_server() as (read, write):
        setup_tracing()  # OTEL_*: off unless an exporter is configured (console: to stderr)
        service = await Service.open(settings)
        try:
            service.start_listener()
            service.start_worker()
            server = build_server(service, local)
            await server.run(read, write, server.create_initialization_options())
        finally:
            await service.close()
            shutdown_tracing()
    return 0
