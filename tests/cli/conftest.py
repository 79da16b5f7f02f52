"""Run the real `pressloop` command in a subprocess, on its own SQLite data directory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import command
from tests.support.serve import serve_env

REMEMBER_THEN_ANSWER: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "remember", "arguments": {"content": "The owner likes teal."}}]},
    {"text": "Noted: you like teal."},
]


@dataclass(kw_only=True)
class Result:
    code: int
    out: str
    err: str


Pressloop = Callable[..., Awaitable[Result]]


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: a scripted model, a fresh data directory, nothing inherited."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(REMEMBER_THEN_ANSWER), encoding="utf-8")
    return serve_env(tmp_path / "data", script)


@pytest.fixture
def pressloop(cli_env: dict[str, str], tmp_path: Path) -> Pressloop:
    """`await pressloop("chat", "hi")`: run the command; its exit code, stdout and stderr."""

    async def run(
        *args: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()
    ) -> Result:
        environment = {**cli_env, **(env or {})}
        for name in drop:
            environment.pop(name, None)
        process = await asyncio.create_subprocess_exec(
            *command(),
            *args,
            cwd=tmp_path,
            env=environment,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(60):
            out, err = await process.communicate()
        assert process.returncode is not None
        return Result(code=process.returncode, out=out.decode(), err=err.decode())

    return run
