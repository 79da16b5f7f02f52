"""The machine, the versions and the code a run measured."""

from __future__ import annotations

import hashlib
import os
import platform
import sqlite3
import subprocess
from importlib.metadata import PackageNotFoundError, version

from bench.peers.procs import ROOT

PACKAGES = [
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "openai-agents",
    "pydantic-ai-slim",
    "openai",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "psycopg",
    "fastapi",
    "uvicorn",
    "sse-starlette",
]


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def code_version() -> str:
    """The commit, and a digest of uncommitted changes under pressloop/ if there are any (so a
    change made while the benchmark runs shows)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        diff = subprocess.run(
            ["git", "diff", "HEAD", "--", "pressloop"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    if not diff:
        return commit
    digest = hashlib.sha1(diff).hexdigest()[:8]
    return f"{commit} with uncommitted changes in pressloop/ (diff {digest})"


def machine() -> list[str]:
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return [
        f"CPU: {cpu}, nproc {len(os.sched_getaffinity(0))}; memory {memory_gb:.0f} GB",
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.release()}; SQLite {sqlite3.sqlite_version}",
        ", ".join(f"{p} {_version(p)}" for p in PACKAGES),
    ]


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())
