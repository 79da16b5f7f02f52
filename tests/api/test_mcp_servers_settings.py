"""MCP servers through `/v1/settings/mcp-servers` (issue 16), on a real app over SQLite and
PostgreSQL: viewers list, admins add, replace and remove; the owner's file is read-only; no
secret is ever stored or shown."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pressloop.mcp.config import StdioServer
from pressloop.store import settings_repo
from tests.api.conftest import ApiFactory

BASE = "/v1/settings/mcp-servers"
SECRET = "sk-live-0123456789"
FILES = {
    "command": "npx",
    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
    "env": {"FS_TOKEN": "${env:PRESSLOOP_TEST_FS_TOKEN}"},
    "risk": "read",
    "tools": {"write_file": "destructive", "move_file": "off"},
    "timeout_s": 12,
}
SEARCH = {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "${env:SEARCH_AUTH}"}}


async def test_admins_add_replace_and_remove_servers_and_viewers_list_them(
    make_api: ApiFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEARCH_AUTH", raising=False)
    monkeypatch.setenv("PRESSLOOP_TEST_FS_TOKEN", SECRET)
    api = await make_api([])
    empty = await api.client.get(BASE, headers=api.auth("viewer"))
    assert empty.status_code == 200, empty.text
    assert empty.json() == {"config_file": None, "servers": [], "problems": []}

    for role in ("viewer", "operator"):
        refused = await api.client.put(f"{BASE}/files", json=FILES, headers=api.auth(role))
        assert refused.status_code == 403, refused.text
    added = await api.client.put(f"{BASE}/files", json=FILES, headers=api.auth("admin"))
    assert added.status_code == 200, added.text
    shown = added.json()
    assert shown["source"] == "settings" and shown["transport"] == "stdio"
    assert shown["env"] == {"FS_TOKEN": "${env:PRESSLOOP_TEST_FS_TOKEN}"}
    assert shown["tools"] == {"write_file": "destructive", "move_file": "off"}
    assert shown["risk"] == "read" and shown["timeout_s"] == 12 and shown["unset"] == []
    search = await api.client.put(f"{BASE}/search", json=SEARCH, headers=api.auth("admin"))
    assert search.status_code == 200, search.text
    assert search.json()["unset"] == ["SEARCH_AUTH"]  # the server cannot start yet: said

    listed = (await api.client.get(BASE, headers=api.auth("viewer"))).json()
    assert [(s["name"], s["source"], s["transport"]) for s in listed["servers"]] == [
        ("files", "settings", "stdio"),
        ("search", "settings", "http"),
    ]
    assert listed["servers"][1]["url"] == SEARCH["url"]
    one = await api.client.get(f"{BASE}/search", headers=api.auth("viewer"))
    assert one.json()["headers"] == {"Authorization": "${env:SEARCH_AUTH}"}

    # The stored document is the desktop format, with the references and no value.
    async with api.service.database.read() as conn:
        stored = await settings_repo.get_setting(conn, "mcp_servers")
    assert stored == {"mcpServers": {"files": FILES, "search": SEARCH}}
    assert SECRET not in json.dumps(stored) and SECRET not in json.dumps(listed)
    # The service's servers resolve the references when they are read.
    sources = await api.service.mcp_server_sources()
    (files,) = [s for s in sources.servers if s.name == "files"]
    assert isinstance(files, StdioServer) and files.env_values() == {"FS_TOKEN": SECRET}

    # Replacing keeps one server of that name; removing makes it unknown.
    replaced = await api.client.put(
        f"{BASE}/files", json={"command": "uvx", "args": ["fs"]}, headers=api.auth("admin")
    )
    assert replaced.json()["command"] == "uvx" and replaced.json()["env"] == {}
    for role in ("viewer", "operator"):
        kept = await api.client.delete(f"{BASE}/files", headers=api.auth(role))
        assert kept.status_code == 403
    removed = await api.client.delete(f"{BASE}/files", headers=api.auth("admin"))
    assert removed.status_code == 204, removed.text
    gone = await api.client.get(f"{BASE}/files", headers=api.auth("viewer"))
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
    again = await api.client.delete(f"{BASE}/files", headers=api.auth("admin"))
    assert again.status_code == 404 and "'files'" in again.json()["error"]["message"]
    names = [s["name"] for s in (await api.client.get(BASE, headers=api.auth())).json()["servers"]]
    assert names == ["search"]


@pytest.mark.parametrize(
    ("name", "entry", "said"),
    [
        ("files", {"command": "x", "env": {"KEY": SECRET}}, "secrets are never stored"),
        (
            "search",
            {"url": "https://h/", "headers": {"Authorization": f"Bearer {SECRET}"}},
            "use ${env:NAME} and set NAME in the service's environment",
        ),
        ("files", {"command": "x", "env": {"A=B": "${env:A}"}}, "not the name of an environment"),
        ("files", {"args": ["x"]}, "give 'command' (stdio) or 'url' (streamable HTTP)"),
        ("files", {"command": "x", "url": "https://h/"}, "url: Extra inputs"),
        ("files", {"url": "ftp://h/"}, "url"),
        ("files", {"command": "x", "risk": "maybe"}, "risk"),
        ("files", {"command": "x", "timeout_s": 0}, "timeout_s"),
        ("Files", {"command": "x"}, "name"),
        ("a.b", {"command": "x"}, "name"),
    ],
)
async def test_invalid_servers_are_refused_whole_and_never_echo_a_secret(
    make_api: ApiFactory, name: str, entry: dict[str, object], said: str
) -> None:
    api = await make_api([])
    refused = await api.client.put(f"{BASE}/{name}", json=entry, headers=api.auth("admin"))
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_request" and said in error["message"]
    assert SECRET not in refused.text
    listed = await api.client.get(BASE, headers=api.auth("viewer"))
    assert listed.json()["servers"] == []


async def test_the_files_servers_are_shown_masked_and_never_changed_here(
    make_api: ApiFactory, tmp_path: Path
) -> None:
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "desk": {"command": "desk-mcp", "env": {"DESK_KEY": SECRET}},
                    "web": {"url": "https://w/mcp", "headers": {"X-Key": SECRET}, "risk": "off"},
                    "broken": {"command": "x", "colour": "red"},
                }
            }
        ),
        encoding="utf-8",
    )
    api = await make_api([])  # the data directory is tmp_path: its mcp.json is read
    await api.client.put(f"{BASE}/mine", json={"command": "mine"}, headers=api.auth("admin"))
    listed = await api.client.get(BASE, headers=api.auth("viewer"))
    assert SECRET not in listed.text
    body = listed.json()
    assert body["config_file"] == str(tmp_path / "mcp.json")
    assert [(s["name"], s["source"]) for s in body["servers"]] == [
        ("desk", "file"),
        ("web", "file"),
        ("mine", "settings"),
    ]
    desk, web, _mine = body["servers"]
    assert desk["env"] == {"DESK_KEY": "[secret]"}
    assert web["headers"] == {"X-Key": "[secret]"} and web["risk"] == "off"
    (problem,) = body["problems"]
    assert "'broken'" in problem and "colour" in problem

    for name in ("desk", "broken"):  # an invalid entry's name is still the file's
        taken = await api.client.put(
            f"{BASE}/{name}", json={"command": "x"}, headers=api.auth("admin")
        )
        assert taken.status_code == 409, taken.text
        assert "configured in the file" in taken.json()["error"]["message"]
        kept = await api.client.delete(f"{BASE}/{name}", headers=api.auth("admin"))
        assert kept.status_code == 409, kept.text
    assert (await api.client.get(f"{BASE}/desk", headers=api.auth())).json()["command"] == (
        "desk-mcp"
    )

    # A file that cannot be read: its names are unknown, so nothing is added until it is fixed;
    # what is stored is still listed and can be removed.
    (tmp_path / "mcp.json").write_text('{"mcpServers": {"desk": ', encoding="utf-8")
    unreadable = await api.client.put(
        f"{BASE}/new", json={"command": "x"}, headers=api.auth("admin")
    )
    assert unreadable.status_code == 503 and "not valid JSON" in unreadable.text
    listed = (await api.client.get(BASE, headers=api.auth("viewer"))).json()
    assert [s["name"] for s in listed["servers"]] == ["mine"]
    assert "not valid JSON" in listed["problems"][0]
    assert (await api.client.delete(f"{BASE}/mine", headers=api.auth("admin"))).status_code == 204


async def test_concurrent_changes_are_all_kept(make_api: ApiFactory) -> None:
    api = await make_api([])
    names = [f"s{i}" for i in range(8)]
    answers = await asyncio.gather(
        *(
            api.client.put(f"{BASE}/{name}", json={"command": name}, headers=api.auth("admin"))
            for name in names
        )
    )
    assert [a.status_code for a in answers] == [200] * len(names)
    listed = (await api.client.get(BASE, headers=api.auth("viewer"))).json()
    assert [s["name"] for s in listed["servers"]] == names
    removed = await asyncio.gather(
        *(api.client.delete(f"{BASE}/{name}", headers=api.auth("admin")) for name in names[:4])
    )
    assert [r.status_code for r in removed] == [204] * 4
    listed = (await api.client.get(BASE, headers=api.auth("viewer"))).json()
    assert [s["name"] for s in listed["servers"]] == names[4:]
