"""The MCP servers whose tools the agent uses, as the owner configures them (issue 16).

Two sources: the owner's file in the desktop agents' format (`Settings.mcp_config_path()`,
read-only here) and the servers kept in the settings table under `mcp_servers`, a document of
the same format that the API, the UI and the CLI change one server at a time. A stored server
holds no secret: its env and header values are `${env:NAME}` references, resolved from the
service's environment when the server starts (`pressloop/mcp/config.py`).

What is shown holds no secret either: a stored server's references are shown as written (they
are names); a file server's env and header values are masked.

A mixin of `Service`, which provides `settings`, `database` and `now`.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pressloop.clock import Now
from pressloop.config import Settings
from pressloop.errors import ConfigurationError, Conflict, InvalidRequest, NotFound
from pressloop.mcp.config import (
    ServerConfig,
    StdioServer,
    references,
    secret_fields,
    server_config,
    stored_entry,
)
from pressloop.redaction import SECRET
from pressloop.store import settings_repo
from pressloop.store.db import Database

MCP_SERVERS_SETTING = "mcp_servers"
EMPTY_DOCUMENT: dict[str, Any] = {"mcpServers": {}}

Source = Literal["file", "settings"]
Transport = Literal["stdio", "http"]


@dataclass(frozen=True, kw_only=True)
class McpServerEntry:
    """One configured server as it may be shown: no secret value in it."""

    name: str
    source: Source
    transport: Transport
    command: str | None
    args: list[str]
    cwd: str | None
    url: str | None
    # A stored server's env or header values as written (references); a file server's masked.
    env: dict[str, str]
    headers: dict[str, str]
    risk: str | None
    tools: dict[str, str]
    timeout_s: float
    # The variables its references name that the environment of this process does not set.
    unset: list[str]

    @classmethod
    def of(cls, server: ServerConfig, source: Source) -> McpServerEntry:
        field_name, secrets = secret_fields(server)
        written = {key: value.get_secret_value() for key, value in secrets.items()}
        shown = written if source == "settings" else dict.fromkeys(written, SECRET)
        unset = sorted(
            {name for value in written.values() for name in references(value)} - set(os.environ)
        )
        stdio = isinstance(server, StdioServer)
        return cls(
            name=server.name,
            source=source,
            transport="stdio" if stdio else "http",
            command=server.command if isinstance(server, StdioServer) else None,
            args=list(server.args) if isinstance(server, StdioServer) else [],
            cwd=server.cwd if isinstance(server, StdioServer) else None,
            url=None if isinstance(server, StdioServer) else server.url,
            env=shown if field_name == "env" else {},
            headers=shown if field_name == "headers" else {},
            risk=server.risk.value if server.risk else None,
            tools={tool: risk.value for tool, risk in server.tools.items()},
            timeout_s=server.timeout_s,
            unset=unset,
        )


@dataclass(frozen=True, kw_only=True)
class McpServerList:
    """Every configured server (the file's first, then the stored ones by name), the file read,
    and what could not be read (a server left out says why here)."""

    config_file: str | None
    servers: list[McpServerEntry]
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class McpServerSources:
    """The servers of both sources, validated (for the runtime that connects to them)."""

    file: list[ServerConfig]
    stored: list[ServerConfig]
    # Every name the file gives, even one whose entry is invalid (the settings may not use it).
    file_names: frozenset[str]
    problems: list[str]

    @property
    def servers(self) -> list[ServerConfig]:
        return [*self.file, *self.stored]


def _read_file(
    path: Path | None,
) -> tuple[list[ServerConfig], frozenset[str] | None, list[str]]:
    """The file's servers, every name it gives (None when it cannot be read), and
    its problems (a server at a time). A file named but missing gives no server."""
    if path is None:
        return [], frozenset(), []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], frozenset(), [f"the MCP servers file {path} does not exist"]
    except (OSError, UnicodeDecodeError) as unreadable:
        reason = getattr(unreadable, "strerror", None) or type(unreadable).__name__
        return [], None, [f"the MCP servers file {path} cannot be read ({reason})"]
    try:
        document = json.loads(text)
    except json.JSONDecodeError as bad:
        # Only the parser's message and place: never the text, which may hold secrets.
        where = f"line {bad.lineno} column {bad.colno}"
        return (
            [],
            None,
            [f"the MCP servers file {path} is not valid JSON ({bad.msg}, {where})"],
        )
    entries = document.get("mcpServers", {}) if isinstance(document, Mapping) else None
    if not isinstance(entries, Mapping):
        problem = f"the MCP servers file {path}: 'mcpServers' must be an object"
        return [], None, [problem]
    servers, problems = _servers(entries, stored=False)
    return servers, frozenset(str(name) for name in entries), [f"{path}: {p}" for p in problems]


def _servers(entries: Mapping[str, Any], *, stored: bool) -> tuple[list[ServerConfig], list[str]]:
    servers: list[ServerConfig] = []
    problems: list[str] = []
    for name, raw in entries.items():
        try:
            servers.append(server_config(name, raw, stored=stored))
        except ConfigurationError as invalid:
            problems.append(invalid.message)
    return servers, problems


def _stored_entries(document: Any) -> dict[str, Any]:
    entries = document.get("mcpServers") if isinstance(document, Mapping) else None
    return dict(entries) if isinstance(entries, Mapping) else {}


class McpServersAdmin:
    settings: Settings
    database: Database
    now: Now

    async def mcp_server_sources(self) -> McpServerSources:
        """Both sources, each server validated; what is invalid is left out, with why."""
        path = self.settings.mcp_config_path()
        file_servers, names, problems = await asyncio.to_thread(_read_file, path)
        file_names = names or frozenset()
        async with self.database.read() as conn:
            document = await settings_repo.get_setting(conn, MCP_SERVERS_SETTING, EMPTY_DOCUMENT)
        stored, stored_problems = _servers(_stored_entries(document), stored=True)
        problems += [f"settings: {p}" for p in stored_problems]
        # A name the file gives wins: the settings refuse it, but it may predate the file's.
        shadowed = [s for s in stored if s.name in file_names]
        problems += [
            f"settings: MCP server {s.name!r} is also in the file, which wins" for s in shadowed
        ]
        return McpServerSources(
            file=file_servers,
            stored=sorted((s for s in stored if s.name not in file_names), key=lambda s: s.name),
            file_names=file_names,
            problems=problems,
        )

    async def list_mcp_servers(self) -> McpServerList:
        sources = await self.mcp_server_sources()
        path = self.settings.mcp_config_path()
        return McpServerList(
            config_file=str(path) if path is not None else None,
            servers=[McpServerEntry.of(s, "file") for s in sources.file]
            + [McpServerEntry.of(s, "settings") for s in sources.stored],
            problems=sources.problems,
        )

    async def get_mcp_server(self, name: str) -> McpServerEntry:
        for server in (await self.list_mcp_servers()).servers:
            if server.name == name:
                return server
        raise NotFound(f"MCP server {name!r} is not configured")

    async def put_mcp_server(self, name: str, entry: Mapping[str, Any]) -> McpServerEntry:
        """Add a server to the settings, or replace the one of that name. Its env and header
        values must be `${env:NAME}` references; a name the file gives is the file's."""
        try:
            server = server_config(name, entry, stored=True)
        except ConfigurationError as invalid:
            raise InvalidRequest(invalid.message) from None
        await self._refuse_file_name(name)
        async with self.database.write() as conn:
            now = self.now()
            document = await settings_repo.lock_setting(
                conn, MCP_SERVERS_SETTING, EMPTY_DOCUMENT, now=now
            )
            entries = _stored_entries(document)
            entries[name] = stored_entry(server)
            await settings_repo.set_setting(
                conn, MCP_SERVERS_SETTING, {"mcpServers": entries}, now=now
            )
        return McpServerEntry.of(server, "settings")

    async def delete_mcp_server(self, name: str) -> None:
        """Remove a server from the settings (a file's server is changed in the file)."""
        path = self.settings.mcp_config_path()
        _file_servers, file_names, _problems = await asyncio.to_thread(_read_file, path)
        async with self.database.write() as conn:
            now = self.now()
            document = await settings_repo.lock_setting(
                conn, MCP_SERVERS_SETTING, EMPTY_DOCUMENT, now=now
            )
            entries = _stored_entries(document)
            if name not in entries:
                if name in (file_names or ()):
                    raise Conflict(
                        f"MCP server {name!r} is configured in the file ({path}): remove it "
                        "there; Pressloop does not change it"
                    )
                raise NotFound(f"MCP server {name!r} is not in the settings")
            del entries[name]
            await settings_repo.set_setting(
                conn, MCP_SERVERS_SETTING, {"mcpServers": entries}, now=now
            )

    async def _refuse_file_name(self, name: str) -> None:
        path = self.settings.mcp_config_path()
        _servers, names, problems = await asyncio.to_thread(_read_file, path)
        if names is not None and name in names:
            raise Conflict(
                f"MCP server {name!r} is configured in the file ({path}); Pressloop does not "
                "change it: pick another name, or change it in the file"
            )
        if names is None:
            # The file's names are unknown: a server stored now might take one of them.
            raise ConfigurationError(f"{problems[0]}: fix it first")
