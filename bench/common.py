"""What the benchmarks share: fresh databases, percentiles, Markdown tables, the facts of the
machine and code measured, and writing their section of docs/benchmarks.md between its
markers."""

from __future__ import annotations

import hashlib
import math
import os
import platform
import sqlite3
import subprocess
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
DOC_HEADER = (
    "# Benchmarks\n\n"
    "Measured on one machine; the numbers move with the hardware, so compare ratios rather than "
    "milliseconds. Each section is written by its script (`make bench` regenerates them).\n\n"
)


async def admin_sql(admin_url: str, sql: str) -> str:
    """Run one statement on the PostgreSQL admin connection (`SHOW ...` returns its value)."""
    conn = await asyncpg.connect(admin_url, timeout=10)
    try:
        return str(await conn.fetchval(sql) if sql.startswith("SHOW") else await conn.execute(sql))
    finally:
        await conn.close()


@asynccontextmanager
async def database_url(key: str, admin_url: str, data_dir: Path) -> AsyncIterator[str]:
    """A fresh, empty database: a SQLite file in `data_dir`, or a new PostgreSQL database
    (dropped afterwards)."""
    if key == "sqlite":
        yield f"sqlite+aiosqlite:///{data_dir / 'pressloop.db'}"
        return
    name = f"pressloop_bench_{uuid.uuid4().hex[:10]}"
    await admin_sql(admin_url, f'CREATE DATABASE "{name}"')
    try:
        base = admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
        yield f"{base}/{name}"
    finally:
        await admin_sql(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[rank]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(path: Path, section: str, *, start: str, end: str) -> None:
    """Replace the text between `start` and `end` in `path` (append it if they are missing)."""
    block = f"{start}\n{section}{end}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else DOC_HEADER
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _old, tail = rest.split(end, 1)
        text = head + block + tail.lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def code_version() -> str:
    """The commit measured and, if pressloop/ has uncommitted changes, a digest of them (so a
    change made while the benchmark runs shows)."""
    try:
        commit = _git("rev-parse", "--short", "HEAD").strip()
        status = _git("status", "--porcelain", "--", "pressloop")
        if not status.strip():
            return commit
        digest = hashlib.sha1(status.encode())
        digest.update(_git("diff", "HEAD", "--", "pressloop").encode())
        for line in status.splitlines():
            path = ROOT / line[3:]
            if line.startswith("??") and path.is_file():
                digest.update(path.read_bytes())
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit} with uncommitted changes in pressloop/ (digest {digest.hexdigest()[:8]})"


def machine_facts(
    load: tuple[float, float, float], code: str, code_after: str | None = None
) -> list[str]:
    """The lines that say what was measured on: code, CPU, memory, versions, load before."""
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return [
        f"code: {code} (at the start of the run)"
        + ("" if code_after in (None, code) else f"; **changed during the run**, to {code_after}"),
        f"CPU: {cpu}, nproc {len(os.sched_getaffinity(0))}; memory {memory_gb:.0f} GB",
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.release()}",
        f"SQLite {sqlite3.sqlite_version} (aiosqlite), SQLAlchemy {sa.__version__}, "
        f"asyncpg {asyncpg.__version__}",
        "load average before the run (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in load),
    ]
