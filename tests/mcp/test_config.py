"""The owner's `mcpServers` document (`pressloop/mcp/config.py`): both transports, Pressloop's
own keys, a ConfigurationError naming the server and the field, and secrets never shown."""

from __future__ import annotations

from typing import Any

import pytest

from pressloop.errors import ConfigurationError
from pressloop.mcp.config import HttpServer, StdioServer, ToolRisk, load_servers, stored_entry

SECRET = "sk-live-123456"


def test_both_transports_and_the_owners_keys_are_read() -> None:
    stdio, http = load_servers(
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "fs"], "env": {"KEY": SECRET}},
                "search": {
                    "url": "https://mcp.example.com/mcp",
                    "headers": {"Authorization": f"Bearer {SECRET}"},
                    "risk": "read",
                    "tools": {"wipe": "off", "post": "destructive"},
                    "timeout_s": 5,
                },
            }
        }
    )
    assert isinstance(stdio, StdioServer) and stdio.env_values() == {"KEY": SECRET}
    assert stdio.timeout_s == 30.0
    assert isinstance(http, HttpServer) and http.timeout_s == 5
    assert http.header_values() == {"Authorization": f"Bearer {SECRET}"}
    assert http.override("wipe") is ToolRisk.OFF
    assert http.override("post") is ToolRisk.DESTRUCTIVE
    assert http.override("anything") is ToolRisk.READ
    assert stdio.override("anything") is None


