"""Pressloop's own MCP server driven by a client others wrote: the MCP Inspector's CLI
(`@modelcontextprotocol/inspector` 0.15.0 from npm, the TypeScript SDK underneath; `make test`
installs it, tests/support/npm.py), against a real `pressloop serve` over streamable HTTP and a
real `pressloop mcp` over stdio, each call one `mcp-inspector --cli ... --method ...` process.

Inspector 0.15.0's CLI sends no header. It has no `--header` option, and its HTTP transport is
`new StreamableHTTPClientTransport(url)` with no `requestInit` (cli/build/transport.js); a URL
with credentials in it is refused by Node's fetch, and Pressloop reads the token from
`Authorization: Bearer` only. So straight against `/mcp` it can show one thing: a request without
a token is refused. The calls with a token go through `TokenRelay`, a reverse proxy in front of
serve that adds the header, as a gateway holding the credentials would. The official Python
client makes the same calls with the header itself in test_http.py.
"""

from __future__ import annotations

import getpass
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mcp_server.conftest import ANSWER, Served
from tests.support.npm import node, npm_bin
from tests.support.processes import command

INSPECTOR_S = 90.0
# Headers a relay does not pass on: the hop's own, and those it sets itself.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
              "content-encoding", "accept-encoding", "authorization"}  # fmt: skip
# Pressloop's tools besides the actions (chat and the approvals).
OWN_TOOLS = {"chat", "list_approvals", "approve", "reject"}


