"""The `pressloop` command in subprocesses: its isolated environment, starting and stopping it
(`start_pressloop`, `stop_process`), and `pressloop worker`s.

`Workers` starts `python -m pressloop.runtime.process` (what `pressloop worker` runs) against a
test database, with short leases and a scripted model per process, each with its own log in the
test's directory; `stop_all()` kills what is left (a paused worker is woken first).
`CrashPackWorkers` also loads `tests.fixtures.crash_pack`, whose `touch` records its effects in a
file and can be made to hang right after its effect.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Variables that would make the command use another provider, database or site than the test's.
ISOLATED = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "ZAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
)

# Short leases, so a killed or paused worker's run is taken over within seconds.
LEASE = {
    "PRESSLOOP_LEASE_TTL": "1.5",
    "PRESSLOOP_LEASE_RENEW": "0.3",
    "PRESSLOOP_WORKER_POLL": "0.1",
    # On PostgreSQL an idle worker may not know of a lease taken after it last looked: it looks
    # again at least this often (30 s leases and 5 s by default).
    "PRESSLOOP_WORKER_IDLE_POLL": "0.3",
}


def command() -> list[str]:
    """The `pressloop` command of this virtual environment."""
    script = Path(sys.executable).parent / "pressloop"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pressloop.cli"]


def isolated_env(**settings: str) -> dict[str, str]:
    """This process's environment without any PRESSLOOP_ setting or provider key, plus
    `settings`, with unbuffered UTF-8 output (what a test reads is all there when it reads)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PRESSLOOP_") and k not in ISOLATED
    }
    env.update(PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1")
    env.update(settings)
    return env


def pack_env(pack: str, script: Path, effects: Path) -> dict[str, str]:
    """Settings that make the command load the action pack `tests/fixtures/{pack}.py`, answer
    from `script`, and have the pack record its effects in `effects`."""
    return {
        "PRESSLOOP_SCRIPT": str(script),
        "PRESSLOOP_ACTION_PACKS": f"tests.fixtures.{pack}",
        "PRESSLOOP_TEST_EFFECTS": str(effects),
        "PYTHONPATH": str(ROOT),
    }


def start_pressloop(
    *args: str, env: dict[str, str], cwd: Path, log: Path
) -> subprocess.Popen[bytes]:
    """`pressloop *args` in the background, its output appended to `log`."""
    with log.open("ab") as output:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [*command(), *args], cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT
        )


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> int:
    """SIGTERM, then SIGKILL if it has not ended after `timeout_s`; its exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for(
    check: Callable[[], Awaitable[Any]], limit_s: float = 30.0, *, what: str | None = None
) -> Any:
    """Poll `check` until it answers something true (returned), or fail after `limit_s`,
    naming `what` was awaited (a lambda's own name says nothing)."""
    deadline = asyncio.get_running_loop().time() + limit_s
    while not (value := await check()):
        if asyncio.get_running_loop().time() > deadline:
            awaited = what or check.__name__
            raise AssertionError(f"timed out after {limit_s:g} s waiting for {awaited}")
        await asyncio.sleep(0.05)
    return value


class Workers:
    """`pressloop worker` processes on `database_url`, with `env` on top of this process's."""

    def __init__(self, database_url: str, tmp: Path, env: dict[str, str] | None = None) -> None:
        self.database_url = database_url
        self.tmp = tmp
        self.env = {
            **os.environ,
            **LEASE,
            **(env or {}),
            "PRESSLOOP_DATABASE_URL": database_url,
            "PRESSLOOP_DATA_DIR": str(tmp),
            "PRESSLOOP_PROVIDER": "scripted",
            "PYTHONPATH": str(ROOT),
        }
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        script: list[dict[str, Any]] | dict[str, Any],
        *,
        concurrency: int = 4,
        name: str = "w",
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start one worker answering from `script`; its log is `worker-{name}-{n}.log`."""
        label = f"{name}-{len(self.processes)}"
        path = self.tmp / f"script-{label}.json"
        path.write_text(json.dumps(script))
        environment = {**self.env, **(env or {}), "PRESSLOOP_SCRIPT": str(path)}
        with (self.tmp / f"worker-{label}.log").open("wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pressloop.runtime.process",
                    "--concurrency",
                    str(concurrency),
                ],
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a paused worker dies only once woken
                process.kill()
            process.wait(10)


class CrashPackWorkers(Workers):
    """Workers with `tests.fixtures.crash_pack`: `effects` is the file its `touch` writes to,
    and while the file `hang` exists `touch` hangs right after its effect."""

    def __init__(self, database_url: str, tmp: Path) -> None:
        self.effects = tmp / "effects.txt"
        self.hang = tmp / "hang"
        super().__init__(
            database_url,
            tmp,
            {
                "PRESSLOOP_ACTION_PACKS": "tests.fixtures.crash_pack",
                "PRESSLOOP_TEST_EFFECTS": str(self.effects),
                "PRESSLOOP_TEST_HANG": str(self.hang),
            },
        )

    def effect_lines(self) -> list[str]:
        return self.effects.read_text().splitlines() if self.effects.exists() else []
