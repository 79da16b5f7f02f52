"""The MCP servers an owner configures, in the format desktop agents use:

    {"mcpServers": {"files": {"command": "npx", "args": [...], "env": {...}},
                    "search": {"url": "https://...", "headers": {...}}}}

plus Pressloop's own optional keys per server: `risk` (one risk, or `off`, for every tool),
`tools` ({"tool_name": "read" | "write" | "destructive" | "off"}) and `timeout_s`.

Env values and headers carry API keys: they are `SecretStr`s, so reprs, logs and validation
errors show them masked; only the transports read their values. A value may hold references
`${env:NAME}` (VS Code's mcp.json form), replaced by the service's environment variable when
the transport reads it (`env_values()`, `header_values()`); a variable that is not set is a
ConfigurationError naming the server, the field and the variable, never a value.

Servers kept in Pressloop's settings (`load_servers(document, stored=True)`) hold no secret at
all: each env or header value there is made only of references. The owner's own file may hold
literal values.
"""

from __future__ import annotations

import json
import os
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
SERVER_NAME_PATTERN = SERVER_NAME.pattern

# `${env:NAME}`: the value of the service's environment variable NAME, read when the transport
# starts. A stored value is made only of these (`STORED_VALUE`).
ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
STORED_VALUE = r"^(\$\{env:[A-Za-z_][A-Za-z0-9_]*\})*$"
NO_STORED_SECRETS = (
    "secrets are never stored: use ${env:NAME} and set NAME in the service's environment"
)
# What an environment variable's and an HTTP header's names may be.
ENV_KEY = r"^[A-Za-z_][A-Za-z0-9_]*$"
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
# A URL: http(s) and no whitespace, spelled out so that Python, pydantic and JSON Schema's regex
# engines read the same class (their `\s` differ).
_SPACE = "\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
URL_PATTERN = f"^https?://[^{_SPACE}]+$"


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

    def env_values(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's extra environment, `${env:NAME}` references replaced from `environ`
        (the service's environment by default)."""
        return _resolved(self.name, "env", self.env, environ)


class HttpServer(_Server):
    """A server reached over streamable HTTP."""

    url: str = Field(pattern=URL_PATTERN)
    headers: dict[str, SecretStr] = Field(default_factory=dict)

    def header_values(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The request headers, `${env:NAME}` references replaced from `environ` (the
        service's environment by default)."""
        return _resolved(self.name, "headers", self.headers, environ)


ServerConfig = StdioServer | HttpServer


def secret_fields(server: ServerConfig) -> tuple[str, dict[str, SecretStr]]:
    """The server's secret-bearing field: ("env", ...) or ("headers", ...)."""
    if isinstance(server, StdioServer):
        return "env", server.env
    return "headers", server.headers


def references(value: str) -> list[str]:
    """The environment variables a value refers to, in order."""
    return ENV_REFERENCE.findall(value)


def server_config(name: str, raw: Any, *, stored: bool = False) -> ServerConfig:
    """One server's entry, validated; a ConfigurationError names the server and the field.

    `stored`: the entry is to be kept in Pressloop's settings, so each env or header value must
    be made only of `${env:NAME}` references (the file may hold literal values)."""
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
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
        server = model.model_validate({**fields, "name": name})
    except ValidationError as invalid:
        raise ConfigurationError(f"MCP server {name!r}: {_problems(invalid)}") from None
    _check_secret_fields(server, stored=stored)
    return server


def _check_secret_fields(server: ServerConfig, *, stored: bool) -> None:
    field, values = secret_fields(server)
    key_pattern = ENV_KEY if field == "env" else HEADER_NAME
    what = "an environment variable" if field == "env" else "an HTTP header"
    for key, secret in values.items():
        where = f"MCP server {server.name!r}: {field}.{key}"
        if not re.fullmatch(key_pattern, key):
            raise ConfigurationError(f"{where}: {key!r} is not the name of {what}")
        value = secret.get_secret_value()
        rest = ENV_REFERENCE.sub("", value)
        if "${env:" in rest:
            raise ConfigurationError(
                f"{where}: a reference is written ${{env:NAME}}, NAME made of A-Z, a-z, 0-9 "
                "and '_' (not starting with a digit)"
            )
        if stored and rest:
            raise ConfigurationError(f"{where}: {NO_STORED_SECRETS}")


def _resolved(
    server: str, field: str, values: Mapping[str, SecretStr], environ: Mapping[str, str] | None
) -> dict[str, str]:
    source = os.environ if environ is None else environ
    resolved: dict[str, str] = {}
    for key, secret in values.items():
        value = secret.get_secret_value()
        for variable in references(value):
            if variable not in source:
                raise ConfigurationError(
                    f"MCP server {server!r}: {field}.{key} refers to the environment variable "
                    f"{variable}, which is not set in the service's environment"
                )
        resolved[key] = ENV_REFERENCE.sub(lambda match: source[match.group(1)], value)
    return resolved


def stored_entry(server: ServerConfig) -> dict[str, Any]:
    """The server's entry as a stored `mcpServers` document holds it: the keys the owner gave,
    env and header values as written (references only, once `stored` validation passed)."""
    entry = server.model_dump(mode="json", exclude_unset=True, exclude={"name"})
    field, values = secret_fields(server)
    if field in entry:
        entry[field] = {key: value.get_secret_value() for key, value in values.items()}
    return entry


def load_servers(config: Mapping[str, Any] | str, *, stored: bool = False) -> list[ServerConfig]:
    """Every server of an `{"mcpServers": {...}}` document (a mapping or its JSON text);
    `stored`: a document kept in Pressloop's settings, which holds no secret values."""
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
    return [server_config(name, raw, stored=stored) for name, raw in servers.items()]


def _problems(invalid: ValidationError) -> str:
    # Never the input: an env value or a header given in the wrong shape is still a secret.
    parts = []
    for error in invalid.errors(include_input=False, include_url=False)[:6]:
        where = ".".join(str(part) for part in error["loc"]) or "entry"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
