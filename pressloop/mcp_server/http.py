"""MCP over streamable HTTP at `/mcp`, inside the app `pressloop serve` runs.

Authentication is the API's: `Authorization: Bearer <API token>` on every request, checked
against the stored tokens (`runtime.access.Access`, as `api/auth.py` does), so a revoked or
expired token is refused at its next request. No token, or one that is not valid: 401 with the
API's error shape `{"error": {"code": "unauthorized", "message": ...}}`. The UI's session cookie
is not accepted here (an MCP client has none; a cross-site page must not reach the tools). The
token's role decides what its calls may do (`caller.py`, `tools.py`).

Stateless: the SDK's session manager runs with `stateless=True`, so every request is complete by
itself (authenticated, served, done) and any `pressloop serve` process can answer it. With
sessions, each would live in the memory of the process that opened it: behind one address
served by several processes (a load balancer, a restart), the next request of a session reaching
another process would be answered 404 "Session not found" and the client would have to start
over, or every balancer would need sticky sessions. Pressloop keeps nothing per connection
anyway: threads, runs, approvals and events are in the database, and a client continues a
conversation with the `thread_id` an answer gave it. What stateless gives up is what this server
does not use: requests from the server to the client (sampling, elicitation), the standalone
notification stream (the tool list changes only with a restart) and resuming a dropped response
stream (a run's events stay readable as `pressloop://runs/{id}`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from pressloop.mcp_server.caller import Caller
from pressloop.mcp_server.server import Context, build_server
from pressloop.runtime.access import Access
from pressloop.runtime.service import Service

PATH = "/mcp"
# Where the authenticated caller rides with the request, to the tool handlers.
CALLER_KEY = "pressloop.mcp_caller"


def _error(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def _unauthorized(message: str) -> JSONResponse:
    return _error(401, "unauthorized", message, **{"WWW-Authenticate": "Bearer"})


def _bearer(scope: Scope) -> str | None:
    header = HTTPConnection(scope).headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def http_caller(ctx: Context) -> Caller:
    """The caller `McpEndpoint` authenticated for this request."""
    request = ctx.request
    caller = request.scope.get(CALLER_KEY) if isinstance(request, HTTPConnection) else None
    if not isinstance(caller, Caller):
        raise MCPError(code=INTERNAL_ERROR, message="the request carries no authenticated caller")
    return caller


class McpEndpoint:
    """The `/mcp` ASGI app: bearer authentication, then the SDK's session manager (made anew
    each time the app starts: a manager runs once)."""

    def __init__(self, access: Access, server: Server[Any]) -> None:
        self.access = access
        self.server = server
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(app=self.server, stateless=True)
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = _bearer(scope)
        if token is None:
            answer = _unauthorized(
                "MCP needs an API token: send the header Authorization: Bearer ..."
            )
            await answer(scope, receive, send)
            return
        found = await self.access.authenticate(token)
        if found is None:
            answer = _unauthorized("the API token is not valid (unknown, expired or revoked)")
            await answer(scope, receive, send)
            return
        if self.manager is None:
            answer = _error(
                503, "unavailable", "the MCP server is not running (starting or stopping)"
            )
            await answer(scope, receive, send)
            return
        caller = Caller(name=found.name, role=found.role)
        await self.manager.handle_request({**scope, CALLER_KEY: caller}, receive, send)


def mount_mcp(app: FastAPI, service: Service) -> FastAPI:
    """MCP at `/mcp` on `app` (before it serves), run within the app's lifespan; `app` itself,
    to compose in one expression like `mount_ui`."""
    access: Access | None = getattr(app.state, "access", None)
    if access is None:
        access = Access(database=service.database, settings=service.settings, now=service.now)
        app.state.access = access  # the API's auth takes the same one
    endpoint = McpEndpoint(access, build_server(service, http_caller))
    app.router.routes.append(Route(PATH, endpoint=endpoint, include_in_schema=False))
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(this: Any) -> AsyncIterator[Any]:
        # The MCP requests end first on the way out, then the app's worker and scheduler.
        async with inner(this) as state, endpoint.running():
            yield state

    app.router.lifespan_context = lifespan
    return app
