"""A real `pressloop serve` in a subprocess, for the CLI, security, WordPress, API-contract and UI
tests.

`Serve(home, env, *args)` runs `pressloop serve --port <free port> *args` in `home` with `env`
(build it with `serve_env`), its output going to `home/serve.log`. `start()` waits until
`/healthz` answers (failing with the log if the process ends or it takes too long); `admin_token`
is the first admin token, read from `PRESSLOOP_DATA_DIR/admin-token`; `children(command)` and
`stream_processes()` the pids of its child processes (`pgrep -P`); `stop()` sends SIGTERM
(SIGKILL after a while) and returns the exit code; `output()` is the log so far. It is a context
manager, sync (`with Serve(...) as server:`) or async (`async with`, the waits in a thread).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from tests.support.processes import free_port, isolated_env, start_pressloop, stop_process

STARTUP_S = 60.0
STOP_S = 30.0


def serve_env(data: Path, script: Path | None = None, **settings: str) -> dict[str, str]:
    """An isolated environment for the command: a scripted model (answering from `script`), a
    data directory `data`, no cooldown, and `settings` on top."""
    env = isolated_env(
        PRESSLOOP_DATA_DIR=str(data), PRESSLOOP_PROVIDER="scripted", PRESSLOOP_COOLDOWN="0"
    )
    if script is not None:
        env["PRESSLOOP_SCRIPT"] = str(script)
    env.update(settings)
    return env


class Serve:
    def __init__(self, home: Path, env: dict[str, str], *args: str, port: int | None = None):
        self.home = home
        self.env = env
        self.args = args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return Path(self.env["PRESSLOOP_DATA_DIR"])

    @property
    def admin_token(self) -> str:
        """The first admin token, from its file (serve never prints it)."""
        return (self.data_dir / "admin-token").read_text(encoding="utf-8").strip()

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def launch(self) -> subprocess.Popen[bytes]:
        """Start the process (on the same port and data directory as any before it)."""
        self.process = start_pressloop(
            "serve", "--port", str(self.port), *self.args, env=self.env, cwd=self.home, log=self.log
        )
        return self.process

    def wait_until_healthy(self, timeout_s: float = STARTUP_S) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process.poll() is None, self.output()
            try:
                answer = httpx.get(f"{self.url}/healthz", trust_env=False, timeout=1)
                if answer.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.1)

    def start(self) -> Self:
        self.launch()
        self.wait_until_healthy()
        return self

    def crash_and_restart(self) -> None:
        """SIGKILL the server mid-work (connections drop, leases are left behind), then start a
        new one on the same port and data directory."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.start()

    def children(self, command: str) -> list[int]:
        """The pids of this server's children whose command line holds `command`."""
        assert self.process is not None
        found = subprocess.run(
            ["pgrep", "-P", str(self.process.pid), "-f", command],
            capture_output=True,
            text=True,
            check=False,
        )
        return [int(pid) for pid in found.stdout.split()]

    def stream_processes(self) -> list[int]:
        """The pids of its stream processes (its children running `pressloop.streamer`)."""
        return self.children("pressloop.streamer")

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it has not stopped after STOP_S; its exit code."""
        return None if self.process is None else stop_process(self.process, STOP_S)

    def client(self, **options: Any) -> httpx.AsyncClient:
        """An async client on the server with the admin token."""
        return httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.admin_token}"},
            trust_env=False,
            timeout=options.pop("timeout", 20),
            **options,
        )

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        try:
            return await asyncio.to_thread(self.start)
        except BaseException:
            await asyncio.to_thread(self.stop)
            raise

    async def __aexit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)