@pytest.mark.parametrize(
    ("name", "entry", "said"),
    [
        ("a.b", {"command": "x"}, "'a.b' is invalid"),
        ("Files", {"command": "x"}, "'Files' is invalid"),
        ("files", {"type": "sse", "endpoint": "x"}, "'files': unknown transport 'sse'"),
        ("files", {"args": []}, "'files': no transport"),
        ("files", {"command": ""}, "'files': command:"),
        ("files", {"command": "x", "url": "http://h/"}, "not both"),
        ("files", {"url": "ftp://h/"}, "'files': url:"),
        ("files", {"command": "x", "risk": "maybe"}, "'files': risk:"),
        ("files", {"command": "x", "tools": {"t": "never"}}, "'files': tools.t:"),
        ("files", {"command": "x", "timeout_s": 0}, "'files': timeout_s:"),
        ("files", {"command": "x", "colour": "red"}, "'files': colour: Extra inputs"),
    ],
)
def test_bad_input_names_the_server_and_the_field(
    name: str, entry: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_servers({"mcpServers": {name: entry}})
    assert said in raised.value.message


def test_secrets_stay_out_of_reprs_and_errors() -> None:
    (server,) = load_servers(
        {"mcpServers": {"s": {"url": "https://h/mcp", "headers": {"X-Key": SECRET}}}}
    )
    assert SECRET not in repr(server) and SECRET not in str(server.model_dump())
    # A secret given in the wrong shape is refused without being echoed.
    with pytest.raises(ConfigurationError) as raised:
        load_servers({"mcpServers": {"s": {"command": "x", "env": {"KEY": [SECRET]}}}})
    assert "env.KEY" in raised.value.message
    assert SECRET not in raised.value.message and SECRET not in repr(raised.value)


def test_the_json_text_form_is_read_and_bad_json_is_a_configuration_error() -> None:
    (server,) = load_servers('{"mcpServers": {"x": {"command": "run"}}}')
    assert server.name == "x"
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        load_servers("{")


def test_env_references_are_resolved_when_the_values_are_read() -> None:
    stdio, http = load_servers(
        {
            "mcpServers": {
                "files": {"command": "x", "env": {"KEY": "${env:FILES_KEY}", "MODE": "fast"}},
                "search": {
                    "url": "https://h/mcp",
                    "headers": {"Authorization": "Bearer ${env:SEARCH_KEY}${env:SUFFIX}"},
                },
            }
        }
    )
    assert isinstance(stdio, StdioServer) and isinstance(http, HttpServer)
    environ = {"FILES_KEY": SECRET, "SEARCH_KEY": "abc", "SUFFIX": "-1"}
    assert stdio.env_values(environ) == {"KEY": SECRET, "MODE": "fast"}
    assert http.header_values(environ) == {"Authorization": "Bearer abc-1"}
    # A reference stays a name until it is read: neither the repr nor a dump holds a value.
    assert SECRET not in repr(stdio) and "FILES_KEY" not in repr(stdio)


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    (server,) = load_servers({"mcpServers": {"s": {"command": "x", "env": {"K": "${env:MY_K}"}}}})
    assert isinstance(server, StdioServer)
    monkeypatch.setenv("MY_K", SECRET)
    assert server.env_values() == {"K": SECRET}
    monkeypatch.delenv("MY_K")
    with pytest.raises(ConfigurationError, match="MY_K"):
        server.env_values()


def test_a_variable_that_is_not_set_names_the_server_the_field_and_the_variable() -> None:
    (server,) = load_servers(
        {"mcpServers": {"web": {"url": "https://h/", "headers": {"X-Key": "${env:WEB_KEY}"}}}}
    )
    assert isinstance(server, HttpServer)
    with pytest.raises(ConfigurationError) as raised:
        server.header_values({"OTHER": SECRET})
    message = raised.value.message
    assert "'web'" in message and "headers.X-Key" in message and "WEB_KEY" in message
    assert "not set" in message and SECRET not in message


def test_a_stored_document_holds_only_references() -> None:
    stored = {
        "mcpServers": {
            "files": {"command": "npx", "env": {"KEY": "${env:FILES_KEY}", "EMPTY": ""}},
            "search": {"url": "https://h/", "headers": {"X-Key": "${env:A}${env:B}"}},
        }
    }
    assert [s.name for s in load_servers(stored, stored=True)] == ["files", "search"]
    for entry, field in [
        ({"command": "x", "env": {"KEY": SECRET}}, "env.KEY"),
        ({"command": "x", "env": {"KEY": "${env:K} and more"}}, "env.KEY"),
        ({"url": "https://h/", "headers": {"Authorization": f"Bearer {SECRET}"}}, "headers"),
        ({"url": "https://h/", "headers": {"Authorization": "Bearer ${env:TOKEN}"}}, "headers"),
    ]:
        with pytest.raises(ConfigurationError) as raised:
            load_servers({"mcpServers": {"s": entry}}, stored=True)
        message = raised.value.message
        assert field in message and "secrets are never stored: use ${env:NAME}" in message
        assert SECRET not in message
        # The owner's own file keeps accepting literal values.
        (server,) = load_servers({"mcpServers": {"s": entry}})
        assert server.name == "s"


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"command": "x", "env": {"KEY": "${env:MY-KEY}"}}, "a reference is written ${env:NAME}"),
        ({"command": "x", "env": {"KEY": "${env:}"}}, "a reference is written"),
        ({"command": "x", "env": {"A=B": "v"}}, "'A=B' is not the name of an environment"),
        ({"url": "https://h/", "headers": {"Bad Name": "v"}}, "is not the name of an HTTP header"),
        ({"url": "https://h /x"}, "'s': url:"),
    ],
)
def test_malformed_references_and_names_are_refused_from_either_source(
    entry: dict[str, Any], said: str
) -> None:
    for stored in (False, True):
        with pytest.raises(ConfigurationError) as raised:
            load_servers({"mcpServers": {"s": entry}}, stored=stored)
        assert said in raised.value.message


def test_a_stored_entry_keeps_what_the_owner_gave_and_the_references() -> None:
    entry = {"command": "npx", "args": ["-y", "fs"], "env": {"K": "${env:K}"}, "risk": "read"}
    (server,) = load_servers({"mcpServers": {"files": {**entry, "type": "stdio"}}}, stored=True)
    assert stored_entry(server) == entry
    (again,) = load_servers({"mcpServers": {"files": stored_entry(server)}}, stored=True)
    assert again == server


@pytest.mark.parametrize("name", ["files\n", "a" * 65, ""])
def test_a_name_is_matched_whole(name: str) -> None:
    with pytest.raises(ConfigurationError, match="is invalid"):
        load_servers({"mcpServers": {name: {"command": "x"}}})
