"""What the benchmark reads of the machine and its processes (/proc), and of PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import sqlalchemy as sa
from common import admin_sql
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from pressloop.store.db import Database, normalise_url
from workers.model import CLOCK_TICK_S


def process_cpu_s(pid: int, *, children: bool = False) -> float:
    """utime + stime of a process (all its threads); with `children`, also its reaped
    children's."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text.rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime, stime, cutime, cstime are fields 14-17.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks * CLOCK_TICK_S


def child_pids(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        if int(text.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry.name))
    return found


def tree_cpu_s(root: int | None) -> float | None:
    """CPU of a server and all its children, living or gone (the PostgreSQL postmaster reaps its
    backends, so their CPU lands in its cutime/cstime)."""
    if root is None:
        return None
    return process_cpu_s(root, children=True) + sum(process_cpu_s(p) for p in child_pids(root))


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # user..steal (guest time is already counted in user)
    return total - idle, total


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmHWM, VmRSS) of a process in MB (10^6 bytes)."""
    peak = now = 0.0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024 / 1e6
            elif line.startswith("VmRSS:"):
                now = int(line.split()[1]) * 1024 / 1e6
    return peak, now


async def machine_busy_over(seconds: float) -> float:
    busy_before, total_before = machine_ticks()
    await asyncio.sleep(seconds)
    busy_after, total_after = machine_ticks()
    return (busy_after - busy_before) / max(1, total_after - total_before)


async def wait_for_quiet(limit_s: float, threshold: float = 0.2) -> float:
    """Wait (up to `limit_s`) until other work leaves the machine nearly idle for a second: this
    benchmark saturates both cores, so anything else running skews it. Returns the share of the
    machine busy in the last second measured."""
    deadline = time.monotonic() + limit_s
    while True:
        busy = await machine_busy_over(1.0)
        if busy < threshold or time.monotonic() >= deadline:
            return busy
        await asyncio.sleep(2.0)


# Databases --------------------------------------------------------------------------------------


def _postmaster_in(data_dir: str) -> int | None:
    try:
        pid = int((Path(data_dir) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


async def postmaster_pid(admin_url: str) -> int | None:
    """The local PostgreSQL server's pid (to count its CPU), if this machine can see it."""
    try:
        data_dir = await admin_sql(admin_url, "SHOW data_directory")
    except asyncpg.PostgresError:
        return None
    return _postmaster_in(data_dir)


@dataclass(kw_only=True)
class ConnectionCost:
    """What one transaction costs with a new connection each time versus a pooled one."""

    new_wall_ms: float
    new_client_ms: float
    new_server_ms: float
    pooled_wall_ms: float
    pooled_client_ms: float
    pooled_server_ms: float


async def connection_cost(url: str, postmaster: int | None, count: int = 200) -> ConnectionCost:
    """`SELECT 1` transactions through the same engine settings as pressloop's `Database`
    (asyncpg, the idle-transaction timeout): on a new connection each (NullPool, what
    an overflow connection costs) and on one pooled connection. CPU from /proc."""
    values: list[float] = []
    for pool in ("new", "pooled"):
        if pool == "pooled":
            database = Database.open(url)
        else:
            database = Database(
                create_async_engine(
                    normalise_url(url),
                    poolclass=NullPool,
                    connect_args={
                        "server_settings": {"idle_in_transaction_session_timeout": "60000"}
                    },
                )
            )
        try:
            async with database.read() as conn:
                await conn.execute(sa.select(1))
            server = tree_cpu_s(postmaster) or 0.0
            client = own_cpu_s()
            started = time.perf_counter()
            for _ in range(count):
                async with database.read() as conn:
                    await conn.execute(sa.select(1))
            wall = time.perf_counter() - started
            client = own_cpu_s() - client
            server = (tree_cpu_s(postmaster) or 0.0) - server
        finally:
            await database.close()
        values += [wall * 1000 / count, client * 1000 / count, server * 1000 / count]
    return ConnectionCost(
        new_wall_ms=values[0],
        new_client_ms=values[1],
        new_server_ms=values[2],
        pooled_wall_ms=values[3],
        pooled_client_ms=values[4],
        pooled_server_ms=values[5],
    )
