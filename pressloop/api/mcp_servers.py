"""The MCP servers whose tools the agent uses (issue 16): list them (viewer), add or replace
one and remove one (admin), under `/v1/settings/mcp-servers`.

A server comes from the owner's file (`PRESSLOOP_MCP_CONFIG` or `<data dir>/mcp.json`, which
Pressloop only reads: its names answer 409 here) or from the settings, where this API keeps it.
Secrets are never stored or shown: a stored server's env and header values are `${env:NAME}`
references to the service's environment, shown as written; a file server's values are masked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Response
from pydantic import AfterValidator, Discriminator, Field, Tag

from pressloop.api.auth import Admin, ServiceDep, Viewer
from pressloop.api.errors import error_responses
from pressloop.api.schemas import RecordOut, Request
from pressloop.mcp.config import (
    ENV_KEY,
    HEADER_NAME,
    NO_STORED_SECRETS,
    SERVER_NAME_PATTERN,
    STORED_VALUE,
    URL_PATTERN,
    ToolRisk,
)

router = APIRouter(prefix="/v1/settings/mcp-servers", tags=["settings"])

ServerName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=64,
        pattern=SERVER_NAME_PATTERN,
        description="1-64 of a-z, 0-9, '_' and '-': it prefixes the server's tools' action "
        "names (`name.tool`).",
    ),
]


def _only_references(value: str) -> str:
    if not re.fullmatch(STORED_VALUE, value):
        raise ValueError(NO_STORED_SECRETS)
    return value


# The rule is checked by a validator (its message says what to do) and shown as a pattern.
Reference = Annotated[
    str,
    AfterValidator(_only_references),
    Field(
        max_length=300,
        description="Only `${env:NAME}` references to the service's environment: secrets are "
        "never stored.",
        examples=["${env:SEARCH_API_KEY}"],
        json_schema_extra={"pattern": STORED_VALUE},
    ),
]


def _names(pattern: str, what: str) -> Callable[[dict[str, str]], dict[str, str]]:
    def check(values: dict[str, str]) -> dict[str, str]:
        if len(values) > MAX_KEYS:
            raise ValueError(f"at most {MAX_KEYS} entries")
        for key in values:
            if not re.fullmatch(pattern, key) or len(key) > MAX_NAME:
                raise ValueError(f"{key[:MAX_NAME]!r} is not the name of {what}")
        return values

    return check


# Small enough that the largest body the schema allows (and one item over) stays under the
# body limit: 413 is not how a schema's bound is answered.
MAX_NAME = 100
MAX_KEYS = 50
# The keys' rule said as JSON Schema's `propertyNames` (pydantic would say `patternProperties`,
# which lets other keys through).
EnvValues = Annotated[
    dict[str, Reference],
    AfterValidator(_names(ENV_KEY, "an environment variable")),
    Field(
        default_factory=dict,
        json_schema_extra={
            "propertyNames": {"pattern": ENV_KEY, "maxLength": MAX_NAME},
            "maxProperties": MAX_KEYS,
        },
    ),
]
HeaderValues = Annotated[
    dict[str, Reference],
    AfterValidator(_names(HEADER_NAME, "an HTTP header")),
    Field(
        default_factory=dict,
        json_schema_extra={
            "propertyNames": {"pattern": HEADER_NAME, "maxLength": MAX_NAME},
            "maxProperties": MAX_KEYS,
        },
    ),
]
Text = Annotated[str, Field(max_length=500)]
ToolName = Annotated[str, Field(min_length=1, max_length=100)]


class _ServerIn(Request):
    risk: ToolRisk | None = Field(
        default=None,
        description="The risk of every tool of the server (`off`: the agent sees none), "
        "instead of what the tools' annotations say.",
    )
    tools: dict[ToolName, ToolRisk] = Field(
        default_factory=dict,
        max_length=100,
        description='Per tool: a risk, or `off` ({"delete_file": "destructive"}).',
    )
    timeout_s: float = Field(
        default=30.0, gt=0, le=3600, description="Seconds a tool call may take."
    )


class StdioServerIn(_ServerIn):
    """A server Pressloop starts as a child process (stdin/stdout)."""

    command: str = Field(min_length=1, max_length=500, examples=["npx"])
    args: list[Text] = Field(default_factory=list, max_length=50)
    env: EnvValues
    cwd: Text | None = None


class HttpServerIn(_ServerIn):
    """A server reached over streamable HTTP."""

    url: str = Field(max_length=2000, pattern=URL_PATTERN, examples=["https://mcp.example/mcp"])
    headers: HeaderValues


def _transport(value: Any) -> str | None:
    if isinstance(value, dict):
        return "stdio" if "command" in value else "http" if "url" in value else None
    return "stdio" if isinstance(value, StdioServerIn) else "http"


McpServerIn = Annotated[
    Annotated[StdioServerIn, Tag("stdio")] | Annotated[HttpServerIn, Tag("http")],
    Discriminator(
        _transport,
        custom_error_type="no_transport",
        custom_error_message="give 'command' (stdio) or 'url' (streamable HTTP)",
    ),
]


class McpServerOut(RecordOut):
    name: str
    source: Literal["file", "settings"] = Field(
        description="file: the owner's file (read-only here); settings: kept by this API."
    )
    transport: Literal["stdio", "http"]
    command: str | None
    args: list[str]
    cwd: str | None
    url: str | None
    env: dict[str, str] = Field(
        description="Stored servers: the references as written; the file's: values masked."
    )
    headers: dict[str, str] = Field(
        description="Stored servers: the references as written; the file's: values masked."
    )
    risk: ToolRisk | None
    tools: dict[str, ToolRisk]
    timeout_s: float
    unset: list[str] = Field(
        description="Variables its references name that the service's environment does not "
        "set: the server cannot start until they are."
    )


class McpServersOut(RecordOut):
    config_file: str | None = Field(description="The file read, if any (PRESSLOOP_MCP_CONFIG).")
    servers: list[McpServerOut] = Field(description="The file's first, then the stored ones.")
    problems: list[str] = Field(
        description="What could not be read: a server left out of `servers` says why here."
    )


@router.get("")
async def list_mcp_servers(service: ServiceDep, _who: Viewer) -> McpServersOut:
    """Every configured server, from the file and from the settings; no secret value."""
    return McpServersOut.of(await service.list_mcp_servers())


@router.get("/{name}")
async def show_mcp_server(name: ServerName, service: ServiceDep, _who: Viewer) -> McpServerOut:
    return McpServerOut.of(await service.get_mcp_server(name))


@router.put("/{name}", responses=error_responses(409, 503))
async def put_mcp_server(
    name: ServerName, body: McpServerIn, service: ServiceDep, _who: Admin
) -> McpServerOut:
    """Add the server to the settings, or replace the one of that name: `command` (and
    `args`, `env`, `cwd`) or `url` (and `headers`), plus `risk`, `tools` and `timeout_s`.
    Env and header values are `${env:NAME}` references (422 otherwise); a name the file gives
    is 409; 503 while the file cannot be read (its names are unknown)."""
    entry = body.model_dump(mode="json", exclude_unset=True)
    return McpServerOut.of(await service.put_mcp_server(name, entry))


@router.delete("/{name}", status_code=204, responses=error_responses(409))
async def delete_mcp_server(name: ServerName, service: ServiceDep, _who: Admin) -> Response:
    """Remove a server from the settings (404 if it is not there; 409 for the file's)."""
    await service.delete_mcp_server(name)
    return Response(status_code=204)