class TokenRelay:
    """A reverse proxy to `target` (serve's address) that adds `Authorization: Bearer <token>`
    to each request.

    POST and DELETE are passed on and their answers returned whole (stateless, Pressloop ends
    each answer's stream once the result is in it). GET, the standalone notification stream, is
    answered 405, as the protocol lets a server do: Pressloop, stateless, sends nothing on it,
    and the relay would have to hold it open until serve stops."""

    def __init__(self, target: str, token: str) -> None:
        self.target = target.rstrip("/")
        self.token = token
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/mcp"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        relay = self

        class Relay(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def _relay(self) -> None:
                relay.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                headers["Authorization"] = f"Bearer {relay.token}"
                with httpx.Client(timeout=INSPECTOR_S, trust_env=False) as client:
                    answer = client.request(
                        self.command, relay.target + self.path, headers=headers, content=body
                    )
                kept = [
                    (k, v) for k, v in answer.headers.multi_items() if k.lower() not in HOP_BY_HOP
                ]
                self._answer(answer.status_code, kept, answer.content)

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                relay.requests += 1
                self._answer(405, [("Allow", "POST, DELETE")], b"")

            do_POST = do_DELETE = _relay  # noqa: N815 - the stdlib's names

            def log_message(self, *_args: object) -> None:
                return None

        return Relay

    @contextmanager
    def running(self) -> Iterator[TokenRelay]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


@dataclass(kw_only=True)
class Inspected:
    """One run of the Inspector's CLI: its exit code, what it printed, the JSON result."""

    code: int
    out: str
    err: str

    @property
    def result(self) -> dict[str, Any]:
        assert self.code == 0, f"the Inspector failed ({self.code}):\n{self.err}\n{self.out}"
        answer: dict[str, Any] = json.loads(self.out)
        return answer

    def text(self) -> str:
        """The first text block of a tool result."""
        first = self.result["content"][0]
        assert first["type"] == "text", self.result
        text: str = first["text"]
        return text


def inspector(target: list[str], *options: str, env: dict[str, str], cwd: Path) -> Inspected:
    """`mcp-inspector --cli TARGET... OPTIONS...` (TARGET: a URL, or a command and its args)."""
    done = subprocess.run(
        [node(), str(npm_bin("mcp-inspector")), "--cli", *target, *options],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=INSPECTOR_S,
        check=False,
    )
    return Inspected(code=done.returncode, out=done.stdout, err=done.stderr)


def list_tools(target: list[str], served: Served) -> dict[str, dict[str, Any]]:
    listed = inspector(target, "--method", "tools/list", env=served.server.env, cwd=home(served))
    return {tool["name"]: tool for tool in listed.result["tools"]}


def call_tool(target: list[str], served: Served, tool: str, **arguments: str) -> Inspected:
    pairs = [f"{key}={value}" for key, value in arguments.items()]
    options = ["--method", "tools/call", "--tool-name", tool]
    if pairs:
        options += ["--tool-arg", *pairs]
    return inspector(target, *options, env=served.server.env, cwd=home(served))


def home(served: Served) -> Path:
    return served.server.home


def stdio(*args: str) -> list[str]:
    """`pressloop mcp ARGS` as the Inspector starts it (acting as the local user); it gets the
    Inspector's environment, so serve's data directory and database."""
    return [*command(), "mcp", *args]


@pytest.fixture(scope="module")
def relays(served: Served) -> Iterator[dict[str, str]]:
    """role -> the URL of a relay to serve's /mcp with a token of that role."""
    with (
        TokenRelay(served.server.url, served.tokens["viewer"]).running() as viewer,
        TokenRelay(served.server.url, served.tokens["operator"]).running() as operator,
        TokenRelay(served.server.url, "plt_not-a-token").running() as invalid,
    ):
        yield {"viewer": viewer.url, "operator": operator.url, "invalid": invalid.url}


def rest_get(served: Served, path: str) -> Any:
    answer = httpx.get(
        f"{served.server.url}{path}",
        headers={"Authorization": f"Bearer {served.server.admin_token}"},
        trust_env=False,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def settled_run(served: Served, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        run: dict[str, Any] = rest_get(served, f"/v1/runs/{run_id}")
        if run["status"] not in ("queued", "running"):
            return run
        assert time.monotonic() < deadline, f"run {run_id} did not finish: {run}"
        time.sleep(0.1)


def test_it_lists_the_same_tools_over_http_and_stdio(
    served: Served, relays: dict[str, str]
) -> None:
    over_http = list_tools([relays["viewer"], "--transport", "http"], served)
    over_stdio = list_tools(stdio("--role", "admin"), served)
    catalog = {action["name"] for action in rest_get(served, "/v1/actions")}
    assert {"remember", "recall", "delete_user"} <= catalog
    assert set(over_http) == set(over_stdio) == OWN_TOOLS | catalog
    for tools in (over_http, over_stdio):
        assert tools["recall"]["annotations"]["readOnlyHint"] is True
        assert tools["delete_user"]["annotations"]["destructiveHint"] is True
        assert tools["chat"]["inputSchema"]["required"] == ["message"]


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_chat_answers_with_the_scripted_agent(
    served: Served, relays: dict[str, str], transport: str
) -> None:
    target = [relays["operator"]] if transport == "http" else stdio()
    chatted = call_tool(target, served, "chat", message=f"Say hello over {transport}.")
    assert chatted.result["isError"] is False, chatted.out
    assert chatted.text() == ANSWER
    reply = chatted.result["structuredContent"]
    assert reply["status"] == "succeeded" and reply["answer"] == ANSWER
    run = rest_get(served, f"/v1/runs/{reply['run_id']}")
    user = "mcp-operator" if transport == "http" else getpass.getuser()
    assert run["trigger"] == "mcp" and run["requesting_user"] == user


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_write_waits_for_approval_and_runs_once_approved_in_the_api(
    served: Served, relays: dict[str, str], transport: str
) -> None:
    target = [relays["operator"]] if transport == "http" else stdio()
    word = f"inspected{transport}"
    note = f"The Inspector's note over {transport}: {word}."
    waiting = call_tool(target, served, "remember", content=note)
    answer = waiting.text()
    assert answer.startswith("waiting for approval apr_"), waiting.out
    approval_id = answer.split()[3]
    state = waiting.result["structuredContent"]
    assert state["approval_id"] == approval_id and state["status"] == "waiting_approval"
    before = call_tool(target, served, "recall", query=word)
    assert before.result["isError"] is False and note not in before.text()

    approved = httpx.post(
        f"{served.server.url}/v1/approvals/{approval_id}/approve",
        json={},
        headers={"Authorization": f"Bearer {served.server.admin_token}"},
        trust_env=False,
        timeout=30,
    )
    assert approved.status_code == 200, approved.text
    run = settled_run(served, state["run_id"])
    assert run["status"] == "succeeded", run
    assert [step["action"] for step in run["result"]["steps"]] == ["remember"]

    after = call_tool(target, served, "recall", query=word)
    assert after.result["isError"] is False and note in after.text()


def test_a_viewer_token_may_list_but_not_chat_or_write(
    served: Served, relays: dict[str, str]
) -> None:
    for tool, arguments in (("chat", {"message": "hi"}), ("remember", {"content": "a note"})):
        refused = call_tool([relays["viewer"]], served, tool, **arguments)
        assert refused.result["isError"] is True, refused.out
        assert "needs an operator token" in refused.text(), refused.out
    runs = rest_get(served, "/v1/runs?limit=500")
    assert "mcp-viewer" not in {run["requesting_user"] for run in runs}


def test_no_token_or_an_invalid_one_is_refused(served: Served, relays: dict[str, str]) -> None:
    for url in (served.url, relays["invalid"]):  # straight to serve; through the relay
        refused = inspector(
            [url, "--transport", "http"],
            "--method",
            "tools/list",
            env=served.server.env,
            cwd=home(served),
        )
        assert refused.code == 1 and refused.out == "", refused.out
        assert "Failed to connect to MCP server: Streamable HTTP error" in refused.err
        assert '"code":"unauthorized"' in refused.err, refused.err
