"""Readers of a run's events for the provisional delta tests: the group commit held, a reader
task collecting what `follow` yields (and what the turn's task sends itself), a run's session
saying text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from pressloop.contracts import Event, EventType
from pressloop.runtime.service import Service
from pressloop.runtime.session import RunSession
from tests.runtime.sessions import claimed, session_of

WAIT_S = 5.0


class HeldCommits:
    """Holds the service's group committer before its next transaction until `release()`."""

    def __init__(self, service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
        committer = service.runner.committer
        self.original: Callable[..., Awaitable[Any]] = committer._transaction
        self.released = asyncio.Event()
        self.waiting = asyncio.Event()  # a batch waits behind the hold
        monkeypatch.setattr(committer, "_transaction", self._held)

    async def _held(self, batch: Any) -> Any:
        self.waiting.set()
        await self.released.wait()
        return await self.original(batch)

    def release(self) -> None:
        self.released.set()


def hold_release(service: Service) -> None:
    """Release the hold on `service`'s commits (the patched `_transaction`'s own)."""
    transaction = service.runner.committer._transaction
    held = getattr(transaction, "__self__", None)
    assert isinstance(held, HeldCommits)
    held.release()


class Reader:
    """`service.follow(...)` in a task, collecting what it yields. With `send_now`, what the
    publisher's task sends through it is collected too (`direct`: those events' positions)."""

    def __init__(
        self,
        service: Service,
        run_id: str,
        send_now: Callable[[Event], bool] | None = None,
        **start: int,
    ) -> None:
        self.events: list[Event] = []
        self.direct: list[int] = []  # indexes in `events` of what the publisher sent
        self._new = asyncio.Event()
        self._send_now = send_now
        follow = service.follow(run_id, send_now=self._sent_now if send_now else None, **start)
        self.task = asyncio.create_task(self._read(follow))

    def _sent_now(self, event: Event) -> bool:
        assert self._send_now is not None
        if not self._send_now(event):
            return False
        self.direct.append(len(self.events))
        self.events.append(event)
        self._new.set()
        return True

    async def _read(self, events: AsyncIterator[Event]) -> None:
        async for event in events:
            self.events.append(event)
            self._new.set()

    async def until(self, check: Callable[[list[Event]], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not check(self.events):
                self._new.clear()
                await self._new.wait()

    async def finished(self) -> list[Event]:
        async with asyncio.timeout(WAIT_S):
            await self.task
        return self.events


def text_of(events: list[Event]) -> str:
    return "".join(e.data.get("delta", "") for e in events)


def non_deltas(events: list[Event]) -> list[tuple[int, EventType]]:
    return [(e.seq, e.type) for e in events if "delta" not in e.data]


async def started(service: Service) -> RunSession:
    session = session_of(service, (await claimed(service, 1))[0])
    await session.emit(EventType.RUN_STARTED, {"attempt": 1})
    await session.renew()
    return session


async def say(session: RunSession, *pieces: str) -> None:
    for piece in pieces:
        await session.emit(EventType.MESSAGE, {"delta": piece})


async def finish_turn(session: RunSession, text: str) -> None:
    await session.emit(EventType.MESSAGE, {"text": text, "final": True})
    await session.emit(EventType.RUN_FINISHED, {"status": "succeeded"})
    await session.renew()
