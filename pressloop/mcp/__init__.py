"""MCP client: the agent uses tools of outside MCP servers as actions.

`config` reads the owner's `{"mcpServers": ...}` document, `connection` keeps one server
running and talks to it, `catalog` turns its tools into `ActionSpec`s for a `Registry`.
Below the engine, above actions: it may import actions, errors, config, clock and backoff.
"""

from pressloop.mcp.catalog import catalog_specs, catalog_specs_and_errors, server_specs, tool_spec
from pressloop.mcp.config import HttpServer, ServerConfig, StdioServer, ToolRisk, load_servers
from pressloop.mcp.connection import McpConnection
from pressloop.mcp.errors import McpServerError

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
