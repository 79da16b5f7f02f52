"""MCP client: the agent uses tools of outside MCP servers as actions.

`config` reads the owner's `{"mcpServers": ...}` document, `connection` keeps one server
running and talks to it, `catalog` turns its tools into `ActionSpec`s for a `Registry`.
Below the engine, above actions: it may import actions, errors, config, clock and backoff.

The names below load their module on first use: the `mcp` SDK costs a process about 30 MiB,
and a process whose owner configured no MCP server never needs it (`config` and `errors` are
light and import no SDK).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pressloop.mcp.catalog import (
        catalog_specs,
        catalog_specs_and_errors,
        server_specs,
        tool_spec,
    )
    from pressloop.mcp.config import (
        HttpServer,
        ServerConfig,
        StdioServer,
        ToolRisk,
        load_servers,
    )
    from pressloop.mcp.connection import McpConnection
    from pressloop.mcp.errors import McpServerError

_WHERE = {
    "catalog_specs": "catalog",
    "catalog_specs_and_errors": "catalog",
    "server_specs": "catalog",
    "tool_spec": "catalog",
    "HttpServer": "config",
    "ServerConfig": "config",
    "StdioServer": "config",
    "ToolRisk": "config",
    "load_servers": "config",
    "McpConnection": "connection",
    "McpServerError": "errors",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'pressloop.mcp' has no attribute {name!r}")
    return getattr(importlib.import_module(f"pressloop.mcp.{module}"), name)


__all__ = [
    "HttpServer",
    "McpConnection",
    "McpServerError",
    "ServerConfig",
    "StdioServer",
    "ToolRisk",
    "catalog_specs",
    "catalog_specs_and_errors",
    "load_servers",
    "server_specs",
    "tool_spec",
]
