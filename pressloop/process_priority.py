"""A process that runs turns steps aside for its stream processes (`PRESSLOOP_TURN_NICE`).

With a stream process (`pressloop/streamer`), a person's tokens are read and written by a process
that runs no turns; the serving processes run the turns. On a machine whose cores are all busy
at the turns' busiest moment (200 streams on 2 slow cores), the stream process waking for a
token waited for a core behind the serving processes, each always runnable with a hundred
turns' work: the kernel gave every process its equal share, in turn (docs/benchmarks.md,
sections 3aa, 3ab, 3ad). A serving process that raises its own nice value gives the stream
processes (and the database's processes) the larger weight: a woken stream process runs at once
and is done in a fraction of a millisecond; the turns get the rest, as much CPU as before when
nothing else wants it.

Lowering one's own priority needs no privilege; raising it back does, so it is done once, after
the stream processes are started (a child keeps its parent's nice value).
"""

from __future__ import annotations

import contextlib
import os

# The highest nice value Linux (and POSIX) allows: the lowest priority.
LOWEST = 19


def thread_ids() -> list[int]:
    """This process's threads (Linux keeps a nice value per thread, and `setpriority` on a
    process id sets its main thread's only); elsewhere, the process itself."""
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def lower_priority(by: int) -> int:
    """Raise every thread's nice value by `by` (at most to 19), the threads started later
    inheriting it; the main thread's new value. 0: nothing changes."""
    if by <= 0:
        return os.getpriority(os.PRIO_PROCESS, 0)
    for tid in thread_ids():
        # A thread may end between the listing and the call: nothing left to lower.
        with contextlib.suppress(ProcessLookupError):
            current = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(LOWEST, current + by))
    return os.getpriority(os.PRIO_PROCESS, 0)
