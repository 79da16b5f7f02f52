"""The owner's `mcpServers` document (`pressloop/mcp/config.py`): both transports, Pressloop's
own keys, a ConfigurationError naming the server and the field, and secrets never shown."""

from __future__ import annotations

from typing import Any

import pytest

from pressloop.errors import ConfigurationError
from pressloop.mcp.config import HttpServer, StdioServer, ToolRisk, load_servers

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
