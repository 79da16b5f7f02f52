"""The MCP servers an owner configures, in the format desktop agents use:

    {"mcpServers": {"files": {"command": "npx", "args": [...], "env": {...}},
                    "search": {"url": "https://...", "headers": {...}}}}

plus Pressloop's own optional keys per server: `risk` (one risk, or `off`, for every tool),
`tools` ({"tool_name": "read" | "write" | "destructive" | "off"}) and `timeout_s`.

Env values and headers carry API keys: they are `SecretStr`s, so reprs, logs and validation
errors show them masked; only the transports read their values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from pressloop.errors import ConfigurationError

DEFAULT_TIMEOUT_S = 30.0
# Restarts of a server that keeps dying back off with full jitter between these bounds.
RESTART_BACKOFF_BASE_S = 0.5
RESTART_BACKOFF_CAP_S = 30.0

# Lowercase and no dot: the server's name prefixes its tools' action names (`server.tool`).
SERVER_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")


class ToolRisk(StrEnum):
    """What the owner says about a tool: a risk, or `off` (the agent never sees it)."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"
    OFF = "off"


class _Server(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    risk: ToolRisk | None = None
    tools: dict[str, ToolRisk] = Field(default_factory=dict)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=3600)

    def override(self, tool: str) -> ToolRisk | None:
        """The owner's word on a tool: its own entry first, then the server's."""
        return self.tools.get(tool, self.risk)


class StdioServer(_Server):
    """A server Pressloop starts as a child process and talks to over stdin/stdout."""

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)
    cwd: str | None = None

    def env_values(self) -> dict[str, str]:
        return {key: value.get_secret_value() for key, value in self.env.items()}


class HttpServer(_Server):
    """A server reached over streamable HTTP."""

    url: str = Field(pattern=r"^https?://\S+$")
    headers: dict[str, SecretStr] = Field(default_factory=dict)

    def header_values(self) -> dict[str, str]:
        return {key: value.get_secret_value() for key, value in self.headers.items()}


ServerConfig = StdioServer | HttpServer


def server_config(name: str, raw: Any) -> ServerConfig:
    """One server's entry, validated; a ConfigurationError names the server and the field."""
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise ConfigurationError(
            f"MCP server name {name!r} is invalid: use 1-64 of a-z, 0-9, '_' and '-' (no dots)"
        )
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"MCP server {name!r}: its entry must be an object")
    if "command" in raw and "url" in raw:
        raise ConfigurationError(f"MCP server {name!r}: give either 'command' or 'url', not both")
    if "command" in raw:
        model: type[ServerConfig] = StdioServer
    elif "url" in raw:
        model = HttpServer
    else:
        transport = raw.get("type") or raw.get("transport")
        what = f"unknown transport {transport!r}" if transport else "no transport"
        raise ConfigurationError(
            f"MCP server {name!r}: {what}; give 'command' (stdio) or 'url' (streamable HTTP)"
        )
    # `type` names the transport in some desktop configs; the keys above already decided it.
    fields = {key: value for key, value in raw.items() if key not in ("type", "transport")}
    try:
        return model.model_validate({**fields, "name": name})
    except ValidationError as invalid:
        raise ConfigurationError(f"MCP server {name!r}: {_problems(invalid)}") from None


def load_servers(config: Mapping[str, Any] | str) -> list[ServerConfig]:
    """Every server of an `{"mcpServers": {...}}` document (a mapping or its JSON text)."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError as bad:
            raise ConfigurationError(f"MCP servers: not valid JSON ({bad.msg})") from None
    if not isinstance(config, Mapping):
        raise ConfigurationError("MCP servers: the configuration must be an object")
    servers = config.get("mcpServers", {})
    if not isinstance(servers, Mapping):
        raise ConfigurationError("MCP servers: 'mcpServers' must be an object")
    return [server_config(name, raw) for name, raw in servers.items()]


def _problems(invalid: ValidationError) -> str:
    # Never the input: an env value or a header given in the wrong shape is still a secret.
    parts = []
    for error in invalid.errors(include_input=False, include_url=False)[:6]:
        where = ".".join(str(part) for part in error["loc"]) or "entry"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
