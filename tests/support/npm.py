"""Third-party MCP programs from npm, for the tests that run real outside servers and clients.

They are installed at the versions `tests/npm/package-lock.json` pins, by `make test` (`npm ci
--prefix tests/npm`, again only when the lock changes): nothing is downloaded while the tests run.

`npm_bin(name)` is an installed program (`tests/npm/node_modules/.bin/NAME`); a missing or
outdated install fails the test with what to run, never skips it. `server_everything_stdio()` is
the config of `@modelcontextprotocol/server-everything` over stdio (Node runs the package's entry
script); `server_everything_http()` starts it over streamable HTTP on a free port, waits until it
answers, yields its MCP endpoint (`http://127.0.0.1:PORT/mcp`) and stops it after.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest

from pressloop.mcp.config import StdioServer, server_config
from tests.support.processes import ROOT, free_port, stop_process

NPM_DIR = ROOT / "tests" / "npm"
NODE_MODULES = NPM_DIR / "node_modules"
INSTALL = "run `make test` (it installs them with `npm ci --prefix tests/npm`)"
EVERYTHING = "mcp-server-everything"
STARTUP_S = 20.0
STOP_S = 10.0


def _missing(what: str) -> NoReturn:
    pytest.fail(f"{what}: {INSTALL}", pytrace=False)


def node() -> str:
    """The `node` program on PATH (Node.js 20 or later)."""
    found = shutil.which("node")
    if found is None:
        _missing("Node.js (`node`) is not on PATH: install Node.js 20 or later and")
    return found


def _check_installed() -> None:
    """Every package tests/npm/package.json names is installed, at the version it pins."""
    wanted: dict[str, str] = json.loads((NPM_DIR / "package.json").read_text())["dependencies"]
    for package, version in wanted.items():
        manifest = NODE_MODULES / package / "package.json"
        if not manifest.exists():
            _missing(f"the npm package {package} is not installed in {NODE_MODULES}")
        installed = json.loads(manifest.read_text())["version"]
        if installed != version:
            _missing(f"{package} {installed} is installed, tests/npm/package.json pins {version}")


def npm_bin(name: str) -> Path:
    """An installed program of tests/npm (`node_modules/.bin/NAME`, a script Node runs)."""
    _check_installed()
    path = NODE_MODULES / ".bin" / name
    if not path.exists():
        _missing(f"no program {name!r} in {path.parent}")
    return path


def _everything_script() -> str:
    # The package's entry script itself (the .bin entry is a link to it).
    return str(npm_bin(EVERYTHING).resolve())


def server_everything_stdio(
    name: str = "everything", *, pid_file: Path | None = None, **extra: Any
) -> StdioServer:
    """server-everything over stdio, as an owner would configure it (`extra`: `timeout_s`,
    `tools`, `risk`...). With `pid_file`, the server writes its process id there first (a
    shell that then becomes Node: the same process), for the tests that kill it."""
    script = _everything_script()
    if pid_file is None:
        entry: dict[str, Any] = {"command": node(), "args": [script, "stdio"]}
    else:
        shell = 'echo $$ > "$1" && exec "$2" "$3" stdio'
        entry = {"command": "/bin/sh", "args": ["-c", shell, "sh", str(pid_file), node(), script]}
    server = server_config(name, {**entry, **extra})
    assert isinstance(server, StdioServer)
    return server


@contextmanager
def server_everything_http(port: int | None = None) -> Iterator[str]:
    """server-everything over streamable HTTP (it reads its port from `PORT` and serves its
    endpoint at /mcp) until the block ends; yields the endpoint's URL."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [node(), _everything_script(), "streamableHttp"],
            # It listens on every interface and its get-env tool shows its environment to any
            # client: it gets no more than it needs.
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_until_answering(process, url, log)
            yield url
        finally:
            stop_process(process, STOP_S)


def _wait_until_answering(process: subprocess.Popen[bytes], url: str, log: Any) -> None:
    """Until the endpoint answers as server-everything does a GET without a session: 400 and a
    JSON-RPC error (so not another program that took the port)."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            answer = httpx.get(url, trust_env=False, timeout=1)
            body = answer.json() if answer.status_code == 400 else None
            if isinstance(body, dict) and body.get("jsonrpc") == "2.0":
                return
        except (httpx.TransportError, ValueError):  # not up yet; not JSON
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            output = log.read().decode(errors="replace")
            state = "exited" if process.poll() is not None else "did not answer in time"
            pytest.fail(f"server-everything over HTTP {state} ({url}):\n{output}", pytrace=False)
        time.sleep(0.05)


# server-everything's tools and their annotations (in the pinned version's dist/tools/*.js): no
# tool carries destructiveHint. simulate-research-query, registered once the client has
# initialized, runs only as an MCP task (`execution.taskSupport: "required"`), which Pressloop
# cannot call: listed by the server, it is no action.
READ_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "trigger-long-running-operation",
}
WRITE_TOOLS = {  # readOnlyHint: false, destructiveHint: false
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
}
TASK_ONLY = "simulate-research-query"
