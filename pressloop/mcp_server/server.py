"""The MCP server both transports serve: the SDK's low-level `Server` over Pressloop's tools and
resources, for one Service. Who calls comes from the transport (`caller_of`): the bearer token
of the HTTP request, or the local user for stdio.

Errors: a tool's problem is a tool error its model can read (`tools.py`); a resource that does
not exist is an invalid-params error; anything unexpected is logged here and answered as an
internal error without its details (the SDK would send the exception's text).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS

from pressloop.errors import PressloopError
from pressloop.mcp_server.caller import Caller
from pressloop.mcp_server.resources import Resources
from pressloop.mcp_server.tools import Tools, tool_error
from pressloop.runtime.service import Service

log = logging.getLogger(__name__)

Context = ServerRequestContext[Any, Any]
CallerOf = Callable[[Context], Caller]
T = TypeVar("T")

INSTRUCTIONS = (
    "Pressloop runs an AI agent on a WordPress site. `chat` talks to the agent (pass the "
    "thread_id it answers to continue); every action is also a tool of its own. Under the `mcp` "
    "policy reads run at once and every write or destructive call waits for a person's approval "
    "(the answer says `waiting for approval <id>`); only admins decide approvals "
    "(`list_approvals`, `approve`, `reject`). Resources: pressloop://approvals, "
    "pressloop://threads, pressloop://threads/{id}, pressloop://runs/{id}."
)


def _version() -> str:
    try:
        return version("pressloop")
    except PackageNotFoundError:
        return "0.0.0"


async def _guarded(work: Awaitable[T], what: str) -> T:
    """Pressloop's errors keep their message; anything else is logged, not sent."""
    try:
        return await work
    except MCPError:
        raise
    except PressloopError as problem:
        raise MCPError(code=INVALID_PARAMS, message=problem.message) from None
    except Exception:
        log.exception("MCP %s failed", what)
        raise MCPError(
            code=INTERNAL_ERROR, message=f"{what} failed inside Pressloop (see its log)"
        ) from None


def build_server(service: Service, caller_of: CallerOf) -> Server[Any]:
    tools = Tools(service)
    resources = Resources(service)

    async def list_tools(
        _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listed())

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = caller_of(ctx)
        try:
            return await tools.call(caller, params.name, params.arguments)
        except Exception:
            log.exception("MCP tool %r failed", params.name)
            return tool_error(f"{params.name} failed inside Pressloop (see its log)")

    async def list_resources(
        _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        found = await _guarded(resources.listed(), "resources/list")
        return types.ListResourcesResult(resources=found)

    async def list_templates(
        _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=resources.templates())

    async def read_resource(
        _ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await _guarded(resources.read(params.uri), f"reading {params.uri}")

    return Server(
        "pressloop",
        version=_version(),
        title="Pressloop",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
