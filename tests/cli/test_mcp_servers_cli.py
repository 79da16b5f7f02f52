"""`pressloop mcp-servers list | add | remove` (issue 16), the real command in a subprocess on
SQLite: stored servers hold only `${env:NAME}` references, the file's are shown masked and are
never changed, and mistakes exit 2 with one line."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.cli.conftest import Pressloop
from tests.mcp.support import TOOLBOX

SECRET = "sk-live-0123456789"


async def test_add_list_and_remove_servers_from_the_terminal(
    pressloop: Pressloop, tmp_path: Path
) -> None:
    file = tmp_path / "desktop-mcp.json"
    file.write_text(
        json.dumps({"mcpServers": {"desk": {"command": "desk-mcp", "env": {"KEY": SECRET}}}}),
        encoding="utf-8",
    )
    env = {"PRESSLOOP_MCP_CONFIG": str(file)}
    stdio, http = await asyncio.gather(
        pressloop(
            "mcp-servers",
            "add",
            "files",
            "--command",
            "npx",
            "--arg",
            "-y",
            "--arg",
            "fs-server",
            "--env",
            "FS_TOKEN=${env:FS_TOKEN}",
            "--risk",
            "read",
            "--tool",
            "write_file=destructive",
            "--timeout",
            "12",
            env={**env, "FS_TOKEN": "set"},
        ),
        pressloop(
            "mcp-servers",
            "add",
            "search",
            "--url",
            "https://mcp.example.com/mcp",
            "--header",
            "Authorization: ${env:SEARCH_AUTH}",
            env=env,
        ),
    )
    assert stdio.code == 0, stdio.err
    assert "npx -y fs-server" in stdio.out and "FS_TOKEN=${env:FS_TOKEN}" in stdio.out
    assert "all: read" in stdio.out and "write_file: destructive" in stdio.out
    assert "12 s" in stdio.out and "note:" not in stdio.err
    assert http.code == 0, http.err
    assert "Authorization: ${env:SEARCH_AUTH}" in http.out
    # The variable is not set where the command ran: it says so.
    assert "set SEARCH_AUTH in the service's environment" in http.err

    from_json = await pressloop(
        "mcp-servers",
        "add",
        "docs",
        "--json",
        json.dumps({"mcpServers": {"docs": {"type": "http", "url": "https://docs.example/mcp"}}}),
        env=env,
    )
    assert from_json.code == 0, from_json.err

    listed = await pressloop("mcp-servers", "list", env=env)
    assert listed.code == 0, listed.err
    assert f"file: {file}" in listed.err
    lines = {line.split()[1]: line for line in listed.out.splitlines() if "│" in line[:3]}
    assert "file" in lines["desk"] and "KEY=[secret]" in lines["desk"]
    for name in ("files", "search", "docs"):
        assert "settings" in lines[name], listed.out
    assert SECRET not in listed.out + listed.err

    removed, taken, file_server = await asyncio.gather(
        pressloop("mcp-servers", "remove", "files", env=env),
        pressloop("mcp-servers", "add", "desk", "--command", "x", env=env),
        pressloop("mcp-servers", "remove", "desk", env=env),
    )
    assert removed.code == 0 and "MCP server files removed" in removed.out
    assert taken.code == 2 and "configured in the file" in taken.err
    assert file_server.code == 2 and "remove it there" in file_server.err
    again = await pressloop("mcp-servers", "remove", "files", env=env)
    assert again.code == 2 and "'files' is not in the settings" in again.err
    after = await pressloop("mcp-servers", "list", env=env)
    assert "files" not in after.out and "search" in after.out and "desk" in after.out


async def test_mistakes_exit_2_with_one_line_and_never_store_a_secret(
    pressloop: Pressloop,
) -> None:
    literal, header, both, neither, bad_tool, bad_json, bad_name = await asyncio.gather(
        pressloop("mcp-servers", "add", "files", "--command", "x", "--env", f"KEY={SECRET}"),
        pressloop(
            "mcp-servers", "add", "web", "--url", "https://h/", "--header", f"X-Key: {SECRET}"
        ),
        pressloop("mcp-servers", "add", "files", "--command", "x", "--url", "https://h/"),
        pressloop("mcp-servers", "add", "files", "--risk", "read"),
        pressloop("mcp-servers", "add", "files", "--command", "x", "--tool", "t=maybe"),
        pressloop("mcp-servers", "add", "files", "--json", "{"),
        pressloop("mcp-servers", "add", "Files.x", "--command", "x"),
    )
    for result in (literal, header):
        assert result.code == 2, result.err
        assert "secrets are never stored: use ${env:NAME}" in result.err
        assert SECRET not in result.out + result.err
    assert "env.KEY" in literal.err and "headers.X-Key" in header.err
    assert both.code == 2 and "exactly one of --command or --url" in both.err
    assert neither.code == 2 and "exactly one of --command or --url" in neither.err
    assert bad_tool.code == 2 and "'maybe' is not one of" in bad_tool.err
    assert bad_json.code == 2 and "not valid JSON" in bad_json.err
    assert bad_name.code == 2 and "'Files.x' is invalid" in bad_name.err
    for result in (literal, header, both, bad_name):
        assert "Traceback" not in result.err
    listed = await pressloop("mcp-servers", "list")
    assert listed.code == 0 and "no MCP servers are configured" in listed.out


async def test_doctor_starts_each_server_and_says_what_it_offers_or_why_not(
    pressloop: Pressloop, tmp_path: Path
) -> None:
    file = tmp_path / "mcp.json"
    servers = {
        "box": {"command": sys.executable, "args": [str(TOOLBOX), "stdio"]},
        "gone": {"command": str(tmp_path / "no-such-server")},
    }
    file.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    env = {"PRESSLOOP_MCP_CONFIG": str(file)}
    assert (await pressloop("db", "upgrade", env=env)).code == 0
    doctor = await pressloop("doctor", env=env)
    assert "MCP server box: started; 9 tools (1 destructive, 5 read, 3 write)" in doctor.out
    assert "MCP server gone: MCP server 'gone': could not be started" in doctor.out
    assert doctor.code == 1  # a server that does not start is a failed check
