"""What the MCP client tests share: the toolbox server's config, over stdio or HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pressloop.mcp.config import ServerConfig, server_config

TOOLBOX = Path(__file__).parent / "servers" / "toolbox.py"
TOKEN = "tok-3f9a-very-secret"


def stdio_toolbox(name: str = "box", **extra: Any) -> ServerConfig:
    entry = {
        "command": sys.executable,
        "args": [str(TOOLBOX), "stdio"],
        "env": {"TOOLBOX_TOKEN": TOKEN},
        **extra,
    }
    return server_config(name, entry)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def http_toolbox() -> Iterator[str]:
    """The toolbox's streamable-HTTP app in a process of its own; yields its /mcp URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(TOOLBOX), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the toolbox HTTP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
