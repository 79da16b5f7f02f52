"""`pressloop mcp-servers ...`: the MCP servers whose tools the agent uses (issue 16).

`list` shows both sources: the owner's file (`PRESSLOOP_MCP_CONFIG` or `<data dir>/mcp.json`,
read-only here, its env and header values masked) and the servers kept in the settings, which
`add` and `remove` change. A stored server holds no secret: its env and header values are
`${env:NAME}` references to the service's environment (quote them in the shell:
`--env 'API_KEY=${env:FILES_API_KEY}'`).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from pressloop.cli_common import console, errors, opened, run_command

if TYPE_CHECKING:
    from pressloop.runtime.mcp_servers_admin import McpServerEntry

mcp_servers_app = typer.Typer(
    no_args_is_help=True,
    help="MCP servers whose tools the agent uses: list, add, remove.",
)


class Risk(StrEnum):
    """A risk for the server's tools, or `off` (the agent never sees them)."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"
    OFF = "off"


def _pairs(entry: McpServerEntry) -> str:
    values = entry.env if entry.transport == "stdio" else entry.headers
    separator = "=" if entry.transport == "stdio" else ": "
    return "\n".join(f"{key}{separator}{value}" for key, value in values.items())


def _risks(entry: McpServerEntry) -> str:
    parts = [f"all: {entry.risk}"] if entry.risk else []
    parts += [f"{tool}: {risk}" for tool, risk in entry.tools.items()]
    return "\n".join(parts)


def servers_table(servers: list[McpServerEntry]) -> Table:
    table = Table(
        "name", "source", "transport", "command / url", "env / headers", "risk", "timeout"
    )
    for s in servers:
        target = " ".join([s.command or "", *s.args]) if s.transport == "stdio" else s.url
        table.add_row(
            escape(s.name),
            s.source,
            s.transport,
            escape(target or ""),
            escape(_pairs(s)),
            escape(_risks(s)),
            f"{s.timeout_s:g} s",
        )
    return table


@mcp_servers_app.command("list")
def mcp_servers_list() -> None:
    """Every configured server, from the file and from the settings (no secret value)."""

    async def show() -> int:
        async with opened() as service:
            listing = await service.list_mcp_servers()
        if listing.config_file:
            errors.print(f"file: {escape(listing.config_file)}", highlight=False, soft_wrap=True)
        for problem in listing.problems:
            errors.print(f"[yellow]problem:[/] {escape(problem)}", soft_wrap=True)
        if listing.servers:
            console.print(servers_table(listing.servers))
        else:
            console.print("no MCP servers are configured", highlight=False)
        return 0

    run_command(show())


def _split(values: list[str], separator: str, option: str, shape: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        key, found, rest = value.partition(separator)
        if not found or not key.strip():
            raise typer.BadParameter(f"{value!r}: write it {shape}", param_hint=option)
        pairs[key.strip()] = rest.strip() if separator == ":" else rest
    return pairs


def _entry_from_json(name: str, text: str) -> dict[str, Any]:
    try:
        entry = json.loads(text)
    except json.JSONDecodeError as bad:
        raise typer.BadParameter(f"not valid JSON ({bad.msg})", param_hint="--json") from None
    if isinstance(entry, dict) and isinstance(entry.get("mcpServers"), dict):
        servers = entry["mcpServers"]
        if name not in servers:
            raise typer.BadParameter(f"its mcpServers has no {name!r}", param_hint="--json")
        entry = servers[name]
    if not isinstance(entry, dict):
        raise typer.BadParameter("the server's entry must be a JSON object", param_hint="--json")
    # `type` names the transport in some desktop configs; `command` or `url` decides here.
    return {key: value for key, value in entry.items() if key not in ("type", "transport")}


@mcp_servers_app.command("add")
def mcp_servers_add(
    name: Annotated[str, typer.Argument(help="The server's name (a-z, 0-9, '_', '-').")],
    command: Annotated[
        str | None, typer.Option("--command", help="Start this program (stdio).")
    ] = None,
    arg: Annotated[
        list[str] | None, typer.Option("--arg", help="An argument of the command (repeat).")
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="KEY=${env:VAR}: a variable of the command (repeat)."),
    ] = None,
    cwd: Annotated[str | None, typer.Option("--cwd", help="The command's directory.")] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="Reach the server here (streamable HTTP).")
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", help="'Name: ${env:VAR}': a request header (repeat)."),
    ] = None,
    risk: Annotated[
        Risk | None, typer.Option("--risk", help="The risk of every tool, or off.")
    ] = None,
    tool: Annotated[
        list[str] | None,
        typer.Option("--tool", help="TOOL=RISK: one tool's risk, or off (repeat)."),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds a tool call may take.")
    ] = None,
    as_json: Annotated[
        str | None,
        typer.Option("--json", help="The server's entry as JSON, instead of the options."),
    ] = None,
) -> None:
    """Add a server to the settings, or replace the one of that name: --command CMD (stdio)
    or --url URL (HTTP), or --json '{...}'. Env and header values are ${env:NAME} references:
    secrets are never stored."""
    flags = [command, arg, env, cwd, url, header, risk, tool, timeout]
    if as_json is not None:
        if any(value for value in flags):
            raise typer.BadParameter("give --json or the other options, not both")
        entry = _entry_from_json(name, as_json)
    else:
        if (command is None) == (url is None):
            raise typer.BadParameter("give exactly one of --command or --url (or --json)")
        entry = {}
        if command is not None:
            entry["command"] = command
            if arg:
                entry["args"] = list(arg)
            if env:
                entry["env"] = _split(env, "=", "--env", "KEY=${env:VAR}")
            if cwd is not None:
                entry["cwd"] = cwd
        else:
            if arg or env or cwd is not None:
                raise typer.BadParameter("--arg, --env and --cwd go with --command, not --url")
            entry["url"] = url
            if header:
                entry["headers"] = _split(header, ":", "--header", "'Name: ${env:VAR}'")
        if command is not None and header:
            raise typer.BadParameter("--header goes with --url, not --command")
        if risk is not None:
            entry["risk"] = risk.value
        if tool:
            tools = _split(tool, "=", "--tool", "TOOL=RISK")
            known = {r.value for r in Risk}
            for tool_name, tool_risk in tools.items():
                if tool_risk not in known:
                    raise typer.BadParameter(
                        f"{tool_name}: {tool_risk!r} is not one of {', '.join(sorted(known))}",
                        param_hint="--tool",
                    )
            entry["tools"] = tools
        if timeout is not None:
            entry["timeout_s"] = timeout

    async def add() -> int:
        async with opened() as service:
            server = await service.put_mcp_server(name, entry)
        console.print(servers_table([server]))
        if server.unset:
            errors.print(
                f"[yellow]note:[/] set {escape(', '.join(server.unset))} in the service's "
                "environment before the agent uses this server",
                soft_wrap=True,
            )
        return 0

    run_command(add())


@mcp_servers_app.command("remove")
def mcp_servers_remove(
    name: Annotated[str, typer.Argument(help="The server's name.")],
) -> None:
    """Remove a server from the settings (the file's servers are changed in the file)."""

    async def remove() -> int:
        async with opened() as service:
            await service.delete_mcp_server(name)
        console.print(f"MCP server {escape(name)} removed", highlight=False)
        return 0

    run_command(remove())
