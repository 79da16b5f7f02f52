"""How a process spends its CPU and its database connections: serving processes, the pool,
the group commit, pacing, the garbage collector and the event loop. A base of `Settings`; read
them there. The defaults come from the streaming benchmarks (docs/benchmarks.md, section 3)."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from pressloop.config.env import env as _env

# The smallest PostgreSQL pool a process opens by default (a claim, a request, a read at once).
MIN_DB_POOL = 4


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class ServingTuning(BaseSettings):
    # `pressloop serve` as this many processes on one port (`serve_processes.py`): each serves
    # and runs about 1/N of the connections. Above 1, meant for PostgreSQL (on SQLite the
    # processes' writes wait for each other's lock).
    serve_processes: int = Field(
        default=1, ge=1, le=64, validation_alias=_env("PRESSLOOP_SERVE_PROCESSES")
    )
    # `pressloop serve` starts a stream process (`pressloop/streamer`) beside each serving
    # process: a person's streamed tokens are read and written by a process that runs no turns
    # (`starts_stream_processes`). Unset: on, where the provider's answers can be read there
    # (OpenAI-compatible): one serving process alone missed 20 ms at the slowest CPU's speed
    # without it (docs/benchmarks.md, section 3ag). True: asked for (a note where the provider
    # has none). False: never (about 70 MiB and one process fewer).
    stream_process: bool | None = Field(
        default=None, validation_alias=_env("PRESSLOOP_STREAM_PROCESS")
    )
    # The stream processes: how long `pressloop serve` waits for them to serve before it serves
    # itself (their imports take about 1 s; past this, a warning, and each early stream stays in its
    # serving process); how long a serving process waits for one to take a stream (it stays in
    # the serving process past it) and, once the run has ended, to write its last frames.
    stream_ready_timeout_s: float = Field(
        default=60.0, ge=0, validation_alias=_env("PRESSLOOP_STREAM_READY_TIMEOUT")
    )
    stream_open_timeout_s: float = Field(
        default=2.0, gt=0, validation_alias=_env("PRESSLOOP_STREAM_OPEN_TIMEOUT")
    )
    stream_end_timeout_s: float = Field(
        default=15.0, gt=0, validation_alias=_env("PRESSLOOP_STREAM_END_TIMEOUT")
    )
    # With stream processes, how much the serving processes (the turns) lower their own priority
    # (their nice value, `process_priority.py`), so that a stream process woken by a token gets a
    # core at once on a machine whose cores the turns keep busy. 0: the same priority.
    turn_nice: int = Field(default=10, ge=0, le=19, validation_alias=_env("PRESSLOOP_TURN_NICE"))
    # Set by the first serving process for the others: the stream process's unix socket for
    # streams handed over, and the base URL (with its secret) for relayed model calls.
    streamer_control: str = Field(default="", validation_alias=_env("PRESSLOOP_STREAMER_CONTROL"))
    streamer_relay: SecretStr = Field(
        default=SecretStr(""), validation_alias=_env("PRESSLOOP_STREAMER_RELAY")
    )
    # The cyclic garbage collector's thresholds in `pressloop serve` and `pressloop worker`
    # (`runtime/collector.py`): three numbers, `gc.set_threshold`'s; '' for the process's own.
    gc_thresholds: str = Field(
        default="",
        pattern=r"^\s*(\d+\s*,\s*\d+\s*,\s*\d+\s*)?$",
        validation_alias=_env("PRESSLOOP_GC_THRESHOLDS"),
    )
    # `pressloop serve` collects (the young generation, or the middle one when due) whenever no
    # collection ran for this long (0: only at the interpreter's thresholds; runtime/collector.py).
    gc_young_every_s: float = Field(
        default=0.05, ge=0, validation_alias=_env("PRESSLOOP_GC_YOUNG_EVERY")
    )
    # `pressloop serve`'s event loop (`runtime/loop_lanes.py`): "lanes" is asyncio's loop with an
    # urgent lane, where a turn reading a model's stream goes ahead of other work; "uvloop" runs
    # everything first in, first out, on a little less CPU a turn.
    event_loop: Literal["lanes", "uvloop"] = Field(
        default="lanes", validation_alias=_env("PRESSLOOP_EVENT_LOOP")
    )
    # On "lanes": the longest the loop goes without polling its sockets while it has work queued.
    loop_poll_every_s: float = Field(
        default=0.001, gt=0, le=1, validation_alias=_env("PRESSLOOP_LOOP_POLL_EVERY")
    )

    # The most database connections a process opens from its pool (PostgreSQL, opened lazily):
    # a worker uses 1-2 whatever its concurrency (one group committer writes for all its runs,
    # on a connection of its own besides, `runtime/commits.py`); all processes together must
    # stay under the server's max_connections (docs/operations.md).
    # Unset: twice this machine's CPUs, at least 4 (`resolved_db_pool_size`). More connections
    # than the cores can serve only make transactions wait for each other's server processes:
    # under 200 streamed turns on 2 cores (2 serving processes, medians of 3 repeats), 20 + 10
    # gave the first token a p99 of 49-305 ms and 4 + 0 one of 19-28 ms, and the turns ended
    # sooner (docs/benchmarks.md, section 3a).
    db_pool_size: int | None = Field(
        default=None, ge=1, validation_alias=_env("PRESSLOOP_DB_POOL_SIZE")
    )
    db_max_overflow: int = Field(
        default=0, ge=0, validation_alias=_env("PRESSLOOP_DB_MAX_OVERFLOW")
    )
    # How long a transaction waits for a pooled connection before it fails (PostgreSQL).
    db_pool_timeout_s: float = Field(
        default=30.0, gt=0, validation_alias=_env("PRESSLOOP_DB_POOL_TIMEOUT")
    )
    # PostgreSQL: the group commit on an event loop of its own, on a thread (commit_loop.py).
    # Off by default: the two threads' handovers of the GIL and of each batch cost more CPU
    # than the main loop's wait they save (benchmarks.md, 3d). Beside a stream process it was
    # on for a while (the main loop's turns held the commits before a call, 3aa), until the
    # serving processes ran their turns below the stream processes: then without it the first
    # token's tail was lower at the slowest CPU's speed and the turns shorter (3ae).
    commit_thread: bool = Field(default=False, validation_alias=_env("PRESSLOOP_COMMIT_THREAD"))
    # The most runs one group commit writes. Its statements are built in one go on the main
    # loop, which reads no socket meanwhile: 100 runs' events held a stream's first token up to
    # 20 ms on a loaded 2-core machine, 25 at most a few (benchmarks.md, section 3g).
    commit_batch: int = Field(
        default=25, ge=1, le=1000, validation_alias=_env("PRESSLOOP_COMMIT_BATCH")
    )
    # Under load (more runs in flight in the process than the pending batch holds), how long a
    # group commit waits for the others' writes: fewer, fuller transactions, less CPU a run on
    # the event loop and in the database. What waits for a commit (a finish, the events sent
    # after theirs) waits that much longer; measured, the CPU fell and the latencies stayed
    # within noise, so it is off by default (benchmarks.md, section 3h). 0: write at once.
    commit_gather_s: float = Field(
        default=0.0, ge=0, le=1, validation_alias=_env("PRESSLOOP_COMMIT_GATHER")
    )
    # How long the text deltas a stream of this process has already sent may wait for their
    # commit (they are written for a reader in another process, a reconnect elsewhere): while
    # many streams receive tokens, fewer commits (`runtime/commits.py`; benchmarks.md, section
    # 3k). So may those of a run a stream process writes (section 3z). A delta nobody streams
    # is written at once. 0: every delta at once.
    delta_commit_s: float = Field(
        default=0.1, ge=0, le=5, validation_alias=_env("PRESSLOOP_DELTA_COMMIT")
    )
    # Work that can wait (a turn's next step, the next group commit) lets the event loop read its
    # sockets between two pieces, so a stream's token already in one goes out first
    # (`runtime/pacing.py`; benchmarks.md, section 3g).
    pacing: bool = Field(default=True, validation_alias=_env("PRESSLOOP_PACING"))
    # How long a SQLite writer waits for another process's write lock before it fails.
    db_busy_timeout_s: float = Field(
        default=30.0, gt=0, validation_alias=_env("PRESSLOOP_DB_BUSY_TIMEOUT")
    )

    def starts_stream_processes(self) -> bool:
        """Whether `pressloop serve` starts stream processes (for a provider they can read)."""
        return self.stream_process is not False

    def resolved_db_pool_size(self, cpus: int | None = None) -> int:
        """The pool of each process: the setting, else twice the CPUs (this machine's unless
        given) shared by the serving processes of one machine, at least MIN_DB_POOL."""
        if self.db_pool_size is not None:
            return self.db_pool_size
        cpus = usable_cpus() if cpus is None else cpus
        return max(MIN_DB_POOL, 2 * cpus // self.serve_processes)

    def resolved_gc_thresholds(self, default: tuple[int, int, int]) -> tuple[int, int, int]:
        """PRESSLOOP_GC_THRESHOLDS, else the process's `default`."""
        if not self.gc_thresholds.strip():
            return default
        young, middle, old = (int(part) for part in self.gc_thresholds.split(","))
        return young, middle, old
