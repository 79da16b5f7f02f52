"""Progress of the long steps (download, assembly, hash check, reading the system prompt once),
shown however the caller likes.

The steps only call `start`, `advance` and `finish`; `make run` shows a bar in a terminal and
a line every few percent in a log, tests pass `Silent`. A step counts bytes, or `unit` (tokens).
"""

from __future__ import annotations

import time
from typing import IO, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

BYTES = "bytes"


class Reporter(Protocol):
    def start(self, label: str, total: int | None, unit: str = BYTES) -> None: ...

    def advance(self, amount: int) -> None: ...

    def finish(self) -> None: ...


class Silent:
    def start(self, label: str, total: int | None, unit: str = BYTES) -> None:
        return None

    def advance(self, amount: int) -> None:
        return None

    def finish(self) -> None:
        return None


class Lines:
    """One line per step and one every `every` percent: readable in a log file or CI output."""

    def __init__(self, stream: IO[str], *, every: int = 10) -> None:
        self._stream = stream
        self._every = every
        self._label = ""
        self._total: int | None = None
        self._done = 0
        self._shown = 0
        self._started = 0.0

    def start(self, label: str, total: int | None, unit: str = BYTES) -> None:
        self._label, self._total, self._done, self._shown = label, total, 0, 0
        self._started = time.monotonic()
        size = ""
        if total:
            size = f" ({total / 1e6:,.1f} MB)" if unit == BYTES else f" ({total:,} {unit})"
        print(f"{label}{size} ...", file=self._stream, flush=True)

    def advance(self, amount: int) -> None:
        self._done += amount
        if not self._total:
            return
        percent = self._done * 100 // self._total
        if percent >= self._shown + self._every and percent < 100:
            self._shown = percent - percent % self._every
            print(f"  {self._label}: {self._shown}%", file=self._stream, flush=True)

    def finish(self) -> None:
        elapsed = time.monotonic() - self._started
        print(f"  {self._label}: done in {elapsed:.1f} s", file=self._stream, flush=True)


class Bar:
    """A rich progress bar per step, for a terminal."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._progress: Progress | None = None

    def start(self, label: str, total: int | None, unit: str = BYTES) -> None:
        self.finish()
        counts = (
            (DownloadColumn(), TransferSpeedColumn())
            if unit == BYTES
            else (MofNCompleteColumn(), TextColumn(unit))
        )
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            *counts,
            TimeRemainingColumn(),
            console=self._console,
        )
        self._progress.start()
        self._progress.add_task(label, total=total)

    def advance(self, amount: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._progress.task_ids[0], amount)

    def finish(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def for_console(console: Console) -> Reporter:
    return Bar(console) if console.is_terminal else Lines(console.file)
