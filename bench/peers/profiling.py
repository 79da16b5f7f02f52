"""Profiles of Pressloop where it falls short (pyinstrument, the `bench` group), summarised for
the document: where the event-loop thread's time went, by function.

Sampling is of wall time with `async_mode="disabled"`: a sample lands in the frame that is on
the thread's stack, so waiting shows as the event loop's `select` (idle) and everything else is
the work the process did. Imports (start-up, and what a system loads on its first turn) are
left out. Two lists: self time (the function itself, any code), and busy time by the innermost
Pressloop function on the stack (the library code it calls counted with it), which splits the
work among Pressloop's own functions.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

INTERVAL_S = 0.001
IDLE = ("select", "poll", "epoll")
IMPORTS = ("_find_and_load", "_call_with_frames_removed", "import_module")


def command(path: Path, module: str, args: list[str]) -> list[str]:
    """`python -m module args` under pyinstrument, its session saved to `path`."""
    head = [sys.executable, "-m", "pyinstrument", "-i", str(INTERVAL_S)]
    return head + ["-r", "pyisession", "-o", str(path), "-m", module, *args]


def start() -> Any:
    from pyinstrument import Profiler

    profiler = Profiler(interval=INTERVAL_S, async_mode="disabled")
    profiler.start()
    return profiler


def stop(profiler: Any, path: Path) -> None:
    profiler.stop()
    profiler.last_session.save(str(path))


def _where(frame: Any) -> str:
    file = str(frame.file_path or "")
    for marker in ("/site-packages/", "/lib/python3.11/", "/work/main/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{file}:{frame.function}"


# On uvloop the loop is C: its wait in epoll (and its own work) is self time of the Python
# frame that runs it.
UVLOOP_RUN = "asyncio/runners.py:run"


def _idle(name: str) -> bool:
    return name == UVLOOP_RUN or name.rsplit(":", 1)[-1].rsplit(".", 1)[-1] in IDLE


def summary(path: Path, *, top: int = 12) -> dict[str, Any]:
    """Shares of the profiled time: idle, then the top functions by self time and the top
    Pressloop functions by inclusive time."""
    from pyinstrument.session import Session

    session = Session.load(str(path))
    root = session.root_frame()
    if root is None:
        return {"total_s": 0.0, "idle": 0.0, "self": [], "pressloop": []}
    own: dict[str, float] = defaultdict(float)
    inside: dict[str, float] = defaultdict(float)
    total = 0.0
    idle = 0.0

    def walk(frame: Any, innermost: str) -> None:
        nonlocal total, idle
        if frame.is_synthetic:  # "[self]" and the like: already in the parent's self time
            return
        if frame.function in IMPORTS:  # start-up and lazy imports are not the workload
            return
        name = _where(frame)
        if name.startswith("pressloop/") and not name.startswith("pressloop/cli"):
            innermost = name
        self_time = frame.total_self_time
        if self_time:
            total += self_time
            own[name] += self_time
            if _idle(name):
                idle += self_time
            elif innermost:
                inside[innermost] += self_time
        for child in frame.children:
            walk(child, innermost)

    walk(root, "")
    busy = [(n, t) for n, t in own.items() if not _idle(n)]
    return {
        "total_s": total,
        "idle": idle / total if total else 0.0,
        "self": [(n, t / total) for n, t in sorted(busy, key=lambda x: -x[1])[:top]],
        "pressloop": [(n, t / total) for n, t in sorted(inside.items(), key=lambda x: -x[1])][:top],
    }


def markdown(title: str, found: dict[str, Any]) -> str:
    lines = [
        f"**{title}**: {found['total_s']:.1f} s sampled, {found['idle'] * 100:.0f}% idle "
        "(waiting in the event loop; on uvloop, its C loop's own time too).",
        "",
        "| by self time | share | by innermost Pressloop function (its library calls included) "
        "| share |",
        "|---|---|---|---|",
    ]
    rows = max(len(found["self"]), len(found["pressloop"]))
    for i in range(rows):
        a = found["self"][i] if i < len(found["self"]) else ("", 0.0)
        b = found["pressloop"][i] if i < len(found["pressloop"]) else ("", 0.0)
        cells = [f"`{a[0]}`" if a[0] else "", f"{a[1] * 100:.1f}%" if a[0] else ""]
        cells += [f"`{b[0]}`" if b[0] else "", f"{b[1] * 100:.1f}%" if b[0] else ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
