"""What a served system's processes use: the server and every process under it (its other
serving processes, its stream processes), their CPU and peak memory, read from /proc."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def served_processes(pid: int) -> list[int]:
    """The server and every process under it: its other serving processes
    (PRESSLOOP_SERVE_PROCESSES), its stream processes. A process's children are listed by the
    thread that started each (`pressloop serve` starts its stream processes from a thread)."""
    found = [pid]
    for parent in found:  # grows as it goes: children's children too
        for task in Path(f"/proc/{parent}/task").iterdir():
            with contextlib.suppress(OSError):
                found.extend(int(child) for child in (task / "children").read_text().split())
    return found


def served_rss_mb(pid: int) -> float:
    """The server's peak RSS: the sum of its processes' (`served_processes`)."""
    return sum(peak_rss_mb(p) for p in served_processes(pid))


def served_cpu_s(pid: int) -> dict[str, float]:
    """The CPU (user + system, seconds) the server's processes have used so far, by role:
    `stream` for Pressloop's stream processes (`python -m pressloop.streamer`), `serving` for
    the rest (what a change to either saves shows where it was saved)."""
    used = {"serving": 0.0, "stream": 0.0}
    for process in served_processes(pid):
        with contextlib.suppress(OSError):  # a process that ended in between used nothing more
            used[role(process)] += cpu_s(process)
    return used


def role(pid: int) -> str:
    arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return "stream" if b"pressloop.streamer" in arguments else "serving"


def cpu_s(pid: int) -> float:
    # After the command's closing parenthesis, utime and stime are the 12th and 13th fields.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")
