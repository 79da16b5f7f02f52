"""Pressloop as an MCP server, seen by the official `mcp` client: over streamable HTTP at `/mcp`
of a real `pressloop serve`, and over stdio from a real `pressloop mcp`.

Both use a scripted model that answers every turn with `ANSWER`, and the test pack
`tests.fixtures.approval_pack` (a destructive `delete_user` that writes its effect to a file)
beside the default actions (`remember`, `recall`, ...).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import command, pack_env
from tests.support.serve import Serve, serve_env

ANSWER = "Hello from the scripted agent."
ROLES = ("admin", "operator", "viewer")


def write_env(home: Path) -> tuple[dict[str, str], Path]:
    """The command's environment in `home`, and the file `delete_user` records its effects in."""
    script = home / "script.json"
    script.write_text(json.dumps({"cycle": True, "answers": [{"text": ANSWER}]}))
    effects = home / "effects.txt"
    env = serve_env(home / "data", script, **pack_env("approval_pack", script, effects))
    return env, effects


@dataclass(kw_only=True)
class Served:
    server: Serve
    effects: Path
    tokens: dict[str, str]  # role -> a token of that role, named `mcp-<role>`

    @property
    def url(self) -> str:
        return f"{self.server.url}/mcp"

    def rest(self) -> httpx.AsyncClient:
        """The REST API with the admin token."""
        return self.server.client(timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `pressloop serve` for the module's HTTP tests, with a token of each role."""
    home = tmp_path_factory.mktemp("mcp-http")
    env, effects = write_env(home)
    with Serve(home, env, "--no-local-wordpress") as server:
        tokens = {}
        headers = {"Authorization": f"Bearer {server.admin_token}"}
        for role in ROLES:
            made = httpx.post(
                f"{server.url}/v1/tokens",
                json={"name": f"mcp-{role}", "role": role},
                headers=headers,
                trust_env=False,
            )
            assert made.status_code == 201, made.text
            tokens[role] = made.json()["token"]
        yield Served(server=server, effects=effects, tokens=tokens)


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next of `ports` in turn: several servers behind one address."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.sent: list[int] = []
        self.inner = httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[len(self.sent) % len(self.ports)]
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def http_session(
    url: str, token: str, *, modern: bool = False, transport: RoundRobin | None = None
) -> AsyncIterator[ClientSession]:
    """An MCP client session on `url` with a bearer token, initialized (the handshake), or with
    `modern` discovered (the per-request protocol of 2026-07-28)."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(30, read=120),
            trust_env=False,
            transport=transport,
        ) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await (session.discover() if modern else session.initialize())
        yield session


@asynccontextmanager
async def stdio_session(
    env: dict[str, str], home: Path, *args: str
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on `pressloop mcp *args`, started in `home` (its stderr
    goes to `home/mcp.log`)."""
    program, *rest = command()
    params = StdioServerParameters(command=program, args=[*rest, "mcp", *args], env=env, cwd=home)
    with (home / "mcp.log").open("a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def text(result: mcp_types.CallToolResult) -> str:
    """The first text block of a tool result (the answer)."""
    first = result.content[0]
    assert isinstance(first, mcp_types.TextContent), result
    return first.text


def structured(result: mcp_types.CallToolResult) -> dict[str, Any]:
    content = result.structured_content
    assert isinstance(content, dict), result
    return content


def approval_id_of(result: mcp_types.CallToolResult) -> str:
    """The approval a run-backed tool answered it waits for."""
    answer = text(result)
    assert answer.startswith("waiting for approval apr_"), answer
    approval_id = answer.split()[3]
    assert structured(result)["approval_id"] == approval_id
    assert structured(result)["status"] == "waiting_approval"
    return approval_id


def resource_json(read: mcp_types.ReadResourceResult) -> object:
    (content,) = read.contents
    assert isinstance(content, mcp_types.TextResourceContents)
    assert content.mime_type == "application/json"
    return json.loads(content.text)
