"""The processes a run starts: the model server, the children (one system, one database each),
the HTTP servers of workload 3; and the fresh databases they use."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import admin_sql
from bench.peers.system import Target

ROOT = Path(__file__).resolve().parents[2]
STREAM_LIMIT = 64 * 2**20  # a RESULT line carries every sample


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every process started here: the repository importable (the bench
    packages and the no-op action pack), nothing of the caller's PRESSLOOP_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRESSLOOP_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


class Process:
    """A child process with line-based stdin/stdout; stderr goes to `log`."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str, log: Path) -> None:
        self.proc = proc
        self.name = name
        self.log = log

    @classmethod
    async def start(
        cls, args: list[str], *, name: str, log: Path, env: dict[str, str] | None = None
    ) -> Process:
        with log.open("ab") as err:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                cwd=ROOT,
                env=child_env(env),
                limit=STREAM_LIMIT,
            )
        return cls(proc, name, log)

    async def line(self, prefix: str, timeout_s: float = 1800) -> str:
        """The next stdout line starting with `prefix` (other lines are skipped)."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(timeout_s):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    tail = self.log.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"{self.name} ended (rc {self.proc.returncode}):\n{tail}")
                text = raw.decode().rstrip("\n")
                if text.startswith(prefix):
                    return text[len(prefix) :].strip()

    async def send(self, command: str, expect: str = "DONE") -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{command}\n".encode())
        await self.proc.stdin.drain()
        return await self.line(expect)

    async def result(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(await self.send("result", expect="RESULT"))
        await self.wait()
        return result

    async def wait(self) -> int:
        return await self.proc.wait()

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(15):
                    await self.proc.wait()
            except TimeoutError:
                self.kill()
                await self.proc.wait()


async def start_child(
    system: str, target: Target, log: Path, *more: str, env: dict[str, str] | None = None
) -> Process:
    args = [sys.executable, "-m", "bench.peers.child", "--system", system]
    args += ["--target", json.dumps(asdict(target)), *more]
    return await Process.start(args, name=f"{system} ({target.database})", log=log, env=env)


async def one_shot(
    system: str, target: Target, log: Path, *more: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    child = await start_child(system, target, log, *more, env=env)
    result: dict[str, Any] = json.loads(await child.line("RESULT"))
    await child.wait()
    return result


@asynccontextmanager
async def model_server(log: Path) -> AsyncIterator[int]:
    args = [sys.executable, "-m", "bench.peers.model_server", "--port", "0"]
    server = await Process.start(args, name="model server", log=log)
    try:
        yield int(await server.line("listening", timeout_s=60))
    finally:
        await server.stop()


@asynccontextmanager
async def fresh_target(
    database: str, admin_url: str, data_dir: Path, model_url: str, *, pool: int = 30
) -> AsyncIterator[Target]:
    """A new empty database (a SQLite file in its own directory, or a new PostgreSQL
    database, dropped afterwards) for one system."""
    scratch = data_dir / uuid.uuid4().hex[:10]
    scratch.mkdir(parents=True)
    if database == "sqlite":
        yield Target(
            database="sqlite",
            sqlite_path=str(scratch / "bench.db"),
            model_url=model_url,
            pool=pool,
            data_dir=str(scratch),
        )
        return
    name = f"pressloop_peers_{uuid.uuid4().hex[:10]}"
    await admin_sql(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield Target(
            database="postgres",
            postgres_url=f"{admin_url.rsplit('/', 1)[0]}/{name}",
            model_url=model_url,
            pool=pool,
            data_dir=str(scratch),
        )
    finally:
        await admin_sql(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
