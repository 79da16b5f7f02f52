"""The outside MCP servers' tools in this process's action registry.

Servers come from the owner's file (`Settings.mcp_config_path()`, the desktop agents' format)
and from the servers stored in the settings (`mcp_servers`, no secret values: `${env:NAME}`
references). Before each turn `refresh()`:
- reads the configuration again at most every `mcp_config_poll_s` (the file when its mtime
  moved, the stored document), closing the connections of servers that went or changed and
  making new ones (nothing starts yet); with no server and nothing due, that is all;
- asks every server for its tools, which starts one not running yet (lazily: the first turn
  after it was configured) and restarts one that died; a server listing the same tools is one
  dictionary lookup, and one that said its list changed is listed again;
- puts the tools in the registry (`Registry.replace_server`), and says which servers are down
  (the text goes to MCP_TOOL_CATALOG): a server that is down or slow costs the turn its tools,
  never the turn; one that keeps failing is tried again after a full-jitter backoff, and in
  between is reported down at once.

Each worker process keeps its own connections (a stdio server runs once per process).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pressloop.actions.registry import Registry
from pressloop.clock import Monotonic
from pressloop.config import Settings
from pressloop.errors import ConfigurationError
from pressloop.mcp.config import ServerConfig, load_servers
from pressloop.mcp.errors import McpServerError
from pressloop.store import settings_repo
from pressloop.store.db import Database

if TYPE_CHECKING:  # the SDK loads with the first server (pressloop/mcp/__init__.py says why)
    from mcp import types as mcp_types

    from pressloop.mcp.connection import McpConnection

log = logging.getLogger(__name__)

STORED_KEY = "mcp_servers"

Connect = Callable[[ServerConfig], "McpConnection"]


class McpTools:
    def __init__(
        self,
        settings: Settings,
        database: Database,
        registry: Registry,
        *,
        monotonic: Monotonic = time.monotonic,
        connect: Connect | None = None,
    ) -> None:
        self.settings = settings
        self.database = database
        self.registry = registry
        self._monotonic = monotonic
        self._connect = connect or self._default_connect
        self.connections: dict[str, McpConnection] = {}
        self._tools: dict[str, list[mcp_types.Tool]] = {}
        self._file_key: tuple[Path, float] | None = None
        self._file_servers: list[ServerConfig] = []
        self._file_problem: str | None = None
        self._stored_servers: list[ServerConfig] = []
        self._stored_problem: str | None = None
        self._stored_read_at: float | None = None
        self._lock = asyncio.Lock()
        # Each server's tools/list (or start) in flight: a turn waits for it a little only.
        self._listing: dict[str, asyncio.Task[list[mcp_types.Tool]]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self.notes = ""

    def _default_connect(self, server: ServerConfig) -> McpConnection:
        from pressloop.mcp.connection import McpConnection

        return McpConnection(
            server,
            monotonic=self._monotonic,
            restart_base_s=self.settings.mcp_restart_base_s,
            restart_cap_s=self.settings.mcp_restart_cap_s,
            fail_fast=True,
        )

    async def refresh(self) -> str:
        """The registry up to date with the servers; returns what MCP_TOOL_CATALOG says of them
        beyond their tools ("" when all is well). Waits at most `mcp_list_wait_s` for servers
        still starting: they go on starting in the background and their tools come with a
        later turn."""
        if not self.connections and not self._listing and not self._configuration_due():
            return self.notes  # nothing configured, nothing to look at yet: no lock, no await
        async with self._lock:
            await self._read_configuration()
            problems = [p for p in (self._file_problem, self._stored_problem) if p]
            for name, connection in self.connections.items():
                if name not in self._listing:
                    self._listing[name] = asyncio.create_task(
                        connection.tools(), name=f"mcp-list:{name}"
                    )
            if self._listing:
                await asyncio.wait(
                    list(self._listing.values()), timeout=self.settings.mcp_list_wait_s
                )
            for name, connection in list(self.connections.items()):
                listing = self._listing.get(name)
                if listing is None or not listing.done():
                    problems.append(f"MCP server {name!r} is starting: its tools come later")
                    continue
                del self._listing[name]
                problem = self._listed(name, connection, listing)
                if problem:
                    problems.append(problem)
            self.notes = "\n".join(f"- {p}" for p in problems)
            return self.notes

    def _listed(
        self, name: str, connection: McpConnection, listing: asyncio.Task[list[mcp_types.Tool]]
    ) -> str | None:
        try:
            tools = listing.result()
        except McpServerError as failure:
            if self._tools.pop(name, None) is not None or name in self.registry.servers():
                self.registry.replace_server(name, [])
                log.warning("MCP server %r: its tools are withdrawn: %s", name, failure.message)
            return f"{failure.message} (its tools are not offered now)"
        if tools != self._tools.get(name):
            from pressloop.mcp.catalog import tool_spec

            specs = []
            for tool in tools:
                try:
                    spec = tool_spec(connection, tool)
                except Exception as bad:  # a broken inputSchema: that tool only is left out
                    log.warning("MCP server %r: tool %r left out: %s", name, tool.name, bad)
                    continue
                if spec is not None:
                    specs.append(spec)
            self.registry.replace_server(name, specs)
            self._tools[name] = tools
        return None

    # -- configuration ----------------------------------------------------------------------

    def _configuration_due(self) -> bool:
        return self._stored_read_at is None or (
            self._monotonic() - self._stored_read_at >= self.settings.mcp_config_poll_s
        )

    async def _read_configuration(self) -> None:
        """The file and the stored servers, looked at again at most every
        `mcp_config_poll_s` (a turn of a process with no server costs a clock reading)."""
        if not self._configuration_due():
            return
        self._stored_read_at = self._monotonic()
        changed = self._read_file()
        changed = await self._read_stored() or changed
        if changed:
            await self._reconnect()

    def _read_file(self) -> bool:
        path = self.settings.mcp_config_path()
        if path is None:
            key = None
        else:
            try:
                key = (path, path.stat().st_mtime)
            except OSError as missing:
                key = (path, -1.0)
                problem = f"the MCP configuration {path} cannot be read ({missing.strerror})"
                if key != self._file_key:
                    self._file_key, self._file_servers, self._file_problem = key, [], problem
                    return True
                return False
        if key == self._file_key:
            return False
        self._file_key = key
        self._file_servers, self._file_problem = [], None
        if path is not None:
            try:
                self._file_servers = load_servers(path.read_text(encoding="utf-8"))
            except (OSError, ConfigurationError) as bad:
                self._file_problem = f"the MCP configuration {path} is not used: {bad}"
                log.warning("%s", self._file_problem)
        return True

    async def _read_stored(self) -> bool:
        async with self.database.read() as conn:
            document: Any = await settings_repo.get_setting(conn, STORED_KEY)
        servers: list[ServerConfig] = []
        problem = None
        if document:
            try:
                servers = load_servers(document, stored=True)
            except ConfigurationError as bad:
                problem = f"the stored MCP servers are not used: {bad}"
        changed = servers != self._stored_servers or problem != self._stored_problem
        self._stored_servers, self._stored_problem = servers, problem
        return changed

    def wanted(self) -> dict[str, ServerConfig]:
        """The servers in effect: the file's first (the settings API refuses its names)."""
        servers: dict[str, ServerConfig] = {}
        for server in [*self._file_servers, *self._stored_servers]:
            servers.setdefault(server.name, self._with_default_timeout(server))
        return servers

    def _with_default_timeout(self, server: ServerConfig) -> ServerConfig:
        if "timeout_s" in server.model_fields_set:
            return server
        return server.model_copy(update={"timeout_s": self.settings.mcp_timeout_s})

    async def _reconnect(self) -> None:
        wanted = self.wanted()
        for name, connection in list(self.connections.items()):
            if wanted.get(name) != connection.server:
                del self.connections[name]
                self._tools.pop(name, None)
                listing = self._listing.pop(name, None)
                if listing is not None:
                    listing.cancel()
                self.registry.replace_server(name, [])
                # In the background: a server still starting holds its close for a while.
                closing = asyncio.create_task(connection.close(), name=f"mcp-close:{name}")
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
        for name, server in wanted.items():
            if name not in self.connections:
                self.connections[name] = self._connect(server)

    async def aclose(self) -> None:
        """Stop every server this process started."""
        async with self._lock:
            connections, self.connections = list(self.connections.values()), {}
            listings, self._listing = list(self._listing.values()), {}
        for listing in listings:
            listing.cancel()
        await asyncio.gather(*listings, return_exceptions=True)
        for connection in connections:
            await connection.close()
        await asyncio.gather(*list(self._closing), return_exceptions=True)
